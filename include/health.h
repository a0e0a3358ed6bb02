/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health.
 *
 * What is tracked, per member: requests, bytes and errors per operation
 * (read, write, trim, zero, flush); the last error (operation, errno,
 * member offset, time); latency per operation in log-linear histograms
 * (8 buckets per power of two of nanoseconds: at most 12.5% wide), in total
 * and over a sliding window.  The I/O path only does relaxed atomic adds
 * on its member's counters: nothing is serialised; the health thread
 * snapshots the cumulative histograms once a second and a window is the
 * difference between now and WINDOW seconds ago.
 *
 * Errors that count: only those that say something about the member --
 * EIO, EROFS, EREMOTEIO, ENOMEDIUM, and the device gone (below).  A
 * client's bad request (EINVAL: misaligned, out of range), a capability
 * missing (EOPNOTSUPP), memory (ENOMEM), a permission (EPERM, EACCES)
 * are the request's failure, not the member's: they are counted in the
 * member's errors and last error, and change no state.  A full member
 * (ENOSPC, EDQUOT) is "full".
 *
 * States of a member (worst first wins):
 *   failed   error_threshold consecutive errors, or the device is gone
 *            (ENODEV, ENXIO, ESHUTDOWN, ENOTCONN, ECONNABORTED, ECONNRESET,
 *            EPIPE, ESTALE, ETIMEDOUT; the path
 *            replaced, removed or truncated), or a request or a probe has
 *            not answered within io_timeout.  Requests touching a failed
 *            member fail at once with EIO without touching any member.
 *            A failed member is re-probed in the background every
 *            probe_interval (reopened by path, size and header checked,
 *            first 4 KiB read, bounded by io_timeout); when it answers
 *            it is back to ok (MemberRecovered).
 *   failing  an I/O error within the last WINDOW seconds, fewer than
 *            error_threshold in a row.  Back to ok after WINDOW seconds
 *            without error.  Or its drive predicts its failure
 *            (drive.h: a critical warning, spare below its threshold,
 *            media errors or bad sectors growing), read every
 *            drive_interval seconds by the drive poller: failing with
 *            the reason ("predicted: available spare 8% < threshold
 *            10%") for as long as the drive says so.  Or a scrub
 *            (scrub.h) found places of it that cannot be read: failing
 *            ("scrub: ...") until a later scrub reads all of it.
 *   full     a write failed for want of space (ENOSPC, EDQUOT) within the
 *            last WINDOW seconds: a warning, the member keeps serving
 *            (reads, trims that free space, writes that fit); the writer
 *            got ENOSPC.  Back to ok after WINDOW seconds without it.
 *   slow     over the window, for comparable requests (same operation,
 *            read or write, and same size class: <8K, <64K, <512K, more),
 *            the member's median latency is more than slow_factor times
 *            the median of its peers' requests taken together (peers:
 *            the other members of the same kind, local or NBD), with at
 *            least min_samples requests on both sides and a member median
 *            of at least slow_floor_us (default 1 ms: what a busy host or
 *            the page cache does to sub-ms latencies is not a verdict).
 *            Back to ok when a window with enough samples says otherwise;
 *            an idle member keeps its state.
 *   ok
 *   removed  no longer a member: a shrink removed it while served
 *            (health_member_removed).  Nothing touches it any more, it is
 *            not checked nor probed, and it stays removed until the
 *            server stops (served again, it is no longer listed).
 *   missing  the volume is served degraded without it (volume.h): it
 *            could not be opened or its header read when the server
 *            started.  Requests touching it fail with EIO; it is not
 *            checked nor probed, and stays missing until the server stops.
 * Volume: failed if a member is failed, degraded if one is slow, full,
 * failing or missing, else ok.
 *
 * Every transition is logged (nbdkit's log) naming the member index and
 * path, written to the status file at once, and then handed to the
 * on_change program (in a thread of its own, with a timeout; never in the
 * I/O path): argv = PROGRAM EVENT VOLUME MEMBER_INDEX MEMBER_PATH, events
 * MemberSlow, MemberFull, MemberFailing, MemberFailed, MemberRecovered
 * (any return to ok), MemberRemoved (a shrink's end), MemberMissing (the
 * volume served degraded without it, at start), in order; a drive predicting
 * its failure is a MemberFailing whose reason starts "predicted:".  The
 * environment also has NBDSTRIPE_EVENT, NBDSTRIPE_VOLUME, NBDSTRIPE_MEMBER,
 * NBDSTRIPE_MEMBER_PATH, NBDSTRIPE_STATE (the new state) and NBDSTRIPE_REASON.
 *
 * on_failing = "replace" (the array's spare policy, array.h, which health
 * tells of every change of state): a member that becomes failing is
 * replaced onto a spare, one at a time, from a thread of the policy's;
 * health reports what it asks (health_report): events MemberReplacing
 * (started), MemberReplaced, MemberNotReplaced (no spare fits, or the replace
 * failed), MEMBER_PATH the old device, NBDSTRIPE_OLD_PATH and
 * NBDSTRIPE_NEW_PATH (the spare) beside it.
 *
 * The status file (JSON, format 1), replaced atomically (written to a new
 * temporary .FILE.XXXXXX beside it, mode 0644, synced, then renamed; no
 * symlink is ever followed) every interval and on every transition:
 *
 * {
 *   "format": 1,
 *   "running": true,            // false in the last write, at shutdown
 *   "pid": 1234,
 *   "updated_unix": 1796212345.123,
 *   "interval": 5,              // seconds between rewrites
 *   "volume": {
 *     "name": "fast0", "uuid": "…" or null (no header), "config": "…" or null,
 *     "size": 8589934592, "chunk": 131072, "members": 4,
 *     "state": "ok" | "degraded" | "failed",
 *     "started_unix": 1796212000.0, "uptime_seconds": 345
 *   },
 *   "health": { "window": 10, "slow_factor": 4.0, "slow_floor_us": 1000,
 *               "error_threshold": 8, "min_samples": 20, "io_timeout": 30,
 *               "probe_interval": 2, "drive_interval": 600 },
 *   "members": [
 *     { "index": 0, "path": "/dev/nvme0n1",
 *       "state": "ok" | "slow" | "full" | "failing" | "failed"
 *                | "removed" | "missing",
 *       "state_since_unix": 1796212000.0,
 *       "reason": "" | "why it is in this state",
 *       "consecutive_errors": 0,
 *       "rejected": 0,        // requests refused at once (member failed)
 *       "ops": {
 *         "read": { "requests": N, "bytes": N, "errors": N,
 *           "latency_us": { "p50": 81.0, "p99": 410.0, "samples": N },
 *           "total_latency_us": { "p50": 80.0, "p99": 400.0, "sum": S } },
 *         "write": …, "trim": …, "zero": …, "flush": …
 *       },               // p50/p99 are null when there are no samples;
 *                        // flush "bytes" is always 0 (a flush moves none)
 *       "last_error": null | { "op": "read", "errno": 5, "error": "EIO",
 *                              "message": "Input/output error",
 *                              "offset": 1048576, "time_unix": … },
 *       "drive": {       // what the member's drive says (drive.h)
 *         "available": true | false,
 *         "reason": "…", "reason_unix": …,   // when false: why (a file,
 *                        // a loop device, a remote member, no SMART...)
 *         // the last reading that worked (also when the last one
 *         // failed), figures null when the drive does not report them:
 *         "read_unix": …, "kind": "nvme" | "ata", "device": "/dev/…",
 *         "model": "…", "serial": "…", "firmware": "…",
 *         "predicts_failure": null | "predicted: …",
 *         "temperature_celsius": 41, "power_on_hours": N,
 *         "power_cycles": N, "percentage_used": 3,
 *         "data_written_bytes": N,
 *         // NVMe:
 *         "critical_warning": 0, "critical_warnings": [ "…" ],
 *         "available_spare": 100, "available_spare_threshold": 10,
 *         "media_errors": 0, "unsafe_shutdowns": 2,
 *         "data_units_written": N, "error_log_entries": N,
 *         // ATA:
 *         "smart_status": "passed" | "failing" | null,
 *         "reallocated_sectors": 0, "pending_sectors": 0,
 *         "offline_uncorrectable": 0, "wear_leveling_count": 97 | null,
 *         "wear_leveling_raw": N, "failing_attribute": null | "…",
 *         "wear": { "write_rate_bytes_per_second": R | null,
 *                   "rate_over_seconds": S,
 *                   "rated_endurance_bytes": E | null,
 *                   "seconds_to_rated_endurance": T | null,
 *                   "estimate": "estimated" | "reached" | "not_writing"
 *                     | "no_percentage_used" | "no_write_rate" }
 *       }
 *     }, …
 *   ],
 *   "on_failing": { "policy": "alert" | "replace",
 *                   "last": null | { "state": "waiting" | "replacing"
 *                       | "replaced" | "not_replaced", "member": 1,
 *                       "old": "…", "spare": "…" | null, "reason": "…",
 *                       "time_unix": … } },
 *   "replace": { … },    // once a replace has run: the last one, also in
 *                        // the last write (replace_status, replace.h)
 *   "scrub": { … },      // once a scrub has run: the last one (scrub.h)
 *   "spares": [ … ]      // with spares: those not used yet (spares.h)
 * }
 *
 * Latency figures are of the requests that succeeded.  p50 and p99 are
 * read from the histograms: within the bucket of the true value (at most
 * 12.5% off), placed there with the help of the samples' sum, so that
 * one sample reads as itself, samples all alike as their value, and no
 * quantile exceeds what the sum allows (the p50 and p99 of one trim are
 * its latency, the sum).
 *
 * The Prometheus text file (optional; text format 0.0.4, passes
 * `promtool check metrics`) is written with the JSON, the same figures:
 *   nbdstripe_up{volume}           1 while served, 0 in the last write
 *   nbdstripe_last_update_timestamp_seconds{volume}   = updated_unix
 *   nbdstripe_volume_info{volume,uuid} 1
 *   nbdstripe_volume_state{volume,state}   1 for the current state, 0 for
 *                                  the others; all 0 once stopped
 *   nbdstripe_volume_size_bytes{volume}, nbdstripe_volume_start_time_seconds
 *   nbdstripe_member_state{volume,member,path,state}   as the volume's
 *   nbdstripe_member_OP_requests_total{volume,member}, _errors_total, and
 *     _bytes_total except for flush; OP read, write, trim, zero, flush
 *   nbdstripe_member_OP_latency_seconds{volume,member}: a histogram over
 *     the whole run, _bucket{le} at every power of two of ns from 2^10
 *     (1.024e-06) to 2^36 (68.719476736) and +Inf, exact at those
 *     bounds (they are edges of the buckets above), _sum, _count
 *   nbdstripe_member_rejected_total{volume,member}
 *   nbdstripe_member_drive_available{volume,member}, _predicts_failure
 *     (0/1), and the drive's figures as gauges where it reports them:
 *     nbdstripe_member_drive_critical_warning, _temperature_celsius,
 *     _power_on_hours, _percentage_used, _data_written_bytes,
 *     _available_spare_percent, _available_spare_threshold_percent,
 *     _media_errors, _unsafe_shutdowns, _reallocated_sectors,
 *     _pending_sectors, _offline_uncorrectable_sectors,
 *     _wear_leveling_count
 *   nbdstripe_scrub_running, _bytes_read, _bytes_total,
 *     _last_finished_timestamp_seconds{volume}, and
 *     nbdstripe_scrub_unreadable_bytes{volume,member}, once a scrub ran
 *   nbdstripe_spares{volume}, nbdstripe_spares_usable{volume} and
 *     nbdstripe_spare_usable{volume,spare,path} 0/1, with spares
 * No quantiles there: histogram_quantile () computes them from the
 * buckets over any range.  A file whose last update is several
 * intervals old while nbdstripe_up is 1 is that of a server that died
 * without its last write.
 */
#ifndef NBDSTRIPE_HEALTH_H
#define NBDSTRIPE_HEALTH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "health_record.h"
#include "op.h"

enum volume_state { VS_OK, VS_DEGRADED, VS_FAILED };

extern const char *volume_state_name (enum volume_state s);

/* The tunables of a volume's health group (the config's health = { }),
 * health_defaults () giving every default: their one home.
 */
struct health_settings {
  unsigned interval; /* s, status rewrite */
  unsigned window;   /* s */
  unsigned min_samples;
  double slow_factor;
  unsigned slow_floor_us; /* us, 0 = none: the ratio alone */
  unsigned error_threshold;
  unsigned io_timeout;        /* s, 0 = never */
  unsigned probe_interval;    /* s */
  unsigned on_change_timeout; /* s */
  unsigned drive_interval;    /* s between drive health readings, 0 never */
};

struct health_params {
  const char *name;        /* volume name */
  const char *uuid;        /* array UUID as text, or NULL */
  const char *config;      /* config file, or NULL */
  uint64_t size, chunk;    /* for the status */
  const char *status_file; /* NULL: none */
  const char *prometheus_file;
  const char *on_change;
  struct health_settings set;
  /* Optional, nr_members entries: members are compared for latency only
   * with peers of the same class (local drives with local drives, NBD
   * exports with NBD exports: a network round trip is not a slow drive).
   * NULL: one class.
   */
  const unsigned *member_class;
};

/* The defaults, by name for messages and man pages. */
#define HEALTH_DEFAULT_INTERVAL 5
#define HEALTH_DEFAULT_WINDOW 10
#define HEALTH_DEFAULT_MIN_SAMPLES 20
#define HEALTH_DEFAULT_SLOW_FACTOR 4.0
/* A member whose median is below the floor is never slow, whatever the
 * ratio.  SSDs answer in ~0.1 ms (this project's virtual disk: 24 us at
 * QD1) and a failing or throttled one 10x that and more, past 1 ms;
 * below 1 ms a factor of 4 is what a busy host adds by itself (issue 34:
 * a member called slow at 124 us against 24 us, the drive blameless) or
 * a page-cache hit takes away.  nbdkit's delay filter, which the tests
 * slow members with, counts in whole ms: 2 ms or more is a verdict.
 */
#define HEALTH_DEFAULT_SLOW_FLOOR_US 1000
#define HEALTH_MAX_SLOW_FLOOR_US 10000000
#define HEALTH_DEFAULT_ERROR_THRESHOLD 8
#define HEALTH_DEFAULT_IO_TIMEOUT 30
#define HEALTH_DEFAULT_PROBE_INTERVAL 2
#define HEALTH_DEFAULT_ON_CHANGE_TIMEOUT 10
#define HEALTH_DEFAULT_DRIVE_INTERVAL 600
#define HEALTH_MAX_DRIVE_INTERVAL 86400

static inline struct health_settings
health_defaults (void)
{
  return (struct health_settings){
    .interval = HEALTH_DEFAULT_INTERVAL,
    .window = HEALTH_DEFAULT_WINDOW,
    .min_samples = HEALTH_DEFAULT_MIN_SAMPLES,
    .slow_factor = HEALTH_DEFAULT_SLOW_FACTOR,
    .slow_floor_us = HEALTH_DEFAULT_SLOW_FLOOR_US,
    .error_threshold = HEALTH_DEFAULT_ERROR_THRESHOLD,
    .io_timeout = HEALTH_DEFAULT_IO_TIMEOUT,
    .probe_interval = HEALTH_DEFAULT_PROBE_INTERVAL,
    .on_change_timeout = HEALTH_DEFAULT_ON_CHANGE_TIMEOUT,
    .drive_interval = HEALTH_DEFAULT_DRIVE_INTERVAL,
  };
}

/* What health asks of the volume, from its prober thread (never from
 * the health thread itself, so that a hung device cannot stall it).
 * check: is member i still there, the same and big enough (stat-level,
 * or its connections alive; no data I/O)?  probe: open member i afresh
 * (by path, or a new connection), check that it is the same member (its
 * identity, or its header and generation), its size, and read its first
 * block; on success return what was opened in *fresh, which health hands
 * to adopt (under its lock, unless it gave up waiting) or to discard.
 * check and probe return 0, or -1 with a reason in why.  dropped (may be
 * NULL): member i has just failed, before it is probed: the volume
 * records that it dropped out (the generation).
 */
struct json_object;

struct health_ops {
  void *opaque;
  int (*check) (void *opaque, unsigned i, char *why, size_t len);
  int (*probe) (void *opaque, unsigned i, void **fresh, char *why, size_t len);
  void (*adopt) (void *opaque, unsigned i, void *fresh);
  void (*discard) (void *opaque, unsigned i, void *fresh);
  void (*dropped) (void *opaque, unsigned i);
  /* Whoever listens (the array): the opaque of the two below. */
  void *listener;
  /* More for the status (may be NULL): called with no health lock held
   * while the status is built; adds to its top-level object what the
   * rest of the array has to say (array.h: a replace, the scrub, the
   * spares, on_failing, the lost ranges).
   */
  void (*status_extra) (void *opaque, struct json_object *root);
  /* The one notification (may be NULL): member i's state has changed
   * to s.  Called from the health thread, in order, with no health lock
   * held, so that the listener may take its own locks and call back into
   * health; it must not block for long (the status waits for it).  A
   * monitor tells; what to do about it (a replace onto a spare) is the
   * listener's (array.h's spare policy).
   */
  void (*state_changed) (void *opaque, unsigned i, enum member_state s);
};

struct health;

/* Create the tracker (no threads yet).  paths: the members' paths. */
extern struct health *health_new (const struct health_params *p,
                                  unsigned nr_members,
                                  const char *const *paths,
                                  const struct health_ops *ops);
/* The status as the status file has it now (running), malloc'd JSON text
 * (NULL: out of memory).
 */
extern char *health_status_text (struct health *h);
/* Start the health, prober and hook threads (after nbdkit forks). */
extern int health_start (struct health *h);
/* What happened to a failing member, as the on_change program and the
 * status's events say it (MemberReplacing, MemberReplaced,
 * MemberNotReplaced): reported by whoever acts on health's notification
 * (the array's spare policy), with the member's device (old) and the
 * spare (new, NULL when none).  Health reports; it does nothing else
 * with them.
 */
enum health_report { HEALTH_REPLACING = 1, HEALTH_REPLACED,
                     HEALTH_NOT_REPLACED };
extern void health_report (struct health *h, enum health_report what,
                           unsigned i, const char *old, const char *new_path,
                           const char *reason);
/* Member i's path and the reason of its state now ("" when none). */
extern void health_member_describe (struct health *h, unsigned i, char *path,
                                    size_t plen, char *reason, size_t rlen);
/* Something health_ops.status_extra adds has changed: the status is
 * written again soon.
 */
extern void health_status_changed (struct health *h);
/* Stop the threads, write the last status (running: false), free.
 * Returns false when a prober is still blocked in a dead device: then h
 * is kept, and so must be everything its ops touch (the volume's
 * members) -- the process is about to exit anyway.
 */
extern bool health_free (struct health *h);

/* For tests and tools, without the threads: one tick's decisions now
 * (now: a health_now_ns value, possibly in the future), the window being
 * advanced by one snapshot.  And a latency quantile q (0..1) of member i
 * in microseconds, over the window or the whole run (NAN when empty).
 */
extern void health_tick (struct health *h, uint64_t now);
extern double health_quantile_us (struct health *h, unsigned i,
                                  enum op_kind op, double q, bool window);

/* A reading of member i's drive (drive.h), taken at now (a
 * health_now_ns value): kept for the status, and the rule applied -- a
 * drive that predicts its failure makes the member failing with the
 * reason (drive_predicts_failure's "predicted: ..."), for as long as it
 * does; I/O errors expiring do not clear that.  The poller thread calls
 * it after every reading; tests call it with readings of their own.
 */
struct drive_health;
extern void health_drive_record (struct health *h, unsigned i,
                                 const struct drive_health *r, uint64_t now);

/* What a scrub (scrub.h) found on member i: unreadable places (reason
 * says what: the member is failing with it, as long as no later scrub
 * reads it all), or, reason NULL, nothing: a finding of an earlier scrub
 * is lifted.
 */
extern void health_scrub_result (struct health *h, unsigned i,
                                 const char *reason);

/* Client requests recorded so far, every member and operation (the
 * scrub's way to see that clients are at work).
 */
extern uint64_t health_requests_total (const struct health *h);


#endif /* NBDSTRIPE_HEALTH_H */
