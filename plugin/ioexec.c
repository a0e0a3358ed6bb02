/* nbdstripe: concurrent member operations.  See include/ioexec.h. */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

#include "ioexec.h"
#include "log.h"

/* Enough for every member of the largest volume at once; requests with
 * more sub-operations than this are fed to the ring as it drains.
 */
#define RING_ENTRIES 128

bool ioexec_use_uring = true;

struct thread_ring {
  struct io_uring ring;
};

static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;
static __thread struct thread_ring *tls_ring;
static __thread bool tls_ring_failed;

static void
ring_destroy (void *p)
{
  struct thread_ring *r = p;

  io_uring_queue_exit (&r->ring);
  free (r);
}

static void
make_ring_key (void)
{
  pthread_key_create (&ring_key, ring_destroy);
}

/* The calling thread's ring, created on first use; NULL means use the
 * portable path.  Rings are torn down by the key destructor when the
 * thread exits.
 */
static struct io_uring *
thread_ring (void)
{
  struct thread_ring *r;
  int e;

  if (!ioexec_use_uring || tls_ring_failed)
    return NULL;
  if (tls_ring)
    return &tls_ring->ring;

  pthread_once (&ring_key_once, make_ring_key);
  r = malloc (sizeof *r);
  if (r == NULL) {
    tls_ring_failed = true;
    return NULL;
  }
  e = io_uring_queue_init (RING_ENTRIES, &r->ring, 0);
  if (e < 0) {
    errno = -e;
    stripe_debug ("io_uring unavailable in this thread (%m): "
                  "using the portable I/O path");
    free (r);
    tls_ring_failed = true;
    return NULL;
  }
  pthread_setspecific (ring_key, r);
  tls_ring = r;
  return &r->ring;
}

bool
ioexec_uring_available (void)
{
  struct io_uring ring;

  if (io_uring_queue_init (2, &ring, 0) < 0)
    return false;
  io_uring_queue_exit (&ring);
  return true;
}

static void
run_portable (struct member_op *op)
{
  int r = 0;

  switch (op->kind) {
  case OP_READ:
    r = member_preadv (op->m, op->iov, op->nr_iov, op->offset);
    break;
  case OP_WRITE:
    r = member_pwritev (op->m, op->iov, op->nr_iov, op->offset, op->fua);
    break;
  case OP_FLUSH:
    r = member_flush (op->m);
    break;
  }
  if (r == -1 && op->err == 0)
    op->err = errno;
}

/* A piece of one op that fits in one SQE: at most IOV_MAX iovecs. */
struct subop {
  struct member_op *op;
  const struct iovec *iov;
  unsigned nr_iov;
  uint64_t offset;
  uint64_t length;
};

static void
prep_subop (struct io_uring_sqe *sqe, struct subop *s)
{
  struct member_op *op = s->op;

  switch (op->kind) {
  case OP_READ:
    io_uring_prep_readv (sqe, op->m->fd, s->iov, s->nr_iov, s->offset);
    break;
  case OP_WRITE:
    io_uring_prep_writev2 (sqe, op->m->fd, s->iov, s->nr_iov, s->offset,
                           op->fua ? RWF_DSYNC : 0);
    break;
  case OP_FLUSH:
    io_uring_prep_fsync (sqe, op->m->fd, IORING_FSYNC_DATASYNC);
    break;
  }
  io_uring_sqe_set_data (sqe, s);
}

/* Finish a sub-op that the ring transferred only partly (or refused with
 * an error that the portable call handles, e.g. RWF_DSYNC unsupported):
 * the rest goes through the synchronous path, which continues short
 * transfers itself.
 */
static void
complete_subop (struct subop *s, int res)
{
  struct member_op *op = s->op;
  const char *what = op->kind == OP_READ ? "pread"
    : op->kind == OP_WRITE ? "pwrite" : "fdatasync";

  if (res < 0) {
    if (op->kind == OP_WRITE && op->fua && (res == -EOPNOTSUPP || res == -EINVAL))
      res = 0;                  /* retry below, portable FUA */
    else {
      member_io_error (op->m, what, s->offset, -res);
      if (op->err == 0)
        op->err = -res;
      return;
    }
  }
  if (op->kind == OP_FLUSH || (uint64_t) res == s->length)
    return;
  if (op->kind == OP_READ && res == 0) {
    member_io_error (op->m, "pread (unexpected end of file)", s->offset, EIO);
    if (op->err == 0)
      op->err = EIO;
    return;
  }

  struct iovec *copy = malloc (s->nr_iov * sizeof *copy);
  struct iovec *iov = copy;
  unsigned nr = s->nr_iov;
  size_t skip = res;
  int r;

  if (copy == NULL) {
    member_io_error (op->m, what, s->offset, ENOMEM);
    if (op->err == 0)
      op->err = ENOMEM;
    return;
  }
  memcpy (copy, s->iov, nr * sizeof *copy);
  while (skip > 0) {
    if (skip >= iov->iov_len) {
      skip -= iov->iov_len;
      iov++;
      nr--;
    }
    else {
      iov->iov_base = (char *) iov->iov_base + skip;
      iov->iov_len -= skip;
      skip = 0;
    }
  }
  if (op->kind == OP_READ)
    r = member_preadv (op->m, iov, nr, s->offset + res);
  else
    r = member_pwritev (op->m, iov, nr, s->offset + res, op->fua);
  if (r == -1 && op->err == 0)
    op->err = errno;
  free (copy);
}

static int
run_uring (struct io_uring *ring, struct member_op *ops, unsigned nr)
{
  struct subop inline_subs[64], *subs = inline_subs;
  unsigned nsub = 0, next = 0, inflight = 0;

  for (unsigned i = 0; i < nr; ++i)
    nsub += ops[i].kind == OP_FLUSH ? 1
      : (ops[i].nr_iov + IOV_MAX - 1) / IOV_MAX;
  if (nsub > sizeof inline_subs / sizeof inline_subs[0]) {
    subs = malloc (nsub * sizeof *subs);
    if (subs == NULL)
      return -1;
  }
  nsub = 0;
  for (unsigned i = 0; i < nr; ++i) {
    struct member_op *op = &ops[i];
    uint64_t offset = op->offset;

    if (op->kind == OP_FLUSH) {
      subs[nsub++] = (struct subop) { .op = op };
      continue;
    }
    for (unsigned j = 0; j < op->nr_iov; j += IOV_MAX) {
      struct subop *s = &subs[nsub++];
      s->op = op;
      s->iov = &op->iov[j];
      s->nr_iov = op->nr_iov - j < IOV_MAX ? op->nr_iov - j : IOV_MAX;
      s->offset = offset;
      s->length = 0;
      for (unsigned k = 0; k < s->nr_iov; ++k)
        s->length += s->iov[k].iov_len;
      offset += s->length;
    }
  }

  while (next < nsub || inflight > 0) {
    struct io_uring_sqe *sqe;
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int r;

    while (next < nsub && (sqe = io_uring_get_sqe (ring)) != NULL) {
      prep_subop (sqe, &subs[next++]);
      inflight++;
    }
    r = io_uring_submit_and_wait (ring, 1);
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      /* Requests already in flight still point into the caller's buffer:
       * we cannot return before they complete, so this is fatal.
       */
      errno = -r;
      stripe_error ("io_uring_submit_and_wait: %m");
      abort ();
    }
    io_uring_for_each_cqe (ring, head, cqe) {
      complete_subop (io_uring_cqe_get_data (cqe), cqe->res);
      seen++;
    }
    io_uring_cq_advance (ring, seen);
    inflight -= seen;
  }

  if (subs != inline_subs)
    free (subs);
  return 0;
}

int
ioexec_run (struct member_op *ops, unsigned nr)
{
  /* One operation gains nothing from a ring: the plain system call is one
   * syscall too, and cheaper.
   */
  struct io_uring *ring = nr > 1 ? thread_ring () : NULL;

  for (unsigned i = 0; i < nr; ++i)
    ops[i].err = 0;

  if (ring == NULL || run_uring (ring, ops, nr) == -1) {
    for (unsigned i = 0; i < nr; ++i)
      run_portable (&ops[i]);
  }

  for (unsigned i = 0; i < nr; ++i)
    if (ops[i].err) {
      errno = ops[i].err;
      return -1;
    }
  return 0;
}
