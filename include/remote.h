/* nbdstripe: a member that is an NBD export on another server (libnbd).
 *
 * A member given as an NBD URI -- nbd://host[:port]/export,
 * nbds://... (TLS), nbd+unix:///export?socket=PATH, nbds+unix://... --
 * is reached through libnbd behind the same member interface as files,
 * so that the volume code does not change.  tls-psk-file= and other
 * local-file URI parameters are allowed: the URI comes from the
 * operator's config.
 *
 * A remote member keeps a pool of connections: several when the server
 * advertises multi-conn (capped by remote_max_connections), else one.
 * Each connection has a dispatcher thread, started on first use (so
 * after nbdkit forks), which drives libnbd's state machine; worker
 * threads issue asynchronous commands on any connection, round-robin,
 * and wait for their completions together with their local operations
 * (ioexec).  A command that has not completed within remote_timeout
 * seconds shuts its connection down, which fails everything in flight on
 * it at once: nothing waits on a dead or hung server longer than that.
 *
 * What the server cannot do is skipped or emulated as for local members:
 * no trim -- skipped (trim is advisory); no write zeroes -- EOPNOTSUPP
 * (nbdkit writes zeroes); no FUA -- write then flush; no flush -- no-op
 * (the server has no volatile cache to flush); no base:allocation -- all
 * data.
 */
#ifndef NBDSTRIPE_REMOTE_H
#define NBDSTRIPE_REMOTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

struct nbd_handle;
struct remote;
struct member_op;

/* Connections per remote member at most (when the server allows
 * multi-conn), and the per-request timeout in seconds (0: none).  Set by
 * the plugin before members are opened.
 */
extern unsigned remote_max_connections;
extern unsigned remote_timeout;

#define REMOTE_DEFAULT_CONNECTIONS 4
#define REMOTE_MAX_CONNECTIONS 16
#define REMOTE_CONNECT_TIMEOUT 30

/* Whether s is an NBD URI (nbd:, nbds:, nbd+unix:, nbds+unix:,
 * nbd+vsock:, nbds+vsock:).  Inline: the config loader (and its fuzzer)
 * use it without libnbd.
 */
static inline bool
remote_is_uri (const char *s)
{
  static const char *const schemes[] = { "nbd://",       "nbds://",
                                         "nbd+unix://",  "nbds+unix://",
                                         "nbd+vsock://", "nbds+vsock://" };
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; ++i)
    if (strncmp (s, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

/* A plain connection, no threads: for headers (nbdstripe create, check,
 * inspect) and probes.  Bounded by timeout seconds (connect + handshake).
 * With meta, asks for base:allocation.  On error returns NULL with a
 * one-line reason in why.
 */
extern struct nbd_handle *remote_connect (const char *uri, unsigned timeout,
                                          bool meta, char *why, size_t len);

/* Synchronous commands on such a plain handle, each bounded by timeout
 * seconds; -1 with errno and a reason in why.  A flush to a server
 * without flush does nothing.
 */
extern int remote_plain_pread (struct nbd_handle *h, void *buf, size_t count,
                               uint64_t offset, unsigned timeout, char *why,
                               size_t len);
extern int remote_plain_pwrite (struct nbd_handle *h, const void *buf,
                                size_t count, uint64_t offset,
                                unsigned timeout, char *why, size_t len);
extern int remote_plain_flush (struct nbd_handle *h, unsigned timeout,
                               char *why, size_t len);
extern int remote_plain_trim (struct nbd_handle *h, uint64_t count,
                              uint64_t offset, unsigned timeout, char *why,
                              size_t len);

/* A member's pool.  Opening connects (bounded by the timeouts above),
 * reads the size and what the server can do.  Closing stops the
 * dispatchers and disconnects.
 */
extern struct remote *remote_open (const char *uri, bool readonly, char *why,
                                   size_t len);
extern void remote_close (struct remote *r);

/* Start the dispatcher threads now (after nbdkit forks) rather than on
 * first use, so that a server that goes away while the member is idle is
 * noticed at once.
 */
extern int remote_start (struct remote *r);

extern uint64_t remote_size (const struct remote *r);
/* The server's block size constraints (minimum, preferred), or 0. */
extern uint32_t remote_min_block (const struct remote *r);
extern uint32_t remote_preferred_block (const struct remote *r);
extern bool remote_can_fua (const struct remote *r);
extern bool remote_can_trim (const struct remote *r);
extern bool remote_can_zero (const struct remote *r);
extern bool remote_can_fast_zero (const struct remote *r);
extern bool remote_can_extents (const struct remote *r);
extern unsigned remote_nr_connections (const struct remote *r);

/* Asynchronous member operations (ioexec): remote_submit starts op
 * (read, write or flush) on the pool; remote_batch_wait waits until every
 * op submitted with the same batch has completed (or, after
 * remote_timeout, has been failed with ETIMEDOUT by shutting down its
 * connection), setting op->err and op->ns.  A write with FUA to a server
 * without FUA is followed by a flush there.
 */
struct remote_batch {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned pending; /* commands */
  uint64_t t0;
  struct member_op *ops[64]; /* submitted ops, for the timeout */
  unsigned nr_ops;
};
extern void remote_batch_init (struct remote_batch *b);
extern void remote_submit (struct remote_batch *b, struct remote *r,
                           struct member_op *op);
extern void remote_batch_wait (struct remote_batch *b);

/* Synchronous ones (trim, zero, extents, and the portable path). */
extern int remote_preadv (struct remote *r, const struct iovec *iov,
                          unsigned nr, uint64_t offset);
extern int remote_pwritev (struct remote *r, const struct iovec *iov,
                           unsigned nr, uint64_t offset, bool fua);
extern int remote_flush (struct remote *r);
extern int remote_trim (struct remote *r, uint64_t offset, uint64_t len);
extern int remote_zero (struct remote *r, uint64_t offset, uint64_t len,
                        bool may_trim, bool fast);
extern int remote_extent (struct remote *r, uint64_t offset, uint64_t limit,
                          uint32_t *flags, uint64_t *end);

/* Health: whether every connection is alive (no I/O); a fresh pool for
 * a re-probe (not started: no threads); adopting it in place of the old
 * connections, which are shut down and closed.
 */
extern int remote_check (struct remote *r, char *why, size_t len);
extern int remote_probe_pread (struct remote *r, void *buf, size_t count,
                               uint64_t offset, char *why, size_t len);
/* A durable write (write, then flush) on a fresh pool, for its header. */
extern int remote_probe_pwrite (struct remote *r, const void *buf,
                                size_t count, uint64_t offset, char *why,
                                size_t len);
extern void remote_adopt (struct remote *r, struct remote *fresh);

#endif /* NBDSTRIPE_REMOTE_H */
