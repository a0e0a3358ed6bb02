/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's Prometheus text (exposition format 0.0.4), the
 * prometheus_file health_status.c writes: the volume, its members'
 * states, counters and latency histograms, their drives, and a replace,
 * the spares, a scrub and the lost ranges from the status's extra
 * objects.
 */

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "health_impl.h"

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
    for (unsigned k = 0; k <= MS_MISSING; ++k) {
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

/* Gauges that show fields of one of the status's extra objects, each
 * labelled with the volume and, when member >= 0, the member.
 */
struct prom_gauge {
  const char *name, *key, *help;
};

static void
prom_gauges (struct health *h, FILE *fp, const char *prefix,
             const struct prom_gauge *g, size_t n, struct json_object *o,
             int member)
{
  struct json_object *x;

  for (size_t k = 0; k < n; ++k) {
    fprintf (fp,
             "# HELP nbdstripe_%s_%s %s\n"
             "# TYPE nbdstripe_%s_%s gauge\nnbdstripe_%s_%s",
             prefix, g[k].name, g[k].help, prefix, g[k].name, prefix,
             g[k].name);
    if (member >= 0)
      prom_mem (h, fp, member);
    else
      prom_vol (h, fp);
    fprintf (fp, "} %.0f\n",
             json_object_object_get_ex (o, g[k].key, &x)
               ? json_object_get_double (x)
               : 0.0);
  }
}

static const char *
prom_text (struct json_object *o, const char *key)
{
  struct json_object *x;

  return json_object_object_get_ex (o, key, &x) ? json_object_get_string (x)
                                                 : "";
}

/* Whether a job in that state moves data now. */
static int
prom_moving (bool running, const char *state)
{
  return running
         && (strcmp (state, "copying") == 0
             || strcmp (state, "switching") == 0);
}

/* A member being replaced (or the last one), from the status's
 * "replace" object.
 */
static void
prom_replace (struct health *h, FILE *fp, bool running,
              struct json_object *extra)
{
  static const struct prom_gauge g[] = {
    { "bytes_copied", "bytes_copied", "Bytes of the member copied so far." },
    { "bytes_to_copy", "bytes_total", "Bytes of the member to copy." },
    { "rate_bytes_per_second", "rate", "Copy rate since the start." },
    { "eta_seconds", "eta_seconds",
      "Seconds left at that rate (0 once the copy has ended)." },
  };
  struct json_object *r, *x;
  unsigned member;

  if (!json_object_object_get_ex (extra, "replace", &r))
    return;
  member = json_object_object_get_ex (r, "member", &x)
             ? (unsigned) json_object_get_int64 (x)
             : 0;
  fputs ("# HELP nbdstripe_replace_running Whether a member is being "
         "replaced (copying or switching) now.\n"
         "# TYPE nbdstripe_replace_running gauge\n"
         "nbdstripe_replace_running",
         fp);
  prom_mem (h, fp, member);
  fprintf (fp, "} %d\n", prom_moving (running, prom_text (r, "state")));
  prom_gauges (h, fp, "replace", g, sizeof g / sizeof g[0], r, member);
}

/* A grow or shrink under way, paused or just ended, from the status's
 * "reshape" object (reshape.c): what the replace gauges say, for the
 * whole volume, plus whether it is paused (cancelled or a member
 * failed: the status says the way on).
 */
static void
prom_reshape (struct health *h, FILE *fp, bool running,
              struct json_object *extra)
{
  static const struct prom_gauge g[] = {
    { "bytes_moved", "bytes_copied", "Bytes of the volume restriped so far." },
    { "bytes_to_move", "bytes_total", "Bytes of the volume to restripe." },
    { "rate_bytes_per_second", "rate", "Restripe rate since the start." },
    { "eta_seconds", "eta_seconds",
      "Seconds left at that rate (0 once it has ended)." },
    { "members_from", "members_from", "Members before the grow or shrink." },
    { "members_to", "members_to", "Members after it." },
  };
  struct json_object *r;
  const char *state, *kind;

  if (!json_object_object_get_ex (extra, "reshape", &r))
    return;
  state = prom_text (r, "state");
  kind = prom_text (r, "kind");
  fputs ("# HELP nbdstripe_reshape_running Whether a grow or shrink is "
         "moving data now.\n"
         "# TYPE nbdstripe_reshape_running gauge\nnbdstripe_reshape_running",
         fp);
  prom_vol (h, fp);
  fputs (",kind=\"", fp);
  prom_str (fp, kind);
  fprintf (fp, "\"} %d\n", prom_moving (running, state));
  fputs ("# HELP nbdstripe_reshape_paused Whether a grow or shrink stopped "
         "half-way and waits to go on (the status says how).\n"
         "# TYPE nbdstripe_reshape_paused gauge\nnbdstripe_reshape_paused",
         fp);
  prom_vol (h, fp);
  fputs (",kind=\"", fp);
  prom_str (fp, kind);
  fprintf (fp, "\"} %d\n", strcmp (state, "paused") == 0);
  prom_gauges (h, fp, "reshape", g, sizeof g / sizeof g[0], r, -1);
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
  static const struct prom_gauge g[] = {
    { "bytes_read", "bytes_read", "Bytes the scrub has read." },
    { "bytes_to_read", "bytes_total", "Bytes the scrub reads in all." },
  };
  struct json_object *sc, *x, *ms;
  if (json_object_object_get_ex (extra, "scrub", &sc)) {
    fputs ("# HELP nbdstripe_scrub_running Whether a scrub is reading the "
           "volume now.\n"
           "# TYPE nbdstripe_scrub_running gauge\nnbdstripe_scrub_running",
           fp);
    prom_vol (h, fp);
    fprintf (fp, "} %d\n",
             running && strcmp (prom_text (sc, "state"), "running") == 0);
    prom_gauges (h, fp, "scrub", g, sizeof g / sizeof g[0], sc, -1);
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

/* The volume's lost ranges, from the status's "lost" object. */
static void
prom_lost (struct health *h, FILE *fp, struct json_object *extra)
{
  struct json_object *lo, *x;
  size_t n = 0;

  if (!json_object_object_get_ex (extra, "lost", &lo))
    return;
  if (json_object_object_get_ex (lo, "ranges", &x)
      && json_object_is_type (x, json_type_array))
    n = json_object_array_length (x);
  fputs ("# HELP nbdstripe_lost_bytes Bytes of the volume whose data is "
         "known lost: reads there fail until written.\n"
         "# TYPE nbdstripe_lost_bytes gauge\nnbdstripe_lost_bytes",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %.0f\n",
           json_object_object_get_ex (lo, "bytes", &x)
             ? json_object_get_double (x)
             : 0.0);
  fputs ("# HELP nbdstripe_lost_ranges Ranges in the volume's list of lost "
         "ranges.\n"
         "# TYPE nbdstripe_lost_ranges gauge\nnbdstripe_lost_ranges",
         fp);
  prom_vol (h, fp);
  fprintf (fp, "} %zu\n", n);
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
char *
health_build_prom (struct health *h, bool running, double now,
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
    prom_reshape (h, fp, running, extra);
    prom_spares (h, fp, extra);
    prom_scrub (h, fp, running, extra);
    prom_lost (h, fp, extra);
  }
  if (fclose (fp) != 0) {
    free (buf);
    return NULL;
  }
  return buf;
}
