/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health: recording, the rules, the health
 * thread.  See include/health.h for the rules, health_impl.h for how the
 * files share the work.
 *
 * Threads: the I/O path only touches atomics, and takes the lock when it
 * records an error (rare).  The health thread ticks once a second: it
 * snapshots the histograms, decides slow/failing/ok, notices requests and
 * probes that do not answer, and writes the status files -- at once when
 * a transition happened.  The prober thread (health_prober.c) stats every
 * member and re-probes failed ones; the hook thread (health_hook.c) runs
 * the on_change program for each event, in order.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "health_impl.h"
#include "layout.h"
#include "log.h"
#include "util.h"

extern char **environ;

static struct slot {
  _Atomic uint64_t since;
  _Atomic uint64_t mask;
  _Atomic int used;
} slots[MAX_SLOTS];
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static THREAD_LOCAL int my_slot = -1; /* -2: none was free */

const char *const health_state_names[] = { "ok", "slow", "full", "failing",
                                            "failed" };
const char *const health_event_names[] = { "MemberRecovered", "MemberSlow",
                                           "MemberFull",
                                           "MemberFailing", "MemberFailed" };

const char *
health_event_name (const struct event *e)
{
  switch (e->kind) {
  case EV_STATE: return health_event_names[e->state];
  case EV_REPLACING: return "MemberReplacing";
  case EV_REPLACED: return "MemberReplaced";
  case EV_NOT_REPLACED: return "MemberNotReplaced";
  }
  return "?";
}

void
health_event_clear (struct event *e)
{
  free (e->old_path);
  free (e->new_path);
  e->old_path = e->new_path = NULL;
}

void
health_push_event (struct health *h, struct event *e)
{
  if (h->nr_pending < MAX_EVENTS)
    h->pending[h->nr_pending++] = *e;
  else {
    health_event_clear (e);
    h->pending_overflow = true;
  }
  memset (e, 0, sizeof *e);
  h->dirty = true;
  pthread_cond_signal (&h->cond);
}

const char *
volume_state_name (enum volume_state s)
{
  switch (s) {
  case VS_OK: return "ok";
  case VS_DEGRADED: return "degraded";
  case VS_FAILED: return "failed";
  }
  return "?";
}

uint64_t
health_now_ns (void)
{
  return now_ns ();
}

/* The symbolic name of an errno ("EIO"), or NULL. */
const char *
health_errno_name (int err)
{
  return strerrorname_np (err);
}

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

/* The width of bucket b in ns (nominal, for the last one). */
static double
bucket_width (unsigned b)
{
  if (b < SUB)
    return 1;
  return (double) (1ull << (b / SUB - 1));
}

double
health_bucket_lo (unsigned b)
{
  if (b < SUB)
    return b;
  return (SUB + b % SUB) * bucket_width (b);
}

double
health_bucket_hi (unsigned b)
{
  if (b >= NBUCKETS - 1)
    return INFINITY; /* everything slower lands there too */
  return health_bucket_lo (b) + bucket_width (b);
}

static unsigned
size_class (uint64_t bytes)
{
  return bytes < 8192 ? 0 : bytes < 65536 ? 1 : bytes < 524288 ? 2 : 3;
}

/* Quantile q of a histogram, in ns; NAN when empty.
 *
 * It is the rank-th smallest sample (rank = ceil (q * count)), somewhere
 * in its bucket k.  Without the sum of the samples (sum < 0) the answer
 * is placed in the bucket as if its samples were spread evenly.  With
 * it, the answer is the mean of bucket k's samples, their sum being what
 * the other samples leave of sum as far as their buckets' edges tell:
 * exact when all the samples are in bucket k, so that one sample reads
 * as itself (p50 = p99 = the sum) and samples all alike as their value.
 * Then the order statistics bound it: the rank - 1 samples below weigh
 * at least their lower edges and the count - rank + 1 from it up at
 * least itself, so it is at most (sum - those edges) / (count - rank +
 * 1); likewise at least (sum - the upper edges of those above) / rank.
 * A sum that does not fit the buckets (read while requests were being
 * recorded) is ignored.  The answer is always within bucket k: within
 * 12.5% of the true quantile.
 */
double
health_quantile_ns (const uint64_t *b, double q, double sum, uint64_t *count)
{
  uint64_t total = 0, before = 0, rank;
  double lo, hi, below = 0, above = 0, olo = 0, ohi = 0, smin, smax, est;
  double upper, lower;
  unsigned k;

  for (unsigned i = 0; i < NBUCKETS; ++i)
    total += b[i];
  if (count)
    *count = total;
  if (total == 0)
    return NAN;
  rank = (uint64_t) ceil (q * total);
  if (rank == 0)
    rank = 1;
  if (rank > total)
    rank = total;
  for (k = 0; before + b[k] < rank; ++k)
    before += b[k];
  lo = health_bucket_lo (k);
  hi = health_bucket_hi (k); /* INFINITY for the last bucket */
  if (sum < 0)
    return lo + bucket_width (k) * ((double) (rank - before) - 0.5) / b[k];

  for (unsigned i = 0; i < NBUCKETS; ++i) {
    if (i == k || b[i] == 0)
      continue;
    olo += b[i] * health_bucket_lo (i);
    ohi += b[i] * health_bucket_hi (i);
    if (i < k)
      below += b[i] * health_bucket_lo (i);
    else
      above += b[i] * health_bucket_hi (i);
  }
  smin = fmax (b[k] * lo, sum - ohi);
  smax = fmin (b[k] * hi, sum - olo);
  if (smin > smax)
    return lo + bucket_width (k) / 2; /* the sum does not fit */
  est = (smin + smax) / 2 / b[k];

  below += (rank - 1 - before) * lo;
  if (before + b[k] > rank)
    above += (before + b[k] - rank) * hi;
  upper = fmin (hi, (sum - below) / (double) (total - rank + 1));
  lower = fmax (lo, (sum - above) / (double) rank); /* lo when above = inf */
  if (lower <= upper)
    est = fmin (fmax (est, lower), upper);
  return est;
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
              : s == MS_OK   ? LOG_NOTICE
                             : LOG_WARNING,
              "health: member %u (%s): %s -> %s%s%s", i, m->path,
              health_state_names[old], health_state_names[s],
              reason ? ": " : "", reason ? reason : "");
  {
    struct event e = { .member = i, .state = s, .kind = EV_STATE };
    snprintf (e.reason, sizeof e.reason, "%s", reason ? reason : "");
    health_push_event (h, &e);
  }
  health_spare_state_changed (h, i, s);
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
health_member_gone (struct health *h, unsigned i, const char *reason)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  if (atomic_load (&h->m[i].state) != MS_FAILED)
    health_set_state (h, i, MS_FAILED, reason);
  pthread_mutex_unlock (&h->lock);
}

/* In-flight tracking. */

static void
slot_release (void *p)
{
  int idx = (int) (intptr_t) p - 1;
  atomic_store (&slots[idx].since, 0);
  atomic_store (&slots[idx].mask, 0);
  atomic_store (&slots[idx].used, 0);
}

static void
make_slot_key (void)
{
  pthread_key_create (&slot_key, slot_release);
}

_Atomic uint64_t *
health_io_begin (struct health *h)
{
  if (h == NULL || h->p.set.io_timeout == 0)
    return NULL;
  if (my_slot == -1) {
    pthread_once (&slot_once, make_slot_key);
    my_slot = -2;
    for (int i = 0; i < MAX_SLOTS; ++i) {
      int expected = 0;
      if (atomic_compare_exchange_strong (&slots[i].used, &expected, 1)) {
        my_slot = i;
        pthread_setspecific (slot_key, (void *) (intptr_t) (i + 1));
        break;
      }
    }
  }
  if (my_slot < 0)
    return NULL;
  /* The coarse clock (the same clock, a few ms behind, no TSC read) is
   * plenty for a timeout in seconds, and half the price on every request.
   */
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC_COARSE, &ts);
  atomic_store_explicit (&slots[my_slot].mask, 0, memory_order_relaxed);
  atomic_store_explicit (&slots[my_slot].since,
                         (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec,
                         memory_order_release);
  return &slots[my_slot].mask;
}

void
health_io_end (struct health *h)
{
  if (h == NULL || my_slot < 0)
    return;
  atomic_store_explicit (&slots[my_slot].since, 0, memory_order_release);
  atomic_store_explicit (&slots[my_slot].mask, 0, memory_order_relaxed);
}

/* Construction. */

static char *
dup_or_null (const char *s)
{
  return s ? strdup (s) : NULL;
}

static int
member_init (struct health *h, struct member_health *m, const char *path,
             unsigned class)
{
  m->path = strdup (path);
  m->class = class;
  m->snaps = calloc (h->nsnaps, sizeof *m->snaps);
  m->win = calloc (1, sizeof *m->win);
  if (!m->path || !m->snaps || !m->win)
    return -1;
  m->since = now_unix ();
  return 0;
}

int
health_member_add (struct health *h, const char *path, unsigned class)
{
  struct member_health *m;

  if (h == NULL)
    return 0;
  if (h->n >= LAYOUT_MAX_MEMBERS) {
    errno = E2BIG;
    return -1;
  }
  m = &h->m[h->n];
  if (member_init (h, m, path, class) == -1) {
    free (m->path);
    free (m->snaps);
    free (m->win);
    memset (m, 0, sizeof *m);
    errno = ENOMEM;
    return -1;
  }
  pthread_mutex_lock (&h->lock);
  h->n++;
  h->dirty = true;
  pthread_mutex_unlock (&h->lock);
  return 0;
}

struct health *
health_new (const struct health_params *p, unsigned nr_members,
            const char *const *paths, const struct health_ops *ops)
{
  struct health *h = calloc (1, sizeof *h);
  unsigned window;

  if (h == NULL)
    return NULL;
  h->p = *p;
  h->p.name = dup_or_null (p->name ? p->name : "stripe");
  h->p.uuid = dup_or_null (p->uuid);
  h->p.config = dup_or_null (p->config);
  h->p.status_file = dup_or_null (p->status_file);
  h->p.prometheus_file = dup_or_null (p->prometheus_file);
  h->p.on_change = dup_or_null (p->on_change);
  h->p.member_class = NULL; /* copied into the members */
  if (h->p.set.interval == 0)
    h->p.set.interval = HEALTH_DEFAULT_INTERVAL;
  if (h->p.set.window == 0)
    h->p.set.window = HEALTH_DEFAULT_WINDOW;
  if (h->p.set.slow_factor <= 1)
    h->p.set.slow_factor = HEALTH_DEFAULT_SLOW_FACTOR;
  if (h->p.set.error_threshold == 0)
    h->p.set.error_threshold = HEALTH_DEFAULT_ERROR_THRESHOLD;
  if (h->p.set.probe_interval == 0)
    h->p.set.probe_interval = HEALTH_DEFAULT_PROBE_INTERVAL;
  if (h->p.set.on_change_timeout == 0)
    h->p.set.on_change_timeout = HEALTH_DEFAULT_ON_CHANGE_TIMEOUT;
  if (ops)
    h->ops = *ops;
  h->n = nr_members;
  pthread_mutex_init (&h->lock, NULL);
  {
    pthread_condattr_t ca;
    pthread_condattr_init (&ca);
    pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
    pthread_cond_init (&h->cond, &ca);
    pthread_cond_init (&h->hook_cond, &ca);
    pthread_cond_init (&h->probe_cond, &ca);
    pthread_cond_init (&h->drive_cond, &ca);
    pthread_cond_init (&h->spare.cond, &ca);
    pthread_condattr_destroy (&ca);
  }

  /* A window of W seconds is made of up to MAX_SNAPS periods. */
  window = h->p.set.window;
  h->snap_period = (window + MAX_SNAPS - 1) / MAX_SNAPS;
  h->nsnaps = (window + h->snap_period - 1) / h->snap_period;

  /* Room for every member a grow may add (health_member_add). */
  h->m = calloc (LAYOUT_MAX_MEMBERS, sizeof *h->m);
  if (h->m == NULL || (p->name && !h->p.name))
    goto err;
  for (unsigned i = 0; i < nr_members; ++i)
    if (member_init (h, &h->m[i], paths[i],
                     p->member_class ? p->member_class[i] : 0)
        == -1)
      goto err;
  h->started_unix = now_unix ();
  h->started_mono = health_now_ns ();
  return h;

err:
  errno = ENOMEM;
  health_free (h);
  return NULL;
}



enum volume_state
health_vol_state (struct health *h)
{
  enum volume_state vs = VS_OK;
  for (unsigned i = 0; i < h->n; ++i) {
    enum member_state s = atomic_load (&h->m[i].state);
    if (s == MS_FAILED)
      return VS_FAILED;
    if (s != MS_OK)
      vs = VS_DEGRADED;
  }
  return vs;
}

/* The histogram of one operation, all sizes. */
void
health_op_hist (uint64_t out[NBUCKETS], uint64_t *sum,
                const struct hist_set *hs, enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] += hs->b[op][s][b];
  if (sum)
    *sum = hs->sum[op];
}

void
health_op_hist_live (uint64_t out[NBUCKETS], uint64_t *sum,
                     struct member_health *m, enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] +=
        atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
  if (sum)
    *sum = atomic_load_explicit (&m->lat_ns[op], memory_order_relaxed);
}







/* The decisions of one tick. */

/* An operation never requested has empty histograms: nothing to copy
 * (snapshots start zeroed), which spares a read-only volume four fifths
 * of the copying every tick.
 */
static void
take_snapshot (struct health *h, unsigned i, struct hist_set *out)
{
  struct member_health *m = &h->m[i];
  for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
    if (atomic_load_explicit (&m->requests[op], memory_order_relaxed) == 0)
      continue;
    for (unsigned s = 0; s < NSIZES; ++s)
      for (unsigned b = 0; b < NBUCKETS; ++b)
        out->b[op][s][b] =
          atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
    /* After the buckets: health_record adds to the sum first. */
    out->sum[op] = atomic_load_explicit (&m->lat_ns[op], memory_order_relaxed);
  }
}

/* m->win = now - the snapshot a window ago (or since start). */
static void
update_windows (struct health *h, bool rotate)
{
  /* Until a whole window has passed, the window is the whole run. */
  bool since_start = h->snaps_filled < h->nsnaps;
  unsigned oldest = h->snap_head;

  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    take_snapshot (h, i, m->win);
    if (!since_start) {
      const struct hist_set *o = &m->snaps[oldest];
      for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
        for (unsigned s = 0;
             s < NSIZES && atomic_load_explicit (&m->requests[op],
                                                 memory_order_relaxed);
             ++s)
          for (unsigned b = 0; b < NBUCKETS; ++b)
            m->win->b[op][s][b] -= o->b[op][s][b];
        m->win->sum[op] -= o->sum[op];
      }
    }
    if (rotate)
      take_snapshot (h, i, &m->snaps[h->snap_head]);
  }
  if (rotate) {
    h->snap_head = (h->snap_head + 1) % h->nsnaps;
    if (h->snaps_filled < h->nsnaps)
      h->snaps_filled++;
  }
}

static const char *const size_names[NSIZES] = { "<8K", "8K-64K", "64K-512K",
                                                ">=512K" };

static void
format_ns (char *buf, size_t len, double ns)
{
  if (ns >= 1e6)
    snprintf (buf, len, "%.1f ms", ns / 1e6);
  else
    snprintf (buf, len, "%.0f us", ns / 1e3);
}

static void
decide_slow (struct health *h)
{
  if (h->n < 2)
    return;
  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    enum member_state st = atomic_load (&m->state);
    bool measured = false, slow = false;
    char reason[REASON_MAX] = "";
    double worst = 0;

    for (unsigned op = OP_READ; op <= OP_WRITE; ++op)
      for (unsigned s = 0; s < NSIZES; ++s) {
        uint64_t peers[NBUCKETS] = { 0 }, nm, np;
        double mm, mp;

        for (unsigned j = 0; j < h->n; ++j)
          if (j != i && h->m[j].class == m->class)
            for (unsigned b = 0; b < NBUCKETS; ++b)
              peers[b] += h->m[j].win->b[op][s][b];
        /* No sum per size class: the medians are placed in their
         * buckets only.
         */
        mm = health_quantile_ns (m->win->b[op][s], 0.5, -1, &nm);
        mp = health_quantile_ns (peers, 0.5, -1, &np);
        if (nm < h->p.set.min_samples || np < h->p.set.min_samples || nm == 0
            || np == 0)
          continue;
        measured = true;
        if (mm >= SLOW_FLOOR_NS && mm > h->p.set.slow_factor * mp
            && mm / mp > worst) {
          char a[32], b[32];
          worst = mm / mp;
          slow = true;
          format_ns (a, sizeof a, mm);
          format_ns (b, sizeof b, mp);
          snprintf (reason, sizeof reason,
                    "median %s latency %s vs %s for its peers (%.1fx, %s "
                    "requests, %" PRIu64 " samples in %u s)",
                    op_name (op), a, b, mm / mp, size_names[s], nm,
                    h->p.set.window);
        }
      }
    if (slow && st == MS_OK)
      health_set_state (h, i, MS_SLOW, reason);
    else if (slow && st == MS_SLOW)
      health_set_state (h, i, MS_SLOW, reason); /* refresh the figures */
    else if (!slow && measured && st == MS_SLOW)
      health_set_state (h, i, MS_OK, "latency back in line with its peers");
  }
}

static void
expire_failing (struct health *h, uint64_t now)
{
  uint64_t window = (uint64_t) h->p.set.window * 1000000000;

  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    uint64_t last = atomic_load (&m->last_error_mono);
    uint64_t full = atomic_load (&m->last_full_mono);
    char reason[96];

    if (atomic_load (&m->state) == MS_FAILING && now - last >= window) {
      const char *floor = health_floor_reason (h, i);
      /* Failing for its drive (too): the reason is the drive's again. */
      if (floor[0] && strcmp (m->reason, floor) == 0)
        continue;
      snprintf (reason, sizeof reason, "no I/O error for %u s", h->p.set.window);
      health_settle (h, i, reason);
    }
    else if (atomic_load (&m->state) == MS_FULL && now - full >= window) {
      snprintf (reason, sizeof reason, "no write short of space for %u s",
                h->p.set.window);
      health_settle (h, i, reason);
    }
  }
}

static void
check_in_flight (struct health *h, uint64_t now)
{
  uint64_t limit = (uint64_t) h->p.set.io_timeout * 1000000000;

  if (h->p.set.io_timeout == 0)
    return;
  for (unsigned k = 0; k < MAX_SLOTS; ++k) {
    uint64_t since, mask;
    if (!atomic_load_explicit (&slots[k].used, memory_order_relaxed))
      continue;
    since = atomic_load_explicit (&slots[k].since, memory_order_acquire);
    if (since == 0 || now < since || now - since < limit)
      continue;
    mask = atomic_load (&slots[k].mask);
    if (atomic_load (&slots[k].since) != since)
      continue; /* another request began meanwhile */
    for (unsigned i = 0; i < h->n && i < 64; ++i)
      if ((mask >> i & 1) && atomic_load (&h->m[i].state) != MS_FAILED) {
        char reason[REASON_MAX];
        snprintf (reason, sizeof reason,
                  "not answering: a request has waited %" PRIu64
                  " s (io_timeout %u s)",
                  (now - since) / 1000000000, h->p.set.io_timeout);
        health_set_state (h, i, MS_FAILED, reason);
      }
  }
}




/* Counters changed without a transition (errors): rewrite at most this
 * often, so that an error storm does not become a write storm.
 */
#define DIRTY_DELAY_NS 200000000u

static void *
health_main (void *arg)
{
  struct health *h = arg;
  uint64_t next_tick = health_now_ns (), last_snap = 0;

  pthread_mutex_lock (&h->lock);
  while (!h->stop) {
    uint64_t now = health_now_ns (), deadline;

    if (now >= next_tick) {
      bool rotate = now - last_snap >= (uint64_t) h->snap_period * 1000000000
                    || last_snap == 0;
      update_windows (h, rotate);
      if (rotate)
        last_snap = now;
      decide_slow (h);
      expire_failing (h, now);
      check_in_flight (h, now);
      health_check_prober (h, now);
      pthread_cond_signal (&h->probe_cond);
      next_tick = now + 1000000000;
      if (now - h->last_status_mono
          >= (uint64_t) h->p.set.interval * 1000000000 - 50000000)
        h->dirty = true;
    }
    /* The first status at once: last_status_mono is 0 until then, and
     * the monotonic clock counts from boot -- a volume started by its unit
     * at boot would otherwise have no status file for up to an interval.
     */
    if (!h->status_written || h->nr_pending > 0 || h->pending_overflow
        || (h->dirty && now - h->last_status_mono >= DIRTY_DELAY_NS)) {
      unsigned shown = h->nr_pending; /* in the file about to be written */
      h->dirty = false;
      health_write_status (h, true);
      health_hand_events_to_hook (h, shown);
      continue; /* the lock was dropped: look again */
    }
    deadline = next_tick;
    if (h->dirty && h->last_status_mono + DIRTY_DELAY_NS < deadline)
      deadline = h->last_status_mono + DIRTY_DELAY_NS;
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    pthread_cond_timedwait (&h->cond, &h->lock, &ts);
  }
  /* The last word: counters as they are, running: false. */
  update_windows (h, false);
  health_write_status (h, false);
  health_hand_events_to_hook (h, MAX_EVENTS); /* the last write showed them all */
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

void
health_tick (struct health *h, uint64_t now)
{
  pthread_mutex_lock (&h->lock);
  update_windows (h, true);
  decide_slow (h);
  expire_failing (h, now);
  check_in_flight (h, now);
  pthread_mutex_unlock (&h->lock);
}

double
health_quantile_us (struct health *h, unsigned i, enum op_kind op, double q,
                    bool window)
{
  uint64_t hb[NBUCKETS], sum;
  double r;

  pthread_mutex_lock (&h->lock);
  if (window)
    health_op_hist (hb, &sum, h->m[i].win, op);
  else
    health_op_hist_live (hb, &sum, &h->m[i], op);
  r = health_quantile_ns (hb, q, (double) sum, NULL) / 1000;
  pthread_mutex_unlock (&h->lock);
  return r;
}




int
health_start (struct health *h)
{
  int e;

  if (h == NULL || h->started)
    return 0;
  e = pthread_create (&h->thread, NULL, health_main, h);
  if (e)
    goto err;
  h->started = true;
  if (h->p.on_change) {
    e = pthread_create (&h->hook_thread, NULL, health_hook_main, h);
    if (e)
      goto err;
  }
  pthread_mutex_lock (&h->lock);
  if (health_start_prober (h) == -1) {
    e = errno;
    pthread_mutex_unlock (&h->lock);
    goto err;
  }
  pthread_mutex_unlock (&h->lock);
  if (h->p.set.drive_interval > 0 && health_start_drive_poller (h) == -1) {
    e = errno;
    goto err;
  }
  if (health_start_spare_thread (h) == -1) {
    e = errno;
    goto err;
  }
  return 0;
err:
  errno = e;
  stripe_error ("health: cannot start a thread: %m");
  return -1;
}

bool
health_free (struct health *h)
{
  if (h == NULL)
    return true;
  if (h->started) {
    health_stop_spare_thread (h);
    pthread_mutex_lock (&h->lock);
    h->stop = true;
    pthread_cond_broadcast (&h->cond);
    pthread_cond_broadcast (&h->probe_cond);
    pthread_cond_broadcast (&h->drive_cond);
    pthread_mutex_unlock (&h->lock);
    health_stop_drive_poller (h);
    pthread_join (h->thread, NULL);
    /* The health thread handed over its last events: the hook thread
     * runs them, then exits.
     */
    pthread_mutex_lock (&h->lock);
    h->hook_stop = true;
    pthread_cond_broadcast (&h->hook_cond);
    pthread_mutex_unlock (&h->lock);
    if (h->p.on_change)
      pthread_join (h->hook_thread, NULL);
    /* A prober blocked in a dead device is not waited for: it is
     * abandoned, as when it overruns io_timeout.  It cannot start another
     * check now that stop is set.
     */
    pthread_mutex_lock (&h->lock);
    struct prober *pr = h->prober;
    h->prober = NULL;
    if (pr && atomic_load (&pr->busy_member) >= 0) {
      pr->abandoned = true;
      h->nr_abandoned++;
      pthread_detach (pr->thread);
      pr = NULL;
    }
    pthread_mutex_unlock (&h->lock);
    if (pr) {
      pthread_join (pr->thread, NULL);
      free (pr);
    }
    pthread_mutex_lock (&h->lock);
    unsigned abandoned = h->nr_abandoned;
    pthread_mutex_unlock (&h->lock);
    if (abandoned > 0) {
      /* A prober is stuck in a dead device and still points here. */
      stripe_debug ("health: %u prober thread(s) still blocked at exit",
                    abandoned);
      return false;
    }
  }
  for (unsigned k = 0; k < h->nr_pending; ++k)
    health_event_clear (&h->pending[k]);
  for (unsigned k = 0; k < h->hook_len; ++k)
    health_event_clear (&h->hookq[(h->hook_head + k) % MAX_EVENTS]);
  health_spare_free (h);
  if (h->m) {
    for (unsigned i = 0; i < h->n; ++i) {
      free (h->m[i].path);
      free (h->m[i].snaps);
      free (h->m[i].win);
    }
    free (h->m);
  }
  free ((char *) h->p.name);
  free ((char *) h->p.uuid);
  free ((char *) h->p.config);
  free ((char *) h->p.status_file);
  free ((char *) h->p.prometheus_file);
  free ((char *) h->p.on_change);
  pthread_mutex_destroy (&h->lock);
  pthread_cond_destroy (&h->cond);
  pthread_cond_destroy (&h->hook_cond);
  pthread_cond_destroy (&h->probe_cond);
  pthread_cond_destroy (&h->drive_cond);
  pthread_cond_destroy (&h->spare.cond);
  free (h);
  return true;
}
