/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the members' on-disk metadata behind one interface, as md
 * has struct super_type: one implementation per format (meta_header.c:
 * nbdstripe's 4 KiB header; meta_md.c: Linux md v1.x superblocks;
 * meta_none.c: none, the config says it all).
 *
 * A format knows how to read one member's record and what it says in the
 * terms every format shares (struct meta_member: array UUID, member UUID,
 * slot, generation, data area), what it checks beyond those, how to
 * write a record (create, a replace's NEW, a generation bump, a member
 * taken back, one marked replaced) and whether it records drop-outs.
 * The generic assembly (assemble.c) and the volume use formats only
 * through this header: nothing outside plugin/meta/ branches on the
 * format or calls an encoder.
 *
 * At run time a volume holds one struct meta: the format's ops, the
 * array's identity and generation, each member's UUID and the generation
 * its record holds, and the format's own records (the agreed header; each
 * member's md superblock).  Its lock guards that bookkeeping, never I/O:
 * a member that hangs in a write must not hold up anyone else.
 */
#ifndef NBDSTRIPE_META_H
#define NBDSTRIPE_META_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "layout.h"
#include "lost.h"

struct member;
struct assembly;

#define META_UUID_SHOWN 37
/* An md name escaped (\xNN for every byte not printable), or a header's
 * name (63 characters at most).
 */
#define META_NAME_SHOWN (4 * 32 + 1)
/* What create writes at a member's start: an nbdstripe header at 0, an
 * md 1.2 superblock at 4 KiB (the other 4 KiB zeroed).
 */
#define META_AREA 8192u
/* What a re-probe reads of a device afresh: its first 4 KiB (the device
 * must answer; a header is there).
 */
#define META_PROBE_BYTES 4096u

/* What one member's record says. */
struct meta_member {
  uint8_t array_uuid[16];
  uint8_t member_uuid[16];
  char name[META_NAME_SHOWN]; /* the array's, printable */
  unsigned slot;              /* its position in the array (md: role) */
  unsigned count;             /* members the array has */
  uint64_t events;            /* generation (md: event count) */
  uint64_t data_offset;       /* bytes */
  uint64_t data_size;         /* bytes */
  bool reshape;               /* a reshape is under way (count: the union) */
  bool removed;               /* removed from the volume (a shrink) */
  bool replaced;              /* replaced by another device */
  bool creating;              /* written by a create that may not have
                               * finished (header.h) */
  uint64_t behind;            /* bit k: slot k missed this generation */
  uint32_t roster;            /* the members its update was written for
                               * (meta_roster; 0: not recorded) */
  void *rec;                  /* the format's decoded record (heap) */
};

/* A reshape (grow, shrink) as the members' metadata records it.  Members
 * are numbered in the union of both layouts (restripe.h).
 */
struct meta_reshape {
  bool active;
  bool backward;
  uint64_t position; /* positions moved */
  bool journal;      /* the journal holds the window below */
  uint64_t journal_position, journal_length;
  uint32_t journal_crc;
  uint64_t old_sizes[LAYOUT_MAX_MEMBERS]; /* 0: joining */
  uint64_t new_sizes[LAYOUT_MAX_MEMBERS]; /* 0: leaving */
};

/* A format's verdict on one member while assembling. */
enum meta_verdict {
  META_OK,
  META_BAD,  /* a problem (logged), the member still counts */
  META_DROP, /* a problem (logged), the member is left out of what
              * follows (order, generation) */
};

/* The words a format's messages use where the generic assembly speaks. */
struct meta_words {
  const char *record;   /* "header", "md superblock" */
  const char *uuid;     /* "member UUID", "device UUID" */
  const char *other;    /* "array", "md array" (another ...) */
  const char *array;    /* "volume", "md array" (... of VOLUME 'x') */
  const char *slot;     /* "index", "role" */
  const char *is_slot;  /* "is member", "has role" */
  const char *slot_in;  /* "of", "in md array" */
  const char *nothing;  /* no member usable: what is missing */
};

struct meta;

struct meta_ops {
  const char *name; /* as in the config: "header", "md", "none" */
  struct meta_words words;
  /* Whether a member dropping out of a served volume is recorded (a new
   * generation on the others), so that an older copy of it is refused.
   * When not, dropouts_why says why, and what takes a member back.  A
   * format that records them moves every member to the next generation
   * in each update that spans members (meta_update), so that a member
   * one generation behind the newest is the trace of an update a crash
   * cut short, and assembles (header.h, "generations").
   */
  bool records_dropouts;
  const char *dropouts_why;
  /* Whether a member's record proves which member a device is (a
   * re-probe then adopts another file that proves to be it).
   */
  bool proves_identity;
  /* Why the format cannot record a reshape (NULL: it can). */
  const char *no_reshape;
  /* Whether the records keep the volume's lost ranges (lost.h). */
  bool keeps_lost;

  /* ---- assembly (assemble.c); NULL load: nothing on the members ---- */

  /* Read the record of member d (opened raw, read-only): -1 with why. */
  int (*load) (struct member *d, struct meta_member *mm, char *why,
               size_t len);
  void (*uuid_shown) (const uint8_t uuid[16], char out[META_UUID_SHOWN]);
  /* Like every op here, these fill why and log nothing: assembly (the
   * edge) logs.  Where they may find several problems, each is a line of
   * why (util.h's why_line), and assembly logs each.
   *
   * The array (ref: the record most members agree on) against the
   * config: false with every problem in why.
   */
  bool (*check_array) (const struct stripe_config *cfg,
                       const struct meta_member *ref, char *why, size_t len);
  /* Member i of the array (the config's, size bytes) against ref: its
   * problems in why.
   */
  enum meta_verdict (*check_member) (const struct stripe_config *cfg,
                                     unsigned i, const struct meta_member *ref,
                                     const struct meta_member *mm,
                                     uint64_t size, char *why, size_t len);
  /* Member i is behind the newest generation: what to say, in why. */
  void (*say_stale) (const struct stripe_config *cfg, unsigned i,
                     const struct meta_member *mm, uint64_t newest,
                     char *why, size_t len);
  /* Everything checked: fill in a's layout, size rule, data areas.  -1
   * with why when it cannot be served.
   */
  int (*finish) (const struct stripe_config *cfg, struct assembly *a,
                 char *why, size_t len);
  /* Member i could not be opened or its record read, and the volume is
   * assembled degraded (assemble_degraded): whether the records read
   * (a->members, a->ref speaking for them) fix its place in the layout
   * exactly -- its slot, and the data size on which the zones and the
   * volume's size depend -- so that finish fills in its data area as
   * for the others.  False, with why (lines naming the member, its
   * file and what no record holds), when they do not: a place is never
   * guessed, since a wrong one serves other members' bytes.
   */
  bool (*places_missing) (const struct stripe_config *cfg,
                          const struct assembly *a, unsigned i, char *why,
                          size_t len);

  /* ---- create (nbdstripe create) ---- */

  /* A config this format cannot create (why: a whole line). */
  int (*create_check) (const struct stripe_config *cfg, char *why,
                       size_t len);
  /* Optional: the data offset create gives members of these device
   * sizes when the config names none (room for the allocation map of
   * the largest volume they can make); the config's when it does.
   */
  uint64_t (*create_data_offset) (const struct stripe_config *cfg,
                                  const uint64_t *device_sizes, unsigned n);
  /* Optional: where the array's allocation map lies on every member
   * (false: it has none); create writes it, all "in use", before any
   * record.
   */
  bool (*create_map) (const void *array, uint64_t *offset, uint64_t *bytes);
  /* The array's records for the layout l (heap, free()d by the caller). */
  void *(*create_array) (const struct stripe_config *cfg,
                         const struct layout *l, const uint8_t uuid[16],
                         uint64_t now);
  /* Member i's record into area (META_AREA bytes); *blocks: bit k, the
   * 4 KiB at k * 4096 written; id: the member UUID it holds.
   */
  void (*create_member) (void *array, unsigned i, uint64_t member_size,
                         uint8_t *area, unsigned *blocks, uint8_t id[16]);
  /* The record create_member made in area, as it stays once every
   * member has one (NULL: written once).  A format that can say "being
   * created" has create write that on every member first, then this:
   * a crash in between leaves members that a new create may overwrite
   * (meta_unfinished_create), and assembly names the create that did not
   * finish.  roster: the XOR of every member's meta_roster.
   */
  void (*create_final) (uint8_t *area, uint32_t roster);
  /* What reading back a member's first META_AREA bytes shows: the member
   * UUID create_member wrote (false: no record of this format there).
   */
  bool (*read_back) (const uint8_t *area, uint8_t id[16]);
  /* The line create prints: what was created. */
  int (*describe_created) (const struct stripe_config *cfg,
                           const struct layout *l, const char *uuid,
                           const char *size, char *out, size_t len);

  /* ---- run time (struct meta) ---- */

  /* The format's records from a's (state: heap). */
  int (*init) (struct meta *m, const struct assembly *a);
  /* Write member i's record to device d: member UUID uuid, generation
   * events, marked replaced or not; durable on return.  NULL: nothing
   * to write in.
   */
  int (*write) (struct meta *m, unsigned i, struct member *d,
                const uint8_t uuid[16], uint64_t events, unsigned mark,
                char *why, size_t len);
  /* The end of a reshape: the records' layout from now on. */
  void (*end_reshape) (struct meta *m, unsigned count, const uint64_t *sizes);
  /* Erase a record write() put on d (a NEW not switched to). */
  int (*clear) (struct meta *m, unsigned i, struct member *d, char *why,
                size_t len);
  /* A device opened afresh for member i (path): its record (the first
   * META_PROBE_BYTES read) says it is member i at *events, or -1 with
   * why.
   */
  int (*check_probed) (struct meta *m, unsigned i, const char *path,
                       const uint8_t *area, size_t n, uint64_t *events,
                       char *why, size_t len);
  /* Whether d (size bytes) can hold member i's record and need bytes of
   * data (md 1.0 keeps its superblock past the data).
   */
  int (*fits) (const struct meta *m, unsigned i, uint64_t size, uint64_t need,
               char *why, size_t len);
  /* Optional: an allocation map (alloc.h) for a volume made before
   * maps existed, in the room its records leave: where and of which
   * region (false: none fits), for a volume of size bytes whose members
   * may make one of max_size.  set_map: the records say so from the
   * next update on (the map written on every member first).
   */
  bool (*map_room) (const struct meta *m, uint64_t size, uint64_t max_size,
                    unsigned *shift, uint64_t *offset, uint64_t *bytes);
  void (*set_map) (struct meta *m, unsigned shift, uint64_t offset,
                   uint64_t bytes);
  /* Bytes on every member where nothing lives (learning zero methods). */
  bool (*scratch) (const struct meta *m, uint64_t *offset, uint64_t *len);
};

extern const struct meta_ops meta_header_ops;
extern const struct meta_ops meta_md_ops;
extern const struct meta_ops meta_none_ops;

extern const struct meta_ops *meta_ops_for (enum metadata_mode mode);

/* What write() marks a record with. */
#define META_MARK_REPLACED 1u
#define META_MARK_REMOVED 2u

/* The generation and identity a member's record had (a replace keeps
 * old's to mark it).
 */
struct meta_slot {
  uint8_t uuid[16];
  uint64_t events;
  bool removed; /* no longer a member (a shrink): its record is left be */
};

struct meta {
  const struct meta_ops *ops;
  bool writable; /* the volume is served writable */
  pthread_mutex_t lock;
  /* One update spanning members at a time (meta_update), from first
   * write to last: two interleaved would leave members two generations
   * apart.  Taken without lock held, before it.
   */
  pthread_mutex_t update_lock;
  unsigned nr;   /* members (the union, while reshaping) */
  /* Each member's place in its layout, as its record says it (the
   * volume's member index but after a shrink).
   */
  uint8_t slot[LAYOUT_MAX_MEMBERS];
  struct meta_reshape reshape; /* under lock */
  uint64_t events; /* the volume's generation */
  uint8_t uuid[16];
  char name[META_NAME_SHOWN];
  struct meta_slot members[LAYOUT_MAX_MEMBERS];
  /* Members (the volume's numbering) that missed a generation because
   * they dropped out: each update writes it on the others, so that a
   * member one generation behind is told from one a crash left there.
   */
  uint64_t behind;
  /* The members the last update was written for (meta_roster), written
   * with every record: assembly takes a member one generation behind only
   * if the members it assembles are those (header.h, generations).
   */
  uint32_t roster;
  struct lost lost; /* the volume's lost ranges, as the records say */
  void *state;      /* the format's */
};

/* From an assembly (NULL: an ad hoc volume, no metadata). */
extern int meta_init (struct meta *m, const struct assembly *a, unsigned nr,
                      bool writable);
extern void meta_free (struct meta *m);

static inline const char *
meta_format (const struct meta *m)
{
  return m->ops->name;
}

/* A reshape's state from now on (records written by meta_record_all). */
extern void meta_set_reshape (struct meta *m, const struct meta_reshape *r);
/* Whether the records say a reshape is under way (paused or running). */
extern bool meta_reshape_recorded (struct meta *m);
/* Member i joins (a grow): a member UUID of its own, the volume's
 * generation.
 */
extern void meta_add_member (struct meta *m, unsigned i);
/* One update that spans members: the next generation, written with
 * the records' state as it is now (reshape, behind, lost ranges) on
 * every member devs[i] names (NULL: not written; removed members never
 * are), one after the other, each durable before the next, the highest
 * index first (a grow's joining members hold the newest record first:
 * header.h says why a crash anywhere in between assembles).  what says
 * which update it is, for messages.  Stops at the first member that
 * fails, -1 with why, unless keep_going: then each failure is logged
 * and the others written all the same (-1 at the end).
 */
extern int meta_update (struct meta *m, struct member *const *devs,
                        const char *what, bool keep_going, char *why,
                        size_t len);
/* meta_update that stops at the first failure. */
static inline int
meta_record_all (struct meta *m, struct member *const *devs, char *why,
                 size_t len)
{
  return meta_update (m, devs, "record", false, why, len);
}
/* Member i dropped out: the next updates say it is behind, until it is
 * written again at the volume's generation.
 */
extern void meta_dropped (struct meta *m, unsigned i);
/* The volume's lost ranges (lost.h), kept here and written with every
 * record (the next meta_update makes a change durable).  add and remove
 * return whether the list changed (*merged: ranges merged across a gap
 * to make room); touches whether [offset, offset + length) touches one.
 */
extern bool meta_lost_add (struct meta *m, uint64_t offset, uint64_t length,
                           bool *merged);
extern bool meta_lost_remove (struct meta *m, uint64_t offset,
                              uint64_t length);
extern bool meta_lost_touches (struct meta *m, uint64_t offset,
                               uint64_t length);
extern bool meta_lost_truncate (struct meta *m, uint64_t size);
extern void meta_lost_get (struct meta *m, struct lost *out);

/* Tests: -D stripe.meta_log=1 (NBDSTRIPE_DEBUG_META_LOG=1 for the
 * command) logs each header write with its number, and
 * -D stripe.meta_crash=N (NBDSTRIPE_DEBUG_META_CRASH=N) kills the
 * process with SIGKILL right after the Nth is durable: a crash between
 * any two writes of any update, made to happen.
 */
extern int meta_debug_crash;
extern int meta_debug_log;
/* A header write (what: "generation 5", "cleared") to member i (path)
 * is durable: counted, logged, and the crash above.
 */
extern void meta_written (unsigned i, const char *path, const char *what);
/* The reshape is over: the records describe the new layout, member i
 * its slot[i] in it (count members), sizes by slot.
 */
extern void meta_end_reshape (struct meta *m, unsigned count,
                              const uint64_t *sizes, const uint8_t *slot);
/* d, member i, was removed from the volume: say so on it. */
extern int meta_mark_removed (struct meta *m, unsigned i, struct member *d,
                              char *why, size_t len);

/* Whether anything on the members says which device is a member (else
 * only the config does).
 */
static inline bool
meta_on_members (const struct meta *m)
{
  return m->ops->write != NULL;
}

/* The array UUID in the format's spelling ("" without metadata). */
extern const char *meta_uuid_shown (const struct meta *m,
                                    char out[META_UUID_SHOWN]);
extern uint64_t meta_generation (struct meta *m);
extern struct meta_slot meta_member_slot (struct meta *m, unsigned i);

/* Whether the volume records drop-outs now (the format does, and the
 * volume is writable).
 */
static inline bool
meta_records_dropouts (const struct meta *m)
{
  return m->ops->records_dropouts && m->writable;
}

/* Member i's record, on d, at generation events (its UUID as it is):
 * one member alone (taken back, accepted).
 */
extern int meta_write_generation (struct meta *m, unsigned i,
                                  struct member *d, uint64_t events,
                                  char *why, size_t len);

/* A replace's NEW: its record as member i at the volume's generation,
 * under a new member UUID (in *uuid).  With no metadata: only synced.
 */
extern int meta_write_new (struct meta *m, unsigned i, struct member *d,
                           uint8_t uuid[16], char *why, size_t len);
/* Undo meta_write_new (best effort; logged). */
extern void meta_clear_new (struct meta *m, unsigned i, struct member *d,
                            const char *path);
/* d, once member i with identity old, is not any more: say so on it.
 * -1 (why) when it cannot be written or the format has nowhere to.
 */
extern int meta_mark_replaced (struct meta *m, unsigned i, struct member *d,
                               const struct meta_slot *old, char *why,
                               size_t len);
/* Member i is now the device whose record meta_write_new wrote. */
extern void meta_switched (struct meta *m, unsigned i, const uint8_t uuid[16]);

/* A re-probe of member i: the record read from the fresh device (its
 * first META_PROBE_BYTES) must say it is member i at the generation
 * member i had; *events: what it holds.  Formats that prove nothing
 * (md, none) accept anything at the volume's generation.
 */
extern int meta_check_probed (struct meta *m, unsigned i, const char *path,
                              const uint8_t *area, size_t n, uint64_t *events,
                              char *why, size_t len);
/* Member i's record holds events now (taken back). */
extern void meta_member_at (struct meta *m, unsigned i, uint64_t events);

static inline int
meta_fits (const struct meta *m, unsigned i, uint64_t size, uint64_t need,
           char *why, size_t len)
{
  return m->ops->fits ? m->ops->fits (m, i, size, need, why, len) : 0;
}

static inline bool
meta_scratch (const struct meta *m, uint64_t *offset, uint64_t *len)
{
  return m->ops->scratch && m->ops->scratch (m, offset, len);
}

/* What metadata the first bytes of a device hold, of any format (an
 * nbdstripe header at 0, an md superblock at 0 or 4 KiB), in words
 * ("holds an nbdstripe header"); NULL when none.  n: bytes in buf.
 */
extern const char *meta_recognise (const uint8_t *buf, size_t n, char *what,
                                   size_t len);
/* An md 1.0 superblock (near the end of a device) in the 4 KiB of buf. */
extern bool meta_md_tail (const uint8_t *buf, size_t n);
/* Where an md 1.0 superblock of a device of size bytes is. */
extern bool meta_md_tail_location (uint64_t size, uint64_t *at);

/* The nbdstripe header of one member (a path or an NBD URI), read-only,
 * for nbdstripe inspect: -1 with err, *blank when there is no header at
 * all (no magic).
 */
struct header;
extern int meta_header_read (const char *path, struct header *h, bool *blank,
                             char *err, size_t len);

/* A random (version 4) UUID. */
extern void meta_random_uuid (uint8_t uuid[16]);

/* Whether buf (a member's first n bytes) holds the record of a create
 * of volume name that did not finish (header.h, HEADER_FLAG_CREATING).
 */
extern bool meta_unfinished_create (const uint8_t *buf, size_t n,
                                    const char *name);

/* A member's share of a roster: rosters are the XOR of their members'
 * shares, whatever their order.  Never 0 for a whole roster in practice;
 * 0 means none recorded.
 */
extern uint32_t meta_roster (const uint8_t member_uuid[16]);

/* Whether buf (NEW's first n bytes) holds a copy of member index that
 * a replace onto NEW left, cut short before the volume switched to it or
 * after it switched away: a header of the same volume as member (the
 * member's first mn bytes) and the same index, but not the member's own
 * (NEW was given a UUID of its own) and not marked replaced or removed.
 * The volume uses none of it: replace overwrites it without force, so
 * that the same replace can be run again after a crash.
 */
extern bool meta_unfinished_copy (const uint8_t *buf, size_t n,
                                  const uint8_t *member, size_t mn,
                                  unsigned index);

/* Whether buf (a device's first n bytes) holds a copy of one of m's
 * members that a replace onto the device left, cut short: a header of
 * m's volume whose member UUID is not that member's, not marked
 * replaced, removed or creating.  The volume uses none of it.
 */
extern bool meta_copy_left (struct meta *m, const uint8_t *buf, size_t n);

/* How create describes a member that holds an nbdstripe header ("is
 * already member 1 of nbdstripe volume 'x' (UUID)"); NULL when none.
 */
extern const char *meta_describe_header (const uint8_t *buf, size_t n,
                                         char *what, size_t len);

#endif /* NBDSTRIPE_META_H */
