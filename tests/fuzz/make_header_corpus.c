/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: writes the fuzzer's seed corpus (tests/fuzz/corpus/header/).
 *
 *   make_header_corpus DIR
 *
 * Run once by hand when the header format changes; the files it writes are
 * checked in.  Three seeds: a valid header, the same cut short, and the
 * same with one bit flipped (so a CRC mismatch).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "header.h"

static void
write_file (const char *dir, const char *name, const void *buf, size_t len)
{
  char path[4096];
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "wb");
  if (fp == NULL || fwrite (buf, 1, len, fp) != len || fclose (fp) != 0) {
    fprintf (stderr, "make_header_corpus: %s: %s\n", path, strerror (errno));
    exit (EXIT_FAILURE);
  }
}

int
main (int argc, char **argv)
{
  struct header sb;
  uint8_t buf[HEADER_SIZE];

  if (argc != 2) {
    fprintf (stderr, "usage: make_header_corpus DIR\n");
    return EXIT_FAILURE;
  }

  /* Three members of unequal size, so member_sizes has several distinct
   * entries and unused slots.
   */
  memset (&sb, 0, sizeof sb);
  sb.version = HEADER_VERSION;
  for (unsigned i = 0; i < 16; ++i) {
    sb.array_uuid[i] = (uint8_t) (0x11 * i);
    sb.member_uuid[i] = (uint8_t) (0xff - 0x0f * i);
  }
  strcpy (sb.name, "seed-volume_0.1");
  sb.ctime = 1700000000;
  sb.member_index = 1;
  sb.member_count = 3;
  sb.chunk = LAYOUT_DEFAULT_CHUNK;
  sb.layout = LAYOUT_MD_ALT;
  sb.events = 1;
  sb.data_offset = HEADER_DEFAULT_DATA_OFFSET;
  sb.member_sizes[0] = 1024 * LAYOUT_DEFAULT_CHUNK;
  sb.member_sizes[1] = 2048 * LAYOUT_DEFAULT_CHUNK;
  sb.member_sizes[2] = 1500 * LAYOUT_DEFAULT_CHUNK;
  header_encode (&sb, buf);
  if (header_decode (buf, sizeof buf, &sb, NULL) != HEADER_OK) {
    fprintf (stderr, "make_header_corpus: the seed header does not decode\n");
    return EXIT_FAILURE;
  }

  write_file (argv[1], "valid", buf, sizeof buf);
  write_file (argv[1], "truncated", buf, 664);
  buf[130] ^= 0x04; /* chunk 128 KiB -> 384 KiB */
  write_file (argv[1], "bad-crc", buf, sizeof buf);
  return EXIT_SUCCESS;
}
