/* nbdstripe: per-member health.  See include/health.h for the rules.
 *
 * Threads: the I/O path only touches atomics, and takes the lock when it
 * records an error (rare).  The health thread ticks once a second: it
 * snapshots the histograms, decides slow/failing/ok, notices requests and
 * probes that do not answer, and writes the status files -- at once when
 * a transition happened.  The prober thread stats every member and
 * re-probes failed ones (these may block on a dead device: if it does not
 * come back within io_timeout it is abandoned and a new one started).
 * The hook thread runs the on_change program for each event, in order.
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

#include "health.h"
#include "log.h"
#include "utf8.h"

extern char **environ;

/* Log-linear latency buckets: 8 per power of two of nanoseconds (a
 * median to within ~6%: with 4, a 4.4x gap could read as 4.0x), up to
 * 2^37 ns (137 s); beyond, the last bucket.
 */
#define SUB_BITS 3
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((37 - SUB_BITS + 1) * SUB)
/* Comparable request sizes: <8K, <64K, <512K, more. */
#define NSIZES 4
/* At most this many snapshots make a window. */
#define MAX_SNAPS 10
/* Below this median a member is never called slow (cache hits). */
#define SLOW_FLOOR_NS 100000u
#define MAX_EVENTS 256
#define REASON_MAX 256
/* Threads that can be tracked in flight at once. */
#define MAX_SLOTS 1024

struct hist_set {
  uint64_t b[OP_NR_TRACKED][NSIZES][NBUCKETS];
};

struct event {
  unsigned member;
  enum member_state state;
  char reason[REASON_MAX];
};

struct member_health {
  char *path;
  unsigned class; /* peers for latency: same class */
  _Atomic int state;
  _Atomic uint64_t requests[OP_NR_TRACKED], bytes[OP_NR_TRACKED], errors[OP_NR_TRACKED];
  _Atomic uint64_t lat_ns[OP_NR_TRACKED];
  _Atomic uint64_t rejected;
  _Atomic uint64_t hist[OP_NR_TRACKED][NSIZES][NBUCKETS];
  _Atomic unsigned consecutive;
  _Atomic uint64_t last_error_mono; /* 0: none since start or recovery */
  _Atomic uint64_t last_full_mono;  /* the last ENOSPC / EDQUOT */

  /* Under h->lock. */
  bool has_last_error;
  enum op_kind le_op;
  int le_errno;
  uint64_t le_offset;
  double le_time;
  double since;
  char reason[REASON_MAX];
  char cause[REASON_MAX]; /* why it failed, kept while re-probes report */
  bool dropped_done;      /* ops.dropped called for this failure */
  uint64_t next_probe;    /* monotonic ns */

  /* Health thread only. */
  struct hist_set *snaps; /* ring of nsnaps */
  struct hist_set *win;   /* the last window */
};

struct prober {
  struct health *h;
  pthread_t thread;
  _Atomic int busy_member; /* -1: idle */
  _Atomic uint64_t busy_since;
  _Atomic bool probing; /* a probe (failed member), not a check */
  bool abandoned;       /* under h->lock */
};

struct health {
  struct health_params p;
  struct health_ops ops;
  unsigned n;
  struct member_health *m;

  pthread_mutex_t lock;
  pthread_cond_t cond;      /* health thread */
  pthread_cond_t hook_cond; /* hook thread */
  pthread_cond_t probe_cond;
  bool stop, dirty, started, hook_stop;
  pthread_t thread, hook_thread;
  struct prober *prober;
  unsigned nr_abandoned;

  unsigned nsnaps, snap_period, snap_head, snaps_filled;

  double started_unix;
  uint64_t started_mono, last_status_mono;
  bool status_err_logged, prom_err_logged;

  /* Transitions not yet written to the status file. */
  struct event pending[MAX_EVENTS];
  unsigned nr_pending;
  bool pending_overflow;
  /* Events for the hook thread. */
  struct event hookq[MAX_EVENTS];
  unsigned hook_head, hook_len;
};

static struct slot {
  _Atomic uint64_t since;
  _Atomic uint64_t mask;
  _Atomic int used;
} slots[MAX_SLOTS];
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static __thread int my_slot = -1; /* -2: none was free */

static const char *const state_names[] = { "ok", "slow", "full", "failing",
                                            "failed" };
static const char *const event_names[] = { "MemberRecovered", "MemberSlow",
                                           "MemberFull",
                                           "MemberFailing", "MemberFailed" };

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
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double
now_unix (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The symbolic name of an errno ("EIO"), or NULL. */
static const char *
errno_name (int err)
{
  return strerrorname_np (err);
}

static unsigned
bucket_of (uint64_t ns)
{
  if (ns < SUB)
    return ns;
  unsigned e = 63 - __builtin_clzll (ns); /* >= SUB_BITS */
  unsigned sub = (ns >> (e - SUB_BITS)) & (SUB - 1);
  unsigned b = (e - SUB_BITS + 1) * SUB + sub;
  return b < NBUCKETS ? b : NBUCKETS - 1;
}

/* The middle of a bucket, in ns. */
static double
bucket_mid (unsigned b)
{
  if (b < SUB)
    return b;
  unsigned e = b / SUB + SUB_BITS - 1, sub = b % SUB;
  double width = (double) (1ull << (e - SUB_BITS));
  return (SUB + sub) * width + width / 2;
}

static unsigned
size_class (uint64_t bytes)
{
  return bytes < 8192 ? 0 : bytes < 65536 ? 1 : bytes < 524288 ? 2 : 3;
}

/* Quantile q of a histogram, in ns; NAN when empty. */
static double
quantile (const uint64_t *b, double q, uint64_t *count)
{
  uint64_t total = 0, seen = 0, rank;

  for (unsigned i = 0; i < NBUCKETS; ++i)
    total += b[i];
  if (count)
    *count = total;
  if (total == 0)
    return NAN;
  rank = (uint64_t) ceil (q * total);
  if (rank == 0)
    rank = 1;
  for (unsigned i = 0; i < NBUCKETS; ++i) {
    seen += b[i];
    if (seen >= rank)
      return bucket_mid (i);
  }
  return bucket_mid (NBUCKETS - 1);
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
static void
set_state (struct health *h, unsigned i, enum member_state s,
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
  m->since = now_unix ();
  snprintf (m->reason, sizeof m->reason, "%s", s == MS_OK ? "" : reason);
  if (s == MS_FAILED) {
    snprintf (m->cause, sizeof m->cause, "%s", reason ? reason : "");
    m->dropped_done = false;
    pthread_cond_signal (&h->probe_cond); /* drop it out now */
  }
  stripe_error ("health: member %u (%s): %s -> %s%s%s", i, m->path,
                state_names[old], state_names[s], reason ? ": " : "",
                reason ? reason : "");
  if (h->nr_pending < MAX_EVENTS) {
    struct event *e = &h->pending[h->nr_pending++];
    e->member = i;
    e->state = s;
    snprintf (e->reason, sizeof e->reason, "%s", reason ? reason : "");
  }
  else
    h->pending_overflow = true;
  h->dirty = true;
  pthread_cond_signal (&h->cond);
}

static void
describe_error (char *buf, size_t len, enum op_kind op, uint64_t offset,
                int err)
{
  const char *name = errno_name (err);
  snprintf (buf, len, "%s at member offset %" PRIu64 ": %s%s%s%s",
            op_name (op), offset, name ? name : "", name ? " (" : "",
            strerror (err), name ? ")" : "");
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
  if (err == EOPNOTSUPP)
    return; /* not done, not an error: the caller falls back */
  if (err == 0) {
    atomic_fetch_add_explicit (&m->bytes[op], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit (&m->lat_ns[op], ns, memory_order_relaxed);
    atomic_fetch_add_explicit (
      &m->hist[op][size_class (bytes)][bucket_of (ns)], 1,
      memory_order_relaxed);
    if (atomic_load_explicit (&m->consecutive, memory_order_relaxed) != 0)
      atomic_store_explicit (&m->consecutive, 0, memory_order_relaxed);
    return;
  }

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
        set_state (h, i, MS_FULL, reason);
      }
    }
  }
  else if (errno_is_gone (err)) {
    snprintf (reason, sizeof reason, "device gone: %s", what);
    set_state (h, i, MS_FAILED, reason);
  }
  else if (c >= h->p.set.error_threshold) {
    snprintf (reason, sizeof reason, "%u consecutive I/O errors, last: %s", c,
              what);
    set_state (h, i, MS_FAILED, reason);
  }
  else if (atomic_load (&m->state) < MS_FAILING) {
    snprintf (reason, sizeof reason, "I/O error: %s", what);
    set_state (h, i, MS_FAILING, reason);
  }
  else if (atomic_load (&m->state) == MS_FAILING) {
    snprintf (reason, sizeof reason, "%u I/O error%s in a row, last: %s", c,
              c == 1 ? "" : "s", what);
    set_state (h, i, MS_FAILING, reason);
  }
  pthread_cond_signal (&h->cond);
  pthread_mutex_unlock (&h->lock);
}

enum member_state
health_member_state (const struct health *h, unsigned i)
{
  if (h == NULL || i >= h->n)
    return MS_OK;
  return atomic_load_explicit (&h->m[i].state, memory_order_relaxed);
}

void
health_rejected (struct health *h, unsigned i)
{
  if (h && i < h->n)
    atomic_fetch_add_explicit (&h->m[i].rejected, 1, memory_order_relaxed);
}

void
health_member_gone (struct health *h, unsigned i, const char *reason)
{
  if (h == NULL || i >= h->n)
    return;
  pthread_mutex_lock (&h->lock);
  if (atomic_load (&h->m[i].state) != MS_FAILED)
    set_state (h, i, MS_FAILED, reason);
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
    pthread_condattr_destroy (&ca);
  }

  /* A window of W seconds is made of up to MAX_SNAPS periods. */
  window = h->p.set.window;
  h->snap_period = (window + MAX_SNAPS - 1) / MAX_SNAPS;
  h->nsnaps = (window + h->snap_period - 1) / h->snap_period;

  h->m = calloc (nr_members, sizeof *h->m);
  if (h->m == NULL || (p->name && !h->p.name))
    goto err;
  for (unsigned i = 0; i < nr_members; ++i) {
    struct member_health *m = &h->m[i];
    m->path = strdup (paths[i]);
    m->class = p->member_class ? p->member_class[i] : 0;
    m->snaps = calloc (h->nsnaps, sizeof *m->snaps);
    m->win = calloc (1, sizeof *m->win);
    if (!m->path || !m->snaps || !m->win)
      goto err;
    m->since = now_unix ();
  }
  h->started_unix = now_unix ();
  h->started_mono = health_now_ns ();
  return h;

err:
  errno = ENOMEM;
  health_free (h);
  return NULL;
}

/* Status files. */

static void
json_str (FILE *fp, const char *s)
{
  if (s == NULL) {
    fputs ("null", fp);
    return;
  }
  fputc ('"', fp);
  for (const unsigned char *p = (const unsigned char *) s; *p; ++p) {
    if (*p == '"' || *p == '\\')
      fprintf (fp, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf (fp, "\\u%04x", *p);
    else if (*p < 0x80)
      fputc (*p, fp);
    else {
      /* Pass valid UTF-8 through; anything else becomes U+FFFD. */
      unsigned cp;
      size_t len = utf8_decode (p, 4, &cp);
      if (len == 0) {
        fputs ("\\ufffd", fp);
        continue;
      }
      fwrite (p, 1, len, fp);
      p += len - 1;
    }
  }
  fputc ('"', fp);
}

static void
json_num (FILE *fp, double v, const char *fmt)
{
  if (isnan (v))
    fputs ("null", fp);
  else
    fprintf (fp, fmt, v);
}

static enum volume_state
vol_state (struct health *h)
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
static void
op_hist (uint64_t out[NBUCKETS], const struct hist_set *hs, enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] += hs->b[op][s][b];
}

static void
op_hist_live (uint64_t out[NBUCKETS], struct member_health *m,
              enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] +=
        atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
}

/* Called with the lock held: builds the text in memory. */
static char *
build_json (struct health *h, bool running, size_t *len)
{
  char *buf = NULL;
  FILE *fp = open_memstream (&buf, len);
  double now = now_unix ();

  if (fp == NULL)
    return NULL;
  fprintf (fp, "{\n  \"format\": 1,\n  \"running\": %s,\n  \"pid\": %ld,\n",
           running ? "true" : "false", (long) getpid ());
  fprintf (fp, "  \"updated_unix\": %.3f,\n  \"interval\": %u,\n", now,
           h->p.set.interval);
  fputs ("  \"volume\": {\n    \"name\": ", fp);
  json_str (fp, h->p.name);
  fputs (", \"uuid\": ", fp);
  json_str (fp, h->p.uuid);
  fputs (", \"config\": ", fp);
  json_str (fp, h->p.config);
  fprintf (fp,
           ",\n    \"size\": %" PRIu64 ", \"chunk\": %" PRIu64
           ", \"members\": %u,\n    \"state\": \"%s\",\n"
           "    \"started_unix\": %.3f, \"uptime_seconds\": %.0f\n  },\n",
           h->p.size, h->p.chunk, h->n, volume_state_name (vol_state (h)),
           h->started_unix, floor (now - h->started_unix));
  fprintf (fp,
           "  \"health\": { \"window\": %u, \"slow_factor\": %g, "
           "\"error_threshold\": %u,\n              \"min_samples\": %u, "
           "\"io_timeout\": %u, \"probe_interval\": %u },\n",
           h->p.set.window, h->p.set.slow_factor, h->p.set.error_threshold,
           h->p.set.min_samples, h->p.set.io_timeout, h->p.set.probe_interval);
  fputs ("  \"members\": [", fp);
  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    enum member_state s = atomic_load (&m->state);

    fprintf (fp, "%s\n    { \"index\": %u, \"path\": ", i ? "," : "", i);
    json_str (fp, m->path);
    fprintf (fp, ",\n      \"state\": \"%s\", \"state_since_unix\": %.3f, ",
             state_names[s], m->since);
    fputs ("\"reason\": ", fp);
    json_str (fp, m->reason);
    fprintf (fp,
             ",\n      \"consecutive_errors\": %u, \"rejected\": %" PRIu64
             ",\n      \"ops\": {",
             atomic_load (&m->consecutive), atomic_load (&m->rejected));
    for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
      uint64_t hb[NBUCKETS], samples;
      double p50, p99;

      op_hist (hb, m->win, op);
      p50 = quantile (hb, 0.50, &samples) / 1000;
      p99 = quantile (hb, 0.99, NULL) / 1000;
      fprintf (fp,
               "%s\n        \"%s\": { \"requests\": %" PRIu64
               ", \"bytes\": %" PRIu64 ", \"errors\": %" PRIu64 ",\n"
               "          \"latency_us\": { \"p50\": ",
               op ? "," : "", op_name (op), atomic_load (&m->requests[op]),
               atomic_load (&m->bytes[op]), atomic_load (&m->errors[op]));
      json_num (fp, p50, "%.1f");
      fputs (", \"p99\": ", fp);
      json_num (fp, p99, "%.1f");
      fprintf (fp, ", \"samples\": %" PRIu64 " },\n", samples);
      op_hist_live (hb, m, op);
      p50 = quantile (hb, 0.50, NULL) / 1000;
      p99 = quantile (hb, 0.99, NULL) / 1000;
      fputs ("          \"total_latency_us\": { \"p50\": ", fp);
      json_num (fp, p50, "%.1f");
      fputs (", \"p99\": ", fp);
      json_num (fp, p99, "%.1f");
      fprintf (fp, ", \"sum\": %.1f } }",
               atomic_load (&m->lat_ns[op]) / 1000.0);
    }
    fputs ("\n      },\n      \"last_error\": ", fp);
    if (!m->has_last_error)
      fputs ("null", fp);
    else {
      const char *name = errno_name (m->le_errno);
      fprintf (fp, "{ \"op\": \"%s\", \"errno\": %d, \"error\": ",
               op_name (m->le_op), m->le_errno);
      json_str (fp, name ? name : "");
      fputs (", \"message\": ", fp);
      json_str (fp, strerror (m->le_errno));
      fprintf (fp, ", \"offset\": %" PRIu64 ", \"time_unix\": %.3f }",
               m->le_offset, m->le_time);
    }
    fputs (" }", fp);
  }
  fputs ("\n  ]\n}\n", fp);
  if (fclose (fp) != 0) {
    free (buf);
    return NULL;
  }
  return buf;
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

static char *
build_prom (struct health *h, size_t *len)
{
  static const char *const vstates[] = { "ok", "degraded", "failed" };
  static const char *const kinds[] = { "requests", "bytes", "errors" };
  static const char *const kind_help[] = { "Requests sent to the member",
                                           "Bytes transferred",
                                           "Requests that failed" };
  char *buf = NULL;
  FILE *fp = open_memstream (&buf, len);
  enum volume_state vs = vol_state (h);

#define VOL()                                                                 \
  do {                                                                        \
    fputs ("{volume=\"", fp);                                                 \
    prom_str (fp, h->p.name);                                                 \
    fputc ('"', fp);                                                          \
  } while (0)
#define MEM(i)                                                                \
  do {                                                                        \
    VOL ();                                                                   \
    fprintf (fp, ",member=\"%u\"", (i));                                      \
  } while (0)

  if (fp == NULL)
    return NULL;
  fputs ("# HELP nbdstripe_volume_info The volume (value always 1).\n"
         "# TYPE nbdstripe_volume_info gauge\nnbdstripe_volume_info",
         fp);
  VOL ();
  fputs (",uuid=\"", fp);
  prom_str (fp, h->p.uuid ? h->p.uuid : "");
  fputs ("\"} 1\n", fp);
  fputs ("# HELP nbdstripe_volume_state The volume state (1 for the "
         "current one).\n# TYPE nbdstripe_volume_state gauge\n",
         fp);
  for (unsigned k = 0; k < 3; ++k) {
    fputs ("nbdstripe_volume_state", fp);
    VOL ();
    fprintf (fp, ",state=\"%s\"} %d\n", vstates[k], (unsigned) vs == k);
  }
  fputs ("# HELP nbdstripe_volume_size_bytes The volume size.\n"
         "# TYPE nbdstripe_volume_size_bytes gauge\n"
         "nbdstripe_volume_size_bytes",
         fp);
  VOL ();
  fprintf (fp, "} %" PRIu64 "\n", h->p.size);
  fputs ("# HELP nbdstripe_volume_start_time_seconds When the server "
         "started (Unix time).\n"
         "# TYPE nbdstripe_volume_start_time_seconds gauge\n"
         "nbdstripe_volume_start_time_seconds",
         fp);
  VOL ();
  fprintf (fp, "} %.3f\n", h->started_unix);

  fputs ("# HELP nbdstripe_member_state The member state (1 for the "
         "current one).\n# TYPE nbdstripe_member_state gauge\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    enum member_state s = atomic_load (&h->m[i].state);
    for (unsigned k = 0; k <= MS_FAILED; ++k) {
      fputs ("nbdstripe_member_state", fp);
      MEM (i);
      fputs (",path=\"", fp);
      prom_str (fp, h->m[i].path);
      fprintf (fp, "\",state=\"%s\"} %d\n", state_names[k], s == k);
    }
  }
  for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
    for (unsigned k = 0; k < 3; ++k) {
      fprintf (fp,
               "# HELP nbdstripe_member_%s_%s_total %s (%s).\n"
               "# TYPE nbdstripe_member_%s_%s_total counter\n",
               op_name (op), kinds[k], kind_help[k], op_name (op),
               op_name (op), kinds[k]);
      for (unsigned i = 0; i < h->n; ++i) {
        struct member_health *m = &h->m[i];
        _Atomic uint64_t *c = k == 0   ? &m->requests[op]
                              : k == 1 ? &m->bytes[op]
                                       : &m->errors[op];
        fprintf (fp, "nbdstripe_member_%s_%s_total", op_name (op), kinds[k]);
        MEM (i);
        fprintf (fp, "} %" PRIu64 "\n", atomic_load (c));
      }
    }
    fprintf (fp,
             "# HELP nbdstripe_member_%s_latency_seconds Latency of %s "
             "requests (quantiles over the last %u s).\n"
             "# TYPE nbdstripe_member_%s_latency_seconds summary\n",
             op_name (op), op_name (op), h->p.set.window, op_name (op));
    for (unsigned i = 0; i < h->n; ++i) {
      struct member_health *m = &h->m[i];
      uint64_t hb[NBUCKETS], count = 0;
      static const double qs[] = { 0.5, 0.99 };

      op_hist (hb, m->win, op);
      for (unsigned q = 0; q < 2; ++q) {
        double v = quantile (hb, qs[q], NULL) / 1e9;
        fprintf (fp, "nbdstripe_member_%s_latency_seconds", op_name (op));
        MEM (i);
        fprintf (fp, ",quantile=\"%g\"} ", qs[q]);
        if (isnan (v))
          fputs ("NaN\n", fp);
        else
          fprintf (fp, "%.9f\n", v);
      }
      op_hist_live (hb, m, op);
      for (unsigned b = 0; b < NBUCKETS; ++b)
        count += hb[b];
      fprintf (fp, "nbdstripe_member_%s_latency_seconds_sum", op_name (op));
      MEM (i);
      fprintf (fp, "} %.9f\n", atomic_load (&m->lat_ns[op]) / 1e9);
      fprintf (fp, "nbdstripe_member_%s_latency_seconds_count", op_name (op));
      MEM (i);
      fprintf (fp, "} %" PRIu64 "\n", count);
    }
  }
  fputs ("# HELP nbdstripe_member_rejected_total Requests refused at once "
         "because the member had failed.\n"
         "# TYPE nbdstripe_member_rejected_total counter\n",
         fp);
  for (unsigned i = 0; i < h->n; ++i) {
    fputs ("nbdstripe_member_rejected_total", fp);
    MEM (i);
    fprintf (fp, "} %" PRIu64 "\n", atomic_load (&h->m[i].rejected));
  }
#undef VOL
#undef MEM
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

/* Called with the lock held; drops it while writing. */
static void
write_status (struct health *h, bool running)
{
  char *json = NULL, *prom = NULL;
  size_t jlen = 0, plen = 0;

  if (h->p.status_file)
    json = build_json (h, running, &jlen);
  if (h->p.prometheus_file)
    prom = build_prom (h, &plen);
  h->last_status_mono = health_now_ns ();
  pthread_mutex_unlock (&h->lock);

  if (h->p.status_file) {
    if (json == NULL || write_atomic (h->p.status_file, json, jlen) == -1) {
      if (!h->status_err_logged)
        stripe_error ("health: cannot write the status file %s: %m",
                      h->p.status_file);
      h->status_err_logged = true;
    }
    else if (h->status_err_logged) {
      stripe_error ("health: status file %s written again", h->p.status_file);
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
    else
      h->prom_err_logged = false;
  }
  free (json);
  free (prom);
  pthread_mutex_lock (&h->lock);
}

/* The decisions of one tick. */

static void
take_snapshot (struct health *h, unsigned i, struct hist_set *out)
{
  struct member_health *m = &h->m[i];
  for (unsigned op = 0; op < OP_NR_TRACKED; ++op)
    for (unsigned s = 0; s < NSIZES; ++s)
      for (unsigned b = 0; b < NBUCKETS; ++b)
        out->b[op][s][b] =
          atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
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
      for (unsigned op = 0; op < OP_NR_TRACKED; ++op)
        for (unsigned s = 0; s < NSIZES; ++s)
          for (unsigned b = 0; b < NBUCKETS; ++b)
            m->win->b[op][s][b] -= o->b[op][s][b];
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
        mm = quantile (m->win->b[op][s], 0.5, &nm);
        mp = quantile (peers, 0.5, &np);
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
      set_state (h, i, MS_SLOW, reason);
    else if (slow && st == MS_SLOW)
      set_state (h, i, MS_SLOW, reason); /* refresh the figures */
    else if (!slow && measured && st == MS_SLOW)
      set_state (h, i, MS_OK, "latency back in line with its peers");
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
      snprintf (reason, sizeof reason, "no I/O error for %u s", h->p.set.window);
      set_state (h, i, MS_OK, reason);
    }
    else if (atomic_load (&m->state) == MS_FULL && now - full >= window) {
      snprintf (reason, sizeof reason, "no write short of space for %u s",
                h->p.set.window);
      set_state (h, i, MS_OK, reason);
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
        set_state (h, i, MS_FAILED, reason);
      }
  }
}

static void *prober_main (void *arg);

static int
start_prober (struct health *h)
{
  struct prober *pr = calloc (1, sizeof *pr);
  int e;

  if (pr == NULL)
    return -1;
  pr->h = h;
  pr->busy_member = -1;
  e = pthread_create (&pr->thread, NULL, prober_main, pr);
  if (e) {
    free (pr);
    errno = e;
    return -1;
  }
  h->prober = pr;
  return 0;
}

/* A prober stuck on a member for longer than io_timeout: that member
 * is failed; the prober is left to its fate and a new one takes over.
 */
static void
check_prober (struct health *h, uint64_t now)
{
  struct prober *pr = h->prober;
  unsigned bound =
    h->p.set.io_timeout ? h->p.set.io_timeout : HEALTH_DEFAULT_IO_TIMEOUT;
  int i;
  uint64_t since;

  if (pr == NULL)
    return;
  i = atomic_load (&pr->busy_member);
  since = atomic_load (&pr->busy_since);
  if (i < 0 || since == 0 || now - since < (uint64_t) bound * 1000000000)
    return;
  pr->abandoned = true;
  h->nr_abandoned++;
  pthread_detach (pr->thread);
  h->prober = NULL;
  {
    char reason[REASON_MAX];
    snprintf (reason, sizeof reason,
              "not answering: a %s of the device has waited %" PRIu64 " s",
              atomic_load (&pr->probing) ? "re-probe" : "check",
              (now - since) / 1000000000);
    set_state (h, (unsigned) i, MS_FAILED, reason);
  }
  if (start_prober (h) == -1)
    stripe_error ("health: cannot start a new prober thread: %m");
}

/* Hand the first n pending events (those the status file just written
 * shows) to the hook thread; later ones wait for the next write.
 */
static void
hand_events_to_hook (struct health *h, unsigned n)
{
  if (h->pending_overflow) {
    stripe_error ("health: more than %d state changes at once: some "
                  "on_change events were dropped",
                  MAX_EVENTS);
    h->pending_overflow = false;
  }
  if (n > h->nr_pending)
    n = h->nr_pending;
  for (unsigned k = 0; k < n; ++k) {
    if (h->p.on_change == NULL)
      continue;
    if (h->hook_len == MAX_EVENTS) {
      stripe_error ("health: on_change is behind by %d events: dropping %s "
                    "for member %u",
                    MAX_EVENTS, event_names[h->pending[k].state],
                    h->pending[k].member);
      continue;
    }
    h->hookq[(h->hook_head + h->hook_len++) % MAX_EVENTS] = h->pending[k];
  }
  memmove (h->pending, h->pending + n,
           (h->nr_pending - n) * sizeof h->pending[0]);
  h->nr_pending -= n;
  pthread_cond_signal (&h->hook_cond);
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
      check_prober (h, now);
      pthread_cond_signal (&h->probe_cond);
      next_tick = now + 1000000000;
      if (now - h->last_status_mono
          >= (uint64_t) h->p.set.interval * 1000000000 - 50000000)
        h->dirty = true;
    }
    if (h->nr_pending > 0 || h->pending_overflow
        || (h->dirty && now - h->last_status_mono >= DIRTY_DELAY_NS)) {
      unsigned shown = h->nr_pending; /* in the file about to be written */
      h->dirty = false;
      write_status (h, true);
      hand_events_to_hook (h, shown);
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
  write_status (h, false);
  hand_events_to_hook (h, MAX_EVENTS); /* the last write showed them all */
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
  uint64_t hb[NBUCKETS];
  double r;

  pthread_mutex_lock (&h->lock);
  if (window)
    op_hist (hb, h->m[i].win, op);
  else
    op_hist_live (hb, &h->m[i], op);
  r = quantile (hb, q, NULL) / 1000;
  pthread_mutex_unlock (&h->lock);
  return r;
}

static void *
prober_main (void *arg)
{
  struct prober *pr = arg;
  struct health *h = pr->h;

  pthread_mutex_lock (&h->lock);
  while (!h->stop && !pr->abandoned) {
    uint64_t now = health_now_ns ();
    for (unsigned i = 0; i < h->n && !h->stop && !pr->abandoned; ++i) {
      struct member_health *m = &h->m[i];
      bool failed = atomic_load (&m->state) == MS_FAILED;
      char why[REASON_MAX] = "";
      void *fresh = NULL;
      int r;

      if (failed && !m->dropped_done && h->ops.dropped) {
        /* Once per failure, before any re-probe. */
        m->dropped_done = true;
        atomic_store (&pr->probing, true);
        atomic_store (&pr->busy_since, health_now_ns ());
        atomic_store (&pr->busy_member, (int) i);
        pthread_mutex_unlock (&h->lock);
        h->ops.dropped (h->ops.opaque, i);
        pthread_mutex_lock (&h->lock);
        atomic_store (&pr->busy_member, -1);
        atomic_store (&pr->busy_since, 0);
        if (pr->abandoned || h->stop)
          break;
        now = health_now_ns ();
      }
      if (failed && now < m->next_probe)
        continue;
      if (failed)
        m->next_probe = now + (uint64_t) h->p.set.probe_interval * 1000000000;
      if ((failed && !h->ops.probe) || (!failed && !h->ops.check))
        continue;
      atomic_store (&pr->probing, failed);
      atomic_store (&pr->busy_since, health_now_ns ());
      atomic_store (&pr->busy_member, (int) i);
      pthread_mutex_unlock (&h->lock);
      if (failed)
        r = h->ops.probe (h->ops.opaque, i, &fresh, why, sizeof why);
      else
        r = h->ops.check (h->ops.opaque, i, why, sizeof why);
      pthread_mutex_lock (&h->lock);
      atomic_store (&pr->busy_member, -1);
      atomic_store (&pr->busy_since, 0);
      if (pr->abandoned || h->stop) {
        if (fresh)
          h->ops.discard (h->ops.opaque, i, fresh);
        break;
      }
      if (failed && r == 0) {
        h->ops.adopt (h->ops.opaque, i, fresh);
        atomic_store (&m->consecutive, 0);
        atomic_store (&m->last_error_mono, 0);
        set_state (h, i, MS_OK, "answered the re-probe");
      }
      else if (failed) {
        /* Still failed: the status says what the re-probe found. */
        char reason[REASON_MAX];
        stripe_debug ("health: member %u (%s): re-probe: %s", i, m->path, why);
        snprintf (reason, sizeof reason, "%.120s; re-probe: %.120s", m->cause,
                  why);
        set_state (h, i, MS_FAILED, reason);
      }
      else if (r == -1 && atomic_load (&m->state) != MS_FAILED)
        set_state (h, i, MS_FAILED, why);
    }
    if (h->stop || pr->abandoned)
      break;
    /* The health thread wakes us every tick. */
    pthread_cond_wait (&h->probe_cond, &h->lock);
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

/* Run PROGRAM EVENT VOLUME INDEX PATH, bounded by on_change_timeout. */
static void
run_hook (struct health *h, const struct event *e)
{
  const char *event = event_names[e->state];
  const char *path = h->m[e->member].path;
  char index[16], *envp[256 + 8];
  char *vars[6] = { NULL };
  const char *argv[6];
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  pid_t pid;
  int r, pidfd, status = 0, n = 0;
  bool timed_out = false;

  snprintf (index, sizeof index, "%u", e->member);
  argv[0] = h->p.on_change;
  argv[1] = event;
  argv[2] = h->p.name;
  argv[3] = index;
  argv[4] = path;
  argv[5] = NULL;
  if (asprintf (&vars[0], "NBDSTRIPE_EVENT=%s", event) < 0
      || asprintf (&vars[1], "NBDSTRIPE_VOLUME=%s", h->p.name) < 0
      || asprintf (&vars[2], "NBDSTRIPE_MEMBER=%u", e->member) < 0
      || asprintf (&vars[3], "NBDSTRIPE_MEMBER_PATH=%s", path) < 0
      || asprintf (&vars[4], "NBDSTRIPE_STATE=%s", state_names[e->state]) < 0
      || asprintf (&vars[5], "NBDSTRIPE_REASON=%s", e->reason) < 0) {
    stripe_error ("health: on_change: out of memory");
    goto out;
  }
  for (char **p = environ; p && *p && n < 256; ++p)
    if (strncmp (*p, "NBDSTRIPE_", 10) != 0)
      envp[n++] = *p;
  for (int k = 0; k < 6; ++k)
    envp[n++] = vars[k];
  envp[n] = NULL;

  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_init (&attr);
  posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP
                                     | POSIX_SPAWN_SETSIGMASK
                                     | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup (&attr, 0);
  {
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setsigdefault (&attr, &all);
  }
  r =
    posix_spawn (&pid, h->p.on_change, &fa, &attr, (char *const *) argv, envp);
  posix_spawn_file_actions_destroy (&fa);
  posix_spawnattr_destroy (&attr);
  if (r != 0) {
    errno = r;
    stripe_error ("health: on_change %s %s %s %s %s: %m", h->p.on_change,
                  event, h->p.name, index, path);
    goto out;
  }

  pidfd = pidfd_open (pid, 0);
  if (pidfd >= 0) {
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    int ms = h->p.set.on_change_timeout * 1000;
    uint64_t end = health_now_ns () + (uint64_t) ms * 1000000;
    for (;;) {
      r = poll (&pfd, 1, ms);
      if (r > 0)
        break;
      if (r == 0 || (r == -1 && errno != EINTR)) {
        timed_out = true;
        break;
      }
      uint64_t now = health_now_ns ();
      ms = now >= end ? 0 : (end - now) / 1000000;
    }
    close (pidfd);
  }
  if (timed_out) {
    kill (-pid, SIGKILL);
    kill (pid, SIGKILL);
  }
  while (waitpid (pid, &status, 0) == -1 && errno == EINTR)
    ;
  if (timed_out)
    stripe_error ("health: on_change %s %s %s %s %s: killed after %u s",
                  h->p.on_change, event, h->p.name, index, path,
                  h->p.set.on_change_timeout);
  else if (WIFEXITED (status) && WEXITSTATUS (status) != 0)
    stripe_error ("health: on_change %s %s %s %s %s: exit status %d",
                  h->p.on_change, event, h->p.name, index, path,
                  WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    stripe_error ("health: on_change %s %s %s %s %s: killed by signal %d",
                  h->p.on_change, event, h->p.name, index, path,
                  WTERMSIG (status));
  else
    stripe_debug ("health: on_change %s %s %s %s %s: done", h->p.on_change,
                  event, h->p.name, index, path);
out:
  for (int k = 0; k < 6; ++k)
    free (vars[k]);
}

static void *
hook_main (void *arg)
{
  struct health *h = arg;

  pthread_mutex_lock (&h->lock);
  for (;;) {
    while (h->hook_len == 0 && !h->hook_stop)
      pthread_cond_wait (&h->hook_cond, &h->lock);
    if (h->hook_len == 0)
      break; /* stopping and nothing left */
    struct event e = h->hookq[h->hook_head];
    h->hook_head = (h->hook_head + 1) % MAX_EVENTS;
    h->hook_len--;
    pthread_mutex_unlock (&h->lock);
    run_hook (h, &e);
    pthread_mutex_lock (&h->lock);
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
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
    e = pthread_create (&h->hook_thread, NULL, hook_main, h);
    if (e)
      goto err;
  }
  pthread_mutex_lock (&h->lock);
  if (start_prober (h) == -1) {
    e = errno;
    pthread_mutex_unlock (&h->lock);
    goto err;
  }
  pthread_mutex_unlock (&h->lock);
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
    pthread_mutex_lock (&h->lock);
    h->stop = true;
    pthread_cond_broadcast (&h->cond);
    pthread_cond_broadcast (&h->probe_cond);
    pthread_mutex_unlock (&h->lock);
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
  free (h);
  return true;
}
