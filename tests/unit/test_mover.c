/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the mover's window logic (include/mover.h,
 * plugin/array/mover*.c) -- what a replace and a restripe share -- on
 * members in memory (tests/lib/member_mem.h), with a job of the test's
 * own: it copies member "src" to member "dst", and its client hook
 * registers each request with the mover as a real job does.
 *
 * Every interleaving is made, not hoped for: the copier is held at each
 * phase (mover_debug_gate) and let go by the test; a client request can
 * be held inside the job's hook, after it registered, until the test lets
 * it go; waits are checked by state (the mover's nr_waiting, the phase
 * the copier is held at), never by time.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ioexec.h"
#include "json.h"
#include "member.h"
#include "member_mem.h"
#include "mover.h"
#include "unit_main.h"
#include "volume.h"

#define MIB (1024 * 1024)
#define SIZE (3 * MOVER_WINDOW)

struct tjob {
  struct mover mv; /* first */
  struct member src, dst;
  bool exclusive; /* windows exclusive (a restripe's critical section) */
  /* A client request held in the hook, registered, until released. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool hold, holding;
};

static struct volume vol;
static struct tjob job;

static struct tjob *
of (struct mover *mv)
{
  return (struct tjob *) mv;
}

static unsigned
ops_on (struct member *m, enum op_kind kind, uint8_t *buf, uint64_t pos,
        uint64_t len, struct member_op *ops, struct iovec *iov)
{
  iov[0] = (struct iovec){ buf, len };
  ops[0] = (struct member_op){ .m = m, .kind = kind, .offset = pos,
                               .length = len, .iov = iov, .nr_iov = 1,
                               .shadow = true };
  return 1;
}

static unsigned
t_read_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
            struct member_op *ops, struct iovec *iov)
{
  return ops_on (&of (mv)->src, OP_READ, buf, pos, len, ops, iov);
}

static unsigned
t_write_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
             struct member_op *ops, struct iovec *iov)
{
  return ops_on (&of (mv)->dst, OP_WRITE, buf, pos, len, ops, iov);
}

static uint64_t
t_window_size (struct mover *mv, uint64_t pos, bool *exclusive)
{
  (void) pos;
  *exclusive = of (mv)->exclusive;
  return MOVER_WINDOW;
}

static bool
t_logical (struct mover *mv, uint64_t pos, uint64_t *logical)
{
  (void) mv;
  *logical = pos;
  return true;
}

static void
t_write_failed (struct mover *mv, const struct member_op *op)
{
  mover_fail_locked (mv, "write at %" PRIu64 " failed", op->offset);
}

static const char *
t_unreadable (struct mover *mv, char *why, size_t len)
{
  (void) mv;
  snprintf (why, len, "unreadable");
  return why;
}

static void
t_finish (struct mover *mv)
{
  if (mover_switching (mv))
    mover_done (mv);
}

static void
t_ended (struct mover *mv)
{
  (void) mv;
}

static void
t_status (struct mover *mv, struct json_object *o)
{
  (void) mv;
  (void) o;
}

static void
t_free (struct mover *mv)
{
  (void) mv;
}

/* The job's client hook: a request on src is registered for its range
 * (and held there when the test asks), then run; writes below the
 * watermark reach dst too.
 */
static int
t_run_ops (struct mover *mv, struct volume *v, struct member_op *ops,
           unsigned nr, volume_run_fn plain)
{
  struct tjob *t = of (mv);
  struct mover_flight fl;
  struct mover_at at;
  bool write = ops[0].kind != OP_READ;
  int r;

  (void) v;
  (void) nr;
  (void) plain;
  at = mover_enter (mv, &fl, ops[0].offset, ops[0].offset + ops[0].length,
                    write);
  pthread_mutex_lock (&t->lock);
  if (t->hold) {
    t->holding = true;
    pthread_cond_broadcast (&t->cond);
    while (t->hold)
      pthread_cond_wait (&t->cond, &t->lock);
    t->holding = false;
  }
  pthread_mutex_unlock (&t->lock);
  r = ioexec_run (ops, 1, false);
  if (r == 0 && write && at.state == MOVER_COPYING && fl.a < at.watermark) {
    struct member_op d = ops[0];
    d.m = &t->dst;
    r = ioexec_run (&d, 1, false);
  }
  mover_leave (mv, &fl);
  return r;
}

static const struct mover_job tjob_ops = {
  .status_key = "test",
  .run_ops = t_run_ops,
  .read_ops = t_read_ops,
  .write_ops = t_write_ops,
  .window_size = t_window_size,
  .logical = t_logical,
  .write_failed = t_write_failed,
  .unreadable = t_unreadable,
  .finish = t_finish,
  .ended = t_ended,
  .status = t_status,
  .free = t_free,
};

/* A client request (on src, through the job's hook) on a thread. */
struct client {
  pthread_t thread;
  enum op_kind kind;
  uint64_t offset, length;
  uint8_t *buf;
  _Atomic bool done;
  int r;
};

static void *
client_main (void *arg)
{
  struct client *c = arg;
  struct iovec iov = { c->buf, c->length };
  struct member_op op = { .m = &job.src, .kind = c->kind,
                          .offset = c->offset, .length = c->length,
                          .iov = &iov, .nr_iov = 1 };

  c->r = vol.mover->run_ops (vol.mover, &vol, &op, 1, NULL);
  atomic_store (&c->done, true);
  return NULL;
}

static void
client_start (struct client *c, enum op_kind kind, uint64_t off, uint64_t len,
              uint8_t fill)
{
  memset (c, 0, sizeof *c);
  c->kind = kind;
  c->offset = off;
  c->length = len;
  c->buf = malloc (len);
  assert_non_null (c->buf);
  memset (c->buf, fill, len);
  assert_int_equal (pthread_create (&c->thread, NULL, client_main, c), 0);
}

static void
client_join (struct client *c)
{
  pthread_join (c->thread, NULL);
  assert_int_equal (c->r, 0);
  free (c->buf);
}

static void
pause_ms (unsigned ms)
{
  struct timespec ts = { 0, ms * 1000000L };
  nanosleep (&ts, NULL);
}

/* Until the copier is held at phase (the nth time it reaches it). */
static void
held_at (const char *phase, unsigned nth)
{
  for (unsigned k = 0; k < 20000; ++k) {
    pthread_mutex_lock (&job.mv.lock);
    bool ok = job.mv.released_seq < job.mv.phase_seq && job.mv.phase
              && strcmp (job.mv.phase, phase) == 0;
    unsigned seq = job.mv.phase_seq;
    pthread_mutex_unlock (&job.mv.lock);
    if (ok && seq >= nth)
      return;
    pause_ms (1);
  }
  fail_msg ("the copier never got held at %s", phase);
}

static void
step (void)
{
  char why[256];
  assert_int_equal (mover_debug_release (&vol, NULL, why, sizeof why), 0);
}

/* Until n client requests wait for a window. */
static void
waiting (unsigned n)
{
  for (unsigned k = 0; k < 20000; ++k) {
    pthread_mutex_lock (&job.mv.lock);
    unsigned w = job.mv.nr_waiting;
    pthread_mutex_unlock (&job.mv.lock);
    if (w == n)
      return;
    pause_ms (1);
  }
  fail_msg ("not %u requests waiting for a window", n);
}

/* Until a client request is held inside the hook (registered). */
static void
holding (void)
{
  pthread_mutex_lock (&job.lock);
  while (!job.holding)
    pthread_cond_wait (&job.cond, &job.lock);
  pthread_mutex_unlock (&job.lock);
}

static void
let_go (void)
{
  pthread_mutex_lock (&job.lock);
  job.hold = false;
  pthread_cond_broadcast (&job.cond);
  pthread_mutex_unlock (&job.lock);
}

static int
setup (void **state)
{
  const struct member_open_params p = { 0 };
  char why[256];

  (void) state;
  mem_register ();
  mem_create ("src", SIZE);
  mem_create ("dst", SIZE);
  mem_fill ("src", 0, SIZE, 0x11);
  memset (&vol, 0, sizeof vol);
  pthread_mutex_init (&vol.mover_lock, NULL);
  pthread_mutex_init (&vol.gate.lock, NULL);
  pthread_cond_init (&vol.gate.cond, NULL);
  pthread_mutex_init (&vol.gate.drain_lock, NULL);
  memset (&job, 0, sizeof job);
  pthread_mutex_init (&job.lock, NULL);
  pthread_cond_init (&job.cond, NULL);
  assert_int_equal (member_open (&job.src, 0, MEM_PREFIX "src", &p, why,
                                 sizeof why), 0);
  assert_int_equal (member_open (&job.dst, 1, MEM_PREFIX "dst", &p, why,
                                 sizeof why), 0);
  job.mv.job = &tjob_ops;
  job.mv.v = &vol;
  job.mv.start = 0;
  job.mv.end = SIZE;
  mover_debug_gate = 1;
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  let_go ();
  mover_debug_gate = 0;
  if (job.mv.thread_started) {
    pthread_mutex_lock (&job.mv.lock);
    job.mv.cancel = true;
    pthread_cond_broadcast (&job.mv.cond);
    pthread_mutex_unlock (&job.mv.lock);
    pthread_join (job.mv.thread, NULL);
  }
  member_close (&job.src);
  member_close (&job.dst);
  mem_destroy_all ();
  return 0;
}

static void
start (void)
{
  char why[256];

  mover_init (&job.mv);
  assert_int_equal (volume_mover_reserve (&vol, JOB_REPLACE, why, sizeof why),
                    0);
  assert_int_equal (mover_start (&job.mv, why, sizeof why), 0);
  held_at ("published", 1);
  step ();
  held_at ("drained", 2);
  step ();
  held_at ("locked", 3); /* window [0, WINDOW) taken */
}

static void
a_write_over_a_locked_window_waits_until_it_is_written (void **state)
{
  struct client c;
  uint8_t b[4096];

  (void) state;
  start ();
  client_start (&c, OP_WRITE, 4096, 4096, 0xaa);
  waiting (1);
  assert_false (atomic_load (&c.done));
  /* The pipeline reads the next window ahead, then writes this one. */
  step ();
  held_at ("locked", 4);
  step ();
  held_at ("advanced", 5);
  client_join (&c);
  waiting (0);
  /* Below the watermark: on both, the copier's older bytes under it. */
  mem_read ("src", 4096, b, sizeof b);
  assert_int_equal (b[0], 0xaa);
  mem_read ("dst", 4096, b, sizeof b);
  assert_int_equal (b[0], 0xaa);
}

static void
a_write_in_flight_before_a_window_keeps_it_from_being_locked (void **state)
{
  char why[256];
  struct client c;
  uint8_t b[4096];

  (void) state;
  mover_init (&job.mv);
  assert_int_equal (volume_mover_reserve (&vol, JOB_REPLACE, why, sizeof why),
                    0);
  assert_int_equal (mover_start (&job.mv, why, sizeof why), 0);
  held_at ("published", 1);
  step ();
  held_at ("drained", 2);
  /* In flight over the first window before it is announced. */
  job.hold = true;
  client_start (&c, OP_WRITE, 8192, 4096, 0xbb);
  holding ();
  step ();
  /* The copier announced the window and waits for the write. */
  for (unsigned k = 0; k < 200; ++k) {
    pthread_mutex_lock (&job.mv.lock);
    bool announced = job.mv.win[0].used || job.mv.win[1].used;
    unsigned seq = job.mv.phase_seq;
    pthread_mutex_unlock (&job.mv.lock);
    assert_int_equal (seq, 2);
    if (announced)
      break;
    pause_ms (1);
  }
  pause_ms (50); /* still not locked: the phase does not move */
  pthread_mutex_lock (&job.mv.lock);
  assert_int_equal (job.mv.phase_seq, 2);
  pthread_mutex_unlock (&job.mv.lock);
  let_go ();
  client_join (&c);
  held_at ("locked", 3);
  /* The copy read src after the write: dst gets the client's bytes. */
  step ();
  held_at ("locked", 4);
  step ();
  held_at ("advanced", 5);
  mem_read ("dst", 8192, b, sizeof b);
  assert_int_equal (b[0], 0xbb);
}

static void
reads_wait_only_for_an_exclusive_window (void **state)
{
  struct client c;

  (void) state;
  start ();
  client_start (&c, OP_READ, 4096, 4096, 0);
  client_join (&c); /* not held: an ordinary window */
  job.exclusive = true;
  step ();          /* read ahead: window 2, exclusive */
  held_at ("locked", 4);
  client_start (&c, OP_READ, MOVER_WINDOW + 4096, 4096, 0);
  waiting (1);
  assert_false (atomic_load (&c.done));
  step ();
  held_at ("advanced", 5);
  step ();
  held_at ("locked", 6);
  assert_false (atomic_load (&c.done)); /* window 2 not written yet */
  step ();
  held_at ("advanced", 7);
  client_join (&c);
}

/* A flight that went on above the recorded position may use old places
 * there: recording a position past it waits for it to end.
 */
struct recorder {
  pthread_t thread;
  _Atomic bool done;
};

static void *
record_main (void *arg)
{
  struct recorder *r = arg;
  mover_record (&job.mv, MOVER_WINDOW);
  atomic_store (&r->done, true);
  return NULL;
}

static void
recording_a_position_waits_for_requests_using_old_places_below_it (
  void **state)
{
  struct client c;
  struct recorder rec = { 0 };

  (void) state;
  start ();
  step ();
  held_at ("locked", 4);
  step ();
  held_at ("advanced", 5); /* watermark at WINDOW, recorded 0 */
  job.hold = true;
  client_start (&c, OP_READ, 4096, 4096, 0);
  holding ();
  assert_int_equal (pthread_create (&rec.thread, NULL, record_main, &rec), 0);
  pause_ms (50);
  assert_false (atomic_load (&rec.done));
  let_go ();
  client_join (&c);
  pthread_join (rec.thread, NULL);
  assert_true (atomic_load (&rec.done));
  /* A request that goes on now starts from the recorded position. */
  client_start (&c, OP_READ, 4096, 4096, 0);
  client_join (&c);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (a_write_over_a_locked_window_waits_until_it_is_written),
    fixture_test (
      a_write_in_flight_before_a_window_keeps_it_from_being_locked),
    fixture_test (reads_wait_only_for_an_exclusive_window),
    fixture_test (
      recording_a_position_waits_for_requests_using_old_places_below_it),
  };

  return run_unit_tests ("mover", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
