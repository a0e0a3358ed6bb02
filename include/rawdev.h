/* nbdstripe: a member's raw bytes, for its header.
 *
 * A member named by path (a regular file or a block device) or by NBD URI
 * (remote.h), opened on its own for the header work that assembly and the
 * nbdstripe command do: read and write the first bytes, make them durable,
 * discard the data area, and let libblkid look at the content.  No
 * threads, no connection pool: one plain connection for a URI.  The
 * volume's own I/O goes through member.h.
 *
 * For a URI every step (connect with its handshake, each read, write,
 * flush or trim) is bounded by RAWDEV_TIMEOUT seconds: an unreachable or
 * hung server is an error after at most that long, never a hang.
 *
 * Errors: -1 with errno set and a one-line reason in why ("open: No such
 * file or directory", "connect: Connection refused"), which does not
 * repeat the member's name: the caller says "member N (NAME): WHY".
 */
#ifndef NBDSTRIPE_RAWDEV_H
#define NBDSTRIPE_RAWDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "identity.h"
#include "remote.h"

#define RAWDEV_TIMEOUT REMOTE_CONNECT_TIMEOUT

/* rawdev_open flags. */
#define RAWDEV_READONLY 1 /* open for reading only */

/* How far from each end libblkid looks for signatures (rawdev_probe_fd). */
#define RAWDEV_PROBE_SPAN (1024 * 1024)

struct nbd_handle;

struct rawdev {
  const char *name;       /* path or URI as given (not owned) */
  int fd;                 /* a path: the file or device; else -1 */
  struct nbd_handle *nbd; /* a URI: the connection; else NULL */
  bool is_block;          /* a block device */
  bool is_regular;        /* a regular file */
  struct identity id;     /* what it is (identity.h) */
  uint64_t size;          /* bytes */
  int probe_fd;  /* a URI: the snapshot for libblkid, or -1 */
};

/* Open name.  A path must be a regular file or a block device (anything
 * else, a FIFO say, is refused without blocking: EINVAL); a URI is
 * connected, and opened for writing only if the server allows it (else
 * EROFS).
 */
extern int rawdev_open (struct rawdev *d, const char *name, unsigned flags,
                        char *why, size_t len);
/* Claim a local member opened for writing (claim.h): O_EXCL on a block
 * device, an exclusive OFD lock; EBUSY with who holds it in why.  Done
 * after the alias checks, so that a second name for one member is
 * reported as such.  Nothing to do for a URI.
 */
extern int rawdev_claim (struct rawdev *d, char *why, size_t len);

/* Safe on a closed or never opened rawdev whose fds are -1. */
extern void rawdev_close (struct rawdev *d);

extern bool rawdev_is_remote (const struct rawdev *d);

/* Whether a and b are the same member or overlap (identity_alias), and
 * how, in words.
 */
extern bool rawdev_alias (const struct rawdev *a, const struct rawdev *b,
                          char *how, size_t len);

/* Read up to count bytes at offset: fewer only at the end of the member
 * (then the number read, possibly 0).
 */
extern ssize_t rawdev_pread (struct rawdev *d, void *buf, size_t count,
                             uint64_t offset, char *why, size_t len);

/* rawdev_pread from the device itself, past the page cache (after
 * rawdev_sync), to see what another name for the same device wrote.
 */
extern ssize_t rawdev_pread_fresh (struct rawdev *d, void *buf, size_t count,
                                   uint64_t offset, char *why, size_t len);

/* Write exactly count bytes at offset; durable only after rawdev_sync. */
extern int rawdev_pwrite (struct rawdev *d, const void *buf, size_t count,
                          uint64_t offset, char *why, size_t len);

/* fdatasync, or an NBD flush (a no-op where the server has no flush: it
 * says it has no volatile cache).
 */
extern int rawdev_sync (struct rawdev *d, char *why, size_t len);

/* Discard [offset, offset + length): BLKDISCARD, a punched hole, or an
 * NBD trim.  -1 with errno EOPNOTSUPP when the member cannot discard.
 */
extern int rawdev_discard (struct rawdev *d, uint64_t offset, uint64_t length,
                           char *why, size_t len);

/* A descriptor for libblkid that shows the member's content: for a path
 * the member itself; for a URI a sparse memory file (memfd, else an
 * O_TMPFILE file) of the member's size holding a copy of its first and
 * last RAWDEV_PROBE_SPAN bytes, where signatures live, made on the first
 * call.  Owned by the rawdev.
 */
extern int rawdev_probe_fd (struct rawdev *d, char *why, size_t len);

#endif /* NBDSTRIPE_RAWDEV_H */
