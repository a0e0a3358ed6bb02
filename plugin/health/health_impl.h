/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health's insides, shared by its files (plugin/health/health*.c):
 * the tracker's state and the functions one file lends another.  Not for
 * anyone else: include/health.h is the interface.
 *
 *   health.c          the tracker made, started and freed; names, events
 *   health_record.c   recording (the I/O path), the rules of the states
 *   health_hist.c     the latency histograms read: edges, quantiles
 *   health_inflight.c requests in flight, and io_timeout's check
 *   health_tick.c     the health thread: its ticks, slow, expiry
 *   health_status.c   the status file (JSON) and the Prometheus file,
 *                     written atomically
 *   health_prom.c     the Prometheus text
 *   health_prober.c   the prober thread: checks, drops, re-probes
 *   health_hook.c     the on_change program, run for each event in order
 *   health_drive.c    the drive poller thread: drive health (drive.h)
 *                     read in the background, the rule applied
 *
 * Health is a monitor: it records, judges and reports, and tells
 * ops.state_changed when a member's state changes (from the health
 * thread, without its lock); it starts nothing.
 */
#ifndef NBDSTRIPE_HEALTH_IMPL_H
#define NBDSTRIPE_HEALTH_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "drive.h"
#include "health.h"

/* Log-linear latency buckets: 8 per power of two of nanoseconds (a
 * median to within ~6%: with 4, a 4.4x gap could read as 4.0x), up to
 * 2^37 ns (137 s); beyond, the last bucket.  A bucket holds the
 * latencies in (lo, hi] (health_bucket_lo, _hi), upper edge included as
 * Prometheus's le is: every power of two of ns is an edge, so a
 * histogram's cumulative count at le = 2^k ns is exact.
 */
#define SUB_BITS 3
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((37 - SUB_BITS + 1) * SUB)
/* Comparable request sizes: <8K, <64K, <512K, more. */
#define NSIZES 4
/* At most this many snapshots make a window. */
#define MAX_SNAPS 10
#define MAX_EVENTS 256
#define REASON_MAX 256
/* Threads that can be tracked in flight at once. */
#define MAX_SLOTS 1024
/* Drive readings kept for the write rate (data written over time); the
 * rate is taken over at most the last WEAR_WINDOW_S of them.
 */
#define WEAR_SAMPLES 160
#define WEAR_WINDOW_S 86400

struct hist_set {
  uint64_t b[OP_NR_TRACKED][NSIZES][NBUCKETS];
  uint64_t sum[OP_NR_TRACKED]; /* ns, of the samples in b (lat_ns) */
};

/* What an event says: member's new state (EV_STATE), or how on_failing's
 * replace onto a spare goes, as the array's spare policy reports it
 * (health_report's kinds, health.h).
 */
enum event_kind { EV_STATE, EV_REPLACING = HEALTH_REPLACING,
                  EV_REPLACED = HEALTH_REPLACED,
                  EV_NOT_REPLACED = HEALTH_NOT_REPLACED };

struct event {
  unsigned member;
  enum member_state state; /* EV_STATE: the new one; else the one then */
  enum event_kind kind;
  char reason[REASON_MAX];
  /* Replace events: the member's device and the spare (malloc'd, owned
   * by the event: health_event_clear).
   */
  char *old_path, *new_path;
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
  /* Drive health (health_drive.c): whether it was read at all; why the
   * last reading failed ("" when it did not) and when; the last reading
   * that worked and when it was taken; the first one that worked (what
   * "grew" is measured from); why the drive predicts its failure (""
   * when it does not): the member stays failing while that holds.
   */
  bool drive_read_once, have_drive, have_drive_base;
  char drive_error[REASON_MAX];
  double drive_error_unix;
  struct drive_health drive, drive_base;
  double drive_unix;
  char drive_reason[REASON_MAX];
  /* What the last scrub found unreadable (scrub.h), "" when nothing; and
   * the floor: drive_reason and scrub_reason together, what keeps the
   * member failing whatever its I/O does.
   */
  char scrub_reason[REASON_MAX];
  char floor[REASON_MAX];
  /* A state below failing the member was in since the listener was
   * last told (-1: none): told first, so that a member that left
   * failing and came back to it between two tellings is seen to (the
   * spare policy tries a member again each time it becomes failing).
   */
  int passed;
  struct wear_sample {
    uint64_t mono;   /* ns */
    int64_t written; /* bytes */
  } wear[WEAR_SAMPLES];
  unsigned wear_head, wear_len;

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

struct drive_poller {
  struct health *h;
  pthread_t thread;
  _Atomic bool busy; /* in a drive's commands */
  bool abandoned;    /* under h->lock */
};

struct health {
  struct health_params p;
  struct health_ops ops;
  unsigned n;
  struct member_health *m;
  _Atomic uint64_t failed; /* bit i: member i is MS_FAILED */

  pthread_mutex_t lock;
  pthread_cond_t cond;      /* health thread */
  pthread_cond_t hook_cond; /* hook thread */
  pthread_cond_t probe_cond;
  pthread_cond_t drive_cond; /* the drive poller's period */
  bool stop, dirty, started, hook_stop;
  pthread_t thread, hook_thread;
  struct prober *prober;
  struct drive_poller *drive_poller;
  unsigned nr_abandoned;

  unsigned nsnaps, snap_period, snap_head, snaps_filled;

  double started_unix;
  uint64_t started_mono, last_status_mono;
  bool status_written; /* once: last_status_mono means something */
  bool status_err_logged, prom_err_logged;

  /* Transitions not yet written to the status file. */
  struct event pending[MAX_EVENTS];
  unsigned nr_pending;
  bool pending_overflow;
  /* Events for the hook thread. */
  struct event hookq[MAX_EVENTS];
  unsigned hook_head, hook_len;

  /* Bit i: member i's state changed since ops.state_changed was last
   * told (the health thread tells it, without the lock).
   */
  uint64_t notify;
};

extern const char *const health_state_names[];
extern const char *const health_event_names[];

/* The event's name: "MemberFailing", "MemberReplacing"... */
extern const char *health_event_name (const struct event *e);
/* Queue e for the status file and the hook (lock held); e's paths are
 * taken.  Frees what an event owns.
 */
extern void health_push_event (struct health *h, struct event *e);
extern void health_event_clear (struct event *e);

/* Called with h->lock held. */
extern void health_set_state (struct health *h, unsigned i,
                              enum member_state s, const char *reason);
extern enum volume_state health_vol_state (struct health *h);
extern unsigned health_nr_members (struct health *h);
/* The symbolic name of an errno ("EIO"), or NULL. */
extern const char *health_errno_name (int err);
/* Bucket b holds the latencies in (lo, hi] ns (bucket 0: [0, 1]); the
 * last one has no upper bound (health_bucket_hi says INFINITY).
 */
extern double health_bucket_lo (unsigned b);
extern double health_bucket_hi (unsigned b);
/* Quantile q of a histogram, in ns; NAN when empty.  sum: the sum of
 * its samples in ns, or a negative number when unknown; when known the
 * answer never leaves what the samples allow (one sample: itself).
 */
extern double health_quantile_ns (const uint64_t *b, double q, double sum,
                                  uint64_t *count);
/* The histogram of one operation, all sizes, and the sum of its samples
 * (sum may be NULL): of a snapshot, or live (the sum read after the
 * buckets, as the I/O path adds it before them).
 */
extern void health_op_hist (uint64_t out[NBUCKETS], uint64_t *sum,
                            const struct hist_set *hs, enum op_kind op);
extern void health_op_hist_live (uint64_t out[NBUCKETS], uint64_t *sum,
                                 struct member_health *m, enum op_kind op);

/* health_tick.c: the health thread. */
extern void *health_main (void *arg);

/* health_inflight.c: fail the members a request has waited on longer
 * than io_timeout (lock held).
 */
extern void health_check_in_flight (struct health *h, uint64_t now);

/* health_status.c: write the status files now.  Called with the lock
 * held; drops it while writing.
 */
extern void health_write_status (struct health *h, bool running);

/* health_prom.c: the Prometheus text, malloc'd (*len its length; NULL
 * when out of memory).  Lock held; extra: the status's extra objects,
 * or NULL.
 */
struct json_object;
extern char *health_build_prom (struct health *h, bool running, double now,
                                struct json_object *extra, size_t *len);

/* health_prober.c */
extern int health_start_prober (struct health *h);
extern void health_check_prober (struct health *h, uint64_t now);

/* Member i is ok again (why), unless something keeps it failing (its
 * drive predicts a failure): then failing for that reason.  Lock held.
 */
extern void health_settle (struct health *h, unsigned i, const char *why);
/* The reason that keeps member i failing whatever its I/O does, "" when
 * none.  Lock held.
 */
extern const char *health_floor_reason (struct health *h, unsigned i);
/* Member i's drive_reason or scrub_reason changed: the floor made again
 * and applied -- failing with it, or, when it is gone and no recent I/O
 * error keeps the member failing, ok (why_ok).  Lock held.
 */
extern void health_update_floor (struct health *h, unsigned i, uint64_t now,
                                 const char *why_ok);

/* health_drive.c */
extern int health_start_drive_poller (struct health *h);
/* Stop it: joined, or abandoned in a drive's command (then counted in
 * nr_abandoned).  Lock not held.
 */
extern void health_stop_drive_poller (struct health *h);
/* The member's drive object for the status (a new reference). */
struct json_object;
extern struct json_object *health_drive_json (struct health *h, unsigned i);

/* health_hook.c */
extern void health_hand_events_to_hook (struct health *h, unsigned n);
extern void *health_hook_main (void *arg);

#endif /* NBDSTRIPE_HEALTH_IMPL_H */
