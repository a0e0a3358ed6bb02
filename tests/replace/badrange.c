/* SPDX-License-Identifier: BSD-3-Clause */
/* An nbdkit plugin for `nbdkit cc` (tests/replace/unreadable.sh): a file
 * whose reads fail with EIO in given byte ranges, as a disk with bad
 * sectors.  nbdkit's error filter fails every request alike, and its
 * ddrescue filter (ranges) serves read-only: a member must be writable.
 *
 *   nbdkit cc badrange.c file=FILE [bad=OFFSET:LENGTH]...
 *                        [flaky=OFFSET:LENGTH:N]... [armed=PATH]
 *
 * bad:   every read that touches the range fails.
 * flaky: the first N reads that touch the range fail, then reads work
 *        (an error that goes away when read again).
 * armed: the ranges fail only while PATH exists (a block that goes bad
 *        after a copy has read it: tests/scrub/jobs.sh).
 * Writes, flushes, trims and zeroes work everywhere.
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

struct range {
  uint64_t a, b;
  long left; /* -1: always */
};

static char *file;
static char *armed;
static int fd = -1;
static struct range ranges[32];
static unsigned nr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int
bad_config (const char *key, const char *value)
{
  uint64_t off, len;
  long n = -1;
  int got;

  if (strcmp (key, "file") == 0) {
    free (file);
    file = nbdkit_absolute_path (value);
    return file ? 0 : -1;
  }
  if (strcmp (key, "armed") == 0) {
    free (armed);
    armed = nbdkit_absolute_path (value);
    return armed ? 0 : -1;
  }
  if (strcmp (key, "bad") != 0 && strcmp (key, "flaky") != 0) {
    nbdkit_error ("unknown parameter %s", key);
    return -1;
  }
  if (nr == sizeof ranges / sizeof ranges[0]) {
    nbdkit_error ("too many ranges");
    return -1;
  }
  if (strcmp (key, "bad") == 0)
    got = sscanf (value, "%" SCNu64 ":%" SCNu64, &off, &len) == 2;
  else
    got = sscanf (value, "%" SCNu64 ":%" SCNu64 ":%ld", &off, &len, &n) == 3
          && n >= 0;
  if (!got || len == 0) {
    nbdkit_error ("%s=%s: expected OFFSET:LENGTH%s", key, value,
                  strcmp (key, "flaky") == 0 ? ":N" : "");
    return -1;
  }
  ranges[nr++] = (struct range){ off, off + len, n };
  return 0;
}

static int
bad_get_ready (void)
{
  if (file == NULL) {
    nbdkit_error ("file= is required");
    return -1;
  }
  fd = open (file, O_RDWR | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("%s: %m", file);
    return -1;
  }
  return 0;
}

static void *
bad_open (int readonly)
{
  (void) readonly;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
bad_get_size (void *h)
{
  struct stat st;
  (void) h;
  if (fstat (fd, &st) == -1) {
    nbdkit_error ("fstat: %m");
    return -1;
  }
  return st.st_size;
}

static int
bad_can_multi_conn (void *h)
{
  (void) h;
  return 1;
}

static int
bad_pread (void *h, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  bool fail = false;

  (void) h;
  (void) flags;
  pthread_mutex_lock (&lock);
  for (unsigned i = 0; i < nr && (armed == NULL || access (armed, F_OK) == 0);
       ++i)
    if (offset < ranges[i].b && ranges[i].a < offset + count) {
      if (ranges[i].left < 0)
        fail = true;
      else if (ranges[i].left > 0) {
        ranges[i].left--;
        fail = true;
      }
    }
  pthread_mutex_unlock (&lock);
  if (fail) {
    nbdkit_debug ("badrange: read %" PRIu32 " at %" PRIu64 ": EIO", count,
                  offset);
    nbdkit_set_error (EIO);
    return -1;
  }
  while (count > 0) {
    ssize_t r = pread (fd, buf, count, offset);
    if (r <= 0) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    buf = (char *) buf + r;
    count -= r;
    offset += r;
  }
  return 0;
}

static int
bad_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  (void) h;
  while (count > 0) {
    ssize_t r = pwrite (fd, buf, count, offset);
    if (r <= 0) {
      nbdkit_error ("pwrite: %m");
      return -1;
    }
    buf = (const char *) buf + r;
    count -= r;
    offset += r;
  }
  if ((flags & NBDKIT_FLAG_FUA) && fdatasync (fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

static int
bad_flush (void *h, uint32_t flags)
{
  (void) h;
  (void) flags;
  if (fdatasync (fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "badrange",
  .config = bad_config,
  .get_ready = bad_get_ready,
  .open = bad_open,
  .get_size = bad_get_size,
  .can_multi_conn = bad_can_multi_conn,
  .pread = bad_pread,
  .pwrite = bad_pwrite,
  .flush = bad_flush,
};

NBDKIT_REGISTER_PLUGIN (plugin)
