/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health: the tracker made, started and freed;
 * the names of states and events, and the queue of events.  See
 * include/health.h for the rules, health_impl.h for how the files share
 * the work.
 *
 * Threads: the I/O path records (health_record.c) and only touches
 * atomics but for an error.  The health thread (health_tick.c) ticks
 * once a second; the prober thread (health_prober.c) stats every member
 * and re-probes failed ones; the hook thread (health_hook.c) runs the
 * on_change program for each event, in order.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "health_impl.h"
#include "layout.h"
#include "log.h"
#include "util.h"

const char *const health_state_names[] = { "ok",      "slow",   "full",
                                           "failing", "failed", "removed",
                                           "missing" };
const char *const health_event_names[] = { "MemberRecovered", "MemberSlow",
                                           "MemberFull",      "MemberFailing",
                                           "MemberFailed",    "MemberRemoved",
                                           "MemberMissing" };

const char *
health_event_name (const struct event *e)
{
  switch (e->kind) {
  case EV_STATE: return health_event_names[e->state];
  case EV_REPLACING: return "MemberReplacing";
  case EV_REPLACED: return "MemberReplaced";
  case EV_NOT_REPLACED: return "MemberNotReplaced";
  }
  return "?";
}

void
health_event_clear (struct event *e)
{
  free (e->old_path);
  free (e->new_path);
  e->old_path = e->new_path = NULL;
}

void
health_push_event (struct health *h, struct event *e)
{
  if (h->nr_pending < MAX_EVENTS)
    h->pending[h->nr_pending++] = *e;
  else {
    health_event_clear (e);
    h->pending_overflow = true;
  }
  memset (e, 0, sizeof *e);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
}

void
health_report (struct health *h, enum health_report what, unsigned i,
               const char *old, const char *new_path, const char *reason)
{
  struct event e = { .member = i, .kind = (enum event_kind) what };

  if (h == NULL)
    return;
  snprintf (e.reason, sizeof e.reason, "%s", reason ? reason : "");
  e.old_path = strdup (old ? old : "");
  e.new_path = strdup (new_path ? new_path : "");
  pthread_mutex_lock (&h->lock);
  e.state = atomic_load (&h->m[i].state);
  health_push_event (h, &e);
  pthread_mutex_unlock (&h->lock);
}

void
health_member_describe (struct health *h, unsigned i, char *path,
                        size_t plen, char *reason, size_t rlen)
{
  pthread_mutex_lock (&h->lock);
  snprintf (path, plen, "%s", h->m[i].path);
  snprintf (reason, rlen, "%s", h->m[i].reason);
  pthread_mutex_unlock (&h->lock);
}

void
health_status_changed (struct health *h)
{
  if (h == NULL)
    return;
  pthread_mutex_lock (&h->lock);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

const char *
volume_state_name (enum volume_state s)
{
  switch (s) {
  case VS_OK: return "ok";
  case VS_DEGRADED: return "degraded";
  case VS_FAILED: return "failed";
  }
  return "?";
}

uint64_t
health_now_ns (void)
{
  return now_ns ();
}

/* The symbolic name of an errno ("EIO"), or NULL. */
const char *
health_errno_name (int err)
{
  return strerrorname_np (err);
}

/* Construction. */

static char *
dup_or_null (const char *s)
{
  return s ? strdup (s) : NULL;
}

static int
member_init (struct health *h, struct member_health *m, const char *path,
             unsigned class)
{
  m->path = strdup (path);
  m->class = class;
  m->snaps = calloc (h->nsnaps, sizeof *m->snaps);
  m->win = calloc (1, sizeof *m->win);
  if (!m->path || !m->snaps || !m->win)
    return -1;
  m->since = now_unix ();
  m->passed = -1;
  return 0;
}

int
health_member_add (struct health *h, const char *path, unsigned class)
{
  struct member_health *m;

  if (h == NULL)
    return 0;
  if (h->n >= LAYOUT_MAX_MEMBERS) {
    errno = E2BIG;
    return -1;
  }
  m = &h->m[h->n];
  if (member_init (h, m, path, class) == -1) {
    free (m->path);
    free (m->snaps);
    free (m->win);
    memset (m, 0, sizeof *m);
    errno = ENOMEM;
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  h->n++;
  h->dirty = true;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

struct health *
health_new (const struct health_params *p, unsigned nr_members,
            const char *const *paths, const struct health_ops *ops)
{
  struct health *h = calloc (1, sizeof *h);
  unsigned window;

  if (h == NULL)
    return NULL;
  h->p = *p;
  h->p.name = dup_or_null (p->name ? p->name : "stripe");
  h->p.uuid = dup_or_null (p->uuid);
  h->p.config = dup_or_null (p->config);
  h->p.status_file = dup_or_null (p->status_file);
  h->p.prometheus_file = dup_or_null (p->prometheus_file);
  h->p.on_change = dup_or_null (p->on_change);
  h->p.member_class = NULL; /* copied into the members */
  if (h->p.set.interval == 0)
    h->p.set.interval = HEALTH_DEFAULT_INTERVAL;
  if (h->p.set.window == 0)
    h->p.set.window = HEALTH_DEFAULT_WINDOW;
  if (h->p.set.slow_factor <= 1)
    h->p.set.slow_factor = HEALTH_DEFAULT_SLOW_FACTOR;
  if (h->p.set.error_threshold == 0)
    h->p.set.error_threshold = HEALTH_DEFAULT_ERROR_THRESHOLD;
  if (h->p.set.probe_interval == 0)
    h->p.set.probe_interval = HEALTH_DEFAULT_PROBE_INTERVAL;
  if (h->p.set.on_change_timeout == 0)
    h->p.set.on_change_timeout = HEALTH_DEFAULT_ON_CHANGE_TIMEOUT;
  if (ops)
    h->ops = *ops;
  h->n = nr_members;
  pthread_mutex_init (&h->lock, NULL);
  {
    pthread_condattr_t ca;
    pthread_condattr_init (&ca);
    pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
    pthread_cond_init (&h->cond, &ca);
    pthread_cond_init (&h->hook_cond, &ca);
    pthread_cond_init (&h->probe_cond, &ca);
    pthread_cond_init (&h->drive_cond, &ca);
    pthread_condattr_destroy (&ca);
  }

  /* A window of W seconds is made of up to MAX_SNAPS periods. */
  window = h->p.set.window;
  h->snap_period = (window + MAX_SNAPS - 1) / MAX_SNAPS;
  h->nsnaps = (window + h->snap_period - 1) / h->snap_period;

  /* Room for every member a grow may add (health_member_add). */
  h->m = calloc (LAYOUT_MAX_MEMBERS, sizeof *h->m);
  if (h->m == NULL || (p->name && !h->p.name))
    goto err;
  for (unsigned i = 0; i < nr_members; ++i)
    if (member_init (h, &h->m[i], paths[i],
                     p->member_class ? p->member_class[i] : 0)
        == -1)
      goto err;
  h->started_unix = now_unix ();
  h->started_mono = health_now_ns ();
  return h;

err:
  errno = ENOMEM;
  health_free (h);
  return NULL;
}



/* Members of the volume now: those a shrink removed are not. */
unsigned
health_nr_members (struct health *h)
{
  unsigned n = 0;
  for (unsigned i = 0; i < h->n; ++i)
    n += atomic_load (&h->m[i].state) != MS_REMOVED;
  return n;
}

enum volume_state
health_vol_state (struct health *h)
{
  enum volume_state vs = VS_OK;
  for (unsigned i = 0; i < h->n; ++i) {
    enum member_state s = atomic_load (&h->m[i].state);
    if (s == MS_FAILED)
      return VS_FAILED;
    if (s != MS_OK && s != MS_REMOVED)
      vs = VS_DEGRADED;
  }
  return vs;
}

int
health_start (struct health *h)
{
  int e;

  if (h == NULL || h->started)
    return 0;
  e = pthread_create (&h->thread, NULL, health_main, h);
  if (e)
    goto err;
  h->started = true;
  if (h->p.on_change) {
    e = pthread_create (&h->hook_thread, NULL, health_hook_main, h);
    if (e)
      goto err;
  }
  pthread_mutex_lock (&h->lock);
  if (health_start_prober (h) == -1) {
    e = errno;
    pthread_mutex_unlock (&h->lock);
    goto err;
  }
  pthread_mutex_unlock (&h->lock);
  if (h->p.set.drive_interval > 0 && health_start_drive_poller (h) == -1) {
    e = errno;
    goto err;
  }
  return 0;
err:
  errno = e;
  stripe_error ("health: cannot start a thread: %m");
  return -1;
}

bool
health_free (struct health *h)
{
  if (h == NULL)
    return true;
  if (h->started) {
    pthread_mutex_lock (&h->lock);
    h->stop = true;
    pthread_cond_broadcast (&h->cond);
    pthread_cond_broadcast (&h->probe_cond);
    pthread_cond_broadcast (&h->drive_cond);
    pthread_mutex_unlock (&h->lock);
    health_stop_drive_poller (h);
    pthread_join (h->thread, NULL);
    /* The health thread handed over its last events: the hook thread
     * runs them, then exits.
     */
    pthread_mutex_lock (&h->lock);
    h->hook_stop = true;
    pthread_cond_broadcast (&h->hook_cond);
    pthread_mutex_unlock (&h->lock);
    if (h->p.on_change)
      pthread_join (h->hook_thread, NULL);
    /* A prober blocked in a dead device is not waited for: it is
     * abandoned, as when it overruns io_timeout.  It cannot start another
     * check now that stop is set.
     */
    pthread_mutex_lock (&h->lock);
    struct prober *pr = h->prober;
    h->prober = NULL;
    if (pr && atomic_load (&pr->busy_member) >= 0) {
      pr->abandoned = true;
      h->nr_abandoned++;
      pthread_detach (pr->thread);
      pr = NULL;
    }
    pthread_mutex_unlock (&h->lock);
    if (pr) {
      pthread_join (pr->thread, NULL);
      free (pr);
    }
    pthread_mutex_lock (&h->lock);
    unsigned abandoned = h->nr_abandoned;
    pthread_mutex_unlock (&h->lock);
    if (abandoned > 0) {
      /* A prober is stuck in a dead device and still points here. */
      stripe_debug ("health: %u prober thread(s) still blocked at exit",
                    abandoned);
      return false;
    }
  }
  for (unsigned k = 0; k < h->nr_pending; ++k)
    health_event_clear (&h->pending[k]);
  for (unsigned k = 0; k < h->hook_len; ++k)
    health_event_clear (&h->hookq[(h->hook_head + k) % MAX_EVENTS]);
  if (h->m) {
    for (unsigned i = 0; i < h->n; ++i) {
      free (h->m[i].path);
      free (h->m[i].snaps);
      free (h->m[i].win);
    }
    free (h->m);
  }
  free ((char *) h->p.name);
  free ((char *) h->p.uuid);
  free ((char *) h->p.config);
  free ((char *) h->p.status_file);
  free ((char *) h->p.prometheus_file);
  free ((char *) h->p.on_change);
  pthread_mutex_destroy (&h->lock);
  pthread_cond_destroy (&h->cond);
  pthread_cond_destroy (&h->hook_cond);
  pthread_cond_destroy (&h->probe_cond);
  pthread_cond_destroy (&h->drive_cond);
  free (h);
  return true;
}
