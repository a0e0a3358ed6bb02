/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health, what the I/O path records and the rules
 * it sets off: the counters and histograms of each request, an error's
 * verdict (full, failing, failed), a member's state and its reason, the
 * floor a drive or a scrub sets, a member replaced or gone.  See
 * include/health.h for the rules, health_impl.h for the other files.
 *
 * The I/O path only touches atomics, and takes the lock when it records
 * an error (rare).
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health_impl.h"
#include "log.h"
#include "util.h"

/* Buckets are (lo, hi]: a latency of exactly 2^k ns belongs below the
 * edge 2^k, as Prometheus's le counts it; so the bucket of ns is the
 * half-open [lo, hi) bucket of ns - 1 (0 ns joins 1 ns in bucket 0).
 */
static unsigned
bucket_of (uint64_t ns)
{
  if (ns <= SUB)
    return ns - (ns != 0);
  ns--;
  unsigned e = 63 - __builtin_clzll (ns); /* >= SUB_BITS */
  unsigned sub = (ns >> (e - SUB_BITS)) & (SUB - 1);
  unsigned b = (e - SUB_BITS + 1) * SUB + sub;
  return b < NBUCKETS ? b : NBUCKETS - 1;
}

static unsigned
size_class (uint64_t bytes)
{
  return bytes < 8192 ? 0 : bytes < 65536 ? 1 : bytes < 524288 ? 2 : 3;
}

/* Errors that say something about the member (health.h). */
static bool
errno_is_member_fault (int err)
{
  return err == EIO || err == EROFS || err == EREMOTEIO || err == ENOMEDIUM;
}

static bool
errno_is_full (int err)
{
  return err == ENOSPC || err == EDQUOT;
}

static bool
errno_is_gone (int err)
{
  return err == ENODEV || err == ENXIO || err == ESHUTDOWN || err == ENOTCONN
         || err == ECONNABORTED || err == ECONNRESET || err == EPIPE
         || err == ESTALE || err == EBADF || err == ETIMEDOUT;
}

/* Called with h->lock held. */
void
health_set_state (struct health *h, unsigned i, enum member_state s,
           const char *reason)
{
  struct member_health *m = &h->m[i];
  enum member_state old = atomic_load (&m->state);

  if (old == MS_REMOVED || old == MS_MISSING)
    return; /* for good: nothing it says any more is the volume's */
  if (old == s) {
    if (s != MS_OK && reason && strcmp (m->reason, reason) != 0) {
      snprintf (m->reason, sizeof m->reason, "%s", reason);
      h->dirty = true;
    }
    return;
  }
  atomic_store (&m->state, s);
  if (s == MS_FAILED)
    atomic_fetch_or (&h->failed, UINT64_C (1) << i);
  else if (old == MS_FAILED)
    atomic_fetch_and (&h->failed, ~(UINT64_C (1) << i));
  m->since = now_unix ();
  snprintf (m->reason, sizeof m->reason, "%s", s == MS_OK ? "" : reason);
  if (s == MS_FAILED) {
    snprintf (m->cause, sizeof m->cause, "%s", reason ? reason : "");
    m->dropped_done = false;
    pthread_cond_signal (&h->probe_cond); /* drop it out now */
  }
  /* A member that failed fails requests: an error.  Worse than ok but
   * still serving: a warning.  Well again: a notice (log.h).
   */
  stripe_log (s == MS_FAILED ? LOG_ERR
              : s == MS_OK || s == MS_REMOVED ? LOG_NOTICE
                             : LOG_WARNING,
              "health: member %u (%s): %s -> %s%s%s", i, m->path,
              health_state_names[old], health_state_names[s],
              reason ? ": " : "", reason ? reason : "");
  {
    struct event e = { .member = i, .state = s, .kind = EV_STATE };
    snprintf (e.reason, sizeof e.reason, "%s", reason ? reason : "");
    health_push_event (h, &e);
  }
  /* The listener is told by the health thread, without the lock. */
  h->notify |= UINT64_C (1) << i;
  if (s < MS_FAILING)
    m->passed = (int) s;
  pthread_cond_signal (&h->cond);
}

const char *
health_floor_reason (struct health *h, unsigned i)
{
  return h->m[i].floor;
}

void
health_update_floor (struct health *h, unsigned i, uint64_t now,
                     const char *why_ok)
{
  struct member_health *m = &h->m[i];
  enum member_state st = atomic_load (&m->state);
  uint64_t last = atomic_load (&m->last_error_mono);
  bool io_failing =
    last != 0 && now - last < (uint64_t) h->p.set.window * 1000000000;

  if (m->drive_reason[0] && m->scrub_reason[0])
    snprintf (m->floor, sizeof m->floor, "%.120s; %.120s", m->drive_reason,
              m->scrub_reason);
  else
    snprintf (m->floor, sizeof m->floor, "%s",
              m->drive_reason[0] ? m->drive_reason : m->scrub_reason);
  if (m->floor[0]) {
    /* Failing for I/O errors: their reason until they expire. */
    if (st < MS_FAILING || (st == MS_FAILING && !io_failing))
      health_set_state (h, i, MS_FAILING, m->floor);
  }
  else if (st == MS_FAILING && !io_failing)
    health_set_state (h, i, MS_OK, why_ok);
}

void
health_scrub_result (struct health *h, unsigned i, const char *reason)
{
  struct member_health *m;

  if (h == NULL || i >= h->n)
    return;
  m = &h->m[i];
  pthread_mutex_lock (&h->lock);
  if (reason == NULL && m->scrub_reason[0] == '\0') {
    pthread_mutex_unlock (&h->lock);
    return;
  }
  snprintf (m->scrub_reason, sizeof m->scrub_reason, "%s",
            reason ? reason : "");
  health_update_floor (h, i, health_now_ns (),
                       "a scrub read all of it again");
  pthread_mutex_unlock (&h->lock);
}

uint64_t
health_requests_total (const struct health *h)
{
  uint64_t n = 0;

  for (unsigned i = 0; h && i < h->n; ++i)
    for (unsigned op = 0; op < OP_NR_TRACKED; ++op)
      n += atomic_load_explicit (&h->m[i].requests[op], memory_order_relaxed);
  return n;
}

void
health_settle (struct health *h, unsigned i, const char *why)
{
  const char *floor = health_floor_reason (h, i);

  if (floor[0])
    health_set_state (h, i, MS_FAILING, floor);
  else
    health_set_state (h, i, MS_OK, why);
}

static void
describe_error (char *buf, size_t len, enum op_kind op, uint64_t offset,
                int err)
{
  const char *name = health_errno_name (err);
  snprintf (buf, len, "%s at member offset %" PRIu64 ": %s%s%s%s",
            op_name (op), offset, name ? name : "", name ? " (" : "",
            strerror (err), name ? ")" : "");
}

/* An operation that failed: the rules.  Out of the line of
 * health_record, whose every call is on a request's path.
 */
static void __attribute__ ((noinline))
record_error (struct health *h, unsigned i, enum op_kind op, int err,
              uint64_t offset)
{
  struct member_health *m = &h->m[i];
  bool fault = errno_is_gone (err) || errno_is_member_fault (err);
  unsigned c = fault ? atomic_fetch_add (&m->consecutive, 1) + 1 : 0;
  char what[160], reason[REASON_MAX];

  atomic_fetch_add (&m->errors[op], 1);
  if (fault)
    atomic_store (&m->last_error_mono, health_now_ns ());
  describe_error (what, sizeof what, op, offset, err);

  pthread_mutex_lock (&h->lock);
  m->has_last_error = true;
  m->le_op = op;
  m->le_errno = err;
  m->le_offset = offset;
  m->le_time = now_unix ();
  h->dirty = true; /* the counters and last error, at once */
  if (!fault) {
    /* The request's failure, or a full member: not a fault of it. */
    if (errno_is_full (err)) {
      atomic_store (&m->last_full_mono, health_now_ns ());
      if (atomic_load (&m->state) <= MS_FULL) {
        snprintf (reason, sizeof reason, "no space left: %s", what);
        health_set_state (h, i, MS_FULL, reason);
      }
    }
  }
  else if (errno_is_gone (err)) {
    snprintf (reason, sizeof reason, "device gone: %s", what);
    health_set_state (h, i, MS_FAILED, reason);
  }
  else if (c >= h->p.set.error_threshold) {
    snprintf (reason, sizeof reason, "%u consecutive I/O errors, last: %s", c,
              what);
    health_set_state (h, i, MS_FAILED, reason);
  }
  else if (atomic_load (&m->state) < MS_FAILING) {
    snprintf (reason, sizeof reason, "I/O error: %s", what);
    health_set_state (h, i, MS_FAILING, reason);
  }
  else if (atomic_load (&m->state) == MS_FAILING) {
    snprintf (reason, sizeof reason, "%u I/O error%s in a row, last: %s", c,
              c == 1 ? "" : "s", what);
    health_set_state (h, i, MS_FAILING, reason);
  }
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

void
health_record (struct health *h, unsigned i, enum op_kind op, uint64_t bytes,
               uint64_t ns, int err, uint64_t offset)
{
  struct member_health *m;

  if (h == NULL || i >= h->n)
    return;
  m = &h->m[i];
  atomic_fetch_add_explicit (&m->requests[op], 1, memory_order_relaxed);
  if (err == 0) {
    atomic_fetch_add_explicit (&m->bytes[op], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit (&m->lat_ns[op], ns, memory_order_relaxed);
    atomic_fetch_add_explicit (
      &m->hist[op][size_class (bytes)][bucket_of (ns)], 1,
      memory_order_relaxed);
    if (atomic_load_explicit (&m->consecutive, memory_order_relaxed) != 0)
      atomic_store_explicit (&m->consecutive, 0, memory_order_relaxed);
  }
  else if (err != EOPNOTSUPP) /* not done, not an error: a fallback */
    record_error (h, i, op, err, offset);
}

enum member_state
health_member_state (const struct health *h, unsigned i)
{
  if (h == NULL || i >= h->n)
    return MS_OK;
  return atomic_load_explicit (&h->m[i].state, memory_order_relaxed);
}

uint64_t
health_failed_mask (const struct health *h)
{
  return h ? atomic_load_explicit (&h->failed, memory_order_relaxed) : 0;
}

void
health_rejected (struct health *h, unsigned i)
{
  if (h && i < h->n)
    atomic_fetch_add_explicit (&h->m[i].rejected, 1, memory_order_relaxed);
}

void
health_member_replaced (struct health *h, unsigned i, const char *path)
{
  char reason[REASON_MAX];
  char *copy;

  if (h == NULL || i >= h->n)
    return;
  copy = strdup (path);
  pthread_mutex_lock (&h->lock);
  snprintf (reason, sizeof reason, "replaced: %.100s took the place of %.100s",
            path, h->m[i].path);
  if (copy) {
    free (h->m[i].path);
    h->m[i].path = copy;
  }
  atomic_store (&h->m[i].consecutive, 0);
  atomic_store (&h->m[i].last_error_mono, 0);
  atomic_store (&h->m[i].last_full_mono, 0);
  h->m[i].has_last_error = false;
  h->m[i].cause[0] = '\0';
  /* What its drive said was of the old device. */
  h->m[i].drive_read_once = false;
  h->m[i].have_drive = h->m[i].have_drive_base = false;
  h->m[i].drive_reason[0] = '\0';
  h->m[i].scrub_reason[0] = '\0';
  h->m[i].floor[0] = '\0';
  h->m[i].wear_len = h->m[i].wear_head = 0;
  health_set_state (h, i, MS_OK, reason);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

void
health_volume_resized (struct health *h, uint64_t size)
{
  if (h == NULL)
    return;
  pthread_mutex_lock (&h->lock);
  if (h->p.size != size) {
    h->p.size = size;
    h->dirty = true;
    pthread_cond_signal (&h->cond);
  }
  pthread_mutex_unlock (&h->lock);
}

void
health_member_removed (struct health *h, unsigned i, const char *why)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  health_set_state (h, i, MS_REMOVED, why);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

void
health_member_missing (struct health *h, unsigned i, const char *why)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  health_set_state (h, i, MS_MISSING, why);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

void
health_member_gone (struct health *h, unsigned i, const char *reason)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  if (atomic_load (&h->m[i].state) != MS_FAILED)
    health_set_state (h, i, MS_FAILED, reason);
  pthread_mutex_unlock (&h->lock);
}
