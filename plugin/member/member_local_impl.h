/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the local backend's insides, shared by its files.  Not for
 * anyone else: include/member.h is the interface.
 *
 *   member_local.c        the member_ops: open (what the file or device
 *                         is, and what its queue says it can do), header
 *                         access, health, adopt
 *   member_local_io.c     reads, writes and flushes: the executor's ring,
 *                         O_DIRECT through a bounce buffer, system calls
 *   member_local_space.c  trim, zero and block status, each method's
 *                         support learnt by trying
 */
#ifndef NBDSTRIPE_MEMBER_LOCAL_IMPL_H
#define NBDSTRIPE_MEMBER_LOCAL_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ioexec.h"
#include "member.h"

struct local {
  int fd;                /* buffered I/O, trim, zero, sync */
  int fd_direct;         /* O_DIRECT, or -1 */
  uint32_t direct_align; /* offset/length/memory alignment for it */
  _Atomic int can_punch;      /* files: PUNCH_HOLE; blockdev: unmap-zero */
  _Atomic int can_zero_range; /* files: FALLOC_FL_ZERO_RANGE */
  _Atomic int can_discard;    /* blockdev: BLKDISCARD */
  _Atomic int can_zeroout;    /* blockdev: BLKZEROOUT */
  _Atomic int can_seek_data;  /* SEEK_DATA / SEEK_HOLE */
  _Atomic bool discard_zeroes; /* blockdev: a discard reads back as zeros */
};

#define L(m) ((struct local *) (m)->be)

/* Trim, zero and block status (member_local_space.c): 0, or -1 with
 * errno (said by member_io_error when it is the member's fault).
 */
extern int local_trim (struct member *m, uint64_t offset, uint64_t len);
extern int local_zero (struct member *m, uint64_t offset, uint64_t len,
                       bool may_trim, bool fast);
/* The fallocate mode local_zero would use for this zero, when it is
 * known to work (learnt at open or by an earlier zero): the zero can go
 * to the ring, concurrently with the other members'.  -1: local_zero
 * must run it (a method still to be learnt, BLKZEROOUT, none).
 */
extern int local_zero_mode (const struct member *m, uint64_t offset,
                            uint64_t len, bool may_trim, bool fast);
extern int local_extents (struct member *m, uint64_t offset, uint64_t length,
                          unsigned max_runs, struct extent_list *out);

/* What is known of zeroing, and learning it (member_ops, member.h). */
extern bool local_zero_known_unsupported (const struct member *m,
                                          uint64_t offset, uint64_t len,
                                          bool may_trim, bool fast);
extern bool local_fast_zero_known (const struct member *m, uint64_t offset,
                                   uint64_t len, bool may_trim);
extern bool local_can_fast_zero (const struct member *m);
extern void local_learn_zero (struct member *m, uint64_t offset, uint64_t len);

/* The requests (member_local_io.c; member_ops, member.h). */
extern void local_start_op (struct member *m, struct ioexec *x,
                            struct member_op *op);
extern bool local_rw_now (struct member *m, struct member_op *op);
extern void local_finish_op (struct member *m, struct member_op *op);

#endif /* NBDSTRIPE_MEMBER_LOCAL_IMPL_H */
