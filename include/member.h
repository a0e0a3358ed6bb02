/* nbdstripe: one backing store: a regular file, a block device or an NBD
 * export (remote.h).
 *
 * A member knows its own fd, size and what it can do; it knows nothing of
 * the layout or of other members.  Capabilities that can only be learnt by
 * trying are tri-state (CAP_UNKNOWN until the first try) and are switched
 * off, with a debug line, the first time the kernel says ENOTSUP.  Worker
 * threads share members, so capabilities are atomics.
 *
 * All offsets are member offsets in bytes.  Every function returns 0 on
 * success or -1 with errno set, and logs errors naming the member.
 */
#ifndef NBDSTRIPE_MEMBER_H
#define NBDSTRIPE_MEMBER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "identity.h"

enum cap { CAP_NO = 0, CAP_YES = 1, CAP_UNKNOWN = 2 };

struct remote;

struct member {
  unsigned index;
  char *path;            /* as the user gave it (owned) */
  struct remote *remote; /* an NBD export (remote.h), else NULL */
  int fd;                /* buffered I/O, trim, zero, sync */
  int fd_direct;         /* O_DIRECT, or -1 (cache=direct only) */
  uint32_t direct_align; /* offset/length/memory alignment for it */
  bool is_block;
  bool is_regular;
  bool readonly;      /* opened O_RDONLY */
  struct identity id; /* what it is, as opened (identity.h) */
  uint64_t size;      /* raw size in bytes, when opened */
  uint64_t need;      /* bytes the volume uses (data offset included) */
  uint32_t min_io;            /* the smallest I/O it takes: 1 for a local
                               * member (buffered I/O, or O_DIRECT's
                               * unaligned requests going buffered); an NBD
                               * server's minimum block size */
  uint32_t logical_block;     /* BLKSSZGET; 512 for files */
  uint32_t physical_block;    /* BLKPBSZGET; 4096 for files */
  _Atomic int can_punch;      /* files: PUNCH_HOLE; blockdev: unmap-zero */
  _Atomic int can_zero_range; /* files: FALLOC_FL_ZERO_RANGE */
  _Atomic int can_discard;    /* blockdev: BLKDISCARD */
  _Atomic int can_zeroout;    /* blockdev: BLKZEROOUT */
  _Atomic int can_seek_data;  /* SEEK_DATA / SEEK_HOLE */
};

/* Open a member: a path, or an NBD URI (remote.h).  With readonly, open
 * O_RDONLY.  With direct, also open an O_DIRECT descriptor for aligned
 * reads and writes.  A member that cannot be opened for writing is an
 * error saying so (EROFS/EACCES/EPERM are kept in errno so that the
 * caller can explain -r).  Anything but a regular file, a block device
 * or a URI is refused without blocking (a FIFO, say).  m->id says what
 * it is.
 */
extern int member_open (struct member *m, unsigned index, const char *path,
                        bool readonly, bool direct);
extern void member_close (struct member *m);

/* Own a local member while it is served (claim.h): a block device that
 * is written reopened O_EXCL, an OFD lock on every one (shared when only
 * read).  One in use is refused, naming who holds it (EBUSY).  NBD
 * exports: nothing to do.
 */
extern int member_claim (struct member *m);

/* The member's size now (fstat, BLKGETSIZE64; an NBD export's does not
 * change).  0 or -1 with errno.
 */
extern int member_current_size (struct member *m, uint64_t *size);

/* Synchronous vectored I/O of exactly the iovec's total length: short
 * transfers are continued; end of file is EIO, logged.  With dsync the
 * write is durable when it returns (RWF_DSYNC, or fdatasync after).
 * direct selects fd_direct: the caller guarantees the alignment.
 */
extern int member_preadv (struct member *m, bool direct,
                          const struct iovec *iov, unsigned nr_iov,
                          uint64_t offset);
extern int member_pwritev (struct member *m, bool direct,
                           const struct iovec *iov, unsigned nr_iov,
                           uint64_t offset, bool dsync);
extern int member_flush (struct member *m);

/* Advisory: a member that cannot discard returns 0 and does nothing (with
 * a debug line the first time).  Only EIO and EPERM are reported.
 */
extern int member_discard (struct member *m, uint64_t offset, uint64_t len);

/* Whether a fast zero of the range is known to work on this member: its
 * method was seen to work (or is advertised by the NBD server).  A fast
 * zero is refused, before any member is touched, unless it is known to
 * work on every member it touches.
 */
extern bool member_fast_zero_known (const struct member *m, uint64_t offset,
                                    uint64_t len, bool may_trim);

/* Learn whether the zeroing methods work, by trying them on a range that
 * holds nothing (a header volume's gap between the header and the data).
 */
extern void member_learn_zero (struct member *m, uint64_t offset,
                               uint64_t len);

/* Make the range read as zeroes without writing data.  may_trim allows
 * deallocation.  With fast, only methods that never write data blocks are
 * used.  Returns -1 with errno = EOPNOTSUPP when no such method works, so
 * that the caller can fall back to writing zeroes.
 */
extern int member_zero (struct member *m, uint64_t offset, uint64_t len,
                        bool may_trim, bool fast);

/* Whether member_zero with these flags is known NOT to work (without
 * trying).  Used to refuse a fast zero before touching any member.
 */
extern bool member_zero_known_unsupported (const struct member *m,
                                           uint64_t offset, uint64_t len,
                                           bool may_trim, bool fast);

/* Block status, as NBD has it: a hole (no storage allocated) and zero
 * (reads as zeroes) are separate facts -- a hole need not read as zero.
 */
#define MEMBER_EXTENT_HOLE 1u
#define MEMBER_EXTENT_ZERO 2u

/* Block status map.  On return *flags (MEMBER_EXTENT_*) describe offset,
 * and *end is where that run ends (<= limit).  A hole in a local file
 * reads as zeroes (HOLE|ZERO); an NBD member says what its server says.
 * Members that cannot tell report all data (0).
 */
extern int member_extent (struct member *m, uint64_t offset, uint64_t limit,
                          uint32_t *flags, uint64_t *end);

/* Log an I/O error on this member: "member N (PATH): WHAT at member offset
 * OFF: strerror(err)".  Keeps errno = err.
 */
extern void member_io_error (const struct member *m, const char *what,
                             uint64_t offset, int err);

#endif /* NBDSTRIPE_MEMBER_H */
