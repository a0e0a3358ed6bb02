/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the local backend of member.h -- a regular file or a block
 * device.
 *
 * Reads, writes and flushes go into the executor's io_uring when it has
 * one for the request (two or more local operations), else they are one
 * plain system call; with cache=direct an aligned read or write goes
 * through the O_DIRECT descriptor via an aligned bounce buffer (nbdkit's
 * request buffers are not aligned), an unaligned one through the buffered
 * descriptor, which Linux keeps coherent with direct I/O.  Trim, zero and
 * block status are metadata calls (fallocate, BLKDISCARD, BLKZEROOUT,
 * SEEK_DATA) done at once.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <liburing.h>

#include "claim.h"
#include "ioexec.h"
#include "log.h"
#include "member.h"
#include "util.h"

struct local {
  int fd;                /* buffered I/O, trim, zero, sync */
  int fd_direct;         /* O_DIRECT, or -1 */
  uint32_t direct_align; /* offset/length/memory alignment for it */
  _Atomic int can_punch;      /* files: PUNCH_HOLE; blockdev: unmap-zero */
  _Atomic int can_zero_range; /* files: FALLOC_FL_ZERO_RANGE */
  _Atomic int can_discard;    /* blockdev: BLKDISCARD */
  _Atomic int can_zeroout;    /* blockdev: BLKZEROOUT */
  _Atomic int can_seek_data;  /* SEEK_DATA / SEEK_HOLE */
};

#define L(m) ((struct local *) (m)->be)

/* A number from the block queue's sysfs attributes.  Partitions have no
 * queue/ of their own: it is the parent's, one level up.
 */
static int64_t
read_queue_attr (dev_t rdev, const char *attr)
{
  static const char *const fmts[] = {
    "/sys/dev/block/%u:%u/queue/%s",
    "/sys/dev/block/%u:%u/../queue/%s",
  };
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; ++i) {
    char path[256];
    long long v;
    FILE *fp;

    snprintf (path, sizeof path, fmts[i], major (rdev), minor (rdev), attr);
    fp = fopen (path, "re");
    if (fp == NULL)
      continue;
    if (fscanf (fp, "%lld", &v) == 1) {
      fclose (fp);
      return v;
    }
    fclose (fp);
  }
  return -1;
}

static int
local_open (struct member *m, char *why, size_t len)
{
  struct local *l = calloc (1, sizeof *l);
  const struct member_open_params *p = &m->params;
  struct stat st;

  if (l == NULL)
    return fail_why (why, len, ENOMEM, "out of memory");
  l->fd = l->fd_direct = -1;
  m->be = l;
  l->fd = claim_open (m->path, p->readonly, 0, &st, why, len);
  if (l->fd == -1)
    return -1;
  l->can_seek_data = CAP_UNKNOWN;
  m->min_io = 1;
  if (S_ISREG (st.st_mode)) {
    m->kind = MEMBER_FILE;
    m->size = st.st_size;
    m->logical_block = 512;
    m->physical_block = 4096;
    l->can_punch = CAP_UNKNOWN;
    l->can_zero_range = CAP_UNKNOWN;
    l->can_discard = CAP_NO;
    l->can_zeroout = CAP_NO;
  }
  else {
    uint64_t size;
    int lbs = 512;
    unsigned int pbs = 4096;

    m->kind = MEMBER_BLOCK;
    if (ioctl (l->fd, BLKGETSIZE64, &size) == -1)
      return fail_why (why, len, errno, "BLKGETSIZE64: %s", strerror (errno));
    m->size = size;
    if (ioctl (l->fd, BLKSSZGET, &lbs) == -1 || lbs <= 0)
      lbs = 512;
    if (ioctl (l->fd, BLKPBSZGET, &pbs) == -1 || pbs == 0)
      pbs = lbs;
    m->logical_block = lbs;
    m->physical_block = pbs;
    /* Ask the queue up front so that a fast zero can be refused before
     * any member is touched.  Unknown (no sysfs) means: try and learn.
     */
    int64_t discard = read_queue_attr (st.st_rdev, "discard_max_bytes");
    int64_t wzeroes = read_queue_attr (st.st_rdev, "write_zeroes_max_bytes");
    l->can_discard = discard < 0 ? CAP_UNKNOWN : discard > 0;
    l->can_punch = wzeroes < 0 ? CAP_UNKNOWN : wzeroes > 0;
    l->can_zero_range = CAP_NO;
    l->can_zeroout = CAP_YES;
    l->can_seek_data = CAP_NO;
  }
  if (identity_of_fd (l->fd, m->size, &m->id, why, len) == -1)
    return -1;
  if (p->direct) {
    struct stat dst;

    l->fd_direct = open (m->path,
                         (p->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC
                           | O_DIRECT | O_NOCTTY | O_NONBLOCK);
    if (l->fd_direct == -1)
      return fail_why (why, len, errno, "open with O_DIRECT (cache=direct): %s",
                   strerror (errno));
    /* The path was looked up again: it must still be the same member. */
    if (fstat (l->fd_direct, &dst) == -1 || dst.st_dev != st.st_dev
        || dst.st_ino != st.st_ino || dst.st_rdev != st.st_rdev)
      return fail_why (why, len, EAGAIN, "changed while it was being opened");
    /* Files: a page is always enough.  Block devices: the logical block. */
    l->direct_align = m->kind == MEMBER_BLOCK ? m->logical_block : 4096;
  }
  stripe_debug ("member %u (%s): %s, %" PRIu64 " bytes, "
                "logical block %" PRIu32 ", physical block %" PRIu32,
                m->index, m->path, member_what (m), m->size, m->logical_block,
                m->physical_block);
  return 0;
}

static void
local_close (struct member *m)
{
  struct local *l = L (m);

  if (l == NULL)
    return;
  if (l->fd_direct >= 0)
    close (l->fd_direct);
  if (l->fd >= 0)
    close (l->fd);
  free (l);
  m->be = NULL;
}

static int
local_claim (struct member *m, char *why, size_t len)
{
  return claim_take (&L (m)->fd, m->path, !m->readonly, m->readonly, why, len);
}

static int
local_current_size (struct member *m, uint64_t *size)
{
  struct stat st;

  if (m->kind == MEMBER_BLOCK)
    return ioctl (L (m)->fd, BLKGETSIZE64, size);
  if (fstat (L (m)->fd, &st) == -1)
    return -1;
  *size = st.st_size;
  return 0;
}

/* Header access. */

static ssize_t
read_full (int fd, void *buf, size_t count, uint64_t offset, char *why,
           size_t len)
{
  size_t done = 0;

  while (done < count) {
    ssize_t n = pread (fd, (char *) buf + done, count - done, offset + done);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      return fail_why (why, len, errno, "read: %s", strerror (errno));
    if (n == 0)
      break;
    done += n;
  }
  return done;
}

/* fresh: from the device itself -- through O_DIRECT where the file system
 * allows it (an aligned bounce), else after dropping the cached pages.
 */
static ssize_t
local_pread (struct member *m, void *buf, size_t count, uint64_t offset,
             bool fresh, char *why, size_t len)
{
  struct local *l = L (m);
  int dfd;
  struct stat a, b;
  void *abuf;
  ssize_t r;

  if (!fresh)
    return read_full (l->fd, buf, count, offset, why, len);
  dfd = open (m->path, O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
  /* O_DIRECT on the same file, or nothing (the path may have moved). */
  if (dfd >= 0
      && (fstat (dfd, &a) == -1 || fstat (l->fd, &b) == -1
          || a.st_dev != b.st_dev || a.st_ino != b.st_ino
          || a.st_rdev != b.st_rdev || offset % 4096 || count % 4096)) {
    close (dfd);
    dfd = -1;
  }
  if (dfd == -1 || posix_memalign (&abuf, 4096, count) != 0) {
    if (dfd >= 0)
      close (dfd);
    posix_fadvise (l->fd, offset, count, POSIX_FADV_DONTNEED);
    return read_full (l->fd, buf, count, offset, why, len);
  }
  r = read_full (dfd, abuf, count, offset, why, len);
  if (r > 0)
    memcpy (buf, abuf, r);
  free (abuf);
  close (dfd);
  return r;
}

static int
local_pwrite (struct member *m, const void *buf, size_t count,
              uint64_t offset, char *why, size_t len)
{
  size_t done = 0;

  while (done < count) {
    ssize_t n = pwrite (L (m)->fd, (const char *) buf + done, count - done,
                        offset + done);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      return fail_why (why, len, errno, "write: %s", strerror (errno));
    if (n == 0)
      return fail_why (why, len, EIO, "write: no progress at offset %" PRIu64,
                   offset + done);
    done += n;
  }
  return 0;
}

static int
local_sync (struct member *m, char *why, size_t len)
{
  if (fdatasync (L (m)->fd) == -1)
    return fail_why (why, len, errno, "fdatasync: %s", strerror (errno));
  return 0;
}

static int
local_discard (struct member *m, uint64_t offset, uint64_t length, char *why,
               size_t len)
{
  int r;

  if (m->kind == MEMBER_BLOCK) {
    uint64_t range[2] = { offset, length };
    r = ioctl (L (m)->fd, BLKDISCARD, range);
  }
  else
    r = fallocate (L (m)->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, length);
  if (r == -1 && (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL))
    return fail_why (why, len, EOPNOTSUPP, "cannot discard (%s)", strerror (errno));
  if (r == -1)
    return fail_why (why, len, errno, "discard: %s", strerror (errno));
  return 0;
}

static int
local_probe_fd (struct member *m, char *why, size_t len)
{
  (void) why;
  (void) len;
  return L (m)->fd;
}

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
static int
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

static bool
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

static bool
local_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                       bool may_trim)
{
  const struct local *l = m->be;

  if (m->kind == MEMBER_BLOCK)
    return offset % m->logical_block == 0 && len % m->logical_block == 0
           && l->can_punch == CAP_YES;
  return (may_trim && l->can_punch == CAP_YES)
         || l->can_zero_range == CAP_YES;
}

static bool
local_can_fast_zero (const struct member *m)
{
  (void) m;
  return true; /* learnt by trying */
}

static void
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

/* Make the range read as zeroes without writing data; -1 with EOPNOTSUPP
 * when no such method works (nbdkit writes zeroes instead).
 */
static int
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
    /* On a block device, fallocate(PUNCH_HOLE) is a zero-out that may
     * unmap and never falls back to writing zeroes: the fast method.
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
static int
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

/* Reads and writes. */

/* Synchronous vectored I/O of exactly the iovec's total length: short
 * transfers are continued; end of file is EIO.  With dsync the write is
 * durable when it returns (RWF_DSYNC, or fdatasync after).
 */
static int
rw_full (struct member *m, int fd, bool write, const struct iovec *iov_in,
         unsigned nr_in, uint64_t offset, bool dsync)
{
  struct iovec *copy = NULL, *iov = (struct iovec *) iov_in;
  unsigned nr = nr_in;
  bool use_dsync = dsync;
  int r = -1;

  while (nr > 0) {
    int cnt = nr > IOV_MAX ? IOV_MAX : (int) nr;
    ssize_t n;

    if (!write)
      n = preadv (fd, iov, cnt, offset);
    else if (use_dsync) {
      n = pwritev2 (fd, iov, cnt, offset, RWF_DSYNC);
      if (n == -1 && (errno == EOPNOTSUPP || errno == EINVAL)) {
        use_dsync = false; /* old kernel: fdatasync at the end */
        continue;
      }
    }
    else
      n = pwritev (fd, iov, cnt, offset);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      member_io_error (m, write ? "pwrite" : "pread", offset, errno);
      goto out;
    }
    if (n == 0) {
      member_io_error (
        m, write ? "pwrite (no progress)" : "pread (unexpected end of file)",
        offset, EIO);
      goto out;
    }
    offset += n;
    /* The whole of it, the usual case: done, no copy made. */
    if ((size_t) n == iov_total (iov, cnt) && cnt == (int) nr)
      break;
    if (copy == NULL) {
      copy = malloc (nr * sizeof *copy);
      if (copy == NULL) {
        member_io_error (m, write ? "pwrite" : "pread", offset, ENOMEM);
        goto out;
      }
      memcpy (copy, iov, nr * sizeof *copy);
      iov = copy;
    }
    iov_advance (&iov, &nr, n);
  }
  if (dsync && !use_dsync && fdatasync (fd) == -1) {
    member_io_error (m, "fdatasync", offset, errno);
    goto out;
  }
  r = 0;
out:
  free (copy);
  return r;
}

/* The iovec an op actually transfers. */
static inline const struct iovec *
op_iov (const struct member_op *op, unsigned *nr)
{
  if (op->be.local.direct) {
    *nr = 1;
    return &op->be.local.bounce;
  }
  *nr = op->nr_iov;
  return op->iov;
}

static inline int
op_fd (const struct member_op *op)
{
  return op->be.local.direct ? L (op->m)->fd_direct : L (op->m)->fd;
}

/* A ring entry came back: finish what it did not do (a short transfer,
 * or RWF_DSYNC refused) synchronously, which continues short transfers
 * itself.
 */
static void
rw_complete (struct ioexec *x, struct member_op *op, int res, void *arg)
{
  struct ioexec_piece *p = arg;
  bool write = op->kind == OP_WRITE;
  int err = 0;

  if (res < 0) {
    if (write && op->fua && (res == -EOPNOTSUPP || res == -EINVAL))
      res = 0; /* retry below, portable FUA */
    else {
      member_io_error (op->m, write ? "pwrite" : "pread", p->offset, -res);
      ioexec_done (x, op, -res);
      return;
    }
  }
  if ((uint64_t) res != p->length) {
    if (!write && res == 0) {
      member_io_error (op->m, "pread (unexpected end of file)", p->offset,
                       EIO);
      err = EIO;
    }
    else {
      struct iovec *copy = malloc (p->nr_iov * sizeof *copy);
      struct iovec *iov = copy;
      unsigned nr = p->nr_iov;

      if (copy == NULL)
        err = ENOMEM;
      else {
        memcpy (copy, p->iov, nr * sizeof *copy);
        iov_advance (&iov, &nr, res);
        if (rw_full (op->m, op_fd (op), write, iov, nr, p->offset + res,
                     op->fua)
            == -1)
          err = errno;
        free (copy);
      }
    }
  }
  ioexec_done (x, op, err);
}

static void
flush_complete (struct ioexec *x, struct member_op *op, int res, void *arg)
{
  (void) arg;
  if (res < 0)
    member_io_error (op->m, "fdatasync", 0, -res);
  ioexec_done (x, op, res < 0 ? -res : 0);
}

static void
start_rw (struct ioexec *x, struct member_op *op)
{
  struct local *l = L (op->m);

  op->be.local.pieces = NULL;
  bool write = op->kind == OP_WRITE;
  const struct iovec *iov;
  unsigned n;

  /* O_DIRECT where it can: an aligned copy of the data. */
  op->be.local.direct = l->fd_direct >= 0 && op->offset % l->direct_align == 0
                        && op->length % l->direct_align == 0;
  if (op->be.local.direct) {
    void *b = ioexec_scratch (x, op->length);
    if (b == NULL) {
      stripe_error ("cannot allocate an O_DIRECT bounce buffer: %m");
      ioexec_done (x, op, ENOMEM);
      return;
    }
    op->be.local.bounce = (struct iovec){ b, op->length };
    if (write)
      iov_gather (b, op->iov, op->nr_iov);
  }
  iov = op_iov (op, &n);

  /* In the ring: one entry per IOV_MAX iovecs (one, nearly always: then
   * no ring is found out below, by ioexec_sqe).
   */
  unsigned nr_pieces = 1;
  struct ioexec_piece *pieces = &op->be.local.piece;
  if (n > IOV_MAX) {
    if (!ioexec_has_ring (x)) {
      if (rw_full (op->m, op_fd (op), write, iov, n, op->offset, op->fua)
          == -1)
        ioexec_done (x, op, errno);
      return;
    }
    nr_pieces = (n + IOV_MAX - 1) / IOV_MAX;
    pieces = op->be.local.pieces = calloc (nr_pieces, sizeof *pieces);
    if (pieces == NULL) {
      ioexec_done (x, op, ENOMEM);
      return;
    }
  }
  uint64_t offset = op->offset;
  for (unsigned k = 0; k < nr_pieces; ++k) {
    struct ioexec_piece *p = &pieces[k];
    struct io_uring_sqe *sqe;

    p->iov = &iov[k * IOV_MAX];
    p->nr_iov = n - k * IOV_MAX < IOV_MAX ? n - k * IOV_MAX : IOV_MAX;
    p->offset = offset;
    p->length = nr_pieces == 1 ? op->length : iov_total (p->iov, p->nr_iov);
    offset += p->length;
    sqe = ioexec_sqe (x, op, rw_complete, p);
    if (sqe == NULL) {
      /* No ring, or no room to track it: do this piece here. */
      if (rw_full (op->m, op_fd (op), write, p->iov, p->nr_iov, p->offset,
                   op->fua)
          == -1)
        ioexec_done (x, op, errno);
      continue;
    }
    if (write)
      io_uring_prep_writev2 (sqe, op_fd (op), p->iov, p->nr_iov, p->offset,
                             op->fua ? RWF_DSYNC : 0);
    else
      io_uring_prep_readv (sqe, op_fd (op), p->iov, p->nr_iov, p->offset);
  }
}

static void
local_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  struct io_uring_sqe *sqe;

  switch (op->kind) {
  case OP_READ:
  case OP_WRITE: start_rw (x, op); return;
  case OP_FLUSH:
    sqe = ioexec_sqe (x, op, flush_complete, NULL);
    if (sqe)
      io_uring_prep_fsync (sqe, L (m)->fd, IORING_FSYNC_DATASYNC);
    else if (fdatasync (L (m)->fd) == -1) {
      member_io_error (m, "fdatasync", 0, errno);
      ioexec_done (x, op, errno);
    }
    return;
  case OP_TRIM:
    if (local_trim (m, op->offset, op->length) == -1)
      ioexec_done (x, op, errno);
    return;
  case OP_ZERO:
    if (local_zero (m, op->offset, op->length, op->may_trim, op->fast) == -1)
      ioexec_done (x, op, errno);
    return;
  case OP_EXTENTS:
    if (local_extents (m, op->offset, op->length, op->max_runs, op->extents)
        == -1)
      ioexec_done (x, op, errno);
    return;
  }
}

static bool
local_rw_now (struct member *m, struct member_op *op)
{
  struct local *l = L (m);

  bool write = op->kind == OP_WRITE;
  const struct iovec *iov = op->iov;
  unsigned nr = op->nr_iov;
  uint64_t offset = op->offset;
  struct iovec rest;

  if (l->fd_direct >= 0)
    return false;
  /* One buffer, no FUA, the whole of it in one call: the usual request. */
  if (nr == 1 && !op->fua) {
    ssize_t n = write ? pwrite (l->fd, iov->iov_base, iov->iov_len, offset)
                      : pread (l->fd, iov->iov_base, iov->iov_len, offset);
    if (n == (ssize_t) iov->iov_len) {
      op->err = 0;
      return true;
    }
    if (n == -1 && errno != EINTR) {
      op->err = errno;
      member_io_error (m, write ? "pwrite" : "pread", offset, errno);
      return true;
    }
    if (n == 0) {
      op->err = EIO;
      member_io_error (m, write ? "pwrite (no progress)"
                                : "pread (unexpected end of file)",
                       offset, EIO);
      return true;
    }
    if (n > 0) { /* short: rw_full goes on from there */
      rest = (struct iovec){ (char *) iov->iov_base + n, iov->iov_len - n };
      iov = &rest;
      offset += n;
    }
  }
  op->err = rw_full (m, l->fd, write, iov, nr, offset, op->fua) == -1 ? errno : 0;
  return true;
}

/* A read through the bounce buffer: copy it out. */
static void
local_finish_op (struct member *m, struct member_op *op)
{
  (void) m;
  if (op->kind != OP_READ && op->kind != OP_WRITE)
    return;
  if (op->kind == OP_READ && op->be.local.direct && op->err == 0)
    iov_scatter (op->iov, op->nr_iov, op->be.local.bounce.iov_base);
  if (op->be.local.pieces)
    free (op->be.local.pieces);
}

/* Health. */

static int
local_check (struct member *m, char *why, size_t len)
{
  struct stat st;
  uint64_t size;

  if (stat (m->path, &st) == -1)
    return fail_why (why, len, errno, "device gone: %s: %s", m->path,
                 strerror (errno));
  if (m->kind == MEMBER_BLOCK
        ? !S_ISBLK (st.st_mode) || st.st_rdev != m->id.st_rdev
        : !S_ISREG (st.st_mode) || st.st_dev != m->id.st_dev
            || st.st_ino != m->id.st_ino)
    return fail_why (why, len, ENODEV,
                 "device gone: %s now names another %s (replaced?)", m->path,
                 S_ISBLK (st.st_mode) ? "block device" : "file");
  if (local_current_size (m, &size) == -1)
    return fail_why (why, len, errno, "device gone: %s: size: %s", m->path,
                 strerror (errno));
  if (size < m->need)
    return fail_why (why, len, ENODEV,
                 "device gone: %s truncated to %" PRIu64
                 " bytes, the volume needs %" PRIu64,
                 m->path, size, m->need);
  return 0;
}

/* dup3 replaces the descriptor atomically under the same number, so I/O
 * threads never see a closed or reused descriptor; O_CLOEXEC is kept (the
 * on_change program must not inherit a member).  The same member found
 * again keeps its own descriptors (and its claim).
 */
static void
local_adopt (struct member *m, struct member *fresh)
{
  struct local *l = L (m), *f = fresh->be;

  if (identity_same (&m->id, &fresh->id))
    return;
  if (dup3 (f->fd, l->fd, O_CLOEXEC) == -1)
    stripe_error ("member %u (%s): dup3: %m", m->index, m->path);
  if (f->fd_direct >= 0 && l->fd_direct >= 0
      && dup3 (f->fd_direct, l->fd_direct, O_CLOEXEC) == -1)
    stripe_error ("member %u (%s): dup3: %m", m->index, m->path);
  m->id = fresh->id;
}

const struct member_ops member_local_ops = {
  .open = local_open,
  .close = local_close,
  .claim = local_claim,
  .current_size = local_current_size,
  .pread = local_pread,
  .pwrite = local_pwrite,
  .sync = local_sync,
  .discard = local_discard,
  .probe_fd = local_probe_fd,
  .async = false,
  .start_op = local_start_op,
  .rw_now = local_rw_now,
  .finish_op = local_finish_op,
  .zero_known_unsupported = local_zero_known_unsupported,
  .fast_zero_known = local_fast_zero_known,
  .can_fast_zero = local_can_fast_zero,
  .learn_zero = local_learn_zero,
  .check = local_check,
  .adopt = local_adopt,
};
