/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: a status's fields as text for people -- untrusted
 * text escaped for the terminal, figures in narrow columns, durations
 * and ages; "?" for what is missing or of another type.  See status.h.
 */

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "nbdstripe.h"
#include "status.h"
#include "utf8.h"

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

/* o[key] as safe text, "?" when it is not a string. */
const char *
get_text (struct json_object *o, const char *key, char *buf, size_t len)
{
  struct json_object *v = field (o, key, json_type_string);

  if (v == NULL)
    return "?";
  return safe_text (json_object_get_string (v),
                    (size_t) json_object_get_string_len (v), buf, len);
}

const char *
fmt_uint (struct json_object *o, const char *key, char *buf, size_t len)
{
  uint64_t u;

  if (!get_uint (o, key, &u))
    return "?";
  snprintf (buf, len, "%" PRIu64, u);
  return buf;
}

/* 1234, 12.3k, 4.56M: a count in a narrow column. */
const char *
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
const char *
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
const char *
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
const char *
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
const char *
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
