/* nbdstripe: running one request's member operations at the same time.
 *
 * The volume hands over one operation per touched member; ioexec_run puts
 * them all in flight at once on the calling thread's io_uring (one ring per
 * thread, created lazily in that thread, because threads do not survive
 * nbdkit's fork) and waits for every one.  Without io_uring (ENOSYS, EPERM
 * under seccomp, or switched off with ioexec_use_uring = false) it runs
 * them one after another with the portable calls: correct, not concurrent.
 *
 * Short transfers are continued; end of file on a member is EIO.  Errors
 * are logged naming the member, and each op records its own errno.
 *
 * Members opened for O_DIRECT (cache=direct) get aligned reads and writes
 * through a per-thread bounce buffer (nbdkit's request buffers are not
 * aligned); an unaligned request goes through the member's buffered
 * descriptor instead, which Linux keeps coherent with direct I/O.
 */
#ifndef NBDSTRIPE_IOEXEC_H
#define NBDSTRIPE_IOEXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "member.h"

enum op_kind { OP_READ, OP_WRITE, OP_FLUSH };

struct member_op {
  struct member *m;
  enum op_kind kind;
  uint64_t offset; /* member offset (read, write) */
  uint64_t length; /* bytes (read, write) */
  const struct iovec *iov;
  unsigned nr_iov;
  bool fua; /* write: durable before completion */
  /* Optional, shared by all ops of one run: bit m->index is set while
   * the op is in flight (health's view of who owes an answer).
   */
  _Atomic uint64_t *busy;
  int err;     /* out: 0 or errno */
  uint64_t ns; /* out: how long the op took */
  /* Private to ioexec: an aligned bounce buffer for O_DIRECT. */
  bool direct;
  struct iovec bounce;
  unsigned pending; /* sub-operations in flight */
  /* Private to remote.c (members that are NBD exports). */
  struct remote_batch *rbatch;
  unsigned rpending;
  void *rconn;
};

/* false forces the portable path (the -D stripe.io_uring=0 debug flag). */
extern bool ioexec_use_uring;

/* Whether this kernel lets us create a ring at all (for --dump-plugin). */
extern bool ioexec_uring_available (void);

/* Run all ops; return 0 if all succeeded, else -1 with errno set to the
 * error of the first failed op (in array order).
 */
extern int ioexec_run (struct member_op *ops, unsigned nr);

#endif /* NBDSTRIPE_IOEXEC_H */
