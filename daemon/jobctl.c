/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the client of a served volume's jobs (jobctl.h): start,
 * follow, cancel, the same for every kind of job.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control.h"
#include "jobctl.h"
#include "json.h"
#include "jsonout.h"
#include "mover.h"
#include "nbdstripe.h"

void
outcome_fail (struct outcome *o, const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vsnprintf (o->err, sizeof o->err, fmt, args);
  va_end (args);
  if (!o->json || !o->quiet)
    fprintf (stderr, "nbdstripe: %s\n", o->err);
}

void
outcome_keep (struct outcome *o, struct json_object *job)
{
  json_object_put (o->last);
  o->last = job ? json_object_get (job) : NULL;
}

void
jobctl_init (struct jobctl *j, const struct jobctl_kind *kind,
             const struct stripe_config *cfg, const char *volume,
             struct outcome *o, void *cmd)
{
  memset (j, 0, sizeof *j);
  j->kind = kind;
  j->cfg = cfg;
  j->volume = volume;
  j->o = o;
  j->cmd = cmd;
  /* The bar only where someone watches: stdout going elsewhere gets the
   * lines.
   */
  j->tty = isatty (STDERR_FILENO) && isatty (STDOUT_FILENO);
  j->last_pct = -1;
  control_path (cfg->health.status_file, j->ctl, sizeof j->ctl);
}

struct json_object *
jobctl_ask (struct jobctl *j, struct json_object *req, const char *what,
            const char *unserved)
{
  struct json_object *ans;
  char why[1024], text[1536];
  bool ok;

  ans = control_ask (j->ctl, req, 0, why, sizeof why);
  json_object_put (req);
  if (ans == NULL) {
    /* A socket not to be trusted is no sign the volume is not served. */
    if (errno == EPERM)
      outcome_fail (j->o, "%s: %s", j->cfg->path, why);
    else {
      snprintf (text, sizeof text, unserved, why);
      outcome_fail (j->o, "%s: %s", j->cfg->path, text);
    }
    return NULL;
  }
  if (json_get_bool (ans, "ok", &ok, NULL, 0) == -1 || !ok) {
    outcome_fail (j->o, "%s: %s", what,
                  json_str_or_null (ans, "error")
                    ? json_str_or_null (ans, "error")
                    : "refused");
    json_object_put (ans);
    return NULL;
  }
  return ans;
}

/* A status answer holds the live status under "status"; a server without
 * health has none, and says its last job at the top.
 */
int
jobctl_status (struct jobctl *j, int timeout_ms, struct json_object **out,
               char *why, size_t whylen)
{
  struct json_object *req, *ans, *st, *x = NULL;

  /* Run here, the mover's status is the job's. */
  if (j->local) {
    *out = mover_status (j->local);
    snprintf (why, whylen, "no job");
    return *out ? 0 : -1;
  }
  req = json_object_new_object ();
  json_put (req, "op", json_text ("status"));
  ans = control_ask (j->ctl, req, timeout_ms, why, whylen);
  json_object_put (req);
  *out = NULL;
  if (ans == NULL)
    return -1;
  if (json_get_object (ans, "status", &st, NULL, 0) == 0)
    json_get_object (st, j->kind->key, &x, NULL, 0);
  else
    json_get_object (ans, j->kind->key, &x, NULL, 0);
  if (x)
    *out = json_object_get (x);
  else if (j->kind->absent_empty)
    *out = json_object_new_object ();
  json_object_put (ans);
  return 0;
}

/* Not waited for long: the job has just started, and the command ends
 * here whatever the server says.
 */
void
jobctl_peek (struct jobctl *j)
{
  struct json_object *x;
  char why[1024];

  if (jobctl_status (j, 5000, &x, why, sizeof why) == 0) {
    outcome_keep (j->o, x);
    json_object_put (x);
  }
}

static bool
under_way (const struct jobctl_kind *k, const char *state)
{
  for (const char *const *s = k->under_way; *s; ++s)
    if (strcmp (state, *s) == 0)
      return true;
  return false;
}

/* The bar, redrawn on stderr. */
static void
bar (const struct jobctl_kind *k, struct json_object *job, double done,
     int pct)
{
  static const char full[] = "##############################";
  int w = 30, fill = pct * w / 100;
  char hd[32], hr[32];

  fprintf (stderr, "\r[%.*s%*s] %3d%% %s at %s/s", fill, full, w - fill, "",
           pct, human_size ((uint64_t) done, hd, sizeof hd),
           human_size ((uint64_t) json_num_or_0 (job, "rate"), hr, sizeof hr));
  if (k->eta)
    fprintf (stderr, ", ETA %.0f s", json_num_or_0 (job, "eta_seconds"));
  fputs ("   ", stderr);
  fflush (stderr);
}

static double
now_seconds (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One progress line: "NAME: progress" on stdout, or with --json an
 * object on one line (JSON Lines): the command, the percentage, the line
 * and the job's object under its key.
 */
static void
progress_line (struct jobctl *j, struct json_object *job, int pct)
{
  const struct jobctl_kind *k = j->kind;
  char line[1024];

  k->progress (job, line, sizeof line);
  if (j->o->json) {
    struct json_object *o = json_object_new_object ();

    json_put (o, "command", json_text (k->name));
    json_put (o, "percent", json_object_new_int (pct));
    json_put (o, "progress", json_text (line));
    json_put (o, k->key, json_object_get (job));
    jsonout_line (o);
    return;
  }
  printf ("%s: %s\n", k->name, line);
  fflush (stdout);
}

bool
jobctl_show (struct jobctl *j, struct json_object *job)
{
  const struct jobctl_kind *k = j->kind;
  const char *state = json_str_or_null (job, "state");
  bool end = state && !under_way (k, state);
  double done = json_num_or_0 (job, k->done_key);
  double total = json_num_or_0 (job, "bytes_total");
  double now = now_seconds ();
  int pct = total > 0 ? (int) (done * 100 / total) : 100;

  if (pct < 0 || pct > 100)
    pct = 100;
  if (j->tty && !j->o->json) {
    bar (k, job, done, pct);
    if (end)
      fputc ('\n', stderr);
  }
  else if (pct / 5 != j->last_pct / 5 || end
           || now - j->last_shown >= JOBCTL_EVERY_SECONDS) {
    progress_line (j, job, pct);
    j->last_shown = now;
    j->last_pct = pct;
  }
  return end;
}

int
jobctl_start (struct jobctl *j, struct json_object *req)
{
  struct json_object *ans;

  ans = jobctl_ask (j, req, j->kind->name, j->kind->unserved);
  if (ans == NULL)
    return 1;
  j->started = true;
  j->kind->started (j, ans);
  json_object_put (ans);
  if (!j->wait)
    return 0;
  j->waited = true;
  return jobctl_follow (j);
}

int
jobctl_follow (struct jobctl *j)
{
  const struct jobctl_kind *k = j->kind;
  char why[1024], gone[1536];

  for (;;) {
    struct json_object *job;
    int status;

    if (jobctl_status (j, 0, &job, why, sizeof why) == -1) {
      /* A bar is left mid-line. */
      if (j->tty && !j->o->json)
        fputc ('\n', stderr);
      snprintf (gone, sizeof gone, k->gone, why);
      outcome_fail (j->o, "the server went away during the %s%s", k->name,
                    gone);
      return 1;
    }
    if (job)
      outcome_keep (j->o, job);
    if (job && jobctl_show (j, job)) {
      status = k->conclude (j, job);
      json_object_put (job);
      return status;
    }
    json_object_put (job);
    usleep (200000);
  }
}

int
jobctl_cancel (struct jobctl *j)
{
  const struct jobctl_kind *k = j->kind;
  struct json_object *req = json_object_new_object (), *ans;
  char what[128];

  json_put (req, "op", json_text (k->cancel_op));
  if (k->cancel_job)
    json_put (req, "job", json_text (k->cancel_job));
  snprintf (what, sizeof what, "%s --cancel", k->name);
  ans = jobctl_ask (j, req, what, k->unserved_cancel);
  if (ans == NULL)
    return 1;
  json_object_put (ans);
  if (k->cancelled)
    return k->cancelled (j);
  if (!j->o->json)
    printf ("%s of volume '%s' cancelled\n", k->name, j->cfg->name);
  return 0;
}
