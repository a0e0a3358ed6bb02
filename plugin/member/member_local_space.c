/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: trim, zero and block status on a local member
 * (member_local_impl.h).  They are metadata calls (fallocate, BLKDISCARD,
 * BLKZEROOUT, SEEK_DATA) done at once.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include "log.h"
#include "member_local_impl.h"

/* Capabilities learnt by trying. */

/* ENOTSUP-like answers: the method does not exist here.  A block device's
 * fallocate says ENODEV or EINVAL when the driver cannot do it.
 */
static bool
is_unsupported (int err, bool is_block)
{
  return err == EOPNOTSUPP || err == ENOSYS || err == ENOTTY
         || (is_block && (err == ENODEV || err == EINVAL));
}

static void
switch_off (struct member *m, _Atomic int *cap, const char *what)
{
  if (atomic_exchange (cap, CAP_NO) != CAP_NO)
    stripe_debug ("member %u (%s): %s not supported, switched off", m->index,
                  m->path, what);
}

static int
try_fallocate (struct member *m, _Atomic int *cap, int mode, uint64_t offset,
               uint64_t len, const char *what)
{
  if (atomic_load (cap) == CAP_NO) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (fallocate (L (m)->fd, mode, offset, len) == 0) {
    atomic_store (cap, CAP_YES);
    return 0;
  }
  if (is_unsupported (errno, m->kind == MEMBER_BLOCK)) {
    switch_off (m, cap, what);
    errno = EOPNOTSUPP;
  }
  return -1;
}

static int
try_blk_ioctl (struct member *m, _Atomic int *cap, unsigned long req,
               uint64_t offset, uint64_t len, const char *what)
{
  uint64_t range[2] = { offset, len };

  if (atomic_load (cap) == CAP_NO) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (ioctl (L (m)->fd, req, range) == 0) {
    atomic_store (cap, CAP_YES);
    return 0;
  }
  if (is_unsupported (errno, true)) {
    switch_off (m, cap, what);
    errno = EOPNOTSUPP;
  }
  return -1;
}

/* Advisory: a member that cannot discard does nothing (with a debug line
 * the first time).  Only EIO and EPERM are reported.
 */
int
local_trim (struct member *m, uint64_t offset, uint64_t len)
{
  struct local *l = L (m);
  int r;

  if (m->readonly)
    return 0;
  if (m->kind == MEMBER_BLOCK) {
    /* BLKDISCARD wants whole logical blocks: discard only those inside. */
    uint64_t b = m->logical_block;
    uint64_t start = (offset + b - 1) / b * b;
    uint64_t end = (offset + len) / b * b;
    if (end <= start)
      return 0;
    r = try_blk_ioctl (m, &l->can_discard, BLKDISCARD, start, end - start,
                       "BLKDISCARD");
  }
  else
    r = try_fallocate (m, &l->can_punch,
                       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len,
                       "punch hole");
  if (r == -1) {
    if (errno == EIO || errno == EPERM) {
      member_io_error (m, "trim", offset, errno);
      return -1;
    }
    stripe_debug ("member %u (%s): trim at member offset %" PRIu64
                  " ignored: %m",
                  m->index, m->path, offset);
  }
  return 0;
}

bool
local_zero_known_unsupported (const struct member *m, uint64_t offset,
                              uint64_t len, bool may_trim, bool fast)
{
  const struct local *l = m->be;

  if (m->kind == MEMBER_BLOCK) {
    uint64_t b = m->logical_block;
    if (offset % b || len % b)
      return true;
    if (fast)
      return l->can_punch == CAP_NO;
    return false; /* BLKZEROOUT always works */
  }
  return (!may_trim || l->can_punch == CAP_NO) && l->can_zero_range == CAP_NO;
}

bool
local_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                       bool may_trim)
{
  const struct local *l = m->be;

  if (m->kind == MEMBER_BLOCK)
    return offset % m->logical_block == 0 && len % m->logical_block == 0
           && (l->can_punch == CAP_YES
               || (may_trim && l->discard_zeroes
                   && l->can_discard == CAP_YES));
  return (may_trim && l->can_punch == CAP_YES)
         || l->can_zero_range == CAP_YES;
}

bool
local_can_fast_zero (const struct member *m)
{
  (void) m;
  return true; /* learnt by trying */
}

void
local_learn_zero (struct member *m, uint64_t offset, uint64_t len)
{
  struct local *l = L (m);

  if (m->readonly)
    return;
  if (m->kind == MEMBER_BLOCK) {
    if (l->can_punch == CAP_UNKNOWN && offset % m->logical_block == 0
        && len % m->logical_block == 0)
      try_fallocate (m, &l->can_punch,
                     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len,
                     "zero-out with unmap");
    return;
  }
  if (l->can_punch == CAP_UNKNOWN)
    try_fallocate (m, &l->can_punch, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, len, "punch hole");
  if (l->can_zero_range == CAP_UNKNOWN)
    try_fallocate (m, &l->can_zero_range,
                   FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, offset, len,
                   "zero range");
}

int
local_zero_mode (const struct member *m, uint64_t offset, uint64_t len,
                 bool may_trim, bool fast)
{
  const struct local *l = m->be;
  const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

  /* local_zero's order of methods, the first one known to work. */
  if (m->kind == MEMBER_BLOCK) {
    uint64_t b = m->logical_block;
    if (offset % b || len % b || (may_trim && l->discard_zeroes))
      return -1; /* a discard: local_zero's ioctl */
    return (may_trim || fast) && atomic_load (&l->can_punch) == CAP_YES
             ? punch
             : -1;
  }
  if (may_trim && atomic_load (&l->can_punch) == CAP_YES)
    return punch;
  if ((!may_trim || atomic_load (&l->can_punch) == CAP_NO)
      && atomic_load (&l->can_zero_range) == CAP_YES)
    return FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
  return -1;
}

/* Make the range read as zeroes without writing data; -1 with EOPNOTSUPP
 * when no such method works (nbdkit writes zeroes instead).
 */
int
local_zero (struct member *m, uint64_t offset, uint64_t len, bool may_trim,
            bool fast)
{
  struct local *l = L (m);

  if (m->kind == MEMBER_BLOCK) {
    uint64_t b = m->logical_block;
    if (offset % b || len % b) {
      errno = EOPNOTSUPP;
      return -1;
    }
    /* A discard where it is sure to read back as zeros (a loop device
     * over a file that punches holes, member_local.c): the cheapest
     * request that does it, for the device and for the block layer
     * (cgroup throttling charges a discard one sector, a write-zeroes
     * its length).
     */
    if (may_trim && l->discard_zeroes) {
      if (try_blk_ioctl (m, &l->can_discard, BLKDISCARD, offset, len,
                         "BLKDISCARD")
          == 0)
        return 0;
      if (errno != EOPNOTSUPP)
        goto err;
    }
    /* On a block device, fallocate(PUNCH_HOLE) is a zero-out that may
     * unmap and never falls back to writing zeroes: the fast method.
     * The kernel makes it a deallocation where the drive says it reads
     * zeros after one (NVMe's deallocate feature, SCSI's LBPRZ).
     */
    if (may_trim || fast) {
      if (try_fallocate (m, &l->can_punch,
                         FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                         len, "zero-out with unmap")
          == 0)
        return 0;
      if (errno != EOPNOTSUPP)
        goto err;
      if (fast)
        return -1;
    }
    if (try_blk_ioctl (m, &l->can_zeroout, BLKZEROOUT, offset, len,
                       "BLKZEROOUT")
        == 0)
      return 0;
    if (errno != EOPNOTSUPP)
      goto err;
    return -1;
  }

  if (may_trim) {
    if (try_fallocate (m, &l->can_punch,
                       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len,
                       "punch hole")
        == 0)
      return 0;
    if (errno != EOPNOTSUPP)
      goto err;
  }
  if (try_fallocate (m, &l->can_zero_range,
                     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, offset, len,
                     "zero range")
      == 0)
    return 0;
  if (errno != EOPNOTSUPP)
    goto err;
  return -1;

err:
  member_io_error (m, "zero", offset, errno);
  return -1;
}

/* Block status of [offset, offset + length) by SEEK_DATA/SEEK_HOLE, at
 * most max_runs runs.  A hole in a local file reads as zeroes.
 */
int
local_extents (struct member *m, uint64_t offset, uint64_t length,
               unsigned max_runs, struct extent_list *out)
{
  struct local *l = L (m);
  uint64_t end = offset + length;

  while (offset < end && out->nr < max_runs) {
    uint32_t flags = 0;
    uint64_t run_end = end;
    off_t pos;

    if (atomic_load (&l->can_seek_data) == CAP_NO)
      return extent_list_add (out, end - offset, 0);
    pos = lseek (l->fd, offset, SEEK_DATA);
    if (pos == -1) {
      if (errno == ENXIO) /* only a hole up to end of file */
        return extent_list_add (out, end - offset,
                                MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO);
      if (errno == EINVAL || errno == EOPNOTSUPP) {
        switch_off (m, &l->can_seek_data, "SEEK_DATA");
        continue;
      }
      member_io_error (m, "lseek (SEEK_DATA)", offset, errno);
      return -1;
    }
    atomic_store (&l->can_seek_data, CAP_YES);
    if ((uint64_t) pos > offset) {
      flags = MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO;
      if ((uint64_t) pos < end)
        run_end = pos;
    }
    else {
      pos = lseek (l->fd, offset, SEEK_HOLE);
      if (pos == -1) {
        member_io_error (m, "lseek (SEEK_HOLE)", offset, errno);
        return -1;
      }
      if ((uint64_t) pos < end)
        run_end = pos;
    }
    if (extent_list_add (out, run_end - offset, flags) == -1)
      return -1;
    offset = run_end;
  }
  return 0;
}
