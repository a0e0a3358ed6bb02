/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the NBD backend's pool of connections (member_nbd_impl.h).
 *
 * Opened for I/O, a member keeps several connections when the server
 * advertises multi-conn (up to the connections parameter), else one.
 * Each connection has a dispatcher thread, started after nbdkit forks
 * (member_start) or on first use, which drives libnbd's state machine;
 * worker threads issue asynchronous commands on any connection,
 * round-robin, and the executor waits for their completions.  A command
 * unanswered within the member's timeout is cancelled by closing its
 * connection, which fails everything in flight on it at once.
 *
 * A member's pieces of one request are contiguous on it: they go as ONE
 * command (through a bounce buffer when the client's buffer has them
 * apart), split only at the server's largest payload.
 */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <libnbd.h>

#include "ioexec.h"
#include "log.h"
#include "member.h"
#include "member_nbd_impl.h"
#include "nbd_plain.h"
#include "util.h"

_Static_assert (LIBNBD_STATE_HOLE == MEMBER_EXTENT_HOLE
                  && LIBNBD_STATE_ZERO == MEMBER_EXTENT_ZERO,
                "block status bits are NBD's");

/* nbd_plain's reasons begin with the URI; ours never repeat the name. */
static void
drop_name (char *why, const char *name)
{
  size_t n = strlen (name);

  if (why && strncmp (why, name, n) == 0 && strncmp (why + n, ": ", 2) == 0)
    memmove (why, why + n + 2, strlen (why + n + 2) + 1);
}
/* Connections. */

void
member_nbd_conn_close (struct conn *c)
{
  if (c == NULL)
    return;
  if (c->thread_started) {
    /* Fail whatever is in flight (its completions run in the
     * dispatcher, which then sees the connection dead and exits).
     */
    atomic_store (&c->stop, true);
    int fd = nbd_aio_get_fd (c->h);
    if (fd >= 0)
      shutdown (fd, SHUT_RDWR);
    uint64_t one = 1;
    if (write (c->wake, &one, sizeof one) == -1) {
      /* the dispatcher also wakes on the socket */
    }
    pthread_join (c->thread, NULL);
  }
  if (c->h) {
    /* A polite goodbye if the connection is idle; never waits. */
    if (!c->thread_started && nbd_aio_is_ready (c->h))
      nbd_aio_disconnect (c->h, 0);
    nbd_close (c->h);
  }
  if (c->wake >= 0)
    close (c->wake);
  free (c);
}

struct conn *
member_nbd_conn_new (struct member *m, char *why, size_t len)
{
  struct nbd *n = N (m);
  struct conn *c = calloc (1, sizeof *c);

  if (c == NULL) {
    fail_why (why, len, ENOMEM, "out of memory");
    return NULL;
  }
  c->n = n;
  c->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->wake == -1) {
    fail_why (why, len, errno, "eventfd: %s", strerror (errno));
    free (c);
    return NULL;
  }
  c->h = member_nbd_plain_connect (m->path,
                                   n->raw ? plain_timeout (n) : n->timeout,
                                   !n->raw, why, len);
  if (c->h == NULL) {
    int err = errno ? errno : ECONNREFUSED;
    drop_name (why, m->path);
    close (c->wake);
    free (c);
    errno = err;
    return NULL;
  }
  return c;
}

/* The dispatcher: drives one connection's state machine; completions run
 * here (or in the thread that issued, when the reply is already there).
 */
static void *
dispatcher (void *arg)
{
  struct conn *c = arg;
  struct nbd_handle *h = c->h;
  int fd = nbd_aio_get_fd (h);

  while (!atomic_load (&c->stop) || nbd_aio_in_flight (h) > 0) {
    if (nbd_aio_is_dead (h) || nbd_aio_is_closed (h))
      break;
    unsigned dir = nbd_aio_get_direction (h);
    struct pollfd p[2] = { { .fd = fd }, { .fd = c->wake, .events = POLLIN } };
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      p[0].events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      p[0].events |= POLLOUT;
    if (poll (p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      stripe_error ("%s: poll: %m", c->n->uri);
      break;
    }
    if (p[1].revents & POLLIN) {
      uint64_t v;
      if (read (c->wake, &v, sizeof v) == -1) {
        /* EAGAIN: someone else drained it */
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
      nbd_aio_notify_read (h);
    else if (p[0].revents & POLLOUT)
      nbd_aio_notify_write (h);
  }
  if (nbd_aio_is_dead (h) || nbd_aio_is_closed (h)) {
    if (!atomic_exchange (&c->dead, true) && !atomic_load (&c->stop))
      stripe_error ("%s: connection lost: %s", c->n->uri,
                    nbd_get_error () ? nbd_get_error () : "closed");
  }
  return NULL;
}

int
member_nbd_start_dispatchers (struct member *m)
{
  struct nbd *n = N (m);
  int e = 0;

  if (n->raw || atomic_load_explicit (&n->started, memory_order_acquire))
    return 0;
  pthread_mutex_lock (&n->start_lock);
  if (!n->started) {
    for (unsigned i = 0; i < n->nr_conns; ++i) {
      struct conn *c = n->conns[i];
      if (c->thread_started)
        continue;
      e = pthread_create (&c->thread, NULL, dispatcher, c);
      if (e)
        break;
      c->thread_started = true;
    }
    if (e == 0)
      atomic_store_explicit (&n->started, true, memory_order_release);
  }
  pthread_mutex_unlock (&n->start_lock);
  if (e) {
    errno = e;
    stripe_error ("member %u (%s): cannot start a dispatcher thread: %m",
                  m->index, m->path);
    return -1;
  }
  return 0;
}

/* A live connection, round-robin; NULL when all are dead. */
static struct conn *
pick_conn (struct nbd *n)
{
  unsigned start =
    atomic_fetch_add_explicit (&n->next, 1, memory_order_relaxed);
  for (unsigned k = 0; k < n->nr_conns; ++k) {
    struct conn *c = n->conns[(start + k) % n->nr_conns];
    if (!atomic_load_explicit (&c->dead, memory_order_relaxed))
      return c;
  }
  return NULL;
}

/* Commands. */

static int
command_cb (void *user_data, int *error)
{
  struct member_op *op = user_data;
  ioexec_done (op->x, op, *error);
  return 1;
}

static int
extent_cb (void *user_data, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct member_op *op = user_data;
  uint64_t pos = offset, end = op->offset + op->length;

  (void) error;
  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries && pos < end; i += 2) {
    uint64_t n = entries[i];
    if (op->extents->nr >= op->max_runs)
      break;
    if (n > end - pos)
      n = end - pos;
    if (n == 0)
      break;
    extent_list_add (op->extents, n,
                     entries[i + 1] & (LIBNBD_STATE_HOLE | LIBNBD_STATE_ZERO));
    pos += n;
  }
  return 0;
}

/* Issue one command of op on c (the read lock held).  The executor counts
 * it before it is issued: its completion may run before this returns.
 */
static void
issue (struct conn *c, struct member_op *op, enum op_kind kind, void *buf,
       uint64_t count, uint64_t offset, uint32_t flags)
{
  nbd_completion_callback cb = { .callback = command_cb, .user_data = op };
  int64_t cookie = -1;

  ioexec_begin (op->x, op);
  switch (kind) {
  case OP_READ: cookie = nbd_aio_pread (c->h, buf, count, offset, cb, flags);
    break;
  case OP_WRITE:
    cookie = nbd_aio_pwrite (c->h, buf, count, offset, cb, flags);
    break;
  case OP_FLUSH: cookie = nbd_aio_flush (c->h, cb, flags); break;
  case OP_TRIM: cookie = nbd_aio_trim (c->h, count, offset, cb, flags); break;
  case OP_ZERO: cookie = nbd_aio_zero (c->h, count, offset, cb, flags); break;
  case OP_EXTENTS:
    cookie = nbd_aio_block_status (
      c->h, count, offset,
      (nbd_extent_callback){ .callback = extent_cb, .user_data = op }, cb,
      flags);
    break;
  }
  if (cookie == -1) {
    /* Not issued: the callback will not run. */
    int e = nbd_get_errno ();
    if (nbd_aio_is_dead (c->h) || nbd_aio_is_closed (c->h) || e == 0)
      e = ENOTCONN;
    ioexec_done (op->x, op, e);
    return;
  }
  /* libnbd sent what the socket took.  If some of the request is still to
   * be sent, the dispatcher (polling for replies only) must also poll for
   * writing.
   */
  if (nbd_aio_get_direction (c->h) & LIBNBD_AIO_DIRECTION_WRITE) {
    uint64_t one = 1;
    if (write (c->wake, &one, sizeof one) == -1) {
      /* the counter is full: the dispatcher is awake anyway */
    }
  }
}

/* count bytes from offset, in commands of at most max bytes. */
static void
issue_split (struct conn *c, struct member_op *op, enum op_kind kind,
             char *buf, uint64_t count, uint64_t offset, uint64_t max,
             uint32_t flags)
{
  while (count > 0) {
    uint64_t k = count < max ? count : max;
    issue (c, op, kind, buf, k, offset, flags);
    if (buf)
      buf += k;
    offset += k;
    count -= k;
  }
}

void
member_nbd_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  struct nbd *n = N (m);
  struct conn *c;
  uint32_t flags = 0;
  char *buf = NULL;

  op->be.nbd.conn = NULL;
  op->be.nbd.bounce = NULL;
  switch (op->kind) {
  case OP_FLUSH:
    if (!n->can_flush)
      return; /* no volatile cache: nothing to flush */
    break;
  case OP_TRIM:
    if (!n->can_trim || m->readonly)
      return; /* advisory */
    break;
  case OP_ZERO:
    if (!n->can_zero || (op->fast && !n->can_fast_zero)) {
      ioexec_done (x, op, EOPNOTSUPP);
      return;
    }
    flags = (op->may_trim ? 0 : LIBNBD_CMD_FLAG_NO_HOLE)
            | (op->fast ? LIBNBD_CMD_FLAG_FAST_ZERO : 0);
    break;
  case OP_EXTENTS:
    if (!n->can_extents) {
      if (extent_list_add (op->extents, op->length, 0) == -1)
        ioexec_done (x, op, ENOMEM);
      return;
    }
    /* One extent per command: nbdkit 1.32's split plugin crashes on a
     * block status without REQ_ONE that stops short of the end.
     */
    flags = LIBNBD_CMD_FLAG_REQ_ONE;
    break;
  case OP_READ:
  case OP_WRITE:
    /* The member's pieces are contiguous on it: one command, through a
     * bounce buffer when they lie apart in the client's buffer.
     */
    if (op->nr_iov == 1)
      buf = op->iov[0].iov_base;
    else {
      buf = op->be.nbd.bounce = malloc (op->length);
      if (buf == NULL) {
        ioexec_done (x, op, ENOMEM);
        return;
      }
      if (op->kind == OP_WRITE)
        iov_gather (buf, op->iov, op->nr_iov);
    }
    if (op->kind == OP_WRITE && op->fua && n->can_fua)
      flags = LIBNBD_CMD_FLAG_FUA;
    break;
  }

  if (n->raw || member_nbd_start_dispatchers (m) == -1) {
    ioexec_done (x, op, EIO);
    return;
  }
  pthread_rwlock_rdlock (&n->lock);
  c = pick_conn (n);
  if (c == NULL) {
    pthread_rwlock_unlock (&n->lock);
    ioexec_done (x, op, ENOTCONN);
    return;
  }
  op->be.nbd.conn = c;
  if (n->timeout)
    op->deadline = now_ns () + (uint64_t) n->timeout * 1000000000;
  switch (op->kind) {
  case OP_READ:
  case OP_WRITE:
    issue_split (c, op, op->kind, buf, op->length, op->offset, n->max_payload,
                 flags);
    break;
  case OP_FLUSH: issue (c, op, OP_FLUSH, NULL, 0, 0, 0); break;
  case OP_TRIM:
  case OP_ZERO:
    issue_split (c, op, op->kind, NULL, op->length, op->offset, MAX_RANGE,
                 flags);
    break;
  case OP_EXTENTS:
    issue (c, op, OP_EXTENTS, NULL,
           op->length < MAX_RANGE ? op->length : MAX_RANGE, op->offset, flags);
    break;
  }
  pthread_rwlock_unlock (&n->lock);
}

/* Unanswered past the timeout: close the connection, which fails
 * everything in flight on it (their callbacks run, with an error), so
 * that the worker gets its buffers back.
 */
void
member_nbd_cancel_op (struct member *m, struct member_op *op)
{
  struct conn *c = op->be.nbd.conn;

  if (c == NULL || atomic_exchange (&c->dead, true))
    return;
  stripe_error ("member %u (%s): no answer within %u s: closing the "
                "connection",
                m->index, m->path, N (m)->timeout);
  int fd = nbd_aio_get_fd (c->h);
  if (fd >= 0)
    shutdown (fd, SHUT_RDWR);
  uint64_t one = 1;
  if (write (c->wake, &one, sizeof one) == -1) {
  }
}

static int sync_flush (struct member *m);

void
member_nbd_finish_op (struct member *m, struct member_op *op)
{
  struct nbd *n = N (m);

  if (op->be.nbd.bounce) {
    if (op->kind == OP_READ && op->err == 0)
      iov_scatter (op->iov, op->nr_iov, op->be.nbd.bounce);
    free (op->be.nbd.bounce);
    op->be.nbd.bounce = NULL;
  }
  if (op->kind == OP_ZERO && op->fast
      && (op->err == ENOTSUP || op->err == EOPNOTSUPP)) {
    if (atomic_exchange (&n->can_fast_zero, false))
      stripe_debug ("member %u (%s): the server refused a fast zero it "
                    "advertised: fast zero switched off for it",
                    m->index, m->path);
    op->err = EOPNOTSUPP;
  }
  if (op->kind == OP_TRIM && (op->err == EOPNOTSUPP || op->err == EINVAL))
    op->err = 0; /* advisory */
  /* FUA where the server has none: the write, then a flush there. */
  if (op->kind == OP_WRITE && op->fua && op->err == 0 && !n->can_fua
      && sync_flush (m) == -1)
    op->err = errno;
  if (op->err && op->err != EOPNOTSUPP)
    member_io_error (m, op_name (op->kind), op->offset, op->err);
}

int
member_nbd_pool_sync (struct member *m, enum op_kind kind, void *buf,
                      size_t count, uint64_t offset)
{
  struct iovec iov = { buf, count };
  struct member_op op = {
    .m = m,
    .kind = kind,
    .offset = offset,
    .length = count,
    .iov = &iov,
    .nr_iov = 1,
  };

  return ioexec_run (&op, 1, false);
}

/* A flush after a write without FUA. */
static int
sync_flush (struct member *m)
{
  struct nbd *n = N (m);
  char why[256];

  if (pool_running (n))
    return member_nbd_pool_sync (m, OP_FLUSH, NULL, 0, 0);
  return member_nbd_plain_flush (n->conns[0]->h, plain_timeout (n), why,
                                 sizeof why);
}
