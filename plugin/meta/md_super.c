/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: Linux md v1.x superblocks.  See include/md_super.h for the
 * contract.
 *
 * Written from the layout of struct mdp_superblock_1 in the kernel's UAPI
 * header <linux/raid/md_p.h> and from a description of what md and mdadm
 * check; no md or mdadm code is copied.  Fields are read and written
 * byte by byte at fixed offsets (never by overlaying the struct on the
 * buffer), so that neither the host's endianness nor the buffer's
 * alignment matters; md_p.h is included only so that the compiler checks
 * those offsets against the kernel's own struct.
 */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "layout.h"
#include "md_super.h"
#include "util.h"

/* md_p.h defines MD_FEATURE_RAID0_LAYOUT too (as 4096): keep ours for the
 * comparison below and let md_p.h's stand in the rest of this file.
 */
enum { OUR_FEATURE_RAID0_LAYOUT = MD_FEATURE_RAID0_LAYOUT };
#undef MD_FEATURE_RAID0_LAYOUT
#include <linux/raid/md_p.h>

/* Byte offsets in the superblock, as md_p.h lays it out. */
#define OFF_MAGIC 0
#define OFF_MAJOR_VERSION 4
#define OFF_FEATURE_MAP 8
#define OFF_PAD0 12
#define OFF_SET_UUID 16
#define OFF_SET_NAME 32
#define OFF_CTIME 64
#define OFF_LEVEL 72
#define OFF_LAYOUT 76
#define OFF_SIZE 80
#define OFF_CHUNKSIZE 88
#define OFF_RAID_DISKS 92
#define OFF_BITMAP_OFFSET 96
#define OFF_NEW_LEVEL 100
#define OFF_RESHAPE_POSITION 104
#define OFF_DELTA_DISKS 112
#define OFF_NEW_LAYOUT 116
#define OFF_NEW_CHUNK 120
#define OFF_NEW_OFFSET 124
#define OFF_DATA_OFFSET 128
#define OFF_DATA_SIZE 136
#define OFF_SUPER_OFFSET 144
#define OFF_RECOVERY_OFFSET 152
#define OFF_DEV_NUMBER 160
#define OFF_CNT_CORRECTED_READ 164
#define OFF_DEVICE_UUID 168
#define OFF_DEVFLAGS 184
#define OFF_BBLOG_SHIFT 185
#define OFF_BBLOG_SIZE 186
#define OFF_BBLOG_OFFSET 188
#define OFF_UTIME 192
#define OFF_EVENTS 200
#define OFF_RESYNC_OFFSET 208
#define OFF_SB_CSUM 216
#define OFF_MAX_DEV 220
#define OFF_PAD3 224
#define OFF_DEV_ROLES 256

#define PAD3_BYTES 32
#define SET_NAME_BYTES 32
#define SECTOR 512u

#define CHECK_OFF(field, off)                                                 \
  _Static_assert(offsetof (struct mdp_superblock_1, field) == (off),          \
                 "md_p.h puts " #field " elsewhere")
CHECK_OFF (magic, OFF_MAGIC);
CHECK_OFF (major_version, OFF_MAJOR_VERSION);
CHECK_OFF (feature_map, OFF_FEATURE_MAP);
CHECK_OFF (pad0, OFF_PAD0);
CHECK_OFF (set_uuid, OFF_SET_UUID);
CHECK_OFF (set_name, OFF_SET_NAME);
CHECK_OFF (ctime, OFF_CTIME);
CHECK_OFF (level, OFF_LEVEL);
CHECK_OFF (layout, OFF_LAYOUT);
CHECK_OFF (size, OFF_SIZE);
CHECK_OFF (chunksize, OFF_CHUNKSIZE);
CHECK_OFF (raid_disks, OFF_RAID_DISKS);
CHECK_OFF (bitmap_offset, OFF_BITMAP_OFFSET);
CHECK_OFF (new_level, OFF_NEW_LEVEL);
CHECK_OFF (reshape_position, OFF_RESHAPE_POSITION);
CHECK_OFF (delta_disks, OFF_DELTA_DISKS);
CHECK_OFF (new_layout, OFF_NEW_LAYOUT);
CHECK_OFF (new_chunk, OFF_NEW_CHUNK);
CHECK_OFF (new_offset, OFF_NEW_OFFSET);
CHECK_OFF (data_offset, OFF_DATA_OFFSET);
CHECK_OFF (data_size, OFF_DATA_SIZE);
CHECK_OFF (super_offset, OFF_SUPER_OFFSET);
CHECK_OFF (recovery_offset, OFF_RECOVERY_OFFSET);
CHECK_OFF (dev_number, OFF_DEV_NUMBER);
CHECK_OFF (cnt_corrected_read, OFF_CNT_CORRECTED_READ);
CHECK_OFF (device_uuid, OFF_DEVICE_UUID);
CHECK_OFF (devflags, OFF_DEVFLAGS);
CHECK_OFF (bblog_shift, OFF_BBLOG_SHIFT);
CHECK_OFF (bblog_size, OFF_BBLOG_SIZE);
CHECK_OFF (bblog_offset, OFF_BBLOG_OFFSET);
CHECK_OFF (utime, OFF_UTIME);
CHECK_OFF (events, OFF_EVENTS);
CHECK_OFF (resync_offset, OFF_RESYNC_OFFSET);
CHECK_OFF (sb_csum, OFF_SB_CSUM);
CHECK_OFF (max_dev, OFF_MAX_DEV);
CHECK_OFF (pad3, OFF_PAD3);
CHECK_OFF (dev_roles, OFF_DEV_ROLES);
_Static_assert(sizeof (struct mdp_superblock_1) == OFF_DEV_ROLES,
               "md_p.h's superblock is 256 bytes before dev_roles");
_Static_assert(sizeof ((struct mdp_superblock_1 *) 0)->pad3 == PAD3_BYTES,
               "pad3 is 32 bytes");
_Static_assert(sizeof ((struct mdp_superblock_1 *) 0)->set_name
                 == SET_NAME_BYTES,
               "set_name is 32 bytes");
_Static_assert(sizeof ((struct md_super *) 0)->set_name == SET_NAME_BYTES + 1,
               "struct md_super's set_name holds 32 bytes and a NUL");
_Static_assert(MD_SUPER_MAGIC == MD_SB_MAGIC, "md's magic");
_Static_assert(OUR_FEATURE_RAID0_LAYOUT == MD_FEATURE_RAID0_LAYOUT,
               "md's raid0 layout feature bit");
_Static_assert(MD_FEATURE_KNOWN == MD_FEATURE_ALL, "md's known features");
_Static_assert(MD_ROLE_MAX == MD_DISK_ROLE_MAX
                 && MD_ROLE_SPARE == MD_DISK_ROLE_SPARE
                 && MD_ROLE_FAULTY == MD_DISK_ROLE_FAULTY
                 && MD_ROLE_JOURNAL == MD_DISK_ROLE_JOURNAL,
               "md's dev_roles values");
_Static_assert(MD_SUPER_MAX_DEV == (MD_SUPER_BYTES - OFF_DEV_ROLES) / 2,
               "dev_roles fill the rest of the 4 KiB");

/* Two's complement by arithmetic, not by a conversion whose result C
 * leaves to the implementation.
 */
static int32_t
get_les32 (const uint8_t *p)
{
  uint32_t v = get_le32 (p);

  return v <= INT32_MAX ? (int32_t) v : -(int32_t) (~v) - 1;
}

/* The member's size is whole sectors: md ignores a partial last one. */
bool
md_super_location (unsigned minor, uint64_t member_bytes, uint64_t *offset)
{
  uint64_t sectors = member_bytes / SECTOR;

  if (sectors < MD_SUPER_MIN_SECTORS)
    return false;
  switch (minor) {
  case 0:
    /* 8 KiB back from the end, then down to a 4 KiB boundary. */
    *offset = ((sectors - 16) & ~UINT64_C (7)) * SECTOR;
    return true;
  case 1: *offset = 0; return true;
  case 2: *offset = 8 * SECTOR; return true;
  }
  return false;
}

/* Bytes the checksum covers.  A max_dev beyond MD_SUPER_MAX_DEV is taken
 * as MD_SUPER_MAX_DEV so that nothing past MD_SUPER_BYTES is ever read;
 * decode rejects such a superblock before it sums anything.
 */
static size_t
csum_bytes (uint32_t max_dev)
{
  if (max_dev > MD_SUPER_MAX_DEV)
    max_dev = MD_SUPER_MAX_DEV;
  return OFF_DEV_ROLES + 2 * (size_t) max_dev;
}

/* md's checksum: 32-bit words summed into 64 bits (sb_csum counted as
 * zero), the trailing 16-bit word of an odd max_dev added on its own, and
 * the high half folded once onto the low with the carry out of that
 * addition dropped.  The sum is below 2^43, so one fold is what md does,
 * not an approximation of a ones' complement sum: folding again would
 * disagree with md whenever the fold carries.
 */
uint32_t
md_super_csum (const uint8_t *buf)
{
  size_t n = csum_bytes (get_le32 (buf + OFF_MAX_DEV));
  uint64_t sum = 0;
  size_t off;

  for (off = 0; off + 4 <= n; off += 4)
    if (off != OFF_SB_CSUM)
      sum += get_le32 (buf + off);
  if (off < n)
    sum += get_le16 (buf + off);
  return (uint32_t) ((sum & UINT32_MAX) + (sum >> 32));
}

/* Every field is written as given, so that an invalid superblock encodes
 * to bytes that md_super_decode rejects.  set_name is copied up to its
 * first NUL and NUL-padded, whatever sits after the terminator in sb.
 */
void
md_super_encode (const struct md_super *sb, uint8_t *buf)
{
  uint32_t roles = sb->max_dev;

  if (roles > MD_SUPER_MAX_DEV)
    roles = MD_SUPER_MAX_DEV; /* what fits in the 4 KiB */

  memset (buf, 0, MD_SUPER_BYTES);
  put_le32 (buf + OFF_MAGIC, MD_SUPER_MAGIC);
  put_le32 (buf + OFF_MAJOR_VERSION, 1);
  put_le32 (buf + OFF_FEATURE_MAP, sb->feature_map);
  memcpy (buf + OFF_SET_UUID, sb->set_uuid, 16);
  memcpy (buf + OFF_SET_NAME, sb->set_name,
          strnlen (sb->set_name, SET_NAME_BYTES));
  put_le64 (buf + OFF_CTIME, sb->ctime);
  put_le32 (buf + OFF_LEVEL, (uint32_t) sb->level);
  put_le32 (buf + OFF_LAYOUT, sb->layout);
  put_le64 (buf + OFF_SIZE, sb->size);
  put_le32 (buf + OFF_CHUNKSIZE, sb->chunk_sectors);
  put_le32 (buf + OFF_RAID_DISKS, sb->raid_disks);
  put_le32 (buf + OFF_BITMAP_OFFSET, sb->bitmap_offset);
  put_le32 (buf + OFF_NEW_LEVEL, sb->new_level);
  put_le64 (buf + OFF_RESHAPE_POSITION, sb->reshape_position);
  put_le32 (buf + OFF_DELTA_DISKS, (uint32_t) sb->delta_disks);
  put_le32 (buf + OFF_NEW_LAYOUT, sb->new_layout);
  put_le32 (buf + OFF_NEW_CHUNK, sb->new_chunk);
  put_le32 (buf + OFF_NEW_OFFSET, (uint32_t) sb->new_offset);
  put_le64 (buf + OFF_DATA_OFFSET, sb->data_offset);
  put_le64 (buf + OFF_DATA_SIZE, sb->data_size);
  put_le64 (buf + OFF_SUPER_OFFSET, sb->super_offset);
  put_le64 (buf + OFF_RECOVERY_OFFSET, sb->recovery_offset);
  put_le32 (buf + OFF_DEV_NUMBER, sb->dev_number);
  put_le32 (buf + OFF_CNT_CORRECTED_READ, sb->cnt_corrected_read);
  memcpy (buf + OFF_DEVICE_UUID, sb->device_uuid, 16);
  buf[OFF_DEVFLAGS] = sb->devflags;
  buf[OFF_BBLOG_SHIFT] = sb->bblog_shift;
  put_le16 (buf + OFF_BBLOG_SIZE, sb->bblog_size);
  put_le32 (buf + OFF_BBLOG_OFFSET, (uint32_t) sb->bblog_offset);
  put_le64 (buf + OFF_UTIME, sb->utime);
  put_le64 (buf + OFF_EVENTS, sb->events);
  put_le64 (buf + OFF_RESYNC_OFFSET, sb->resync_offset);
  put_le32 (buf + OFF_MAX_DEV, sb->max_dev);
  for (uint32_t i = 0; i < roles; ++i)
    put_le16 (buf + OFF_DEV_ROLES + 2 * i, sb->dev_roles[i]);
  /* Last: it covers everything above. */
  put_le32 (buf + OFF_SB_CSUM, md_super_csum (buf));
}

/* The superblock's own sectors, as md rounds them for 512-byte logical
 * blocks.
 */
static uint64_t
sb_sectors_of (const struct md_super *sb)
{
  return (csum_bytes (sb->max_dev) + SECTOR - 1) / SECTOR;
}

/* Whether sector ranges [a, a + n) and [b, b + m) overlap (all four
 * below MD_SUPER_MAX_SECTORS: the sums cannot wrap).
 */
static bool
overlaps_sectors (uint64_t a, uint64_t n, uint64_t b, uint64_t m)
{
  return a < b + m && b < a + n;
}

/* The bad-block log (bblog_size sectors at bblog_offset from the
 * superblock, either side of it) lies on the member and outside the data.
 */
static bool
bblog_clear (const struct md_super *sb)
{
  int64_t at = (int64_t) sb->super_offset + sb->bblog_offset;

  if (at < 0 || (uint64_t) at > MD_SUPER_MAX_SECTORS - sb->bblog_size)
    return false;
  return !overlaps_sectors (sb->data_offset, sb->data_size, (uint64_t) at,
                            sb->bblog_size);
}

/* Checks run in the order of md_super.h (which is md's: kernel and
 * mdadm refuse the same things), so that a superblock with several
 * faults always reports the same one.  max_dev comes before the checksum
 * because it says how many bytes the checksum covers.
 *
 * The version is read from super_offset as mdadm --examine reads it: 0 is
 * 1.1, 8 is 1.2, anything else 1.0.  So a 1.0 superblock of a member of
 * 24 to 31 sectors, which also sits at sector 8, reads as 1.2 (and is
 * refused anyway: it leaves no room for 10 sectors of data).
 */
enum md_super_error
md_super_decode (const uint8_t *buf, size_t len, uint64_t at,
                 struct md_super *sb, const char **field)
{
  const char *bad = NULL;
  uint32_t pad0;
  uint64_t sb_sectors;

  if (field)
    *field = NULL;
  if (len < MD_SUPER_BYTES)
    return MD_SUPER_ERR_TRUNCATED;
  if (get_le32 (buf + OFF_MAGIC) != MD_SUPER_MAGIC)
    return MD_SUPER_ERR_MAGIC;
  if (get_le32 (buf + OFF_MAJOR_VERSION) != 1)
    return MD_SUPER_ERR_VERSION;

  memset (sb, 0, sizeof *sb);
  sb->max_dev = get_le32 (buf + OFF_MAX_DEV);
  if (sb->max_dev > MD_SUPER_MAX_DEV) {
    if (field)
      *field = "max_dev";
    return MD_SUPER_ERR_FIELD;
  }
  sb->sb_csum = get_le32 (buf + OFF_SB_CSUM);
  if (sb->sb_csum != md_super_csum (buf))
    return MD_SUPER_ERR_CSUM;

  sb->feature_map = get_le32 (buf + OFF_FEATURE_MAP);
  pad0 = get_le32 (buf + OFF_PAD0);
  memcpy (sb->set_uuid, buf + OFF_SET_UUID, 16);
  /* Up to the first NUL: the bytes after it are not part of the name
   * (and encode writes zeros there), so that decoding what was encoded
   * from a decoded superblock gives the same struct.
   */
  memcpy (sb->set_name, buf + OFF_SET_NAME,
          strnlen ((const char *) buf + OFF_SET_NAME, SET_NAME_BYTES));
  sb->ctime = get_le64 (buf + OFF_CTIME);
  sb->level = get_les32 (buf + OFF_LEVEL);
  sb->layout = get_le32 (buf + OFF_LAYOUT);
  sb->size = get_le64 (buf + OFF_SIZE);
  sb->chunk_sectors = get_le32 (buf + OFF_CHUNKSIZE);
  sb->raid_disks = get_le32 (buf + OFF_RAID_DISKS);
  sb->bitmap_offset = get_le32 (buf + OFF_BITMAP_OFFSET);
  sb->new_level = get_le32 (buf + OFF_NEW_LEVEL);
  sb->reshape_position = get_le64 (buf + OFF_RESHAPE_POSITION);
  sb->delta_disks = get_les32 (buf + OFF_DELTA_DISKS);
  sb->new_layout = get_le32 (buf + OFF_NEW_LAYOUT);
  sb->new_chunk = get_le32 (buf + OFF_NEW_CHUNK);
  sb->new_offset = get_les32 (buf + OFF_NEW_OFFSET);
  sb->data_offset = get_le64 (buf + OFF_DATA_OFFSET);
  sb->data_size = get_le64 (buf + OFF_DATA_SIZE);
  sb->super_offset = get_le64 (buf + OFF_SUPER_OFFSET);
  sb->recovery_offset = get_le64 (buf + OFF_RECOVERY_OFFSET);
  sb->dev_number = get_le32 (buf + OFF_DEV_NUMBER);
  sb->cnt_corrected_read = get_le32 (buf + OFF_CNT_CORRECTED_READ);
  memcpy (sb->device_uuid, buf + OFF_DEVICE_UUID, 16);
  sb->devflags = buf[OFF_DEVFLAGS];
  sb->bblog_shift = buf[OFF_BBLOG_SHIFT];
  sb->bblog_size = get_le16 (buf + OFF_BBLOG_SIZE);
  sb->bblog_offset = get_les32 (buf + OFF_BBLOG_OFFSET);
  sb->utime = get_le64 (buf + OFF_UTIME);
  sb->events = get_le64 (buf + OFF_EVENTS);
  sb->resync_offset = get_le64 (buf + OFF_RESYNC_OFFSET);
  for (uint32_t i = 0; i < sb->max_dev; ++i)
    sb->dev_roles[i] = get_le16 (buf + OFF_DEV_ROLES + 2 * i);
  sb->minor = sb->super_offset == 0 ? 1 : sb->super_offset == 8 ? 2 : 0;

  /* The superblock's own sectors, as md rounds them for 512-byte
   * logical blocks: data of a 1.1 or 1.2 member starts after them.
   */
  sb_sectors = (csum_bytes (sb->max_dev) + SECTOR - 1) / SECTOR;

  if (at % SECTOR != 0 || sb->super_offset != at / SECTOR)
    bad = "super_offset";
  else if (pad0 != 0)
    bad = "pad0";
  else if (!all_zero (buf + OFF_PAD3, PAD3_BYTES))
    bad = "pad3";
  else if (sb->feature_map & ~MD_FEATURE_KNOWN)
    bad = "feature_map";
  else if ((sb->feature_map & MD_FEATURE_RAID0_LAYOUT) && sb->level != 0)
    bad = "feature_map";
  else if (sb->data_size < 10 || sb->data_size > MD_SUPER_MAX_SECTORS)
    bad = "data_size";
  else if (sb->data_offset > MD_SUPER_MAX_SECTORS - sb->data_size)
    bad = "data_offset";
  else if (sb->super_offset > MD_SUPER_MAX_SECTORS - sb_sectors)
    bad = "super_offset";
  else if (sb->minor != 0 && sb->data_offset < sb->super_offset + sb_sectors)
    bad = "data_offset";

  if (bad) {
    if (field)
      *field = bad;
    return MD_SUPER_ERR_FIELD;
  }
  return MD_SUPER_OK;
}

const char *
md_super_strerror (enum md_super_error err)
{
  switch (err) {
  case MD_SUPER_OK: return "no error";
  case MD_SUPER_ERR_TRUNCATED:
    return "md superblock truncated (fewer than 4096 bytes)";
  case MD_SUPER_ERR_MAGIC: return "no md superblock (no magic)";
  case MD_SUPER_ERR_VERSION:
    return "md superblock of a major version other than 1";
  case MD_SUPER_ERR_CSUM:
    return "md superblock checksum mismatch (corrupt superblock)";
  case MD_SUPER_ERR_FIELD: return "md superblock field out of range";
  }
  return "unknown md superblock error";
}

/* The features a member of a plain, settled raid0 never has, in the
 * order they are reported (the one that most changes what the data is
 * first).  MD_FEATURE_RAID0_LAYOUT is not here: it is the one allowed.
 */
static const struct {
  uint32_t bit;
  const char *what;
} refused_features[] = {
  { MD_FEATURE_RESHAPE_ACTIVE, "a reshape is in progress" },
  { MD_FEATURE_NEW_OFFSET, "the data is moving to a new offset" },
  { MD_FEATURE_RESHAPE_BACKWARDS, "a reshape runs backwards" },
  { MD_FEATURE_BAD_BLOCKS, "bad-block log in use" },
  { MD_FEATURE_BITMAP_OFFSET, "write-intent bitmap" },
  { MD_FEATURE_RECOVERY_OFFSET, "member only partly recovered" },
  { MD_FEATURE_RECOVERY_BITMAP, "recovery guided by a bitmap" },
  { MD_FEATURE_REPLACEMENT, "member is a replacement" },
  { MD_FEATURE_CLUSTERED, "clustered md" },
  { MD_FEATURE_JOURNAL, "write journal" },
  { MD_FEATURE_PPL, "partial parity log" },
  { MD_FEATURE_MULTIPLE_PPLS, "multiple partial parity logs" },
};

/* Why is written only on refusal, with snprintf: a short buffer gets a
 * truncated but terminated line, and why may be NULL.
 */
#define REFUSE(...)                                                           \
  do {                                                                        \
    if (why && len > 0)                                                       \
      snprintf (why, len, __VA_ARGS__);                                       \
    return false;                                                             \
  } while (0)

bool
md_super_raid0_servable (const struct md_super *sb, char *why, size_t len)
{
  unsigned role = md_super_role (sb);
  uint32_t other;

  if (sb->level != 0)
    REFUSE ("level %" PRId32 ", not raid0", sb->level);

  for (size_t i = 0; i < sizeof refused_features / sizeof refused_features[0];
       ++i)
    if (sb->feature_map & refused_features[i].bit)
      REFUSE ("%s (feature 0x%" PRIx32 ")", refused_features[i].what,
              refused_features[i].bit);
  other = sb->feature_map & ~(uint32_t) MD_FEATURE_RAID0_LAYOUT;
  if (other != 0)
    REFUSE ("unknown feature bits 0x%" PRIx32, other);
  if ((sb->feature_map & MD_FEATURE_RAID0_LAYOUT)
      && sb->layout != MD_RAID0_ORIG && sb->layout != MD_RAID0_ALT)
    REFUSE ("layout %" PRIu32 ", neither 1 (original) nor 2 (alternate)"
            " (feature 0x1000)",
            sb->layout);

  if (sb->raid_disks == 0 || sb->raid_disks > LAYOUT_MAX_MEMBERS)
    REFUSE ("raid_disks %" PRIu32 ", not 1 to %d", sb->raid_disks,
            LAYOUT_MAX_MEMBERS);

  if (role == MD_ROLE_SPARE)
    REFUSE ("role: spare");
  if (role == MD_ROLE_FAULTY)
    REFUSE ("role: faulty");
  if (role == MD_ROLE_JOURNAL)
    REFUSE ("role: journal");
  if (role >= MD_ROLE_MAX)
    REFUSE ("role 0x%x, not an active one", role);
  if (role >= sb->raid_disks)
    REFUSE ("role %u, not below raid_disks %" PRIu32, role, sb->raid_disks);

  if (sb->chunk_sectors == 0)
    REFUSE ("chunk_sectors 0");
  if ((uint64_t) sb->chunk_sectors * SECTOR % LAYOUT_CHUNK_ALIGN != 0)
    REFUSE ("chunk_sectors %" PRIu32 " (%" PRIu64 " bytes), not a multiple"
            " of %u bytes",
            sb->chunk_sectors, (uint64_t) sb->chunk_sectors * SECTOR,
            LAYOUT_CHUNK_ALIGN);

  if (sb->data_offset % (4096 / SECTOR) != 0)
    REFUSE ("data_offset %" PRIu64 " sectors, not a multiple of 8 (4 KiB)",
            sb->data_offset);

  /* The data area overlaps neither the superblock (1.0 keeps it after
   * the data, 1.1 and 1.2 before) nor its bad-block log: a client's write
   * would destroy the array.
   */
  if (overlaps_sectors (sb->data_offset, sb->data_size, sb->super_offset,
                        sb_sectors_of (sb)))
    REFUSE ("the data area (sectors %" PRIu64 " to %" PRIu64 ") covers the "
            "superblock (sector %" PRIu64 ")",
            sb->data_offset, sb->data_offset + sb->data_size - 1,
            sb->super_offset);
  if (sb->bblog_offset != 0 && sb->bblog_size != 0 && !bblog_clear (sb))
    REFUSE ("the bad-block log (%" PRIu16 " sectors at %" PRId32 " from the "
            "superblock) lies off the member or in the data area",
            sb->bblog_size, sb->bblog_offset);

  if (why && len > 0)
    why[0] = '\0';
  return true;
}

void
md_super_uuid_format (const uint8_t uuid[16], char out[36])
{
  static const char hex[] = "0123456789abcdef";
  char *p = out;

  for (unsigned i = 0; i < 16; ++i) {
    if (i > 0 && i % 4 == 0)
      *p++ = ':';
    *p++ = hex[uuid[i] >> 4];
    *p++ = hex[uuid[i] & 0xf];
  }
  *p = '\0';
}

const char *
md_super_name_shown (const struct md_super *sb, char out[MD_SUPER_NAME_SHOWN])
{
  static const char hex[] = "0123456789abcdef";
  char *p = out;

  for (size_t i = 0; i < SET_NAME_BYTES && sb->set_name[i]; ++i) {
    unsigned char c = (unsigned char) sb->set_name[i];
    if (c >= 0x20 && c < 0x7f && c != '\\')
      *p++ = (char) c;
    else {
      *p++ = '\\';
      *p++ = 'x';
      *p++ = hex[c >> 4];
      *p++ = hex[c & 0xf];
    }
  }
  *p = '\0';
  return out;
}
