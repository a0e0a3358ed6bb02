/* nbdstripe: a member's raw bytes, for its header.  See include/rawdev.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <libnbd.h>

#include "claim.h"
#include "rawdev.h"

/* Remote reads and trims go in pieces no server refuses (NBD servers take
 * requests of 32M or more; a trim's length is 32 bits on the wire).
 */
#define REMOTE_READ_MAX (1024u * 1024)
#define REMOTE_TRIM_MAX (1024u * 1024 * 1024)

static int fail (char *why, size_t len, int err, const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

static int
fail (char *why, size_t len, int err, const char *fmt, ...)
{
  va_list ap;

  if (why && len) {
    va_start (ap, fmt);
    vsnprintf (why, len, fmt, ap);
    va_end (ap);
  }
  errno = err;
  return -1;
}

/* remote.h's reasons begin with the URI; ours never repeat the name. */
static void
drop_name (char *why, const char *name)
{
  size_t n = strlen (name);

  if (why && strncmp (why, name, n) == 0 && strncmp (why + n, ": ", 2) == 0)
    memmove (why, why + n + 2, strlen (why + n + 2) + 1);
}

/* libnbd's last error, or a placeholder (never NULL for printf). */
static const char *
last_nbd_error (void)
{
  const char *e = nbd_get_error ();

  return e ? e : "unknown error";
}

static int
open_remote (struct rawdev *d, unsigned flags, char *why, size_t len)
{
  int64_t size;

  if (identity_of_uri (d->name, &d->id, why, len) == -1)
    return -1;
  d->nbd = remote_connect (d->name, RAWDEV_TIMEOUT, false, why, len);
  if (d->nbd == NULL) {
    int err = errno ? errno : ECONNREFUSED;
    drop_name (why, d->name);
    errno = err;
    return -1;
  }
  size = nbd_get_size (d->nbd);
  if (size < 0)
    return fail (why, len, EIO, "size: %s", last_nbd_error ());
  d->size = size;
  if (!(flags & RAWDEV_READONLY) && nbd_is_read_only (d->nbd) == 1)
    return fail (why, len, EROFS, "the server exports it read-only");
  return 0;
}

static int
open_local (struct rawdev *d, unsigned flags, char *why, size_t len)
{
  struct stat st;

  d->fd = claim_open (d->name, flags & RAWDEV_READONLY, 0, &st, why, len);
  if (d->fd == -1)
    return -1;
  d->is_block = S_ISBLK (st.st_mode);
  d->is_regular = S_ISREG (st.st_mode);
  if (d->is_block) {
    if (ioctl (d->fd, BLKGETSIZE64, &d->size) == -1)
      return fail (why, len, errno, "BLKGETSIZE64: %s", strerror (errno));
  }
  else
    d->size = st.st_size < 0 ? 0 : st.st_size;
  return identity_of_fd (d->fd, d->size, &d->id, why, len);
}

int
rawdev_open (struct rawdev *d, const char *name, unsigned flags, char *why,
             size_t len)
{
  memset (d, 0, sizeof *d);
  d->name = name;
  d->fd = -1;
  d->probe_fd = -1;
  if (remote_is_uri (name))
    return open_remote (d, flags, why, len);
  return open_local (d, flags, why, len);
}

void
rawdev_close (struct rawdev *d)
{
  if (d->probe_fd >= 0)
    close (d->probe_fd);
  d->probe_fd = -1;
  if (d->nbd) {
    /* A polite goodbye if the connection is idle; never waits. */
    if (nbd_aio_is_ready (d->nbd))
      nbd_aio_disconnect (d->nbd, 0);
    nbd_close (d->nbd);
    d->nbd = NULL;
  }
  if (d->fd >= 0)
    close (d->fd);
  d->fd = -1;
}

int
rawdev_claim (struct rawdev *d, char *why, size_t len)
{
  if (d->nbd)
    return 0;
  return claim_take (&d->fd, d->name, true, false, why, len);
}

bool
rawdev_is_remote (const struct rawdev *d)
{
  return d->nbd != NULL;
}

bool
rawdev_alias (const struct rawdev *a, const struct rawdev *b, char *how,
              size_t len)
{
  return identity_alias (&a->id, &b->id, how, len);
}

ssize_t
rawdev_pread (struct rawdev *d, void *buf, size_t count, uint64_t offset,
              char *why, size_t len)
{
  size_t done = 0;

  if (d->nbd) {
    /* NBD has no short reads: a read past the end is an error. */
    if (offset >= d->size)
      return 0;
    if (count > d->size - offset)
      count = d->size - offset;
    while (done < count) {
      size_t n =
        count - done < REMOTE_READ_MAX ? count - done : REMOTE_READ_MAX;
      if (remote_plain_pread (d->nbd, (char *) buf + done, n, offset + done,
                              RAWDEV_TIMEOUT, why, len)
          == -1)
        return -1;
      done += n;
    }
    return done;
  }
  while (done < count) {
    ssize_t n =
      pread (d->fd, (char *) buf + done, count - done, offset + done);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      return fail (why, len, errno, "read: %s", strerror (errno));
    if (n == 0)
      break;
    done += n;
  }
  return done;
}

ssize_t
rawdev_pread_fresh (struct rawdev *d, void *buf, size_t count,
                    uint64_t offset, char *why, size_t len)
{
  /* Written and synced: the cached pages are clean and can go, so that
   * the read comes from the device.
   */
  if (d->nbd == NULL)
    posix_fadvise (d->fd, offset, count, POSIX_FADV_DONTNEED);
  return rawdev_pread (d, buf, count, offset, why, len);
}

int
rawdev_pwrite (struct rawdev *d, const void *buf, size_t count,
               uint64_t offset, char *why, size_t len)
{
  size_t done = 0;

  if (d->nbd)
    return remote_plain_pwrite (d->nbd, buf, count, offset, RAWDEV_TIMEOUT,
                                why, len);
  while (done < count) {
    ssize_t n =
      pwrite (d->fd, (const char *) buf + done, count - done, offset + done);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      return fail (why, len, errno, "write: %s", strerror (errno));
    if (n == 0)
      return fail (why, len, EIO, "write: no progress at offset %llu",
                   (unsigned long long) (offset + done));
    done += n;
  }
  return 0;
}

int
rawdev_sync (struct rawdev *d, char *why, size_t len)
{
  if (d->nbd) {
    return remote_plain_flush (d->nbd, RAWDEV_TIMEOUT, why, len);
  }
  if (fdatasync (d->fd) == -1)
    return fail (why, len, errno, "fdatasync: %s", strerror (errno));
  return 0;
}

int
rawdev_discard (struct rawdev *d, uint64_t offset, uint64_t length, char *why,
                size_t len)
{
  if (d->nbd) {
    if (nbd_can_trim (d->nbd) != 1)
      return fail (why, len, EOPNOTSUPP,
                   "cannot discard: the server does not support trim");
    while (length > 0) {
      uint64_t n = length < REMOTE_TRIM_MAX ? length : REMOTE_TRIM_MAX;
      if (remote_plain_trim (d->nbd, n, offset, RAWDEV_TIMEOUT, why, len)
          == -1)
        return -1;
      offset += n;
      length -= n;
    }
    return 0;
  }

  int r;
  if (d->is_block) {
    uint64_t range[2] = { offset, length };
    r = ioctl (d->fd, BLKDISCARD, range);
  }
  else
    r = fallocate (d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                   length);
  if (r == -1 && (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL))
    return fail (why, len, EOPNOTSUPP, "cannot discard (%s)",
                 strerror (errno));
  if (r == -1)
    return fail (why, len, errno, "discard: %s", strerror (errno));
  return 0;
}

/* An anonymous sparse file: a memfd, else O_TMPFILE in $TMPDIR or /tmp
 * (kernels or sandboxes without memfd_create).
 */
static int
anonymous_file (char *why, size_t len)
{
  const char *dir = getenv ("TMPDIR");
  int fd = memfd_create ("nbdstripe-probe", MFD_CLOEXEC);

  if (fd >= 0)
    return fd;
  if (dir == NULL || dir[0] == '\0')
    dir = "/tmp";
  fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd == -1)
    return fail (why, len, errno, "memfd_create, or O_TMPFILE in %s: %s", dir,
                 strerror (errno));
  return fd;
}

/* Copy [offset, offset + count) of the member into the snapshot. */
static int
copy_range (struct rawdev *d, int fd, char *buf, uint64_t offset, size_t count,
            char *why, size_t len)
{
  ssize_t n = rawdev_pread (d, buf, count, offset, why, len);

  if (n == -1)
    return -1;
  for (ssize_t done = 0; done < n;) {
    ssize_t w = pwrite (fd, buf + done, n - done, offset + done);
    if (w == -1 && errno == EINTR)
      continue;
    if (w <= 0)
      return fail (why, len, w == -1 ? errno : EIO,
                   "writing the probe copy: %s",
                   strerror (w == -1 ? errno : EIO));
    done += w;
  }
  return 0;
}

int
rawdev_probe_fd (struct rawdev *d, char *why, size_t len)
{
  const uint64_t span = RAWDEV_PROBE_SPAN;
  uint64_t head, tail;
  char *buf;
  int fd;

  if (d->nbd == NULL)
    return d->fd;
  if (d->probe_fd >= 0)
    return d->probe_fd;

  fd = anonymous_file (why, len);
  if (fd == -1)
    return -1;
  if (ftruncate (fd, d->size) == -1) {
    int err = errno;
    close (fd);
    return fail (why, len, err, "a sparse probe copy of %llu bytes: %s",
                 (unsigned long long) d->size, strerror (err));
  }
  buf = malloc (span);
  if (buf == NULL) {
    close (fd);
    return fail (why, len, ENOMEM, "out of memory");
  }
  head = d->size < span ? d->size : span;
  tail = d->size - head < span ? d->size - head : span;
  if (copy_range (d, fd, buf, 0, head, why, len) == -1
      || copy_range (d, fd, buf, d->size - tail, tail, why, len) == -1) {
    int err = errno;
    free (buf);
    close (fd);
    errno = err;
    return -1;
  }
  free (buf);
  d->probe_fd = fd;
  return fd;
}
