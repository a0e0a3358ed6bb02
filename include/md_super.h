/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: Linux md v1.x superblocks (struct mdp_superblock_1 of
 * <linux/raid/md_p.h>), for members of md raid0 arrays.
 *
 * Pure code: decode, verify, encode, checksum.  No I/O.  Sizes and offsets
 * in the superblock are 512-byte sectors, as md keeps them; this
 * interface keeps them so too (the caller converts).
 *
 * Where a member keeps its superblock depends on the minor version:
 *   1.0  near the end: ((sectors - 16) & ~7) sectors from the start
 *   1.1  at the start (sector 0)
 *   1.2  4 KiB from the start (sector 8)
 * md reads MD_SUPER_BYTES there; the superblock proper is 256 bytes plus
 * 2 bytes per entry of dev_roles (max_dev of them).
 *
 * What decoding checks (each its own error, the field named): the magic;
 * major version 1; max_dev <= MD_SUPER_MAX_DEV; the checksum (md's: 32-bit
 * little-endian words of the first 256 + 2 * max_dev bytes summed into 64
 * bits with the checksum field as zero, an odd trailing 16-bit word added,
 * the high half folded once onto the low); super_offset equal to where
 * it was read; pad0 and pad3 zero; no feature bit outside the ones md
 * knows (0x1fff); the raid0-layout bit (0x1000) only with level 0;
 * data_size at least 10 sectors; data_offset, data_size and
 * super_offset (and data_offset + data_size) at most MD_SUPER_MAX_SECTORS;
 * for 1.1 and 1.2 data_offset past the superblock.  What an array may be
 * served as is a further question: md_super_raid0_servable (which also
 * wants the data area clear of the superblock and of the bad-block log).
 */
#ifndef NBDSTRIPE_MD_SUPER_H
#define NBDSTRIPE_MD_SUPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MD_SUPER_MAGIC 0xa92b4efcu
#define MD_SUPER_BYTES 4096u     /* read and written at the superblock */
#define MD_SUPER_MAX_DEV 1920u   /* (4096 - 256) / 2 */
#define MD_SUPER_MIN_SECTORS 24u /* mdadm: smaller members hold none */
/* Every sector offset and size decoded is at most this (2^54 sectors,
 * 2^63 bytes: NBD's and off_t's limit), and so is any sum of two of them
 * that decode checks: byte offsets computed from them never wrap.
 */
#define MD_SUPER_MAX_SECTORS (UINT64_C (1) << 54)

/* feature_map bits (md_p.h names them MD_FEATURE_*). */
#define MD_FEATURE_RAID0_LAYOUT 0x1000u /* layout is meaningful for raid0 */
#define MD_FEATURE_KNOWN 0x1fffu

/* dev_roles values. */
#define MD_ROLE_MAX 0xff00u /* below: an active role (raid disk index) */
#define MD_ROLE_JOURNAL 0xfffdu
#define MD_ROLE_FAULTY 0xfffeu
#define MD_ROLE_SPARE 0xffffu

/* md's raid0 layout numbers (the superblock's layout field; the same as
 * LAYOUT_MD_* in layout.h).
 */
#define MD_RAID0_ORIG 1u
#define MD_RAID0_ALT 2u

struct md_super {
  unsigned minor; /* 0, 1 or 2: version 1.0, 1.1, 1.2 (from super_offset) */
  uint32_t feature_map;
  uint8_t set_uuid[16];
  char set_name[33]; /* NUL-terminated ("homehost:name" or "name") */
  uint64_t ctime;    /* raw: low 40 bits seconds, high 24 microseconds */
  int32_t level;     /* 0 raid0, 1, 4, 5, 6, 10; -1 linear, ... */
  uint32_t layout;
  uint64_t size; /* sectors ("used size"; raid0 ignores it) */
  uint32_t chunk_sectors;
  uint32_t raid_disks;
  uint32_t bitmap_offset; /* raw (signed for bitmaps, ppl for raid5) */
  /* Reshape (meaningful with feature 0x4 / 0x40). */
  uint32_t new_level;
  uint64_t reshape_position;
  int32_t delta_disks;
  uint32_t new_layout;
  uint32_t new_chunk;
  int32_t new_offset;
  /* This member. */
  uint64_t data_offset;  /* sectors from the member's start */
  uint64_t data_size;    /* sectors of data on this member */
  uint64_t super_offset; /* sectors from the member's start */
  uint64_t recovery_offset;
  uint32_t dev_number; /* its slot in dev_roles */
  uint32_t cnt_corrected_read;
  uint8_t device_uuid[16];
  uint8_t devflags;
  uint8_t bblog_shift;
  uint16_t bblog_size;
  int32_t bblog_offset; /* sectors from the superblock; 0: no log */
  /* Array state. */
  uint64_t utime; /* as ctime */
  uint64_t events;
  uint64_t resync_offset; /* all ones: clean */
  uint32_t sb_csum;       /* as read (decode), ignored by encode */
  uint32_t max_dev;
  uint16_t dev_roles[MD_SUPER_MAX_DEV];
};

enum md_super_error {
  MD_SUPER_OK = 0,
  MD_SUPER_ERR_TRUNCATED, /* fewer than MD_SUPER_BYTES bytes */
  MD_SUPER_ERR_MAGIC,     /* no md superblock here */
  MD_SUPER_ERR_VERSION,   /* major version not 1 (0.90 is elsewhere) */
  MD_SUPER_ERR_CSUM,      /* checksum mismatch: corrupt */
  MD_SUPER_ERR_FIELD,     /* checksum fine, a field out of range */
};

/* Byte offset of a 1.minor superblock on a member of member_bytes bytes.
 * False when the member is too small to hold one (MD_SUPER_MIN_SECTORS)
 * or minor is not 0, 1 or 2.
 */
extern bool md_super_location (unsigned minor, uint64_t member_bytes,
                               uint64_t *offset);

/* Decode and verify the bytes read at byte offset `at` of a member (the
 * first MD_SUPER_BYTES of buf).  On MD_SUPER_ERR_FIELD *field (if not
 * NULL) names the field as md_p.h does (e.g. "super_offset", "pad3",
 * "feature_map"); otherwise NULL.  sb is meaningful only on MD_SUPER_OK.
 */
extern enum md_super_error md_super_decode (const uint8_t *buf, size_t len,
                                            uint64_t at, struct md_super *sb,
                                            const char **field);

/* Fill buf (MD_SUPER_BYTES, all of it: zero after the superblock) from
 * sb, checksum included (sb->sb_csum and sb->minor are not used: the
 * version is what super_offset says).  Decoding it gives sb back.
 */
extern void md_super_encode (const struct md_super *sb, uint8_t *buf);

/* md's checksum of an encoded superblock (buf holds at least
 * 256 + 2 * max_dev bytes; max_dev is read from buf).
 */
extern uint32_t md_super_csum (const uint8_t *buf);

extern const char *md_super_strerror (enum md_super_error err);

/* This member's role: dev_roles[dev_number], or MD_ROLE_SPARE when
 * dev_number is outside the table.
 */
static inline unsigned
md_super_role (const struct md_super *sb)
{
  return sb->dev_number < sb->max_dev ? sb->dev_roles[sb->dev_number]
                                      : MD_ROLE_SPARE;
}

/* Whether a member with this superblock belongs to an md raid0 array that
 * nbdstripe serves byte for byte.  False, with why (one line naming the
 * field or the feature: "level 5, not raid0", "a reshape is in progress
 * (feature 0x4)", "bad-block log in use (feature 0x8)", "role: spare", ...)
 * otherwise.  Level 0 only; feature bits: MD_FEATURE_RAID0_LAYOUT alone,
 * and then layout 1 or 2; an active role below raid_disks; the data area
 * clear of the superblock and of the bad-block log.
 */
extern bool md_super_raid0_servable (const struct md_super *sb, char *why,
                                     size_t len);

/* The layout this superblock says the array uses: MD_RAID0_ORIG or
 * MD_RAID0_ALT when feature MD_FEATURE_RAID0_LAYOUT is set (and layout is
 * 1 or 2), else 0: unspecified (md ignores the layout field then).
 */
static inline unsigned
md_super_raid0_layout (const struct md_super *sb)
{
  if ((sb->feature_map & MD_FEATURE_RAID0_LAYOUT)
      && (sb->layout == MD_RAID0_ORIG || sb->layout == MD_RAID0_ALT))
    return sb->layout;
  return 0;
}

/* ctime / utime: seconds since the epoch. */
static inline uint64_t
md_super_seconds (uint64_t t)
{
  return t & ((UINT64_C (1) << 40) - 1);
}

/* The array's name as it may be shown (a terminal, a log line, a
 * comment in a config file): the 32 bytes come from a disk, so every
 * byte outside printable ASCII (a newline, an escape sequence, bytes of
 * UTF-8), and the backslash itself, is written \xNN.
 */
#define MD_SUPER_NAME_SHOWN (4 * 32 + 1)
extern const char *md_super_name_shown (const struct md_super *sb,
                                        char out[MD_SUPER_NAME_SHOWN]);

/* Format a UUID as mdadm does: 8 hex digits, ':' ... (35 characters + NUL). */
extern void md_super_uuid_format (const uint8_t uuid[16], char out[36]);

#endif /* NBDSTRIPE_MD_SUPER_H */
