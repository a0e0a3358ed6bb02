/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the array's spare policy -- the spares looked at again now
 * and then, and on_failing = "replace": a member that becomes failing
 * (I/O errors, its drive's prediction, a scrub's finding: whatever
 * health calls failing) is replaced onto a spare at once, one replace at
 * a time.
 *
 * Health is the monitor: it tells (health_ops.state_changed, from its
 * thread, without its lock) and reports the events this policy asks it
 * to (health_report); it starts nothing.  The replace is the array's job
 * (replace.h), started here through replace_onto_spare, which may take
 * seconds (a spare's drive is read, an NBD spare answers): on this
 * thread alone, never on the health thread.  While another replace or a
 * reshape holds the volume's job slot, it is tried again a tick (a
 * second) later.  A member is tried once each time it becomes failing:
 * when no spare can take its place, or the replace fails, it stays
 * failing (the event and the log say why) until it leaves failing and
 * comes back to it.
 *
 * Events (the on_change program, health_hook.c), each with the member's
 * index and its device: MemberReplacing when the replace starts (the
 * spare in NBDSTRIPE_NEW_PATH), then MemberReplaced or MemberNotReplaced
 * when it ends; MemberNotReplaced alone when it cannot start.
 *
 * Locking: the policy's lock guards its state.  It may be held while
 * health is called (health never calls the policy with its own lock
 * held), never while a replace is started.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "config.h"
#include "health.h"
#include "json.h"
#include "layout.h"
#include "log.h"
#include "replace.h"
#include "spares.h"
#include "util.h"

#define SPARE_PATH_MAX 4096
#define TICK_NS 1000000000ull
#define REASON_MAX 256

enum spare_phase { SPARE_IDLE, SPARE_STARTING, SPARE_RUNNING };

struct spare_policy {
  struct array *a;
  bool replace;            /* on_failing = "replace" */
  unsigned probe_interval; /* s: the spares looked at again */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool started, stop;
  enum spare_phase phase;
  unsigned member; /* the replace being started or run */
  char *old_path, *spare;
  char failing[REASON_MAX];        /* why the member was failing */
  uint64_t retry_at, next_refresh; /* monotonic ns */
  /* A replace onto a spare was tried since member i last left failing
   * (not again until it does).
   */
  bool tried[LAYOUT_MAX_MEMBERS];
  /* The last word, for the status: "waiting", "replacing", "replaced",
   * "not_replaced" ("" none yet).
   */
  char last_state[16];
  unsigned last_member;
  char *last_old, *last_spare;
  char last_reason[REASON_MAX];
  double last_unix;
};

static char *
dup0 (const char *s)
{
  return s ? strdup (s) : NULL;
}

/* What the status says last (lock held). */
static void
last_word (struct spare_policy *p, const char *state, unsigned i,
           const char *old, const char *spare, const char *reason)
{
  snprintf (p->last_state, sizeof p->last_state, "%s", state);
  p->last_member = i;
  free (p->last_old);
  free (p->last_spare);
  p->last_old = dup0 (old);
  p->last_spare = dup0 (spare);
  snprintf (p->last_reason, sizeof p->last_reason, "%s", reason);
  p->last_unix = now_unix ();
  health_status_changed (p->a->health);
}

/* The replace of member p->member has ended (lock held). */
static void
ended (struct spare_policy *p, bool ok, const char *why)
{
  struct health *h = p->a->health;
  unsigned i = p->member;
  char reason[REASON_MAX];

  /* Replaced: the member is another device, which may fail in turn. */
  p->tried[i] = !ok;
  if (ok) {
    snprintf (reason, sizeof reason, "%.100s took the place of %.100s",
              p->spare, p->old_path);
    stripe_notice ("on_failing: member %u: %s", i, reason);
    health_report (h, HEALTH_REPLACED, i, p->old_path, p->spare, reason);
    last_word (p, "replaced", i, p->old_path, p->spare, reason);
  }
  else {
    snprintf (reason, sizeof reason, "the replace onto %.80s failed: %.140s",
              p->spare, why);
    stripe_error ("on_failing: member %u (%s): %s: it stays failing", i,
                  p->old_path, reason);
    health_report (h, HEALTH_NOT_REPLACED, i, p->old_path, p->spare, reason);
    last_word (p, "not_replaced", i, p->old_path, p->spare, reason);
  }
  p->phase = SPARE_IDLE;
  free (p->old_path);
  free (p->spare);
  p->old_path = p->spare = NULL;
  pthread_cond_signal (&p->cond); /* another may be waiting */
}

/* Start replacing member i (lock held; dropped while the replace is
 * started).  The replace, once it is sure to start, says so through
 * spare_policy_started (before its copier runs: MemberReplacing comes
 * before anything the switch says), and its end through
 * spare_policy_ended (which may come before replace_onto_spare returns).
 */
static void
start (struct spare_policy *p, unsigned i)
{
  struct array *a = p->a;
  char spare[SPARE_PATH_MAX], why[1024], path[SPARE_PATH_MAX];
  int r;

  p->phase = SPARE_STARTING;
  p->member = i;
  health_member_describe (a->health, i, path, sizeof path, p->failing,
                          sizeof p->failing);
  free (p->old_path);
  p->old_path = dup0 (path);
  pthread_mutex_unlock (&p->lock);
  r = replace_onto_spare (a, i, a->config_file, spare, sizeof spare, why,
                          sizeof why);
  pthread_mutex_lock (&p->lock);

  if (r == 0 || (r == -1 && p->phase != SPARE_STARTING)) {
    /* Started: it runs, or it has ended already -- or, started, it
     * could not go on (its copier did not start): that is its end.
     */
    if (r == -1 && p->phase == SPARE_RUNNING && p->member == i)
      ended (p, false, why);
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
      last_word (p, "waiting", i, p->old_path, NULL, why);
    }
  }
  else {
    p->tried[i] = true;
    stripe_error ("on_failing: member %u (%s) is failing and is not "
                  "replaced: %s",
                  i, p->old_path, why);
    health_report (a->health, HEALTH_NOT_REPLACED, i, p->old_path, NULL, why);
    last_word (p, "not_replaced", i, p->old_path, NULL, why);
  }
  free (p->old_path);
  p->old_path = NULL;
}

void
spare_policy_started (struct spare_policy *p, unsigned i, const char *spare)
{
  char reason[REASON_MAX];

  if (p == NULL)
    return;
  pthread_mutex_lock (&p->lock);
  if (p->phase == SPARE_STARTING && p->member == i) {
    free (p->spare);
    p->spare = dup0 (spare);
    snprintf (reason, sizeof reason,
              "failing (%.100s): replaced by spare "
              "%.100s",
              p->failing, spare);
    stripe_notice ("on_failing: member %u (%s) is %s", i, p->old_path, reason);
    health_report (p->a->health, HEALTH_REPLACING, i, p->old_path, spare,
                   reason);
    last_word (p, "replacing", i, p->old_path, spare, reason);
    p->phase = SPARE_RUNNING;
  }
  pthread_mutex_unlock (&p->lock);
}

/* The first failing member not tried yet, or -1 (lock held). */
static int
next_failing (struct spare_policy *p)
{
  const struct volume *v = &p->a->volume;

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (health_member_state (p->a->health, i) == MS_FAILING && !p->tried[i])
      return (int) i;
  return -1;
}

static void *
spare_main (void *arg)
{
  struct spare_policy *p = arg;
  struct array *a = p->a;
  uint64_t interval = (uint64_t) p->probe_interval * 1000000000;

  pthread_mutex_lock (&p->lock);
  while (!p->stop) {
    uint64_t now = health_now_ns (), deadline;
    int i;

    if (a->spares && now >= p->next_refresh) {
      p->next_refresh = now + interval;
      pthread_mutex_unlock (&p->lock);
      spares_refresh (a->spares);
      health_status_changed (a->health);
      pthread_mutex_lock (&p->lock);
      continue;
    }
    if (p->replace && p->phase == SPARE_IDLE && now >= p->retry_at
        && (i = next_failing (p)) >= 0) {
      start (p, (unsigned) i);
      continue;
    }
    deadline = a->spares ? p->next_refresh : now + 3600 * TICK_NS;
    if (p->replace && p->retry_at > now && p->retry_at < deadline)
      deadline = p->retry_at;
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    pthread_cond_timedwait (&p->cond, &p->lock, &ts);
  }
  pthread_mutex_unlock (&p->lock);
  return NULL;
}

struct spare_policy *
spare_policy_new (struct array *a, bool replace, unsigned probe_interval)
{
  struct spare_policy *p = calloc (1, sizeof *p);
  pthread_condattr_t ca;

  if (p == NULL)
    return NULL;
  p->a = a;
  p->replace = replace;
  p->probe_interval = probe_interval;
  pthread_mutex_init (&p->lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&p->cond, &ca);
  pthread_condattr_destroy (&ca);
  return p;
}

int
spare_policy_start (struct spare_policy *p)
{
  int e;

  if (p == NULL || (p->a->spares == NULL && !p->replace))
    return 0;
  if (p->replace && p->a->config_file == NULL)
    stripe_warning ("on_failing = \"replace\": this volume cannot replace a "
                    "member by itself; a failing member is only reported");
  /* The spares were looked at when they were opened. */
  p->next_refresh =
    health_now_ns () + (uint64_t) p->probe_interval * 1000000000;
  e = pthread_create (&p->thread, NULL, spare_main, p);
  if (e) {
    errno = e;
    return -1;
  }
  p->started = true;
  return 0;
}

void
spare_policy_stop (struct spare_policy *p)
{
  if (p == NULL || !p->started)
    return;
  pthread_mutex_lock (&p->lock);
  p->stop = true;
  pthread_cond_broadcast (&p->cond);
  pthread_mutex_unlock (&p->lock);
  pthread_join (p->thread, NULL);
  p->started = false;
}

void
spare_policy_state_changed (struct spare_policy *p, unsigned i,
                            enum member_state s)
{
  if (i >= LAYOUT_MAX_MEMBERS)
    return;
  pthread_mutex_lock (&p->lock);
  if (s < MS_FAILING)
    p->tried[i] = false; /* tried again if it fails again */
  if (s == MS_FAILING && p->started)
    pthread_cond_signal (&p->cond);
  pthread_mutex_unlock (&p->lock);
}

void
spare_policy_ended (struct spare_policy *p, unsigned i, bool replaced,
                    const char *why)
{
  if (p == NULL)
    return;
  pthread_mutex_lock (&p->lock);
  if (p->phase == SPARE_RUNNING && p->member == i)
    ended (p, replaced, why ? why : "");
  pthread_mutex_unlock (&p->lock);
}

struct json_object *
spare_policy_json (struct spare_policy *p)
{
  struct json_object *o = json_object_new_object (), *l = NULL;

  pthread_mutex_lock (&p->lock);
  json_put (o, "policy", json_text (p->replace ? "replace" : "alert"));
  if (p->last_state[0]) {
    l = json_object_new_object ();
    json_put (l, "state", json_text (p->last_state));
    json_put (l, "member", json_object_new_int64 (p->last_member));
    json_put (l, "old", json_text (p->last_old));
    json_put (l, "spare", json_text (p->last_spare));
    json_put (l, "reason", json_text (p->last_reason));
    json_put (l, "time_unix", json_number (p->last_unix, "%.3f"));
  }
  pthread_mutex_unlock (&p->lock);
  json_put (o, "last", l);
  return o;
}

void
spare_policy_free (struct spare_policy *p)
{
  if (p == NULL)
    return;
  spare_policy_stop (p);
  free (p->old_path);
  free (p->spare);
  free (p->last_old);
  free (p->last_spare);
  pthread_mutex_destroy (&p->lock);
  pthread_cond_destroy (&p->cond);
  free (p);
}
