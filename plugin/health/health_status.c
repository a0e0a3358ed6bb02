/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's status files -- JSON always (the format is in
 * include/health.h), Prometheus text optionally -- built under the lock
 * and written atomically without it.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "health_impl.h"
#include "json.h"
#include "log.h"
#include "util.h"

/* The status (health.h's format 1), built under the lock. */
static char *
build_json (struct health *h, bool running, double now,
            struct json_object *extra, size_t *len)
{
  struct json_object *root = json_object_new_object ();
  struct json_object *vol = json_object_new_object ();
  struct json_object *hp = json_object_new_object ();
  struct json_object *members = json_object_new_array ();
  char *text;

  json_put (root, "format", json_object_new_int (1));
  json_put (root, "running", json_object_new_boolean (running));
  json_put (root, "pid", json_object_new_int64 (getpid ()));
  json_put (root, "updated_unix", json_number (now, "%.3f"));
  json_put (root, "interval", json_object_new_int64 (h->p.set.interval));

  json_put (vol, "name", json_text (h->p.name));
  json_put (vol, "uuid", json_text (h->p.uuid));
  json_put (vol, "config", json_text (h->p.config));
  json_put (vol, "size", json_u64 (h->p.size));
  json_put (vol, "chunk", json_u64 (h->p.chunk));
  json_put (vol, "members", json_object_new_int64 (h->n));
  json_put (vol, "state",
            json_text (volume_state_name (health_vol_state (h))));
  json_put (vol, "started_unix", json_number (h->started_unix, "%.3f"));
  json_put (vol, "uptime_seconds",
            json_number (floor (now - h->started_unix), "%.0f"));
  json_put (root, "volume", vol);

  json_put (hp, "window", json_object_new_int64 (h->p.set.window));
  json_put (hp, "slow_factor", json_number (h->p.set.slow_factor, "%g"));
  json_put (hp, "error_threshold",
            json_object_new_int64 (h->p.set.error_threshold));
  json_put (hp, "min_samples", json_object_new_int64 (h->p.set.min_samples));
  json_put (hp, "io_timeout", json_object_new_int64 (h->p.set.io_timeout));
  json_put (hp, "probe_interval",
            json_object_new_int64 (h->p.set.probe_interval));
  json_put (hp, "drive_interval",
            json_object_new_int64 (h->p.set.drive_interval));
  json_put (root, "health", hp);

  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    struct json_object *jm = json_object_new_object ();
    struct json_object *ops = json_object_new_object ();

    json_put (jm, "index", json_object_new_int64 (i));
    json_put (jm, "path", json_text (m->path));
    json_put (jm, "state",
              json_text (health_state_names[atomic_load (&m->state)]));
    json_put (jm, "state_since_unix", json_number (m->since, "%.3f"));
    json_put (jm, "reason", json_text (m->reason));
    json_put (jm, "consecutive_errors",
              json_object_new_int64 (atomic_load (&m->consecutive)));
    json_put (jm, "rejected", json_u64 (atomic_load (&m->rejected)));
    for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
      struct json_object *jo = json_object_new_object ();
      struct json_object *win = json_object_new_object ();
      struct json_object *tot = json_object_new_object ();
      uint64_t hb[NBUCKETS], samples, sum;

      json_put (jo, "requests", json_u64 (atomic_load (&m->requests[op])));
      json_put (jo, "bytes", json_u64 (atomic_load (&m->bytes[op])));
      json_put (jo, "errors", json_u64 (atomic_load (&m->errors[op])));
      health_op_hist (hb, &sum, m->win, op);
      json_put (
        win, "p50",
        json_number (health_quantile_ns (hb, 0.50, sum, &samples) / 1000,
                     "%.1f"));
      json_put (
        win, "p99",
        json_number (health_quantile_ns (hb, 0.99, sum, NULL) / 1000, "%.1f"));
      json_put (win, "samples", json_u64 (samples));
      json_put (jo, "latency_us", win);
      health_op_hist_live (hb, &sum, m, op);
      json_put (
        tot, "p50",
        json_number (health_quantile_ns (hb, 0.50, sum, NULL) / 1000, "%.1f"));
      json_put (
        tot, "p99",
        json_number (health_quantile_ns (hb, 0.99, sum, NULL) / 1000, "%.1f"));
      json_put (tot, "sum", json_number (sum / 1000.0, "%.1f"));
      json_put (jo, "total_latency_us", tot);
      json_put (ops, op_name (op), jo);
    }
    json_put (jm, "ops", ops);
    json_put (jm, "drive", health_drive_json (h, i));
    if (!m->has_last_error)
      json_put (jm, "last_error", NULL);
    else {
      struct json_object *le = json_object_new_object ();
      const char *name = health_errno_name (m->le_errno);

      json_put (le, "op", json_text (op_name (m->le_op)));
      json_put (le, "errno", json_object_new_int (m->le_errno));
      json_put (le, "error", json_text (name ? name : ""));
      json_put (le, "message", json_text (strerror (m->le_errno)));
      json_put (le, "offset", json_u64 (m->le_offset));
      json_put (le, "time_unix", json_number (m->le_time, "%.3f"));
      json_put (jm, "last_error", le);
    }
    json_object_array_add (members, jm);
  }
  json_put (root, "members", members);
  json_put (root, "on_failing", health_spare_json (h));
  if (extra) {
    json_object_object_foreach (extra, key, val)
      json_put (root, key, json_object_get (val));
  }

  text = json_text_of (root);
  json_object_put (root);
  if (text)
    *len = strlen (text);
  return text;
}

/* A Prometheus label value: \ " and newline escaped. */
static void
prom_str (FILE *fp, const char *s)
{
  for (; s && *s; ++s) {
    if (*s == '\\' || *s == '"')
      fprintf (fp, "\\%c", *s);
    else if (*s == '\n')
      fputs ("\\n", fp);
    else
      fputc (*s, fp);
  }
}

/* Drive health gauges (health_drive.c keeps the readings): whether the
 * last reading worked, whether the drive predicts a failure, and the
 * figures of the last reading that worked (a figure the drive does not
 * report has no sample; nor has a member never read).
 */
static void
prom_drive (struct health *h, FILE *fp)
{
  static const struct {
    const char *name, *help;
    size_t off;
    bool nvme; /* NVMe's critical warning: an int */
  } g[] = {
#define F(f) offsetof (struct drive_health, f)
    { "critical_warning", "NVMe critical warning bits (0: none).",
      F (critical_warning), true },
    { "temperature_celsius", "Drive temperature.", F (temperature_c), false },
    { "power_on_hours", "Drive power-on hours.", F (power_on_hours), false },
    { "percentage_used", "Drive wear: percent of its rated endurance used "
      "(NVMe; ATA: 100 minus the wear levelling count).",
      F (percentage_used), false },
    { "data_written_bytes", "Bytes written to the drive in its life.",
      F (data_written_bytes), false },
    { "available_spare_percent", "NVMe available spare.",
      F (available_spare), false },
    { "available_spare_threshold_percent",
      "NVMe available spare threshold.", F (spare_threshold), false },
    { "media_errors", "NVMe media and data integrity errors (life).",
      F (media_errors), false },
    { "unsafe_shutdowns", "NVMe unsafe shutdowns (life).",
      F (unsafe_shutdowns), false },
    { "reallocated_sectors", "ATA reallocated sectors.",
      F (reallocated_sectors), false },
    { "pending_sectors", "ATA pending sectors.", F (pending_sectors), false },
    { "offline_uncorrectable_sectors", "ATA offline uncorrectable sectors.",
      F (offline_uncorrectable), false },
    { "wear_leveling_count", "ATA wear levelling count (normalized).",
      F (wear_leveling_count), false },
#undef F
  };

#define LABELS(i)                                                             \
  do {                                                                        \
    fputs ("{volume=\"", fp);                                                 \
    prom_str (fp, h->p.name);                                                 \
    fprintf (fp, "\",member=\"%u\"}", (i));                                   \
  } while (0)

  fputs ("# HELP nbdstripe_member_drive_available Whether the last reading "
         "of the member's drive health worked.\n"
         "# TYPE nbdstripe_member_drive_available gauge\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    fputs ("nbdstripe_member_drive_available", fp);
    LABELS (i);
    fprintf (fp, " %d\n",
             h->m[i].drive_read_once && h->m[i].drive_error[0] == '\0');
  }
  fputs ("# HELP nbdstripe_member_drive_predicts_failure Whether the "
         "member's drive predicts its failure (the member is failing).\n"
         "# TYPE nbdstripe_member_drive_predicts_failure gauge\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    fputs ("nbdstripe_member_drive_predicts_failure", fp);
    LABELS (i);
    fprintf (fp, " %d\n", h->m[i].drive_reason[0] != '\0');
  }
  for (size_t k = 0; k < sizeof g / sizeof g[0]; ++k) {
    bool head = false;
    for (unsigned i = 0; i < h->n; ++i) {
      const char *d = (const char *) &h->m[i].drive;
      int64_t v = g[k].nvme ? *(const int *) (d + g[k].off)
                            : *(const int64_t *) (d + g[k].off);
      if (!h->m[i].have_drive || v == DRIVE_NA)
        continue;
      if (!head)
        fprintf (fp, "# HELP nbdstripe_member_drive_%s %s\n"
                 "# TYPE nbdstripe_member_drive_%s gauge\n",
                 g[k].name, g[k].help, g[k].name);
      head = true;
      fprintf (fp, "nbdstripe_member_drive_%s", g[k].name);
      LABELS (i);
      fprintf (fp, " %" PRId64 "\n", v);
    }
  }
#undef LABELS
}

/* The latency histograms' le bounds: every power of two of ns from
 * 2^PROM_LE_MIN (1.024 us) to 2^PROM_LE_MAX (68.7 s).  Each is an edge of
 * the internal buckets (health_impl.h), so the counts at them are exact.
 */
#define PROM_LE_MIN 10
#define PROM_LE_MAX 36

/* The labels a series starts with: {volume="NAME", and a member's
 * ,member="I" after it; the caller adds its own and closes the brace.
 */
static void
prom_vol (struct health *h, FILE *fp)
{
  fputs ("{volume=\"", fp);
  prom_str (fp, h->p.name);
  fputc ('"', fp);
}

static void
prom_mem (struct health *h, FILE *fp, unsigned i)
{
  prom_vol (h, fp);
  fprintf (fp, ",member=\"%u\"", i);
}

/* The volume: up, when written, its UUID, state, size, start. */
static void
prom_volume (struct health *h, FILE *fp, bool running, double now)
{
  static const char *const vstates[] = { "ok", "degraded", "failed" };
  enum volume_state vs = health_vol_state (h);

  fputs ("# HELP nbdstripe_up Whether the server is serving the volume "
         "(0: it has stopped, this was its last write).\n"
         "# TYPE nbdstripe_up gauge\nnbdstripe_up",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %d\n", running);
  fputs ("# HELP nbdstripe_last_update_timestamp_seconds When the server "
         "wrote this file (Unix time).\n"
         "# TYPE nbdstripe_last_update_timestamp_seconds gauge\n"
         "nbdstripe_last_update_timestamp_seconds",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %.3f\n", now);
  fputs ("# HELP nbdstripe_volume_info The volume (value always 1).\n"
         "# TYPE nbdstripe_volume_info gauge\nnbdstripe_volume_info",
         fp);
  prom_vol (h, fp);
  fputs (",uuid=\"", fp);
  prom_str (fp, h->p.uuid ? h->p.uuid : "");
  fputs ("\"} 1\n", fp);
  fputs ("# HELP nbdstripe_volume_state The volume state (1 for the "
         "current one; all 0 once stopped).\n"
         "# TYPE nbdstripe_volume_state gauge\n",
         fp);
  for (unsigned k = 0; k < 3; ++k) {
    fputs ("nbdstripe_volume_state", fp);
    prom_vol (h, fp);
    fprintf (fp, ",state=\"%s\"} %d\n", vstates[k],
             running && (unsigned) vs == k);
  }
  fputs ("# HELP nbdstripe_volume_size_bytes The volume size.\n"
         "# TYPE nbdstripe_volume_size_bytes gauge\n"
         "nbdstripe_volume_size_bytes",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %" PRIu64 "\n", h->p.size);
  fputs ("# HELP nbdstripe_volume_start_time_seconds When the server "
         "started (Unix time).\n"
         "# TYPE nbdstripe_volume_start_time_seconds gauge\n"
         "nbdstripe_volume_start_time_seconds",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %.3f\n", h->started_unix);
}

static void
prom_member_states (struct health *h, FILE *fp, bool running)
{
  fputs ("# HELP nbdstripe_member_state The member state (1 for the "
         "current one; all 0 once stopped).\n"
         "# TYPE nbdstripe_member_state gauge\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    enum member_state s = atomic_load (&h->m[i].state);
    for (unsigned k = 0; k <= MS_FAILED; ++k) {
      fputs ("nbdstripe_member_state", fp);
      prom_mem (h, fp, i);
      fputs (",path=\"", fp);
      prom_str (fp, h->m[i].path);
      fprintf (fp, "\",state=\"%s\"} %d\n", health_state_names[k],
               running && s == k);
    }
  }
}

/* One operation's counters of every member: requests, bytes, errors. */
static void
prom_member_counters (struct health *h, FILE *fp, enum op_kind op)
{
  const char *on = op_name (op);

  fprintf (fp,
           "# HELP nbdstripe_member_%s_requests_total Requests sent to "
           "the member (%s).\n"
           "# TYPE nbdstripe_member_%s_requests_total counter\n",
           on, on, on);
  for (unsigned i = 0; i < h->n; ++i) {
    fprintf (fp, "nbdstripe_member_%s_requests_total", on);
    prom_mem (h, fp, i);
    fprintf (fp, "} %" PRIu64 "\n", atomic_load (&h->m[i].requests[op]));
  }
  /* A flush moves no data: no bytes counter that could only say 0. */
  if (op != OP_FLUSH) {
    fprintf (fp,
             "# HELP nbdstripe_member_%s_bytes_total Bytes transferred "
             "(%s).\n"
             "# TYPE nbdstripe_member_%s_bytes_total counter\n",
             on, on, on);
    for (unsigned i = 0; i < h->n; ++i) {
      fprintf (fp, "nbdstripe_member_%s_bytes_total", on);
      prom_mem (h, fp, i);
      fprintf (fp, "} %" PRIu64 "\n", atomic_load (&h->m[i].bytes[op]));
    }
  }
  fprintf (fp,
           "# HELP nbdstripe_member_%s_errors_total Requests that failed "
           "(%s).\n"
           "# TYPE nbdstripe_member_%s_errors_total counter\n",
           on, on, on);
  for (unsigned i = 0; i < h->n; ++i) {
    fprintf (fp, "nbdstripe_member_%s_errors_total", on);
    prom_mem (h, fp, i);
    fprintf (fp, "} %" PRIu64 "\n", atomic_load (&h->m[i].errors[op]));
  }
}

/* One operation's latency histogram of every member, since the start. */
static void
prom_member_latency (struct health *h, FILE *fp, enum op_kind op)
{
  const char *on = op_name (op);

  fprintf (fp,
           "# HELP nbdstripe_member_%s_latency_seconds Latency of the "
           "member's successful %s requests (since the server started).\n"
           "# TYPE nbdstripe_member_%s_latency_seconds histogram\n",
           on, on, on);
  for (unsigned i = 0; i < h->n; ++i) {
    uint64_t hb[NBUCKETS], sum, count = 0;
    unsigned le = PROM_LE_MIN;

    /* Read while requests are recorded (relaxed atomics, no lock on
     * the I/O path): the sum may hold a request or two the buckets do
     * not yet; the next write agrees.
     */
    health_op_hist_live (hb, &sum, &h->m[i], op);
    for (unsigned b = 0; b < NBUCKETS; ++b) {
      count += hb[b];
      if (le <= PROM_LE_MAX && health_bucket_hi (b) == (double) (1ull << le)) {
        fprintf (fp, "nbdstripe_member_%s_latency_seconds_bucket", on);
        prom_mem (h, fp, i);
        fprintf (fp, ",le=\"%.12g\"} %" PRIu64 "\n", ldexp (1e-9, le), count);
        le++;
      }
    }
    fprintf (fp, "nbdstripe_member_%s_latency_seconds_bucket", on);
    prom_mem (h, fp, i);
    fprintf (fp, ",le=\"+Inf\"} %" PRIu64 "\n", count);
    fprintf (fp, "nbdstripe_member_%s_latency_seconds_sum", on);
    prom_mem (h, fp, i);
    fprintf (fp, "} %.9f\n", sum / 1e9);
    fprintf (fp, "nbdstripe_member_%s_latency_seconds_count", on);
    prom_mem (h, fp, i);
    fprintf (fp, "} %" PRIu64 "\n", count);
  }
}

static void
prom_member_rejected (struct health *h, FILE *fp)
{
  fputs ("# HELP nbdstripe_member_rejected_total Requests refused at once "
         "because the member had failed.\n"
         "# TYPE nbdstripe_member_rejected_total counter\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    fputs ("nbdstripe_member_rejected_total", fp);
    prom_mem (h, fp, i);
    fprintf (fp, "} %" PRIu64 "\n", atomic_load (&h->m[i].rejected));
  }
}

/* A member being replaced (or the last one), from the status's
 * "replace" object.
 */
static void
prom_replace (struct health *h, FILE *fp, bool running,
              struct json_object *extra)
{
  struct json_object *r, *x;
  if (json_object_object_get_ex (extra, "replace", &r)) {
    const char *state = json_object_object_get_ex (r, "state", &x)
                          ? json_object_get_string (x)
                          : "";
    unsigned member = json_object_object_get_ex (r, "member", &x)
                        ? (unsigned) json_object_get_int64 (x)
                        : 0;
    static const struct {
      const char *name, *key, *help;
    } g[] = {
      { "bytes_copied", "bytes_copied", "Bytes of the member copied so far." },
      { "bytes_total", "bytes_total", "Bytes of the member to copy." },
      { "rate_bytes_per_second", "rate", "Copy rate since the start." },
      { "eta_seconds", "eta_seconds",
        "Seconds left at that rate (0 once the copy has ended)." },
    };
    fputs ("# HELP nbdstripe_replace_running Whether a member is being "
           "replaced (copying or switching) now.\n"
           "# TYPE nbdstripe_replace_running gauge\n"
           "nbdstripe_replace_running",
           fp);
    prom_mem (h, fp, member);
    fprintf (fp, "} %d\n",
             running
               && (strcmp (state, "copying") == 0
                   || strcmp (state, "switching") == 0));
    for (size_t k = 0; k < sizeof g / sizeof g[0]; ++k) {
      fprintf (fp,
               "# HELP nbdstripe_replace_%s %s\n"
               "# TYPE nbdstripe_replace_%s gauge\nnbdstripe_replace_%s",
               g[k].name, g[k].help, g[k].name, g[k].name);
      prom_mem (h, fp, member);
      fprintf (fp, "} %.0f\n",
               json_object_object_get_ex (r, g[k].key, &x)
                 ? json_object_get_double (x)
                 : 0.0);
    }
  }
}

/* The spares, from the status's "spares" array (spares.h). */
static void
prom_spares (struct health *h, FILE *fp, struct json_object *extra)
{
  struct json_object *sa, *x;
  if (json_object_object_get_ex (extra, "spares", &sa)
      && json_object_is_type (sa, json_type_array)) {
    size_t n = json_object_array_length (sa), usable = 0;

    for (size_t k = 0; k < n; ++k)
      if (json_object_object_get_ex (json_object_array_get_idx (sa, k),
                                     "usable", &x)
          && json_object_get_boolean (x))
        usable++;
    fputs ("# HELP nbdstripe_spares Hot spares the volume holds.\n"
           "# TYPE nbdstripe_spares gauge\nnbdstripe_spares",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %zu\n", n);
    fputs ("# HELP nbdstripe_spares_usable Hot spares that could take "
           "any member's place now.\n"
           "# TYPE nbdstripe_spares_usable gauge\nnbdstripe_spares_usable",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %zu\n", usable);
    if (n > 0)
      fputs ("# HELP nbdstripe_spare_usable Whether the spare could take "
             "any member's place now (the status says why not).\n"
             "# TYPE nbdstripe_spare_usable gauge\n",
             fp);
    for (size_t k = 0; k < n; ++k) {
      struct json_object *o = json_object_array_get_idx (sa, k);
      fputs ("nbdstripe_spare_usable", fp);
      prom_vol (h, fp);
      fprintf (fp, ",spare=\"%zu\",path=\"", k);
      prom_str (fp, json_object_object_get_ex (o, "path", &x)
                      ? json_object_get_string (x)
                      : "");
      fprintf (fp, "\"} %d\n",
               json_object_object_get_ex (o, "usable", &x)
                 && json_object_get_boolean (x));
    }
  }
}

/* The scrub (or the last one), from the status's "scrub" object. */
static void
prom_scrub (struct health *h, FILE *fp, bool running,
            struct json_object *extra)
{
  struct json_object *sc, *x, *ms;
  if (json_object_object_get_ex (extra, "scrub", &sc)) {
    const char *state = json_object_object_get_ex (sc, "state", &x)
                          ? json_object_get_string (x)
                          : "";
    fputs ("# HELP nbdstripe_scrub_running Whether a scrub is reading the "
           "volume now.\n"
           "# TYPE nbdstripe_scrub_running gauge\nnbdstripe_scrub_running",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %d\n", running && strcmp (state, "running") == 0);
    fputs ("# HELP nbdstripe_scrub_bytes_read Bytes the scrub has read.\n"
           "# TYPE nbdstripe_scrub_bytes_read gauge\n"
           "nbdstripe_scrub_bytes_read",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %.0f\n",
             json_object_object_get_ex (sc, "bytes_read", &x)
               ? json_object_get_double (x)
               : 0.0);
    fputs ("# HELP nbdstripe_scrub_bytes_total Bytes the scrub reads in "
           "all.\n"
           "# TYPE nbdstripe_scrub_bytes_total gauge\n"
           "nbdstripe_scrub_bytes_total",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %.0f\n",
             json_object_object_get_ex (sc, "bytes_total", &x)
               ? json_object_get_double (x)
               : 0.0);
    if (json_object_object_get_ex (sc, "finished_unix", &x) && x) {
      fputs ("# HELP nbdstripe_scrub_last_finished_timestamp_seconds "
             "When the last scrub ended (Unix time).\n"
             "# TYPE nbdstripe_scrub_last_finished_timestamp_seconds "
             "gauge\nnbdstripe_scrub_last_finished_timestamp_seconds",
             fp);
      prom_vol (h, fp);
      fprintf (fp, "} %.3f\n", json_object_get_double (x));
    }
    if (json_object_object_get_ex (sc, "members", &ms)
        && json_object_is_type (ms, json_type_array)) {
      fputs ("# HELP nbdstripe_scrub_unreadable_bytes Bytes of the member "
             "the scrub could not read.\n"
             "# TYPE nbdstripe_scrub_unreadable_bytes gauge\n",
             fp);
      for (size_t k = 0; k < json_object_array_length (ms); ++k) {
        struct json_object *m = json_object_array_get_idx (ms, k);
        fputs ("nbdstripe_scrub_unreadable_bytes", fp);
        prom_mem (h, fp, (unsigned) k);
        fprintf (fp, "} %.0f\n",
                 json_object_object_get_ex (m, "unreadable_bytes", &x)
                   ? json_object_get_double (x)
                   : 0.0);
      }
    }
  }
}

/* The Prometheus text (exposition format 0.0.4), built under the lock.
 *
 * Stopped (running false, the last write): nbdstripe_up is 0 and every
 * state gauge, the volume's and the members', is 0.  The states were
 * those of a server that no longer serves: a "1" would keep alerts quiet
 * ("state ok") or firing ("state failed") about a volume nobody is
 * using, and a made-up state="unknown" series would appear and vanish
 * with restarts.  With all 0, "no current state" reads as such, and
 * nbdstripe_up == 0 is the one thing to alert on.  The counters and
 * histograms keep their last values: they are still true.
 */
static char *
build_prom (struct health *h, bool running, double now,
            struct json_object *extra, size_t *len)
{
  char *buf = NULL;
  FILE *fp = open_memstream (&buf, len);

  if (fp == NULL)
    return NULL;
  prom_volume (h, fp, running, now);
  prom_member_states (h, fp, running);
  for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
    prom_member_counters (h, fp, op);
    prom_member_latency (h, fp, op);
  }
  prom_member_rejected (h, fp);
  prom_drive (h, fp);
  if (extra) {
    prom_replace (h, fp, running, extra);
    prom_spares (h, fp, extra);
    prom_scrub (h, fp, running, extra);
  }
  if (fclose (fp) != 0) {
    free (buf);
    return NULL;
  }
  return buf;
}

static int
mkdir_parents (const char *path)
{
  char *d = strdup (path), *p;
  int r = 0;

  if (d == NULL)
    return -1;
  for (p = d + 1; (p = strchr (p, '/')) != NULL; ++p) {
    *p = '\0';
    if (mkdir (d, 0755) == -1 && errno != EEXIST) {
      r = -1;
      break;
    }
    *p = '/';
  }
  free (d);
  return r;
}

/* Write path atomically: a new temporary in the same directory, then
 * rename.  The directory may be writable by others (a sticky /tmp, a
 * node_exporter textfile directory shared with a group), so the
 * temporary must never be a name someone else can plant a symlink at:
 * mkostemp creates a random name with O_CREAT|O_EXCL, which never
 * follows a link, and rename replaces the target itself (were it a
 * symlink, the link goes, its target is left alone).  The temporary is
 * a dot file, so that node_exporter's "*.prom" never reads it.
 */
static int
write_atomic (const char *path, const char *data, size_t len)
{
  const char *base = strrchr (path, '/');
  char tmp[4096];
  int fd, r, e;

  base = base ? base + 1 : path;
  if (snprintf (tmp, sizeof tmp, "%.*s.%s.XXXXXX", (int) (base - path), path,
                base)
      >= (int) sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = mkostemp (tmp, O_CLOEXEC | O_NOFOLLOW);
  if (fd == -1 && errno == ENOENT && mkdir_parents (path) == 0) {
    memcpy (&tmp[strlen (tmp) - 6], "XXXXXX", 6); /* mkostemp changed it */
    fd = mkostemp (tmp, O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd == -1)
    return -1;
  if (fchmod (fd, 0644) == -1)
    goto err;
  while (len > 0) {
    ssize_t n = write (fd, data, len);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      goto err;
    }
    data += n;
    len -= n;
  }
  if (fsync (fd) == -1)
    goto err;
  r = close (fd);
  fd = -1;
  if (r == -1 || rename (tmp, path) == -1)
    goto err;
  return 0;

err:
  e = errno;
  if (fd >= 0)
    close (fd);
  unlink (tmp);
  errno = e;
  return -1;
}

/* What the volume adds (a replace), asked with no health lock held: the
 * volume's own locks never nest inside health's.
 */
static struct json_object *
status_extra (struct health *h)
{
  struct json_object *extra;

  if (h->ops.status_extra == NULL)
    return NULL;
  extra = json_object_new_object ();
  h->ops.status_extra (h->ops.opaque, extra);
  return extra;
}

char *
health_status_text (struct health *h)
{
  struct json_object *extra = status_extra (h);
  char *text;
  size_t len;

  pthread_mutex_lock (&h->lock);
  text = build_json (h, true, now_unix (), extra, &len);
  pthread_mutex_unlock (&h->lock);
  json_object_put (extra);
  return text;
}

/* Called with the lock held; drops it while it asks the volume for its
 * part (status_extra) and while writing.
 */
void
health_write_status (struct health *h, bool running)
{
  char *json = NULL, *prom = NULL;
  size_t jlen = 0, plen = 0;
  double now = now_unix (); /* updated_unix = last_update_timestamp */
  struct json_object *extra;

  pthread_mutex_unlock (&h->lock);
  extra = status_extra (h);
  pthread_mutex_lock (&h->lock);
  if (h->p.status_file)
    json = build_json (h, running, now, extra, &jlen);
  if (h->p.prometheus_file)
    prom = build_prom (h, running, now, extra, &plen);
  h->last_status_mono = health_now_ns ();
  h->status_written = true;
  pthread_mutex_unlock (&h->lock);
  json_object_put (extra);

  if (h->p.status_file) {
    if (json == NULL || write_atomic (h->p.status_file, json, jlen) == -1) {
      if (!h->status_err_logged)
        stripe_error ("health: cannot write the status file %s: %m",
                      h->p.status_file);
      h->status_err_logged = true;
    }
    else if (h->status_err_logged) {
      stripe_notice ("health: status file %s written again",
                     h->p.status_file);
      h->status_err_logged = false;
    }
  }
  if (h->p.prometheus_file) {
    if (prom == NULL
        || write_atomic (h->p.prometheus_file, prom, plen) == -1) {
      if (!h->prom_err_logged)
        stripe_error ("health: cannot write the Prometheus file %s: %m",
                      h->p.prometheus_file);
      h->prom_err_logged = true;
    }
    else if (h->prom_err_logged) {
      stripe_notice ("health: Prometheus file %s written again",
                     h->p.prometheus_file);
      h->prom_err_logged = false;
    }
  }
  free (json);
  free (prom);
  pthread_mutex_lock (&h->lock);
}
