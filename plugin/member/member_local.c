/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the local backend of member.h -- a regular file or a block
 * device.  This file opens it (what it is, its size and blocks, what its
 * queue says it can do), reads and writes its header, and checks and
 * adopts it for health; member_local_impl.h says where the rest is.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "claim.h"
#include "log.h"
#include "member_local_impl.h"
#include "util.h"

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

/* Whether a discard on block device rdev reads back as zeros, to be
 * sure of it: a loop device over a regular file whose file system
 * punches holes.  The loop driver does a discard as a hole punched in
 * its backing file (drivers/block/loop.c: "discarded regions read back
 * as zero"), but a discard the driver could not do is not reported
 * failed on every kernel (blkdev_issue_discard has turned EOPNOTSUPP
 * into success in some), so the backing file is asked first: a hole
 * punched past its end changes nothing, and fails where the file system
 * cannot punch.  Any other block device: false.  A drive's zeroing
 * after discard is its own business, and where a drive states it
 * (NVMe's deallocate feature, SCSI's LBPRZ) the kernel already does a
 * zero-out that may unmap as a deallocation.
 */
static bool
loop_discard_zeroes (dev_t rdev, const struct identity *id)
{
  char path[PATH_MAX];
  struct stat st;
  bool ok = false;
  int fd;

  if (id->extent.base != EXTENT_FILE
      || !identity_sysfs_read (rdev, "loop/backing_file", path, sizeof path))
    return false;
  fd = open (path, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd == -1)
    return false;
  if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode)
      && st.st_dev == id->extent.dev && st.st_ino == id->extent.ino) {
    off_t end = (st.st_size + 4095) / 4096 * 4096;
    ok = fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, end, 4096)
         == 0;
  }
  close (fd);
  return ok;
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
  if (m->kind == MEMBER_BLOCK && !p->readonly && l->can_discard == CAP_YES)
    l->discard_zeroes = loop_discard_zeroes (st.st_rdev, &m->id);
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
  /* What a discard reads back is the new device's. */
  l->discard_zeroes = f->discard_zeroes;
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
