/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: small helpers every module may use -- time, alignment,
 * iovecs, little-endian fields, a failure explained, a file written
 * whole.  Inline but for why_line, fail_why and write_file_atomic
 * (plugin/util/util.c); no state.
 */
#ifndef NBDSTRIPE_UTIL_H
#define NBDSTRIPE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

/* Monotonic clock in ns. */
static inline uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wall clock, seconds since the epoch. */
static inline double
now_unix (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* a is a power of two. */
static inline uint64_t
round_up (uint64_t v, uint64_t a)
{
  return (v + a - 1) & ~(a - 1);
}

static inline bool
is_aligned (uint64_t v, uint64_t a)
{
  return (v & (a - 1)) == 0;
}

/* Whether the len bytes at p are all zero. */
static inline bool
all_zero (const uint8_t *p, size_t len)
{
  for (size_t i = 0; i < len; ++i)
    if (p[i] != 0)
      return false;
  return true;
}

static inline size_t
iov_total (const struct iovec *iov, unsigned nr)
{
  size_t n = 0;
  for (unsigned i = 0; i < nr; ++i)
    n += iov[i].iov_len;
  return n;
}

/* Drop n bytes from the front of a (private, writable) iovec. */
static inline void
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

/* Copy an iovec's bytes into buf / buf into an iovec. */
static inline void
iov_gather (void *buf, const struct iovec *iov, unsigned nr)
{
  char *p = buf;
  for (unsigned i = 0; i < nr; ++i) {
    memcpy (p, iov[i].iov_base, iov[i].iov_len);
    p += iov[i].iov_len;
  }
}

static inline void
iov_scatter (const struct iovec *iov, unsigned nr, const void *buf)
{
  const char *p = buf;
  for (unsigned i = 0; i < nr; ++i) {
    memcpy (iov[i].iov_base, p, iov[i].iov_len);
    p += iov[i].iov_len;
  }
}

/* Little-endian fields of on-disk formats (the member header, md
 * superblocks), byte by byte: independent of the host's byte order and
 * of alignment.
 */
static inline void
put_le16 (uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
}

static inline void
put_le32 (uint8_t *p, uint32_t v)
{
  for (unsigned i = 0; i < 4; ++i)
    p[i] = (uint8_t) (v >> (8 * i));
}

static inline void
put_le64 (uint8_t *p, uint64_t v)
{
  for (unsigned i = 0; i < 8; ++i)
    p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint16_t
get_le16 (const uint8_t *p)
{
  return (uint16_t) (p[0] | p[1] << 8);
}

static inline uint32_t
get_le32 (const uint8_t *p)
{
  uint32_t v = 0;

  for (unsigned i = 0; i < 4; ++i)
    v |= (uint32_t) p[i] << (8 * i);
  return v;
}

static inline uint64_t
get_le64 (const uint8_t *p)
{
  uint64_t v = 0;

  for (unsigned i = 0; i < 8; ++i)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

/* A failure, the way member.h's functions and their helpers report one:
 * the reason in the caller's why (len bytes; nothing when why is NULL),
 * errno set to err, and -1 returned, so that one line does all three:
 *   return fail_why (why, len, EROFS, "the server exports it read-only");
 */
/* One more line in why (a problem among several, each a whole line:
 * the caller logs them one by one), after a newline when why holds one
 * already.  Cut short when why is full.
 */
extern void why_line (char *why, size_t len, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
extern int fail_why (char *why, size_t len, int err, const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

/* Write path atomically (its directories made as needed): a new
 * temporary in the same directory, synced, then renamed over it.  0, or
 * -1 with errno.  The directory may be writable by others (a sticky /tmp, a
 * node_exporter textfile directory shared with a group), so the
 * temporary must never be a name someone else can plant a symlink at:
 * mkostemp creates a random name with O_CREAT|O_EXCL, which never
 * follows a link, and rename replaces the target itself (were it a
 * symlink, the link goes, its target is left alone).  The temporary is
 * a dot file, so that node_exporter's "*.prom" never reads it.
 */
extern int write_file_atomic (const char *path, const char *data,
                              size_t len);

/* Thread-local storage of the plugin: the initial-exec model, a fixed
 * offset from the thread pointer, where the default model for a shared
 * object calls __tls_get_addr on every access (a few per request).  The
 * few bytes come from glibc's surplus reserved for libraries loaded by
 * dlopen, as nbdkit loads the plugin.
 */
#define THREAD_LOCAL __thread __attribute__ ((tls_model ("initial-exec")))

#endif /* NBDSTRIPE_UTIL_H */
