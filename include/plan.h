/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: turning one read or write request into per-member work.
 *
 * Pure code over the layout: no I/O.  For a buffer and a logical range it
 * produces, for every member the request touches, ONE operation: a
 * contiguous member range plus the iovec that scatters or gathers it from
 * the caller's buffer (a member's chunks of consecutive stripes are
 * contiguous on that member).  Buffer pieces that happen to be adjacent
 * (one member, or one-member zones) are merged into one iovec entry.
 */
#ifndef NBDSTRIPE_PLAN_H
#define NBDSTRIPE_PLAN_H

#include <stdint.h>
#include <sys/uio.h>

#include "layout.h"

struct member_io {
  unsigned member;
  uint64_t member_offset;
  uint64_t length; /* bytes, = sum of the iovec lengths */
  unsigned nr_iov;
  struct iovec *iov; /* points into the plan's storage */
};

#define PLAN_INLINE_IOV 64

struct io_plan {
  unsigned nr_ios; /* touched members, in member order */
  struct member_io ios[LAYOUT_MAX_MEMBERS];
  struct iovec *iov; /* inline_iov or malloc'd */
  struct iovec inline_iov[PLAN_INLINE_IOV];
};

/* Plan a read or write of count bytes (> 0) at offset, inside the volume,
 * from or into buf.  Returns 0, or -1 with errno = ENOMEM.  Always call
 * plan_free afterwards, even on error.
 */
extern int plan_rw (struct io_plan *plan, const struct layout *l, void *buf,
                    uint64_t count, uint64_t offset);

extern void plan_free (struct io_plan *plan);

#endif /* NBDSTRIPE_PLAN_H */
