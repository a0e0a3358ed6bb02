/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: the health of a served volume, asked live of its
 * server through the control socket (control.h) when it answers, else
 * read from the status file the plugin keeps (the same JSON; its format
 * is the big comment at the top of include/health.h).  A table for people, as mdadm --detail prints, or
 * (--json) the file itself; the exit status is the monitoring plugins'
 * convention: 0 ok, 1 degraded, 2 failed, 3 unknown -- the file is
 * missing, not JSON, of another format, or written by a server that is
 * no longer running or updating it.
 *
 * The file is untrusted input: any field may be missing, of another type,
 * huge or negative; it is then shown as "?" (null latencies, which the
 * format allows, as "-").  Strings go to the terminal escaped.  No double
 * is converted to an integer type without a range check first.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "control.h"
#include "json.h"
#include "nbdstripe.h"
#include "utf8.h"
#include "util.h"

/* A status file describes at most 64 members in some 100 KiB; anything
 * much bigger is not one.
 */
#define STATUS_MAX_SIZE (16 * 1024 * 1024)
#define STATUS_FORMAT 1
/* A server that does not answer its control socket within this is
 * busy or hung: the status file then.
 */
#define CONTROL_TIMEOUT_MS 2000

enum verdict { V_OK = 0, V_DEGRADED = 1, V_FAILED = 2, V_UNKNOWN = 3 };

/* Code points a terminal acts on rather than shows: C0 and C1 controls,
 * DEL, line and paragraph separators, and the bidirectional marks and
 * overrides that make text read other than it is.
 */
static bool
unsafe_code_point (unsigned c)
{
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x200e || c == 0x200f
         || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/* Untrusted text (n bytes, NULs included) made safe for a terminal into
 * out: unsafe code points as \uXXXX, bytes that are not UTF-8 as \xNN and
 * a backslash doubled, so that the escapes are unambiguous.  Text longer
 * than out is cut and ends with "...".  Returns out.
 */
const char *
safe_text (const char *s, size_t n, char *out, size_t len)
{
  const unsigned char *p = (const unsigned char *) s;
  size_t o = 0, i = 0;

  while (i < n) {
    char piece[8];
    size_t k;
    unsigned cp;
    size_t u = utf8_decode (&p[i], n - i, &cp);

    if (u == 0) {
      snprintf (piece, sizeof piece, "\\x%02x", p[i]);
      u = 1;
    }
    else if (unsafe_code_point (cp))
      snprintf (piece, sizeof piece, "\\u%04x", cp);
    else if (cp == '\\')
      strcpy (piece, "\\\\");
    else {
      memcpy (piece, &p[i], u);
      piece[u] = '\0';
    }
    k = strlen (piece);
    if (o + k + 4 > len) { /* room for "..." and the NUL */
      strcpy (&out[o], "...");
      return out;
    }
    memcpy (&out[o], piece, k);
    o += k;
    i += u;
  }
  out[o] = '\0';
  return out;
}

/* o[key] if o is an object and the value has that type, else NULL. */
static struct json_object *
field (struct json_object *o, const char *key, enum json_type type)
{
  struct json_object *v;

  if (o == NULL || !json_object_is_type (o, json_type_object)
      || !json_object_object_get_ex (o, key, &v) || v == NULL
      || !json_object_is_type (v, type))
    return NULL;
  return v;
}

/* o[key] is the string s (all of it: JSON strings may hold NULs). */
static bool
text_is (struct json_object *o, const char *key, const char *s)
{
  struct json_object *v = field (o, key, json_type_string);

  return v && (size_t) json_object_get_string_len (v) == strlen (s)
         && strcmp (json_object_get_string (v), s) == 0;
}

/* o[key] is present and null. */
static bool
is_null (struct json_object *o, const char *key)
{
  struct json_object *v;

  return o != NULL && json_object_is_type (o, json_type_object)
         && json_object_object_get_ex (o, key, &v) && v == NULL;
}

/* A non-negative integer (json-c saturates what does not fit in 64 bits;
 * an integral double in range is taken too).
 */
static bool
get_uint (struct json_object *o, const char *key, uint64_t *out)
{
  struct json_object *v;
  double d;

  if ((v = field (o, key, json_type_int)) != NULL) {
    int64_t i = json_object_get_int64 (v);

    if (i < 0)
      return false;
    *out = i == INT64_MAX ? json_object_get_uint64 (v) : (uint64_t) i;
    return true;
  }
  if ((v = field (o, key, json_type_double)) != NULL) {
    d = json_object_get_double (v);
    if (!(d >= 0 && d < 18446744073709551616.0) || d != floor (d))
      return false;
    *out = d;
    return true;
  }
  return false;
}

/* Any finite number (json-c takes NaN and Infinity; 1e400 reads as
 * infinity).
 */
static bool
get_number (struct json_object *o, const char *key, double *out)
{
  struct json_object *v;

  if ((v = field (o, key, json_type_int)) != NULL) {
    int64_t i = json_object_get_int64 (v);

    *out = i == INT64_MAX ? (double) json_object_get_uint64 (v) : (double) i;
    return true;
  }
  if ((v = field (o, key, json_type_double)) != NULL) {
    *out = json_object_get_double (v);
    return isfinite (*out);
  }
  return false;
}

/* o[key] as safe text, "?" when it is not a string. */
static const char *
get_text (struct json_object *o, const char *key, char *buf, size_t len)
{
  struct json_object *v = field (o, key, json_type_string);

  if (v == NULL)
    return "?";
  return safe_text (json_object_get_string (v),
                    (size_t) json_object_get_string_len (v), buf, len);
}

static const char *
fmt_uint (struct json_object *o, const char *key, char *buf, size_t len)
{
  uint64_t u;

  if (!get_uint (o, key, &u))
    return "?";
  snprintf (buf, len, "%" PRIu64, u);
  return buf;
}

/* 1234, 12.3k, 4.56M: a count in a narrow column. */
static const char *
fmt_count (struct json_object *o, const char *key, char *buf, size_t len)
{
  static const char units[] = "kMGTPE";
  uint64_t u;
  double v;
  int i = -1;

  if (!get_uint (o, key, &u))
    return "?";
  if (u < 10000) {
    snprintf (buf, len, "%" PRIu64, u);
    return buf;
  }
  for (v = u; v >= 999.5 && i < 5; v /= 1000)
    i++;
  snprintf (buf, len, v < 100 ? "%.3g%c" : "%.0f%c", v, units[i]);
  return buf;
}

/* 512, 1.5K, 3.7G: bytes in a narrow column, 1024-based as ls -h. */
static const char *
fmt_bytes (struct json_object *o, const char *key, char *buf, size_t len)
{
  static const char units[] = "KMGTPE";
  uint64_t u;
  double v;
  int i = -1;

  if (!get_uint (o, key, &u))
    return "?";
  if (u < 1024) {
    snprintf (buf, len, "%" PRIu64, u);
    return buf;
  }
  for (v = u; v >= 1023.5 && i < 5; v /= 1024)
    i++;
  snprintf (buf, len, v < 100 ? "%.3g%c" : "%.0f%c", v, units[i]);
  return buf;
}

/* A latency in microseconds; "-" for null (no samples). */
static const char *
fmt_latency (struct json_object *o, const char *key, char *buf, size_t len)
{
  double d;

  if (is_null (o, key))
    return "-";
  if (!get_number (o, key, &d) || d < 0)
    return "?";
  if (d < 10)
    snprintf (buf, len, "%.1f", d);
  else if (d < 1e7)
    snprintf (buf, len, "%.0f", d);
  else
    snprintf (buf, len, "%.2g", d);
  return buf;
}

/* "45.2 s", "3m 12s", "2d 4h 0m 5s". */
static const char *
fmt_duration (double s, char *buf, size_t len)
{
  uint64_t t;

  if (!(s >= 0 && s < 1e12)) {
    snprintf (buf, len, "?");
    return buf;
  }
  if (s < 60) {
    snprintf (buf, len, "%.1f s", s);
    return buf;
  }
  t = s;
  if (t < 3600)
    snprintf (buf, len, "%" PRIu64 "m %" PRIu64 "s", t / 60, t % 60);
  else if (t < 86400)
    snprintf (buf, len, "%" PRIu64 "h %" PRIu64 "m %" PRIu64 "s", t / 3600,
              t / 60 % 60, t % 60);
  else
    snprintf (buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m %" PRIu64 "s",
              t / 86400, t / 3600 % 24, t / 60 % 60, t % 60);
  return buf;
}

/* How long ago o[key] (seconds since the epoch) was. */
static const char *
fmt_ago (struct json_object *o, const char *key, double now, char *buf,
         size_t len)
{
  double t, age;

  if (!get_number (o, key, &t)) {
    snprintf (buf, len, "?");
    return buf;
  }
  age = now - t;
  if (!(fabs (age) < 1e12))
    snprintf (buf, len, "?");
  else if (age < 0)
    snprintf (buf, len, "%.1f s in the future", -age);
  else if (age < 10)
    snprintf (buf, len, "%.1f s ago", age);
  else
    snprintf (buf, len, "%.0f s ago", age);
  return buf;
}

/* The whole file, or -1 with the reason in why.  A status file is a
 * regular file (the plugin renames it into place); O_NONBLOCK so that a
 * FIFO in its place cannot hang us.
 */
static int
read_file (const char *path, char **out, size_t *outlen, char *why,
           size_t whylen)
{
  struct stat st;
  char *buf = NULL;
  size_t len = 0, size = 0;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

  if (fd == -1) {
    if (errno == ENOENT)
      snprintf (why, whylen,
                "does not exist: the volume is not served, or its server "
                "has not written it yet");
    else
      snprintf (why, whylen, "open: %m");
    return -1;
  }
  if (fstat (fd, &st) == -1) {
    snprintf (why, whylen, "fstat: %m");
    goto err;
  }
  if (!S_ISREG (st.st_mode)) {
    snprintf (why, whylen, "not a regular file");
    goto err;
  }
  for (;;) {
    ssize_t n;

    if (len == size) {
      char *p;

      if (size >= STATUS_MAX_SIZE) {
        snprintf (why, whylen, "larger than %d bytes: not a status file",
                  STATUS_MAX_SIZE);
        goto err;
      }
      size = size ? size * 2 : 65536;
      p = realloc (buf, size + 1);
      if (p == NULL) {
        snprintf (why, whylen, "%m");
        goto err;
      }
      buf = p;
    }
    n = read (fd, &buf[len], size - len);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      snprintf (why, whylen, "read: %m");
      goto err;
    }
    if (n == 0)
      break;
    len += n;
  }
  close (fd);
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return 0;

err:
  free (buf);
  close (fd);
  return -1;
}

/* json-c's strict mode still takes control characters inside strings
 * and the literals NaN, Infinity and -Infinity: none of them is JSON (RFC
 * 8259) and jq refuses them.  Run on text json-c has accepted, whose
 * strings are therefore well delimited.  Returns the offending byte's
 * offset or -1.
 */
static ssize_t
not_json_at (const char *buf, size_t len)
{
  bool in_string = false, escaped = false;

  for (size_t i = 0; i < len; ++i) {
    unsigned char c = buf[i];

    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      else if (c < 0x20)
        return i;
    }
    else if (c == '"')
      in_string = true;
    else if (c == 'N' || c == 'I')
      return i;
  }
  return -1;
}

/* The file's text as a JSON object, or NULL with the reason in why. */
static struct json_object *
parse_status (const char *buf, size_t len, char *why, size_t whylen)
{
  struct json_tokener *tok = json_tokener_new_ex (JSON_TOKENER_DEFAULT_DEPTH);
  struct json_object *obj;
  enum json_tokener_error e;
  size_t end;
  ssize_t bad;

  if (tok == NULL) {
    snprintf (why, whylen, "out of memory");
    return NULL;
  }
  json_tokener_set_flags (tok,
                          JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  obj = json_tokener_parse_ex (tok, buf, len);
  e = json_tokener_get_error (tok);
  end = json_tokener_get_parse_end (tok);
  json_tokener_free (tok);
  if (e == json_tokener_continue) {
    snprintf (why, whylen, "not valid JSON: it ends early (%s)",
              len ? "truncated" : "empty file");
    json_object_put (obj);
    return NULL;
  }
  if (e != json_tokener_success) {
    snprintf (why, whylen, "not valid JSON: %s at byte %zu",
              json_tokener_error_desc (e), end);
    return NULL;
  }
  while (end < len && buf[end] && strchr (" \t\r\n", buf[end]))
    end++;
  bad = not_json_at (buf, len);
  if (end < len || bad >= 0) {
    snprintf (why, whylen, "not valid JSON: unexpected character at byte %zu",
              bad >= 0 ? (size_t) bad : end);
    json_object_put (obj);
    return NULL;
  }
  if (obj == NULL || !json_object_is_type (obj, json_type_object)) {
    snprintf (why, whylen, "not a JSON object: not an nbdstripe status file");
    json_object_put (obj);
    return NULL;
  }
  return obj;
}

/* Why a status file cannot be trusted: printed one line a reason on
 * stderr (status), or only the first kept (list, stop).  gone: a reason
 * says the server is not there at all.
 */
struct notes {
  bool print;
  bool gone;
  char first[1024];
};

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

/* The status's "on_failing" in one line: "replace (last: member 1
 * replaced: /dev/sdc took the place of /dev/sdb)".
 */
static const char *
on_failing_text (struct json_object *o, char *buf, size_t len)
{
  struct json_object *last = field (o, "last", json_type_object);
  char pb[64], sb[64], mb[32], rb[900];

  get_text (o, "policy", pb, sizeof pb);
  if (last == NULL)
    snprintf (buf, len, "%s", pb);
  else
    snprintf (buf, len, "%s (last: member %s %s: %s)", pb,
              fmt_uint (last, "member", mb, sizeof mb),
              get_text (last, "state", sb, sizeof sb),
              get_text (last, "reason", rb, sizeof rb));
  return buf;
}

static void
print_volume (struct json_object *st, const struct stripe_config *cfg,
              double now, bool live, bool alive, const char *ctl)
{
  struct json_object *replace = field (st, "replace", json_type_object);
  struct json_object *reshape = field (st, "reshape", json_type_object);
  struct json_object *scrub = field (st, "scrub", json_type_object);
  struct json_object *vol = field (st, "volume", json_type_object);
  struct json_object *members = field (st, "members", json_type_array);
  struct json_object *running;
  char buf[1024], buf2[64], path[4096];
  uint64_t u;
  double d;

  printf ("%15s : %s\n", "Volume", get_text (vol, "name", buf, sizeof buf));
  printf ("%15s : %s\n", "UUID",
          is_null (vol, "uuid") ? "none (no header)"
                                : get_text (vol, "uuid", buf, sizeof buf));
  printf ("%15s : %s%s\n", "State", get_text (vol, "state", buf, sizeof buf),
          live ? ""
               : " (STALE: the last figures, no live server behind them)");
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    char reason[1024];
    const char *why;

    if (text_is (m, "state", "ok"))
      continue;
    printf ("%15s   member %s %s", "",
            fmt_uint (m, "index", buf2, sizeof buf2),
            get_text (m, "state", buf, sizeof buf));
    if (get_number (m, "state_since_unix", &d) && now - d >= 0)
      printf (" for %s", fmt_duration (now - d, buf, sizeof buf));
    why = get_text (m, "reason", reason, sizeof reason);
    printf ("%s%s (%s)\n", why[0] ? ": " : "", why,
            get_text (m, "path", path, sizeof path));
  }
  if (get_uint (vol, "size", &u))
    printf ("%15s : %s (%" PRIu64 " bytes)\n", "Size",
            human_size (u, buf, sizeof buf), u);
  else
    printf ("%15s : ?\n", "Size");
  if (get_uint (vol, "chunk", &u))
    printf ("%15s : %s (%" PRIu64 " bytes)\n", "Chunk",
            exact_size (u, buf, sizeof buf), u);
  else
    printf ("%15s : ?\n", "Chunk");
  printf ("%15s : %s\n", "Members",
          fmt_uint (vol, "members", buf, sizeof buf));
  printf ("%15s : %s\n", "Uptime",
          get_number (vol, "uptime_seconds", &d)
            ? fmt_duration (d, buf, sizeof buf)
            : "?");
  printf ("%15s : %s\n", "Last update",
          fmt_ago (st, "updated_unix", now, buf, sizeof buf));
  running = field (st, "running", json_type_boolean);
  printf ("%15s : pid %s, %s\n", "Server",
          fmt_uint (st, "pid", buf, sizeof buf),
          !alive                                          ? "not running"
          : running && !json_object_get_boolean (running) ? "stopped"
                                                          : "running");
  if (replace)
    printf ("%15s : %s\n", "Replace",
            replace_progress (replace, path, sizeof path));
  if (reshape)
    printf ("%15s : %s\n", "Reshape",
            replace_progress (reshape, path, sizeof path));
  if (field (st, "on_failing", json_type_object))
    printf ("%15s : %s\n", "On failing",
            on_failing_text (field (st, "on_failing", json_type_object), path,
                             sizeof path));
  if (scrub)
    printf ("%15s : %s\n", "Scrub", scrub_progress (scrub, path, sizeof path));
  printf ("%15s : %s\n", "Status file", cfg->health.status_file);
  if (ctl)
    printf ("%15s : %s (the live status above came from here)\n",
            "Control socket", ctl);
}

static void
print_members (struct json_object *st)
{
  struct json_object *members = field (st, "members", json_type_array);
  struct json_object *health = field (st, "health", json_type_object);
  char w[32];

  printf ("\nMembers (latency in microseconds over the last %s s):\n",
          fmt_uint (health, "window", w, sizeof w));
  printf ("%4s %-8s %10s %7s %5s %10s %7s %5s %-15s %7s %7s %7s %7s  %s\n",
          "#", "STATE", "READS", "R.BYTES", "R.ERR", "WRITES", "W.BYTES",
          "W.ERR", "TRIM/ZERO/FLUSH", "R.P50", "R.P99", "W.P50", "W.P99",
          "PATH");
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    struct json_object *ops = field (m, "ops", json_type_object);
    struct json_object *rd = field (ops, "read", json_type_object);
    struct json_object *wr = field (ops, "write", json_type_object);
    struct json_object *rl = field (rd, "latency_us", json_type_object);
    struct json_object *wl = field (wr, "latency_us", json_type_object);
    char idx[32], state[32], b[14][32], tzf[100], path[4096];

    snprintf (tzf, sizeof tzf, "%s/%s/%s",
              fmt_count (field (ops, "trim", json_type_object), "requests",
                         b[8], sizeof b[8]),
              fmt_count (field (ops, "zero", json_type_object), "requests",
                         b[9], sizeof b[9]),
              fmt_count (field (ops, "flush", json_type_object), "requests",
                         b[10], sizeof b[10]));
    printf ("%4s %-8s %10s %7s %5s %10s %7s %5s %-15s %7s %7s %7s %7s  %s\n",
            fmt_uint (m, "index", idx, sizeof idx),
            get_text (m, "state", state, sizeof state),
            fmt_uint (rd, "requests", b[0], sizeof b[0]),
            fmt_bytes (rd, "bytes", b[1], sizeof b[1]),
            fmt_uint (rd, "errors", b[2], sizeof b[2]),
            fmt_uint (wr, "requests", b[3], sizeof b[3]),
            fmt_bytes (wr, "bytes", b[4], sizeof b[4]),
            fmt_uint (wr, "errors", b[5], sizeof b[5]), tzf,
            fmt_latency (rl, "p50", b[6], sizeof b[6]),
            fmt_latency (rl, "p99", b[7], sizeof b[7]),
            fmt_latency (wl, "p50", b[11], sizeof b[11]),
            fmt_latency (wl, "p99", b[12], sizeof b[12]),
            get_text (m, "path", path, sizeof path));
  }
}

/* The hot spares (the status's "spares"), when the volume has any. */
static void
print_spares (struct json_object *st)
{
  struct json_object *spares = field (st, "spares", json_type_array);

  if (spares == NULL)
    return;
  printf ("\nSpares (%zu; held by the server while it serves the volume):\n",
          json_object_array_length (spares));
  if (json_object_array_length (spares) == 0) {
    printf ("  none left\n");
    return;
  }
  printf ("%4s %-6s %-7s %10s  %s\n", "#", "USABLE", "CLAIMED", "SIZE",
          "PATH");
  for (size_t i = 0; i < json_object_array_length (spares); ++i) {
    struct json_object *s = json_object_array_get_idx (spares, i);
    struct json_object *u = field (s, "usable", json_type_boolean);
    struct json_object *c = field (s, "claimed", json_type_boolean);
    char size[32], path[4096], why[1024];
    uint64_t n;

    snprintf (size, sizeof size, "-");
    if (get_uint (s, "size", &n))
      human_size (n, size, sizeof size);
    get_text (s, "reason", why, sizeof why);
    printf ("%4zu %-6s %-7s %10s  %s%s%s\n", i,
            u == NULL                     ? "?"
            : json_object_get_boolean (u) ? "yes"
                                          : "no",
            c == NULL                     ? "?"
            : json_object_get_boolean (c) ? "yes"
                                          : "no",
            size, get_text (s, "path", path, sizeof path),
            why[0] && strcmp (why, "?") != 0 ? ": " : "",
            strcmp (why, "?") != 0 ? why : "");
  }
}

/* Seconds ahead in words: "in 2.1 years", "in 45 days", "in 5.2 h". */
static const char *
fmt_ahead (double s, char *buf, size_t len)
{
  if (s >= 2 * 365.25 * 86400)
    snprintf (buf, len, "in %.1f years", s / (365.25 * 86400));
  else if (s >= 2 * 86400)
    snprintf (buf, len, "in %.0f days", s / 86400);
  else if (s >= 3600)
    snprintf (buf, len, "in %.1f h", s / 3600);
  else
    snprintf (buf, len, "in %.0f min", ceil (s / 60));
  return buf;
}

/* A byte figure of a drive, "-" when null or missing. */
static const char *
fmt_drive_bytes (struct json_object *o, const char *key, char *buf,
                 size_t len)
{
  double d;

  if (!get_number (o, key, &d) || d < 0 || d >= 1.8e19)
    return "-";
  return human_size ((uint64_t) d, buf, len);
}

/* The drives side by side (the status's "drive" objects): members of a
 * RAID-0 wear at the same rate and tend to reach their rated endurance
 * together; this is where a user sees it coming.  Printed when a member
 * has a drive at all.
 */
static void
print_drives (struct json_object *st)
{
  struct json_object *members = field (st, "members", json_type_array);
  struct json_object *health = field (st, "health", json_type_object);
  bool any = false;
  char iv[32];

  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    if (field (field (m, "drive", json_type_object), "kind",
               json_type_string))
      any = true;
  }
  if (!any)
    return;
  printf ("\nDrives (read every %s s; wear at the recent write rate):\n",
          fmt_uint (health, "drive_interval", iv, sizeof iv));
  printf ("%4s %-5s %5s %5s %11s %11s %11s %11s  %-16s %s\n", "#", "KIND",
          "TEMP", "USED", "SPARE", "WRITTEN", "RATE", "ENDURANCE",
          "REACHES IT", "HEALTH");
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    struct json_object *d = field (m, "drive", json_type_object);
    struct json_object *w = field (d, "wear", json_type_object);
    struct json_object *avail = field (d, "available", json_type_boolean);
    char idx[32], kind[32], temp[32], used[32], spare[64], written[32];
    char rate[32], endur[32], when[64], health_text[1024], why[1024];
    char hr[32];
    const char *wr, *en;
    uint64_t u, t;
    double x;

    fmt_uint (m, "index", idx, sizeof idx);
    if (!field (d, "kind", json_type_string)) {
      printf ("%4s %-5s not available: %s\n", idx, "-",
              field (d, "reason", json_type_string)
                ? get_text (d, "reason", why, sizeof why)
                : "(no drive information)");
      continue;
    }
    get_text (d, "kind", kind, sizeof kind);
    snprintf (temp, sizeof temp, "-");
    if (get_number (d, "temperature_celsius", &x) && fabs (x) < 1000)
      snprintf (temp, sizeof temp, "%.0fC", x);
    snprintf (used, sizeof used, "-");
    if (get_uint (d, "percentage_used", &u) && u < 1000)
      snprintf (used, sizeof used, "%" PRIu64 "%%", u);
    snprintf (spare, sizeof spare, "-");
    if (get_uint (d, "available_spare", &u) && u < 1000) {
      if (get_uint (d, "available_spare_threshold", &t) && t < 1000)
        snprintf (spare, sizeof spare, "%" PRIu64 "%%/%" PRIu64 "%%", u, t);
      else
        snprintf (spare, sizeof spare, "%" PRIu64 "%%", u);
    }
    wr = fmt_drive_bytes (d, "data_written_bytes", written, sizeof written);
    snprintf (rate, sizeof rate, "-");
    if (get_number (w, "write_rate_bytes_per_second", &x) && x >= 0
        && x < 1.8e19)
      snprintf (rate, sizeof rate, "%s/s",
                human_size ((uint64_t) x, hr, sizeof hr));
    en = fmt_drive_bytes (w, "rated_endurance_bytes", endur, sizeof endur);
    if (text_is (w, "estimate", "reached"))
      snprintf (when, sizeof when, "reached");
    else if (text_is (w, "estimate", "not_writing"))
      snprintf (when, sizeof when, "not at this rate");
    else if (text_is (w, "estimate", "estimated")
             && get_number (w, "seconds_to_rated_endurance", &x) && x >= 0
             && x < 1e13)
      fmt_ahead (x, when, sizeof when);
    else
      snprintf (when, sizeof when, "-");
    if (field (d, "predicts_failure", json_type_string))
      get_text (d, "predicts_failure", health_text, sizeof health_text);
    else if (text_is (d, "smart_status", "failing"))
      snprintf (health_text, sizeof health_text, "SMART: failing");
    else
      snprintf (health_text, sizeof health_text, "ok");
    if (avail && !json_object_get_boolean (avail)) {
      char r[400];
      size_t n = strlen (health_text);
      snprintf (&health_text[n], sizeof health_text - n,
                " (now unreadable: %s)",
                field (d, "reason", json_type_string)
                  ? get_text (d, "reason", r, sizeof r)
                  : "?");
    }
    printf ("%4s %-5s %5s %5s %11s %11s %11s %11s  %-16s %s\n", idx, kind,
            temp, used, spare, wr, rate, en, when, health_text);
  }
}

static void
print_last_errors (struct json_object *st, double now)
{
  struct json_object *members = field (st, "members", json_type_array);
  bool header = false;

  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i);
    struct json_object *e = field (m, "last_error", json_type_object);
    char idx[32], op[64], name[64], msg[1024], off[32], ago[64], num[32];
    uint64_t u;

    if (e == NULL)
      continue;
    if (!header)
      printf ("\nLast errors:\n");
    header = true;
    if (field (e, "error", json_type_string))
      get_text (e, "error", name, sizeof name);
    else if (get_uint (e, "errno", &u) && u <= INT_MAX
             && strerrorname_np ((int) u))
      snprintf (name, sizeof name, "%s", strerrorname_np ((int) u));
    else
      snprintf (name, sizeof name, "?");
    printf ("  member %s: %s %s (errno %s, %s) at member offset %s, %s\n",
            fmt_uint (m, "index", idx, sizeof idx),
            get_text (e, "op", op, sizeof op), name,
            fmt_uint (e, "errno", num, sizeof num),
            get_text (e, "message", msg, sizeof msg),
            fmt_uint (e, "offset", off, sizeof off),
            fmt_ago (e, "time_unix", now, ago, sizeof ago));
  }
}

/* A replace object (the status's "replace", replace.h) in one line:
 * "member 1 -> /dev/sdc: copying, 37% (1.2GiB of 3.2GiB), 410MiB/s,
 * ETA 5 s"; a reshape's ("reshape", reshape.h): "grow, 2 -> 3 members:
 * copying, ...".  Untrusted input as the rest: a field missing or of another
 * type is "?".
 */
const char *
replace_progress (struct json_object *r, char *buf, size_t len)
{
  char ib[32], nb[1024], sb[64], cb[32], tb[32], rb[32], db[64];
  char eta[64] = "", err[1024] = "", lost[64] = "", pct[32] = "?";
  const char *copied = "?", *total = "?", *rate = "?";
  struct json_object *l = field (r, "unreadable", json_type_array);
  uint64_t c = 0, t = 0;
  bool have_c = get_uint (r, "bytes_copied", &c);
  bool have_t = get_uint (r, "bytes_total", &t);
  double d;

  if (have_c)
    copied = human_size (c, cb, sizeof cb);
  if (have_t)
    total = human_size (t, tb, sizeof tb);
  if (have_c && have_t && c <= t)
    snprintf (pct, sizeof pct, "%d%%",
              t ? (int) ((long double) c * 100 / t) : 100);
  if (get_number (r, "rate", &d) && d >= 0 && d < 1e18)
    rate = human_size ((uint64_t) d, rb, sizeof rb);
  if (text_is (r, "state", "copying")) {
    if (get_number (r, "eta_seconds", &d) && d >= 0 && d < 1e9)
      snprintf (eta, sizeof eta, ", ETA %.0f s", ceil (d));
  }
  else if (get_number (r, "elapsed_seconds", &d) && d >= 0 && d < 1e9)
    snprintf (eta, sizeof eta, ", in %s", fmt_duration (d, db, sizeof db));
  if (field (r, "error", json_type_string)
      && !text_is (r, "state", "cancelled")) {
    char e[900];
    snprintf (err, sizeof err, ": %s", get_text (r, "error", e, sizeof e));
  }
  if (l && json_object_array_length (l) > 0)
    snprintf (lost, sizeof lost, ", %zu unreadable range%s",
              json_object_array_length (l),
              json_object_array_length (l) == 1 ? "" : "s");
  if (field (r, "kind", json_type_string)) { /* a reshape */
    char fb[32], tob[32];
    snprintf (nb, sizeof nb, "%s, %s -> %s members",
              get_text (r, "kind", ib, sizeof ib),
              fmt_uint (r, "members_from", fb, sizeof fb),
              fmt_uint (r, "members_to", tob, sizeof tob));
    snprintf (buf, len, "%s: %s, %s (%s of %s), %s/s%s%s%s", nb,
              get_text (r, "state", sb, sizeof sb), pct, copied, total, rate,
              eta, lost, err);
    return buf;
  }
  snprintf (buf, len, "member %s -> %s: %s, %s (%s of %s), %s/s%s%s%s",
            fmt_uint (r, "member", ib, sizeof ib),
            get_text (r, "new", nb, sizeof nb),
            get_text (r, "state", sb, sizeof sb), pct, copied, total, rate,
            eta, lost, err);
  return buf;
}

const char *
scrub_progress (struct json_object *s, char *buf, size_t len)
{
  char sb[64], cb[32], tb[32], rb[32], db[64], eta[64] = "", lost[64] = "";
  char err[1024] = "", pct[32] = "?";
  const char *done = "?", *total = "?", *rate = "?";
  struct json_object *l = field (s, "unreadable", json_type_array);
  uint64_t c = 0, t = 0;
  bool have_c = get_uint (s, "bytes_read", &c);
  bool have_t = get_uint (s, "bytes_total", &t);
  double d;

  if (have_c)
    done = human_size (c, cb, sizeof cb);
  if (have_t)
    total = human_size (t, tb, sizeof tb);
  if (have_c && have_t && c <= t)
    snprintf (pct, sizeof pct, "%d%%",
              t ? (int) ((long double) c * 100 / t) : 100);
  if (get_number (s, "rate", &d) && d >= 0 && d < 1e18)
    rate = human_size ((uint64_t) d, rb, sizeof rb);
  if (text_is (s, "state", "running")) {
    if (get_number (s, "eta_seconds", &d) && d >= 0 && d < 1e9)
      snprintf (eta, sizeof eta, ", ETA %.0f s", ceil (d));
  }
  else if (get_number (s, "elapsed_seconds", &d) && d >= 0 && d < 1e9)
    snprintf (eta, sizeof eta, ", in %s", fmt_duration (d, db, sizeof db));
  if (l)
    snprintf (lost, sizeof lost, ", %zu unreadable range%s",
              json_object_array_length (l),
              json_object_array_length (l) == 1 ? "" : "s");
  if (field (s, "error", json_type_string)) {
    char e[900];
    snprintf (err, sizeof err, ": %s", get_text (s, "error", e, sizeof e));
  }
  snprintf (buf, len, "%s, %s (%s of %s), %s/s%s%s%s",
            get_text (s, "state", sb, sizeof sb), pct, done, total, rate, eta,
            lost, err);
  return buf;
}

/* A status file, read and judged. */
struct view {
  char *buf; /* the file's text */
  size_t len;
  struct json_object *st; /* NULL: not a JSON object */
  bool format_ok;         /* of STATUS_FORMAT */
  bool live, alive;
  bool from_socket;       /* the control socket's live answer */
  enum verdict v;
};

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

static void
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
static bool
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

static void
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

/* status --json when there is no status to print: still JSON, saying
 * why (the first reason; all of them are on stderr).
 */
static void
print_unknown_json (const char *config, const char *name,
                    const char *status_file, const char *reason)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *vol = json_object_new_object ();

  json_put (o, "state", json_text ("unknown"));
  json_put (o, "reason", json_text (reason));
  json_put (o, "config", json_text (config));
  json_put (o, "status_file", json_text (status_file));
  /* So that .volume.state reads as it does for a status file. */
  json_put (vol, "name", json_text (name));
  json_put (vol, "state", json_text ("unknown"));
  json_put (o, "volume", vol);
  print_json (o);
}

int
cmd_status (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct notes n = { .print = true };
  struct view w = { .v = V_UNKNOWN };
  char hs[32], err[1024], ctl[4096];
  bool json = false;
  double now = now_unix ();
  int c;

  /* Usage errors exit 3 (unknown), not 2: to a monitoring script 2
   * means the volume has failed (cmd->usage_status).
   */
  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;

  if (load_volume (argv[optind], &cfg, err, sizeof err) == -1) {
    if (json)
      print_unknown_json (argv[optind], NULL, NULL, err);
    config_free (&cfg);
    return V_UNKNOWN;
  }

  /* Live from the server when it answers, else its last status file. */
  control_path (cfg.health.status_file, ctl, sizeof ctl);
  if (!judge_live (ctl, cfg.name, cfg.health.set.interval, now, &n, &w))
    judge (cfg.health.status_file, cfg.name, cfg.health.set.interval, now,
           &n, &w);

  if (json) {
    /* Any valid JSON object, even of another format: the caller judges. */
    if (w.st) {
      fwrite (w.buf, 1, w.len, stdout);
      if (w.len && w.buf[w.len - 1] != '\n')
        putchar ('\n');
    }
    else
      print_unknown_json (cfg.path, cfg.name, cfg.health.status_file, n.first);
    goto out;
  }

  printf ("%s:\n", cfg.path);
  if (w.format_ok) {
    print_volume (w.st, &cfg, now, w.live, w.alive,
                  w.from_socket ? ctl : NULL);
    print_members (w.st);
    print_spares (w.st);
    print_drives (w.st);
    print_last_errors (w.st, now);
  }
  else {
    printf ("%15s : %s\n", "Volume", cfg.name);
    printf ("%15s : unknown (no status: see the message above)\n", "State");
    printf ("%15s : %s\n", "Status file", cfg.health.status_file);
  }
  printf ("\nStripe geometry for mkfs (chunk %s, %u members):\n",
          exact_size (cfg.chunk, hs, sizeof hs), cfg.nr_members);
  print_mkfs_geometry (cfg.chunk, cfg.nr_members);

out:
  view_free (&w);
  config_free (&cfg);
  return w.v;
}
