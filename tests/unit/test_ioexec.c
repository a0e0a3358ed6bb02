/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the executor's latency of each operation
 * (include/ioexec.h, plugin/member/ioexec.c: "each op records its own
 * errno and latency"), which health judges members by.
 *
 * The members are the test's own backend: each a pipe holding one byte,
 * whose read goes through the calling thread's io_uring (ioexec_sqe), as
 * a local member's does.  A pipe with data is read within the submission
 * itself, so the operations of a request come back together, in one
 * reap of the ring -- what a busy host or a page-cache hit makes of real
 * members.  A member can be told to take time before it queues its entry
 * (what an O_DIRECT bounce copy of a write does) or in its completion,
 * before it reports done (what finishing a short transfer synchronously
 * does), and notes the clock around both, so that a test can bound each
 * operation's start and end from outside.  The time taken is a wait on
 * the clock, the thing measured, not a synchronisation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "ioexec.h"
#include "member.h"
#include "unit_main.h"
#include "util.h"

#define MS 1000000ull

struct pipe_member {
  struct member m;
  int fd[2];
  uint64_t start_work;    /* ns taken before its entry is queued */
  uint64_t complete_work; /* ns taken in its completion */
  /* The clock, noted by the member. */
  uint64_t queued;     /* just before its entry was queued */
  uint64_t completing; /* its completion began */
  uint64_t completed;  /* just before it reported done */
};

static struct pipe_member pm[2];
static char buf[2];
static struct iovec iov[2];

static void
take (uint64_t ns)
{
  uint64_t end = now_ns () + ns;

  while (now_ns () < end) {
    struct timespec ts = { 0, 100000 };
    nanosleep (&ts, NULL);
  }
}

static struct pipe_member *
pipe_member (struct member *m)
{
  return &pm[m->index];
}

static void
pipe_complete (struct ioexec *x, struct member_op *op, int res, void *arg)
{
  struct pipe_member *p = arg;

  p->completing = now_ns ();
  take (p->complete_work);
  p->completed = now_ns ();
  ioexec_done (x, op, res < 0 ? -res : (uint64_t) res == op->length ? 0 : EIO);
}

static void
pipe_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  struct pipe_member *p = pipe_member (m);
  struct io_uring_sqe *sqe;

  take (p->start_work);
  p->queued = now_ns ();
  sqe = ioexec_sqe (x, op, pipe_complete, p);
  if (sqe == NULL) {
    ioexec_done (x, op, ENXIO);
    return;
  }
  io_uring_prep_read (sqe, p->fd[0], op->iov[0].iov_base, op->length, 0);
}

static const struct member_ops pipe_ops = {
  .start_op = pipe_start_op,
};

static int
setup (void **state)
{
  (void) state;
  memset (pm, 0, sizeof pm);
  for (unsigned i = 0; i < 2; ++i) {
    pm[i].m.index = i;
    pm[i].m.path = (char *) (i == 0 ? "pipe0" : "pipe1");
    pm[i].m.ops = &pipe_ops;
    if (pipe (pm[i].fd) == -1 || write (pm[i].fd[1], "x", 1) != 1)
      return -1;
  }
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  for (unsigned i = 0; i < 2; ++i) {
    close (pm[i].fd[0]);
    close (pm[i].fd[1]);
  }
  return 0;
}

/* One read of one byte on each member, in the ring; 0 or -1. */
static int
run_reads (struct member_op ops[2])
{
  if (!ioexec_uring_available ())
    skip ();
  for (unsigned i = 0; i < 2; ++i) {
    iov[i] = (struct iovec){ &buf[i], 1 };
    ops[i] = (struct member_op){
      .m = &pm[i].m, .kind = OP_READ, .length = 1, .iov = &iov[i], .nr_iov = 1
    };
  }
  return ioexec_run (ops, 2, true);
}

/* Two members' reads come back in one reap; the second one's completion
 * takes 2 ms on the executor's thread.  Its latency holds those 2 ms:
 * it ends when it completed, not when the first one of its reap did
 * (issue 34: one clock read per reap made two members' latency sums
 * equal to the nanosecond).
 */
static void
an_ops_latency_ends_at_its_own_completion_not_its_reaps (void **state)
{
  struct member_op ops[2];

  (void) state;
  pm[1].complete_work = 2 * MS;
  assert_int_equal (run_reads (ops), 0);
  assert_int_equal (ops[0].err, 0);
  assert_int_equal (ops[1].err, 0);
  if (ops[1].ns < pm[1].completed - pm[1].completing)
    fail_msg ("member 1's read: latency %" PRIu64 " ns, shorter than its "
              "own completion (%" PRIu64 " ns); member 0's: %" PRIu64 " ns",
              ops[1].ns, pm[1].completed - pm[1].completing, ops[0].ns);
}

/* The first member takes 2 ms before it queues its read (a bounce
 * copy); the second queues at once.  Each read's latency starts no
 * earlier than its entry was queued: neither is charged the first one's
 * 2 ms of preparation, which no member spent.
 */
static void
a_ring_ops_latency_starts_once_its_entry_is_queued (void **state)
{
  struct member_op ops[2];
  uint64_t end;

  (void) state;
  pm[0].start_work = 2 * MS;
  assert_int_equal (run_reads (ops), 0);
  end = now_ns ();
  for (unsigned i = 0; i < 2; ++i)
    if (ops[i].ns > end - pm[i].queued)
      fail_msg ("member %u's read: latency %" PRIu64 " ns, longer than "
                "from its queueing to the request's end (%" PRIu64 " ns)",
                i, ops[i].ns, end - pm[i].queued);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (an_ops_latency_ends_at_its_own_completion_not_its_reaps),
    fixture_test (a_ring_ops_latency_starts_once_its_entry_is_queued),
  };

  return run_unit_tests ("ioexec", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
