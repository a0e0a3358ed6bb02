/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: moving data while the volume is served, what every job
 * shares: its state, the test gate, the job slot, the status.  See
 * include/mover.h; the copy and the clients' windows are in
 * mover_copy.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ioexec.h"
#include "json.h"
#include "log.h"
#include "member.h"
#include "mover.h"
#include "util.h"
#include "volume.h"
#include "mover_impl.h"


int mover_debug_hold_ms;
int mover_debug_crash;
int mover_debug_gate;

static const char *const state_names[] = { "copying", "switching", "done",
                                           "failed", "cancelled" };

const char *
mover_state_name (enum mover_state s)
{
  return state_names[s];
}

static struct mover *
mover_of_vm (struct volume_mover *vm)
{
  return (struct mover *) vm;
}

bool
mover_final (enum mover_state s)
{
  return s == MOVER_DONE || s == MOVER_FAILED || s == MOVER_CANCELLED;
}

static void
vfail_locked (struct mover *mv, const char *fmt, va_list ap)
{
  if (mover_final (mv->state))
    return;
  vsnprintf (mv->error, sizeof mv->error, fmt, ap);
  mv->state = MOVER_FAILED;
  pthread_cond_broadcast (&mv->cond);
}

void
mover_fail_locked (struct mover *mv, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vfail_locked (mv, fmt, ap);
  va_end (ap);
}

void
mover_fail (struct mover *mv, const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&mv->lock);
  va_start (ap, fmt);
  vfail_locked (mv, fmt, ap);
  va_end (ap);
  pthread_mutex_unlock (&mv->lock);
}

bool
mover_stopped_locked (struct mover *mv)
{
  if (mv->cancel && mv->state == MOVER_COPYING) {
    mv->state = MOVER_CANCELLED;
    snprintf (mv->error, sizeof mv->error, "cancelled");
    pthread_cond_broadcast (&mv->cond);
  }
  return mv->state != MOVER_COPYING;
}

enum mover_state
mover_state (struct mover *mv)
{
  enum mover_state s;

  pthread_mutex_lock (&mv->lock);
  s = mv->state;
  pthread_mutex_unlock (&mv->lock);
  return s;
}

bool
mover_switching (struct mover *mv)
{
  bool stop;

  pthread_mutex_lock (&mv->lock);
  stop = mover_stopped_locked (mv);
  if (!stop)
    mv->state = MOVER_SWITCHING;
  pthread_mutex_unlock (&mv->lock);
  return !stop;
}

void
mover_done (struct mover *mv)
{
  pthread_mutex_lock (&mv->lock);
  mv->state = MOVER_DONE;
  mv->t_end = now_ns ();
  pthread_cond_broadcast (&mv->cond);
  pthread_mutex_unlock (&mv->lock);
}

/* The test gate: with -D stripe.replace_gate=1 the copier stops at each
 * phase boundary, shows it in the status ("phase"), and goes on once
 * mover_debug_release (the control socket's "step") lets it.  A cancel
 * lets it go too.
 */
void
mover_phase (struct mover *mv, const char *name)
{
  if (!mover_debug_gate)
    return;
  pthread_mutex_lock (&mv->lock);
  mv->phase = name;
  mv->phase_seq++;
  pthread_cond_broadcast (&mv->cond);
  while (mv->released_seq < mv->phase_seq && !mv->cancel)
    pthread_cond_wait (&mv->cond, &mv->lock);
  pthread_mutex_unlock (&mv->lock);
}

int
mover_io (struct mover *mv, struct member *m, enum op_kind kind, void *buf,
          uint64_t len, uint64_t off)
{
  struct iovec iov = { buf, len };
  struct member_op op = {
    .m = m,
    .kind = kind,
    .offset = off,
    .length = kind == OP_FLUSH ? 0 : len,
    .iov = kind == OP_FLUSH ? NULL : &iov,
    .nr_iov = kind == OP_FLUSH ? 0 : 1,
    .shadow = true,
  };
  int e = ioexec_run (&op, 1, mv->v->uring);

  if (e == -1)
    errno = op.err ? op.err : errno;
  return e;
}

/* ---- the job slot ---- */

static int
vm_run_ops (struct volume_mover *vm, struct volume *v, struct member_op *ops,
            unsigned nr, volume_run_fn plain)
{
  return mover_of_vm (vm)->job->run_ops (mover_of_vm (vm), v, ops, nr, plain);
}

static bool
vm_ended (struct volume_mover *vm)
{
  struct mover *mv = mover_of_vm (vm);
  bool ended;

  pthread_mutex_lock (&mv->lock);
  ended = mover_final (mv->state);
  pthread_mutex_unlock (&mv->lock);
  return ended;
}

static struct json_object *
status_json (struct mover *mv)
{
  struct json_object *o = json_object_new_object (), *lost;
  uint64_t now = now_ns (), copied, total, elapsed;
  double rate;

  pthread_mutex_lock (&mv->lock);
  copied = mv->watermark - mv->start;
  total = mv->end - mv->start;
  elapsed = (mv->t_end ? mv->t_end : now) - mv->t_start;
  rate = elapsed ? copied / (elapsed / 1e9) : 0;
  json_put (o, "state", json_text (state_names[mv->state]));
  json_put (o, "bytes_copied", json_u64 (copied));
  json_put (o, "bytes_total", json_u64 (total));
  /* Of bytes_copied, free in the allocation map: zeroed, not copied. */
  json_put (o, "bytes_free", json_u64 (mv->skipped));
  json_put (o, "rate", json_object_new_double (rate));
  if (mv->state == MOVER_COPYING && rate > 0)
    json_put (o, "eta_seconds",
              json_object_new_double ((total - copied) / rate));
  json_put (o, "elapsed_seconds", json_object_new_double (elapsed / 1e9));
  json_put (o, "longest_client_wait_seconds",
            json_object_new_double (mv->max_wait_ns / 1e9));
  if (mv->hold_ns)
    json_put (o, "switch_hold_seconds",
              json_object_new_double (mv->hold_ns / 1e9));
  if (mover_debug_gate) {
    json_put (o, "phase", mv->phase ? json_text (mv->phase) : NULL);
    /* A cancel lets a held copier go (mover_phase) without a step. */
    json_put (o, "phase_held",
              json_object_new_boolean (!mv->cancel
                                       && mv->released_seq < mv->phase_seq));
    json_put (o, "phase_seq", json_object_new_int64 (mv->phase_seq));
    /* Client requests held by a window or at the switch, for tests that
     * must know every request they sent has got as far as it can.
     */
    json_put (o, "clients_held",
              json_object_new_int64 (mv->nr_waiting
                                     + volume_clients_held (mv->v)));
  }
  if (mv->error[0])
    json_put (o, "error", json_text (mv->error));
  /* After the shared fields: the job may say them its own way. */
  mv->job->status (mv, o);
  lost = json_object_new_array ();
  for (unsigned i = 0; i < mv->lost.nr; ++i) {
    struct json_object *l = json_object_new_object ();
    json_put (l, "offset", json_u64 (mv->lost.r[i].offset));
    json_put (l, "length", json_u64 (mv->lost.r[i].length));
    json_object_array_add (lost, l);
  }
  json_put (o, "unreadable", lost);
  json_put (o, "unreadable_bytes", json_u64 (lost_bytes (&mv->lost)));
  pthread_mutex_unlock (&mv->lock);
  return o;
}

static void
vm_status (struct volume_mover *vm, struct json_object *root)
{
  json_put (root, mover_of_vm (vm)->job->status_key,
            status_json (mover_of_vm (vm)));
}

static void
vm_stop (struct volume_mover *vm)
{
  struct mover *mv = mover_of_vm (vm);

  pthread_mutex_lock (&mv->lock);
  mv->cancel = true;
  pthread_cond_broadcast (&mv->cond);
  pthread_mutex_unlock (&mv->lock);
  if (mv->thread_started) {
    pthread_join (mv->thread, NULL);
    mv->thread_started = false;
  }
}

static void
vm_free (struct volume_mover *vm)
{
  struct mover *mv = mover_of_vm (vm);

  pthread_mutex_destroy (&mv->lock);
  pthread_cond_destroy (&mv->cond);
  mv->job->free (mv);
}

/* How far it is, as a refusal says it: the job's words, or the share
 * copied.
 */
static bool
vm_describe (struct volume_mover *vm, char *detail, size_t len)
{
  struct mover *mv = mover_of_vm (vm);
  uint64_t done, total;

  if (mv->job->describe)
    return mv->job->describe (mv, detail, len);
  pthread_mutex_lock (&mv->lock);
  done = mv->watermark - mv->start;
  total = mv->end - mv->start;
  pthread_mutex_unlock (&mv->lock);
  snprintf (detail, len, "%" PRIu64 "%% done",
            total ? done * 100 / total : 100);
  return false;
}

void
mover_init (struct mover *mv)
{
  mv->vm.run_ops = vm_run_ops;
  mv->vm.request = mv->job->request;
  mv->vm.ended = vm_ended;
  mv->vm.status = vm_status;
  mv->vm.stop = vm_stop;
  mv->vm.free = vm_free;
  mv->vm.describe = vm_describe;
  mv->vm.locate = mv->job->locate;
  pthread_mutex_init (&mv->lock, NULL);
  pthread_cond_init (&mv->cond, NULL);
  mv->watermark = mv->start;
  mv->state = MOVER_COPYING;
}

int
mover_reserve (struct volume *v, enum job_kind kind, char *why, size_t len)
{
  return volume_mover_reserve (v, kind, why, len);
}

void
mover_unreserve (struct volume *v)
{
  volume_mover_unreserve (v);
}

int
mover_start (struct mover *mv, char *why, size_t len)
{
  int e;

  mv->t_start = now_ns ();
  /* Published: requests from now on see it; those before are waited for
   * by the copier before it reads anything.
   */
  volume_mover_publish (mv->v, &mv->vm);
  e = pthread_create (&mv->thread, NULL, mover_copier, mv);
  if (e != 0) {
    mover_fail (mv, "cannot start the copier: %s", strerror (e));
    mv->start_failed = true;
    volume_mover_withdraw (mv->v);
    mv->job->ended (mv);
    snprintf (why, len, "cannot start the copier: %s", strerror (e));
    return -1;
  }
  mv->thread_started = true;
  return 0;
}

struct mover *
mover_last (struct volume *v)
{
  return mover_of_vm (volume_mover_last (v));
}

int
mover_cancel (struct volume *v, char *why, size_t len)
{
  struct mover *mv = mover_of_vm (atomic_load (&v->mover));

  if (mv == NULL) {
    snprintf (why, len, "no replace is running");
    return -1;
  }
  /* A grow or shrink has a cancel of its own (reshape.h). */
  if (strcmp (mv->job->status_key, "replace") != 0) {
    snprintf (why, len, "no replace is running");
    return -1;
  }
  pthread_mutex_lock (&mv->lock);
  if (mv->state != MOVER_COPYING) {
    snprintf (why, len, "too late: the replace is %s",
              state_names[mv->state]);
    pthread_mutex_unlock (&mv->lock);
    return -1;
  }
  mv->cancel = true;
  pthread_cond_broadcast (&mv->cond);
  pthread_mutex_unlock (&mv->lock);
  return 0;
}

int
mover_wait (struct volume *v)
{
  struct mover *mv = mover_last (v);
  enum mover_state s;

  if (mv == NULL || !mv->thread_started)
    return -1;
  pthread_join (mv->thread, NULL);
  mv->thread_started = false;
  pthread_mutex_lock (&mv->lock);
  s = mv->state;
  pthread_mutex_unlock (&mv->lock);
  return s == MOVER_DONE ? 0 : -1;
}

struct json_object *
mover_status (struct volume *v)
{
  struct mover *mv = mover_last (v);

  return mv ? status_json (mv) : NULL;
}

int
mover_debug_release (struct volume *v, const char *at, char *why, size_t len)
{
  struct mover *mv = mover_last (v);
  int ret = -1;

  if (!mover_debug_gate || mv == NULL) {
    snprintf (why, len, "no replace held at a phase (-D stripe.replace_gate)");
    return -1;
  }
  pthread_mutex_lock (&mv->lock);
  if (mv->released_seq >= mv->phase_seq)
    snprintf (why, len, "the copier is not held (phase %s, %u)",
              mv->phase ? mv->phase : "none", mv->phase_seq);
  else if (at && (mv->phase == NULL || strcmp (at, mv->phase) != 0))
    snprintf (why, len, "the copier is held at %s, not %s",
              mv->phase ? mv->phase : "none", at);
  else {
    mv->released_seq = mv->phase_seq;
    pthread_cond_broadcast (&mv->cond);
    ret = 0;
  }
  pthread_mutex_unlock (&mv->lock);
  return ret;
}

void
mover_stop (struct volume *v)
{
  volume_mover_stop (v);
}
