/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: writes the md superblock fuzzer's seed corpus
 * (tests/fuzz/corpus/md_super/).
 *
 *   make_md_super_corpus DIR
 *
 * Run once by hand when the codec changes; the files it writes are
 * checked in.  The seeds: a version 1.2 raid0 member as mdadm writes one,
 * a 1.0 member with an odd max_dev and the raid0 layout bit, a 1.1 member
 * with signed fields negative, the 1.2 one cut short, and the 1.2 one with
 * one bit flipped (so a checksum mismatch).  Each decodes where
 * fuzz_md_super.c reads it (sector 8, or its own super_offset).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "md_super.h"

static struct md_super sb; /* 4 KiB: not on the stack */

static void
write_file (const char *dir, const char *name, const void *buf, size_t len)
{
  char path[4096];
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "wb");
  if (fp == NULL || fwrite (buf, 1, len, fp) != len || fclose (fp) != 0) {
    fprintf (stderr, "make_md_super_corpus: %s: %s\n", path, strerror (errno));
    exit (EXIT_FAILURE);
  }
}

static void
encode_checked (uint8_t *buf)
{
  static struct md_super back;

  md_super_encode (&sb, buf);
  if (md_super_decode (buf, MD_SUPER_BYTES, sb.super_offset * 512, &back, NULL)
      != MD_SUPER_OK) {
    fprintf (stderr, "make_md_super_corpus: a seed does not decode\n");
    exit (EXIT_FAILURE);
  }
}

int
main (int argc, char **argv)
{
  uint8_t buf[MD_SUPER_BYTES];

  if (argc != 2) {
    fprintf (stderr, "usage: make_md_super_corpus DIR\n");
    return EXIT_FAILURE;
  }

  /* mdadm --create --level=0 --raid-devices=3 --metadata=1.2: 512 KiB
   * chunks, data at 1 MiB, a bad-block log reserved after the superblock,
   * 128 roles.
   */
  memset (&sb, 0, sizeof sb);
  for (unsigned i = 0; i < 16; ++i) {
    sb.set_uuid[i] = (uint8_t) (0x11 * i);
    sb.device_uuid[i] = (uint8_t) (0xff - 0x0f * i);
  }
  strcpy (sb.set_name, "seedhost:0");
  sb.ctime = sb.utime = 1700000000;
  sb.chunk_sectors = 1024;
  sb.raid_disks = 3;
  sb.data_offset = 2048;
  sb.data_size = 2093056;
  sb.super_offset = 8;
  sb.dev_number = 1;
  sb.bblog_size = 8;
  sb.bblog_offset = 8;
  sb.resync_offset = UINT64_MAX;
  sb.max_dev = 128;
  for (unsigned i = 0; i < sb.max_dev; ++i)
    sb.dev_roles[i] = i < 3 ? (uint16_t) i : MD_ROLE_SPARE;
  encode_checked (buf);
  write_file (argv[1], "v1.2-raid0", buf, sizeof buf);
  write_file (argv[1], "truncated", buf, 300);
  buf[89] ^= 0x08; /* chunk 512 KiB -> 1536 KiB */
  write_file (argv[1], "bad-csum", buf, sizeof buf);

  /* Version 1.0 at the end of a 1 GiB member, odd max_dev, layout bit. */
  sb.feature_map = MD_FEATURE_RAID0_LAYOUT;
  sb.layout = MD_RAID0_ORIG;
  sb.super_offset = 2097136;
  sb.data_offset = 0;
  sb.data_size = 2097128;
  sb.max_dev = 5;
  encode_checked (buf);
  write_file (argv[1], "v1.0-raid0-layout", buf, sizeof buf);

  /* Version 1.1, a linear array mid-reshape: negative signed fields. */
  sb.feature_map = 0x4;
  sb.level = -1;
  sb.layout = 0;
  sb.delta_disks = -1;
  sb.new_offset = -2048;
  sb.bblog_offset = 8;
  sb.super_offset = 0;
  sb.data_offset = 4096;
  sb.max_dev = 4;
  encode_checked (buf);
  write_file (argv[1], "v1.1-linear-reshape", buf, sizeof buf);

  /* Hostile superblocks, checksums right: a name with a newline and
   * config keys after it, and escape sequences; sizes whose sum wraps
   * to put the data on the superblock (refused: written unchecked).
   */
  sb.feature_map = 0;
  sb.level = 0;
  sb.delta_disks = 0;
  sb.new_offset = 0;
  sb.super_offset = 8;
  sb.data_offset = 2048;
  memcpy (sb.set_name, "x\nhealth:{status_file:\"/bin/sh\"}", 32);
  encode_checked (buf);
  write_file (argv[1], "name-newline", buf, sizeof buf);
  memset (sb.set_name, 0, sizeof sb.set_name);
  memcpy (sb.set_name, "\033]0;owned\007\033[2J\r\b\177", 15);
  encode_checked (buf);
  write_file (argv[1], "name-escapes", buf, sizeof buf);
  sb.data_offset = (UINT64_C (1) << 55) + 8;
  sb.data_size = UINT64_MAX - (UINT64_C (1) << 55) + 2049;
  md_super_encode (&sb, buf);
  write_file (argv[1], "sizes-wrap", buf, sizeof buf);
  sb.data_offset = UINT64_MAX;
  sb.data_size = UINT64_MAX;
  md_super_encode (&sb, buf);
  write_file (argv[1], "sizes-max", buf, sizeof buf);
  return EXIT_SUCCESS;
}
