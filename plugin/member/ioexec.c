/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: concurrent member operations.  See include/ioexec.h. */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <liburing.h>

#include "ioexec.h"
#include "log.h"
#include "util.h"

/* Enough for every member of the largest volume at once; a request with
 * more entries than this has them fed to the ring as it drains.
 */
#define RING_ENTRIES 128

/* A thread keeps this much scratch (O_DIRECT bounce buffers) between
 * requests; a request that needs more gets its own, freed when it is
 * done, so that one 32M request does not pin 32M in every worker.
 */
#define ARENA_KEEP (2u * 1024 * 1024)

/* Rings in the whole process.  nbdkit runs -t threads (16) per connection:
 * with a ring in every one, 1,100 connections needed 17,600 rings, which
 * with the threads' stacks ran out of memory mappings (vm.max_map_count).
 * Threads beyond IOEXEC_MAX_RINGS use the plain system calls.
 */
static _Atomic unsigned nr_rings;

/* Everything a worker thread keeps between requests.  Created on first
 * use in that thread; freed by the key's destructor when it exits.
 */
struct thread_state {
  struct io_uring ring;
  bool ring_ok, ring_tried;
  char *arena; /* scratch, at most ARENA_KEEP */
  size_t arena_size;
};

/* What a ring entry completes. */
struct entry {
  struct member_op *op;
  ioexec_cqe_fn complete;
  void *arg;
  bool first; /* op's first entry: its submission is op's start */
};

#define INLINE_ENTRIES 64

struct ioexec {
  struct thread_state *t; /* looked up when first needed */
  bool nested;            /* within another ioexec_run: no thread state */
  struct io_uring *ring; /* for this request, or NULL */
  unsigned queued;       /* entries got, not yet submitted */
  unsigned in_ring;      /* entries submitted, not yet completed */
  unsigned stamped;      /* entries before this one have their start */
  struct entry inline_entries[INLINE_ENTRIES];
  struct entry *entries;
  unsigned nr_entries, cap_entries;
  /* Scratch: the thread's arena, then this request's own blocks. */
  size_t used, total;
  void *own[72];
  size_t own_size[72];
  unsigned nr_own;
  /* The clock at the start of the ops that are not in the ring, while
   * nothing has blocked since (asynchronous ones: on their way at once).
   * 0: read it for each.
   */
  uint64_t start_clock;
  /* Asynchronous completions (another thread). */
  bool async;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned pending_ops;
};

static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;
static THREAD_LOCAL struct thread_state *tls_state;
/* ioexec_run within ioexec_run (a backend's finish_op): the inner one
 * must not touch the outer one's ring or scratch.
 */
static THREAD_LOCAL unsigned depth;

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
 * operations to run at once, within IOEXEC_MAX_RINGS; or NULL.
 */
static struct io_uring *
thread_ring (struct thread_state *t)
{
  static _Atomic bool said;
  int e;

  if (t->ring_ok)
    return &t->ring;
  if (t->ring_tried)
    return NULL;
  t->ring_tried = true;
  if (atomic_fetch_add (&nr_rings, 1) >= IOEXEC_MAX_RINGS) {
    atomic_fetch_sub (&nr_rings, 1);
    if (!atomic_exchange (&said, true))
      stripe_debug ("io_uring: %d rings in use: more threads use the "
                    "portable I/O path",
                    IOEXEC_MAX_RINGS);
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

bool
ioexec_uring_available (void)
{
  struct io_uring ring;

  if (io_uring_queue_init (2, &ring, 0) < 0)
    return false;
  io_uring_queue_exit (&ring);
  return true;
}

void *
ioexec_scratch (struct ioexec *x, size_t len)
{
  struct thread_state *t;
  size_t need = round_up (len, 4096);
  void *p;

  if (x->t == NULL && !x->nested)
    x->t = thread_state ();
  t = x->t;
  x->total += need;
  if (t && x->used + need <= t->arena_size) {
    p = t->arena + x->used;
    x->used += need;
    return p;
  }
  /* Beyond the thread's arena: this request's own block, unmapped when
   * it is done (the arena grows for the next request, up to ARENA_KEEP).
   * mmap, not malloc: glibc keeps large freed blocks in the thread's
   * heap once it has raised its mmap threshold to their size.
   */
  if (x->nr_own == sizeof x->own / sizeof x->own[0]) {
    errno = ENOMEM;
    return NULL;
  }
  p = mmap (NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
            -1, 0);
  if (p == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  x->own[x->nr_own] = p;
  x->own_size[x->nr_own++] = need;
  return p;
}

/* After a request: free its own blocks; let the arena hold what it
 * needed next time, up to ARENA_KEEP.
 */
static void
scratch_end (struct ioexec *x)
{
  struct thread_state *t = x->t;

  for (unsigned i = 0; i < x->nr_own; ++i)
    munmap (x->own[i], x->own_size[i]);
  if (t && x->total > t->arena_size && x->total <= ARENA_KEEP) {
    void *p;
    if (posix_memalign (&p, 4096, x->total) == 0) {
      free (t->arena);
      t->arena = p;
      t->arena_size = x->total;
    }
  }
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

/* op has nothing more to wait for: its latency ends now, a clock read
 * of its own.  Health judges members by these figures, so the ops that
 * one reap of the ring finds done do not share one read (issue 34: two
 * members' latency sums came out equal to the nanosecond): each ends
 * once its own completion has run, a short transfer finished
 * synchronously included.  Ops found done together still end within
 * the few hundred ns their completions take to run (more, rarely, after
 * one that finished a short transfer): when each arrived, the ring does
 * not say.  The cost: one clock read (vDSO, 25 ns here) per op of a
 * request that has a ring, where one per reap did -- requests of two
 * members or more, whose ops move far more data than that
 * (bench/cost-per-request, 4 members: a 1M read 4566 -> 4746
 * instructions, a 256K read 3402 -> 3507).
 */
static inline void
op_finished (struct member_op *op)
{
  op->ns = now_ns () - op->ns;
  busy_clear (op);
}

static inline void
begin (struct ioexec *x, struct member_op *op)
{
  if (x->async) {
    pthread_mutex_lock (&x->lock);
    op->pending++;
    pthread_mutex_unlock (&x->lock);
  }
  else
    op->pending++;
}

void
ioexec_begin (struct ioexec *x, struct member_op *op)
{
  begin (x, op);
}

static inline void
done (struct ioexec *x, struct member_op *op, int err)
{
  if (x->async) {
    pthread_mutex_lock (&x->lock);
    if (err && op->err == 0)
      op->err = err;
    if (--op->pending == 0) {
      op_finished (op);
      if (--x->pending_ops == 0)
        pthread_cond_broadcast (&x->cond);
    }
    pthread_mutex_unlock (&x->lock);
    return;
  }
  if (err && op->err == 0)
    op->err = err;
  if (--op->pending == 0) {
    op_finished (op);
    x->pending_ops--;
  }
}

void
ioexec_done (struct ioexec *x, struct member_op *op, int err)
{
  done (x, op, err);
}

static struct entry *
new_entry (struct ioexec *x)
{
  if (x->nr_entries == x->cap_entries) {
    unsigned cap = x->cap_entries * 2;
    struct entry *e = x->entries == x->inline_entries
                        ? malloc (cap * sizeof *e)
                        : realloc (x->entries, cap * sizeof *e);
    if (e == NULL)
      return NULL;
    if (x->entries == x->inline_entries)
      memcpy (e, x->inline_entries, sizeof x->inline_entries);
    x->entries = e;
    x->cap_entries = cap;
  }
  return &x->entries[x->nr_entries++];
}

static void reap (struct ioexec *x);

/* The entries queued before entry end are about to be submitted: the ops
 * they start start now.  A ring op's start is its submission, not the
 * start of the request: it does not wait, on the member's account, for
 * the ops started before it to prepare (an O_DIRECT bounce copy) or to
 * run synchronously.  The ops of one submission share one clock read:
 * they are handed to the kernel by one system call.  (The kernel issues
 * them in order within it: an op that completes within the submission, a
 * page-cache hit, shows in the latency of those after it, by the few us
 * it took.)  Entries of an op queued after its first do not restart it.
 */
static void
stamp_starts (struct ioexec *x, unsigned end)
{
  uint64_t now = 0;

  for (unsigned i = x->stamped; i < end; ++i)
    if (x->entries[i].first) {
      if (now == 0)
        now = now_ns ();
      x->entries[i].op->ns = now;
    }
  if (end > x->stamped)
    x->stamped = end;
}

struct io_uring_sqe *
ioexec_sqe (struct ioexec *x, struct member_op *op, ioexec_cqe_fn complete,
            void *arg)
{
  struct io_uring_sqe *sqe;
  struct entry *e;
  size_t idx;

  if (x->ring == NULL)
    return NULL;
  e = new_entry (x);
  if (e == NULL)
    return NULL;
  e->first = false; /* not queued yet: no start to stamp */
  idx = e - x->entries;
  /* The ring's queue is full: hand it to the kernel, reap what is done. */
  while ((sqe = io_uring_get_sqe (x->ring)) == NULL) {
    int r;

    stamp_starts (x, idx);
    r = io_uring_submit (x->ring);
    if (r > 0) {
      x->in_ring += r;
      x->queued -= r;
    }
    reap (x);
  }
  e = &x->entries[idx]; /* reap may not grow entries, but be safe */
  e->op = op;
  e->complete = complete;
  e->arg = arg;
  e->first = !op->in_ring;
  op->in_ring = true;
  io_uring_sqe_set_data64 (sqe, idx);
  x->queued++;
  begin (x, op);
  return sqe;
}

bool
ioexec_has_ring (const struct ioexec *x)
{
  return x->ring != NULL;
}

/* Take completed entries off the ring (without waiting). */
static void
reap (struct ioexec *x)
{
  struct io_uring_cqe *cqe;
  unsigned head, seen = 0;

  io_uring_for_each_cqe (x->ring, head, cqe)
  {
    const struct entry *e = &x->entries[io_uring_cqe_get_data64 (cqe)];

    seen++;
    x->in_ring--;
    e->complete (x, e->op, cqe->res, e->arg);
  }
  io_uring_cq_advance (x->ring, seen);
}

/* Run the ring until every entry has come back. */
static void
drive_ring (struct ioexec *x)
{
  while (x->queued > 0 || x->in_ring > 0) {
    int r;

    if (x->queued > 0)
      stamp_starts (x, x->nr_entries);
    r = io_uring_submit_and_wait (x->ring, 1);
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      /* Entries in flight still point into the caller's buffer: we
       * cannot return before they complete, so this is fatal.
       */
      errno = -r;
      stripe_error ("io_uring_submit_and_wait: %m");
      abort ();
    }
    if (r > 0) {
      x->in_ring += r;
      x->queued -= r;
    }
    reap (x);
  }
}

/* Wait for asynchronous completions; cancel, once, what its member's
 * timeout has passed.
 */
static void
wait_async (struct ioexec *x, struct member_op *ops, unsigned nr)
{
  bool cancelled = false;

  pthread_mutex_lock (&x->lock);
  while (x->pending_ops > 0) {
    uint64_t deadline = 0;

    if (!cancelled)
      for (unsigned i = 0; i < nr; ++i)
        if (ops[i].pending && ops[i].deadline
            && (deadline == 0 || ops[i].deadline < deadline))
          deadline = ops[i].deadline;
    if (deadline == 0) {
      pthread_cond_wait (&x->cond, &x->lock);
      continue;
    }
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    if (pthread_cond_timedwait (&x->cond, &x->lock, &ts) != ETIMEDOUT)
      continue;
    /* Cancelling makes the callbacks run (with an error), which take the
     * lock: drop it meanwhile.
     */
    cancelled = true;
    uint64_t now = now_ns ();
    for (unsigned i = 0; i < nr; ++i) {
      struct member_op *op = &ops[i];
      if (op->pending && op->deadline && op->deadline <= now
          && op->m->ops->cancel_op) {
        if (op->err == 0)
          op->err = ETIMEDOUT;
        pthread_mutex_unlock (&x->lock);
        op->m->ops->cancel_op (op->m, op);
        pthread_mutex_lock (&x->lock);
      }
    }
  }
  pthread_mutex_unlock (&x->lock);
}

static inline void
start (struct ioexec *x, struct member_op *op)
{
  op->pending = 1; /* the start itself, until start_op returns */
  op->err = 0;
  op->x = x;
  op->in_ring = false;
  op->ns = x->start_clock ? x->start_clock : now_ns ();
  op->deadline = 0;
  busy_set (op);
  op->m->ops->start_op (op->m, x, op);
  /* Done already, so done here, perhaps blocking: later starts read the
   * clock afresh.
   */
  if (!op->m->ops->async && op->pending == 1)
    x->start_clock = 0;
  done (x, op, 0);
}

static int run_all (struct member_op *ops, unsigned nr, bool uring);

int
ioexec_run (struct member_op *ops, unsigned nr, bool uring)
{
  return ioexec_run_at (ops, nr, uring, 0);
}

int
ioexec_run_at (struct member_op *ops, unsigned nr, bool uring, uint64_t now)
{
  /* One read or write alone: at once, on this thread, if its member can. */
  if (nr == 1 && ops[0].m->ops->rw_now
      && (ops[0].kind == OP_READ || ops[0].kind == OP_WRITE)) {
    struct member_op *op = &ops[0];
    op->ns = now ? now : now_ns ();
    busy_set (op);
    if (op->m->ops->rw_now (op->m, op)) {
      op_finished (op);
      if (op->err) {
        errno = op->err;
        return -1;
      }
      return 0;
    }
    busy_clear (op);
  }
  return run_all (ops, nr, uring);
}

/* The general case, out of line: the frame it needs is not set up for
 * the one-op requests above.
 */
static int __attribute__ ((noinline))
run_all (struct member_op *ops, unsigned nr, bool uring)
{
  struct ioexec x;
  unsigned nr_ring = 0;

  x.t = NULL;
  x.ring = NULL;
  x.queued = x.in_ring = x.stamped = 0;
  x.entries = x.inline_entries;
  x.nr_entries = 0;
  x.cap_entries = INLINE_ENTRIES;
  x.used = x.total = 0;
  x.nr_own = 0;
  x.async = false;
  x.pending_ops = nr;
  for (unsigned i = 0; i < nr; ++i) {
    if (ops[i].m->ops->async)
      x.async = true;
    else if (ops[i].kind == OP_READ || ops[i].kind == OP_WRITE
             || ops[i].kind == OP_FLUSH || ops[i].kind == OP_ZERO)
      nr_ring++;
  }
  x.nested = depth > 0;
  /* One local operation gains nothing from a ring: the plain system call
   * is one syscall too, and cheaper.
   */
  if (nr_ring > 1 && uring && !x.nested) {
    x.t = thread_state ();
    if (x.t)
      x.ring = thread_ring (x.t);
  }
  x.start_clock = x.ring ? now_ns () : 0;
  depth++;
  if (x.async) {
    pthread_mutex_init (&x.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init (&ca);
    pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
    pthread_cond_init (&x.cond, &ca);
    pthread_condattr_destroy (&ca);
  }

  /* Asynchronous members first: on the wire while the others run. */
  if (x.async)
    for (unsigned i = 0; i < nr; ++i)
      if (ops[i].m->ops->async)
        start (&x, &ops[i]);
  for (unsigned i = 0; i < nr; ++i)
    if (!ops[i].m->ops->async)
      start (&x, &ops[i]);
  if (x.ring)
    drive_ring (&x);
  if (x.async) {
    wait_async (&x, ops, nr);
    pthread_mutex_destroy (&x.lock);
    pthread_cond_destroy (&x.cond);
  }
  for (unsigned i = 0; i < nr; ++i)
    if (ops[i].m->ops->finish_op)
      ops[i].m->ops->finish_op (ops[i].m, &ops[i]);
  depth--;

  if (x.entries != x.inline_entries)
    free (x.entries);
  scratch_end (&x);
  for (unsigned i = 0; i < nr; ++i)
    if (ops[i].err) {
      errno = ops[i].err;
      return -1;
    }
  return 0;
}
