/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: running one request's member operations at the same time.
 *
 * The volume hands over one operation per touched member -- read, write,
 * flush, trim, zero or block status -- and ioexec_run puts them all in
 * flight at once and waits for every one.  It knows members only through
 * their interface (member.h): each backend starts its own operations.
 * Backends that are asynchronous (NBD) are started first, so that their
 * commands are on the wire while the local ones run; local reads, writes
 * and flushes of two or more members go into the calling thread's
 * io_uring (one ring per worker thread, created on first need, because
 * threads do not survive nbdkit's fork; at most IOEXEC_MAX_RINGS in the
 * process); a single local operation is one plain system call.
 *
 * An asynchronous operation unanswered within its member's timeout is
 * cancelled by its backend (NBD: the connection is closed, failing what
 * is in flight on it): nothing waits on a dead or hung server longer.  A
 * local operation cannot be cut short.
 *
 * Each op records its own errno and latency; ioexec_run returns 0 if all
 * succeeded, else -1 with errno of the first failed op (in array order).
 * An op's latency runs from its own start (an op in the ring: its
 * submission to the kernel) to its own completion, a clock read each:
 * two members' ops of one request are timed apart, whatever they share.
 */
#ifndef NBDSTRIPE_IOEXEC_H
#define NBDSTRIPE_IOEXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "member.h"
#include "op.h"

#define IOEXEC_MAX_RINGS 1024

struct member_op {
  struct member *m;
  enum op_kind kind;
  uint64_t offset; /* member offset */
  uint64_t length; /* bytes (read, write: = the iovec's total) */
  const struct iovec *iov; /* read, write */
  unsigned nr_iov;
  bool fua;      /* write: durable before completion */
  bool shadow;   /* not the member's own I/O: no health record (a replace's
                  * copy on the new device, its copier) */
  bool may_trim; /* zero: may deallocate */
  bool fast;     /* zero: only methods that never write data */
  unsigned max_runs;            /* extents: at most this many runs (>= 1) */
  struct extent_list *extents;  /* extents: runs appended here */
  /* Optional, shared by all ops of one run: bit m->index is set while
   * the op is in flight (health's view of who owes an answer).
   */
  _Atomic uint64_t *busy;
  int err;     /* out: 0 or errno */
  uint64_t ns; /* out: how long the op took */

  /* The executor's (the caller need not initialise what follows). */
  struct ioexec *x;
  unsigned pending; /* completions still owed (under x's lock if async) */
  bool in_ring;     /* an entry of it was queued in the ring */
  uint64_t deadline;
  /* The backend's scratch. */
  union {
    struct {
      bool direct;         /* through the O_DIRECT descriptor */
      struct iovec bounce; /* its aligned copy of the data */
      struct ioexec_piece {
        const struct iovec *iov;
        unsigned nr_iov;
        uint64_t offset, length;
      } piece;                      /* one ring entry, the usual case */
      struct ioexec_piece *pieces;  /* more than IOV_MAX iovecs */
    } local;
    struct {
      void *conn;   /* the connection carrying it */
      void *bounce; /* one command for scattered pieces */
    } nbd;
  } be;
};

/* Whether this kernel lets us create a ring at all (for --dump-plugin). */
extern bool ioexec_uring_available (void);

/* uring false: no ring, the portable path (-D stripe.io_uring=0). */
extern int ioexec_run (struct member_op *ops, unsigned nr, bool uring);
/* The same, with now_ns () read by the caller just before (0: not read):
 * one clock read for the caller's needs and the start of a lone read or
 * write.
 */
extern int ioexec_run_at (struct member_op *ops, unsigned nr, bool uring,
                          uint64_t now);

/* For backends.
 *
 * ioexec_begin: op owes one more completion (an asynchronous command was
 * issued for it).  ioexec_done: one completion of op arrived, err 0 or an
 * errno (the first error sticks); any thread.
 */
extern void ioexec_begin (struct ioexec *x, struct member_op *op);
extern void ioexec_done (struct ioexec *x, struct member_op *op, int err);

/* A submission queue entry of the calling thread's ring for op, or NULL
 * (no ring: do it synchronously).  complete runs on the calling thread
 * with the entry's result (res < 0: -errno) and must end with
 * ioexec_done (or queue another entry).  The entry counts as one
 * completion owed.
 */
struct io_uring_sqe;
typedef void (*ioexec_cqe_fn) (struct ioexec *x, struct member_op *op,
                               int res, void *arg);
extern struct io_uring_sqe *ioexec_sqe (struct ioexec *x, struct member_op *op,
                                        ioexec_cqe_fn complete, void *arg);

/* Whether the request has a ring (else: do operations synchronously). */
extern bool ioexec_has_ring (const struct ioexec *x);

/* Aligned (4096) scratch memory for this request's op (an O_DIRECT
 * bounce buffer), valid until the request is done; NULL with errno
 * ENOMEM.
 */
extern void *ioexec_scratch (struct ioexec *x, size_t len);

#endif /* NBDSTRIPE_IOEXEC_H */
