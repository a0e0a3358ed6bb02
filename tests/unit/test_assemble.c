/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: assembling a volume from its members' metadata
 * (include/assemble.h: assemble, assemble_accepting, assemble_degraded),
 * for nbdstripe
 * headers and md v1.x superblocks.
 *
 * Members live in memory (tests/lib/member_mem.h).  Their metadata is
 * written with the real encoders (header_encode, md_super_encode) filled
 * in as `nbdstripe create` fills them (daemon/create.c); the config is
 * loaded from text by config_load_text.  Each test checks what assemble
 * returns and the lines it logs (stripe_log_vline is captured): the key
 * phrases a user acts on -- the member named, the generations, the right
 * order to paste -- as the code prints them (tests/lib/log_capture.h).
 * Only the public entry points are used, so that the tests hold across a
 * rewrite of assembly.
 *
 * And the generation across a drop-out: what the volume records on the
 * members when one drops out while it is served (the callbacks of
 * array_health_ops, called as health's prober calls them), and what the
 * next assembly and a re-probe make of it.
 *
 * Config files cannot name "mem:" members (a member must be an absolute
 * path or an NBD URI), so the config text names them "/mem/NAME" and
 * load_config renames them "mem:NAME" once loaded.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "assemble.h"
#include "config.h"
#include "header.h"
#include "log.h"
#include "md_super.h"
#include "member_mem.h"
#include "volume.h"
#include "unit_log.h"
#include "unit_main.h"

#define CONF "/etc/nbdstripe/vol.conf"
#define KIB 1024u
#define CHUNK (64u * KIB)
#define DATA_OFFSET (64u * KIB)
#define EVENTS 5
#define MAX 8

/* The volume's UUID, another array's, and member i's: bytes chosen so
 * that the text is written out literally in the checks below.
 */
static const uint8_t ARRAY_UUID[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
                                        0xcd, 0xef, 0x01, 0x23, 0x45, 0x67,
                                        0x89, 0xab, 0xcd, 0xef };
#define ARRAY_UUID_TEXT "01234567-89ab-cdef-0123-456789abcdef"
#define ARRAY_UUID_MD "01234567:89abcdef:01234567:89abcdef"
static const uint8_t OTHER_UUID[16] = { 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
                                        0x32, 0x10, 0xfe, 0xdc, 0xba, 0x98,
                                        0x76, 0x54, 0x32, 0x10 };
#define OTHER_UUID_TEXT "fedcba98-7654-3210-fedc-ba9876543210"
#define OTHER_UUID_MD "fedcba98:76543210:fedcba98:76543210"
/* member_uuid (0): */
#define MEMBER0_UUID_TEXT "10111213-1415-1617-1819-1a1b1c1d1e1f"
#define MEMBER0_UUID_MD "10111213:14151617:18191a1b:1c1d1e1f"

static void
member_uuid (unsigned i, uint8_t out[16])
{
  for (unsigned k = 0; k < 16; ++k)
    out[k] = (uint8_t) ((i + 1) << 4 | k);
}

/* ---- a volume's members, in memory ---- */

struct vol {
  enum metadata_mode metadata;
  unsigned n;
  char names[MAX][16]; /* device names: "a", "b", ... */
  uint64_t sizes[MAX];
  uint64_t chunk, data_offset;
  uint32_t layout;
  unsigned md_minor;
  struct header hdr[MAX];
  struct md_super *md; /* [MAX] */
};

static struct vol vol;
static struct stripe_config cfg;
static bool cfg_loaded;
static struct assembly asm_;

static int
setup (void **state)
{
  (void) state;
  mem_register ();
  log_capture_start ();
  memset (&vol, 0, sizeof vol);
  vol.md_minor = 2;
  vol.md = calloc (MAX, sizeof *vol.md);
  assert_non_null (vol.md);
  memset (&asm_, 0, sizeof asm_);
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  assembly_free (&asm_);
  if (cfg_loaded)
    config_free (&cfg);
  cfg_loaded = false;
  free (vol.md);
  mem_destroy_all ();
  log_capture_stop ();
  return 0;
}

/* Member i's usable data: whole chunks after the data offset. */
static uint64_t
usable (unsigned i)
{
  return (vol.sizes[i] - vol.data_offset) / vol.chunk * vol.chunk;
}

/* Where member i's md superblock goes. */
static uint64_t
md_at (unsigned i)
{
  return vol.md[i].super_offset * 512;
}

/* Write member i's metadata, as it is in vol, onto its device. */
static void
write_meta (unsigned i)
{
  uint8_t buf[MD_SUPER_BYTES];

  if (vol.metadata == METADATA_HEADER) {
    header_encode (&vol.hdr[i], buf);
    mem_write (vol.names[i], 0, buf, HEADER_SIZE);
  }
  else {
    md_super_encode (&vol.md[i], buf);
    mem_write (vol.names[i], md_at (i), buf, MD_SUPER_BYTES);
  }
}

static bool
sizes_differ (void)
{
  for (unsigned i = 1; i < vol.n; ++i)
    if (vol.sizes[i] != vol.sizes[0])
      return true;
  return false;
}

/* Member i's metadata as `nbdstripe create` (or mdadm --create) writes
 * it, in vol.
 */
static void
make_meta (unsigned i)
{
  struct header *h = &vol.hdr[i];
  struct md_super *sb = &vol.md[i];

  memset (h, 0, sizeof *h);
  h->version = HEADER_VERSION;
  memcpy (h->array_uuid, ARRAY_UUID, 16);
  member_uuid (i, h->member_uuid);
  snprintf (h->name, sizeof h->name, "vol");
  h->ctime = 1700000000;
  h->member_index = i;
  h->member_count = vol.n;
  h->chunk = vol.chunk;
  h->layout = vol.layout;
  h->data_offset = vol.data_offset;
  h->events = EVENTS;
  for (unsigned k = 0; k < vol.n; ++k)
    h->member_sizes[k] = usable (k);

  memset (sb, 0, sizeof *sb);
  memcpy (sb->set_uuid, ARRAY_UUID, 16);
  snprintf (sb->set_name, sizeof sb->set_name, "vol");
  sb->ctime = sb->utime = 1700000000;
  sb->level = 0;
  sb->layout = vol.layout;
  if (sizes_differ ())
    sb->feature_map = MD_FEATURE_RAID0_LAYOUT;
  sb->chunk_sectors = vol.chunk / 512;
  sb->raid_disks = vol.n;
  sb->resync_offset = UINT64_MAX;
  sb->events = EVENTS;
  sb->max_dev = 128;
  for (unsigned k = 0; k < sb->max_dev; ++k)
    sb->dev_roles[k] = k < vol.n ? k : MD_ROLE_SPARE;
  sb->dev_number = i;
  member_uuid (i, sb->device_uuid);
  if (vol.md_minor == 0) {
    /* 1.0: near the end, data from byte 0 up to it. */
    sb->super_offset = ((vol.sizes[i] / 512) - 16) & ~UINT64_C (7);
    sb->data_offset = 0;
    sb->data_size = sb->super_offset;
  }
  else {
    sb->super_offset = vol.md_minor == 2 ? 8 : 0;
    sb->data_offset = vol.data_offset / 512;
    sb->data_size = (vol.sizes[i] - vol.data_offset) / 512;
  }
}

/* A volume of n members of these sizes, written and ready to assemble:
 * devices "a", "b", ...; chunk and data offset 64 KiB, md's alternate
 * layout, generation (events) EVENTS.
 */
static void
make_volume (enum metadata_mode metadata, unsigned n, const uint64_t *sizes)
{
  vol.metadata = metadata;
  vol.n = n;
  vol.chunk = CHUNK;
  /* md 1.0 keeps its superblock at the end: data from byte 0. */
  vol.data_offset =
    metadata == METADATA_MD && vol.md_minor == 0 ? 0 : DATA_OFFSET;
  vol.layout = LAYOUT_MD_ALT;
  for (unsigned i = 0; i < n; ++i) {
    snprintf (vol.names[i], sizeof vol.names[i], "%c", 'a' + i);
    vol.sizes[i] = sizes[i];
    mem_create (vol.names[i], sizes[i]);
  }
  for (unsigned i = 0; i < n; ++i) {
    make_meta (i);
    write_meta (i);
  }
}

/* Three members of 1 MiB of data each. */
static void
make_volume3 (enum metadata_mode metadata)
{
  const uint64_t s = DATA_OFFSET + 1024 * KIB;
  const uint64_t sizes[] = { s, s, s };

  make_volume (metadata, 3, sizes);
}

/* Load the config: name "vol", chunk 64K, the metadata, data_offset
 * (unless 0), members as the devices listed (space-separated, e.g.
 * "b a c"), then extra lines.
 */
static void
load_config (enum metadata_mode metadata, uint64_t data_offset,
             const char *members, const char *extra)
{
  char text[4096], err[1024], list[1024] = "", copy[256];
  size_t len = 0;
  char *save = NULL;

  snprintf (copy, sizeof copy, "%s", members);
  for (char *t = strtok_r (copy, " ", &save); t;
       t = strtok_r (NULL, " ", &save))
    len += snprintf (list + len, sizeof list - len, "%s\"/mem/%s\"",
                     len ? ", " : "", t);
  len = snprintf (text, sizeof text,
                  "name = \"vol\";\nchunk = %u;\nmetadata = \"%s\";\n"
                  "members = [ %s ];\n",
                  CHUNK,
                  metadata == METADATA_MD       ? "md"
                  : metadata == METADATA_HEADER ? "header"
                                                : "none",
                  list);
  if (data_offset)
    len += snprintf (text + len, sizeof text - len,
                     "data_offset = %" PRIu64 ";\n", data_offset);
  snprintf (text + len, sizeof text - len, "%s", extra ? extra : "");
  memset (&cfg, 0, sizeof cfg);
  cfg_loaded = true;
  if (config_load_text (CONF, text, &cfg, err, sizeof err) == -1)
    fail_msg ("config does not load: %s\n%s", err, text);
  for (unsigned i = 0; i < cfg.nr_members; ++i) {
    char *m;
    assert_true (strncmp (cfg.members[i], "/mem/", 5) == 0);
    assert_true (asprintf (&m, MEM_PREFIX "%s", cfg.members[i] + 5) > 0);
    free (cfg.members[i]);
    cfg.members[i] = m;
  }
}

/* assemble () with the config for these members. */
static int
assemble_these (const char *members, const char *extra)
{
  load_config (
    vol.metadata,
    vol.md_minor == 0 && vol.metadata == METADATA_MD ? 0 : vol.data_offset,
    members, extra);
  assembly_free (&asm_); /* an earlier one's records */
  return assemble (&cfg, &asm_);
}

/* ---- nbdstripe headers ---- */

static void
header_volume_assembles_with_its_offsets_sizes_layout_and_generation (
  void **state)
{
  const uint64_t sizes[] = { DATA_OFFSET + 1024 * KIB,
                             DATA_OFFSET + 512 * KIB + 4 * KIB,
                             DATA_OFFSET + 768 * KIB };

  (void) state;
  make_volume (METADATA_HEADER, 3, sizes);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_ptr_equal (asm_.meta, &meta_header_ops);
  assert_int_equal (asm_.layout, LAYOUT_MD_ALT);
  assert_int_equal (asm_.size_rule, LAYOUT_SIZE_MD);
  assert_int_equal (asm_.events, EVENTS);
  assert_memory_equal (asm_.members[asm_.ref].array_uuid, ARRAY_UUID, 16);
  assert_int_equal (asm_.data_offsets[0], DATA_OFFSET);
  assert_int_equal (asm_.data_offsets[1], DATA_OFFSET);
  assert_int_equal (asm_.data_offsets[2], DATA_OFFSET);
  /* Whole chunks of each: 1M, 512K (the 4K tail is no chunk), 768K. */
  assert_int_equal (asm_.data_sizes[0], 1024 * KIB);
  assert_int_equal (asm_.data_sizes[1], 512 * KIB);
  assert_int_equal (asm_.data_sizes[2], 768 * KIB);
  for (unsigned i = 0; i < 3; ++i) {
    uint8_t u[16];
    member_uuid (i, u);
    assert_memory_equal (asm_.members[i].member_uuid, u, 16);
  }
}

static void
header_version_1_volume_keeps_the_size_of_all_its_zones (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  for (unsigned i = 0; i < 3; ++i) {
    vol.hdr[i].version = HEADER_VERSION_1;
    vol.hdr[i].events = 0; /* version 1 had none */
    write_meta (i);
  }
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.size_rule, LAYOUT_SIZE_ZONES);
  assert_int_equal (asm_.layout, LAYOUT_MD_ALT);
}

static void
header_members_in_the_wrong_order_are_refused_with_the_right_order (
  void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (assemble_these ("b a c", NULL), -1);
  assert_error_logged ("member 0 (mem:b)", "is member 1 of 'vol'",
                       "wrong order");
  assert_error_logged ("member 1 (mem:a)", "is member 0 of 'vol'",
                       "wrong order");
  assert_error_logged (CONF, "members are in the wrong order",
                       "members = [ \"mem:a\", \"mem:b\", \"mem:c\" ];");
  assert_not_logged ("member 2 (mem:c)");
}

/* A member two generations behind missed an update that completed: it
 * dropped out while the volume was served, or is an older copy.
 */
static void
header_member_two_generations_behind_is_stale_and_named (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].events = EVENTS - 2;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 3, the volume is at 5",
                       "'nbdstripe accept " CONF " 1'");
  assert_not_logged ("member 0 (mem:a)");
  assert_not_logged ("member 2 (mem:c)");
}

/* One generation behind: the update that made the newest was cut short
 * by a crash before it reached this member (meta_update), which holds
 * everything the volume acknowledged: it assembles, at the newest.
 */
static void
header_member_one_generation_behind_is_an_update_cut_short (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].events = EVENTS - 1;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.events, EVENTS);
}

/* ... unless the newest records say it is behind: it dropped out, and
 * the update was made without it.
 */
static void
header_member_one_behind_and_marked_behind_is_stale (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  for (unsigned i = 0; i < 3; ++i) {
    vol.hdr[i].behind = UINT64_C (1) << 1;
    write_meta (i);
  }
  vol.hdr[1].events = EVENTS - 1;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 4, the volume is at 5");
  assert_not_logged ("member 0 (mem:a)");
}

/* The newest records name the members they were written for (roster):
 * one behind them that is another device -- the copy a replace left
 * when the volume went on without it -- is stale, while the members
 * they were written for, one behind after a crash, are taken.
 */
static void
header_member_one_behind_not_in_the_newest_roster_is_stale (void **state)
{
  uint32_t roster = 0;
  uint8_t other[16];

  (void) state;
  make_volume3 (METADATA_HEADER);
  memset (other, 0x5a, sizeof other);
  for (unsigned i = 0; i < 3; ++i)
    roster ^= meta_roster (i == 1 ? other : vol.hdr[i].member_uuid);
  for (unsigned i = 0; i < 3; ++i) {
    vol.hdr[i].roster = roster;
    write_meta (i);
  }
  vol.hdr[1].events = EVENTS - 1;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 4, the volume is at 5");
}

/* The same, the roster naming b itself: a crash cut the update. */
static void
header_member_one_behind_in_the_newest_roster_is_taken (void **state)
{
  uint32_t roster = 0;

  (void) state;
  make_volume3 (METADATA_HEADER);
  for (unsigned i = 0; i < 3; ++i)
    roster ^= meta_roster (vol.hdr[i].member_uuid);
  for (unsigned i = 0; i < 3; ++i) {
    vol.hdr[i].roster = roster;
    write_meta (i);
  }
  vol.hdr[1].events = EVENTS - 1;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.events, EVENTS);
}

/* The newest record speaks, wherever it is: one member ahead of the
 * others by one is the first member an update reached (its index is
 * the highest: meta_update writes down from there).
 */
static void
header_one_member_one_ahead_speaks_for_the_volume (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[2].events = EVENTS + 1;
  write_meta (2);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.events, EVENTS + 1);
}

static void
header_members_two_behind_one_newer_member_are_all_stale (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[2].events = EVENTS + 2;
  write_meta (2);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 0 (mem:a)", "stale",
                       "at generation 5, the volume is at 7");
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 5, the volume is at 7");
  assert_not_logged ("member 2 (mem:c)");
}

static void
header_two_names_for_one_device_are_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_alias ("a2", "a");
  assert_int_equal (assemble_these ("a a2 c", NULL), -1);
  assert_error_logged ("member 0 (mem:a) and member 1 (mem:a2)",
                       "the same file", "a member may be given only once");
}

static void
header_copy_of_a_member_shows_the_same_member_uuid_and_is_refused (
  void **state)
{
  uint8_t *a;

  (void) state;
  make_volume3 (METADATA_HEADER);
  /* Another device holding a's bytes (dd'd from it): not an alias. */
  mem_create ("copy", vol.sizes[0]);
  a = mem_data ("a", NULL);
  mem_write ("copy", 0, a, vol.sizes[0]);
  assert_int_equal (assemble_these ("a copy c", NULL), -1);
  assert_error_logged ("member 0 (mem:a) and member 1 (mem:copy)",
                       "show the same header",
                       "member UUID " MEMBER0_UUID_TEXT, "a copy of a member");
  assert_not_logged ("the same file");
}

static void
header_member_of_another_array_is_refused_naming_both_arrays (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  memcpy (vol.hdr[2].array_uuid, OTHER_UUID, 16);
  snprintf (vol.hdr[2].name, sizeof vol.hdr[2].name, "other");
  write_meta (2);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 2 (mem:c)", "belongs to another array",
                       "'other', " OTHER_UUID_TEXT,
                       "not to 'vol' (" ARRAY_UUID_TEXT ")");
  assert_not_logged ("member 0 (mem:a)");
  assert_not_logged ("member 1 (mem:b)");
}

/* A replace copies the data first and writes NEW's metadata last: killed
 * in between, NEW holds the data and no header.
 */
static void
header_half_copied_new_without_its_header_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_fill ("b", DATA_OFFSET, mem_size ("b") - DATA_OFFSET, 0x5a);
  mem_fill ("b", 0, DATA_OFFSET, 0);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "no header magic",
                       "a blank member, or not created with 'nbdstripe "
                       "create'");
  assert_not_logged ("member 0 (mem:a)");
}

static void
header_corrupt_header_is_refused_as_corrupt (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_corrupt ("c", 200);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 2 (mem:c)", "checksum mismatch");
}

/* A member missing while the others agree on the volume: refused,
 * naming the way out.
 */
static void
header_missing_member_is_refused_naming_serve_degraded (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (assemble_these ("a gone c", NULL), -1);
  assert_error_logged ("member 1 (mem:gone)", "no in-memory device",
                       "the volume can be served read-only without it: "
                       "nbdstripe serve --degraded " CONF);
}

/* Degraded: the missing member is left out, its place (data offset and
 * size) the other headers' word; nothing is said as an error.
 */
static void
header_degraded_leaves_a_missing_member_out_with_its_place (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  load_config (METADATA_HEADER, vol.data_offset, "a b gone", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), 0);
  assert_int_equal (asm_.missing, UINT64_C (1) << 2);
  assert_non_null (strstr (asm_.missing_why[2], "no in-memory device"));
  assert_int_equal (asm_.data_offsets[2], DATA_OFFSET);
  assert_int_equal (asm_.data_sizes[2], usable (2));
  assert_logged_at (LOG_WARNING, "member 2 (mem:gone)", "served degraded");
  assert_not_logged ("--degraded");
  assert_false (log_captured_all (LOG_ERR, "member", (const char *) NULL));
}

/* Unreadable is missing too: a member whose header is corrupt. */
static void
header_degraded_leaves_a_member_with_a_corrupt_header_out (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_corrupt ("b", 200);
  load_config (METADATA_HEADER, vol.data_offset, "a b c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), 0);
  assert_int_equal (asm_.missing, UINT64_C (1) << 1);
  assert_logged_at (LOG_WARNING, "member 1 (mem:b)", "checksum mismatch",
                    "served degraded");
  assert_int_equal (asm_.data_sizes[1], usable (1));
}

static void
header_degraded_with_every_member_missing_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  load_config (METADATA_HEADER, vol.data_offset, "x y z", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged (CONF, "no member could be read");
}

/* A member of another array is no missing member: still refused. */
static void
header_degraded_refuses_a_member_of_another_array (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  memcpy (vol.hdr[1].array_uuid, OTHER_UUID, 16);
  write_meta (1);
  load_config (METADATA_HEADER, vol.data_offset, "a b gone", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged ("member 1 (mem:b)", "belongs to another");
}

/* md: a missing member's data size is on it alone (meta_md.c,
 * md_places_missing): refused, naming the member, its file and what no
 * other superblock records; nothing is left out as missing.
 */
static void
md_degraded_without_a_component_size_is_refused_naming_the_member (
  void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  load_config (METADATA_MD, 0, "a b gone", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged ("member 2 (mem:gone)", "no in-memory device");
  assert_error_logged ("member 2 (mem:gone)",
                       "records a member's data size (data_size) only on "
                       "that member",
                       "component size is 0",
                       "cannot be served degraded without it");
  assert_int_equal (asm_.missing, 0);
  assert_not_logged ("served degraded without it (what it holds");
}

/* Every member read holds more than the component size Linux md
 * records (at most the smallest member's): the missing one need not be
 * that smallest (raid10 taken over keeps raid10's), so its size is
 * still not known, and a guess would move every later zone.
 */
static void
md_degraded_with_a_component_size_below_every_member_read_is_refused (
  void **state)
{
  const uint64_t sizes[] = { DATA_OFFSET + 1024 * KIB, DATA_OFFSET + 512 * KIB,
                             DATA_OFFSET + 768 * KIB };

  (void) state;
  make_volume (METADATA_MD, 3, sizes);
  for (unsigned i = 0; i < 3; ++i) {
    vol.md[i].size = 512 * KIB / 512;
    write_meta (i);
  }
  load_config (METADATA_MD, 0, "a gone c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged ("member 1 (mem:gone)",
                       "component size (1024 sectors, at most the smallest "
                       "member's data size",
                       "at least that much",
                       "cannot be served degraded without it");
  assert_int_equal (asm_.missing, 0);
}

/* A member whose superblock cannot be read is missing too. */
static void
md_degraded_with_a_corrupt_superblock_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  mem_corrupt ("b", md_at (1) + 200);
  load_config (METADATA_MD, 0, "a b c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged ("member 1 (mem:b)", "checksum");
  assert_error_logged ("member 1 (mem:b)", "data_size",
                       "cannot be served degraded");
}

/* Not degraded: the way out named for headers is not offered for md. */
static void
md_missing_member_is_refused_without_naming_serve_degraded (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  assert_int_equal (assemble_these ("a gone c", NULL), -1);
  assert_error_logged ("member 1 (mem:gone)", "no in-memory device");
  assert_not_logged ("--degraded");
}

/* Degraded with every member there: the volume as it is. */
static void
md_degraded_with_every_member_there_assembles (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  load_config (METADATA_MD, 0, "a b c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), 0);
  assert_int_equal (asm_.missing, 0);
  assert_nothing_logged ();
}

/* none: the config gives no size; a member that cannot be opened is
 * refused, naming it and saying why.
 */
static void
none_degraded_missing_member_is_refused_saying_why (void **state)
{
  (void) state;
  make_volume3 (METADATA_NONE);
  load_config (METADATA_NONE, 0, "a gone c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), -1);
  assert_error_logged ("member 1 (mem:gone)", "no in-memory device");
  assert_error_logged ("member 1 (mem:gone)",
                       "metadata \"none\" records nothing",
                       "no member's size",
                       "cannot be served degraded without it");
  assert_int_equal (asm_.missing, 0);
}

static void
none_degraded_with_every_member_there_assembles (void **state)
{
  (void) state;
  make_volume3 (METADATA_NONE);
  load_config (METADATA_NONE, 0, "a b c", NULL);
  assert_int_equal (assemble_degraded (&cfg, &asm_), 0);
  assert_int_equal (asm_.missing, 0);
  assert_nothing_logged ();
}

static void
header_member_marked_replaced_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].flags = HEADER_FLAG_REPLACED;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)",
                       "was replaced by another device (nbdstripe replace)",
                       "no longer a member of 'vol'",
                       "name the device that replaced it in the config");
}

static void
header_member_smaller_than_its_header_says_is_refused (void **state)
{
  char want[128];

  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_resize ("c", DATA_OFFSET + 1024 * KIB - 4 * KIB);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  snprintf (want, sizeof want,
            "%u bytes, smaller than its header says "
            "(%u data bytes from offset %u)",
            DATA_OFFSET + 1020 * KIB, 1024 * KIB, DATA_OFFSET);
  assert_error_logged ("member 2 (mem:c)", want, "truncated or replaced?");
}

static void
header_config_chunk_other_than_the_headers_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  config_free (&cfg);
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c", "");
  cfg.chunk = 2 * CHUNK;
  assembly_free (&asm_);
  assert_int_equal (assemble (&cfg, &asm_), -1);
  assert_error_logged (CONF, "chunk: the config says 131072, the headers "
                             "say 65536");
}

static void
header_config_uuid_other_than_the_members_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (
    assemble_these ("a b c", "uuid = \"" OTHER_UUID_TEXT "\";\n"), -1);
  assert_error_logged (CONF, "uuid: the config says " OTHER_UUID_TEXT,
                       "the members belong to volume 'vol' (" ARRAY_UUID_TEXT
                       ")",
                       "not the array this config describes");
}

static void
header_config_uuid_of_the_members_assembles (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (
    assemble_these ("a b c", "uuid = \"" ARRAY_UUID_MD "\";\n"), 0);
  assert_nothing_logged ();
}

static void
header_config_with_fewer_members_than_the_headers_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_HEADER);
  assert_int_equal (assemble_these ("a b", NULL), -1);
  assert_error_logged (CONF, "has 3 members, the config lists 2");
}

static void
accepting_lets_exactly_the_named_stale_member_through (void **state)
{
  uint64_t events = 0;

  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].events = EVENTS - 2;
  write_meta (1);
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c", NULL);
  assembly_free (&asm_);
  assert_int_equal (assemble_accepting (&cfg, &asm_, 1, &events), 0);
  assert_nothing_logged ();
  assert_int_equal (events, EVENTS - 2);
  assert_int_equal (asm_.events, EVENTS);

  /* Accepting another member lets member 1 through no more: it is
   * named, and left as it is.
   */
  assembly_free (&asm_);
  assert_int_equal (assemble_accepting (&cfg, &asm_, 0, &events), 0);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 3, the volume is at 5");
  assert_logged_at (LOG_WARNING, "member 1 (mem:b) is stale too",
                       "take it back on its own");
  assert_int_equal (events, EVENTS);
}

/* The config names a reshape its members say never started (a crash
 * between the config's rewrite and the headers'): served, the config is
 * read as the members say; accepting a member by its index is refused
 * until then, since a member left out may renumber the others.
 */
static void
accepting_with_a_config_the_members_contradict_is_refused (void **state)
{
  uint64_t events = 0;

  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].events = EVENTS - 2;
  write_meta (1);
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c",
               "joining = [ \"/mem/d\" ];\n");
  assert_int_equal (cfg.nr_members, 4);
  assembly_free (&asm_);
  assert_int_equal (assemble_accepting (&cfg, &asm_, 1, &events), -1);
  assert_error_logged ("were never added", "serve the volume once");
}

/* Two members stale: each is taken back on its own, the other named. */
static void
accepting_takes_stale_members_back_one_at_a_time (void **state)
{
  uint64_t events = 0;

  (void) state;
  make_volume3 (METADATA_HEADER);
  vol.hdr[1].events = EVENTS - 2;
  write_meta (1);
  vol.hdr[2].events = EVENTS - 2;
  write_meta (2);
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c", NULL);
  assembly_free (&asm_);
  assert_int_equal (assemble_accepting (&cfg, &asm_, 1, &events), 0);
  assert_int_equal (events, EVENTS - 2);
  assert_error_logged ("member 2 (mem:c)", "stale",
                       "at generation 3, the volume is at 5");
  assert_not_logged ("member 1 (mem:b)");
  assembly_free (&asm_);
  assert_int_equal (assemble_accepting (&cfg, &asm_, 2, &events), 0);
  assert_int_equal (events, EVENTS - 2);
  assert_error_logged ("member 1 (mem:b)", "stale");
}

/* Member i's header as it is on the member now. */
static struct header
header_on (unsigned i)
{
  uint8_t buf[HEADER_SIZE];
  struct header h;

  mem_read (vol.names[i], 0, buf, sizeof buf);
  assert_int_equal (header_decode (buf, sizeof buf, &h, NULL), HEADER_OK);
  return h;
}

/* The array the tests below open: cfg's volume, opened as the plugin
 * and the command open it (array.h), without health.
 */
static struct array arr;

static struct volume *
open_config (const struct volume_options *o)
{
  const struct array_options ao = { .volume = *o, .cfg = &cfg };

  assert_int_equal (array_open (&arr, &ao), 0);
  return &arr.volume;
}

/* Lost stays lost: a range the headers list reads as EIO, not as what
 * the members hold there (zeros, or old bytes); a write over it is
 * served, durable, and the list without it on every member before the
 * write returns; then it reads back as written.  Bytes beside it read
 * as always.
 */
static void
header_lost_range_reads_eio_until_a_write_covers_it (void **state)
{
  const struct volume_options o = { .claim = true };
  struct volume *v;
  uint8_t buf[4096], back[4096];

  (void) state;
  make_volume3 (METADATA_HEADER);
  for (unsigned i = 0; i < 3; ++i) {
    vol.hdr[i].nr_lost = 1;
    vol.hdr[i].lost[0] = (struct header_range){ CHUNK + 4096, 8192 };
    write_meta (i);
  }
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c", NULL);
  v = open_config (&o);
  /* Touching the range, even by a sector: EIO. */
  errno = 0;
  assert_int_equal (volume_pread (v, buf, sizeof buf, CHUNK + 4096), -1);
  assert_int_equal (errno, EIO);
  assert_int_equal (volume_pread (v, buf, 1024, CHUNK + 4096 + 8192 - 512),
                    -1);
  assert_int_equal (errno, EIO);
  /* Beside it: served. */
  assert_int_equal (volume_pread (v, buf, 4096, CHUNK), 0);
  assert_int_equal (volume_pread (v, buf, 4096, CHUNK + 4096 + 8192), 0);
  /* Half of it written: that half is no longer lost, on every member. */
  memset (buf, 0x5a, sizeof buf);
  assert_int_equal (volume_pwrite (v, buf, 4096, CHUNK + 4096, false), 0);
  for (unsigned i = 0; i < 3; ++i) {
    struct header h = header_on (i);
    assert_int_equal (h.events, EVENTS + 1);
    assert_int_equal (h.nr_lost, 1);
    assert_int_equal (h.lost[0].offset, CHUNK + 8192);
    assert_int_equal (h.lost[0].length, 4096);
  }
  assert_int_equal (volume_pread (v, back, 4096, CHUNK + 4096), 0);
  assert_memory_equal (back, buf, 4096);
  assert_int_equal (volume_pread (v, back, 4096, CHUNK + 8192), -1);
  /* A trim over the rest: the list is empty, on every member. */
  assert_int_equal (volume_trim (v, 4096, CHUNK + 8192, false), 0);
  for (unsigned i = 0; i < 3; ++i)
    assert_int_equal (header_on (i).nr_lost, 0);
  assert_int_equal (volume_pread (v, back, 4096, CHUNK + 8192), 0);
  array_close (&arr);
}

static void
header_volume_opens_through_array_open_and_serves (void **state)
{
  const struct volume_options o = { .claim = true };
  struct volume *v;
  uint8_t buf[4096], back[4096];

  (void) state;
  make_volume3 (METADATA_HEADER);
  load_config (METADATA_HEADER, DATA_OFFSET, "a b c", NULL);
  v = open_config (&o);
  assert_nothing_logged ();
  assert_int_equal (v->layout.size, 3 * 1024 * KIB);
  /* Logical chunk 1 is member 1's first chunk, after its header. */
  memset (buf, 0xa5, sizeof buf);
  assert_int_equal (volume_pwrite (v, buf, sizeof buf, CHUNK, false), 0);
  mem_read ("b", DATA_OFFSET, back, sizeof back);
  assert_memory_equal (back, buf, sizeof buf);
  array_close (&arr);
}

/* ---- the generation across a drop-out (the volume's side of health) ----
 *
 * What the volume records when a member drops out while it is served,
 * and what the next assembly makes of it: the array_health_ops
 * callbacks called as health's prober calls them.
 */

/* The generation in member i's header now. */
static uint64_t
events_on (unsigned i)
{
  uint8_t buf[HEADER_SIZE];
  struct header h;

  mem_read (vol.names[i], 0, buf, sizeof buf);
  assert_int_equal (header_decode (buf, sizeof buf, &h, NULL), HEADER_OK);
  return h.events;
}

/* The volume of vol, opened as the plugin opens it, with its health
 * callbacks in ops.
 */
static struct volume *
open_served (struct health_ops *ops)
{
  const struct volume_options o = { .claim = true };
  struct volume *v;

  load_config (vol.metadata, vol.data_offset, "a b c", NULL);
  v = open_config (&o);
  array_health_ops (v, ops);
  return v;
}

static void
close_served (struct volume *v)
{
  (void) v;
  array_close (&arr);
  assembly_free (&asm_);
  config_free (&cfg);
  cfg_loaded = false;
}

static void
header_member_dropped_out_unreached_is_stale_at_the_next_assembly (
  void **state)
{
  struct health_ops ops;
  struct volume *v;

  (void) state;
  make_volume3 (METADATA_HEADER);
  v = open_served (&ops);
  mem_inject ("b", MEM_PWRITE, 0, 0, EIO, 0); /* its header: unwritable */
  ops.dropped (ops.opaque, 1);
  assert_logged_at (LOG_WARNING,
                    "member 1 (mem:b) dropped out of volume "
                    "'vol'",
                    "generation 5 -> 6", "not on it");
  assert_int_equal (events_on (0), EVENTS + 1);
  assert_int_equal (events_on (1), EVENTS);
  assert_int_equal (events_on (2), EVENTS + 1);
  close_served (v);

  log_capture_clear ();
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at generation 5, the volume is at 6");
}

static void
header_member_dropped_out_and_reached_assembles_at_the_new_generation (
  void **state)
{
  struct health_ops ops;
  struct volume *v;

  (void) state;
  make_volume3 (METADATA_HEADER);
  v = open_served (&ops);
  ops.dropped (ops.opaque, 1);
  assert_logged_at (LOG_WARNING,
                    "member 1 (mem:b) dropped out of volume "
                    "'vol'",
                    "generation 5 -> 6", "on it too");
  for (unsigned i = 0; i < 3; ++i) {
    assert_int_equal (events_on (i), EVENTS + 1);
    assert_true (mem_count (vol.names[i], MEM_SYNC) >= 1);
  }
  close_served (v);

  log_capture_clear ();
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.events, EVENTS + 1);
}

/* An older copy of a member put where it was (the same name, another
 * device) is told apart by its generation when health probes it.
 */
static void
header_older_copy_in_a_members_place_is_refused_at_reprobe (void **state)
{
  struct health_ops ops;
  struct volume *v;
  void *fresh = NULL;
  char why[512];

  (void) state;
  make_volume3 (METADATA_HEADER);
  mem_create ("b-old", vol.sizes[1]);
  mem_write ("b-old", 0, mem_data ("b", NULL), vol.sizes[1]);
  mem_create ("b-dev", 1); /* keeps b's device named while b-old is in */
  mem_rebind ("b-dev", "b");
  v = open_served (&ops);
  ops.dropped (ops.opaque, 1); /* generation 6, b too */

  mem_rebind ("b", "b-old");
  assert_int_equal (ops.probe (ops.opaque, 1, &fresh, why, sizeof why), -1);
  assert_null (fresh);
  if (strstr (why, "holds a stale copy of member 1: older generation 5 < 6")
      == NULL)
    fail_msg ("probe: %s", why);

  /* The member itself, back under its name, is taken back. */
  mem_rebind ("b", "b-dev");
  assert_int_equal (ops.probe (ops.opaque, 1, &fresh, why, sizeof why), 0);
  ops.discard (ops.opaque, 1, fresh);
  close_served (v);
}

/* md superblocks have no drop-out record that nbdstripe writes. */
static void
md_member_dropped_out_changes_no_superblock (void **state)
{
  struct health_ops ops;
  struct volume *v;

  (void) state;
  make_volume3 (METADATA_MD);
  v = open_served (&ops);
  ops.dropped (ops.opaque, 1);
  for (unsigned i = 0; i < 3; ++i)
    assert_int_equal (mem_count (vol.names[i], MEM_PWRITE), 0);
  close_served (v);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.events, EVENTS);
}

/* ---- md v1.x superblocks ---- */

static void
md_volume_assembles_with_its_offsets_sizes_layout_and_events (void **state)
{
  const uint64_t sizes[] = { DATA_OFFSET + 1024 * KIB,
                             DATA_OFFSET + 512 * KIB + 4 * KIB,
                             DATA_OFFSET + 768 * KIB };

  (void) state;
  make_volume (METADATA_MD, 3, sizes);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_ptr_equal (asm_.meta, &meta_md_ops);
  assert_int_equal (asm_.layout, LAYOUT_MD_ALT);
  assert_int_equal (asm_.size_rule, LAYOUT_SIZE_MD);
  assert_int_equal (asm_.events, EVENTS);
  assert_int_equal (((const struct md_super *) asm_.members[0].rec)->minor, 2);
  assert_string_equal (asm_.members[asm_.ref].name, "vol");
  assert_memory_equal (asm_.members[asm_.ref].array_uuid, ARRAY_UUID, 16);
  /* md's data size is the whole data area, not whole chunks. */
  for (unsigned i = 0; i < 3; ++i) {
    uint8_t u[16];
    assert_int_equal (asm_.data_offsets[i], DATA_OFFSET);
    assert_int_equal (asm_.data_sizes[i], sizes[i] - DATA_OFFSET);
    member_uuid (i, u);
    assert_memory_equal (asm_.members[i].member_uuid, u, 16);
    assert_non_null (asm_.members[i].rec);
    assert_int_equal (asm_.members[i].slot, i);
    assert_int_equal (md_super_role (asm_.members[i].rec), i);
  }
}

static void
md_layout_original_in_the_superblocks_is_the_assemblys (void **state)
{
  const uint64_t sizes[] = { DATA_OFFSET + 1024 * KIB, DATA_OFFSET + 512 * KIB,
                             DATA_OFFSET + 768 * KIB };

  (void) state;
  make_volume (METADATA_MD, 3, sizes);
  for (unsigned i = 0; i < 3; ++i) {
    vol.md[i].layout = MD_RAID0_ORIG;
    write_meta (i);
  }
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (asm_.layout, LAYOUT_MD_ORIG);
}

/* Zone 1 (members a and c) starts at logical chunk 21, not a multiple
 * of its width: md's two layouts place its chunks differently.
 */
static void
md_mixed_sizes_without_a_layout_anywhere_are_refused (void **state)
{
  const uint64_t sizes[] = { DATA_OFFSET + 1024 * KIB, DATA_OFFSET + 448 * KIB,
                             DATA_OFFSET + 768 * KIB };

  (void) state;
  make_volume (METADATA_MD, 3, sizes);
  for (unsigned i = 0; i < 3; ++i) {
    vol.md[i].feature_map = 0;
    write_meta (i);
  }
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged (CONF, "members of different sizes",
                       "layout = \"original\"", "layout = \"alternate\"");
}

static void
md_superblock_1_0_at_the_end_assembles_with_data_from_byte_0 (void **state)
{
  const uint64_t s = 1024 * KIB + 8 * KIB;
  const uint64_t sizes[] = { s, s, s };

  (void) state;
  vol.md_minor = 0;
  make_volume (METADATA_MD, 3, sizes);
  assert_int_equal (vol.md_minor, 0);
  assert_int_equal (assemble_these ("a b c", NULL), 0);
  assert_nothing_logged ();
  assert_int_equal (((const struct md_super *) asm_.members[0].rec)->minor, 0);
  for (unsigned i = 0; i < 3; ++i) {
    assert_int_equal (asm_.data_offsets[i], 0);
    assert_int_equal (asm_.data_sizes[i], vol.md[i].super_offset * 512);
  }
}

static void
md_members_in_the_wrong_order_are_refused_with_the_right_order (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  assert_int_equal (assemble_these ("c b a", NULL), -1);
  assert_error_logged ("member 0 (mem:c)", "has role 2 in md array 'vol'",
                       "wrong order");
  assert_error_logged ("member 2 (mem:a)", "has role 0 in md array 'vol'",
                       "wrong order");
  assert_error_logged (CONF, "members are in the wrong order",
                       "members = [ \"mem:a\", \"mem:b\", \"mem:c\" ];");
  assert_not_logged ("member 1 (mem:b)");
}

static void
md_member_an_event_behind_is_stale_and_named (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  vol.md[1].events = EVENTS - 1;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "stale",
                       "at event count 4, the array is at 5");
  assert_not_logged ("member 0 (mem:a)");
  assert_not_logged ("member 2 (mem:c)");
}

static void
md_two_names_for_one_device_are_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  mem_alias ("a2", "a");
  assert_int_equal (assemble_these ("a a2 c", NULL), -1);
  assert_error_logged ("member 0 (mem:a) and member 1 (mem:a2)",
                       "the same file", "a member may be given only once");
}

static void
md_copy_of_a_member_shows_the_same_device_uuid_and_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  mem_create ("copy", vol.sizes[0]);
  mem_write ("copy", 0, mem_data ("a", NULL), vol.sizes[0]);
  assert_int_equal (assemble_these ("a copy c", NULL), -1);
  assert_error_logged ("member 0 (mem:a) and member 1 (mem:copy)",
                       "show the same md superblock",
                       "device UUID " MEMBER0_UUID_MD, "a copy of a member");
  assert_not_logged ("the same file");
}

static void
md_member_of_another_array_is_refused_naming_both_arrays (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  memcpy (vol.md[2].set_uuid, OTHER_UUID, 16);
  snprintf (vol.md[2].set_name, sizeof vol.md[2].set_name, "other");
  write_meta (2);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 2 (mem:c)", "belongs to another md array",
                       "'other', " OTHER_UUID_MD,
                       "not to 'vol' (" ARRAY_UUID_MD ")");
  assert_not_logged ("member 0 (mem:a)");
  assert_not_logged ("member 1 (mem:b)");
}

static void
md_half_copied_new_without_its_superblock_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  mem_fill ("b", DATA_OFFSET, mem_size ("b") - DATA_OFFSET, 0x5a);
  mem_fill ("b", 0, DATA_OFFSET, 0);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)",
                       "no md superblock (none of version 1.0, 1.1 or 1.2)",
                       "not a member of an md array, or a blank one");
  assert_not_logged ("member 0 (mem:a)");
}

static void
md_member_with_role_faulty_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  vol.md[1].dev_roles[1] = MD_ROLE_FAULTY;
  write_meta (1);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "md superblock 1.2",
                       "role: faulty");
}

static void
md_member_smaller_than_its_superblock_says_is_refused (void **state)
{
  char want[128];

  (void) state;
  make_volume3 (METADATA_MD);
  mem_resize ("c", DATA_OFFSET + 1024 * KIB - 4 * KIB);
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  snprintf (want, sizeof want,
            "%u bytes, smaller than its md superblock "
            "says (%u data bytes from offset %u)",
            DATA_OFFSET + 1020 * KIB, 1024 * KIB, DATA_OFFSET);
  assert_error_logged ("member 2 (mem:c)", want, "truncated or replaced?");
}

static void
md_config_chunk_other_than_the_superblocks_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  load_config (METADATA_MD, DATA_OFFSET, "a b c", "");
  cfg.chunk = 2 * CHUNK;
  assembly_free (&asm_);
  assert_int_equal (assemble (&cfg, &asm_), -1);
  assert_error_logged (CONF, "chunk: the config says 131072, the md "
                             "superblocks say 65536");
}

static void
md_config_uuid_other_than_the_members_is_refused (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  assert_int_equal (
    assemble_these ("a b c", "uuid = \"" OTHER_UUID_TEXT "\";\n"), -1);
  assert_error_logged (CONF, "uuid: the config says " OTHER_UUID_MD,
                       "the members belong to md array 'vol' (" ARRAY_UUID_MD
                       ")",
                       "not the array this config describes");
}

static void
md_member_holding_an_nbdstripe_header_is_told_apart (void **state)
{
  (void) state;
  make_volume3 (METADATA_MD);
  mem_fill ("b", 0, DATA_OFFSET, 0);
  vol.metadata = METADATA_HEADER;
  make_meta (1);
  write_meta (1);
  vol.metadata = METADATA_MD;
  assert_int_equal (assemble_these ("a b c", NULL), -1);
  assert_error_logged ("member 1 (mem:b)", "holds an nbdstripe header",
                       "metadata = \"header\"");
}

/* ---- metadata "none" ---- */

static void
metadata_none_takes_offsets_and_layout_from_the_config (void **state)
{
  (void) state;
  mem_create ("a", 1024 * KIB);
  mem_create ("b", 1024 * KIB);
  load_config (METADATA_NONE, 8 * KIB, "a b", "layout = \"original\";\n");
  assert_int_equal (assemble (&cfg, &asm_), 0);
  assert_nothing_logged ();
  assert_ptr_equal (asm_.meta, &meta_none_ops);
  assert_int_equal (asm_.layout, LAYOUT_MD_ORIG);
  assert_int_equal (asm_.data_offsets[0], 8 * KIB);
  assert_int_equal (asm_.data_offsets[1], 8 * KIB);
  assert_int_equal (asm_.data_sizes[0], 0);
  assert_int_equal (mem_count ("a", MEM_OPEN), 0);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (
      header_volume_assembles_with_its_offsets_sizes_layout_and_generation),
    fixture_test (header_version_1_volume_keeps_the_size_of_all_its_zones),
    fixture_test (
      header_members_in_the_wrong_order_are_refused_with_the_right_order),
    fixture_test (header_member_two_generations_behind_is_stale_and_named),
    fixture_test (header_member_one_generation_behind_is_an_update_cut_short),
    fixture_test (header_member_one_behind_and_marked_behind_is_stale),
    fixture_test (header_member_one_behind_not_in_the_newest_roster_is_stale),
    fixture_test (header_member_one_behind_in_the_newest_roster_is_taken),
    fixture_test (header_one_member_one_ahead_speaks_for_the_volume),
    fixture_test (header_members_two_behind_one_newer_member_are_all_stale),
    fixture_test (header_two_names_for_one_device_are_refused),
    fixture_test (
      header_copy_of_a_member_shows_the_same_member_uuid_and_is_refused),
    fixture_test (
      header_member_of_another_array_is_refused_naming_both_arrays),
    fixture_test (header_half_copied_new_without_its_header_is_refused),
    fixture_test (header_corrupt_header_is_refused_as_corrupt),
    fixture_test (header_missing_member_is_refused_naming_serve_degraded),
    fixture_test (header_degraded_leaves_a_missing_member_out_with_its_place),
    fixture_test (header_degraded_leaves_a_member_with_a_corrupt_header_out),
    fixture_test (header_degraded_with_every_member_missing_is_refused),
    fixture_test (header_degraded_refuses_a_member_of_another_array),
    fixture_test (
      md_degraded_without_a_component_size_is_refused_naming_the_member),
    fixture_test (
      md_degraded_with_a_component_size_below_every_member_read_is_refused),
    fixture_test (md_degraded_with_a_corrupt_superblock_is_refused),
    fixture_test (md_missing_member_is_refused_without_naming_serve_degraded),
    fixture_test (md_degraded_with_every_member_there_assembles),
    fixture_test (none_degraded_missing_member_is_refused_saying_why),
    fixture_test (none_degraded_with_every_member_there_assembles),
    fixture_test (header_member_marked_replaced_is_refused),
    fixture_test (header_member_smaller_than_its_header_says_is_refused),
    fixture_test (header_config_chunk_other_than_the_headers_is_refused),
    fixture_test (header_config_uuid_other_than_the_members_is_refused),
    fixture_test (header_config_uuid_of_the_members_assembles),
    fixture_test (
      header_config_with_fewer_members_than_the_headers_is_refused),
    fixture_test (accepting_lets_exactly_the_named_stale_member_through),
    fixture_test (accepting_with_a_config_the_members_contradict_is_refused),
    fixture_test (accepting_takes_stale_members_back_one_at_a_time),
    fixture_test (header_lost_range_reads_eio_until_a_write_covers_it),
    fixture_test (header_volume_opens_through_array_open_and_serves),
    fixture_test (
      header_member_dropped_out_unreached_is_stale_at_the_next_assembly),
    fixture_test (
      header_member_dropped_out_and_reached_assembles_at_the_new_generation),
    fixture_test (header_older_copy_in_a_members_place_is_refused_at_reprobe),
    fixture_test (md_member_dropped_out_changes_no_superblock),
    fixture_test (
      md_volume_assembles_with_its_offsets_sizes_layout_and_events),
    fixture_test (md_layout_original_in_the_superblocks_is_the_assemblys),
    fixture_test (md_mixed_sizes_without_a_layout_anywhere_are_refused),
    fixture_test (
      md_superblock_1_0_at_the_end_assembles_with_data_from_byte_0),
    fixture_test (
      md_members_in_the_wrong_order_are_refused_with_the_right_order),
    fixture_test (md_member_an_event_behind_is_stale_and_named),
    fixture_test (md_two_names_for_one_device_are_refused),
    fixture_test (
      md_copy_of_a_member_shows_the_same_device_uuid_and_is_refused),
    fixture_test (md_member_of_another_array_is_refused_naming_both_arrays),
    fixture_test (md_half_copied_new_without_its_superblock_is_refused),
    fixture_test (md_member_with_role_faulty_is_refused),
    fixture_test (md_member_smaller_than_its_superblock_says_is_refused),
    fixture_test (md_config_chunk_other_than_the_superblocks_is_refused),
    fixture_test (md_config_uuid_other_than_the_members_is_refused),
    fixture_test (md_member_holding_an_nbdstripe_header_is_told_apart),
    fixture_test (metadata_none_takes_offsets_and_layout_from_the_config),
  };

  return run_unit_tests ("assemble", tests, sizeof tests / sizeof tests[0],
                         argc, argv);
}
