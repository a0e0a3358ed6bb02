/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the NBD backend of member.h -- an export on another server,
 * reached through libnbd.
 *
 * Opened for I/O, a member keeps a pool of connections, each driven by
 * a dispatcher thread, on which the executor's operations go as
 * asynchronous commands (member_nbd_pool.c).  Opened raw, a member is
 * one plain connection (nbd_plain.h), no thread.  This file opens a
 * member (asking the server what it can do), makes the synchronous calls
 * (headers, probes: through the pool once it runs), copies the ends of
 * the export for libblkid, and answers health's questions.
 *
 * What the server cannot do is skipped or emulated as for local members:
 * no trim -- skipped (trim is advisory); no write zeroes -- EOPNOTSUPP
 * (nbdkit writes zeroes); no FUA -- write then flush; no flush -- no-op
 * (the server has no volatile cache to flush); no base:allocation -- all
 * data.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <libnbd.h>

#include "log.h"
#include "member.h"
#include "member_nbd_impl.h"
#include "nbd_plain.h"
#include "util.h"

/* When the server does not say: nbdkit and qemu-nbd take 32M. */
#define DEFAULT_MAX_PAYLOAD (32u * 1024 * 1024)

/* Raw reads and trims go in pieces no server refuses. */
#define RAW_READ_MAX (1024u * 1024)

/* How far from each end libblkid looks for signatures (probe_fd). */
#define PROBE_SPAN (1024 * 1024)

static int
member_nbd_open (struct member *m, char *why, size_t len)
{
  const struct member_open_params *p = &m->params;
  struct nbd *n = calloc (1, sizeof *n);
  struct nbd_handle *h;
  int64_t v;
  unsigned want;
  char reason[512];

  if (n == NULL)
    return fail_why (why, len, ENOMEM, "out of memory");
  m->be = n;
  m->kind = MEMBER_NBD;
  n->uri = m->path;
  n->raw = p->raw;
  n->timeout = p->timeout;
  n->probe_fd = -1;
  pthread_rwlock_init (&n->lock, NULL);
  pthread_mutex_init (&n->start_lock, NULL);
  if (identity_of_uri (m->path, &m->id, why, len) == -1)
    return -1;

  n->conns[0] = member_nbd_conn_new (m, why, len);
  if (n->conns[0] == NULL)
    return -1;
  n->nr_conns = 1;
  h = n->conns[0]->h;

  v = nbd_get_size (h);
  if (v < 0) {
    member_nbd_plain_why (reason, sizeof reason, "size", NULL);
    return fail_why (why, len, EIO, "%s", reason);
  }
  n->size = v;
  m->size = v;
  if (!p->readonly && nbd_is_read_only (h) == 1)
    return fail_why (why, len, EROFS,
                     "the server exports it read-only (serve the volume "
                     "read-only with nbdkit -r)");
  v = nbd_get_block_size (h, LIBNBD_SIZE_MINIMUM);
  n->min_block = v > 0 ? v : 0;
  v = nbd_get_block_size (h, LIBNBD_SIZE_PREFERRED);
  n->preferred_block = v > 0 ? v : 0;
  v = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  n->max_payload = v > 0 && v < DEFAULT_MAX_PAYLOAD ? v : DEFAULT_MAX_PAYLOAD;
  n->can_trim = nbd_can_trim (h) == 1;
  n->can_zero = nbd_can_zero (h) == 1;
  n->can_fast_zero = n->can_zero && nbd_can_fast_zero (h) == 1;
  n->can_flush = nbd_can_flush (h) == 1;
  n->can_fua = nbd_can_fua (h) == 1;
  n->can_extents = !n->raw
                   && nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION)
                        == 1;
  m->min_io = n->min_block ? n->min_block : 1;
  m->logical_block = n->min_block > 512 ? n->min_block : 512;
  m->physical_block = n->preferred_block > 4096 ? n->preferred_block : 4096;

  /* More connections only where the server says they see the same data
   * (multi-conn): a flush on one then covers all.
   */
  want = p->connections ? p->connections : MEMBER_CONNECTIONS_DEFAULT;
  if (want > MEMBER_CONNECTIONS_MAX)
    want = MEMBER_CONNECTIONS_MAX;
  if (n->raw || nbd_can_multi_conn (h) != 1)
    want = 1;
  while (n->nr_conns < want) {
    struct conn *c = member_nbd_conn_new (m, why, len);
    if (c == NULL)
      return -1;
    n->conns[n->nr_conns++] = c;
  }
  if (!n->raw)
    stripe_debug ("member %u (%s): NBD export, %" PRIu64 " bytes, "
                  "%u connection(s), trim %s, zero %s, fast zero %s, "
                  "extents %s",
                  m->index, m->path, m->size, n->nr_conns,
                  n->can_trim ? "yes" : "no", n->can_zero ? "yes" : "no",
                  n->can_fast_zero ? "yes" : "no",
                  n->can_extents ? "yes" : "no");
  return 0;
}

static void
nbd_close_member (struct member *m)
{
  struct nbd *n = N (m);

  if (n == NULL)
    return;
  for (unsigned i = 0; i < n->nr_conns; ++i)
    member_nbd_conn_close (n->conns[i]);
  if (n->probe_fd >= 0)
    close (n->probe_fd);
  pthread_rwlock_destroy (&n->lock);
  pthread_mutex_destroy (&n->start_lock);
  free (n);
  m->be = NULL;
}

static int
nbd_current_size (struct member *m, uint64_t *size)
{
  *size = N (m)->size;
  return 0;
}

/* Synchronous calls (headers, probes, the command's reads and writes):
 * through the pool once it runs, else on the first connection driven
 * here (raw, or a fresh pool being probed).
 */

static ssize_t
member_nbd_pread (struct member *m, void *buf, size_t count, uint64_t offset,
           bool fresh, char *why, size_t len)
{
  struct nbd *n = N (m);
  size_t done = 0;

  (void) fresh; /* no cache on this side */
  /* NBD has no short reads: a read past the end is an error. */
  if (offset >= n->size)
    return 0;
  if (count > n->size - offset)
    count = n->size - offset;
  if (pool_running (n)) {
    if (member_nbd_pool_sync (m, OP_READ, buf, count, offset) == -1)
      return fail_why (why, len, errno, "read: %s", strerror (errno));
    return count;
  }
  while (done < count) {
    size_t k = count - done < RAW_READ_MAX ? count - done : RAW_READ_MAX;
    if (member_nbd_plain_pread (n->conns[0]->h, (char *) buf + done, k,
                                offset + done, plain_timeout (n), why, len)
        == -1)
      return -1;
    done += k;
  }
  return done;
}

static int
member_nbd_pwrite (struct member *m, const void *buf, size_t count, uint64_t offset,
            char *why, size_t len)
{
  struct nbd *n = N (m);

  if (pool_running (n)) {
    if (member_nbd_pool_sync (m, OP_WRITE, (void *) buf, count, offset) == -1)
      return fail_why (why, len, errno, "write: %s", strerror (errno));
    return 0;
  }
  return member_nbd_plain_pwrite (n->conns[0]->h, buf, count, offset,
                                  plain_timeout (n), why, len);
}

static int
member_nbd_sync (struct member *m, char *why, size_t len)
{
  struct nbd *n = N (m);

  if (pool_running (n)) {
    if (member_nbd_pool_sync (m, OP_FLUSH, NULL, 0, 0) == -1)
      return fail_why (why, len, errno, "flush: %s", strerror (errno));
    return 0;
  }
  return member_nbd_plain_flush (n->conns[0]->h, plain_timeout (n), why, len);
}

static int
member_nbd_discard (struct member *m, uint64_t offset, uint64_t length, char *why,
             size_t len)
{
  struct nbd *n = N (m);

  if (!n->can_trim)
    return fail_why (why, len, EOPNOTSUPP,
                     "cannot discard: the server does not support trim");
  while (length > 0) {
    uint64_t k = length < MAX_RANGE ? length : MAX_RANGE;
    if (member_nbd_plain_trim (n->conns[0]->h, k, offset, plain_timeout (n),
                               why, len)
        == -1)
      return -1;
    offset += k;
    length -= k;
  }
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
    return fail_why (why, len, errno, "memfd_create, or O_TMPFILE in %s: %s",
                     dir, strerror (errno));
  return fd;
}

/* Copy [offset, offset + count) of the member into the snapshot. */
static int
copy_range (struct member *m, int fd, char *buf, uint64_t offset,
            size_t count, char *why, size_t len)
{
  ssize_t k = member_nbd_pread (m, buf, count, offset, false, why, len);

  if (k == -1)
    return -1;
  for (ssize_t done = 0; done < k;) {
    ssize_t w = pwrite (fd, buf + done, k - done, offset + done);
    if (w == -1 && errno == EINTR)
      continue;
    if (w <= 0)
      return fail_why (why, len, w == -1 ? errno : EIO,
                       "writing the probe copy: %s",
                       strerror (w == -1 ? errno : EIO));
    done += w;
  }
  return 0;
}

/* libnbd cannot read an export for libblkid: a sparse memory file of its
 * size holding a copy of its first and last PROBE_SPAN bytes, where
 * signatures live.
 */
static int
nbd_probe_fd (struct member *m, char *why, size_t len)
{
  struct nbd *n = N (m);
  const uint64_t span = PROBE_SPAN;
  uint64_t head, tail, size = n->size;
  char *buf;
  int fd;

  if (n->probe_fd >= 0)
    return n->probe_fd;
  fd = anonymous_file (why, len);
  if (fd == -1)
    return -1;
  if (ftruncate (fd, size) == -1) {
    int err = errno;
    close (fd);
    return fail_why (why, len, err,
                     "a sparse probe copy of %" PRIu64 " bytes: %s", size,
                     strerror (err));
  }
  buf = malloc (span);
  if (buf == NULL) {
    close (fd);
    return fail_why (why, len, ENOMEM, "out of memory");
  }
  head = size < span ? size : span;
  tail = size - head < span ? size - head : span;
  if (copy_range (m, fd, buf, 0, head, why, len) == -1
      || copy_range (m, fd, buf, size - tail, tail, why, len) == -1) {
    int err = errno;
    free (buf);
    close (fd);
    errno = err;
    return -1;
  }
  free (buf);
  n->probe_fd = fd;
  return fd;
}

/* Zeroing: the server says what it can. */

static bool
nbd_zero_known_unsupported (const struct member *m, uint64_t offset,
                            uint64_t len, bool may_trim, bool fast)
{
  const struct nbd *n = m->be;

  (void) offset;
  (void) len;
  (void) may_trim;
  return !n->can_zero || (fast && !n->can_fast_zero);
}

static bool
nbd_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                     bool may_trim)
{
  const struct nbd *n = m->be;

  (void) offset;
  (void) len;
  (void) may_trim;
  return n->can_zero && n->can_fast_zero;
}

static bool
nbd_can_fast_zero_adv (const struct member *m)
{
  return N (m)->can_fast_zero;
}

/* Health. */

static int
member_nbd_check (struct member *m, char *why, size_t len)
{
  struct nbd *n = N (m);

  for (unsigned i = 0; i < n->nr_conns; ++i) {
    struct conn *c = n->conns[i];
    if (atomic_load (&c->dead) || nbd_aio_is_dead (c->h)
        || nbd_aio_is_closed (c->h))
      return fail_why (why, len, ENOTCONN,
                       "device gone: connection %u to %s lost", i, m->path);
  }
  return 0;
}

/* The fresh pool's connections replace the old ones, which nobody can
 * pick once the write lock is dropped: they are closed.
 */
static void
member_nbd_adopt (struct member *m, struct member *fresh)
{
  struct nbd *n = N (m), *f = fresh->be;
  struct conn *old[MEMBER_CONNECTIONS_MAX];
  unsigned nr_old;

  pthread_rwlock_wrlock (&n->lock);
  pthread_mutex_lock (&n->start_lock);
  nr_old = n->nr_conns;
  memcpy (old, n->conns, sizeof old);
  for (unsigned i = 0; i < f->nr_conns; ++i) {
    n->conns[i] = f->conns[i];
    n->conns[i]->n = n;
  }
  n->nr_conns = f->nr_conns;
  n->size = f->size;
  n->can_trim = f->can_trim;
  n->can_zero = f->can_zero;
  n->can_fast_zero = f->can_fast_zero;
  n->can_flush = f->can_flush;
  n->can_fua = f->can_fua;
  n->can_extents = f->can_extents;
  n->max_payload = f->max_payload;
  atomic_store (&n->started, false);
  pthread_mutex_unlock (&n->start_lock);
  pthread_rwlock_unlock (&n->lock);
  f->nr_conns = 0;
  /* At once, so that a server that goes away while the member is idle is
   * noticed (the dispatcher sees the connection close).
   */
  member_nbd_start_dispatchers (m);
  for (unsigned i = 0; i < nr_old; ++i)
    member_nbd_conn_close (old[i]);
}

const struct member_ops member_nbd_ops = {
  .open = member_nbd_open,
  .close = nbd_close_member,
  .start = member_nbd_start_dispatchers,
  .current_size = nbd_current_size,
  .pread = member_nbd_pread,
  .pwrite = member_nbd_pwrite,
  .sync = member_nbd_sync,
  .discard = member_nbd_discard,
  .probe_fd = nbd_probe_fd,
  .async = true,
  .start_op = member_nbd_start_op,
  .cancel_op = member_nbd_cancel_op,
  .finish_op = member_nbd_finish_op,
  .zero_known_unsupported = nbd_zero_known_unsupported,
  .fast_zero_known = nbd_fast_zero_known,
  .can_fast_zero = nbd_can_fast_zero_adv,
  .check = member_nbd_check,
  .adopt = member_nbd_adopt,
};
