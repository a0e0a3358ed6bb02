/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the on-disk member header.
 *
 * A 4 KiB header at offset 0 of every member; data starts at data_offset.
 * Pure code: encode, decode, verify.  No I/O.  All integers little-endian
 * at fixed offsets:
 *
 *   off  size  field
 *     0     8  magic "NBDSTRIP"
 *     8     4  format version: 2 (HEADER_VERSION); 1 is still read
 *    12     4  header size (4096)
 *    16    16  array UUID (same on every member)
 *    32    16  this member's UUID
 *    48    64  volume name, NUL-padded (at most 63 bytes + NUL)
 *   112     8  creation time, seconds since the Unix epoch
 *   120     4  member index (0-based)
 *   124     4  member count
 *   128     8  chunk size in bytes
 *   136     4  layout, in md raid0's numbering (LAYOUT_MD_*): version 2
 *              writes 1 (original) or 2 (alternate multi-zone); version
 *              1 knew only the alternate layout and wrote 1 for it (read
 *              as 2).  Version 1 volumes are sized as all their zones,
 *              version 2 by md's rule (layout.h)
 *   140     4  flags (version 2): HEADER_FLAG_REPLACED, _RESHAPE,
 *              _REMOVED; a header with another is refused
 *   144     8  data offset in bytes (multiple of 4096)
 *   152   512  usable data size of every member, 64 x u64 (unused: 0),
 *              so that the layout can be rebuilt from any one member;
 *              during a reshape, each member's in the old layout (0:
 *              joining)
 *   664     8  events (version 2): the volume's generation, at least 1,
 *              the same on every member; bumped on the members still in
 *              the volume when one drops out while it is served, so that
 *              a stale member (an older copy) is told apart.  Version 1:
 *              reserved (read as 0)
 *   672     4  reshape flags (HEADER_FLAG_RESHAPE, else 0):
 *              HEADER_RESHAPE_BACKWARD, HEADER_RESHAPE_JOURNAL
 *   676     4  reserved, zero
 *   680     8  reshape position: bytes of positions moved (restripe.h)
 *   688     8  journal: the position of the window it holds
 *   696     8  journal: the window's length
 *   704     4  journal: CRC32C of the window's bytes
 *   708     4  reserved, zero
 *   712   512  each member's usable data size in the new layout, 64 x
 *              u64 (0: leaving, or unused)
 *  1224     8  behind: bit k set, the member with index k (in this
 *              header's numbering) is known to have missed this
 *              generation (it dropped out while served, or failed, and
 *              was not written by the update that made it); see
 *              "generations" below
 *  1232     4  lost: how many ranges the lost-range list holds (at most
 *              HEADER_LOST_MAX)
 *  1236     4  roster: the XOR, over the members of the volume this
 *              header's update was written for, of the CRC32C of each
 *              one's member UUID (0: not recorded); see "generations"
 *  1240  2816  the lost-range list: HEADER_LOST_MAX x (u64 offset, u64
 *              length), logical bytes of the volume whose data is gone
 *              (a copy could not read them); sorted, neither overlapping
 *              nor touching, lengths > 0, multiples of 512; unused
 *              entries zero.  The same on every member
 *  4056     4  allocation map (header_map below): log2 of the region
 *              size; 0: the volume has no map
 *  4060     4  reserved, zero
 *  4064     8  allocation map: where it starts on every member, bytes
 *              (a multiple of 4096, after the header, before the data)
 *  4072     8  allocation map: its length on every member, bytes (a
 *              multiple of 4096): one bit per region, 1 "may hold data"
 *  4080    12  reserved, zero
 *  4092     4  CRC32C (Castagnoli) of bytes 0..4091
 *
 * The allocation map (alloc.h) is a bitmap in logical space, a full copy
 * on every member at [map_offset, map_offset + map_bytes): bit r of byte
 * r / 8 (least significant first) is region r, the volume's bytes
 * [r << map_shift, (r + 1) << map_shift).  A set bit means the region
 * may hold data; a clear one that it reads as zeros and every member
 * reads zeros where the region lies.  The copies need not agree: the
 * volume's map is their union (a stale "in use" costs a copy, never
 * data), so a crash between the members' copies is harmless.  Older
 * versions refuse a header with a map ("reserved"): they would write
 * without marking it.
 *
 * A header that uses none of behind, roster, the lost-range list, the
 * allocation map and HEADER_FLAG_CREATING is byte for byte what nbdstripe wrote before they
 * existed, and older versions still read it; one that does is refused by
 * them ("reserved" or "flags"), which is as well.
 *
 * Generations.  Every update of the headers that spans members (the
 * generation bump of each writable serve, a member dropping out, the
 * end of a replace, each record of a grow or shrink, a change of the
 * lost-range list) writes every member's header with the next generation
 * (events + 1), one member after the other, each synced before the
 * next.  A crash between two of those writes leaves headers at two
 * generations, G and G + 1, and nothing else: the G + 1 ones say what
 * the volume is now (md's "highest wins"), the G ones are the same
 * volume one update earlier, and the member holds everything the volume
 * acknowledged.  So assembly takes the newest header for the volume and
 * accepts a member one generation behind unless the newest header says
 * that member is behind (the behind bitmap); two or more behind, it
 * missed an update that completed, and is stale.  The roster tells a
 * member a crash left one behind from a device one update behind that
 * the volume no longer has (the copy a replace did not switch to, the
 * member it switched from): the members assembled must be the ones the
 * newest header's update was written for, else no member behind it is
 * taken.
 */
#ifndef NBDSTRIPE_HEADER_H
#define NBDSTRIPE_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

#define HEADER_MAGIC "NBDSTRIP"
#define HEADER_VERSION 2u
#define HEADER_VERSION_1 1u
#define HEADER_SIZE 4096u
#define HEADER_NAME_MAX 63
#define HEADER_DEFAULT_DATA_OFFSET (1024u * 1024)
/* The member was replaced by another device (nbdstripe replace): never
 * assembled again.  (nbdstripe before this flag refuses the header for
 * its unknown flag, which is as well.)
 */
#define HEADER_FLAG_REPLACED 1u
/* A reshape (grow, shrink) is under way: the reshape fields say where
 * it is.  Members are then numbered in the union of the old and the new
 * layout (the config's members, the joining ones last).
 */
#define HEADER_FLAG_RESHAPE 2u
/* The member was removed from the volume (nbdstripe shrink): never
 * assembled again.
 */
#define HEADER_FLAG_REMOVED 4u
/* Written by 'nbdstripe create' on every member before the headers that
 * make the volume (the same without it): a member holding it, while
 * another member of the config holds no header of the volume, is the
 * trace of a create that did not finish, which create may overwrite.
 */
#define HEADER_FLAG_CREATING 8u
#define HEADER_FLAGS_KNOWN 15u
/* Entries of the lost-range list. */
#define HEADER_LOST_MAX 176u

#define HEADER_RESHAPE_BACKWARD 1u /* positions run down from the end */
#define HEADER_RESHAPE_JOURNAL 2u  /* the journal holds a window */

struct header {
  uint32_t version;
  uint8_t array_uuid[16];
  uint8_t member_uuid[16];
  char name[HEADER_NAME_MAX + 1];
  uint64_t ctime;
  uint32_t member_index;
  uint32_t member_count;
  uint64_t chunk;
  uint32_t layout; /* LAYOUT_MD_* (md's numbering) whatever the version */
  uint32_t flags;
  uint64_t data_offset;
  uint64_t member_sizes[LAYOUT_MAX_MEMBERS];
  uint64_t events; /* 0 in version 1 */
  /* With HEADER_FLAG_RESHAPE (else all zero). */
  struct {
    uint32_t flags;      /* HEADER_RESHAPE_* */
    uint64_t position;   /* bytes of positions moved */
    uint64_t journal_position, journal_length;
    uint32_t journal_crc;
    uint64_t new_sizes[LAYOUT_MAX_MEMBERS];
  } reshape;
  uint64_t behind; /* bit k: member k missed this generation */
  uint32_t nr_lost;
  uint32_t roster; /* XOR of the members' UUIDs' CRC32C; 0: none */
  struct header_range {
    uint64_t offset, length;
  } lost[HEADER_LOST_MAX];
  /* The allocation map (0, 0, 0: none). */
  uint32_t map_shift;
  uint64_t map_offset, map_bytes;
};

/* Region sizes a map may have: 4 KiB to 1 GiB. */
#define HEADER_MAP_SHIFT_MIN 12u
#define HEADER_MAP_SHIFT_MAX 30u

enum header_error {
  HEADER_OK = 0,
  HEADER_ERR_TRUNCATED, /* fewer than HEADER_SIZE bytes */
  HEADER_ERR_MAGIC,     /* not an nbdstripe member (no magic) */
  HEADER_ERR_VERSION,   /* a format version we do not know */
  HEADER_ERR_CRC,       /* checksum mismatch: corrupt header */
  HEADER_ERR_FIELD,     /* CRC fine but a field is out of range */
};

/* Fill buf (HEADER_SIZE bytes) from sb, CRC included. */
extern void header_encode (const struct header *sb, uint8_t *buf);

/* Parse and verify a header (the first HEADER_SIZE bytes of buf), version 1
 * or 2.  On HEADER_ERR_FIELD, *field (if field is not NULL) names the
 * offending field: header_size, name, member_count, member_index, chunk,
 * layout, flags, data_offset, member_sizes, events, behind, lost,
 * map or reserved; otherwise
 * it is set to NULL.  Nothing in sb is meaningful unless HEADER_OK.
 * header_encode of what was decoded gives the same bytes back (the version
 * included).
 */
extern enum header_error header_decode (const uint8_t *buf, size_t len,
                                struct header *sb, const char **field);

extern const char *header_strerror (enum header_error err);

/* CRC32C (Castagnoli, as iSCSI/ext4/btrfs).  The ~0 init and the final
 * xor are done inside, so crc32c (0, buf, len) gives the standard value
 * (0xE3069283 for "123456789") and calls chain:
 * crc32c (crc32c (0, a, na), b, nb) is the CRC of a followed by b.
 */
extern uint32_t crc32c (uint32_t crc, const void *buf, size_t len);

/* Format a UUID as 36 characters + NUL. */
extern void header_uuid_format (const uint8_t uuid[16], char out[37]);

#endif /* NBDSTRIPE_HEADER_H */
