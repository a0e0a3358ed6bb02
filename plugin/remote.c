/* nbdstripe: remote members over NBD (libnbd).  See include/remote.h. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <libnbd.h>

#include "ioexec.h"
#include "log.h"
#include "remote.h"

unsigned remote_max_connections = REMOTE_DEFAULT_CONNECTIONS;
unsigned remote_timeout = 30;

/* The longest trim, zero or block status range in one command: NBD
 * lengths are 32 bits; kept block-aligned.
 */
#define MAX_RANGE (0x80000000u - 65536)

/* When the server does not say: nbdkit and qemu-nbd take 32M. */
#define DEFAULT_MAX_PAYLOAD (32u * 1024 * 1024)

struct conn {
  struct remote *r;
  struct nbd_handle *h;
  int wake; /* eventfd: a command was queued, or stop */
  pthread_t thread;
  bool thread_started;
  _Atomic bool stop;
  _Atomic bool dead;
};

struct remote {
  char *uri;
  bool readonly;
  /* What the server says; replaced by remote_adopt while I/O threads read
   * them: atomics.
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
  struct conn *conns[REMOTE_MAX_CONNECTIONS];
  _Atomic unsigned next;
  pthread_rwlock_t lock; /* read: issuing commands; write: adopt */
  pthread_mutex_t start_lock;
  _Atomic bool started; /* dispatchers running */
};

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* libnbd's message already says what failed ("nbd_aio_connect_uri:
 * connect: Connection refused"); ours only when it has none.
 */
static void
set_why (char *why, size_t len, const char *what, const char *uri)
{
  const char *e = nbd_get_error ();
  if (why == NULL || len == 0)
    return;
  if (e)
    snprintf (why, len, "%s%s%s", uri ? uri : "", uri ? ": " : "", e);
  else
    snprintf (why, len, "%s%s%s: %s", uri ? uri : "", uri ? ": " : "", what,
              strerror (errno));
}

/* Drive a handle that has no dispatcher until done() or the deadline. */
static int
drive_until (struct nbd_handle *h, int (*done) (struct nbd_handle *, void *),
             void *arg, uint64_t deadline)
{
  for (;;) {
    int r = done (h, arg);
    if (r != 0)
      return r > 0 ? 0 : -1;
    if (nbd_aio_is_dead (h) || nbd_aio_is_closed (h)) {
      if (errno == 0)
        errno = ENOTCONN;
      return -1;
    }
    uint64_t now = now_ns ();
    if (now >= deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
    int fd = nbd_aio_get_fd (h);
    unsigned dir = nbd_aio_get_direction (h);
    struct pollfd p = { .fd = fd };
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      p.events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      p.events |= POLLOUT;
    int ms = (deadline - now) / 1000000 + 1;
    int pr = poll (&p, 1, ms);
    if (pr == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (pr == 0)
      continue; /* the deadline check above ends it */
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      if (nbd_aio_notify_read (h) == -1)
        return -1;
    }
    else if (p.revents & POLLOUT) {
      if (nbd_aio_notify_write (h) == -1)
        return -1;
    }
  }
}

/* The value of query parameter key in uri (percent-decoded), if any. */
static bool
uri_query_param (const char *uri, const char *key, char *out, size_t len)
{
  const char *q = strchr (uri, '?');
  size_t klen = strlen (key);

  while (q) {
    q++;
    if (strncmp (q, key, klen) == 0 && q[klen] == '=') {
      const char *v = q + klen + 1;
      size_t n = 0;
      while (*v && *v != '&' && *v != '#' && n + 1 < len) {
        unsigned c;
        if (*v == '%' && v[1] && v[2] && sscanf (v + 1, "%2x", &c) == 1) {
          out[n++] = c;
          v += 3;
        }
        else
          out[n++] = *v++;
      }
      out[n] = '\0';
      return n > 0;
    }
    q = strchr (q, '&');
  }
  return false;
}

static int
is_ready (struct nbd_handle *h, void *arg)
{
  (void) arg;
  return nbd_aio_is_ready (h) ? 1 : 0;
}

struct nbd_handle *
remote_connect (const char *uri, unsigned timeout, bool meta, char *why,
                size_t len)
{
  struct nbd_handle *h = nbd_create ();
  uint64_t deadline =
    now_ns ()
    + (uint64_t) (timeout ? timeout : REMOTE_CONNECT_TIMEOUT) * 1000000000;

  if (h == NULL) {
    set_why (why, len, "nbd_create", uri);
    return NULL;
  }
  nbd_set_handle_name (h, "nbdstripe");
  /* libnbd 1.14 ignores tls-username= in the URI (and then asks
   * getlogin, which fails without a terminal): set it ourselves.
   */
  {
    char user[256];
    if (uri_query_param (uri, "tls-username", user, sizeof user)
        && nbd_set_tls_username (h, user) == -1) {
      set_why (why, len, "tls-username", uri);
      nbd_close (h);
      return NULL;
    }
  }
  /* tls-psk-file= and friends: the URI is the operator's own. */
  nbd_set_uri_allow_local_file (h, true);
  if (meta)
    nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION);
  if (nbd_aio_connect_uri (h, uri) == -1) {
    set_why (why, len, "connect", uri);
    nbd_close (h);
    return NULL;
  }
  if (drive_until (h, is_ready, NULL, deadline) == -1) {
    if (errno == ETIMEDOUT)
      snprintf (why, len, "%s: no answer within %u s", uri,
                timeout ? timeout : REMOTE_CONNECT_TIMEOUT);
    else {
      set_why (why, len, "connect", uri);
      if (strncmp (uri, "nbds", 4) == 0 && nbd_get_error ()
          && strstr (nbd_get_error (), "handshake")) {
        size_t n = strlen (why);
        snprintf (why + n, len - n,
                  " (TLS: wrong pre-shared key or user name?)");
      }
    }
    nbd_close (h);
    return NULL;
  }
  return h;
}

struct sync_cmd {
  int64_t cookie;
  int err;
  bool done;
};

static int
sync_done_cb (void *user_data, int *error)
{
  struct sync_cmd *c = user_data;
  c->err = *error;
  c->done = true;
  return 1;
}

static int
sync_is_done (struct nbd_handle *h, void *arg)
{
  (void) h;
  return ((struct sync_cmd *) arg)->done ? 1 : 0;
}

static int
plain_finish (struct nbd_handle *h, struct sync_cmd *c, unsigned timeout,
              const char *what, char *why, size_t len)
{
  uint64_t deadline =
    now_ns () + (uint64_t) (timeout ? timeout : 3600) * 1000000000;

  if (c->cookie == -1) {
    int e = nbd_get_errno () ? nbd_get_errno () : EIO;
    set_why (why, len, what, NULL);
    errno = e;
    return -1;
  }
  if (drive_until (h, sync_is_done, c, deadline) == -1) {
    int e = errno;
    if (e == ETIMEDOUT)
      snprintf (why, len, "%s: no answer within %u s", what,
                timeout ? timeout : 3600);
    else
      snprintf (why, len, "%s: %s", what, strerror (e));
    errno = e;
    return -1;
  }
  if (c->err) {
    snprintf (why, len, "%s: %s", what, strerror (c->err));
    errno = c->err;
    return -1;
  }
  return 0;
}

#define SYNC_CB(c)                                                            \
  ((nbd_completion_callback){ .callback = sync_done_cb, .user_data = &(c) })

int
remote_plain_pread (struct nbd_handle *h, void *buf, size_t count,
                    uint64_t offset, unsigned timeout, char *why, size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_pread (h, buf, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "read", why, len);
}

int
remote_plain_pwrite (struct nbd_handle *h, const void *buf, size_t count,
                     uint64_t offset, unsigned timeout, char *why, size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_pwrite (h, buf, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "write", why, len);
}

int
remote_plain_flush (struct nbd_handle *h, unsigned timeout, char *why,
                    size_t len)
{
  struct sync_cmd c = { 0 };
  if (nbd_can_flush (h) != 1)
    return 0;
  c.cookie = nbd_aio_flush (h, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "flush", why, len);
}

int
remote_plain_trim (struct nbd_handle *h, uint64_t count, uint64_t offset,
                   unsigned timeout, char *why, size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_trim (h, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "trim", why, len);
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
  if (c->h)
    nbd_close (c->h);
  if (c->wake >= 0)
    close (c->wake);
  free (c);
}

static struct conn *
conn_new (struct remote *r, char *why, size_t len)
{
  struct conn *c = calloc (1, sizeof *c);

  if (c == NULL) {
    snprintf (why, len, "out of memory");
    return NULL;
  }
  c->r = r;
  c->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->wake == -1) {
    snprintf (why, len, "eventfd: %s", strerror (errno));
    free (c);
    return NULL;
  }
  c->h = remote_connect (r->uri, remote_timeout, true, why, len);
  if (c->h == NULL) {
    close (c->wake);
    free (c);
    return NULL;
  }
  return c;
}

struct remote *
remote_open (const char *uri, bool readonly, char *why, size_t len)
{
  struct remote *r = calloc (1, sizeof *r);
  struct nbd_handle *h;
  int64_t v;
  unsigned want;

  if (r == NULL || (r->uri = strdup (uri)) == NULL) {
    free (r);
    snprintf (why, len, "out of memory");
    return NULL;
  }
  r->readonly = readonly;
  pthread_rwlock_init (&r->lock, NULL);
  pthread_mutex_init (&r->start_lock, NULL);

  r->conns[0] = conn_new (r, why, len);
  if (r->conns[0] == NULL)
    goto err;
  r->nr_conns = 1;
  h = r->conns[0]->h;

  v = nbd_get_size (h);
  if (v < 0) {
    set_why (why, len, "size", uri);
    goto err;
  }
  r->size = v;
  if (!readonly && nbd_is_read_only (h) == 1) {
    snprintf (why, len,
              "%s: the server exports it read-only (serve the volume "
              "read-only with nbdkit -r)",
              uri);
    errno = EROFS;
    goto err;
  }
  v = nbd_get_block_size (h, LIBNBD_SIZE_MINIMUM);
  r->min_block = v > 0 ? v : 0;
  v = nbd_get_block_size (h, LIBNBD_SIZE_PREFERRED);
  r->preferred_block = v > 0 ? v : 0;
  v = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  r->max_payload = v > 0 ? v : DEFAULT_MAX_PAYLOAD;
  if (r->max_payload > DEFAULT_MAX_PAYLOAD)
    r->max_payload = DEFAULT_MAX_PAYLOAD;
  r->can_trim = nbd_can_trim (h) == 1;
  r->can_zero = nbd_can_zero (h) == 1;
  r->can_fast_zero = r->can_zero && nbd_can_fast_zero (h) == 1;
  r->can_flush = nbd_can_flush (h) == 1;
  r->can_fua = nbd_can_fua (h) == 1;
  r->can_extents =
    nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;

  /* More connections only where the server says they see the same data
   * (multi-conn): a flush on one then covers all.
   */
  want = remote_max_connections;
  if (want < 1)
    want = 1;
  if (want > REMOTE_MAX_CONNECTIONS)
    want = REMOTE_MAX_CONNECTIONS;
  if (nbd_can_multi_conn (h) != 1)
    want = 1;
  while (r->nr_conns < want) {
    struct conn *c = conn_new (r, why, len);
    if (c == NULL)
      goto err;
    r->conns[r->nr_conns++] = c;
  }
  return r;

err : {
  int e = errno;
  remote_close (r);
  errno = e ? e : EIO;
}
  return NULL;
}

void
remote_close (struct remote *r)
{
  if (r == NULL)
    return;
  for (unsigned i = 0; i < r->nr_conns; ++i)
    conn_close (r->conns[i]);
  pthread_rwlock_destroy (&r->lock);
  pthread_mutex_destroy (&r->start_lock);
  free (r->uri);
  free (r);
}

uint64_t
remote_size (const struct remote *r)
{
  return r->size;
}
uint32_t
remote_min_block (const struct remote *r)
{
  return r->min_block;
}
uint32_t
remote_preferred_block (const struct remote *r)
{
  return r->preferred_block;
}
bool
remote_can_fua (const struct remote *r)
{
  return r->can_fua;
}
bool
remote_can_trim (const struct remote *r)
{
  return r->can_trim;
}
bool
remote_can_zero (const struct remote *r)
{
  return r->can_zero;
}
bool
remote_can_fast_zero (const struct remote *r)
{
  return r->can_fast_zero;
}
bool
remote_can_extents (const struct remote *r)
{
  return r->can_extents;
}
unsigned
remote_nr_connections (const struct remote *r)
{
  return r->nr_conns;
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
      stripe_error ("%s: poll: %m", c->r->uri);
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
      stripe_error ("%s: connection lost: %s", c->r->uri,
                    nbd_get_error () ? nbd_get_error () : "closed");
  }
  return NULL;
}

/* Threads start after nbdkit forks: from .after_fork (remote_start), or
 * on first use.
 */
static int
start_dispatchers (struct remote *r)
{
  int e = 0;

  if (atomic_load_explicit (&r->started, memory_order_acquire))
    return 0;
  pthread_mutex_lock (&r->start_lock);
  if (!r->started) {
    for (unsigned i = 0; i < r->nr_conns; ++i) {
      struct conn *c = r->conns[i];
      if (c->thread_started)
        continue;
      e = pthread_create (&c->thread, NULL, dispatcher, c);
      if (e)
        break;
      c->thread_started = true;
    }
    if (e == 0)
      atomic_store_explicit (&r->started, true, memory_order_release);
  }
  pthread_mutex_unlock (&r->start_lock);
  if (e) {
    errno = e;
    stripe_error ("%s: cannot start a dispatcher thread: %m", r->uri);
    return -1;
  }
  return 0;
}

/* A live connection, round-robin; NULL when all are dead. */
static struct conn *
pick_conn (struct remote *r)
{
  unsigned start =
    atomic_fetch_add_explicit (&r->next, 1, memory_order_relaxed);
  for (unsigned k = 0; k < r->nr_conns; ++k) {
    struct conn *c = r->conns[(start + k) % r->nr_conns];
    if (!atomic_load_explicit (&c->dead, memory_order_relaxed))
      return c;
  }
  return NULL;
}

int
remote_start (struct remote *r)
{
  return start_dispatchers (r);
}

void
remote_batch_init (struct remote_batch *b)
{
  pthread_mutex_init (&b->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&b->cond, &ca);
  pthread_condattr_destroy (&ca);
  b->pending = 0;
  b->nr_ops = 0;
  b->t0 = now_ns ();
}

static void
op_command_done (struct member_op *op, int err)
{
  struct remote_batch *b = op->rbatch;

  pthread_mutex_lock (&b->lock);
  if (err && op->err == 0)
    op->err = err;
  if (--op->rpending == 0) {
    op->ns = now_ns () - b->t0;
    if (op->busy)
      atomic_fetch_and_explicit (op->busy,
                                 ~(UINT64_C (1) << (op->m->index & 63)),
                                 memory_order_relaxed);
  }
  if (--b->pending == 0)
    pthread_cond_broadcast (&b->cond);
  pthread_mutex_unlock (&b->lock);
}

static int
command_cb (void *user_data, int *error)
{
  op_command_done (user_data, *error);
  return 1;
}

_Static_assert (LIBNBD_STATE_HOLE == MEMBER_EXTENT_HOLE
                  && LIBNBD_STATE_ZERO == MEMBER_EXTENT_ZERO,
                "block status bits are NBD's");

struct extent_result {
  bool got;
  uint32_t flags; /* MEMBER_EXTENT_*: NBD's HOLE and ZERO bits, as sent */
  uint64_t length;
};

static int
extent_cb (void *user_data, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct extent_result *x = user_data;

  (void) offset;
  (void) error;
  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 || x->got
      || nr_entries < 2)
    return 0;
  x->got = true;
  x->length = entries[0];
  x->flags = entries[1] & (LIBNBD_STATE_HOLE | LIBNBD_STATE_ZERO);
  return 0;
}

/* Issue one command of op on c (the read lock held).  The batch counts
 * it before it is issued: its completion may run before this returns.
 * buf: the data (read, write), or the extent_result (extents).
 */
enum rkind { RK_READ, RK_WRITE, RK_FLUSH, RK_TRIM, RK_ZERO, RK_EXTENTS };

static void
issue (struct conn *c, struct member_op *op, enum rkind kind, void *buf,
       uint64_t count, uint64_t offset, uint32_t flags)
{
  struct remote_batch *b = op->rbatch;
  nbd_completion_callback cb = { .callback = command_cb, .user_data = op };
  int64_t cookie = -1;

  pthread_mutex_lock (&b->lock);
  b->pending++;
  op->rpending++;
  pthread_mutex_unlock (&b->lock);

  switch (kind) {
  case RK_READ:
    cookie = nbd_aio_pread (c->h, buf, count, offset, cb, flags);
    break;
  case RK_WRITE:
    cookie = nbd_aio_pwrite (c->h, buf, count, offset, cb, flags);
    break;
  case RK_FLUSH: cookie = nbd_aio_flush (c->h, cb, flags); break;
  case RK_TRIM: cookie = nbd_aio_trim (c->h, count, offset, cb, flags); break;
  case RK_ZERO: cookie = nbd_aio_zero (c->h, count, offset, cb, flags); break;
  case RK_EXTENTS:
    cookie = nbd_aio_block_status (
      c->h, count, offset,
      (nbd_extent_callback){ .callback = extent_cb, .user_data = buf }, cb,
      flags);
    break;
  }
  if (cookie == -1) {
    /* Not issued: the callback will not run. */
    int e = nbd_get_errno ();
    if (nbd_aio_is_dead (c->h) || nbd_aio_is_closed (c->h) || e == 0)
      e = ENOTCONN;
    op_command_done (op, e);
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

static void
submit_kind (struct remote_batch *b, struct remote *r, struct member_op *op,
             enum rkind kind, uint64_t offset, uint64_t count, uint32_t flags,
             void *arg)
{
  struct conn *c;

  op->rbatch = b;
  op->rpending = 0;
  op->rconn = NULL;
  op->err = 0;
  if (b->nr_ops < sizeof b->ops / sizeof b->ops[0])
    b->ops[b->nr_ops++] = op;

  if (start_dispatchers (r) == -1) {
    op->err = EIO;
    return;
  }
  pthread_rwlock_rdlock (&r->lock);
  c = pick_conn (r);
  if (c == NULL) {
    pthread_rwlock_unlock (&r->lock);
    op->err = ENOTCONN;
    return;
  }
  op->rconn = c;
  if (op->busy)
    atomic_fetch_or_explicit (op->busy, UINT64_C (1) << (op->m->index & 63),
                              memory_order_relaxed);
  switch (kind) {
  case RK_READ:
  case RK_WRITE: {
    /* One command per iovec (the pieces are contiguous on the member),
     * split at the server's largest payload.
     */
    uint64_t off = offset;
    for (unsigned k = 0; k < op->nr_iov; ++k) {
      char *p = op->iov[k].iov_base;
      size_t left = op->iov[k].iov_len;
      while (left > 0) {
        size_t n = left < r->max_payload ? left : r->max_payload;
        issue (c, op, kind, p, n, off, flags);
        p += n;
        off += n;
        left -= n;
      }
    }
    break;
  }
  default: issue (c, op, kind, arg, count, offset, flags); break;
  }
  pthread_rwlock_unlock (&r->lock);
  /* Nothing issued (zero length): done. */
  pthread_mutex_lock (&b->lock);
  if (op->rpending == 0 && op->busy)
    atomic_fetch_and_explicit (
      op->busy, ~(UINT64_C (1) << (op->m->index & 63)), memory_order_relaxed);
  pthread_mutex_unlock (&b->lock);
}

void
remote_submit (struct remote_batch *b, struct remote *r, struct member_op *op)
{
  switch (op->kind) {
  case OP_READ:
    submit_kind (b, r, op, RK_READ, op->offset, op->length, 0, NULL);
    break;
  case OP_WRITE:
    submit_kind (b, r, op, RK_WRITE, op->offset, op->length,
                 op->fua && r->can_fua ? LIBNBD_CMD_FLAG_FUA : 0, NULL);
    break;
  case OP_FLUSH:
    if (r->can_flush)
      submit_kind (b, r, op, RK_FLUSH, 0, 0, 0, NULL);
    else {
      op->rbatch = b;
      op->rpending = 0;
      op->err = 0;
      op->ns = 0;
    }
    break;
  }
}

void
remote_batch_wait (struct remote_batch *b)
{
  uint64_t deadline =
    remote_timeout ? b->t0 + (uint64_t) remote_timeout * 1000000000 : 0;
  bool killed = false;

  pthread_mutex_lock (&b->lock);
  while (b->pending > 0) {
    if (deadline == 0 || killed) {
      pthread_cond_wait (&b->cond, &b->lock);
      continue;
    }
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    if (pthread_cond_timedwait (&b->cond, &b->lock, &ts) != ETIMEDOUT)
      continue;
    /* Timed out: shut down the connections still owing an answer.  That
     * fails everything in flight on them (their callbacks run, with an
     * error), so this thread gets its buffers back.
     */
    killed = true;
    for (unsigned k = 0; k < b->nr_ops; ++k) {
      struct member_op *op = b->ops[k];
      struct conn *c = op->rconn;
      if (op->rpending == 0 || c == NULL)
        continue;
      op->err = ETIMEDOUT;
      if (!atomic_exchange (&c->dead, true)) {
        stripe_error ("%s: no answer within %u s: closing the connection",
                      c->r->uri, remote_timeout);
        int fd = nbd_aio_get_fd (c->h);
        if (fd >= 0)
          shutdown (fd, SHUT_RDWR);
        uint64_t one = 1;
        if (write (c->wake, &one, sizeof one) == -1) {
        }
      }
    }
  }
  pthread_mutex_unlock (&b->lock);
  pthread_mutex_destroy (&b->lock);
  pthread_cond_destroy (&b->cond);
}

/* Synchronous operations: one op, one batch. */
static int
sync_op (struct remote *r, enum rkind kind, const struct iovec *iov,
         unsigned nr, uint64_t offset, uint64_t count, uint32_t flags,
         void *arg)
{
  struct remote_batch b;
  struct member_op op = {
    .m = NULL,
    .kind = kind == RK_READ    ? OP_READ
            : kind == RK_WRITE ? OP_WRITE
                               : OP_FLUSH,
    .offset = offset,
    .length = count,
    .iov = iov,
    .nr_iov = nr,
  };
  static struct member dummy; /* op->m->index for busy bits: none here */

  op.m = &dummy;
  remote_batch_init (&b);
  submit_kind (&b, r, &op, kind, offset, count, flags, arg);
  remote_batch_wait (&b);
  if (op.err) {
    errno = op.err;
    return -1;
  }
  return 0;
}

int
remote_preadv (struct remote *r, const struct iovec *iov, unsigned nr,
               uint64_t offset)
{
  return sync_op (r, RK_READ, iov, nr, offset, 0, 0, NULL);
}

int
remote_pwritev (struct remote *r, const struct iovec *iov, unsigned nr,
                uint64_t offset, bool fua)
{
  if (sync_op (r, RK_WRITE, iov, nr, offset, 0,
               fua && r->can_fua ? LIBNBD_CMD_FLAG_FUA : 0, NULL)
      == -1)
    return -1;
  if (fua && !r->can_fua)
    return remote_flush (r);
  return 0;
}

int
remote_flush (struct remote *r)
{
  if (!r->can_flush)
    return 0;
  return sync_op (r, RK_FLUSH, NULL, 0, 0, 0, 0, NULL);
}

int
remote_trim (struct remote *r, uint64_t offset, uint64_t len)
{
  if (!r->can_trim || r->readonly)
    return 0; /* advisory */
  while (len > 0) {
    uint64_t n = len < MAX_RANGE ? len : MAX_RANGE;
    if (sync_op (r, RK_TRIM, NULL, 0, offset, n, 0, NULL) == -1) {
      if (errno == EOPNOTSUPP || errno == EINVAL)
        return 0;
      return -1;
    }
    offset += n;
    len -= n;
  }
  return 0;
}

int
remote_zero (struct remote *r, uint64_t offset, uint64_t len, bool may_trim,
             bool fast)
{
  uint32_t flags = (may_trim ? 0 : LIBNBD_CMD_FLAG_NO_HOLE)
                   | (fast ? LIBNBD_CMD_FLAG_FAST_ZERO : 0);

  if (!r->can_zero || (fast && !r->can_fast_zero)) {
    errno = EOPNOTSUPP;
    return -1;
  }
  while (len > 0) {
    uint64_t n = len < MAX_RANGE ? len : MAX_RANGE;
    if (sync_op (r, RK_ZERO, NULL, 0, offset, n, flags, NULL) == -1) {
      if (errno == ENOTSUP || errno == EOPNOTSUPP) {
        if (fast && atomic_exchange (&r->can_fast_zero, false))
          stripe_debug ("%s: the server refused a fast zero it advertised: "
                        "fast zero switched off for it",
                        r->uri);
        errno = EOPNOTSUPP;
      }
      return -1;
    }
    offset += n;
    len -= n;
  }
  return 0;
}

int
remote_extent (struct remote *r, uint64_t offset, uint64_t limit,
               uint32_t *flags, uint64_t *end)
{
  struct extent_result x = { 0 };
  uint64_t count = limit - offset;

  if (!r->can_extents || count == 0) {
    *flags = 0;
    *end = limit;
    return 0;
  }
  if (count > MAX_RANGE)
    count = MAX_RANGE;
  if (sync_op (r, RK_EXTENTS, NULL, 0, offset, count, LIBNBD_CMD_FLAG_REQ_ONE,
               &x)
      == -1)
    return -1;
  *flags = x.got ? x.flags : 0;
  *end = x.got && x.length > 0 && offset + x.length < limit ? offset + x.length
                                                            : limit;
  return 0;
}

int
remote_check (struct remote *r, char *why, size_t len)
{
  for (unsigned i = 0; i < r->nr_conns; ++i) {
    struct conn *c = r->conns[i];
    if (atomic_load (&c->dead) || nbd_aio_is_dead (c->h)
        || nbd_aio_is_closed (c->h)) {
      snprintf (why, len, "device gone: connection %u to %s lost", i, r->uri);
      return -1;
    }
  }
  return 0;
}

int
remote_probe_pread (struct remote *r, void *buf, size_t count, uint64_t offset,
                    char *why, size_t len)
{
  /* A fresh pool has no dispatcher yet: drive the first connection. */
  return remote_plain_pread (
    r->conns[0]->h, buf, count, offset,
    remote_timeout ? remote_timeout : REMOTE_CONNECT_TIMEOUT, why, len);
}

int
remote_probe_pwrite (struct remote *r, const void *buf, size_t count,
                     uint64_t offset, char *why, size_t len)
{
  unsigned t = remote_timeout ? remote_timeout : REMOTE_CONNECT_TIMEOUT;
  struct nbd_handle *h = r->conns[0]->h;

  if (remote_plain_pwrite (h, buf, count, offset, t, why, len) == -1
      || remote_plain_flush (h, t, why, len) == -1)
    return -1;
  return 0;
}

void
remote_adopt (struct remote *r, struct remote *fresh)
{
  struct conn *old[REMOTE_MAX_CONNECTIONS];
  unsigned nr_old;

  pthread_rwlock_wrlock (&r->lock);
  pthread_mutex_lock (&r->start_lock);
  nr_old = r->nr_conns;
  memcpy (old, r->conns, sizeof old);
  for (unsigned i = 0; i < fresh->nr_conns; ++i) {
    r->conns[i] = fresh->conns[i];
    r->conns[i]->r = r;
  }
  r->nr_conns = fresh->nr_conns;
  r->size = fresh->size;
  r->can_trim = fresh->can_trim;
  r->can_zero = fresh->can_zero;
  r->can_fast_zero = fresh->can_fast_zero;
  r->can_flush = fresh->can_flush;
  r->can_fua = fresh->can_fua;
  r->can_extents = fresh->can_extents;
  r->max_payload = fresh->max_payload;
  atomic_store (&r->started, false);
  pthread_mutex_unlock (&r->start_lock);
  pthread_rwlock_unlock (&r->lock);
  /* At once, so that a server that goes away while the member is idle is
   * noticed (the dispatcher sees the connection close).
   */
  start_dispatchers (r);

  /* Nobody can pick the old connections now: close them. */
  for (unsigned i = 0; i < nr_old; ++i)
    conn_close (old[i]);
  fresh->nr_conns = 0;
  remote_close (fresh);
}
