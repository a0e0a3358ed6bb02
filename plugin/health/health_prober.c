/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's prober thread.  It checks every member (no data
 * I/O: stat-level, connections alive), records each drop-out once (the
 * volume bumps the generation) and re-probes failed members; a re-probe
 * that proves the member the same is adopted.  These calls may block on
 * a dead device: a prober stuck past io_timeout is abandoned (the member
 * it waits on is failed) and a new one started; it is never waited for.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "health_impl.h"
#include "log.h"

static void *prober_main (void *arg);

int
health_start_prober (struct health *h)
{
  struct prober *pr = calloc (1, sizeof *pr);
  int e;

  if (pr == NULL)
    return -1;
  pr->h = h;
  pr->busy_member = -1;
  e = pthread_create (&pr->thread, NULL, prober_main, pr);
  if (e) {
    free (pr);
    errno = e;
    return -1;
  }
  h->prober = pr;
  return 0;
}

/* A prober stuck on a member for longer than io_timeout: that member
 * is failed; the prober is left to its fate and a new one takes over.
 */
void
health_check_prober (struct health *h, uint64_t now)
{
  struct prober *pr = h->prober;
  unsigned bound =
    h->p.set.io_timeout ? h->p.set.io_timeout : HEALTH_DEFAULT_IO_TIMEOUT;
  int i;
  uint64_t since;

  if (pr == NULL)
    return;
  i = atomic_load (&pr->busy_member);
  since = atomic_load (&pr->busy_since);
  if (i < 0 || since == 0 || now - since < (uint64_t) bound * 1000000000)
    return;
  pr->abandoned = true;
  h->nr_abandoned++;
  pthread_detach (pr->thread);
  h->prober = NULL;
  {
    char reason[REASON_MAX];
    snprintf (reason, sizeof reason,
              "not answering: a %s of the device has waited %" PRIu64 " s",
              atomic_load (&pr->probing) ? "re-probe" : "check",
              (now - since) / 1000000000);
    health_set_state (h, (unsigned) i, MS_FAILED, reason);
  }
  if (health_start_prober (h) == -1)
    stripe_error ("health: cannot start a new prober thread: %m");
}

static void *
prober_main (void *arg)
{
  struct prober *pr = arg;
  struct health *h = pr->h;

  pthread_mutex_lock (&h->lock);
  while (!h->stop && !pr->abandoned) {
    uint64_t now = health_now_ns ();
    for (unsigned i = 0; i < h->n && !h->stop && !pr->abandoned; ++i) {
      struct member_health *m = &h->m[i];
      bool failed = atomic_load (&m->state) == MS_FAILED;
      char why[REASON_MAX] = "";
      void *fresh = NULL;
      int r;

      if (atomic_load (&m->state) == MS_REMOVED
          || atomic_load (&m->state) == MS_MISSING)
        continue; /* closed or never opened: nothing to check */

      if (failed && !m->dropped_done && h->ops.dropped) {
        /* Once per failure, before any re-probe. */
        m->dropped_done = true;
        atomic_store (&pr->probing, true);
        atomic_store (&pr->busy_since, health_now_ns ());
        atomic_store (&pr->busy_member, (int) i);
        pthread_mutex_unlock (&h->lock);
        h->ops.dropped (h->ops.opaque, i);
        pthread_mutex_lock (&h->lock);
        atomic_store (&pr->busy_member, -1);
        atomic_store (&pr->busy_since, 0);
        if (pr->abandoned || h->stop)
          break;
        now = health_now_ns ();
      }
      if (failed && now < m->next_probe)
        continue;
      if (failed)
        m->next_probe = now + (uint64_t) h->p.set.probe_interval * 1000000000;
      if ((failed && !h->ops.probe) || (!failed && !h->ops.check))
        continue;
      atomic_store (&pr->probing, failed);
      atomic_store (&pr->busy_since, health_now_ns ());
      atomic_store (&pr->busy_member, (int) i);
      pthread_mutex_unlock (&h->lock);
      if (failed)
        r = h->ops.probe (h->ops.opaque, i, &fresh, why, sizeof why);
      else
        r = h->ops.check (h->ops.opaque, i, why, sizeof why);
      pthread_mutex_lock (&h->lock);
      atomic_store (&pr->busy_member, -1);
      atomic_store (&pr->busy_since, 0);
      if (pr->abandoned || h->stop) {
        if (fresh)
          h->ops.discard (h->ops.opaque, i, fresh);
        break;
      }
      if (failed && r == 0) {
        h->ops.adopt (h->ops.opaque, i, fresh);
        atomic_store (&m->consecutive, 0);
        atomic_store (&m->last_error_mono, 0);
        health_settle (h, i, "answered the re-probe");
      }
      else if (failed) {
        /* Still failed: the status says what the re-probe found. */
        char reason[REASON_MAX];
        stripe_debug ("health: member %u (%s): re-probe: %s", i, m->path, why);
        snprintf (reason, sizeof reason, "%.120s; re-probe: %.120s", m->cause,
                  why);
        health_set_state (h, i, MS_FAILED, reason);
      }
      else if (r == -1 && atomic_load (&m->state) != MS_FAILED)
        health_set_state (h, i, MS_FAILED, why);
    }
    if (h->stop || pr->abandoned)
      break;
    /* The health thread wakes us every tick. */
    pthread_cond_wait (&h->probe_cond, &h->lock);
  }
  if (pr->abandoned) {
    h->nr_abandoned--;
    pthread_mutex_unlock (&h->lock);
    free (pr);
    return NULL;
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}
