/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume's gate (drain, quiesce) and the slot of the job
 * moving data (mover.h).  See include/volume.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "volume.h"
#include "volume_impl.h"

/* ---- the gate (struct volume_gate) ----
 *
 * Why it is enough, in C11's terms: every access below is sequentially
 * consistent, so all of them fall into one total order.  A request that
 * read v->mover as NULL did so after it counted itself (fetch_add) and
 * saw the epoch unchanged; a job stores v->mover, then flips the epoch,
 * then reads the old counter.  The request's load of v->mover precedes the
 * store (it saw NULL), so its fetch_add precedes the drainer's read of
 * the counter, which therefore sees it until the request has ended.  A
 * request that saw the new epoch reads v->mover after the flip, which
 * follows the store: it sees the job.
 */

static void
gate_flip_and_wait (struct volume *v, bool close)
{
  struct volume_gate *g = &v->gate;
  unsigned e, old;

  pthread_mutex_lock (&g->lock);
  e = atomic_load (&g->epoch);
  old = e & 1;
  atomic_store (&g->draining, true);
  atomic_store (&g->epoch, (e ^ 1) | (close ? GATE_CLOSED : 0));
  while (atomic_load (&g->count[old]) != 0)
    pthread_cond_wait (&g->cond, &g->lock);
  atomic_store (&g->draining, false);
  pthread_mutex_unlock (&g->lock);
}

void
volume_drain (struct volume *v)
{
  pthread_mutex_lock (&v->gate.drain_lock);
  gate_flip_and_wait (v, false);
  pthread_mutex_unlock (&v->gate.drain_lock);
}

void
volume_quiesce (struct volume *v)
{
  pthread_mutex_lock (&v->gate.drain_lock);
  v->gate.closed_ns = now_ns ();
  gate_flip_and_wait (v, true);
}

unsigned
volume_clients_held (struct volume *v)
{
  return atomic_load (&v->gate.waiters);
}

uint64_t
volume_resume (struct volume *v)
{
  struct volume_gate *g = &v->gate;
  uint64_t held = now_ns () - g->closed_ns;

  pthread_mutex_lock (&g->lock);
  atomic_store (&g->epoch, atomic_load (&g->epoch) & ~GATE_CLOSED);
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
  pthread_mutex_unlock (&g->drain_lock);
  return held;
}

/* ---- the job slot and the switch (mover.h) ---- */

static bool
mover_ended (struct volume *v)
{
  struct volume_mover *vm = atomic_load (&v->mover);

  return vm != NULL && !atomic_load (&vm->stays) && vm->ended (vm);
}

static int reserve (struct volume *v, enum job_kind kind,
                    struct volume_mover *over, char *why, size_t len);

int
volume_mover_reserve (struct volume *v, enum job_kind kind, char *why,
                      size_t len)
{
  return reserve (v, kind, NULL, why, len);
}

int
volume_mover_reserve_over (struct volume *v, struct volume_mover *over,
                           char *why, size_t len)
{
  return reserve (v, over->kind, over, why, len);
}

/* The job slot's job, mover_lock held; skip: the one a job that goes on
 * takes over from.  strict: one that has ended but is still published
 * counts (a reserve: it has not let go of the volume yet).
 */
static void
slot_jobs (struct volume *v, struct volume_mover *skip, bool strict,
           struct jobs_running *r)
{
  struct volume_mover *cur = atomic_load (&v->mover);
  char what[128], detail[256] = "";

  if (v->mover_starting) {
    snprintf (what, sizeof what, "a %s", job_name (v->mover_starting_kind));
    jobs_add (r, v->mover_starting_kind, false, what, "being started");
  }
  else if (cur != NULL && cur != skip
           && (strict || atomic_load (&cur->stays) || !cur->ended (cur))) {
    bool paused = cur->describe && cur->describe (cur, detail, sizeof detail);
    jobs_add (r, cur->kind, paused, cur->what, detail);
  }
}

/* over: a job that stays published though it has ended (a restripe
 * stopped half-way), which the job reserved for takes over from.  The
 * scrub's part of the jobs under way is read before mover_lock is taken
 * (scrub_start takes it inside scrub_lock): no pair across the two is
 * refused (jobs.h), so that look may be a moment old.
 */
static int
reserve (struct volume *v, enum job_kind kind, struct volume_mover *over,
         char *why, size_t len)
{
  struct volume_mover *cur;
  struct jobs_running r = { 0 };

  if (v->other_jobs)
    v->other_jobs (v->other_jobs_opaque, &r);
  pthread_mutex_lock (&v->mover_lock);
  /* A job that has ended is not running: once the status says so (and
   * the command's --wait has returned), a new one is not refused.  Wait
   * (10 s at most) for its copier to let go of the volume.
   */
  for (int i = 0; i < 1000 && mover_ended (v); ++i) {
    struct timespec ts = { 0, 10 * 1000000L };
    pthread_mutex_unlock (&v->mover_lock);
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&v->mover_lock);
  }
  cur = atomic_load (&v->mover);
  if (over && cur == over && !over->ended (over)) {
    snprintf (why, len, "%s is running", over->what);
    errno = EAGAIN;
  }
  else {
    slot_jobs (v, over, true, &r);
    if (job_may_start (kind, &r, why, len) == 0) {
      if (v->readonly) {
        snprintf (why, len, "the volume is served read-only");
        errno = EROFS;
      }
      else {
        v->mover_starting = true;
        v->mover_starting_kind = kind;
        pthread_mutex_unlock (&v->mover_lock);
        return 0;
      }
    }
  }
  /* Busy (EAGAIN: try again later) or never (EROFS): on_failing's
   * replace tells them apart.
   */
  pthread_mutex_unlock (&v->mover_lock);
  return -1;
}

void
volume_mover_jobs (struct volume *v, struct jobs_running *r)
{
  pthread_mutex_lock (&v->mover_lock);
  slot_jobs (v, NULL, false, r);
  pthread_mutex_unlock (&v->mover_lock);
}

void
volume_jobs (struct volume *v, struct jobs_running *r)
{
  r->nr = 0;
  if (v->other_jobs)
    v->other_jobs (v->other_jobs_opaque, r);
  volume_mover_jobs (v, r);
}

int
volume_job_may_start (struct volume *v, enum job_kind kind, char *why,
                      size_t len)
{
  struct jobs_running r;

  volume_jobs (v, &r);
  return job_may_start (kind, &r, why, len);
}

void
volume_mover_unreserve (struct volume *v)
{
  pthread_mutex_lock (&v->mover_lock);
  v->mover_starting = false;
  pthread_mutex_unlock (&v->mover_lock);
}

void
volume_mover_publish (struct volume *v, struct volume_mover *vm)
{
  pthread_mutex_lock (&v->mover_lock);
  v->mover_starting = false;
  vm->next = v->movers;
  v->movers = vm;
  atomic_store (&v->mover, vm);
  pthread_mutex_unlock (&v->mover_lock);
}

void
volume_mover_withdraw (struct volume *v)
{
  atomic_store (&v->mover, NULL);
  volume_drain (v);
}

struct volume_mover *
volume_mover_last (struct volume *v)
{
  struct volume_mover *vm;

  pthread_mutex_lock (&v->mover_lock);
  vm = v->movers;
  pthread_mutex_unlock (&v->mover_lock);
  return vm;
}

void
volume_mover_stop (struct volume *v)
{
  pthread_mutex_lock (&v->mover_lock);
  struct volume_mover *vm = v->movers;
  pthread_mutex_unlock (&v->mover_lock);
  for (; vm; vm = vm->next)
    vm->stop (vm);
}

