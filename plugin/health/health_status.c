/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's status files -- JSON always (the format is in
 * include/health.h), Prometheus text optionally (health_prom.c) -- built
 * under the lock and written atomically without it.
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
  json_put (vol, "members", json_object_new_int64 (health_nr_members (h)));
  json_put (vol, "state",
            json_text (volume_state_name (health_vol_state (h))));
  json_put (vol, "started_unix", json_number (h->started_unix, "%.3f"));
  json_put (vol, "uptime_seconds",
            json_number (floor (now - h->started_unix), "%.0f"));
  json_put (root, "volume", vol);

  json_put (hp, "window", json_object_new_int64 (h->p.set.window));
  json_put (hp, "slow_factor", json_number (h->p.set.slow_factor, "%g"));
  json_put (hp, "slow_floor_us",
            json_object_new_int64 (h->p.set.slow_floor_us));
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
  h->ops.status_extra (h->ops.listener, extra);
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
    prom = health_build_prom (h, running, now, extra, &plen);
  h->last_status_mono = health_now_ns ();
  h->status_written = true;
  pthread_mutex_unlock (&h->lock);
  json_object_put (extra);

  if (h->p.status_file) {
    if (json == NULL || write_file_atomic (h->p.status_file, json, jlen) == -1) {
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
        || write_file_atomic (h->p.prometheus_file, prom, plen) == -1) {
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
