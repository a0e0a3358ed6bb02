/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: judging a status -- asked of the control socket or
 * read from the file, is a live server behind it, and is the volume ok,
 * degraded or failed?  The one verdict, with its reason, that status
 * prints (its exit status, --json's "state") and list shows
 * (status_seen).  See status.h.
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

/* How sure a reason is that nothing can be said of the volume: of the
 * reasons a status gives, the surest names the state (unknown over
 * not-running over stale: a file that is another volume's says nothing
 * of this one's server, dead pid or not).
 */
static int
doubt (enum seen_state s)
{
  switch (s) {
  case SEEN_STALE: return 1;
  case SEEN_NOT_RUNNING: return 2;
  case SEEN_UNKNOWN: return 3;
  default: return 0;
  }
}

/* One reason the status cannot be trusted, and the state it implies:
 * on stderr (w->print), and kept as the reason when it is the surest yet.
 */
static void __attribute__ ((format (printf, 3, 4)))
note (struct view *w, enum seen_state s, const char *fmt, ...)
{
  char line[1024];
  va_list args;

  va_start (args, fmt);
  vsnprintf (line, sizeof line, fmt, args);
  va_end (args);
  if (w->print)
    fprintf (stderr, "nbdstripe: %s\n", line);
  if (doubt (s) > doubt (w->state)) {
    w->state = s;
    snprintf (w->reason, sizeof w->reason, "%s", line);
  }
}

/* Is a server still behind these figures?  Notes every reason it is
 * not (naming the file) and returns false then.  w->alive says whether
 * the pid is a live process (for the table).  name: the volume it must
 * be the status of (NULL: any); interval: the config's (0: 5 s).
 */
static bool
check_live (struct json_object *st, const char *file, const char *name,
            unsigned cfg_interval, double now, struct view *w)
{
  struct json_object *running = field (st, "running", json_type_boolean);
  struct json_object *vol;
  uint64_t pid, interval;
  double updated, limit;
  char other[256];
  bool live = true;

  w->alive = false;
  if (running == NULL) {
    note (w, SEEN_UNKNOWN, "%s: no valid \"running\" field", file);
    live = false;
  }
  else if (!json_object_get_boolean (running)) {
    note (w, SEEN_NOT_RUNNING,
          "%s: the server has stopped (\"running\": false)", file);
    live = false;
  }
  /* Never kill(0) or kill(-1): those are process groups. */
  if (!get_uint (st, "pid", &pid) || pid == 0 || pid > INT_MAX) {
    note (w, SEEN_UNKNOWN, "%s: no valid \"pid\" field", file);
    live = false;
  }
  else if (kill ((pid_t) pid, 0) == -1 && errno == ESRCH) {
    note (w, SEEN_NOT_RUNNING,
          "%s: the server (pid %" PRIu64 ") is not running", file, pid);
    live = false;
  }
  else
    w->alive = true;

  /* The file's own interval, as long as it is one the config could
   * have set.
   */
  if (!get_uint (st, "interval", &interval) || interval < 1 || interval > 3600)
    interval = cfg_interval ? cfg_interval : 5;
  limit = 3.0 * interval + 5;
  if (!get_number (st, "updated_unix", &updated)) {
    note (w, SEEN_UNKNOWN, "%s: no valid \"updated_unix\" field", file);
    live = false;
  }
  else if (now - updated > limit) {
    if (now - updated < 1e12)
      note (w, SEEN_STALE,
            "%s: stale: last updated %.0f s ago, more than "
            "3 x interval (%" PRIu64 " s) + 5 s",
            file, now - updated, interval);
    else
      note (w, SEEN_STALE, "%s: stale: \"updated_unix\" is %g", file, updated);
    live = false;
  }
  else if (updated - now > limit) {
    note (w, SEEN_UNKNOWN, "%s: \"updated_unix\" is %.0f s in the future",
          file, updated - now);
    live = false;
  }

  /* Two volumes sharing a status file would show each other's health. */
  vol = field (st, "volume", json_type_object);
  if (name && field (vol, "name", json_type_string)
      && !text_is (vol, "name", name)) {
    note (w, SEEN_UNKNOWN, "%s: the status of volume '%s', not of '%s'", file,
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
      || text_is (m, "state", "failing") || text_is (m, "state", "missing"))
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

/* Why a volume is degraded or failed, in one line: every member that
 * is not ok ("member 1 failing: read error EIO at ..."), else what the
 * server says of the volume.
 */
static void
verdict_reason (struct json_object *st, enum verdict v, char *buf, size_t len)
{
  struct json_object *members = field (st, "members", json_type_array);
  size_t n = 0;

  buf[0] = '\0';
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    struct json_object *state = field (m, "state", json_type_string);
    struct json_object *why = field (m, "reason", json_type_string);
    const char *text = why ? json_object_get_string (why) : "";
    uint64_t index;
    char idx[32] = "?";

    if (member_verdict (m) == V_OK || n >= len)
      continue;
    if (get_uint (m, "index", &index))
      snprintf (idx, sizeof idx, "%" PRIu64, index);
    n += snprintf (buf + n, len - n, "%smember %s %s%s%s", n ? "; " : "", idx,
                   json_object_get_string (state), text[0] ? ": " : "", text);
  }
  if (n == 0)
    snprintf (buf, len, "the server says the volume is %s",
              v == V_FAILED ? "failed" : "degraded");
}

/* Judge the text of a status (w->buf, w->len: taken), from label (the
 * file, or the control socket).
 */
static void
judge_text (const char *label, const char *name, unsigned interval, double now,
            struct view *w)
{
  char why[512];
  uint64_t format;

  if ((w->st = parse_status (w->buf, w->len, why, sizeof why)) == NULL)
    note (w, SEEN_UNKNOWN, "%s: %s", label, why);
  else if (!get_uint (w->st, "format", &format))
    note (w, SEEN_UNKNOWN,
          "%s: no valid \"format\" field: not an nbdstripe "
          "status file",
          label);
  else if (format != STATUS_FORMAT)
    note (w, SEEN_UNKNOWN, "%s: format %" PRIu64 ", expected %d", label,
          format, STATUS_FORMAT);
  else {
    enum verdict v = volume_verdict (w->st);

    w->format_ok = true;
    w->live = check_live (w->st, label, name, interval, now, w);
    if (v == V_UNKNOWN)
      note (w, SEEN_UNKNOWN, "%s: no valid volume state", label);
    else if (w->live) {
      w->state = v == V_OK         ? SEEN_OK
                 : v == V_DEGRADED ? SEEN_DEGRADED
                                   : SEEN_FAILED;
      if (v != V_OK)
        verdict_reason (w->st, v, w->reason, sizeof w->reason);
    }
  }
  w->v = seen_verdict (w->state);
}

static void
view_init (struct view *w, bool print)
{
  memset (w, 0, sizeof *w);
  w->print = print;
  w->state = SEEN_OK; /* nothing noted yet */
  w->v = V_UNKNOWN;
}

void
judge (const char *file, const char *name, unsigned interval, double now,
       bool print, struct view *w)
{
  char why[512];
  struct stat sb;

  view_init (w, print);
  if (read_file (file, &w->buf, &w->len, why, sizeof why) == -1) {
    note (w,
          stat (file, &sb) == -1 && errno == ENOENT ? SEEN_NOT_RUNNING
                                                    : SEEN_UNKNOWN,
          "%s: %s", file, why);
    w->v = seen_verdict (w->state);
    return;
  }
  judge_text (file, name, interval, now, w);
}

/* The live status from the volume's control socket (control.h), judged
 * as a status file is: true when the socket is there and answered with a
 * status; false (nothing said) otherwise, for the file to be read.
 */
bool
judge_live (const char *ctl, const char *name, unsigned interval, double now,
            bool print, struct view *w)
{
  struct json_object *req, *ans, *ok, *st;
  struct stat sb;
  bool done = false;
  char why[1024];

  view_init (w, print);
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
      judge_text (ctl, name, interval, now, w);
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
  case SEEN_NOT_RUNNING: return "not-running";
  case SEEN_STALE: return "stale";
  case SEEN_UNKNOWN: return "unknown";
  }
  return "unknown";
}

enum verdict
seen_verdict (enum seen_state s)
{
  switch (s) {
  case SEEN_OK: return V_OK;
  case SEEN_DEGRADED: return V_DEGRADED;
  case SEEN_FAILED: return V_FAILED;
  default: return V_UNKNOWN;
  }
}

void
status_seen (const char *status_file, const char *name, unsigned interval,
             struct seen *out)
{
  struct view w;
  struct json_object *vol;
  uint64_t pid;

  memset (out, 0, sizeof *out);
  judge (status_file, name, interval, now_unix (), false, &w);
  out->state = w.state;
  snprintf (out->reason, sizeof out->reason, "%s", w.reason);
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
