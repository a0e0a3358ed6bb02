/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: judging a status -- asked of the control socket or
 * read from the file, is a live server behind it, and is the volume ok,
 * degraded or failed?  Also what list and stop see (status_seen).  See
 * status.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "control.h"
#include "json.h"
#include "nbdstripe.h"
#include "status.h"
#include "util.h"

#define STATUS_FORMAT 1
/* A server that does not answer its control socket within this is
 * busy or hung: the status file then.
 */
#define CONTROL_TIMEOUT_MS 2000

static void __attribute__ ((format (printf, 2, 3)))
note (struct notes *n, const char *fmt, ...)
{
  char line[1024];
  va_list args;

  va_start (args, fmt);
  vsnprintf (line, sizeof line, fmt, args);
  va_end (args);
  if (n->print)
    fprintf (stderr, "nbdstripe: %s\n", line);
  if (n->first[0] == '\0')
    snprintf (n->first, sizeof n->first, "%s", line);
}

/* Is a server still behind these figures?  Notes every reason it is
 * not (naming the file) and returns false then.  *alive says whether
 * the pid is a live process (for the table).  name: the volume it must
 * be the status of (NULL: any); interval: the config's (0: 5 s).
 */
static bool
check_live (struct json_object *st, const char *file, const char *name,
            unsigned cfg_interval, double now, bool *alive, struct notes *n)
{
  struct json_object *running = field (st, "running", json_type_boolean);
  struct json_object *vol;
  uint64_t pid, interval;
  double updated, limit;
  char other[256];
  bool live = true;

  *alive = false;
  if (running == NULL) {
    note (n, "%s: no valid \"running\" field", file);
    live = false;
  }
  else if (!json_object_get_boolean (running)) {
    note (n, "%s: the server has stopped (\"running\": false)", file);
    n->gone = true;
    live = false;
  }
  /* Never kill(0) or kill(-1): those are process groups. */
  if (!get_uint (st, "pid", &pid) || pid == 0 || pid > INT_MAX) {
    note (n, "%s: no valid \"pid\" field", file);
    live = false;
  }
  else if (kill ((pid_t) pid, 0) == -1 && errno == ESRCH) {
    note (n, "%s: the server (pid %" PRIu64 ") is not running", file, pid);
    n->gone = true;
    live = false;
  }
  else
    *alive = true;

  /* The file's own interval, as long as it is one the config could
   * have set.
   */
  if (!get_uint (st, "interval", &interval) || interval < 1 || interval > 3600)
    interval = cfg_interval ? cfg_interval : 5;
  limit = 3.0 * interval + 5;
  if (!get_number (st, "updated_unix", &updated)) {
    note (n, "%s: no valid \"updated_unix\" field", file);
    live = false;
  }
  else if (now - updated > limit) {
    if (now - updated < 1e12)
      note (n,
            "%s: stale: last updated %.0f s ago, more than "
            "3 x interval (%" PRIu64 " s) + 5 s",
            file, now - updated, interval);
    else
      note (n, "%s: stale: \"updated_unix\" is %g", file, updated);
    live = false;
  }
  else if (updated - now > limit) {
    note (n, "%s: \"updated_unix\" is %.0f s in the future", file,
          updated - now);
    live = false;
  }

  /* Two volumes sharing a status file would show each other's health. */
  vol = field (st, "volume", json_type_object);
  if (name && field (vol, "name", json_type_string)
      && !text_is (vol, "name", name)) {
    note (n, "%s: the status of volume '%s', not of '%s'", file,
          get_text (vol, "name", other, sizeof other), name);
    live = false;
  }
  return live;
}

static enum verdict
member_verdict (struct json_object *m)
{
  if (text_is (m, "state", "failed"))
    return V_FAILED;
  if (text_is (m, "state", "slow") || text_is (m, "state", "full")
      || text_is (m, "state", "failing"))
    return V_DEGRADED;
  return V_OK;
}

/* The volume's state, made no better than its members' states say. */
static enum verdict
volume_verdict (struct json_object *st)
{
  struct json_object *vol = field (st, "volume", json_type_object);
  struct json_object *members = field (st, "members", json_type_array);
  enum verdict v;

  if (text_is (vol, "state", "ok"))
    v = V_OK;
  else if (text_is (vol, "state", "degraded"))
    v = V_DEGRADED;
  else if (text_is (vol, "state", "failed"))
    v = V_FAILED;
  else
    return V_UNKNOWN;
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    enum verdict m = member_verdict (json_object_array_get_idx (members, i));

    if (m > v)
      v = m;
  }
  return v;
}

/* Judge the text of a status (w->buf, w->len: taken), from label (the
 * file, or the control socket).
 */
static void
judge_text (const char *label, const char *name, unsigned interval,
            double now, struct notes *n, struct view *w)
{
  char why[512];
  uint64_t format;

  w->v = V_UNKNOWN;
  if ((w->st = parse_status (w->buf, w->len, why, sizeof why)) == NULL)
    note (n, "%s: %s", label, why);
  else if (!get_uint (w->st, "format", &format))
    note (n,
          "%s: no valid \"format\" field: not an nbdstripe "
          "status file",
          label);
  else if (format != STATUS_FORMAT)
    note (n, "%s: format %" PRIu64 ", expected %d", label, format,
          STATUS_FORMAT);
  else {
    w->format_ok = true;
    w->live = check_live (w->st, label, name, interval, now, &w->alive, n);
    w->v = volume_verdict (w->st);
    if (w->v == V_UNKNOWN)
      note (n, "%s: no valid volume state", label);
    if (!w->live)
      w->v = V_UNKNOWN;
  }
}

void
judge (const char *file, const char *name, unsigned interval, double now,
       struct notes *n, struct view *w)
{
  char why[512];
  struct stat sb;

  memset (w, 0, sizeof *w);
  w->v = V_UNKNOWN;
  if (read_file (file, &w->buf, &w->len, why, sizeof why) == -1) {
    if (stat (file, &sb) == -1 && errno == ENOENT)
      n->gone = true;
    note (n, "%s: %s", file, why);
    return;
  }
  judge_text (file, name, interval, now, n, w);
}

/* The live status from the volume's control socket (control.h), judged
 * as a status file is: true when the socket is there and answered with a
 * status; false (nothing said) otherwise, for the file to be read.
 */
bool
judge_live (const char *ctl, const char *name, unsigned interval, double now,
            struct notes *n, struct view *w)
{
  struct json_object *req, *ans, *ok, *st;
  struct stat sb;
  bool done = false;
  char why[1024];

  memset (w, 0, sizeof *w);
  w->v = V_UNKNOWN;
  if (lstat (ctl, &sb) == -1 || !S_ISSOCK (sb.st_mode))
    return false;
  req = json_object_new_object ();
  json_put (req, "op", json_text ("status"));
  ans = control_ask (ctl, req, CONTROL_TIMEOUT_MS, why, sizeof why);
  json_object_put (req);
  /* A socket not to be trusted: said, and the status file is read. */
  if (ans == NULL && errno == EPERM)
    fprintf (stderr, "nbdstripe: %s\n", why);
  if (ans && json_object_object_get_ex (ans, "ok", &ok)
      && json_object_get_boolean (ok)
      && (st = field (ans, "status", json_type_object)) != NULL) {
    w->buf = json_text_of (st);
    if (w->buf) {
      w->len = strlen (w->buf);
      w->from_socket = true;
      judge_text (ctl, name, interval, now, n, w);
      done = true;
    }
  }
  json_object_put (ans);
  return done;
}

void
view_free (struct view *w)
{
  json_object_put (w->st);
  free (w->buf);
}

const char *
seen_state_name (enum seen_state s)
{
  switch (s) {
  case SEEN_OK: return "ok";
  case SEEN_DEGRADED: return "degraded";
  case SEEN_FAILED: return "failed";
  case SEEN_NOT_RUNNING: return "not running";
  case SEEN_UNKNOWN: return "unknown";
  }
  return "unknown";
}

void
status_seen (const char *status_file, const char *name, unsigned interval,
             struct seen *out)
{
  struct notes n = { .print = false };
  struct view w;
  struct json_object *vol;
  uint64_t pid;

  memset (out, 0, sizeof *out);
  judge (status_file, name, interval, now_unix (), &n, &w);
  switch (w.v) {
  case V_OK: out->state = SEEN_OK; break;
  case V_DEGRADED: out->state = SEEN_DEGRADED; break;
  case V_FAILED: out->state = SEEN_FAILED; break;
  default: out->state = n.gone ? SEEN_NOT_RUNNING : SEEN_UNKNOWN; break;
  }
  snprintf (out->reason, sizeof out->reason, "%s", n.first);
  if (w.st && get_uint (w.st, "pid", &pid) && pid > 0 && pid <= INT_MAX)
    out->pid = (long) pid;
  vol = field (w.st, "volume", json_type_object);
  if (field (vol, "name", json_type_string))
    out->name =
      strdup (json_object_get_string (field (vol, "name", json_type_string)));
  if (field (vol, "config", json_type_string))
    out->config = strdup (
      json_object_get_string (field (vol, "config", json_type_string)));
  view_free (&w);
}

void
seen_free (struct seen *s)
{
  free (s->name);
  free (s->config);
  s->name = s->config = NULL;
}
