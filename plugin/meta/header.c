/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the on-disk member header.  See include/header.h for the
 * byte layout and the contract.
 *
 * Every integer goes through put_le* / get_le* (util.h), byte by byte, so
 * that the format does not depend on the host's endianness or on the
 * compiler's struct layout.  Decoding is strict: a header is accepted only if
 * re-encoding what was decoded gives the same 4096 bytes back, so there is
 * exactly one valid encoding of each header (the fuzzer checks this).
 */

#include <stdbool.h>
#include <string.h>

#include "header.h"
#include "util.h"

/* Field offsets, as documented in header.h. */
#define OFF_MAGIC 0
#define OFF_VERSION 8
#define OFF_HEADER_SIZE 12
#define OFF_ARRAY_UUID 16
#define OFF_MEMBER_UUID 32
#define OFF_NAME 48
#define OFF_CTIME 112
#define OFF_MEMBER_INDEX 120
#define OFF_MEMBER_COUNT 124
#define OFF_CHUNK 128
#define OFF_LAYOUT 136
#define OFF_FLAGS 140
#define OFF_DATA_OFFSET 144
#define OFF_MEMBER_SIZES 152
#define OFF_EVENTS (OFF_MEMBER_SIZES + 8 * LAYOUT_MAX_MEMBERS)
#define OFF_RESERVED_1 OFF_EVENTS /* version 1: reserved from here */
#define OFF_RESHAPE_FLAGS (OFF_EVENTS + 8)
#define OFF_RESHAPE_POSITION (OFF_RESHAPE_FLAGS + 8)
#define OFF_JOURNAL_POSITION (OFF_RESHAPE_POSITION + 8)
#define OFF_JOURNAL_LENGTH (OFF_JOURNAL_POSITION + 8)
#define OFF_JOURNAL_CRC (OFF_JOURNAL_LENGTH + 8)
#define OFF_NEW_SIZES (OFF_JOURNAL_CRC + 8)
#define OFF_BEHIND (OFF_NEW_SIZES + 8 * LAYOUT_MAX_MEMBERS)
#define OFF_NR_LOST (OFF_BEHIND + 8)
#define OFF_ROSTER (OFF_NR_LOST + 4)
#define OFF_LOST (OFF_NR_LOST + 8)
#define OFF_RESERVED (OFF_LOST + 16 * HEADER_LOST_MAX)
#define OFF_MAP_SHIFT OFF_RESERVED
#define OFF_MAP_OFFSET (OFF_MAP_SHIFT + 8)
#define OFF_MAP_BYTES (OFF_MAP_OFFSET + 8)
#define OFF_RESERVED_2 (OFF_MAP_BYTES + 8)
#define OFF_CRC (HEADER_SIZE - 4)

_Static_assert(OFF_EVENTS == 664, "member_sizes must end at 664");
_Static_assert(OFF_NEW_SIZES == 712 && OFF_BEHIND == 1224,
               "the reshape fields are where header.h says");
_Static_assert(OFF_LOST == 1240 && OFF_RESERVED == 4056,
               "the lost-range list is where header.h says");
_Static_assert(OFF_MAP_OFFSET == 4064 && OFF_RESERVED_2 == 4080,
               "the allocation map's fields are where header.h says");
_Static_assert(sizeof HEADER_MAGIC - 1 == 8, "the magic is 8 bytes");
_Static_assert(sizeof ((struct header *) 0)->name == OFF_CTIME - OFF_NAME,
               "struct header's name is the whole 64-byte field");

/* CRC32C with the reflected Castagnoli polynomial 0x82F63B78: entry i is
 * the CRC of the single byte i.  None of the libraries we link (glibc,
 * liburing, libconfig) exports a CRC32C, and a header is checksummed only
 * when a member is opened or created, so a byte-at-a-time table is fast
 * enough.  The unit tests check the table against the bitwise definition.
 */
static const uint32_t crc32c_table[256] = {
  0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c,
  0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
  0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
  0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
  0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc,
  0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
  0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512,
  0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
  0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
  0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
  0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595, 0x417b1dbc, 0xb3109ebf,
  0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
  0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f,
  0xed03a29b, 0x1f682198, 0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
  0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
  0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
  0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e,
  0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
  0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e,
  0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
  0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
  0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
  0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93, 0x082f63b7, 0xfa44e0b4,
  0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
  0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b,
  0xb4091bff, 0x466298fc, 0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
  0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
  0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
  0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975,
  0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
  0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905,
  0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
  0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
  0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
  0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8,
  0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
  0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78,
  0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
  0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
  0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
  0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69,
  0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
  0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

/* The ~ on entry and on return are done here, not by the caller, so that
 * crc32c (0, "123456789", 9) == 0xE3069283 (the standard check value) and a
 * CRC can be computed piecewise: crc32c (crc32c (0, a, na), b, nb) equals
 * the CRC of a followed by b.
 */
uint32_t
crc32c (uint32_t crc, const void *buf, size_t len)
{
  const uint8_t *p = buf;

  crc = ~crc;
  while (len--)
    crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* Version 1 wrote 1 for md's alternate layout, which it called "layout
 * identifier 1"; md calls that layout 2.  The header keeps the number of
 * its own version; struct header always holds md's.
 */
static uint32_t
layout_on_disk (uint32_t version, uint32_t layout)
{
  if (version == HEADER_VERSION_1)
    return layout == LAYOUT_MD_ALT ? 1 : 0;
  return layout;
}

static uint32_t
layout_from_disk (uint32_t version, uint32_t v)
{
  if (version == HEADER_VERSION_1)
    return v == 1 ? LAYOUT_MD_ALT : 0;
  return v;
}

/* The name is copied up to its first NUL and at most HEADER_NAME_MAX bytes, so
 * the field is always NUL-terminated and NUL-padded whatever sits after the
 * terminator in sb->name.  Nothing else is checked: encoding an invalid
 * header gives bytes that header_decode rejects.  sb->version says
 * which version to write (version 1 has no events).
 */
void
header_encode (const struct header *sb, uint8_t *buf)
{
  memset (buf, 0, HEADER_SIZE);
  memcpy (buf + OFF_MAGIC, HEADER_MAGIC, 8);
  put_le32 (buf + OFF_VERSION, sb->version);
  put_le32 (buf + OFF_HEADER_SIZE, HEADER_SIZE);
  memcpy (buf + OFF_ARRAY_UUID, sb->array_uuid, 16);
  memcpy (buf + OFF_MEMBER_UUID, sb->member_uuid, 16);
  memcpy (buf + OFF_NAME, sb->name, strnlen (sb->name, HEADER_NAME_MAX));
  put_le64 (buf + OFF_CTIME, sb->ctime);
  put_le32 (buf + OFF_MEMBER_INDEX, sb->member_index);
  put_le32 (buf + OFF_MEMBER_COUNT, sb->member_count);
  put_le64 (buf + OFF_CHUNK, sb->chunk);
  put_le32 (buf + OFF_LAYOUT, layout_on_disk (sb->version, sb->layout));
  put_le32 (buf + OFF_FLAGS, sb->flags);
  put_le64 (buf + OFF_DATA_OFFSET, sb->data_offset);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    put_le64 (buf + OFF_MEMBER_SIZES + 8 * i, sb->member_sizes[i]);
  if (sb->version != HEADER_VERSION_1)
    put_le64 (buf + OFF_EVENTS, sb->events);
  if (sb->flags & HEADER_FLAG_RESHAPE) {
    put_le32 (buf + OFF_RESHAPE_FLAGS, sb->reshape.flags);
    put_le64 (buf + OFF_RESHAPE_POSITION, sb->reshape.position);
    put_le64 (buf + OFF_JOURNAL_POSITION, sb->reshape.journal_position);
    put_le64 (buf + OFF_JOURNAL_LENGTH, sb->reshape.journal_length);
    put_le32 (buf + OFF_JOURNAL_CRC, sb->reshape.journal_crc);
    for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
      put_le64 (buf + OFF_NEW_SIZES + 8 * i, sb->reshape.new_sizes[i]);
  }
  if (sb->version != HEADER_VERSION_1) {
    put_le64 (buf + OFF_BEHIND, sb->behind);
    put_le32 (buf + OFF_NR_LOST, sb->nr_lost);
    put_le32 (buf + OFF_ROSTER, sb->roster);
    for (unsigned i = 0; i < sb->nr_lost && i < HEADER_LOST_MAX; ++i) {
      put_le64 (buf + OFF_LOST + 16 * i, sb->lost[i].offset);
      put_le64 (buf + OFF_LOST + 16 * i + 8, sb->lost[i].length);
    }
    put_le32 (buf + OFF_MAP_SHIFT, sb->map_shift);
    put_le64 (buf + OFF_MAP_OFFSET, sb->map_offset);
    put_le64 (buf + OFF_MAP_BYTES, sb->map_bytes);
  }
  put_le32 (buf + OFF_CRC, crc32c (0, buf, OFF_CRC));
}

/* Only [A-Za-z0-9._-], tested by hand rather than with isalnum so that the
 * locale cannot widen the set: the name ends up in paths and messages.
 */
static bool
name_char_ok (uint8_t c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
         || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* A name of 1 to HEADER_NAME_MAX allowed characters, then NULs to the end of
 * the 64-byte field.  Requiring the NUL padding (not just a terminator)
 * keeps the encoding unique.
 */
static bool
name_ok (const uint8_t *p)
{
  size_t len = 0;

  while (len < HEADER_NAME_MAX + 1 && p[len] != 0) {
    if (!name_char_ok (p[len]))
      return false;
    ++len;
  }
  if (len == 0 || len > HEADER_NAME_MAX)
    return false;
  for (size_t i = len; i < HEADER_NAME_MAX + 1; ++i)
    if (p[i] != 0)
      return false;
  return true;
}

/* Member sizes: count sizes of whole chunks (0 allowed when some may be
 * out of a layout), zeros after.
 */
static bool
sizes_ok (const uint64_t *sizes, uint32_t count, uint64_t chunk,
          bool zero_ok)
{
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i) {
    if (i >= count) {
      if (sizes[i] != 0)
        return false;
    }
    else if ((sizes[i] == 0 && !zero_ok) || sizes[i] % chunk != 0)
      return false;
  }
  return true;
}

/* The lost-range list: at most HEADER_LOST_MAX ranges, each of whole
 * sectors, sorted, apart from the next by a gap (so that one list has
 * one encoding).
 */
static bool
lost_ok (const struct header *sb)
{
  if (sb->nr_lost > HEADER_LOST_MAX)
    return false;
  for (unsigned i = 0; i < sb->nr_lost; ++i) {
    const struct header_range *r = &sb->lost[i];
    if (r->length == 0 || r->offset % 512 || r->length % 512
        || r->offset + r->length < r->offset)
      return false;
    if (i > 0 && r->offset <= sb->lost[i - 1].offset + sb->lost[i - 1].length)
      return false;
  }
  return true;
}

/* No map (all three zero), or a region size we know and a map of whole
 * 4 KiB blocks between the header and the data.
 */
static bool
map_ok (const struct header *sb)
{
  if (sb->map_shift == 0)
    return sb->map_offset == 0 && sb->map_bytes == 0;
  return sb->map_shift >= HEADER_MAP_SHIFT_MIN
         && sb->map_shift <= HEADER_MAP_SHIFT_MAX
         && sb->map_offset >= HEADER_SIZE && sb->map_offset % 4096 == 0
         && sb->map_bytes > 0 && sb->map_bytes % 4096 == 0
         && sb->map_bytes <= sb->data_offset
         && sb->map_offset <= sb->data_offset - sb->map_bytes;
}

/* Checks run in a fixed order (magic, version, CRC, then each field in
 * header order) so that a header with several faults always reports the
 * same one.  The version is checked before the CRC so that a header written
 * by a newer nbdstripe, whose checksum might cover something else, is
 * reported as a version we do not know rather than as corruption.
 * The names given in *field are those of struct header, plus
 * "header_size" and "reserved".
 */
enum header_error
header_decode (const uint8_t *buf, size_t len, struct header *sb,
           const char **field)
{
  const char *bad = NULL;
  uint32_t header_size, version;

  if (field)
    *field = NULL;
  if (len < HEADER_SIZE)
    return HEADER_ERR_TRUNCATED;
  if (memcmp (buf + OFF_MAGIC, HEADER_MAGIC, 8) != 0)
    return HEADER_ERR_MAGIC;
  version = get_le32 (buf + OFF_VERSION);
  if (version != HEADER_VERSION && version != HEADER_VERSION_1)
    return HEADER_ERR_VERSION;
  if (get_le32 (buf + OFF_CRC) != crc32c (0, buf, OFF_CRC))
    return HEADER_ERR_CRC;

  memset (sb, 0, sizeof *sb);
  sb->version = version;
  header_size = get_le32 (buf + OFF_HEADER_SIZE);
  memcpy (sb->array_uuid, buf + OFF_ARRAY_UUID, 16);
  memcpy (sb->member_uuid, buf + OFF_MEMBER_UUID, 16);
  memcpy (sb->name, buf + OFF_NAME, HEADER_NAME_MAX + 1);
  sb->ctime = get_le64 (buf + OFF_CTIME);
  sb->member_index = get_le32 (buf + OFF_MEMBER_INDEX);
  sb->member_count = get_le32 (buf + OFF_MEMBER_COUNT);
  sb->chunk = get_le64 (buf + OFF_CHUNK);
  sb->layout = layout_from_disk (version, get_le32 (buf + OFF_LAYOUT));
  sb->flags = get_le32 (buf + OFF_FLAGS);
  sb->data_offset = get_le64 (buf + OFF_DATA_OFFSET);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    sb->member_sizes[i] = get_le64 (buf + OFF_MEMBER_SIZES + 8 * i);
  if (version != HEADER_VERSION_1)
    sb->events = get_le64 (buf + OFF_EVENTS);
  if (sb->flags & HEADER_FLAG_RESHAPE) {
    sb->reshape.flags = get_le32 (buf + OFF_RESHAPE_FLAGS);
    sb->reshape.position = get_le64 (buf + OFF_RESHAPE_POSITION);
    sb->reshape.journal_position = get_le64 (buf + OFF_JOURNAL_POSITION);
    sb->reshape.journal_length = get_le64 (buf + OFF_JOURNAL_LENGTH);
    sb->reshape.journal_crc = get_le32 (buf + OFF_JOURNAL_CRC);
    for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
      sb->reshape.new_sizes[i] = get_le64 (buf + OFF_NEW_SIZES + 8 * i);
  }
  if (version != HEADER_VERSION_1) {
    sb->behind = get_le64 (buf + OFF_BEHIND);
    sb->nr_lost = get_le32 (buf + OFF_NR_LOST);
    sb->roster = get_le32 (buf + OFF_ROSTER);
    for (unsigned i = 0; i < sb->nr_lost && i < HEADER_LOST_MAX; ++i) {
      sb->lost[i].offset = get_le64 (buf + OFF_LOST + 16 * i);
      sb->lost[i].length = get_le64 (buf + OFF_LOST + 16 * i + 8);
    }
    sb->map_shift = get_le32 (buf + OFF_MAP_SHIFT);
    sb->map_offset = get_le64 (buf + OFF_MAP_OFFSET);
    sb->map_bytes = get_le64 (buf + OFF_MAP_BYTES);
  }

  if (header_size != HEADER_SIZE)
    bad = "header_size";
  else if (!name_ok (buf + OFF_NAME))
    bad = "name";
  else if (sb->member_count == 0 || sb->member_count > LAYOUT_MAX_MEMBERS)
    bad = "member_count";
  else if (sb->member_index >= sb->member_count)
    bad = "member_index";
  else if (sb->chunk == 0 || sb->chunk % LAYOUT_CHUNK_ALIGN != 0)
    bad = "chunk";
  else if (sb->layout != LAYOUT_MD_ALT
           && (sb->version == HEADER_VERSION_1 || sb->layout != LAYOUT_MD_ORIG))
    bad = "layout";
  else if ((sb->flags & ~(sb->version == HEADER_VERSION_1
                            ? 0u
                            : HEADER_FLAGS_KNOWN))
           != 0)
    bad = "flags";
  else if (sb->data_offset < HEADER_SIZE || sb->data_offset % HEADER_SIZE != 0)
    bad = "data_offset";
  else {
    const bool reshape = sb->flags & HEADER_FLAG_RESHAPE;

    /* Sizes of the members (0: not in that layout, while reshaping),
     * then zeros in the unused slots.
     */
    if (!sizes_ok (sb->member_sizes, sb->member_count, sb->chunk, reshape))
      bad = "member_sizes";
    else if (reshape
             && !sizes_ok (sb->reshape.new_sizes, sb->member_count, sb->chunk,
                           true))
      bad = "reshape.new_sizes";
    else if (reshape
             && (sb->reshape.flags & ~(HEADER_RESHAPE_BACKWARD
                                       | HEADER_RESHAPE_JOURNAL)) != 0)
      bad = "reshape.flags";
    else if (reshape && !(sb->reshape.flags & HEADER_RESHAPE_JOURNAL)
             && (sb->reshape.journal_position || sb->reshape.journal_length
                 || sb->reshape.journal_crc))
      bad = "reshape.journal";
    if (!bad && version != HEADER_VERSION_1 && sb->events == 0)
      bad = "events";
    else if (!bad && version != HEADER_VERSION_1
             && sb->member_count < 64
             && sb->behind >> sb->member_count != 0)
      bad = "behind";
    else if (!bad && version != HEADER_VERSION_1
             && (!lost_ok (sb)
                 || !all_zero (buf + OFF_LOST + 16 * sb->nr_lost,
                               16 * (HEADER_LOST_MAX - sb->nr_lost))))
      bad = "lost";
    else if (!bad && version != HEADER_VERSION_1 && !map_ok (sb))
      bad = "map";
    else if (!bad && version == HEADER_VERSION_1
             && !all_zero (buf + OFF_RESERVED_1, OFF_CRC - OFF_RESERVED_1))
      bad = "reserved";
    else if (!bad && !reshape
             && !all_zero (buf + OFF_RESHAPE_FLAGS, OFF_BEHIND - OFF_RESHAPE_FLAGS))
      bad = "reserved";
    else if (!bad
             && (!all_zero (buf + OFF_RESHAPE_FLAGS + 4, 4)
                 || !all_zero (buf + OFF_JOURNAL_CRC + 4, 4)
                 || !all_zero (buf + OFF_MAP_SHIFT + 4, 4)
                 || !all_zero (buf + OFF_RESERVED_2, OFF_CRC - OFF_RESERVED_2)))
      bad = "reserved";
  }

  if (bad) {
    if (field)
      *field = bad;
    return HEADER_ERR_FIELD;
  }
  return HEADER_OK;
}

const char *
header_strerror (enum header_error err)
{
  switch (err) {
  case HEADER_OK: return "no error";
  case HEADER_ERR_TRUNCATED: return "header truncated (fewer than 4096 bytes)";
  case HEADER_ERR_MAGIC: return "not an nbdstripe member (no header magic)";
  case HEADER_ERR_VERSION: return "unknown header format version";
  case HEADER_ERR_CRC: return "header checksum mismatch (corrupt header)";
  case HEADER_ERR_FIELD: return "header field out of range";
  }
  return "unknown header error";
}

void
header_uuid_format (const uint8_t uuid[16], char out[37])
{
  static const char hex[] = "0123456789abcdef";
  char *p = out;

  for (unsigned i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      *p++ = '-';
    *p++ = hex[uuid[i] >> 4];
    *p++ = hex[uuid[i] & 0xf];
  }
  *p = '\0';
}
