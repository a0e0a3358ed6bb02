/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: the table for people, as mdadm --detail prints --
 * the volume, its members' counters and latencies, the spares, the last
 * errors.  See status.h.
 */

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "nbdstripe.h"
#include "status.h"

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

/* The verdict, and the server's own word when it says otherwise (a
 * status no live server is behind says nothing of now).
 */
static void
print_state (const struct view *w, struct json_object *vol)
{
  char buf[256];

  printf ("%15s : %s", "State", seen_state_name (w->state));
  if (!w->live)
    printf (" (STALE: the last figures, no live server behind them; "
            "they said %s)",
            get_text (vol, "state", buf, sizeof buf));
  else if (!text_is (vol, "state", seen_state_name (w->state)))
    printf (" (the server says %s)", get_text (vol, "state", buf, sizeof buf));
  putchar ('\n');
}

/* The volume's lost ranges (the status's "lost"), when there are any:
 * the first few, coalesced as the server keeps them.
 */
/* What the allocation map says is in use (moves and scrubs touch only
 * that), or why the volume has none.
 */
static void
print_map (struct json_object *m)
{
  char a[32], b[32], r[32], why[256];
  uint64_t used, free_, region;

  if (m == NULL)
    return;
  if (get_uint (m, "region", &region) && get_uint (m, "bytes_in_use", &used)
      && get_uint (m, "bytes_free", &free_))
    printf ("%15s : %s in use, %s free (regions of %s): moves and scrubs "
            "touch only what is in use\n",
            "Allocation map", human_size (used, a, sizeof a),
            human_size (free_, b, sizeof b),
            exact_size (region, r, sizeof r));
  else if (field (m, "none", json_type_string))
    printf ("%15s : none, %s: moves and scrubs skip only what members "
            "report as holes\n",
            "Allocation map", get_text (m, "none", why, sizeof why));
}

static void
print_lost (struct json_object *lost)
{
  struct json_object *r = field (lost, "ranges", json_type_array);
  size_t n = r ? json_object_array_length (r) : 0;
  char buf[64];
  uint64_t bytes = 0;

  if (n == 0)
    return;
  get_uint (lost, "bytes", &bytes);
  printf ("%15s : %zu range%s, %s, whose data is gone: reads there fail "
          "with EIO until written\n",
          "Lost", n, n == 1 ? "" : "s", human_size (bytes, buf, sizeof buf));
  for (size_t i = 0; i < n && i < 8; ++i) {
    struct json_object *x = json_object_array_get_idx (r, i);
    uint64_t off = 0, len = 0;
    get_uint (x, "offset", &off);
    get_uint (x, "length", &len);
    printf ("%15s   bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 ")\n", "", off,
            off + len - 1, len);
  }
  if (n > 8)
    printf ("%15s   ... %zu more (status --json)\n", "", n - 8);
}

/* Whether a read can fail where data was: a member missing (served
 * degraded), lost ranges, or what the last scrub found unreadable.
 */
static bool
anything_lost (struct json_object *st)
{
  struct json_object *members = field (st, "members", json_type_array);
  struct json_object *lost = field (st, "lost", json_type_object);
  struct json_object *ranges = field (lost, "ranges", json_type_array);
  struct json_object *scrub = field (st, "scrub", json_type_object);
  struct json_object *bad = field (scrub, "unreadable", json_type_array);

  for (size_t i = 0; members && i < json_object_array_length (members); ++i)
    if (text_is (json_object_array_get_idx (members, i), "state", "missing"))
      return true;
  return (ranges && json_object_array_length (ranges))
         || (bad && json_object_array_length (bad));
}

void
print_volume (const struct view *w, const struct stripe_config *cfg,
              double now, const char *ctl)
{
  struct json_object *st = w->st;
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
  print_state (w, vol);
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
  print_map (field (st, "allocation_map", json_type_object));
  print_lost (field (st, "lost", json_type_object));
  /* The command that names the files, as zpool status points to -v. */
  if (anything_lost (st))
    printf ("%15s : nbdstripe lost-files %s\n", "Files touched",
            volume_operand (cfg));
  printf ("%15s : %s\n", "Uptime",
          get_number (vol, "uptime_seconds", &d)
            ? fmt_duration (d, buf, sizeof buf)
            : "?");
  printf ("%15s : %s\n", "Last update",
          fmt_ago (st, "updated_unix", now, buf, sizeof buf));
  running = field (st, "running", json_type_boolean);
  printf ("%15s : pid %s, %s\n", "Server",
          fmt_uint (st, "pid", buf, sizeof buf),
          !w->alive                                       ? "not running"
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

void
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
void
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

void
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
