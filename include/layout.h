/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the RAID-0 layout, pure arithmetic.
 *
 * A layout maps a logical byte range of the volume onto (member, member
 * offset) pieces.  It does no I/O and knows nothing of files or nbdkit.
 *
 * What a caller may rely on:
 * - Each member's usable size is its size rounded down to whole chunks.
 * - Members of equal size: logical chunk k lives on member k mod N at member
 *   offset (k div N) * chunk, exactly as Linux md raid0 and dm-stripe.
 * - Members of different sizes are used fully through zones (as md raid0):
 *   zone 0 stripes over all members up to the smallest size, each later zone
 *   over the members that still have room, in member order.  Inside a zone
 *   a chunk goes to member (chunk number mod members of the zone), and
 *   md raid0 has two layouts that differ in which chunk number: the
 *   zone-relative one, RAID0_ALT_MULTIZONE_LAYOUT (LAYOUT_MD_ALT, 2), or
 *   the volume's, RAID0_ORIG_LAYOUT (LAYOUT_MD_ORIG, 1) -- the same
 *   mapping with the zone's members rotated.  In zone 0 and whenever a
 *   zone starts on a multiple of its width they agree.  Layouts are named
 *   by md's own numbers (the raid0 "layout" of an md superblock); a number
 *   never changes meaning.
 * - The pieces of one request that fall on one member are in increasing
 *   member offset and contiguous on that member, so a request touches each
 *   member in ONE contiguous member range (layout_spans).
 * - Volume size: md's rule (raid0_size), the sum over members of the
 *   rounded size in sectors masked with ~(chunk sectors - 1); for a
 *   power-of-two chunk that is the sum of the rounded sizes, for another
 *   it can be smaller than the zones cover (md exports no more; neither
 *   do we, so that a filesystem made here fits on md).  Headers of
 *   version 1 recorded volumes sized as the sum of the rounded sizes
 *   (LAYOUT_SIZE_ZONES).
 */
#ifndef NBDSTRIPE_LAYOUT_H
#define NBDSTRIPE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#define LAYOUT_MD_ORIG 1u /* md raid0 RAID0_ORIG_LAYOUT */
#define LAYOUT_MD_ALT 2u  /* md raid0 RAID0_ALT_MULTIZONE_LAYOUT */
#define LAYOUT_MAX_MEMBERS 64
#define LAYOUT_CHUNK_ALIGN 4096u /* chunk must be a multiple of this */
#define LAYOUT_DEFAULT_CHUNK (128u * 1024)

/* How the volume's size follows from the members (see above). */
enum layout_size_rule {
  LAYOUT_SIZE_MD,    /* md raid0's */
  LAYOUT_SIZE_ZONES, /* all the zones: nbdstripe header version 1 */
};

struct layout_zone {
  uint64_t start;   /* first logical byte of the zone */
  uint64_t end;     /* one past its last logical byte */
  uint64_t dev_start; /* member offset where the zone begins */
  unsigned nr_devs; /* members striped in this zone */
  unsigned shift;   /* LAYOUT_MD_ORIG: by how many the members rotate */
  /* The member of each zone-relative chunk number mod nr_devs: member
   * indices increasing (LAYOUT_MD_ALT), rotated left by shift (ORIG).
   */
  unsigned devs[LAYOUT_MAX_MEMBERS];
};

struct layout {
  uint32_t id;    /* LAYOUT_MD_* */
  enum layout_size_rule size_rule;
  uint64_t chunk; /* bytes */
  unsigned nr_members;
  uint64_t member_size[LAYOUT_MAX_MEMBERS]; /* usable bytes (whole chunks) */
  unsigned nr_zones;
  struct layout_zone zones[LAYOUT_MAX_MEMBERS];
  uint64_t size; /* logical size of the volume */
};

/* One piece of a request: bytes that are contiguous both logically and on
 * one member, never crossing a chunk boundary.
 */
struct layout_piece {
  uint64_t offset; /* logical offset */
  uint64_t length;
  unsigned member;
  uint64_t member_offset;
};

/* The contiguous range of one member touched by a request. */
struct layout_span {
  bool touched;
  uint64_t member_offset;
  uint64_t length;
  unsigned nr_pieces;
};

/* Why layout_init refused. */
enum layout_error {
  LAYOUT_OK = 0,
  LAYOUT_ERR_NO_MEMBERS,       /* nr_members == 0 */
  LAYOUT_ERR_TOO_MANY_MEMBERS, /* nr_members > LAYOUT_MAX_MEMBERS */
  LAYOUT_ERR_CHUNK,            /* chunk zero or not a multiple of 4 KiB */
  LAYOUT_ERR_MEMBER_TOO_SMALL, /* a member is smaller than one chunk */
  LAYOUT_ERR_TOO_BIG,          /* total size overflows */
  LAYOUT_ERR_ID,               /* not LAYOUT_MD_ORIG or LAYOUT_MD_ALT */
};

/* Build the layout id (LAYOUT_MD_ORIG or LAYOUT_MD_ALT) sized by rule.
 * On error returns the reason and, for LAYOUT_ERR_MEMBER_TOO_SMALL, sets
 * *bad_member (may be NULL).
 */
extern enum layout_error layout_init_as (struct layout *l, uint32_t id,
                                         enum layout_size_rule rule,
                                         uint64_t chunk, unsigned nr_members,
                                         const uint64_t *member_sizes,
                                         unsigned *bad_member);

/* The layout of new volumes: LAYOUT_MD_ALT, md's size rule. */
static inline enum layout_error
layout_init (struct layout *l, uint64_t chunk, unsigned nr_members,
             const uint64_t *member_sizes, unsigned *bad_member)
{
  return layout_init_as (l, LAYOUT_MD_ALT, LAYOUT_SIZE_MD, chunk, nr_members,
                         member_sizes, bad_member);
}

/* Whether md's two layouts map these members alike (no zone after the
 * first needs a rotation): then an md array that does not say which it
 * uses can be served either way.
 */
extern bool layout_md_layouts_agree (uint64_t chunk, unsigned nr_members,
                                     const uint64_t *member_sizes);

/* "original" / "alternate" for LAYOUT_MD_ORIG / LAYOUT_MD_ALT (md's
 * words, as mdadm --layout takes them); NULL for another number.
 * layout_parse_name: the reverse (also "1", "2"), 0 when unknown.
 */
extern const char *layout_name (uint32_t id);
extern uint32_t layout_parse_name (const char *name);

/* A short English description of an error, for messages. */
extern const char *layout_strerror (enum layout_error err);

/* Map the logical range [offset, offset + count) -- which must lie inside
 * the volume and have count > 0 -- to the first piece of it.
 */
extern void layout_map (const struct layout *l, uint64_t offset,
                        uint64_t count, struct layout_piece *piece);

/* Iterate over the pieces of a request, in logical order. */
struct layout_iter {
  const struct layout *l;
  uint64_t offset;
  uint64_t end;
};

static inline void
layout_iter_init (struct layout_iter *it, const struct layout *l,
                  uint64_t offset, uint64_t count)
{
  it->l = l;
  it->offset = offset;
  it->end = offset + count;
}

/* Returns false when the request is exhausted. */
static inline bool
layout_iter_next (struct layout_iter *it, struct layout_piece *piece)
{
  if (it->offset >= it->end)
    return false;
  layout_map (it->l, it->offset, it->end - it->offset, piece);
  it->offset += piece->length;
  return true;
}

/* A request's chunks c0 to cl (zone-relative) in a zone striped over nd
 * members, divided once for all of the zone's members.
 */
struct layout_cut {
  uint64_t c0, cl; /* first and last chunk touched */
  uint64_t q0, ql; /* their rows: c0 / nd, cl / nd */
  uint64_t r0, rl; /* their members: c0 % nd, cl % nd */
  uint64_t nd;
};

static inline void
layout_cut_init (struct layout_cut *c, uint64_t nd, uint64_t c0, uint64_t cl)
{
  c->c0 = c0;
  c->cl = cl;
  c->q0 = c0 / nd;
  c->r0 = c0 % nd;
  c->ql = cl / nd;
  c->rl = cl % nd;
  c->nd = nd;
}

/* The chunks of the zone's member d the request touches: k1, k1 + nd,
 * ..., k2, in rows row1 to row2 of that member.  False when none.
 */
static inline bool
layout_member_chunks (const struct layout_cut *c, unsigned d, uint64_t *k1,
                      uint64_t *k2, uint64_t *row1, uint64_t *row2)
{
  *row1 = c->q0 + (d < c->r0);
  *k1 = *row1 * c->nd + d;
  if (*k1 > c->cl)
    return false;
  *row2 = c->ql - (d > c->rl); /* >= row1: k1 is in range */
  *k2 = *row2 * c->nd + d;
  return true;
}

/* For each member, the one contiguous member range the request touches.
 * spans must have l->nr_members entries.  Returns how many members are
 * touched.
 */
extern unsigned layout_spans (const struct layout *l, uint64_t offset,
                              uint64_t count, struct layout_span *spans);

/* Map a member offset back to a logical offset.  Returns false when the
 * member offset is beyond the member's usable size.
 */
extern bool layout_unmap (const struct layout *l, unsigned member,
                          uint64_t member_offset, uint64_t *offset);

#endif /* NBDSTRIPE_LAYOUT_H */
