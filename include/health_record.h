/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: health as the volume knows it -- the recorder.
 *
 * The volume (volume.h) tells health what happens to each member on the
 * I/O path and when members come and go; it asks one thing back, a
 * member's state (a request touching a failed member fails at once).
 * That is all of health the volume sees: the monitor itself (its
 * threads, rules, status, the probe callbacks it needs) is health.h,
 * which the array (array.h) holds.  A volume opened without health
 * (a check, an offline job) has none: it does not call these then.
 */
#ifndef NBDSTRIPE_HEALTH_RECORD_H
#define NBDSTRIPE_HEALTH_RECORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "op.h"

struct health;

/* States of a member, best first (health.h says what each means). */
enum member_state {
  MS_OK,
  MS_SLOW,
  MS_FULL,
  MS_FAILING,
  MS_FAILED,
  MS_REMOVED,
  MS_MISSING
};

extern enum member_state health_member_state (const struct health *h,
                                              unsigned i);
/* A member joins (a grow): the next index, watched from now on; -1 with
 * errno when it cannot be.
 */
extern int health_member_add (struct health *h, const char *path,
                              unsigned class);

/* Member i is no longer a member (the end of a shrink): state removed
 * for good, reason why; never checked nor probed again.
 */
extern void health_member_removed (struct health *h, unsigned i,
                                   const char *why);
/* Member i is missing, the volume served degraded (volume.h's
 * missing): state missing for good, reason why; never checked nor
 * probed.  The volume is degraded.
 */
extern void health_member_missing (struct health *h, unsigned i,
                                   const char *why);
/* The volume is size bytes from now on (the end of a grow or a shrink):
 * what the status and the Prometheus file say.
 */
extern void health_volume_resized (struct health *h, uint64_t size);
/* Member i is another device from now on (nbdstripe replace): its path,
 * and state ok.
 */
extern void health_member_replaced (struct health *h, unsigned i,
                                    const char *path);
/* Bit i set: member i is failed now (0 when h is NULL). */
extern uint64_t health_failed_mask (const struct health *h);
/* Record one member operation: bytes transferred, latency, err = 0 or
 * errno.  EOPNOTSUPP is not an error (capability probing).
 */
extern void health_record (struct health *h, unsigned i, enum op_kind op,
                           uint64_t bytes, uint64_t ns, int err,
                           uint64_t offset);

/* Requests in flight, to notice a member that does not answer.
 * health_io_begin marks the calling thread busy since now (now_ns (), read
 * by the caller) and returns
 * its mask of members still owed an answer (bit = member index), which
 * the I/O code sets and clears per member operation (ioexec does); NULL
 * when untracked.  health_io_end: the request is over.
 */
extern _Atomic uint64_t *health_io_begin (struct health *h, uint64_t now);
extern void health_io_end (struct health *h);

/* Requests refused at once because they touch a failed member. */
extern void health_rejected (struct health *h, unsigned i);

/* Member i is unusable for a reason found outside of an I/O error (it was
 * truncated, say): failed at once with that reason.
 */
extern void health_member_gone (struct health *h, unsigned i,
                                const char *reason);

/* Monotonic clock in ns. */
extern uint64_t health_now_ns (void);

#endif /* NBDSTRIPE_HEALTH_RECORD_H */
