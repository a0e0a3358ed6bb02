/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the requests on a local member (member_local_impl.h).
 *
 * Reads, writes and flushes go into the executor's io_uring when it has
 * one for the request (two or more local operations), else they are one
 * plain system call; with cache=direct an aligned read or write goes
 * through the O_DIRECT descriptor via an aligned bounce buffer (nbdkit's
 * request buffers are not aligned), an unaligned one through the buffered
 * descriptor, which Linux keeps coherent with direct I/O.
 */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include <liburing.h>

#include "log.h"
#include "member_local_impl.h"
#include "util.h"

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

/* A zero through the ring (local_zero_mode): an error as local_zero
 * reports it; a ring that cannot fallocate (EINVAL from a kernel before
 * 5.6) or a method refused after all: local_zero, which learns.
 */
static void
zero_complete (struct ioexec *x, struct member_op *op, int res, void *arg)
{
  (void) arg;
  if (res == -EINVAL || res == -EOPNOTSUPP) {
    res = local_zero (op->m, op->offset, op->length, op->may_trim, op->fast)
            == -1
            ? -errno
            : 0;
    ioexec_done (x, op, res < 0 ? -res : 0);
    return;
  }
  if (res < 0)
    member_io_error (op->m, "zero", op->offset, -res);
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

void
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
  case OP_ZERO: {
    /* In the ring when the method is known: the members of a large zero
     * (a grow's new room, mkfs) are zeroed at once, not one by one.
     */
    int mode = local_zero_mode (m, op->offset, op->length, op->may_trim,
                                op->fast);
    if (mode >= 0 && (sqe = ioexec_sqe (x, op, zero_complete, NULL)) != NULL) {
      io_uring_prep_fallocate (sqe, L (m)->fd, mode, op->offset, op->length);
      return;
    }
    if (local_zero (m, op->offset, op->length, op->may_trim, op->fast) == -1)
      ioexec_done (x, op, errno);
    return;
  }
  case OP_EXTENTS:
    if (local_extents (m, op->offset, op->length, op->max_runs, op->extents)
        == -1)
      ioexec_done (x, op, errno);
    return;
  }
}

/* The rest of local_rw_now: after a first call that returned n and did
 * not do it all (tried), or in place of it.  Out of line, so that the
 * usual request does not pay for its frame.
 */
static bool __attribute__ ((noinline))
rw_now_rest (struct member *m, struct member_op *op, bool tried, ssize_t n)
{
  struct local *l = L (m);
  bool write = op->kind == OP_WRITE;
  const struct iovec *iov = op->iov;
  uint64_t offset = op->offset;
  struct iovec rest;

  if (tried) {
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
  op->err = rw_full (m, l->fd, write, iov, op->nr_iov, offset, op->fua) == -1
              ? errno
              : 0;
  return true;
}

bool
local_rw_now (struct member *m, struct member_op *op)
{
  struct local *l = L (m);
  const struct iovec *iov = op->iov;
  ssize_t n;

  if (l->fd_direct >= 0)
    return false;
  /* One buffer, no FUA, the whole of it in one call: the usual request. */
  if (op->nr_iov != 1 || op->fua)
    return rw_now_rest (m, op, false, 0);
  n = op->kind == OP_WRITE
        ? pwrite (l->fd, iov->iov_base, iov->iov_len, op->offset)
        : pread (l->fd, iov->iov_base, iov->iov_len, op->offset);
  if (n != (ssize_t) iov->iov_len)
    return rw_now_rest (m, op, true, n);
  op->err = 0;
  return true;
}

/* A read through the bounce buffer: copy it out. */
void
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
