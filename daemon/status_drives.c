/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: the members' drives side by side -- wear, data
 * written, when each reaches its rated endurance, what a drive predicts.
 * See status.h.
 */

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "nbdstripe.h"
#include "status.h"

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
void
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
