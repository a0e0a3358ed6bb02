/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: libFuzzer target for the md v1.x superblock decoder.
 *
 * md_super_decode must survive any bytes (the sanitizers watch for
 * overreads and undefined behaviour), and what it accepts must keep the
 * promises of md_super.h:
 *
 *  - encoding the decoded superblock and decoding that again gives the
 *    same struct (decode (encode (decode (x))) == decode (x)), and
 *    encoding that once more the same bytes;
 *  - the encoding is the input itself over the 256 + 2 * max_dev bytes
 *    md reads, but for what decode does not keep (bytes of set_name
 *    after its NUL, hence the checksum), and zeros after them;
 *  - sb_csum is the input's checksum, minor what super_offset says;
 *  - md_super_raid0_servable's reason is one terminated line;
 *  - sector offsets and sizes are bounded (no byte offset computed from
 *    them wraps), and what is servable has no data over the superblock;
 *  - the name as shown (md_super_name_shown) is printable ASCII.
 *
 * The seeds include sizes from the whole 64-bit range (make_md_super_corpus).

 *
 * Random bytes almost never carry a valid checksum, nor a super_offset
 * equal to where they were read, which would leave the field checks
 * unexplored, so each input is decoded twice: as it is, read at sector 8,
 * and with its checksum recomputed, read where its super_offset says.
 *
 * Built by run_fuzz_md_super.sh with clang -fsanitize=fuzzer; gcc has no
 * libFuzzer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "md_super.h"
#include "util.h"

#define COVERED(max_dev) (256 + 2 * (size_t) (max_dev))

#define SAME(f)                                                               \
  do {                                                                        \
    if (a->f != b->f)                                                         \
      abort ();                                                               \
  } while (0)

static void
same_sb (const struct md_super *a, const struct md_super *b)
{
  SAME (minor);
  SAME (feature_map);
  if (memcmp (a->set_uuid, b->set_uuid, 16) != 0)
    abort ();
  if (memcmp (a->set_name, b->set_name, sizeof a->set_name) != 0)
    abort ();
  SAME (ctime);
  SAME (level);
  SAME (layout);
  SAME (size);
  SAME (chunk_sectors);
  SAME (raid_disks);
  SAME (bitmap_offset);
  SAME (new_level);
  SAME (reshape_position);
  SAME (delta_disks);
  SAME (new_layout);
  SAME (new_chunk);
  SAME (new_offset);
  SAME (data_offset);
  SAME (data_size);
  SAME (super_offset);
  SAME (recovery_offset);
  SAME (dev_number);
  SAME (cnt_corrected_read);
  if (memcmp (a->device_uuid, b->device_uuid, 16) != 0)
    abort ();
  SAME (devflags);
  SAME (bblog_shift);
  SAME (bblog_size);
  SAME (bblog_offset);
  SAME (utime);
  SAME (events);
  SAME (resync_offset);
  SAME (max_dev);
  if (memcmp (a->dev_roles, b->dev_roles, sizeof a->dev_roles) != 0)
    abort ();
}

static void
check (const uint8_t *data, size_t size, uint64_t at)
{
  static struct md_super sb, sb2; /* 4 KiB each: not on the stack */
  const char *field = NULL;
  uint8_t again[MD_SUPER_BYTES], twice[MD_SUPER_BYTES];
  uint8_t want[MD_SUPER_BYTES];
  char uuid[36], why[128];
  size_t n, name_len;
  enum md_super_error err = md_super_decode (data, size, at, &sb, &field);

  if (md_super_strerror (err) == NULL)
    abort ();
  if ((err == MD_SUPER_ERR_FIELD) != (field != NULL))
    abort ();
  if (err != MD_SUPER_OK)
    return;
  if (size < MD_SUPER_BYTES || sb.max_dev > MD_SUPER_MAX_DEV)
    abort ();
  if (at % 512 != 0 || sb.super_offset != at / 512)
    abort ();
  if (sb.minor != (sb.super_offset == 0 ? 1u : sb.super_offset == 8 ? 2u : 0u))
    abort ();
  if (sb.sb_csum != md_super_csum (data))
    abort ();

  /* decode (encode (decode (x))) == decode (x), and encode again gives
   * the same bytes.
   */
  md_super_encode (&sb, again);
  if (md_super_decode (again, sizeof again, at, &sb2, &field) != MD_SUPER_OK)
    abort ();
  same_sb (&sb, &sb2);
  if (sb2.sb_csum != md_super_csum (again))
    abort ();
  md_super_encode (&sb2, twice);
  if (memcmp (again, twice, sizeof again) != 0)
    abort ();

  /* The encoding is the input over the covered bytes, with set_name
   * NUL-padded after its end and the checksum of that; zero after.
   */
  n = COVERED (sb.max_dev);
  memset (want, 0, sizeof want);
  memcpy (want, data, n);
  name_len = strnlen ((const char *) want + 32, 32);
  memset (want + 32 + name_len, 0, 32 - name_len);
  put_le32 (want + 216, md_super_csum (want));
  if (memcmp (want, again, sizeof want) != 0)
    abort ();

  why[0] = 'x';
  if (md_super_raid0_servable (&sb, why, sizeof why)) {
    unsigned role = md_super_role (&sb);

    if (sb.level != 0 || role >= sb.raid_disks || sb.raid_disks > 64
        || sb.chunk_sectors == 0 || sb.chunk_sectors % 8 != 0
        || sb.data_offset % 8 != 0
        || (sb.feature_map & ~MD_FEATURE_RAID0_LAYOUT) != 0)
      abort ();
    if ((sb.feature_map & MD_FEATURE_RAID0_LAYOUT)
        && md_super_raid0_layout (&sb) == 0)
      abort ();
    /* What is served never has the data over the superblock. */
    if (sb.data_offset < sb.super_offset + 1
        && sb.super_offset < sb.data_offset + sb.data_size)
      abort ();
  }
  else if (why[0] == '\0' || memchr (why, '\0', sizeof why) == NULL
           || strchr (why, '\n') != NULL)
    abort ();

  md_super_uuid_format (sb.set_uuid, uuid);
  if (strlen (uuid) != 35)
    abort ();

  /* Sizes from the whole 64-bit range: what decode accepts can be turned
   * into bytes without wrapping, and the data area lies clear of the
   * superblock's own sectors.
   */
  if (sb.data_offset > MD_SUPER_MAX_SECTORS
      || sb.data_size > MD_SUPER_MAX_SECTORS - sb.data_offset
      || sb.super_offset > MD_SUPER_MAX_SECTORS)
    abort ();
  if ((sb.data_offset + sb.data_size) * 512 / 512
      != sb.data_offset + sb.data_size)
    abort ();

  /* The name as shown: printable ASCII only, every byte accounted for. */
  {
    char shown[MD_SUPER_NAME_SHOWN];
    size_t len = strlen (md_super_name_shown (&sb, shown));
    if (len >= sizeof shown || len < strnlen (sb.set_name, 32))
      abort ();
    for (size_t i = 0; i < len; ++i)
      if ((unsigned char) shown[i] < 0x20 || (unsigned char) shown[i] >= 0x7f)
        abort ();
  }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t resealed[MD_SUPER_BYTES];
  uint64_t super_offset;

  check (data, size, 8 * 512);
  if (size >= MD_SUPER_BYTES) {
    memcpy (resealed, data, MD_SUPER_BYTES);
    put_le32 (resealed + 216, md_super_csum (resealed));
    super_offset = get_le64 (resealed + 144);
    check (resealed, MD_SUPER_BYTES,
           super_offset < UINT64_C (1) << 55 ? super_offset * 512 : 4096);
  }
  return 0;
}
