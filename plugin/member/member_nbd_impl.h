/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the NBD backend's insides, shared by its two files.  Not for
 * anyone else: include/member.h is the interface.
 *
 *   member_nbd.c       the member_ops: open (what the server can do),
 *                      synchronous calls, the probe copy, health, adopt
 *   member_nbd_pool.c  the pool: connections, their dispatcher threads,
 *                      and the asynchronous commands issued on them
 */
#ifndef NBDSTRIPE_MEMBER_NBD_IMPL_H
#define NBDSTRIPE_MEMBER_NBD_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "member.h"

/* The longest trim, zero or block status range in one command: NBD
 * lengths are 32 bits; kept block-aligned.
 */
#define MAX_RANGE (0x80000000u - 65536)

struct conn {
  struct nbd *n;
  struct nbd_handle *h;
  int wake; /* eventfd: a command was queued, or stop */
  pthread_t thread;
  bool thread_started;
  _Atomic bool stop;
  _Atomic bool dead;
};

struct nbd {
  const char *uri; /* the member's path (not owned) */
  bool raw;
  unsigned timeout; /* s, 0 = never (raw: MEMBER_CONNECT_TIMEOUT) */
  /* What the server says; replaced by adopt while I/O threads read them:
   * atomics.
   */
  _Atomic uint64_t size;
  uint32_t min_block, preferred_block;
  _Atomic uint32_t max_payload;
  _Atomic bool can_trim, can_zero, can_flush, can_fua, can_extents;
  /* Switched off the first time the server refuses a fast zero it
   * advertised.
   */
  _Atomic bool can_fast_zero;
  unsigned nr_conns;
  struct conn *conns[MEMBER_CONNECTIONS_MAX];
  _Atomic unsigned next;
  pthread_rwlock_t lock; /* read: issuing commands; write: adopt */
  pthread_mutex_t start_lock;
  _Atomic bool started; /* dispatchers running */
  int probe_fd;         /* probe_fd's snapshot, or -1 */
};

#define N(m) ((struct nbd *) (m)->be)

static inline unsigned
plain_timeout (const struct nbd *n)
{
  return n->timeout ? n->timeout : MEMBER_CONNECT_TIMEOUT;
}

/* Whether I/O goes through the pool (its dispatchers run), or on the
 * first connection driven by the caller (raw, or a fresh pool being
 * probed).
 */
static inline bool
pool_running (struct nbd *n)
{
  return !n->raw && atomic_load (&n->started);
}

/* A connection to m's server, its wake eventfd made, no thread yet; NULL
 * (errno, why) when the server cannot be reached.
 */
extern struct conn *member_nbd_conn_new (struct member *m, char *why,
                                         size_t len);

/* Fail what is in flight on c, stop its dispatcher, close it. */
extern void member_nbd_conn_close (struct conn *c);

/* Threads start after nbdkit forks: from member_start, or on first use.
 * 0, or -1 (said) when a thread cannot be started.
 */
extern int member_nbd_start_dispatchers (struct member *m);

/* One command through the running pool, waited for (ioexec_run): 0/-1
 * with errno.
 */
extern int member_nbd_pool_sync (struct member *m, enum op_kind kind,
                                 void *buf, size_t count, uint64_t offset);

/* The asynchronous member_ops (member.h). */
extern void member_nbd_start_op (struct member *m, struct ioexec *x,
                                 struct member_op *op);
extern void member_nbd_cancel_op (struct member *m, struct member_op *op);
extern void member_nbd_finish_op (struct member *m, struct member_op *op);

#endif /* NBDSTRIPE_MEMBER_NBD_IMPL_H */
