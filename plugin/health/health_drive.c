/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's drive poller.  A thread of its own reads every
 * member's drive (drive.h) once at start and then every drive_interval
 * seconds, with no lock held while it does (a drive's commands take
 * milliseconds to seconds); it takes health's lock only to keep the
 * reading and apply the rule.  Never on the I/O path.  At shutdown a
 * poller stuck in a drive's command is abandoned, as a prober is.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "drive.h"
#include "health_impl.h"
#include "json.h"
#include "log.h"
#include "util.h"

/* Bytes a second written to member i's drive lately: over the readings
 * of the last WEAR_WINDOW_S (at least two, some time apart); negative
 * when unknown.  *span: the seconds it was measured over.
 */
static double
write_rate (const struct member_health *m, double *span)
{
  const struct wear_sample *newest, *oldest = NULL;
  uint64_t window = (uint64_t) WEAR_WINDOW_S * 1000000000;

  *span = 0;
  if (m->wear_len < 2)
    return -1;
  newest = &m->wear[(m->wear_head + WEAR_SAMPLES - 1) % WEAR_SAMPLES];
  for (unsigned k = m->wear_len; k-- > 0;) {
    const struct wear_sample *s =
      &m->wear[(m->wear_head + WEAR_SAMPLES - 1 - k) % WEAR_SAMPLES];
    if (newest->mono - s->mono <= window) {
      oldest = s;
      break;
    }
  }
  if (oldest == NULL || oldest == newest || newest->mono == oldest->mono)
    return -1;
  *span = (newest->mono - oldest->mono) / 1e9;
  if (newest->written < oldest->written) /* another drive, a reset */
    return -1;
  return (double) (newest->written - oldest->written) / *span;
}

/* health_drive_record with the lock held. */
static void
record_locked (struct health *h, unsigned i, const struct drive_health *r,
               uint64_t now)
{
  struct member_health *m = &h->m[i];
  char why[REASON_MAX];

  m->drive_read_once = true;
  if (!r->available) {
    /* A reading that failed says nothing: the verdict stands. */
    if (m->drive_error[0] == '\0' && m->have_drive)
      stripe_warning ("health: member %u (%s): drive health cannot be read "
                      "now: %s",
                      i, m->path, r->reason);
    snprintf (m->drive_error, sizeof m->drive_error, "%s", r->reason);
    m->drive_error_unix = now_unix ();
    return;
  }
  m->drive_error[0] = '\0';
  m->drive = *r;
  m->have_drive = true;
  m->drive_unix = now_unix ();
  if (!m->have_drive_base) {
    m->drive_base = *r;
    m->have_drive_base = true;
  }
  if (r->data_written_bytes != DRIVE_NA) {
    struct wear_sample *s = &m->wear[m->wear_head];
    s->mono = now;
    s->written = r->data_written_bytes;
    m->wear_head = (m->wear_head + 1) % WEAR_SAMPLES;
    if (m->wear_len < WEAR_SAMPLES)
      m->wear_len++;
  }
  if (drive_predicts_failure (&m->drive_base, r, why, sizeof why)) {
    snprintf (m->drive_reason, sizeof m->drive_reason, "%s", why);
    health_update_floor (h, i, now, NULL);
  }
  else if (m->drive_reason[0]) {
    m->drive_reason[0] = '\0';
    stripe_notice ("health: member %u (%s): its drive no longer predicts a "
                   "failure",
                   i, m->path);
    health_update_floor (h, i, now, "its drive no longer predicts a failure");
  }
  /* A reading is in the next rewrite; a transition it caused, at once
   * (health_set_state).
   */
}

void
health_drive_record (struct health *h, unsigned i,
                     const struct drive_health *r, uint64_t now)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  record_locked (h, i, r, now);
  pthread_mutex_unlock (&h->lock);
}

/* A figure, or null when the drive does not report it. */
static struct json_object *
figure (int64_t v)
{
  return v == DRIVE_NA ? NULL : json_object_new_int64 (v);
}

struct json_object *
health_drive_json (struct health *h, unsigned i)
{
  struct member_health *m = &h->m[i];
  const struct drive_health *d = &m->drive;
  struct json_object *o = json_object_new_object ();
  struct json_object *wear, *names;
  struct drive_wear w;
  double rate, span;
  const char *state;

  if (!m->drive_read_once) {
    json_put (o, "available", json_object_new_boolean (false));
    json_put (o, "reason",
              json_text (h->p.set.drive_interval == 0
                           ? "not read (health.drive_interval is 0)"
                           : "not read yet"));
    return o;
  }
  json_put (o, "available",
            json_object_new_boolean (m->drive_error[0] == '\0'));
  if (m->drive_error[0]) {
    json_put (o, "reason", json_text (m->drive_error));
    json_put (o, "reason_unix", json_number (m->drive_error_unix, "%.3f"));
  }
  if (!m->have_drive)
    return o;
  /* Unreadable now, readable before: the figures of the last reading
   * that worked, and when it was.
   */
  json_put (o, "read_unix", json_number (m->drive_unix, "%.3f"));
  json_put (o, "kind",
            json_text (d->kind == DRIVE_NVME  ? "nvme"
                       : d->kind == DRIVE_ATA ? "ata"
                                              : "none"));
  json_put (o, "device", json_text (d->device));
  json_put (o, "model", json_text (d->model));
  json_put (o, "serial", json_text (d->serial));
  json_put (o, "firmware", json_text (d->firmware));
  json_put (o, "predicts_failure",
            m->drive_reason[0] ? json_text (m->drive_reason) : NULL);
  json_put (o, "temperature_celsius", figure (d->temperature_c));
  json_put (o, "power_on_hours", figure (d->power_on_hours));
  json_put (o, "power_cycles", figure (d->power_cycles));
  json_put (o, "percentage_used", figure (d->percentage_used));
  json_put (o, "data_written_bytes", figure (d->data_written_bytes));
  if (d->kind == DRIVE_NVME) {
    json_put (o, "critical_warning", figure (d->critical_warning));
    names = json_object_new_array ();
    for (unsigned b = 0; b < 8; ++b)
      if (d->critical_warning != DRIVE_NA && (d->critical_warning >> b & 1))
        json_object_array_add (names, json_text (drive_nvme_warning_name (b)));
    json_put (o, "critical_warnings", names);
    json_put (o, "available_spare", figure (d->available_spare));
    json_put (o, "available_spare_threshold", figure (d->spare_threshold));
    json_put (o, "media_errors", figure (d->media_errors));
    json_put (o, "unsafe_shutdowns", figure (d->unsafe_shutdowns));
    json_put (o, "data_units_written", figure (d->data_units_written));
    json_put (o, "error_log_entries", figure (d->error_log_entries));
  }
  else if (d->kind == DRIVE_ATA) {
    json_put (o, "smart_status",
              d->smart_status == DRIVE_NA
                ? NULL
                : json_text (d->smart_status ? "passed" : "failing"));
    json_put (o, "reallocated_sectors", figure (d->reallocated_sectors));
    json_put (o, "pending_sectors", figure (d->pending_sectors));
    json_put (o, "offline_uncorrectable", figure (d->offline_uncorrectable));
    json_put (o, "wear_leveling_count", figure (d->wear_leveling_count));
    json_put (o, "wear_leveling_raw", figure (d->wear_leveling_raw));
    json_put (o, "failing_attribute",
              d->failing_attribute[0] ? json_text (d->failing_attribute)
                                      : NULL);
  }

  /* The wear at the recent write rate. */
  wear = json_object_new_object ();
  rate = write_rate (m, &span);
  drive_wear_estimate (d->data_written_bytes, d->percentage_used, rate, &w);
  json_put (wear, "write_rate_bytes_per_second",
            rate >= 0 ? json_number (rate, "%.0f") : NULL);
  json_put (wear, "rate_over_seconds", json_number (span, "%.0f"));
  json_put (wear, "rated_endurance_bytes",
            w.endurance_bytes >= 0 ? json_number (w.endurance_bytes, "%.0f")
                                   : NULL);
  json_put (wear, "seconds_to_rated_endurance",
            w.seconds_left >= 0 && isfinite (w.seconds_left)
              ? json_number (w.seconds_left, "%.0f")
              : NULL);
  if (w.seconds_left == 0)
    state = "reached";
  else if (isinf (w.seconds_left))
    state = "not_writing";
  else if (w.seconds_left > 0)
    state = "estimated";
  else if (w.endurance_bytes < 0)
    state = "no_percentage_used";
  else
    state = "no_write_rate";
  json_put (wear, "estimate", json_text (state));
  json_put (o, "wear", wear);
  return o;
}

static void *
drive_main (void *arg)
{
  struct drive_poller *pr = arg;
  struct health *h = pr->h;

  pthread_mutex_lock (&h->lock);
  while (!h->stop && !pr->abandoned) {
    uint64_t next;

    for (unsigned i = 0; i < h->n && !h->stop && !pr->abandoned; ++i) {
      struct drive_health r;
      char *path = strdup (h->m[i].path);

      if (path == NULL)
        continue;
      atomic_store (&pr->busy, true);
      pthread_mutex_unlock (&h->lock);
      drive_read (path, &r);
      pthread_mutex_lock (&h->lock);
      atomic_store (&pr->busy, false);
      /* Replaced meanwhile: that reading was of the old device. */
      if (!pr->abandoned && !h->stop && strcmp (path, h->m[i].path) == 0)
        record_locked (h, i, &r, health_now_ns ());
      free (path);
    }
    next = health_now_ns () + (uint64_t) h->p.set.drive_interval * 1000000000;
    while (!h->stop && !pr->abandoned && health_now_ns () < next) {
      struct timespec ts = { next / 1000000000, next % 1000000000 };
      pthread_cond_timedwait (&h->drive_cond, &h->lock, &ts);
    }
  }
  if (pr->abandoned) {
    h->nr_abandoned--;
    pthread_mutex_unlock (&h->lock);
    free (pr);
    return NULL;
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

int
health_start_drive_poller (struct health *h)
{
  struct drive_poller *pr = calloc (1, sizeof *pr);
  int e;

  if (pr == NULL)
    return -1;
  pr->h = h;
  e = pthread_create (&pr->thread, NULL, drive_main, pr);
  if (e) {
    free (pr);
    errno = e;
    return -1;
  }
  h->drive_poller = pr;
  return 0;
}

void
health_stop_drive_poller (struct health *h)
{
  struct drive_poller *pr;

  pthread_mutex_lock (&h->lock);
  pr = h->drive_poller;
  h->drive_poller = NULL;
  if (pr && atomic_load (&pr->busy)) {
    /* Blocked in a drive: left to finish on its own, never waited for. */
    pr->abandoned = true;
    h->nr_abandoned++;
    pthread_detach (pr->thread);
    pr = NULL;
  }
  pthread_cond_broadcast (&h->drive_cond);
  pthread_mutex_unlock (&h->lock);
  if (pr) {
    pthread_join (pr->thread, NULL);
    free (pr);
  }
}
