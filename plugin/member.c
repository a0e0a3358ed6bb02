/* nbdstripe: one member, a regular file or a block device.
 * See include/member.h for the contract.
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
#include "identity.h"
#include "log.h"
#include "member.h"
#include "remote.h"

void
member_io_error (const struct member *m, const char *what, uint64_t offset,
                 int err)
{
  errno = err;
  stripe_error ("member %u (%s): %s at member offset %" PRIu64 ": %m",
                m->index, m->path, what, offset);
  errno = err;
}

/* The result of a remote operation: errors are logged as for files. */
static int
remote_call (struct member *m, const char *what, uint64_t offset, int r)
{
  if (r == -1)
    member_io_error (m, what, offset, errno);
  return r;
}

/* Read a number from the block queue's sysfs attributes.  Partitions have
 * no queue/ of their own: it is the parent's, one level up.
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

int
member_open (struct member *m, unsigned index, const char *path, bool readonly,
             bool direct)
{
  char why[512];
  struct stat st;

  memset (m, 0, sizeof *m);
  m->index = index;
  m->fd = -1;
  m->fd_direct = -1;
  m->path = strdup (path);
  if (m->path == NULL) {
    stripe_error ("member %u (%s): strdup: %m", index, path);
    return -1;
  }
  m->readonly = readonly;

  if (remote_is_uri (path)) {
    if (identity_of_uri (path, &m->id, why, sizeof why) == -1) {
      int err = errno;
      stripe_error ("member %u (%s): %s", index, path, why);
      errno = err;
      return -1;
    }
    m->remote = remote_open (path, readonly, why, sizeof why);
    if (m->remote == NULL) {
      int err = errno;
      stripe_error ("member %u: %s", index, why);
      errno = err;
      return -1;
    }
    m->size = remote_size (m->remote);
    m->min_io = remote_min_block (m->remote) ? remote_min_block (m->remote) : 1;
    m->logical_block =
      remote_min_block (m->remote) > 512 ? remote_min_block (m->remote) : 512;
    m->physical_block = remote_preferred_block (m->remote) > 4096
                          ? remote_preferred_block (m->remote)
                          : 4096;
    m->can_seek_data = CAP_NO;
    stripe_debug ("member %u (%s): NBD export, %" PRIu64 " bytes, "
                  "%u connection(s), trim %s, zero %s, fast zero %s, "
                  "extents %s",
                  index, path, m->size, remote_nr_connections (m->remote),
                  remote_can_trim (m->remote) ? "yes" : "no",
                  remote_can_zero (m->remote) ? "yes" : "no",
                  remote_can_fast_zero (m->remote) ? "yes" : "no",
                  remote_can_extents (m->remote) ? "yes" : "no");
    return 0;
  }

  m->fd = claim_open (path, readonly, 0, &st, why, sizeof why);
  if (m->fd == -1) {
    int err = errno;
    if (!readonly && (err == EROFS || err == EACCES || err == EPERM)
        && access (path, R_OK) == 0)
      stripe_error ("member %u (%s): cannot be opened for writing: %s "
                    "(serve the volume read-only with nbdkit -r)",
                    index, path, why);
    else
      stripe_error ("member %u (%s): %s", index, path, why);
    errno = err;
    return -1;
  }
  m->can_seek_data = CAP_UNKNOWN;
  m->min_io = 1;

  if (S_ISREG (st.st_mode)) {
    m->is_regular = true;
    m->size = st.st_size;
    m->logical_block = 512;
    m->physical_block = 4096;
    m->can_punch = CAP_UNKNOWN;
    m->can_zero_range = CAP_UNKNOWN;
    m->can_discard = CAP_NO;
    m->can_zeroout = CAP_NO;
  }
  else {
    uint64_t size;
    int lbs = 512;
    unsigned int pbs = 4096;

    m->is_block = true;
    if (ioctl (m->fd, BLKGETSIZE64, &size) == -1) {
      stripe_error ("member %u (%s): BLKGETSIZE64: %m", index, path);
      return -1;
    }
    m->size = size;
    if (ioctl (m->fd, BLKSSZGET, &lbs) == -1 || lbs <= 0)
      lbs = 512;
    if (ioctl (m->fd, BLKPBSZGET, &pbs) == -1 || pbs == 0)
      pbs = lbs;
    m->logical_block = lbs;
    m->physical_block = pbs;
    /* Ask the queue up front so that a fast zero can be refused before
     * any member is touched.  Unknown (no sysfs) means: try and learn.
     */
    int64_t discard = read_queue_attr (st.st_rdev, "discard_max_bytes");
    int64_t wzeroes = read_queue_attr (st.st_rdev, "write_zeroes_max_bytes");
    m->can_discard = discard < 0 ? CAP_UNKNOWN : discard > 0;
    m->can_punch = wzeroes < 0 ? CAP_UNKNOWN : wzeroes > 0;
    m->can_zero_range = CAP_NO;
    m->can_zeroout = CAP_YES;
    m->can_seek_data = CAP_NO;
  }
  if (identity_of_fd (m->fd, m->size, &m->id, why, sizeof why) == -1) {
    stripe_error ("member %u (%s): %s", index, path, why);
    return -1;
  }
  if (direct) {
    struct stat dst;

    m->fd_direct =
      open (path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_DIRECT);
    if (m->fd_direct == -1) {
      stripe_error ("member %u (%s): open with O_DIRECT (cache=direct): %m",
                    index, path);
      return -1;
    }
    /* The path was looked up again: it must still be the same member. */
    if (fstat (m->fd_direct, &dst) == -1 || dst.st_dev != st.st_dev
        || dst.st_ino != st.st_ino || dst.st_rdev != st.st_rdev) {
      stripe_error ("member %u (%s): changed while it was being opened",
                    index, path);
      errno = EAGAIN;
      return -1;
    }
    /* Files: a page is always enough.  Block devices: the logical block. */
    m->direct_align = m->is_block ? m->logical_block : 4096;
  }
  stripe_debug ("member %u (%s): %s, %" PRIu64 " bytes, "
                "logical block %" PRIu32 ", physical block %" PRIu32,
                index, path, m->is_block ? "block device" : "file", m->size,
                m->logical_block, m->physical_block);
  return 0;
}

int
member_claim (struct member *m)
{
  char why[512];

  if (m->remote)
    return 0;
  if (claim_take (&m->fd, m->path, !m->readonly, m->readonly, why, sizeof why)
      == -1) {
    int err = errno;
    stripe_error ("member %u (%s): %s", m->index, m->path, why);
    errno = err;
    return -1;
  }
  return 0;
}

int
member_current_size (struct member *m, uint64_t *size)
{
  struct stat st;

  if (m->remote) {
    *size = remote_size (m->remote);
    return 0;
  }
  if (m->is_block)
    return ioctl (m->fd, BLKGETSIZE64, size);
  if (fstat (m->fd, &st) == -1)
    return -1;
  *size = st.st_size;
  return 0;
}

void
member_close (struct member *m)
{
  remote_close (m->remote);
  m->remote = NULL;
  if (m->fd_direct >= 0)
    close (m->fd_direct);
  if (m->fd >= 0)
    close (m->fd);
  m->fd = m->fd_direct = -1;
  free (m->path);
  m->path = NULL;
}

/* Drop n transferred bytes from the front of an iovec (a private copy). */
static void
iov_advance (struct iovec **iov, unsigned *nr, size_t n)
{
  while (n > 0 && *nr > 0) {
    if (n >= (*iov)->iov_len) {
      n -= (*iov)->iov_len;
      (*iov)++;
      (*nr)--;
    }
    else {
      (*iov)->iov_base = (char *) (*iov)->iov_base + n;
      (*iov)->iov_len -= n;
      n = 0;
    }
  }
}

static int
rw_full (struct member *m, bool direct, bool write, const struct iovec *iov_in,
         unsigned nr_in, uint64_t offset, bool dsync)
{
  int fd = direct ? m->fd_direct : m->fd;
  struct iovec *copy, *iov;
  unsigned nr = nr_in;
  bool use_dsync = dsync;
  int r = -1;

  copy = malloc (nr_in * sizeof *copy);
  if (copy == NULL) {
    member_io_error (m, "malloc", offset, ENOMEM);
    return -1;
  }
  memcpy (copy, iov_in, nr_in * sizeof *copy);
  iov = copy;

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
    iov_advance (&iov, &nr, n);
  }
  if (dsync && !use_dsync && fdatasync (m->fd) == -1) {
    member_io_error (m, "fdatasync", offset, errno);
    goto out;
  }
  r = 0;
out:
  free (copy);
  return r;
}

int
member_preadv (struct member *m, bool direct, const struct iovec *iov,
               unsigned nr_iov, uint64_t offset)
{
  if (m->remote)
    return remote_call (m, "read", offset,
                        remote_preadv (m->remote, iov, nr_iov, offset));
  return rw_full (m, direct, false, iov, nr_iov, offset, false);
}

int
member_pwritev (struct member *m, bool direct, const struct iovec *iov,
                unsigned nr_iov, uint64_t offset, bool dsync)
{
  if (m->remote)
    return remote_call (
      m, "write", offset,
      remote_pwritev (m->remote, iov, nr_iov, offset, dsync));
  return rw_full (m, direct, true, iov, nr_iov, offset, dsync);
}

int
member_flush (struct member *m)
{
  if (m->remote)
    return remote_call (m, "flush", 0, remote_flush (m->remote));
  if (fdatasync (m->fd) == -1) {
    member_io_error (m, "fdatasync", 0, errno);
    return -1;
  }
  return 0;
}

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
  if (fallocate (m->fd, mode, offset, len) == 0) {
    atomic_store (cap, CAP_YES);
    return 0;
  }
  if (is_unsupported (errno, m->is_block)) {
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
  if (ioctl (m->fd, req, range) == 0) {
    atomic_store (cap, CAP_YES);
    return 0;
  }
  if (is_unsupported (errno, true)) {
    switch_off (m, cap, what);
    errno = EOPNOTSUPP;
  }
  return -1;
}

int
member_discard (struct member *m, uint64_t offset, uint64_t len)
{
  if (m->remote)
    return remote_call (m, "trim", offset,
                        remote_trim (m->remote, offset, len));
  int r;

  if (m->is_block) {
    /* BLKDISCARD wants whole logical blocks: discard only those inside. */
    uint64_t b = m->logical_block;
    uint64_t start = (offset + b - 1) / b * b;
    uint64_t end = (offset + len) / b * b;
    if (end <= start)
      return 0;
    r = try_blk_ioctl (m, &m->can_discard, BLKDISCARD, start, end - start,
                       "BLKDISCARD");
  }
  else
    r = try_fallocate (m, &m->can_punch,
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
member_zero_known_unsupported (const struct member *m, uint64_t offset,
                               uint64_t len, bool may_trim, bool fast)
{
  if (m->remote)
    return !remote_can_zero (m->remote)
           || (fast && !remote_can_fast_zero (m->remote));
  if (m->is_block) {
    uint64_t b = m->logical_block;
    if (offset % b || len % b)
      return true;
    if (fast)
      return m->can_punch == CAP_NO;
    return false; /* BLKZEROOUT always works */
  }
  return (!may_trim || m->can_punch == CAP_NO) && m->can_zero_range == CAP_NO;
}

bool
member_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                        bool may_trim)
{
  if (m->remote)
    return remote_can_zero (m->remote) && remote_can_fast_zero (m->remote);
  if (m->is_block)
    return offset % m->logical_block == 0 && len % m->logical_block == 0
           && m->can_punch == CAP_YES;
  return (may_trim && m->can_punch == CAP_YES)
         || m->can_zero_range == CAP_YES;
}

void
member_learn_zero (struct member *m, uint64_t offset, uint64_t len)
{
  if (m->remote || m->readonly)
    return;
  if (m->is_block) {
    if (m->can_punch == CAP_UNKNOWN && offset % m->logical_block == 0
        && len % m->logical_block == 0)
      try_fallocate (m, &m->can_punch,
                     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len,
                     "zero-out with unmap");
    return;
  }
  if (m->can_punch == CAP_UNKNOWN)
    try_fallocate (m, &m->can_punch, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, len, "punch hole");
  if (m->can_zero_range == CAP_UNKNOWN)
    try_fallocate (m, &m->can_zero_range,
                   FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, offset, len,
                   "zero range");
}

int
member_zero (struct member *m, uint64_t offset, uint64_t len, bool may_trim,
             bool fast)
{
  if (m->remote) {
    if (remote_zero (m->remote, offset, len, may_trim, fast) == -1) {
      if (errno != EOPNOTSUPP)
        member_io_error (m, "write zeroes", offset, errno);
      return -1;
    }
    return 0;
  }
  if (m->is_block) {
    uint64_t b = m->logical_block;
    if (offset % b || len % b) {
      errno = EOPNOTSUPP; /* nbdkit writes the zeroes instead */
      return -1;
    }
    /* On a block device, fallocate(PUNCH_HOLE) is a zero-out that may
     * unmap and never falls back to writing zeroes: the fast method.
     */
    if (may_trim || fast) {
      if (try_fallocate (m, &m->can_punch,
                         FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                         len, "zero-out with unmap")
          == 0)
        return 0;
      if (errno != EOPNOTSUPP)
        goto err;
      if (fast)
        return -1;
    }
    if (try_blk_ioctl (m, &m->can_zeroout, BLKZEROOUT, offset, len,
                       "BLKZEROOUT")
        == 0)
      return 0;
    if (errno != EOPNOTSUPP)
      goto err;
    return -1;
  }

  if (may_trim) {
    if (try_fallocate (m, &m->can_punch,
                       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len,
                       "punch hole")
        == 0)
      return 0;
    if (errno != EOPNOTSUPP)
      goto err;
  }
  if (try_fallocate (m, &m->can_zero_range,
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

int
member_extent (struct member *m, uint64_t offset, uint64_t limit,
               uint32_t *flags, uint64_t *end)
{
  if (m->remote)
    return remote_call (
      m, "block status", offset,
      remote_extent (m->remote, offset, limit, flags, end));
  off_t pos;

  *flags = 0;
  *end = limit;
  if (atomic_load (&m->can_seek_data) == CAP_NO)
    return 0;

  pos = lseek (m->fd, offset, SEEK_DATA);
  if (pos == -1) {
    if (errno == ENXIO) { /* only a hole up to end of file */
      *flags = MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO;
      return 0;
    }
    if (errno == EINVAL || errno == EOPNOTSUPP) {
      switch_off (m, &m->can_seek_data, "SEEK_DATA");
      return 0;
    }
    member_io_error (m, "lseek (SEEK_DATA)", offset, errno);
    return -1;
  }
  atomic_store (&m->can_seek_data, CAP_YES);
  if ((uint64_t) pos > offset) {
    *flags = MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO;
    if ((uint64_t) pos < limit)
      *end = pos;
    return 0;
  }
  pos = lseek (m->fd, offset, SEEK_HOLE);
  if (pos == -1) {
    member_io_error (m, "lseek (SEEK_HOLE)", offset, errno);
    return -1;
  }
  if ((uint64_t) pos < limit)
    *end = pos;
  return 0;
}
