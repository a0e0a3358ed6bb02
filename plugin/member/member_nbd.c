/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the NBD backend of member.h -- an export on another server,
 * reached through libnbd.
 *
 * Opened for I/O, a member keeps a pool of connections: several when the
 * server advertises multi-conn (up to the connections parameter), else
 * one.  Each connection has a dispatcher thread, started after nbdkit
 * forks (member_start) or on first use, which drives libnbd's state
 * machine; worker threads issue asynchronous commands on any connection,
 * round-robin, and the executor waits for their completions.  A command
 * unanswered within the member's timeout is cancelled by closing its
 * connection, which fails everything in flight on it at once.  Opened
 * raw, a member is one plain connection (nbd_plain.h), no thread.
 *
 * A member's pieces of one request are contiguous on it: they go as ONE
 * command (through a bounce buffer when the client's buffer has them
 * apart), split only at the server's largest payload.
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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <libnbd.h>

#include "ioexec.h"
#include "log.h"
#include "member.h"
#include "nbd_plain.h"
#include "util.h"

_Static_assert (LIBNBD_STATE_HOLE == MEMBER_EXTENT_HOLE
                  && LIBNBD_STATE_ZERO == MEMBER_EXTENT_ZERO,
                "block status bits are NBD's");

/* The longest trim, zero or block status range in one command: NBD
 * lengths are 32 bits; kept block-aligned.
 */
#define MAX_RANGE (0x80000000u - 65536)

/* When the server does not say: nbdkit and qemu-nbd take 32M. */
#define DEFAULT_MAX_PAYLOAD (32u * 1024 * 1024)

/* Raw reads and trims go in pieces no server refuses. */
#define RAW_READ_MAX (1024u * 1024)

/* How far from each end libblkid looks for signatures (probe_fd). */
#define PROBE_SPAN (1024 * 1024)

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

/* nbd_plain's reasons begin with the URI; ours never repeat the name. */
static void
drop_name (char *why, const char *name)
{
  size_t n = strlen (name);

  if (why && strncmp (why, name, n) == 0 && strncmp (why + n, ": ", 2) == 0)
    memmove (why, why + n + 2, strlen (why + n + 2) + 1);
}

static unsigned
plain_timeout (const struct nbd *n)
{
  return n->timeout ? n->timeout : MEMBER_CONNECT_TIMEOUT;
}

/* The pool. */

static void
conn_close (struct conn *c)
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

static struct conn *
conn_new (struct member *m, char *why, size_t len)
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
  c->h = nbd_plain_connect (m->path, n->raw ? plain_timeout (n) : n->timeout,
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

  n->conns[0] = conn_new (m, why, len);
  if (n->conns[0] == NULL)
    return -1;
  n->nr_conns = 1;
  h = n->conns[0]->h;

  v = nbd_get_size (h);
  if (v < 0) {
    nbd_plain_why (reason, sizeof reason, "size", NULL);
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
    struct conn *c = conn_new (m, why, len);
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
    conn_close (n->conns[i]);
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

/* Threads start after nbdkit forks: from member_start, or on first use. */
static int
start_dispatchers (struct member *m)
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

static void
nbd_start_op (struct member *m, struct ioexec *x, struct member_op *op)
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

  if (n->raw || start_dispatchers (m) == -1) {
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
static void
nbd_cancel_op (struct member *m, struct member_op *op)
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

static void
nbd_finish_op (struct member *m, struct member_op *op)
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

/* Synchronous calls (header access, flush after a write without FUA):
 * through the pool once it runs, else on the first connection driven
 * here (raw, or a fresh pool being probed).
 */
static int
pool_sync (struct member *m, enum op_kind kind, void *buf, size_t count,
           uint64_t offset)
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

static bool
pool_running (struct nbd *n)
{
  return !n->raw && atomic_load (&n->started);
}

static int
sync_flush (struct member *m)
{
  struct nbd *n = N (m);
  char why[256];

  if (pool_running (n))
    return pool_sync (m, OP_FLUSH, NULL, 0, 0);
  return nbd_plain_flush (n->conns[0]->h, plain_timeout (n), why, sizeof why);
}

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
    if (pool_sync (m, OP_READ, buf, count, offset) == -1)
      return fail_why (why, len, errno, "read: %s", strerror (errno));
    return count;
  }
  while (done < count) {
    size_t k = count - done < RAW_READ_MAX ? count - done : RAW_READ_MAX;
    if (nbd_plain_pread (n->conns[0]->h, (char *) buf + done, k, offset + done,
                         plain_timeout (n), why, len)
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
    if (pool_sync (m, OP_WRITE, (void *) buf, count, offset) == -1)
      return fail_why (why, len, errno, "write: %s", strerror (errno));
    return 0;
  }
  return nbd_plain_pwrite (n->conns[0]->h, buf, count, offset,
                           plain_timeout (n), why, len);
}

static int
member_nbd_sync (struct member *m, char *why, size_t len)
{
  struct nbd *n = N (m);

  if (pool_running (n)) {
    if (pool_sync (m, OP_FLUSH, NULL, 0, 0) == -1)
      return fail_why (why, len, errno, "flush: %s", strerror (errno));
    return 0;
  }
  return nbd_plain_flush (n->conns[0]->h, plain_timeout (n), why, len);
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
    if (nbd_plain_trim (n->conns[0]->h, k, offset, plain_timeout (n), why,
                        len)
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
  start_dispatchers (m);
  for (unsigned i = 0; i < nr_old; ++i)
    conn_close (old[i]);
}

const struct member_ops member_nbd_ops = {
  .open = member_nbd_open,
  .close = nbd_close_member,
  .start = start_dispatchers,
  .current_size = nbd_current_size,
  .pread = member_nbd_pread,
  .pwrite = member_nbd_pwrite,
  .sync = member_nbd_sync,
  .discard = member_nbd_discard,
  .probe_fd = nbd_probe_fd,
  .async = true,
  .start_op = nbd_start_op,
  .cancel_op = nbd_cancel_op,
  .finish_op = nbd_finish_op,
  .zero_known_unsupported = nbd_zero_known_unsupported,
  .fast_zero_known = nbd_fast_zero_known,
  .can_fast_zero = nbd_can_fast_zero_adv,
  .check = member_nbd_check,
  .adopt = member_nbd_adopt,
};
