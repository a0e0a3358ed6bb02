/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: one member -- a regular file, a block device or an NBD
 * export -- behind one interface.
 *
 * A member is a backend (struct member_ops, in the spirit of nbdcopy's
 * rw_ops) and its state.  Two backends implement it: local (a file or a
 * block device, member_local.c) and NBD (an export reached through
 * libnbd, member_nbd.c).  Everything else -- the executor, the volume,
 * health, assembly and the nbdstripe command -- knows only this header:
 * how to open a member, what it is (identity.h), how big it is and what it
 * can do, how to read and write its header, and how to start operations.
 *
 * Two ways to open one:
 *   - for I/O (serving): a local member may get an O_DIRECT descriptor; an
 *     NBD member a pool of connections with a dispatcher thread each,
 *     started after nbdkit forks (member_start);
 *   - raw (the command, assembly, probes): no threads, one plain
 *     connection for an NBD member, every call bounded in time.
 * Both give header access (member_pread/pwrite/sync) and the executor's
 * operations.
 *
 * The executor (ioexec.h) hands each backend its operations with start();
 * a backend completes each through ioexec_done(), synchronously (a local
 * member without a ring, trims on a block device) or later (io_uring
 * completions, NBD replies from a dispatcher thread).  Capabilities that
 * can only be learnt by trying are tri-state (CAP_UNKNOWN until the first
 * try) and switched off, with a debug line, the first time the kernel or
 * the server says ENOTSUP.
 *
 * All offsets are member offsets in bytes.  Functions return 0 (or a
 * count) on success or -1 with errno set; messages for people come in
 * why/len (one line, without the member's name: callers say "member N
 * (NAME): WHY") or, on the I/O path, are logged naming the member.
 */
#ifndef NBDSTRIPE_MEMBER_H
#define NBDSTRIPE_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "identity.h"
#include "op.h"

enum cap { CAP_NO = 0, CAP_YES = 1, CAP_UNKNOWN = 2 };

enum member_kind { MEMBER_FILE, MEMBER_BLOCK, MEMBER_NBD };

/* Block status, as NBD has it: a hole (no storage allocated) and zero
 * (reads as zeroes) are separate facts -- a hole need not read as zero.
 */
#define MEMBER_EXTENT_HOLE 1u
#define MEMBER_EXTENT_ZERO 2u

/* Connections per NBD member at most (multi-conn servers), and the bound
 * on connecting.
 */
#define MEMBER_CONNECTIONS_DEFAULT 4
#define MEMBER_CONNECTIONS_MAX 16
#define MEMBER_CONNECT_TIMEOUT 30

struct member_open_params {
  bool readonly;
  bool direct;          /* cache=direct: an O_DIRECT descriptor too */
  bool raw;             /* no threads, one plain connection (see above) */
  unsigned connections; /* NBD: the pool's size at most (0: default) */
  unsigned timeout;     /* s: an NBD request unanswered this long is cut
                         * by closing its connection; 0 never.  Raw: every
                         * call (0: MEMBER_CONNECT_TIMEOUT) */
};

struct member_op;
struct ioexec;
struct member_ops;

struct member {
  unsigned index;
  char *path; /* path or URI as given (owned) */
  const struct member_ops *ops;
  void *be; /* the backend's own state */
  enum member_kind kind;
  bool readonly;
  struct member_open_params params; /* as opened (a re-probe opens alike) */
  struct identity id;               /* what it is (identity.h) */
  uint64_t size;                    /* bytes, when opened */
  uint64_t data_offset;             /* where the volume's data starts on
                                     * it (md: each member its own), set
                                     * by the volume */
  uint64_t need;                    /* bytes the volume uses (data offset
                                     * included), set by the volume */
  uint32_t min_io;                  /* the smallest I/O it takes: 1 for a
                                     * local member (buffered I/O; with
                                     * O_DIRECT an unaligned request goes
                                     * through the page cache); an NBD
                                     * server's minimum block size */
  uint32_t logical_block;           /* BLKSSZGET; 512 for files */
  uint32_t physical_block;          /* BLKPBSZGET; 4096 for files */
};

/* A run of block status: length bytes with flags MEMBER_EXTENT_*. */
struct extent_run {
  uint64_t length;
  uint32_t flags;
};

/* Runs from an OP_EXTENTS operation's offset on, in order (owned by the
 * caller, freed with free (runs)).
 */
struct extent_list {
  struct extent_run *runs;
  unsigned nr, cap;
};

/* Appends a run, merging it with the last one of the same flags.  -1 with
 * errno ENOMEM.
 */
extern int extent_list_add (struct extent_list *l, uint64_t length,
                            uint32_t flags);

struct member_ops {
  /* Set-up and tear-down (member_open fills in the common fields). */
  int (*open) (struct member *m, char *why, size_t len);
  void (*close) (struct member *m);
  int (*claim) (struct member *m, char *why, size_t len);
  /* Threads, after nbdkit forks (NULL: none). */
  int (*start) (struct member *m);
  int (*current_size) (struct member *m, uint64_t *size);

  /* Header access, synchronous and bounded.  pread reads up to count
   * bytes, fewer only at the end of the member; fresh: from the device,
   * past any cache (after sync), to see what another name for the same
   * device wrote.
   */
  ssize_t (*pread) (struct member *m, void *buf, size_t count,
                    uint64_t offset, bool fresh, char *why, size_t len);
  int (*pwrite) (struct member *m, const void *buf, size_t count,
                 uint64_t offset, char *why, size_t len);
  int (*sync) (struct member *m, char *why, size_t len);
  /* Discard a range for `create --discard`: -1 with EOPNOTSUPP when the
   * member cannot.
   */
  int (*discard) (struct member *m, uint64_t offset, uint64_t length,
                  char *why, size_t len);
  /* A descriptor showing the member's content to libblkid (a snapshot of
   * its first and last MiB for an NBD export), owned by the member.
   */
  int (*probe_fd) (struct member *m, char *why, size_t len);

  /* The executor.  start puts op in flight (or does it at once) and
   * completes it through ioexec_done; cancel (NULL: cannot) makes an op
   * still in flight complete now with an error (NBD: its connection is
   * closed); finish runs after every op of the request has completed (a
   * flush after a write with FUA to a server without FUA).  async: ops
   * are started first so that they are on the wire while others run.
   */
  bool async;
  void (*start_op) (struct member *m, struct ioexec *x, struct member_op *op);
  /* Optional: a read or write done synchronously on the calling thread,
   * for a request that is this one op alone (the usual small request),
   * cheaper than start_op's path.  Returns false, having done nothing,
   * when this op needs the executor after all (an O_DIRECT bounce);
   * else true with op->err set (0 or errno).
   */
  bool (*rw_now) (struct member *m, struct member_op *op);
  void (*cancel_op) (struct member *m, struct member_op *op);
  void (*finish_op) (struct member *m, struct member_op *op);

  /* Zeroing, before a request touches anything: known not to work
   * (refuse, nbdkit writes zeroes); a fast zero known to work; learn the
   * methods on a range that holds nothing.
   */
  bool (*zero_known_unsupported) (const struct member *m, uint64_t offset,
                                  uint64_t len, bool may_trim, bool fast);
  bool (*fast_zero_known) (const struct member *m, uint64_t offset,
                           uint64_t len, bool may_trim);
  void (*learn_zero) (struct member *m, uint64_t offset, uint64_t len);
  /* Whether the member advertises fast zero (NBD) or can learn it. */
  bool (*can_fast_zero) (const struct member *m);

  /* Health, from the prober thread.  check: still there, the same and
   * big enough (no data I/O)?  adopt: take over fresh's descriptors or
   * connections (fresh was opened afresh on the same name and proved to
   * be this member); fresh is then closed.
   */
  int (*check) (struct member *m, char *why, size_t len);
  void (*adopt) (struct member *m, struct member *fresh);
};

/* Whether s is an NBD URI (nbd:, nbds:, nbd+unix:, nbds+unix:,
 * nbd+vsock:, nbds+vsock:).  Inline: the config loader (and its fuzzer)
 * use it without libnbd.
 */
static inline bool
member_is_uri (const char *s)
{
  static const char *const schemes[] = { "nbd://",       "nbds://",
                                         "nbd+unix://",  "nbds+unix://",
                                         "nbd+vsock://", "nbds+vsock://" };
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; ++i)
    if (strncmp (s, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

/* Open member index of name (a path or a URI) with p.  Anything but a
 * regular file, a block device or a URI is refused without blocking (a
 * FIFO, say).  A member that cannot be opened for writing says so
 * (EROFS/EACCES/EPERM kept in errno for the caller to explain -r).  On
 * failure the member is closed again (member_close is safe on it).
 */
extern int member_open (struct member *m, unsigned index, const char *name,
                        const struct member_open_params *p, char *why,
                        size_t len);
/* A test hook: names starting with prefix are opened with ops (the
 * in-memory backend of tests/lib/member_mem.c, "mem:NAME"), before the
 * choice between an NBD URI and a local path.  Nothing in the plugin or
 * the command registers one.  Call before members are opened (it takes
 * no lock); prefix must outlive its use.  Registering a prefix again
 * replaces its ops.  -1 with errno ENOSPC when the (small) table is full.
 */
extern int member_register_backend (const char *prefix,
                                    const struct member_ops *ops);
/* Safe on a member never opened (zeroed) or already closed. */
extern void member_close (struct member *m);
/* Close the device and let go of its claim, keeping the rest (the path,
 * for messages and the status): a member removed from a served volume.
 * member_close frees what is left.
 */
extern void member_release (struct member *m);

/* Own a member while it is served or created (claim.h): a local block
 * device that is written reopened O_EXCL, an OFD lock on every local one
 * (shared when only read).  One in use is refused, naming who holds it
 * (EBUSY).  NBD exports: their server owns them.
 */
static inline int
member_claim (struct member *m, char *why, size_t len)
{
  return m->ops->claim ? m->ops->claim (m, why, len) : 0;
}

static inline int
member_start (struct member *m)
{
  return m->ops->start ? m->ops->start (m) : 0;
}

/* The member's size now (an NBD export's does not change). */
static inline int
member_current_size (struct member *m, uint64_t *size)
{
  return m->ops->current_size (m, size);
}

static inline ssize_t
member_pread (struct member *m, void *buf, size_t count, uint64_t offset,
              bool fresh, char *why, size_t len)
{
  return m->ops->pread (m, buf, count, offset, fresh, why, len);
}

static inline int
member_pwrite (struct member *m, const void *buf, size_t count,
               uint64_t offset, char *why, size_t len)
{
  return m->ops->pwrite (m, buf, count, offset, why, len);
}

static inline int
member_sync (struct member *m, char *why, size_t len)
{
  return m->ops->sync (m, why, len);
}

/* A stand-in for member index NAME when it is missing and the volume is
 * served degraded (member_absent.c): size bytes, nothing opened, every
 * operation failing with EIO.  member_absent: whether m is one.
 */
extern int member_open_absent (struct member *m, unsigned index,
                               const char *name, uint64_t size, char *why,
                               size_t len);
extern bool member_absent (const struct member *m);

/* What the layers above ask of a member's kind, without knowing kinds.
 * may_shrink: a regular file, whose size can change under the volume
 * (a truncate), and which a write past its end would extend.  cut_short:
 * such a file now smaller than the volume needs (or its size unknown).
 * has_inode: known by inode or device number (a local member), not by
 * an address.  same_kind: a and b are members of one kind (a re-probe
 * finds what it opened before).  remote: reached over the network.
 */
extern bool member_may_shrink (const struct member *m);
extern bool member_cut_short (struct member *m);
extern bool member_has_inode (const struct member *m);
extern bool member_same_kind (const struct member *a, const struct member *b);
extern bool member_remote (const struct member *m);

/* "file", "block device" or "NBD export", for messages. */
extern const char *member_what (const struct member *m);

/* Log an I/O error on this member: "member N (PATH): WHAT at member offset
 * OFF: strerror(err)".  Keeps errno = err.
 */
extern void member_io_error (const struct member *m, const char *what,
                             uint64_t offset, int err);

/* How a volume's config file names the volume, for a claim refused
 * because a server holds the member ("in use by nbdkit (pid N) serving
 * volume 'NAME' (config FILE)"): config.h's config_volume_name, given by
 * the plugin and the command, which link the config loader (config/ is
 * above member/: a member never loads a config itself).  Without one,
 * the config file alone is named.  Set once, before any thread starts.
 */
typedef bool (*member_config_namer) (const char *config, char *name,
                                     size_t len);
extern void member_set_config_namer (member_config_namer namer);

#endif /* NBDSTRIPE_MEMBER_H */
