/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume = members + layout.
 *
 * Turns one request into per-member work (one operation per touched
 * member: reads and writes through plan.h, trim, zero and block status one
 * range per member, flush to each), runs it concurrently through ioexec,
 * records each member's outcome with health and gathers the result: errno
 * of the first failure goes back to the caller.  Knows members only
 * through member.h and nothing of nbdkit; the plugin translates callbacks
 * and flags into these calls.
 *
 * volume_open checks everything before the volume is usable and writes
 * nothing: members exist, are files, block devices or NBD exports, none
 * is another's alias (identity.h: the same file, a loop device over
 * another member's file, overlapping partitions, two spellings of one NBD
 * export), each is at least one chunk, the chunk is valid, the volume's
 * size fits NBD's signed 64 bits.  A served volume owns its members
 * (claim.h).
 *
 * A request the members cannot take -- not aligned to the largest of
 * their minimum I/O sizes, or beyond the end -- is the client's error:
 * EINVAL before any member is touched, and no member's health.  A request
 * touching a failed member fails at once with EIO, touching nothing.
 *
 * Identity and freshness: a member that fails is re-probed (health) and
 * adopted again only if it proves to be the same member.  Without a
 * header: the same inode or device.  With a header: the volume's array
 * UUID, the member's index and member UUID, and its generation (events):
 * when a member drops out of a writable volume that goes on being served,
 * the generation is bumped on every member still in it -- the one
 * dropping out too, through the descriptor still open, when it answers --
 * so that an older copy of a member, put in its place, is told apart and
 * refused ("older generation 41 < 42"), at re-probe and at the next
 * assembly.  A member adopted again gets the current generation.
 *
 * A write never extends a member file: before a write, each regular-file
 * member it touches must still be as large as the volume needs, and its
 * size must not have changed by the time the write is done; a member
 * found truncated is failed (named) and the write fails with EIO.
 */
#ifndef NBDSTRIPE_VOLUME_H
#define NBDSTRIPE_VOLUME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "header.h"
#include "health.h"
#include "layout.h"
#include "member.h"

/* How members are written, as qemu's cache modes.  writeback: page cache,
 * durable on FLUSH/FUA.  writethrough: every write durable before it is
 * acknowledged.  direct: O_DIRECT, no page cache (durable on FLUSH/FUA).
 */
enum cache_mode { CACHE_WRITEBACK, CACHE_WRITETHROUGH, CACHE_DIRECT };

extern const char *cache_mode_name (enum cache_mode mode);
/* Returns -1 for an unknown name. */
extern int cache_mode_parse (const char *name, enum cache_mode *mode);

struct assembly;
struct md_super;
struct replace;
struct scrub;

/* Every request is counted from its start, before it looks at a member or
 * at v->rep, to its end (volume_drain, volume_quiesce).  Two counters and
 * an epoch: a request counts itself in the epoch's counter and checks the
 * epoch again (it changed meanwhile: it counts itself again, in the new
 * one).  A drain flips the epoch and waits for the old counter to reach
 * zero: every request that started before the flip has ended, however
 * many start after it.  Bit 1 of the epoch closes the gate: new requests
 * wait at the entry, before they touch anything.
 */
struct volume_gate {
  _Atomic unsigned epoch;       /* bit 0: the counter; bit 1: closed */
  _Atomic unsigned long count[2];
  _Atomic bool draining;        /* a drainer waits: wake it at zero */
  _Atomic unsigned waiters;     /* requests waiting for it to open */
  pthread_mutex_t lock;         /* cond: the drainer, and requests waiting
                                 * for the gate to open */
  pthread_cond_t cond;
  pthread_mutex_t drain_lock;   /* one drain (or quiesce) at a time */
  uint64_t closed_ns;           /* monotonic: when the last quiesce
                                 * closed the gate */
};

/* Everything a volume is opened with: no global settings. */
struct volume_options {
  uint64_t chunk;
  enum cache_mode cache;
  bool readonly;
  /* Own the members (serving): O_EXCL, OFD locks.  false: only look
   * (nbdstripe check).
   */
  bool claim;
  bool uring;           /* io_uring (false: the portable path) */
  bool raw;             /* members opened raw (member.h): a check, no
                         * threads, one plain connection per NBD member */
  unsigned connections; /* per NBD member at most (multi-conn) */
  unsigned timeout;     /* s: an NBD request unanswered this long is cut
                         * (health.io_timeout); 0 never */
  /* What assemble() found: layout, size rule, each member's data offset
   * and size (metadata: the members'; "none": the config's).  NULL (ad
   * hoc, file=...): md's alternate layout, data from byte 0, each
   * member's usable size its size rounded down to whole chunks.
   */
  const struct assembly *assembly;
};

struct volume {
  struct layout layout;
  unsigned nr_members;
  struct member members[LAYOUT_MAX_MEMBERS];
  bool readonly;
  bool uring;
  enum cache_mode cache;
  uint32_t min_block;       /* the largest of the members' min_io */
  uint32_t preferred_block; /* avoids read-modify-write on members */
  /* Optional.  With it, every member operation is recorded, and requests
   * touching a failed member fail at once with EIO.
   */
  struct health *health;
  /* Header mode: the agreed header (hdr.events is the volume's
   * generation), each member's own UUID, and the generation each
   * member's header holds as far as we know (header_lock).
   */
  bool has_header;
  struct header hdr;
  uint8_t member_uuid[LAYOUT_MAX_MEMBERS][16];
  uint64_t member_events[LAYOUT_MAX_MEMBERS];
  pthread_mutex_t header_lock;
  /* md mode: each member's superblock as assembled (the assembly's). */
  const struct md_super *md_sb;
  /* A member being replaced (replace.h), read on every request; the
   * replaces so far (kept until close: requests may still hold one).
   */
  struct replace *_Atomic rep;
  struct replace *replaces;
  pthread_mutex_t replace_lock;
  /* Set (under replace_lock) while a replace is being started: NEW
   * opened, checked and claimed without the lock held.
   */
  bool rep_starting;
  /* Held while a member's state changes under it: a re-probe adopting
   * it, a replace switching to the new device, a generation bump writing
   * headers.  Never taken on the I/O path.
   */
  pthread_mutex_t swap_lock;
  struct volume_gate gate;
  /* The scrub (scrub.h): the running or last one, under scrub_lock. */
  struct scrub *scrub;
  pthread_mutex_t scrub_lock;
};

/* Wait until every request that started before this call has ended
 * (requests that start meanwhile go on).  Not on the I/O path.
 */
extern void volume_drain (struct volume *v);
/* Hold new requests at the entry (they wait, none fails) and wait for
 * every request in flight to end: nothing touches a member until
 * volume_resume.  Then a member may change under the volume (a replace's
 * switch).  The time in between is all clients' wait: keep it short.
 */
extern void volume_quiesce (struct volume *v);
/* Let requests in again; returns how long they were held (ns). */
extern uint64_t volume_resume (struct volume *v);

/* Write member i's header (on device m, which may not be members[i] yet)
 * with member UUID uuid, generation events and flags, durably.
 */
extern int volume_write_header (struct volume *v, unsigned i,
                                 struct member *m, const uint8_t uuid[16],
                                 uint64_t events, uint32_t flags, char *why,
                                 size_t len);

/* Bump the generation on every member not failed (headers only), so that
 * an older copy of any of them -- member skip's, which dropped out, or a
 * replaced one -- is told apart.  why: for the log.
 */
extern void volume_bump_generation (struct volume *v, int skip,
                                    const char *why);

extern int volume_open (struct volume *v, unsigned nr_members,
                        const char *const *paths,
                        const struct volume_options *o);
extern void volume_close (struct volume *v);
/* Start what needs threads (NBD members' dispatchers): after nbdkit
 * forks.
 */
extern int volume_start (struct volume *v);

extern int volume_pread (struct volume *v, void *buf, uint64_t count,
                         uint64_t offset);
extern int volume_pwrite (struct volume *v, const void *buf, uint64_t count,
                          uint64_t offset, bool fua);
extern int volume_flush (struct volume *v);
extern int volume_trim (struct volume *v, uint64_t count, uint64_t offset,
                        bool fua);
extern int volume_zero (struct volume *v, uint64_t count, uint64_t offset,
                        bool may_trim, bool fast, bool fua);

/* Whether a fast zero can ever work (every member advertises it or can
 * learn it): what the plugin advertises.
 */
extern bool volume_can_fast_zero (const struct volume *v);

/* Report block status runs of [offset, offset + count) in order through
 * add (which may merge adjacent runs of the same type); stops early after
 * the first run when req_one.  flags (MEMBER_EXTENT_HOLE, _ZERO) are
 * those of the member range underneath, unchanged: a hole is zero only
 * where the member says so.  Each touched member is asked once, all at
 * once (more only when its range has more runs than were sent).
 */
typedef int (*volume_extent_fn) (void *opaque, uint64_t offset,
                                 uint64_t length, uint32_t flags);
extern int volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                           bool req_one, volume_extent_fn add, void *opaque);

/* For the scrub (scrub.h): member i's bytes [offset, offset + count)
 * read from the device itself, past any cache (member_pread, fresh),
 * counted in the gate as a request is (a replace's switch waits for it),
 * outside health's books.  Returns the bytes read (fewer only at the end
 * of the member), or -1 with errno and why; member i failed: -1 with
 * ENODEV, nothing read.
 */
extern ssize_t volume_member_read (struct volume *v, unsigned i, void *buf,
                                   size_t count, uint64_t offset, char *why,
                                   size_t len);

/* The volume's side of health (see struct health_ops): check that a
 * member is still the same and big enough, reopen and read it, adopt the
 * reopened member, record that one dropped out.
 */
extern void volume_health_ops (struct volume *v, struct health_ops *ops);

#endif /* NBDSTRIPE_VOLUME_H */
