/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the lost ranges on the volume's request path (plugin/core
 * only; the rest is in include/volume.h).
 */
#ifndef NBDSTRIPE_VOLUME_LOST_H
#define NBDSTRIPE_VOLUME_LOST_H

#include <stdbool.h>
#include <stdint.h>

struct volume;

/* The volume's count of lost ranges from meta's list (volume_open). */
extern void volume_lost_init (struct volume *v);
/* Whether [offset, offset + length) touches a lost range. */
extern bool volume_lost_touches (struct volume *v, uint64_t offset,
                                 uint64_t length);
/* A write, trim or zero over [offset, offset + length) is done and
 * durable: the ranges it covers are no longer lost, on every member
 * before this returns.  -1 (EIO) when the list could not be recorded.
 */
extern int volume_lost_covered (struct volume *v, uint64_t offset,
                                 uint64_t length);

#endif /* NBDSTRIPE_VOLUME_LOST_H */
