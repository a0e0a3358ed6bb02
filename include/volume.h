/* nbdstripe: a volume = members + layout.
 *
 * Turns one request into per-member work (one operation per touched
 * member), runs it concurrently through ioexec, and gathers the result:
 * errno of the first failure goes back to the caller.  Knows nothing of
 * nbdkit; the plugin translates callbacks and flags into these calls.
 *
 * volume_open checks everything before the volume is usable and writes
 * nothing: members exist, are files or block devices, are distinct, are at
 * least one chunk, the chunk is valid.
 */
#ifndef NBDSTRIPE_VOLUME_H
#define NBDSTRIPE_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

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

struct volume {
  struct layout layout;
  unsigned nr_members;
  struct member members[LAYOUT_MAX_MEMBERS];
  bool readonly;
  enum cache_mode cache;
  uint64_t data_offset;     /* where data starts on every member */
  uint32_t min_block;       /* largest logical block among members */
  uint32_t preferred_block; /* avoids read-modify-write on members */
  /* Optional.  With it, every member operation is recorded, and requests
   * touching a failed member fail at once with EIO.
   */
  struct health *health;
  /* Header mode: what a re-probed member's header must say. */
  bool has_header;
  uint8_t array_uuid[16];
};

/* data_offset: where data starts on each member (0 without a header).
 * data_sizes: each member's usable data size as recorded in its header,
 * or NULL to use each member's size less data_offset (rounded down to
 * whole chunks by the layout).
 */
extern int volume_open (struct volume *v, unsigned nr_members,
                        const char *const *paths, uint64_t chunk,
                        enum cache_mode cache, bool readonly,
                        uint64_t data_offset, const uint64_t *data_sizes);
extern void volume_close (struct volume *v);
/* Start what needs threads (remote members' dispatchers): after nbdkit
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

/* Report data/hole runs of [offset, offset + count) in order through add
 * (which may merge adjacent runs of the same type); stops early after the
 * first run when req_one.  A logical range is a hole only where its member
 * range is a hole.
 */
typedef int (*volume_extent_fn) (void *opaque, uint64_t offset,
                                 uint64_t length, bool is_hole);
extern int volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                           bool req_one, volume_extent_fn add, void *opaque);

/* The volume's side of health (see struct health_ops): check that a
 * member is still the same and big enough, reopen and read it, adopt the
 * reopened descriptors.
 */
extern void volume_health_ops (struct volume *v, struct health_ops *ops);

#endif /* NBDSTRIPE_VOLUME_H */
