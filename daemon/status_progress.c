/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: a replace, a reshape or a scrub under way, in one
 * line (status prints it; replace, grow, shrink and scrub --wait too).
 * See status.h.
 */

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include <json-c/json.h>

#include "nbdstripe.h"
#include "status.h"

/* A replace object (the status's "replace", replace.h) in one line:
 * "member 1 -> /dev/sdc: copying, 37% (1.2GiB of 3.2GiB), 410MiB/s,
 * ETA 5 s"; a reshape's ("reshape", reshape.h): "grow, 2 -> 3 members:
 * copying, ...".  Untrusted input as the rest: a field missing or of another
 * type is "?".
 */
/* ", N free" when the allocation map spared N bytes of the work. */
static void
free_part (struct json_object *o, char *buf, size_t len)
{
  uint64_t n;
  char nb[32];

  if (get_uint (o, "bytes_free", &n) && n > 0)
    snprintf (buf, len, ", %s free", human_size (n, nb, sizeof nb));
}

const char *
replace_progress (struct json_object *r, char *buf, size_t len)
{
  char ib[32], nb[1024], sb[64], cb[32], tb[32], rb[32], db[64];
  char eta[64] = "", err[1024] = "", lost[64] = "", pct[32] = "?";
  char free_[64] = "";
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
  free_part (r, free_, sizeof free_);
  if (field (r, "kind", json_type_string)) { /* a reshape */
    char fb[32], tob[32];
    snprintf (nb, sizeof nb, "%s, %s -> %s members",
              get_text (r, "kind", ib, sizeof ib),
              fmt_uint (r, "members_from", fb, sizeof fb),
              fmt_uint (r, "members_to", tob, sizeof tob));
    snprintf (buf, len, "%s: %s, %s (%s of %s%s), %s/s%s%s%s", nb,
              get_text (r, "state", sb, sizeof sb), pct, copied, total,
              free_, rate, eta, lost, err);
    return buf;
  }
  snprintf (buf, len, "member %s -> %s: %s, %s (%s of %s%s), %s/s%s%s%s",
            fmt_uint (r, "member", ib, sizeof ib),
            get_text (r, "new", nb, sizeof nb),
            get_text (r, "state", sb, sizeof sb), pct, copied, total, free_,
            rate, eta, lost, err);
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
  /* bytes_done: read, free or given up (older servers: bytes_read). */
  bool have_c = get_uint (s, "bytes_done", &c)
                || get_uint (s, "bytes_read", &c);
  bool have_t = get_uint (s, "bytes_total", &t);
  char free_[64] = "";
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
  free_part (s, free_, sizeof free_);
  snprintf (buf, len, "%s, %s (%s of %s%s), %s/s%s%s%s",
            get_text (s, "state", sb, sizeof sb), pct, done, total, free_,
            rate, eta, lost, err);
  return buf;
}
