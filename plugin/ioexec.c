/* nbdstripe: concurrent member operations.  See include/ioexec.h. */

#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <liburing.h>

#include "ioexec.h"
#include "log.h"
#include "remote.h"

/* Enough for every member of the largest volume at once; requests with
 * more sub-operations than this are fed to the ring as it drains.
 */
#define RING_ENTRIES 128

/* A thread keeps an O_DIRECT bounce arena of at most this size between
 * requests; a larger request gets one of its own, freed when it is done,
 * so that one 32M request does not pin 32M in every worker for good.
 */
#define ARENA_KEEP (2u * 1024 * 1024)

bool ioexec_use_uring = true;

/* Everything a worker thread keeps between requests.  Created on first
 * use in that thread; freed by the key's destructor when it exits.
 */
/* Rings in the whole process at most.  nbdkit runs -t threads (16) per
 * connection: with a ring in every one, 1,100 connections needed 17,600
 * rings, which with the threads' own stacks ran out of memory mappings
 * (vm.max_map_count).  Threads beyond this use the portable path.
 */
#define MAX_RINGS 1024
static _Atomic unsigned nr_rings;

struct thread_state {
  struct io_uring ring;
  bool ring_ok;
  bool ring_tried;
  void *arena; /* bounce buffers for O_DIRECT, at most ARENA_KEEP */
  size_t arena_size;
  void *big; /* this request's own, when larger */
};

static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;
static __thread struct thread_state *tls_state;

static void
state_destroy (void *p)
{
  struct thread_state *t = p;

  if (t->ring_ok) {
    io_uring_queue_exit (&t->ring);
    atomic_fetch_sub (&nr_rings, 1);
  }
  free (t->arena);
  free (t);
}

static void
make_state_key (void)
{
  pthread_key_create (&state_key, state_destroy);
}

static struct thread_state *
thread_state (void)
{
  struct thread_state *t = tls_state;

  if (t)
    return t;
  pthread_once (&state_key_once, make_state_key);
  t = calloc (1, sizeof *t);
  if (t == NULL)
    return NULL;
  pthread_setspecific (state_key, t);
  tls_state = t;
  return t;
}

/* The thread's ring, created the first time a request has two local
 * operations to run at once, within MAX_RINGS; or NULL: the portable path.
 */
static struct io_uring *
thread_ring (struct thread_state *t)
{
  static _Atomic bool said;
  int e;

  if (t->ring_ok)
    return &t->ring;
  if (t->ring_tried || !ioexec_use_uring)
    return NULL;
  t->ring_tried = true;
  if (atomic_fetch_add (&nr_rings, 1) >= MAX_RINGS) {
    atomic_fetch_sub (&nr_rings, 1);
    if (!atomic_exchange (&said, true))
      stripe_debug ("io_uring: %d rings in use: more threads use the "
                    "portable I/O path",
                    MAX_RINGS);
    return NULL;
  }
  e = io_uring_queue_init (RING_ENTRIES, &t->ring, 0);
  if (e < 0) {
    atomic_fetch_sub (&nr_rings, 1);
    errno = -e;
    stripe_debug ("io_uring unavailable in this thread (%m): "
                  "using the portable I/O path");
    return NULL;
  }
  t->ring_ok = true;
  return &t->ring;
}

/* Give every O_DIRECT-eligible op a slice of the thread's aligned arena,
 * and fill it for writes.  Ops that are not aligned stay buffered.
 */
static int
setup_bounce (struct thread_state *t, struct member_op *ops, unsigned nr)
{
  size_t need = 0;

  for (unsigned i = 0; i < nr; ++i) {
    struct member_op *op = &ops[i];
    const struct member *m = op->m;

    op->direct = m->fd_direct >= 0 && op->kind != OP_FLUSH
                 && op->offset % m->direct_align == 0
                 && op->length % m->direct_align == 0;
    if (op->direct)
      need += (op->length + 4095) / 4096 * 4096;
  }
  if (need == 0)
    return 0;
  if (t == NULL) {
    errno = ENOMEM;
    return -1;
  }
  char *pos;
  if (need > ARENA_KEEP) {
    if (posix_memalign (&t->big, 4096, need) != 0) {
      t->big = NULL;
      errno = ENOMEM;
      return -1;
    }
    pos = t->big;
  }
  else {
    if (need > t->arena_size) {
      void *p;
      free (t->arena);
      t->arena = NULL;
      t->arena_size = 0;
      if (posix_memalign (&p, 4096, need) != 0) {
        errno = ENOMEM;
        return -1;
      }
      t->arena = p;
      t->arena_size = need;
    }
    pos = t->arena;
  }
  for (unsigned i = 0; i < nr; ++i) {
    struct member_op *op = &ops[i];
    if (!op->direct)
      continue;
    op->bounce = (struct iovec){ pos, op->length };
    pos += (op->length + 4095) / 4096 * 4096;
    if (op->kind == OP_WRITE) {
      char *p = op->bounce.iov_base;
      for (unsigned k = 0; k < op->nr_iov; ++k) {
        memcpy (p, op->iov[k].iov_base, op->iov[k].iov_len);
        p += op->iov[k].iov_len;
      }
    }
  }
  return 0;
}

static void
finish_bounce (struct member_op *ops, unsigned nr)
{
  for (unsigned i = 0; i < nr; ++i) {
    struct member_op *op = &ops[i];
    if (!op->direct || op->kind != OP_READ || op->err)
      continue;
    const char *p = op->bounce.iov_base;
    for (unsigned k = 0; k < op->nr_iov; ++k) {
      memcpy (op->iov[k].iov_base, p, op->iov[k].iov_len);
      p += op->iov[k].iov_len;
    }
  }
}

/* The iovec an op actually transfers. */
static inline const struct iovec *
op_iov (const struct member_op *op, unsigned *nr)
{
  if (op->direct) {
    *nr = 1;
    return &op->bounce;
  }
  *nr = op->nr_iov;
  return op->iov;
}

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
busy_set (struct member_op *op)
{
  if (op->busy)
    atomic_fetch_or_explicit (op->busy, UINT64_C (1) << (op->m->index & 63),
                              memory_order_relaxed);
}

static inline void
busy_clear (struct member_op *op)
{
  if (op->busy)
    atomic_fetch_and_explicit (
      op->busy, ~(UINT64_C (1) << (op->m->index & 63)), memory_order_relaxed);
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
  const struct iovec *iov;
  unsigned nr;
  int r = 0;
  uint64_t t0 = now_ns ();

  busy_set (op);
  switch (op->kind) {
  case OP_READ:
    iov = op_iov (op, &nr);
    r = member_preadv (op->m, op->direct, iov, nr, op->offset);
    break;
  case OP_WRITE:
    iov = op_iov (op, &nr);
    r = member_pwritev (op->m, op->direct, iov, nr, op->offset, op->fua);
    break;
  case OP_FLUSH: r = member_flush (op->m); break;
  }
  if (r == -1 && op->err == 0)
    op->err = errno;
  op->ns = now_ns () - t0;
  busy_clear (op);
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
  int fd = op->direct ? op->m->fd_direct : op->m->fd;

  switch (op->kind) {
  case OP_READ:
    io_uring_prep_readv (sqe, fd, s->iov, s->nr_iov, s->offset);
    break;
  case OP_WRITE:
    io_uring_prep_writev2 (sqe, fd, s->iov, s->nr_iov, s->offset,
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
  const char *what = op->kind == OP_READ    ? "pread"
                     : op->kind == OP_WRITE ? "pwrite"
                                            : "fdatasync";

  if (res < 0) {
    if (op->kind == OP_WRITE && op->fua
        && (res == -EOPNOTSUPP || res == -EINVAL))
      res = 0; /* retry below, portable FUA */
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
    r = member_preadv (op->m, op->direct, iov, nr, s->offset + res);
  else
    r = member_pwritev (op->m, op->direct, iov, nr, s->offset + res, op->fua);
  if (r == -1 && op->err == 0)
    op->err = errno;
  free (copy);
}

static int
run_uring (struct io_uring *ring, struct member_op *ops, unsigned nr)
{
  struct subop inline_subs[64], *subs = inline_subs;
  unsigned nsub = 0, next = 0, inflight = 0;
  uint64_t t0;

  for (unsigned i = 0; i < nr; ++i) {
    unsigned n;
    if (ops[i].m->remote)
      continue;
    op_iov (&ops[i], &n);
    nsub += ops[i].kind == OP_FLUSH ? 1 : (n + IOV_MAX - 1) / IOV_MAX;
  }
  if (nsub > sizeof inline_subs / sizeof inline_subs[0]) {
    subs = malloc (nsub * sizeof *subs);
    if (subs == NULL)
      return -1;
  }
  nsub = 0;
  for (unsigned i = 0; i < nr; ++i) {
    struct member_op *op = &ops[i];
    uint64_t offset = op->offset;
    unsigned n;
    const struct iovec *iov;

    if (op->m->remote)
      continue;
    iov = op_iov (op, &n);

    op->pending = 0;
    if (op->kind == OP_FLUSH) {
      subs[nsub++] = (struct subop){ .op = op };
      op->pending = 1;
      continue;
    }
    for (unsigned j = 0; j < n; j += IOV_MAX) {
      struct subop *s = &subs[nsub++];
      s->op = op;
      s->iov = &iov[j];
      s->nr_iov = n - j < IOV_MAX ? n - j : IOV_MAX;
      s->offset = offset;
      s->length = 0;
      for (unsigned k = 0; k < s->nr_iov; ++k)
        s->length += s->iov[k].iov_len;
      offset += s->length;
      op->pending++;
    }
  }

  t0 = now_ns ();
  for (unsigned i = 0; i < nr; ++i)
    if (!ops[i].m->remote) {
      ops[i].ns = 0;
      busy_set (&ops[i]);
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
    io_uring_for_each_cqe (ring, head, cqe)
    {
      struct subop *s = io_uring_cqe_get_data (cqe);
      complete_subop (s, cqe->res);
      if (--s->op->pending == 0) {
        s->op->ns = now_ns () - t0;
        busy_clear (s->op);
      }
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
  struct thread_state *t = nr > 0 ? thread_state () : NULL;
  struct remote_batch rb;
  unsigned nr_local = 0, nr_remote = 0;
  struct io_uring *ring;

  for (unsigned i = 0; i < nr; ++i) {
    ops[i].err = 0;
    if (ops[i].m->remote)
      nr_remote++;
    else
      nr_local++;
  }
  /* Remote members first: their commands are on the wire while the local
   * ones run.
   */
  if (nr_remote) {
    remote_batch_init (&rb);
    for (unsigned i = 0; i < nr; ++i)
      if (ops[i].m->remote)
        remote_submit (&rb, ops[i].m->remote, &ops[i]);
  }
  /* One local operation gains nothing from a ring: the plain system call
   * is one syscall too, and cheaper.
   */
  ring = nr_local > 1 && t ? thread_ring (t) : NULL;
  if (setup_bounce (t, ops, nr) == -1) {
    stripe_error ("cannot allocate an O_DIRECT bounce buffer: %m");
    for (unsigned i = 0; i < nr; ++i)
      if (!ops[i].m->remote)
        ops[i].err = ENOMEM;
    nr_local = 0;
  }
  if (nr_local && (ring == NULL || run_uring (ring, ops, nr) == -1)) {
    for (unsigned i = 0; i < nr; ++i)
      if (!ops[i].m->remote)
        run_portable (&ops[i]);
  }
  finish_bounce (ops, nr);
  if (t && t->big) {
    free (t->big);
    t->big = NULL;
  }

  if (nr_remote) {
    remote_batch_wait (&rb);
    /* FUA where the server has none: the write, then a flush there. */
    for (unsigned i = 0; i < nr; ++i) {
      struct member_op *op = &ops[i];
      if (op->m->remote && op->kind == OP_WRITE && op->fua && op->err == 0
          && !remote_can_fua (op->m->remote)
          && remote_flush (op->m->remote) == -1)
        op->err = errno;
    }
    for (unsigned i = 0; i < nr; ++i)
      if (ops[i].m->remote && ops[i].err)
        member_io_error (ops[i].m,
                         ops[i].kind == OP_READ    ? "read"
                         : ops[i].kind == OP_WRITE ? "write"
                                                   : "flush",
                         ops[i].offset, ops[i].err);
  }

  for (unsigned i = 0; i < nr; ++i)
    if (ops[i].err) {
      errno = ops[i].err;
      return -1;
    }
  return 0;
}
