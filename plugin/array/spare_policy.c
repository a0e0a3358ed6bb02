/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's spare thread -- the spares looked at again now
 * and then, and the policy of on_failing = "replace": a member that
 * becomes failing (I/O errors, its drive's prediction, a scrub's
 * finding: whatever health calls failing) is replaced onto a spare at
 * once, one replace at a time.
 *
 * The replace is the volume's job (replace.h), started through
 * ops.spare_start, which may take seconds (a spare's drive is read, an
 * NBD spare answers): on this thread alone, never on the health thread
 * or under health's lock.  While another replace or a reshape holds the
 * volume's job slot, it is tried again a tick (a second) later.  A
 * member is tried once each time it becomes failing: when no spare can
 * take its place, or the replace fails, it stays failing (the event and
 * the log say why) until it leaves failing and comes back to it.
 *
 * Events (the on_change program, health_hook.c), each with the member's
 * index and its device: MemberReplacing when the replace starts (the
 * spare in NBDSTRIPE_NEW_PATH), then MemberReplaced or MemberNotReplaced
 * when it ends; MemberNotReplaced alone when it cannot start.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health_impl.h"
#include "json.h"
#include "log.h"
#include "util.h"

#define SPARE_PATH_MAX 4096
#define TICK_NS 1000000000ull

static char *
dup0 (const char *s)
{
  return s ? strdup (s) : NULL;
}

/* What the status says last (lock held). */
static void
last_word (struct health *h, const char *state, unsigned i, const char *old,
           const char *spare, const char *reason)
{
  struct spare_policy *p = &h->spare;

  snprintf (p->last_state, sizeof p->last_state, "%s", state);
  p->last_member = i;
  free (p->last_old);
  free (p->last_spare);
  p->last_old = dup0 (old);
  p->last_spare = dup0 (spare);
  snprintf (p->last_reason, sizeof p->last_reason, "%s", reason);
  p->last_unix = now_unix ();
  h->dirty = true;
  pthread_cond_signal (&h->cond);
}

static void
event (struct health *h, enum event_kind kind, unsigned i, const char *old,
       const char *spare, const char *reason)
{
  struct event e = {
    .member = i,
    .state = atomic_load (&h->m[i].state),
    .kind = kind,
    .old_path = dup0 (old ? old : ""),
    .new_path = dup0 (spare ? spare : ""),
  };

  snprintf (e.reason, sizeof e.reason, "%s", reason);
  health_push_event (h, &e);
}

/* The replace of member p->member has ended (lock held). */
static void
ended (struct health *h, bool ok, const char *why)
{
  struct spare_policy *p = &h->spare;
  unsigned i = p->member;
  char reason[REASON_MAX];

  /* Replaced: the member is another device, which may fail in turn. */
  h->m[i].spare_tried = !ok;
  if (ok) {
    snprintf (reason, sizeof reason, "%.100s took the place of %.100s",
              p->spare, p->old_path);
    stripe_notice ("on_failing: member %u: %s", i, reason);
    event (h, EV_REPLACED, i, p->old_path, p->spare, reason);
    last_word (h, "replaced", i, p->old_path, p->spare, reason);
  }
  else {
    snprintf (reason, sizeof reason, "the replace onto %.80s failed: %.140s",
              p->spare, why);
    stripe_error ("on_failing: member %u (%s): %s: it stays failing", i,
                  p->old_path, reason);
    event (h, EV_NOT_REPLACED, i, p->old_path, p->spare, reason);
    last_word (h, "not_replaced", i, p->old_path, p->spare, reason);
  }
  p->phase = SPARE_IDLE;
  free (p->old_path);
  free (p->spare);
  p->old_path = p->spare = NULL;
  pthread_cond_signal (&p->cond); /* another may be waiting */
}

/* Start replacing member i (lock held; dropped while spare_start runs).
 * The replace, once it is sure to start, says so through
 * health_spare_started (before its copier runs: MemberReplacing comes
 * before anything the switch says), and its end through
 * health_spare_ended (which may come before spare_start returns).
 */
static void
start (struct health *h, unsigned i)
{
  struct spare_policy *p = &h->spare;
  struct member_health *m = &h->m[i];
  char spare[SPARE_PATH_MAX], why[1024];
  int r;

  p->phase = SPARE_STARTING;
  p->member = i;
  free (p->old_path);
  p->old_path = dup0 (m->path);
  snprintf (p->failing, sizeof p->failing, "%s", m->reason);
  pthread_mutex_unlock (&h->lock);
  r = h->ops.spare_start (h->ops.opaque, i, h->p.config, spare, sizeof spare,
                          why, sizeof why);
  pthread_mutex_lock (&h->lock);

  if (r == 0 || (r == -1 && p->phase != SPARE_STARTING)) {
    /* Started: it runs, or it has ended already -- or, started, it
     * could not go on (its copier did not start): that is its end.
     */
    if (r == -1 && p->phase == SPARE_RUNNING && p->member == i)
      ended (h, false, why);
    else if (r == 0 && p->phase == SPARE_STARTING)
      p->phase = SPARE_RUNNING; /* not said started: its end will be */
    return;
  }
  p->phase = SPARE_IDLE;
  if (r == 1) {
    /* Not now: the job slot is busy.  Said once. */
    p->retry_at = health_now_ns () + TICK_NS;
    if (strcmp (p->last_state, "waiting") != 0 || p->last_member != i) {
      stripe_info ("on_failing: member %u (%s) is failing: its replace "
                   "waits (%s)",
                   i, p->old_path, why);
      last_word (h, "waiting", i, p->old_path, NULL, why);
    }
  }
  else {
    m->spare_tried = true;
    stripe_error ("on_failing: member %u (%s) is failing and is not "
                  "replaced: %s",
                  i, p->old_path, why);
    event (h, EV_NOT_REPLACED, i, p->old_path, NULL, why);
    last_word (h, "not_replaced", i, p->old_path, NULL, why);
  }
  free (p->old_path);
  p->old_path = NULL;
}

void
health_spare_started (struct health *h, unsigned i, const char *spare)
{
  struct spare_policy *p;
  char reason[REASON_MAX];

  if (h == NULL)
    return;
  p = &h->spare;
  pthread_mutex_lock (&h->lock);
  if (p->phase == SPARE_STARTING && p->member == i) {
    free (p->spare);
    p->spare = dup0 (spare);
    snprintf (reason, sizeof reason,
              "failing (%.100s): replaced by spare "
              "%.100s",
              p->failing, spare);
    stripe_notice ("on_failing: member %u (%s) is %s", i, p->old_path, reason);
    event (h, EV_REPLACING, i, p->old_path, spare, reason);
    last_word (h, "replacing", i, p->old_path, spare, reason);
    p->phase = SPARE_RUNNING;
  }
  pthread_mutex_unlock (&h->lock);
}

/* The first failing member not tried yet, or -1 (lock held). */
static int
next_failing (struct health *h)
{
  for (unsigned i = 0; i < h->n; ++i)
    if (atomic_load (&h->m[i].state) == MS_FAILING && !h->m[i].spare_tried)
      return (int) i;
  return -1;
}

static void *
spare_main (void *arg)
{
  struct health *h = arg;
  struct spare_policy *p = &h->spare;
  bool policy = h->p.on_failing == ON_FAILING_REPLACE && h->ops.spare_start;

  pthread_mutex_lock (&h->lock);
  while (!p->stop) {
    uint64_t now = health_now_ns (), deadline;
    int i;

    if (h->ops.spares_refresh && now >= p->next_refresh) {
      p->next_refresh = now + (uint64_t) h->p.set.probe_interval * 1000000000;
      pthread_mutex_unlock (&h->lock);
      h->ops.spares_refresh (h->ops.opaque);
      pthread_mutex_lock (&h->lock);
      h->dirty = true;
      continue;
    }
    if (policy && p->phase == SPARE_IDLE && now >= p->retry_at
        && (i = next_failing (h)) >= 0) {
      start (h, (unsigned) i);
      continue;
    }
    deadline = h->ops.spares_refresh ? p->next_refresh : now + 3600 * TICK_NS;
    if (policy && p->retry_at > now && p->retry_at < deadline)
      deadline = p->retry_at;
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    pthread_cond_timedwait (&p->cond, &h->lock, &ts);
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

int
health_start_spare_thread (struct health *h)
{
  int e;

  if (h->ops.spares_refresh == NULL
      && !(h->p.on_failing == ON_FAILING_REPLACE && h->ops.spare_start))
    return 0;
  if (h->p.on_failing == ON_FAILING_REPLACE && h->ops.spare_start == NULL)
    stripe_warning ("on_failing = \"replace\": this volume cannot replace a "
                    "member by itself; a failing member is only reported");
  /* The spares were looked at when they were opened. */
  h->spare.next_refresh =
    health_now_ns () + (uint64_t) h->p.set.probe_interval * 1000000000;
  e = pthread_create (&h->spare.thread, NULL, spare_main, h);
  if (e) {
    errno = e;
    return -1;
  }
  h->spare.started = true;
  return 0;
}

void
health_stop_spare_thread (struct health *h)
{
  if (h == NULL || !h->spare.started)
    return;
  pthread_mutex_lock (&h->lock);
  h->spare.stop = true;
  pthread_cond_broadcast (&h->spare.cond);
  pthread_mutex_unlock (&h->lock);
  pthread_join (h->spare.thread, NULL);
  h->spare.started = false;
}

void
health_spare_state_changed (struct health *h, unsigned i, enum member_state s)
{
  if (s < MS_FAILING)
    h->m[i].spare_tried = false; /* tried again if it fails again */
  if (s == MS_FAILING && h->spare.started)
    pthread_cond_signal (&h->spare.cond);
}

void
health_spare_ended (struct health *h, unsigned i, bool replaced,
                    const char *why)
{
  struct spare_policy *p;

  if (h == NULL)
    return;
  p = &h->spare;
  pthread_mutex_lock (&h->lock);
  if (p->phase == SPARE_RUNNING && p->member == i)
    ended (h, replaced, why ? why : "");
  pthread_mutex_unlock (&h->lock);
}

struct json_object *
health_spare_json (struct health *h)
{
  struct spare_policy *p = &h->spare;
  struct json_object *o = json_object_new_object (), *l = NULL;

  json_put (
    o, "policy",
    json_text (h->p.on_failing == ON_FAILING_REPLACE ? "replace" : "alert"));
  if (p->last_state[0]) {
    l = json_object_new_object ();
    json_put (l, "state", json_text (p->last_state));
    json_put (l, "member", json_object_new_int64 (p->last_member));
    json_put (l, "old", json_text (p->last_old));
    json_put (l, "spare", json_text (p->last_spare));
    json_put (l, "reason", json_text (p->last_reason));
    json_put (l, "time_unix", json_number (p->last_unix, "%.3f"));
  }
  json_put (o, "last", l);
  return o;
}

void
health_spare_free (struct health *h)
{
  free (h->spare.old_path);
  free (h->spare.spare);
  free (h->spare.last_old);
  free (h->spare.last_spare);
}
