/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the on-disk member header (plugin/meta/header.c).
 *
 * Byte offsets and little-endian encoding are checked against this file's
 * own reading of the table in include/header.h, not through the code
 * under test, and CRC32C against a bitwise implementation of its
 * definition.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "header.h"
#include "util.h"

#define KiB UINT64_C (1024)
#define MiB (KiB * KiB)

/* The character set a volume name may use. */
static const char name_chars[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";

/* ---- PRNG: splitmix64, fixed seeds so that runs are reproducible ---- */

struct rng {
  uint64_t s;
};

static uint64_t
rng_next (struct rng *r)
{
  uint64_t z = (r->s += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform enough in [lo, hi] for test data. */
static uint64_t
rng_range (struct rng *r, uint64_t lo, uint64_t hi)
{
  return lo + rng_next (r) % (hi - lo + 1);
}

/* ---- Helpers that know the documented layout ---- */

static void
le32_put (uint8_t *p, uint32_t v)
{
  for (unsigned i = 0; i < 4; ++i)
    p[i] = (uint8_t) (v >> (8 * i));
}

static void
le64_put (uint8_t *p, uint64_t v)
{
  for (unsigned i = 0; i < 8; ++i)
    p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t
le64_get (const uint8_t *p)
{
  uint64_t v = 0;

  for (unsigned i = 8; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

static uint32_t
le32_get (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
         | (uint32_t) p[3] << 24;
}

/* Recompute the CRC after editing a header by hand, so that decoding gets
 * past the checksum to the field checks.
 */
static void
reseal (uint8_t *buf)
{
  le32_put (buf + 4092, crc32c (0, buf, 4092));
}

/* CRC32C straight from its definition: reflected, polynomial 0x82F63B78,
 * init ~0, final xor ~0.
 */
static uint32_t
crc32c_bitwise (const uint8_t *p, size_t len)
{
  uint32_t crc = 0xffffffff;

  for (size_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (unsigned b = 0; b < 8; ++b)
      crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78 : 0);
  }
  return ~crc;
}

/* A plain valid header: 4 members of 1 GiB, 128 KiB chunks. */
static void
plain_header (struct header *sb)
{
  memset (sb, 0, sizeof *sb);
  sb->version = HEADER_VERSION;
  for (unsigned i = 0; i < 16; ++i) {
    sb->array_uuid[i] = (uint8_t) (0x10 + i);
    sb->member_uuid[i] = (uint8_t) (0xf0 - i);
  }
  strcpy (sb->name, "vol0");
  sb->ctime = 1700000000;
  sb->member_index = 2;
  sb->member_count = 4;
  sb->chunk = 128 * KiB;
  sb->layout = LAYOUT_MD_ALT;
  sb->flags = 0;
  sb->data_offset = HEADER_DEFAULT_DATA_OFFSET;
  sb->events = 57;
  for (unsigned i = 0; i < 4; ++i)
    sb->member_sizes[i] = 1024 * MiB;
}

/* A random valid header, reaching the extremes of every field. */
static void
random_header (struct rng *r, struct header *sb)
{
  unsigned name_len = (unsigned) rng_range (r, 1, HEADER_NAME_MAX);

  memset (sb, 0, sizeof *sb);
  sb->version = HEADER_VERSION;
  for (unsigned i = 0; i < 16; ++i) {
    sb->array_uuid[i] = (uint8_t) rng_next (r);
    sb->member_uuid[i] = (uint8_t) rng_next (r);
  }
  for (unsigned i = 0; i < name_len; ++i)
    sb->name[i] = name_chars[rng_next (r) % (sizeof name_chars - 1)];
  sb->ctime = rng_next (r);
  sb->member_count = (uint32_t) rng_range (r, 1, LAYOUT_MAX_MEMBERS);
  sb->member_index = (uint32_t) rng_range (r, 0, sb->member_count - 1);
  /* Up to 4 GiB chunks and 2^31 chunks a member: no overflow. */
  sb->chunk = LAYOUT_CHUNK_ALIGN * rng_range (r, 1, UINT64_C (1) << 20);
  sb->layout = LAYOUT_MD_ALT;
  sb->data_offset = HEADER_SIZE * rng_range (r, 1, UINT64_MAX / HEADER_SIZE);
  sb->events = rng_range (r, 1, UINT64_MAX);
  for (unsigned i = 0; i < sb->member_count; ++i)
    sb->member_sizes[i] = sb->chunk * rng_range (r, 1, UINT64_C (1) << 31);
}

static void
assert_headers_equal (const struct header *a,
                          const struct header *b)
{
  assert_int_equal (a->version, b->version);
  assert_memory_equal (a->array_uuid, b->array_uuid, 16);
  assert_memory_equal (a->member_uuid, b->member_uuid, 16);
  assert_memory_equal (a->name, b->name, HEADER_NAME_MAX + 1);
  assert_int_equal (a->ctime, b->ctime);
  assert_int_equal (a->member_index, b->member_index);
  assert_int_equal (a->member_count, b->member_count);
  assert_int_equal (a->chunk, b->chunk);
  assert_int_equal (a->layout, b->layout);
  assert_int_equal (a->flags, b->flags);
  assert_int_equal (a->data_offset, b->data_offset);
  assert_int_equal (a->events, b->events);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    assert_int_equal (a->member_sizes[i], b->member_sizes[i]);
}

/* Decoding buf must fail on exactly this field. */
static void
expect_field_error (const uint8_t *buf, const char *want)
{
  struct header sb;
  const char *field = NULL;
  enum header_error err = header_decode (buf, HEADER_SIZE, &sb, &field);

  if (err != HEADER_ERR_FIELD)
    fail_msg ("expected HEADER_ERR_FIELD (%s), got %d: %s", want, err,
              header_strerror (err));
  assert_non_null (field);
  assert_string_equal (field, want);
}

/* Encode sb and expect it to be rejected on field want. */
static void
expect_encoded_field_error (const struct header *sb, const char *want)
{
  uint8_t buf[HEADER_SIZE];

  header_encode (sb, buf);
  expect_field_error (buf, want);
}

static void
expect_ok (const uint8_t *buf)
{
  struct header sb;
  const char *field = "untouched";
  enum header_error err = header_decode (buf, HEADER_SIZE, &sb, &field);

  if (err != HEADER_OK)
    fail_msg ("expected HEADER_OK, got %s (field %s)", header_strerror (err),
              field ? field : "none");
}

/* ---- CRC32C ---- */

static void
crc32c_gives_the_standard_check_value (void **state)
{
  (void) state;
  assert_int_equal (crc32c (0, "123456789", 9), 0xE3069283);
  assert_int_equal (crc32c (0, "", 0), 0);
}

static void
crc32c_chains_over_split_buffers (void **state)
{
  const char *s = "123456789";

  (void) state;
  for (size_t cut = 0; cut <= 9; ++cut)
    assert_int_equal (crc32c (crc32c (0, s, cut), s + cut, 9 - cut),
                      0xE3069283);
}

static void
crc32c_matches_the_bitwise_definition (void **state)
{
  struct rng r = { 0x5eed0001 };
  uint8_t data[1000];

  (void) state;
  for (unsigned n = 0; n < 200; ++n) {
    size_t len = (size_t) rng_range (&r, 0, sizeof data);
    for (size_t i = 0; i < len; ++i)
      data[i] = (uint8_t) rng_next (&r);
    assert_int_equal (crc32c (0, data, len), crc32c_bitwise (data, len));
  }
  /* Every table entry, one byte at a time. */
  for (unsigned b = 0; b < 256; ++b) {
    uint8_t byte = (uint8_t) b;
    assert_int_equal (crc32c (0, &byte, 1), crc32c_bitwise (&byte, 1));
  }
}

/* ---- Encoding ---- */

static void
header_round_trips_random_headers (void **state)
{
  struct rng r = { 0x5eed0002 };

  (void) state;
  for (unsigned n = 0; n < 5000; ++n) {
    struct header in, out;
    uint8_t buf[HEADER_SIZE], again[HEADER_SIZE];
    const char *field = NULL;
    enum header_error err;

    random_header (&r, &in);
    header_encode (&in, buf);
    err = header_decode (buf, sizeof buf, &out, &field);
    if (err != HEADER_OK)
      fail_msg ("header %u: %s (field %s)", n, header_strerror (err),
                field ? field : "none");
    assert_headers_equal (&in, &out);
    header_encode (&out, again);
    assert_memory_equal (buf, again, HEADER_SIZE);
  }
}

static void
header_puts_each_field_little_endian_at_its_documented_offset (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];
  static const uint8_t version[4] = { 0x02, 0, 0, 0 };
  static const uint8_t header_size[4] = { 0x00, 0x10, 0, 0 };
  static const uint8_t ctime[8] = { 0x08, 0x07, 0x06, 0x05,
                                    0x04, 0x03, 0x02, 0x01 };
  static const uint8_t member_index[4] = { 0x29, 0, 0, 0 };
  static const uint8_t member_count[4] = { 0x2a, 0, 0, 0 };
  static const uint8_t chunk[8] = { 0x00, 0x60, 0x45, 0x23, 0x01, 0, 0, 0 };
  static const uint8_t layout[4] = { 0x02, 0, 0, 0 };
  static const uint8_t data_offset[8] = { 0x00, 0x00, 0x10, 0x00,
                                          0x00, 0x00, 0x00, 0x00 };
  static const uint8_t events[8] = { 0x11, 0x22, 0x33, 0x44,
                                     0x55, 0x66, 0x77, 0x08 };
  uint8_t name[64] = "my-volume_1.0";

  (void) state;
  plain_header (&sb);
  strcpy (sb.name, (const char *) name);
  sb.ctime = UINT64_C (0x0102030405060708);
  sb.member_count = 42;
  sb.member_index = 41;
  sb.chunk = UINT64_C (0x123456000);
  sb.data_offset = 1 * MiB;
  sb.events = UINT64_C (0x0877665544332211);
  for (unsigned i = 0; i < 42; ++i)
    sb.member_sizes[i] = sb.chunk * (UINT64_C (0x10203) + i);
  header_encode (&sb, buf);

  assert_memory_equal (buf + 0, "NBDSTRIP", 8);
  assert_memory_equal (buf + 8, version, 4);
  assert_memory_equal (buf + 12, header_size, 4);
  assert_memory_equal (buf + 16, sb.array_uuid, 16);
  assert_memory_equal (buf + 32, sb.member_uuid, 16);
  assert_memory_equal (buf + 48, name, 64);
  assert_memory_equal (buf + 112, ctime, 8);
  assert_memory_equal (buf + 120, member_index, 4);
  assert_memory_equal (buf + 124, member_count, 4);
  assert_memory_equal (buf + 128, chunk, 8);
  assert_memory_equal (buf + 136, layout, 4);
  for (unsigned i = 140; i < 144; ++i)
    assert_int_equal (buf[i], 0); /* flags */
  assert_memory_equal (buf + 144, data_offset, 8);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i) {
    uint8_t want[8];
    le64_put (want, sb.member_sizes[i]);
    assert_memory_equal (buf + 152 + 8 * i, want, 8);
  }
  assert_memory_equal (buf + 664, events, 8);
  for (unsigned i = 672; i < 4092; ++i)
    assert_int_equal (buf[i], 0); /* reserved */
  expect_ok (buf);
}

/* A header written by version 1 (nbdstripe 0.1): layout 1 on disk, which
 * meant md's alternate layout, and no events.  It still reads, with that
 * meaning, and re-encodes to the same bytes.
 */
static void
header_version_1_still_reads_with_its_own_layout_number (void **state)
{
  struct header sb, out;
  uint8_t buf[HEADER_SIZE], again[HEADER_SIZE];
  const char *field = NULL;
  uint32_t crc;

  (void) state;
  plain_header (&sb);
  sb.events = 0;
  header_encode (&sb, buf);
  buf[8] = 1;   /* version 1 */
  buf[136] = 1; /* its number for md's alternate layout */
  memset (buf + 664, 0, 8);
  crc = crc32c (0, buf, HEADER_SIZE - 4);
  for (unsigned i = 0; i < 4; ++i)
    buf[HEADER_SIZE - 4 + i] = (uint8_t) (crc >> (8 * i));
  assert_int_equal (header_decode (buf, HEADER_SIZE, &out, &field), HEADER_OK);
  assert_int_equal (out.version, HEADER_VERSION_1);
  assert_int_equal (out.layout, LAYOUT_MD_ALT);
  assert_int_equal (out.events, 0);
  header_encode (&out, again);
  assert_memory_equal (buf, again, HEADER_SIZE);

  /* Version 1's reserved area starts at 664: events are not allowed. */
  buf[664] = 1;
  crc = crc32c (0, buf, HEADER_SIZE - 4);
  for (unsigned i = 0; i < 4; ++i)
    buf[HEADER_SIZE - 4 + i] = (uint8_t) (crc >> (8 * i));
  assert_int_equal (header_decode (buf, HEADER_SIZE, &out, &field), HEADER_ERR_FIELD);
  assert_string_equal (field, "reserved");
  /* Version 1's layout 2 is no layout it ever wrote. */
  buf[664] = 0;
  buf[136] = 2;
  crc = crc32c (0, buf, HEADER_SIZE - 4);
  for (unsigned i = 0; i < 4; ++i)
    buf[HEADER_SIZE - 4 + i] = (uint8_t) (crc >> (8 * i));
  assert_int_equal (header_decode (buf, HEADER_SIZE, &out, &field), HEADER_ERR_FIELD);
  assert_string_equal (field, "layout");
}

static void
header_rejects_events_zero (void **state)
{
  struct header sb;

  (void) state;
  plain_header (&sb);
  sb.events = 0;
  expect_encoded_field_error (&sb, "events");
}

static void
header_stores_crc32c_of_bytes_0_to_4091_at_4092 (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];
  uint32_t crc;

  (void) state;
  plain_header (&sb);
  header_encode (&sb, buf);
  crc = crc32c_bitwise (buf, 4092);
  assert_int_equal (buf[4092], crc & 0xff);
  assert_int_equal (buf[4093], (crc >> 8) & 0xff);
  assert_int_equal (buf[4094], (crc >> 16) & 0xff);
  assert_int_equal (buf[4095], crc >> 24);
}

static void
header_encode_pads_the_name_with_nuls (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  memset (sb.name, 'x', sizeof sb.name);
  memcpy (sb.name, "ab", 3); /* "ab\0xxxx..." */
  header_encode (&sb, buf);
  assert_memory_equal (buf + 48, "ab", 3);
  for (unsigned i = 51; i < 112; ++i)
    assert_int_equal (buf[i], 0);
  expect_ok (buf);
}

/* ---- Rejection ---- */

/* Any single-bit error is caught, and by the right check: the magic, the
 * version, else the CRC.
 */
static void
header_rejects_every_single_bit_flip (void **state)
{
  struct rng r = { 0x5eed0003 };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  random_header (&r, &sb);
  sb.member_count = LAYOUT_MAX_MEMBERS;
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    sb.member_sizes[i] = sb.chunk * (i + 1);
  header_encode (&sb, buf);
  expect_ok (buf);

  for (unsigned bit = 0; bit < HEADER_SIZE * 8; ++bit) {
    struct header out;
    unsigned byte = bit / 8;
    enum header_error want = byte < 8    ? HEADER_ERR_MAGIC
                         : byte < 12 ? HEADER_ERR_VERSION
                                     : HEADER_ERR_CRC;
    enum header_error err;

    buf[byte] ^= (uint8_t) (1u << (bit % 8));
    err = header_decode (buf, sizeof buf, &out, NULL);
    buf[byte] ^= (uint8_t) (1u << (bit % 8));
    if (err != want)
      fail_msg ("flipping bit %u of byte %u: got \"%s\", expected \"%s\"",
                bit % 8, byte, header_strerror (err), header_strerror (want));
  }
}

static void
header_rejects_fewer_than_4096_bytes (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  header_encode (&sb, buf);
  for (size_t len = 0; len < HEADER_SIZE; ++len)
    assert_int_equal (header_decode (buf, len, &sb, NULL), HEADER_ERR_TRUNCATED);
}

static void
header_ignores_bytes_beyond_4096 (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE + 512];

  (void) state;
  plain_header (&sb);
  memset (buf, 0xa5, sizeof buf);
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_OK);
}

static void
header_rejects_missing_magic (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  memset (buf, 0, sizeof buf); /* a blank disk */
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_MAGIC);

  plain_header (&sb);
  header_encode (&sb, buf);
  memcpy (buf, "NBDSTRIp", 8);
  reseal (buf);
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_MAGIC);
}

static void
header_rejects_unknown_version (void **state)
{
  static const uint32_t versions[] = { 0, HEADER_VERSION + 1, UINT32_MAX };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; ++i) {
    plain_header (&sb);
    sb.version = versions[i];
    header_encode (&sb, buf);
    assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_VERSION);
  }
}

static void
header_checks_magic_then_version_then_crc_then_fields (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  sb.flags = 16; /* a bad field ... */
  header_encode (&sb, buf);
  expect_field_error (buf, "flags");
  buf[4092] ^= 1; /* ... a bad CRC ... */
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_CRC);
  buf[8] = 3; /* ... a bad version ... */
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_VERSION);
  buf[0] = 'X'; /* ... no magic ... */
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_MAGIC);
  /* ... and too short. */
  assert_int_equal (header_decode (buf, HEADER_SIZE - 1, &sb, NULL), HEADER_ERR_TRUNCATED);
}

static void
header_names_the_first_bad_field_in_header_order (void **state)
{
  struct header sb;

  (void) state;
  plain_header (&sb);
  sb.flags = 16;
  sb.chunk = 100;
  sb.member_sizes[10] = 4096;
  expect_encoded_field_error (&sb, "chunk");
}

static void
header_sets_field_only_on_a_field_error (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];
  const char *field = "untouched";

  (void) state;
  plain_header (&sb);
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &sb, &field), HEADER_OK);
  assert_null (field);
  buf[100] ^= 1;
  field = "untouched";
  assert_int_equal (header_decode (buf, sizeof buf, &sb, &field), HEADER_ERR_CRC);
  assert_null (field);
  /* A NULL field pointer is allowed on a field error too. */
  plain_header (&sb);
  sb.flags = 16;
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &sb, NULL), HEADER_ERR_FIELD);
}

static void
header_rejects_header_size_other_than_4096 (void **state)
{
  static const uint32_t sizes[] = { 0, 512, 4095, 4097, 8192, UINT32_MAX };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    header_encode (&sb, buf);
    le32_put (buf + 12, sizes[i]);
    reseal (buf);
    expect_field_error (buf, "header_size");
  }
}

static void
header_rejects_name_without_nul_in_64_bytes (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  header_encode (&sb, buf);
  memset (buf + 48, 'a', 64);
  reseal (buf);
  expect_field_error (buf, "name");
}

static void
header_rejects_empty_name (void **state)
{
  struct header sb;

  (void) state;
  plain_header (&sb);
  sb.name[0] = '\0';
  expect_encoded_field_error (&sb, "name");
}

static void
header_rejects_name_with_characters_outside_the_allowed_set (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  strcpy (sb.name, "abcdef");
  for (unsigned c = 1; c < 256; ++c) {
    if (strchr (name_chars, (int) c))
      continue;
    for (unsigned pos = 0; pos < 6; pos += 5) { /* first and last */
      header_encode (&sb, buf);
      buf[48 + pos] = (uint8_t) c;
      reseal (buf);
      expect_field_error (buf, "name");
    }
  }
}

static void
header_rejects_bytes_after_the_name_terminator (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb); /* "vol0": NUL at offset 52 */
  for (unsigned i = 48 + 5; i < 112; ++i) {
    header_encode (&sb, buf);
    buf[i] = 'a';
    reseal (buf);
    expect_field_error (buf, "name");
  }
}

static void
header_accepts_63_byte_name_of_allowed_characters (void **state)
{
  struct header sb, out;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  assert_int_equal (strlen (name_chars), 65);
  plain_header (&sb);
  memcpy (sb.name, name_chars, HEADER_NAME_MAX); /* A..Z a..z 0..9 . */
  sb.name[HEADER_NAME_MAX] = '\0';
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &out, NULL), HEADER_OK);
  assert_string_equal (out.name, sb.name);
  strcpy (sb.name, "_-");
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &out, NULL), HEADER_OK);
  assert_string_equal (out.name, "_-");
}

static void
header_rejects_member_count_zero_or_above_64 (void **state)
{
  static const uint32_t counts[] = { 0, 65, 1000, UINT32_MAX };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
    plain_header (&sb);
    sb.member_index = 0;
    sb.member_count = counts[i];
    expect_encoded_field_error (&sb, "member_count");
  }
  plain_header (&sb);
  sb.member_count = LAYOUT_MAX_MEMBERS;
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    sb.member_sizes[i] = sb.chunk;
  header_encode (&sb, buf);
  expect_ok (buf);
}

static void
header_rejects_member_index_not_below_member_count (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  sb.member_index = sb.member_count;
  expect_encoded_field_error (&sb, "member_index");
  sb.member_index = UINT32_MAX;
  expect_encoded_field_error (&sb, "member_index");
  sb.member_index = sb.member_count - 1;
  header_encode (&sb, buf);
  expect_ok (buf);
}

static void
header_rejects_chunk_zero_or_not_a_multiple_of_4096 (void **state)
{
  static const uint64_t chunks[] = {
    0, 512, 4095, 4097, 6144, 128 * KiB + 512, UINT64_MAX,
  };
  struct header sb;

  (void) state;
  for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; ++i) {
    plain_header (&sb);
    sb.chunk = chunks[i];
    expect_encoded_field_error (&sb, "chunk");
  }
}

static void
header_rejects_layout_other_than_md_original_or_alternate (void **state)
{
  static const uint32_t ids[] = { 0, LAYOUT_MD_ALT + 1, UINT32_MAX };
  struct header sb;

  (void) state;
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; ++i) {
    plain_header (&sb);
    sb.layout = ids[i];
    expect_encoded_field_error (&sb, "layout");
  }
  /* md's original layout (1) reads back as itself in version 2 */
  {
    uint8_t buf[HEADER_SIZE];
    struct header back;
    plain_header (&sb);
    sb.layout = LAYOUT_MD_ORIG;
    header_encode (&sb, buf);
    assert_int_equal (buf[136], 1);
    assert_int_equal (header_decode (buf, sizeof buf, &back, NULL),
                      HEADER_OK);
    assert_int_equal (back.layout, LAYOUT_MD_ORIG);
  }
}

static void
header_rejects_flags_but_replaced_reshape_removed_and_creating (void **state)
{
  struct header sb, back;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  for (unsigned bit = 4; bit < 32; ++bit) {
    plain_header (&sb);
    sb.flags = UINT32_C (1) << bit;
    expect_encoded_field_error (&sb, "flags");
  }
  /* HEADER_FLAG_REPLACED reads back in version 2 ... */
  plain_header (&sb);
  sb.flags = HEADER_FLAG_REPLACED;
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  assert_int_equal (back.flags, HEADER_FLAG_REPLACED);
  /* ... and is refused in version 1, which did not know it */
  sb.version = HEADER_VERSION_1;
  sb.events = 0;
  expect_encoded_field_error (&sb, "flags");
}

static void
header_rejects_data_offset_below_4096_or_unaligned (void **state)
{
  static const uint64_t offsets[] = {
    0, 512, 4095, 4097, 1 * MiB + 512, UINT64_MAX,
  };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; ++i) {
    plain_header (&sb);
    sb.data_offset = offsets[i];
    expect_encoded_field_error (&sb, "data_offset");
  }
  plain_header (&sb);
  sb.data_offset = 4096; /* right after the header */
  header_encode (&sb, buf);
  expect_ok (buf);
}

static void
header_rejects_member_size_zero_or_not_whole_chunks (void **state)
{
  struct header sb;

  (void) state;
  for (unsigned i = 0; i < 4; ++i) {
    plain_header (&sb);
    sb.member_sizes[i] = 0;
    expect_encoded_field_error (&sb, "member_sizes");
    sb.member_sizes[i] = 1024 * MiB + 4096;
    expect_encoded_field_error (&sb, "member_sizes");
    sb.member_sizes[i] = sb.chunk - 4096;
    expect_encoded_field_error (&sb, "member_sizes");
  }
}

static void
header_rejects_member_size_in_an_unused_slot (void **state)
{
  struct header sb;

  (void) state;
  for (unsigned i = 4; i < LAYOUT_MAX_MEMBERS; ++i) {
    plain_header (&sb);
    sb.member_sizes[i] = sb.chunk;
    expect_encoded_field_error (&sb, "member_sizes");
  }
}

/* Bytes of the allocation map's fields (header.h: 4056..4059, 4064..4079). */
static bool
map_field (unsigned i)
{
  return (i >= 4056 && i < 4060) || (i >= 4064 && i < 4080);
}

static void
header_rejects_any_nonzero_reserved_byte (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  for (unsigned i = 672; i < 4092; ++i) {
    if (i >= 1224 && i < 1240)
      continue; /* behind, the lost-range count, the roster: fields */
    if (i >= 1240 && i < 4056)
      continue; /* the lost ranges: "lost" when nonzero past the count */
    header_encode (&sb, buf);
    buf[i] = 0x80;
    reseal (buf);
    /* The allocation map's fields: "map" when they make no map. */
    expect_field_error (buf, map_field (i) ? "map" : "reserved");
  }
}

/* ---- Reshape ---- */

static void
reshape_header (struct header *sb)
{
  plain_header (sb);
  sb->flags = HEADER_FLAG_RESHAPE;
  sb->reshape.flags = HEADER_RESHAPE_BACKWARD | HEADER_RESHAPE_JOURNAL;
  sb->reshape.position = 123 * 4096;
  sb->reshape.journal_position = 120 * 4096;
  sb->reshape.journal_length = 3 * 4096;
  sb->reshape.journal_crc = 0xdeadbeef;
  for (unsigned i = 0; i < sb->member_count; ++i)
    sb->reshape.new_sizes[i] = sb->member_sizes[i] * 2;
}

static void
header_reshape_fields_read_back_as_written (void **state)
{
  struct header sb, back;
  uint8_t buf[HEADER_SIZE], again[HEADER_SIZE];

  (void) state;
  reshape_header (&sb);
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  assert_int_equal (back.flags, HEADER_FLAG_RESHAPE);
  assert_memory_equal (&back.reshape, &sb.reshape, sizeof sb.reshape);
  header_encode (&back, again);
  assert_memory_equal (buf, again, HEADER_SIZE);
  /* Without the flag the fields are neither written nor read. */
  sb.flags = 0;
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  assert_int_equal (back.reshape.position, 0);
  assert_int_equal (back.reshape.new_sizes[0], 0);
}

static void
header_reshape_allows_a_member_out_of_one_layout (void **state)
{
  struct header sb, back;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  reshape_header (&sb);
  sb.member_sizes[sb.member_count - 1] = 0;  /* joining */
  sb.reshape.new_sizes[0] = 0;               /* leaving */
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  /* ... but only while reshaping. */
  plain_header (&sb);
  sb.member_sizes[0] = 0;
  expect_encoded_field_error (&sb, "member_sizes");
  reshape_header (&sb);
  sb.reshape.new_sizes[1] = 4096 * 3 + 1;
  expect_encoded_field_error (&sb, "reshape.new_sizes");
  reshape_header (&sb);
  sb.reshape.new_sizes[sb.member_count] = sb.chunk;
  expect_encoded_field_error (&sb, "reshape.new_sizes");
}

static void
header_reshape_rejects_a_journal_not_flagged (void **state)
{
  struct header sb;

  (void) state;
  reshape_header (&sb);
  sb.reshape.flags = 0;
  expect_encoded_field_error (&sb, "reshape.journal");
  reshape_header (&sb);
  sb.reshape.flags |= 4;
  expect_encoded_field_error (&sb, "reshape.flags");
}

static void
header_reshape_rejects_any_nonzero_reserved_byte (void **state)
{
  static const unsigned pads[] = { 676, 677, 678, 679, 708, 709, 710, 711 };
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  reshape_header (&sb);
  for (unsigned k = 0; k < sizeof pads / sizeof pads[0]; ++k) {
    header_encode (&sb, buf);
    buf[pads[k]] = 0x80;
    reseal (buf);
    expect_field_error (buf, "reserved");
  }
  for (unsigned i = 1240; i < 4092; ++i) {
    if (i >= 1240 && i < 4056)
      continue;
    header_encode (&sb, buf);
    buf[i] = 0x80;
    reseal (buf);
    expect_field_error (buf, map_field (i) ? "map" : "reserved");
  }
}

/* ---- The allocation map ---- */

static void
header_map_fields_read_back_and_bad_ones_are_refused (void **state)
{
  struct header sb, back;
  uint8_t buf[HEADER_SIZE], again[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  sb.map_shift = 16;
  sb.map_offset = 8192;
  sb.map_bytes = 4096;
  header_encode (&sb, buf);
  assert_int_equal (get_le32 (buf + 4056), 16);
  assert_int_equal (get_le64 (buf + 4064), 8192);
  assert_int_equal (get_le64 (buf + 4072), 4096);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  assert_int_equal (back.map_shift, 16);
  assert_int_equal (back.map_offset, 8192);
  assert_int_equal (back.map_bytes, 4096);
  header_encode (&back, again);
  assert_memory_equal (buf, again, HEADER_SIZE);
  /* A region we do not know, a map not in whole blocks, one that
   * overlaps the header or the data, one that is empty.
   */
  sb.map_shift = HEADER_MAP_SHIFT_MIN - 1;
  expect_encoded_field_error (&sb, "map");
  sb.map_shift = HEADER_MAP_SHIFT_MAX + 1;
  expect_encoded_field_error (&sb, "map");
  sb.map_shift = 16;
  sb.map_bytes = 4095;
  expect_encoded_field_error (&sb, "map");
  sb.map_bytes = 4096;
  sb.map_offset = 0;
  expect_encoded_field_error (&sb, "map");
  sb.map_offset = sb.data_offset - 4096;
  header_encode (&sb, buf);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  sb.map_offset = sb.data_offset;
  expect_encoded_field_error (&sb, "map");
  sb.map_offset = 8192;
  sb.map_bytes = 0;
  expect_encoded_field_error (&sb, "map");
  /* No map: all three zero. */
  sb.map_shift = 0;
  sb.map_bytes = 4096;
  expect_encoded_field_error (&sb, "map");
}

/* ---- Generations: behind, lost ranges, creating ---- */

static void
header_behind_and_lost_ranges_read_back_where_header_h_says (void **state)
{
  struct header sb, back;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  sb.behind = 5; /* members 0 and 2 of the 3 */
  sb.nr_lost = 2;
  sb.lost[0] = (struct header_range){ 4096, 512 };
  sb.lost[1] = (struct header_range){ 1048576, 131072 };
  sb.roster = 0xdeadbeef;
  header_encode (&sb, buf);
  assert_int_equal (le64_get (buf + 1224), 5);
  assert_int_equal (le32_get (buf + 1232), 2);
  assert_int_equal (le32_get (buf + 1236), 0xdeadbeef);
  assert_int_equal (le64_get (buf + 1240), 4096);
  assert_int_equal (le64_get (buf + 1248), 512);
  assert_int_equal (le64_get (buf + 1256), 1048576);
  assert_int_equal (le64_get (buf + 1264), 131072);
  assert_int_equal (header_decode (buf, sizeof buf, &back, NULL), HEADER_OK);
  assert_int_equal (back.behind, 5);
  assert_int_equal (back.roster, 0xdeadbeef);
  assert_int_equal (back.nr_lost, 2);
  assert_int_equal (back.lost[1].offset, 1048576);
  assert_int_equal (back.lost[1].length, 131072);
}

static void
header_refuses_behind_past_its_members_and_lost_ranges_not_sorted_apart (
  void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  plain_header (&sb);
  sb.behind = UINT64_C (1) << sb.member_count;
  expect_encoded_field_error (&sb, "behind");
  plain_header (&sb);
  sb.nr_lost = 2;
  sb.lost[0] = (struct header_range){ 8192, 512 };
  sb.lost[1] = (struct header_range){ 4096, 512 }; /* not sorted */
  expect_encoded_field_error (&sb, "lost");
  sb.lost[1] = (struct header_range){ 8704, 512 }; /* touching */
  expect_encoded_field_error (&sb, "lost");
  sb.lost[1] = (struct header_range){ 16384, 100 }; /* not sectors */
  expect_encoded_field_error (&sb, "lost");
  sb.lost[1] = (struct header_range){ 16384, 0 }; /* empty */
  expect_encoded_field_error (&sb, "lost");
  plain_header (&sb);
  sb.nr_lost = HEADER_LOST_MAX + 1;
  expect_encoded_field_error (&sb, "lost");
  /* An entry past the count must be zero. */
  plain_header (&sb);
  header_encode (&sb, buf);
  buf[1240 + 16 * 3] = 1;
  reseal (buf);
  expect_field_error (buf, "lost");
}

static void
header_unused_generation_fields_keep_the_older_encoding (void **state)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  (void) state;
  /* No behind, no lost range, not creating: bytes 1224 on are zero, as
   * nbdstripe wrote them before the fields existed.
   */
  plain_header (&sb);
  header_encode (&sb, buf);
  for (unsigned i = 1224; i < 4092; ++i)
    assert_int_equal (buf[i], 0);
}

/* ---- Messages ---- */

static void
sb_strerror_describes_every_error (void **state)
{
  static const enum header_error errs[] = {
    HEADER_OK,          HEADER_ERR_TRUNCATED, HEADER_ERR_MAGIC,
    HEADER_ERR_VERSION, HEADER_ERR_CRC,       HEADER_ERR_FIELD,
  };
  const size_t n = sizeof errs / sizeof errs[0];

  (void) state;
  for (size_t i = 0; i < n; ++i) {
    const char *s = header_strerror (errs[i]);
    assert_non_null (s);
    assert_true (strlen (s) > 0);
    for (size_t j = 0; j < i; ++j)
      assert_string_not_equal (s, header_strerror (errs[j]));
  }
  assert_string_equal (header_strerror (HEADER_ERR_MAGIC),
                       "not an nbdstripe member (no header magic)");
  assert_string_equal (header_strerror (HEADER_ERR_CRC),
                       "header checksum mismatch (corrupt header)");
  assert_non_null (header_strerror ((enum header_error) 1000));
}

static void
sb_uuid_unparse_formats_lowercase_8_4_4_4_12 (void **state)
{
  static const uint8_t uuid[16] = {
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
    0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10,
  };
  static const uint8_t zero[16];
  char out[37];

  (void) state;
  memset (out, 'z', sizeof out);
  header_uuid_format (uuid, out);
  assert_string_equal (out, "01234567-89ab-cdef-fedc-ba9876543210");
  header_uuid_format (zero, out);
  assert_string_equal (out, "00000000-0000-0000-0000-000000000000");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (crc32c_gives_the_standard_check_value),
    cmocka_unit_test (crc32c_chains_over_split_buffers),
    cmocka_unit_test (crc32c_matches_the_bitwise_definition),
    cmocka_unit_test (header_round_trips_random_headers),
    cmocka_unit_test (
      header_puts_each_field_little_endian_at_its_documented_offset),
    cmocka_unit_test (header_stores_crc32c_of_bytes_0_to_4091_at_4092),
    cmocka_unit_test (header_encode_pads_the_name_with_nuls),
    cmocka_unit_test (header_rejects_every_single_bit_flip),
    cmocka_unit_test (header_rejects_fewer_than_4096_bytes),
    cmocka_unit_test (header_ignores_bytes_beyond_4096),
    cmocka_unit_test (header_rejects_missing_magic),
    cmocka_unit_test (header_rejects_unknown_version),
    cmocka_unit_test (header_checks_magic_then_version_then_crc_then_fields),
    cmocka_unit_test (header_names_the_first_bad_field_in_header_order),
    cmocka_unit_test (header_sets_field_only_on_a_field_error),
    cmocka_unit_test (header_rejects_header_size_other_than_4096),
    cmocka_unit_test (header_rejects_name_without_nul_in_64_bytes),
    cmocka_unit_test (header_rejects_empty_name),
    cmocka_unit_test (
      header_rejects_name_with_characters_outside_the_allowed_set),
    cmocka_unit_test (header_rejects_bytes_after_the_name_terminator),
    cmocka_unit_test (header_accepts_63_byte_name_of_allowed_characters),
    cmocka_unit_test (header_rejects_member_count_zero_or_above_64),
    cmocka_unit_test (header_rejects_member_index_not_below_member_count),
    cmocka_unit_test (header_rejects_chunk_zero_or_not_a_multiple_of_4096),
    cmocka_unit_test (header_rejects_layout_other_than_md_original_or_alternate),
    cmocka_unit_test (header_version_1_still_reads_with_its_own_layout_number),
    cmocka_unit_test (header_rejects_events_zero),
    cmocka_unit_test (header_rejects_flags_but_replaced_reshape_removed_and_creating),
    cmocka_unit_test (header_reshape_fields_read_back_as_written),
    cmocka_unit_test (header_reshape_allows_a_member_out_of_one_layout),
    cmocka_unit_test (header_reshape_rejects_a_journal_not_flagged),
    cmocka_unit_test (header_reshape_rejects_any_nonzero_reserved_byte),
    cmocka_unit_test (header_rejects_data_offset_below_4096_or_unaligned),
    cmocka_unit_test (header_rejects_member_size_zero_or_not_whole_chunks),
    cmocka_unit_test (header_rejects_member_size_in_an_unused_slot),
    cmocka_unit_test (header_rejects_any_nonzero_reserved_byte),
    cmocka_unit_test (header_map_fields_read_back_and_bad_ones_are_refused),
    cmocka_unit_test (header_behind_and_lost_ranges_read_back_where_header_h_says),
    cmocka_unit_test (
      header_refuses_behind_past_its_members_and_lost_ranges_not_sorted_apart),
    cmocka_unit_test (header_unused_generation_fields_keep_the_older_encoding),
    cmocka_unit_test (sb_strerror_describes_every_error),
    cmocka_unit_test (sb_uuid_unparse_formats_lowercase_8_4_4_4_12),
  };

  return cmocka_run_group_tests_name ("header", tests, NULL, NULL);
}
