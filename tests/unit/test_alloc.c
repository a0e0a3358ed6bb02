/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the allocation map (include/alloc.h,
 * plugin/core/alloc.c, and plugin/layout/alloc_plan.c for its shape), on
 * members in memory (tests/lib/member_mem.h).
 *
 * alloc_plan against its rule (the smallest region from 64 KiB that cuts
 * the volume into at most 4096, at most 4 MiB while room allows, whole
 * blocks covering max_size); the queries and alloc_clear at region
 * boundaries; alloc_sync's writeout (each dirty block to every member,
 * synced per batch; a failure keeps the blocks dirty) and
 * alloc_write_copy.
 *
 * The promise -- a region holding a write that a completed flush or FUA
 * acknowledged is "in use" on the members, a stale "free" never -- is
 * checked against a model over random histories of writes, FUA writes,
 * trims, flushes and injected member faults: after every step the
 * members' copies are loaded as assembly loads them (ORed into a fresh
 * map) as if the machine had crashed there.  What only an interleaving
 * breaks is checked two ways: deterministically, by a writer marking
 * regions from inside a writeout (a member's pwrite, the lock held), and
 * by threads racing writers against a flusher (which meets a writeout
 * landing inside a mark only by chance).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "ioexec.h"
#include "member.h"
#include "member_mem.h"
#include "unit_log.h"
#include "unit_main.h"

#define KIB (UINT64_C (1) << 10)
#define MIB (UINT64_C (1) << 20)
#define GIB (UINT64_C (1) << 30)
#define TIB (UINT64_C (1) << 40)
#define PIB (UINT64_C (1) << 50)

/* Where the map sits on the members (any offset but 0 shows a writeout
 * that forgets it).
 */
#define MAP_OFFSET (8 * KIB)
#define MAX_MEMBERS 3
/* 64 KiB regions throughout, but for alloc_plan's tests. */
#define SHIFT 16u
#define REGION (UINT64_C (1) << SHIFT)

static struct alloc map;
static struct member members[MAX_MEMBERS];
static unsigned nr_members;
static char why[256];

static int
setup (void **state)
{
  (void) state;
  mem_register ();
  log_capture_start ();
  memset (&map, 0, sizeof map);
  memset (members, 0, sizeof members);
  nr_members = 0;
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  for (unsigned i = 0; i < nr_members; ++i)
    member_close (&members[i]);
  nr_members = 0;
  alloc_free (&map);
  mem_destroy_all ();
  log_capture_stop ();
  return 0;
}

static const char *
dev_name (unsigned i)
{
  static const char *const n[MAX_MEMBERS] = { "m0", "m1", "m2" };
  return n[i];
}

/* A map of blocks blocks at MAP_OFFSET on nr members in memory, as a
 * volume that was just created finds it: every copy all zeros, loaded,
 * so that every region is free and durable says so.
 */
static void
open_volume (unsigned nr, uint64_t blocks)
{
  const struct member_open_params p = { 0 };
  char path[32];

  assert_true (nr <= MAX_MEMBERS);
  assert_int_equal (alloc_init (&map, SHIFT, MAP_OFFSET, blocks * ALLOC_BLOCK),
                    0);
  for (unsigned i = 0; i < nr; ++i) {
    mem_create (dev_name (i), MAP_OFFSET + blocks * ALLOC_BLOCK);
    snprintf (path, sizeof path, MEM_PREFIX "%s", dev_name (i));
    assert_int_equal (member_open (&members[i], i, path, &p, why, sizeof why),
                      0);
    nr_members = i + 1;
  }
  alloc_load_begin (&map);
  for (unsigned i = 0; i < nr; ++i)
    alloc_merge (&map, mem_data (dev_name (i), NULL) + MAP_OFFSET);
  alloc_loaded (&map);
}

/* Region r as member i's copy has it (little-endian bits, assembly's
 * reading of it).
 */
static bool
on_member (unsigned i, uint64_t r)
{
  const uint8_t *copy = mem_data (dev_name (i), NULL) + MAP_OFFSET;

  return copy[r / 8] >> (r % 8) & 1;
}

static bool
on_every_member (uint64_t r)
{
  for (unsigned i = 0; i < nr_members; ++i)
    if (!on_member (i, r))
      return false;
  return true;
}

/* What a crash would load it as: copies are ORed. */
static bool
on_some_member (uint64_t r)
{
  for (unsigned i = 0; i < nr_members; ++i)
    if (on_member (i, r))
      return true;
  return false;
}

static void
set_on_member (unsigned i, uint64_t r)
{
  mem_data (dev_name (i), NULL)[MAP_OFFSET + r / 8] |= 1u << (r % 8);
}

static bool
in_use (uint64_t r)
{
  return alloc_test (map.bits, r);
}

static bool
durable (uint64_t r)
{
  return alloc_test (map.durable, r);
}

static bool
dirty (uint64_t blk)
{
  return alloc_test (map.dirty, blk);
}

/* A crash now: a fresh map loaded from the members as assembly loads it
 * (volume.c's load_map), into fresh, which the caller frees.
 */
static void
load_after_crash (struct alloc *fresh)
{
  if (fresh->bits == NULL)
    assert_int_equal (
      alloc_init (fresh, map.shift, map.map_offset, map.map_bytes), 0);
  alloc_load_begin (fresh);
  for (unsigned i = 0; i < nr_members; ++i)
    alloc_merge (fresh, mem_data (dev_name (i), NULL) + MAP_OFFSET);
  alloc_loaded (fresh);
}

static int
sync_all (void)
{
  return alloc_sync (&map, members, nr_members, 0);
}

/* alloc_plan: the region size. */

/* The rule as alloc.h states it, for a volume whose map room allows. */
static unsigned
expected_shift (uint64_t size)
{
  unsigned s = ALLOC_SHIFT_MIN;

  while (s < ALLOC_SHIFT_MAX && (size + (UINT64_C (1) << s) - 1) >> s > 4096)
    ++s;
  return s;
}

static void
plan_gives_a_100_mib_volume_64_kib_regions (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  assert_true (alloc_plan (100 * MIB, 100 * MIB, 1 * MIB, &shift, &bytes));
  assert_int_equal (shift, 16);
  assert_int_equal (bytes, ALLOC_BLOCK); /* 1600 regions: one block */
}

static void
plan_gives_a_7_gib_volume_2_mib_regions (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  /* 7 GiB / 4096 = 1.75 MiB: 2 MiB regions, 3584 of them. */
  assert_true (alloc_plan (7 * GIB, 7 * GIB, 1 * MIB, &shift, &bytes));
  assert_int_equal (shift, 21);
  assert_int_equal (bytes, ALLOC_BLOCK);
}

static void
plan_picks_the_smallest_region_that_cuts_the_volume_into_4096 (void **state)
{
  static const struct {
    uint64_t size;
    unsigned shift;
  } cases[] = {
    { 1, 16 },
    { 64 * KIB, 16 },
    { 256 * MIB, 16 },     /* 4096 regions of 64 KiB exactly */
    { 256 * MIB + 1, 17 }, /* one byte more: 2049 of 128 KiB */
    { 512 * MIB, 17 },
    { 512 * MIB + 1, 18 },
    { 8 * GIB, 21 },
    { 8 * GIB + 1, 22 },
    { 16 * GIB, 22 }, /* 4096 regions of 4 MiB */
  };
  unsigned shift;
  uint64_t bytes;

  (void) state;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    assert_true (
      alloc_plan (cases[k].size, cases[k].size, 1 * MIB, &shift, &bytes));
    if (shift != cases[k].shift)
      fail_msg ("size %" PRIu64 ": shift %u, expected %u", cases[k].size,
                shift, cases[k].shift);
  }
  /* And the rule around every power of two from 64 KiB to 1 PiB. */
  for (uint64_t p = 64 * KIB; p <= PIB; p <<= 1)
    for (int d = -1; d <= 1; ++d) {
      uint64_t size = p + d;
      assert_true (alloc_plan (size, size, 1 * GIB, &shift, &bytes));
      if (shift != expected_shift (size))
        fail_msg ("size %" PRIu64 ": shift %u, expected %u", size, shift,
                  expected_shift (size));
    }
}

static void
plan_never_goes_above_4_mib_regions_while_room_allows (void **state)
{
  const uint64_t sizes[] = { 16 * GIB + 1, 1 * TIB, 100 * TIB, 1 * PIB };
  unsigned shift;
  uint64_t bytes;

  (void) state;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    assert_true (alloc_plan (sizes[k], sizes[k], 1 * GIB, &shift, &bytes));
    assert_int_equal (shift, ALLOC_SHIFT_MAX);
  }
  /* 4 MiB regions: 32 KiB of map a TiB. */
  assert_true (alloc_plan (1 * TIB, 1 * TIB, 1 * GIB, &shift, &bytes));
  assert_int_equal (bytes, 32 * KIB);
}

static void
plan_sizes_regions_by_the_volume_not_by_max_size (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  assert_true (
    alloc_plan (100 * MIB, 1 * PIB, UINT64_MAX / 16, &shift, &bytes));
  assert_int_equal (shift, 16);
}

/* Whole blocks, enough for max_size's regions, not one block more. */
static void
plan_map_is_the_whole_blocks_that_cover_max_size (void **state)
{
  static const struct {
    uint64_t size, max;
  } cases[] = {
    { 100 * MIB, 100 * MIB },   { 100 * MIB, 2 * GIB },
    { 100 * MIB, 2 * GIB + 1 }, { 100 * MIB, 10 * GIB },
    { 7 * GIB, 7 * TIB },       { 16 * GIB, 16 * TIB + 5 },
    { 1 * GIB, 1 * PIB },       { 100 * MIB, 50 * MIB }, /* max < size */
  };
  unsigned shift;
  uint64_t bytes;

  (void) state;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    uint64_t max = cases[k].max > cases[k].size ? cases[k].max : cases[k].size;
    uint64_t regions;

    assert_true (alloc_plan (cases[k].size, cases[k].max, UINT64_MAX / 16,
                             &shift, &bytes));
    regions = ((max - 1) >> shift) + 1;
    assert_int_equal (bytes % ALLOC_BLOCK, 0);
    assert_true (bytes > 0);
    if (bytes * 8 < regions || (bytes - ALLOC_BLOCK) * 8 >= regions)
      fail_msg ("size %" PRIu64 " max %" PRIu64 ": %" PRIu64
                " bytes of map for %" PRIu64 " regions",
                cases[k].size, cases[k].max, bytes, regions);
  }
  /* 100 MiB growing to 10 GiB in 64 KiB regions: 163840, five blocks. */
  assert_true (alloc_plan (100 * MIB, 10 * GIB, 1 * MIB, &shift, &bytes));
  assert_int_equal (shift, 16);
  assert_int_equal (bytes, 5 * ALLOC_BLOCK);
}

static void
plan_takes_all_the_room_when_it_cannot_cover_max_size (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  /* max_size would need 2 GiB of map; the volume fits in 3 blocks. */
  assert_true (
    alloc_plan (100 * MIB, 1 * PIB, 3 * ALLOC_BLOCK + 100, &shift, &bytes));
  assert_int_equal (shift, 16);
  assert_int_equal (bytes, 3 * ALLOC_BLOCK);
}

static void
plan_coarsens_past_4_mib_only_when_room_cannot_hold_the_volume (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  /* 1 TiB in one block (32768 regions): 32 MiB regions. */
  assert_true (alloc_plan (1 * TIB, 1 * TIB, ALLOC_BLOCK, &shift, &bytes));
  assert_int_equal (shift, 25);
  assert_int_equal (bytes, ALLOC_BLOCK);
  /* Two blocks: 16 MiB. */
  assert_true (alloc_plan (1 * TIB, 1 * TIB, 2 * ALLOC_BLOCK, &shift, &bytes));
  assert_int_equal (shift, 24);
}

static void
plan_gives_no_map_without_room_for_one_block (void **state)
{
  unsigned shift;
  uint64_t bytes;

  (void) state;
  assert_false (alloc_plan (100 * MIB, 100 * MIB, 0, &shift, &bytes));
  assert_false (
    alloc_plan (100 * MIB, 100 * MIB, ALLOC_BLOCK - 1, &shift, &bytes));
  assert_false (alloc_plan (0, 100 * MIB, 1 * MIB, &shift, &bytes));
  /* One block cannot hold 2^62 bytes even in 1 GiB regions. */
  assert_false (alloc_plan (UINT64_C (1) << 62, UINT64_C (1) << 62,
                            ALLOC_BLOCK, &shift, &bytes));
}

/* The map at run time, one member. */

static void
init_calls_every_region_in_use_and_durable (void **state)
{
  (void) state;
  assert_int_equal (alloc_init (&map, SHIFT, MAP_OFFSET, 2 * ALLOC_BLOCK), 0);
  assert_int_equal (map.nr_regions, 2 * ALLOC_BLOCK_BITS);
  assert_int_equal (map.nr_blocks, 2);
  for (uint64_t r = 0; r < map.nr_regions; r += 997) {
    assert_true (in_use (r));
    assert_true (durable (r));
  }
  assert_true (alloc_mark (&map, 12345 * REGION, 3 * REGION));
}

static void
load_ors_the_copies_and_writes_again_those_that_differ (void **state)
{
  (void) state;
  open_volume (3, 2);
  set_on_member (0, 5);
  set_on_member (1, ALLOC_BLOCK_BITS + 100);
  set_on_member (2, 40000);
  set_on_member (2, 5);
  alloc_load_begin (&map);
  for (unsigned i = 0; i < 3; ++i)
    alloc_merge (&map, mem_data (dev_name (i), NULL) + MAP_OFFSET);
  alloc_loaded (&map);
  /* In use: on any copy.  Durable: on every copy (none here is on all
   * three), so that a mark on some copies only is written to every
   * member at the next sync (a member that leaves or goes missing may
   * have been the one that held it).
   */
  for (uint64_t r = 0; r < map.nr_regions; ++r) {
    bool want = r == 5 || r == ALLOC_BLOCK_BITS + 100 || r == 40000;
    if (in_use (r) != want || durable (r))
      fail_msg ("region %" PRIu64 ": in use %d durable %d, expected %d, 0",
                r, in_use (r), durable (r), want);
  }
  assert_int_equal (alloc_used_bytes (&map, map.nr_regions * REGION),
                    3 * REGION);
  assert_false (alloc_mark (&map, 5 * REGION, 4096));
  assert_int_equal (sync_all (), 0);
  for (unsigned i = 0; i < 3; ++i)
    for (uint64_t r = 0; r < map.nr_regions; ++r) {
      bool want = r == 5 || r == ALLOC_BLOCK_BITS + 100 || r == 40000;
      if (on_member (i, r) != want)
        fail_msg ("member %u, region %" PRIu64 ": %d after the sync", i, r,
                  on_member (i, r));
    }
  assert_true (durable (5) && durable (40000));
}

static void
mark_sets_every_region_the_write_touches_and_no_other (void **state)
{
  (void) state;
  open_volume (1, 1);
  /* The last byte of region 9 and the first of 10. */
  assert_false (alloc_mark (&map, 10 * REGION - 1, 2));
  assert_false (in_use (8));
  assert_true (in_use (9));
  assert_true (in_use (10));
  assert_false (in_use (11));
  /* Exactly region 20, and exactly regions 30 to 32. */
  assert_false (alloc_mark (&map, 20 * REGION, REGION));
  assert_false (alloc_mark (&map, 30 * REGION, 3 * REGION));
  assert_false (in_use (19));
  assert_true (in_use (20));
  assert_false (in_use (21));
  assert_false (in_use (29));
  assert_true (in_use (30) && in_use (31) && in_use (32));
  assert_false (in_use (33));
  assert_true (dirty (0));
}

static void
mark_says_durable_only_when_every_region_is_on_the_members (void **state)
{
  (void) state;
  open_volume (2, 1);
  assert_false (alloc_mark (&map, 4 * REGION, 100));
  /* In use now, not yet on the members: still not durable. */
  assert_false (alloc_mark (&map, 4 * REGION, 100));
  assert_int_equal (sync_all (), 0);
  assert_true (on_every_member (4));
  assert_true (alloc_mark (&map, 4 * REGION + 200, 100));
  /* Region 4 durable, 5 not: the write is not. */
  assert_false (alloc_mark (&map, 5 * REGION - 10, 20));
  assert_int_equal (sync_all (), 0);
  assert_true (alloc_mark (&map, 5 * REGION - 10, 20));
}

static void
in_use_holds_only_for_a_read_inside_one_region_in_use (void **state)
{
  (void) state;
  open_volume (1, 1);
  alloc_mark (&map, 3 * REGION, 2 * REGION); /* regions 3 and 4 */
  assert_true (alloc_in_use (&map, 3 * REGION, REGION));
  assert_true (alloc_in_use (&map, 4 * REGION + 7, 9));
  assert_false (alloc_in_use (&map, 2 * REGION, REGION));
  /* Both in use, but two regions: read_free's path. */
  assert_false (alloc_in_use (&map, 4 * REGION - 1, 2));
  assert_false (alloc_in_use (&map, 5 * REGION - 1, 2));
}

static void
any_says_whether_some_and_whether_all_regions_are_in_use (void **state)
{
  bool all;

  (void) state;
  open_volume (1, 1);
  alloc_mark (&map, 3 * REGION, 2 * REGION); /* regions 3 and 4 */
  assert_true (alloc_any (&map, 3 * REGION, 2 * REGION, &all));
  assert_true (all);
  assert_true (alloc_any (&map, 5 * REGION - 1, 2, &all)); /* 4 and 5 */
  assert_false (all);
  assert_true (alloc_any (&map, 3 * REGION - 1, 1 + 2 * REGION, &all));
  assert_false (all);
  assert_false (alloc_any (&map, 5 * REGION, 10 * REGION, &all));
  assert_false (all);
  assert_false (alloc_any (&map, 3 * REGION - 1, 1, &all)); /* region 2 */
}

static void
run_ends_exactly_at_the_region_where_use_changes (void **state)
{
  bool used;

  (void) state;
  open_volume (1, 1);
  alloc_mark (&map, 3 * REGION, 2 * REGION); /* regions 3 and 4 */
  alloc_mark (&map, 7 * REGION + 5, 1);      /* region 7 */
  assert_int_equal (alloc_run (&map, 100, 20 * REGION, &used), 3 * REGION);
  assert_false (used);
  assert_int_equal (alloc_run (&map, 3 * REGION, 20 * REGION, &used),
                    5 * REGION);
  assert_true (used);
  assert_int_equal (alloc_run (&map, 4 * REGION + 9, 20 * REGION, &used),
                    5 * REGION);
  assert_true (used);
  assert_int_equal (alloc_run (&map, 5 * REGION, 20 * REGION, &used),
                    7 * REGION);
  assert_false (used);
  assert_int_equal (alloc_run (&map, 7 * REGION, 20 * REGION, &used),
                    8 * REGION);
  assert_true (used);
  /* Never past end, even inside a region. */
  assert_int_equal (alloc_run (&map, 3 * REGION + 1, 4 * REGION + 1, &used),
                    4 * REGION + 1);
  assert_true (used);
  assert_int_equal (alloc_run (&map, 8 * REGION, 8 * REGION + 3, &used),
                    8 * REGION + 3);
  assert_false (used);
}

static void
regions_beyond_the_map_count_as_in_use (void **state)
{
  const uint64_t end = ALLOC_BLOCK_BITS * REGION; /* what one block maps */
  bool used, all;

  (void) state;
  open_volume (1, 1);
  assert_true (alloc_in_use (&map, end, 10));
  assert_true (alloc_in_use (&map, end + 5 * REGION + 1, REGION - 1));
  assert_false (alloc_in_use (&map, end - 10, 10));
  assert_true (alloc_any (&map, end - REGION, 2 * REGION, &all));
  assert_false (all);
  assert_true (alloc_any (&map, end, 3 * REGION, &all));
  assert_true (all);
  assert_int_equal (alloc_run (&map, end - REGION, end + 3 * REGION, &used),
                    end);
  assert_false (used);
  assert_int_equal (alloc_run (&map, end, end + 3 * REGION, &used),
                    end + 3 * REGION);
  assert_true (used);
  assert_int_equal (alloc_used_bytes (&map, end + 100), 100);
  /* Nothing to clear there. */
  assert_int_equal (alloc_clear (&map, end, 10 * REGION), 0);
}

static void
used_bytes_counts_a_last_partial_region_up_to_size (void **state)
{
  (void) state;
  open_volume (1, 1);
  assert_int_equal (alloc_used_bytes (&map, 10 * REGION), 0);
  alloc_mark (&map, 2 * REGION, 1);
  alloc_mark (&map, 9 * REGION, 1);
  assert_int_equal (alloc_used_bytes (&map, 10 * REGION), 2 * REGION);
  assert_int_equal (alloc_used_bytes (&map, 9 * REGION + 123), REGION + 123);
  assert_int_equal (alloc_used_bytes (&map, 2 * REGION + 1), 1);
}

static void
clear_frees_only_the_whole_regions_inside_the_range (void **state)
{
  (void) state;
  open_volume (1, 1);
  alloc_mark (&map, 0, 20 * REGION); /* regions 0 to 19 */
  /* From inside region 2 to inside region 6: 3, 4 and 5. */
  assert_int_equal (alloc_clear (&map, 2 * REGION + 1, 4 * REGION), 3);
  assert_true (in_use (2));
  assert_false (in_use (3) || in_use (4) || in_use (5));
  assert_true (in_use (6));
  /* Inside one region, or across a boundary without a whole one. */
  assert_int_equal (alloc_clear (&map, 8 * REGION + 1, REGION - 1), 0);
  assert_int_equal (alloc_clear (&map, 9 * REGION - 1, REGION), 0);
  assert_int_equal (alloc_clear (&map, 10 * REGION, REGION - 1), 0);
  assert_true (in_use (8) && in_use (9) && in_use (10));
  /* Exactly regions 12 and 13; again, nothing more to clear. */
  assert_int_equal (alloc_clear (&map, 12 * REGION, 2 * REGION), 2);
  assert_int_equal (alloc_clear (&map, 12 * REGION, 2 * REGION), 0);
  assert_true (in_use (11));
  assert_false (in_use (12) || in_use (13));
  assert_true (in_use (14));
  assert_int_equal (alloc_used_bytes (&map, 20 * REGION), 15 * REGION);
}

static void
clear_makes_the_next_write_there_mark_again (void **state)
{
  (void) state;
  open_volume (2, 1);
  alloc_mark (&map, 6 * REGION, REGION);
  assert_int_equal (sync_all (), 0);
  assert_true (alloc_mark (&map, 6 * REGION, REGION));
  assert_int_equal (alloc_clear (&map, 6 * REGION, REGION), 1);
  assert_false (durable (6));
  assert_true (dirty (0));
  /* Still "in use" on the members until the next writeout: allowed. */
  assert_true (on_every_member (6));
  assert_false (alloc_mark (&map, 6 * REGION + 4096, 4096));
  assert_true (in_use (6));
  alloc_clear (&map, 6 * REGION, REGION);
  assert_int_equal (sync_all (), 0);
  assert_false (on_member (0, 6) || on_member (1, 6));
}

/* alloc_sync and alloc_write_copy. */

static void
sync_writes_each_dirty_block_to_every_member_then_syncs (void **state)
{
  const struct mem_record *rec;
  size_t nr;

  (void) state;
  open_volume (3, 4);
  mem_clear_records (NULL);
  alloc_mark (&map, 1 * ALLOC_BLOCK_BITS * REGION + 5 * REGION, 1);
  alloc_mark (&map, 3 * ALLOC_BLOCK_BITS * REGION + 7 * REGION, 1);
  assert_true (dirty (1) && dirty (3));
  assert_false (dirty (0) || dirty (2));
  assert_int_equal (sync_all (), 0);
  for (unsigned i = 0; i < 3; ++i) {
    rec = mem_records (dev_name (i), &nr);
    assert_int_equal (nr, 3);
    assert_int_equal (rec[0].op, MEM_WRITE);
    assert_int_equal (rec[0].offset, MAP_OFFSET + 1 * ALLOC_BLOCK);
    assert_int_equal (rec[0].length, ALLOC_BLOCK);
    assert_int_equal (rec[1].op, MEM_WRITE);
    assert_int_equal (rec[1].offset, MAP_OFFSET + 3 * ALLOC_BLOCK);
    assert_int_equal (rec[2].op, MEM_FLUSH);
    assert_true (on_member (i, 1 * ALLOC_BLOCK_BITS + 5));
    assert_true (on_member (i, 3 * ALLOC_BLOCK_BITS + 7));
  }
  assert_false (dirty (1) || dirty (3));
  assert_true (durable (1 * ALLOC_BLOCK_BITS + 5));
  assert_int_equal (map.writeouts, 2);
  /* Nothing changed since: nothing to write. */
  mem_clear_records (NULL);
  assert_int_equal (sync_all (), 0);
  for (unsigned i = 0; i < 3; ++i) {
    mem_records (dev_name (i), &nr);
    assert_int_equal (nr, 0);
  }
  assert_nothing_logged ();
}

static void
sync_writes_batches_of_64_blocks_each_synced_before_the_next (void **state)
{
  const struct mem_record *rec;
  size_t nr;

  (void) state;
  open_volume (2, 2 * ALLOC_BATCH + 2);
  alloc_dirty_all (&map);
  mem_clear_records (NULL);
  assert_int_equal (sync_all (), 0);
  assert_int_equal (map.writeouts, 2 * ALLOC_BATCH + 2);
  for (unsigned i = 0; i < 2; ++i) {
    unsigned writes = 0, syncs = 0;
    rec = mem_records (dev_name (i), &nr);
    assert_int_equal (nr, 2 * ALLOC_BATCH + 2 + 3);
    for (size_t k = 0; k < nr; ++k)
      if (rec[k].op == MEM_FLUSH) {
        /* After each full batch and after the last blocks. */
        assert_int_equal (writes, syncs == 2 ? 2 * ALLOC_BATCH + 2
                                             : (syncs + 1) * ALLOC_BATCH);
        ++syncs;
      }
      else {
        assert_int_equal (rec[k].op, MEM_WRITE);
        assert_int_equal (rec[k].offset, MAP_OFFSET + writes * ALLOC_BLOCK);
        ++writes;
      }
    assert_int_equal (syncs, 3);
  }
}

static void
sync_leaves_out_the_members_in_skip (void **state)
{
  (void) state;
  open_volume (3, 1);
  alloc_mark (&map, 9 * REGION, 1);
  mem_clear_records (NULL);
  assert_int_equal (alloc_sync (&map, members, 3, UINT64_C (1) << 1), 0);
  assert_true (on_member (0, 9) && on_member (2, 9));
  assert_false (on_member (1, 9));
  assert_int_equal (mem_count ("m1", MEM_WRITE), 0);
  assert_int_equal (mem_count ("m1", MEM_FLUSH), 0);
}

static void
sync_failure_returns_the_errno_and_keeps_the_blocks_dirty (void **state)
{
  (void) state;
  open_volume (3, 2);
  alloc_mark (&map, 11 * REGION, 1);
  alloc_mark (&map, (ALLOC_BLOCK_BITS + 11) * REGION, 1);
  mem_inject ("m1", MEM_WRITE, MAP_OFFSET + ALLOC_BLOCK, ALLOC_BLOCK, EIO, 0);
  errno = 0;
  assert_int_equal (sync_all (), -1);
  assert_int_equal (errno, EIO);
  assert_error_logged ("member 1", "m1", "allocation map");
  assert_true (dirty (0) && dirty (1));
  assert_false (durable (11) || durable (ALLOC_BLOCK_BITS + 11));
  assert_false (alloc_mark (&map, 11 * REGION, 1));
  /* Still failing: still dirty. */
  assert_int_equal (sync_all (), -1);
  assert_true (dirty (0) && dirty (1));
  mem_heal ("m1");
  assert_int_equal (sync_all (), 0);
  assert_false (dirty (0) || dirty (1));
  assert_true (on_every_member (11));
  assert_true (on_every_member (ALLOC_BLOCK_BITS + 11));
  assert_true (alloc_mark (&map, 11 * REGION, 1));
  assert_true (alloc_mark (&map, (ALLOC_BLOCK_BITS + 11) * REGION, 1));
}

static void
sync_failure_of_a_member_sync_keeps_the_blocks_dirty (void **state)
{
  (void) state;
  open_volume (2, 1);
  alloc_mark (&map, 3 * REGION, 1);
  mem_inject ("m1", MEM_FLUSH, 0, 0, ENOSPC, 1);
  assert_int_equal (sync_all (), -1);
  assert_int_equal (errno, ENOSPC);
  assert_error_logged ("member 1", "m1", "syncing the allocation map");
  assert_true (dirty (0));
  assert_false (durable (3));
  assert_false (alloc_mark (&map, 3 * REGION, 1));
  assert_int_equal (sync_all (), 0);
  assert_false (dirty (0));
  assert_true (durable (3));
}

static void
write_copy_writes_the_whole_map_to_one_member_and_syncs (void **state)
{
  const struct member_open_params p = { 0 };
  struct member joining = { 0 };
  const uint8_t *copy;
  size_t nr;

  (void) state;
  open_volume (1, 3);
  alloc_mark (&map, 2 * REGION, 1);
  alloc_mark (&map, (2 * ALLOC_BLOCK_BITS + 77) * REGION, 1);
  assert_int_equal (sync_all (), 0);
  alloc_mark (&map, 40 * REGION, 1); /* not yet written out */
  mem_create ("new", MAP_OFFSET + 3 * ALLOC_BLOCK);
  mem_fill ("new", 0, MAP_OFFSET + 3 * ALLOC_BLOCK, 0xa5);
  assert_int_equal (
    member_open (&joining, 1, MEM_PREFIX "new", &p, why, sizeof why), 0);
  mem_clear_records ("new");
  assert_int_equal (alloc_write_copy (&map, &joining, why, sizeof why), 0);
  mem_records ("new", &nr);
  assert_int_equal (nr, 3 + 1);
  assert_int_equal (mem_count ("new", MEM_PWRITE), 3);
  assert_int_equal (mem_records ("new", &nr)[3].op, MEM_SYNC);
  copy = mem_data ("new", NULL);
  for (uint64_t k = 0; k < MAP_OFFSET; ++k)
    assert_int_equal (copy[k], 0xa5);
  for (uint64_t r = 0; r < map.nr_regions; ++r)
    if ((copy[MAP_OFFSET + r / 8] >> (r % 8) & 1) != in_use (r))
      fail_msg ("region %" PRIu64 ": copy %d, map %d", r,
                copy[MAP_OFFSET + r / 8] >> (r % 8) & 1, in_use (r));
  /* Region 40 stays to be written out to the others. */
  assert_true (dirty (0));
  assert_false (durable (40));
  member_close (&joining);
}

static void
write_copy_failure_says_why (void **state)
{
  const struct member_open_params p = { 0 };
  struct member joining = { 0 };

  (void) state;
  open_volume (1, 1);
  mem_create ("new", MAP_OFFSET + ALLOC_BLOCK);
  assert_int_equal (
    member_open (&joining, 1, MEM_PREFIX "new", &p, why, sizeof why), 0);
  mem_inject ("new", MEM_PWRITE, 0, 0, EIO, 1);
  why[0] = '\0';
  assert_int_equal (alloc_write_copy (&map, &joining, why, sizeof why), -1);
  assert_non_null (strstr (why, "write"));
  member_close (&joining);
}

static void
dirty_all_gives_a_joining_member_its_copy_at_the_next_sync (void **state)
{
  (void) state;
  open_volume (3, 2);
  alloc_mark (&map, 5 * REGION, 1);
  alloc_mark (&map, (ALLOC_BLOCK_BITS + 6) * REGION, 1);
  assert_int_equal (alloc_sync (&map, members, 2, 0), 0);
  assert_false (on_member (2, 5) || on_member (2, ALLOC_BLOCK_BITS + 6));
  alloc_dirty_all (&map);
  assert_int_equal (sync_all (), 0);
  assert_true (on_member (2, 5) && on_member (2, ALLOC_BLOCK_BITS + 6));
}

/* The promise, against a model: random histories on three members. */

#define SEEDS 200
#define STEPS 300
#define POOL 48

struct rng {
  uint64_t s;
};

static uint64_t
rng_next (struct rng *g)
{
  uint64_t z = (g->s += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint64_t
rng_below (struct rng *g, uint64_t n)
{
  return rng_next (g) % n;
}

/* The regions histories touch: the first of the map, the two sides of
 * its block boundary and its end (2 blocks).
 */
static uint64_t
pool_region (unsigned k)
{
  if (k < 16)
    return k;
  if (k < 32)
    return ALLOC_BLOCK_BITS - 8 + (k - 16);
  return 2 * ALLOC_BLOCK_BITS - 16 + (k - 32);
}

/* What must be and what is, for the pool's regions. */
struct model {
  bool used[POOL];     /* in use now (the map's bits) */
  bool pending[POOL];  /* holding a completed write no flush covers yet */
  bool promised[POOL]; /* holding a write a flush or FUA acknowledged */
  uint64_t seed;
  char trail[4096]; /* the history (its end), for a failure's message */
  size_t len;
};

static void note (struct model *m, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
note (struct model *m, const char *fmt, ...)
{
  va_list ap;

  if (m->len == 0 || m->len > sizeof m->trail - 64)
    m->len = snprintf (m->trail, sizeof m->trail, "seed %" PRIu64 ": %s",
                       m->seed, m->len ? "... " : "");
  va_start (ap, fmt);
  m->len += vsnprintf (m->trail + m->len, sizeof m->trail - m->len, fmt, ap);
  va_end (ap);
}

/* A write's byte range: from somewhere in pool region k to somewhere in
 * it or in the next region when that is in the pool too.
 */
static void
random_range (struct rng *g, uint64_t *offset, uint64_t *count, unsigned *k0,
              unsigned *k1)
{
  unsigned k = rng_below (g, POOL);
  uint64_t r = pool_region (k);
  bool two =
    k + 1 < POOL && pool_region (k + 1) == r + 1 && rng_below (g, 3) == 0;
  uint64_t end;

  *offset = (r << SHIFT) + rng_below (g, REGION);
  end = two ? ((r + 1) << SHIFT) + rng_below (g, REGION)
            : *offset + rng_below (g, ((r + 1) << SHIFT) - *offset);
  *count = end - *offset + 1;
  *k0 = k;
  *k1 = two ? k + 1 : k;
}

static void
step_write (struct rng *g, struct model *m, bool fua)
{
  uint64_t offset, count;
  unsigned k0, k1;
  bool was;

  random_range (g, &offset, &count, &k0, &k1);
  was = alloc_mark (&map, offset, count);
  note (m, "%s %" PRIu64 "+%" PRIu64 "%s; ", fua ? "fua" : "write", offset,
        count, was ? " (durable)" : "");
  for (unsigned k = k0; k <= k1; ++k) {
    if (was && !on_some_member (pool_region (k)))
      fail_msg ("mark said durable, region %" PRIu64 " is on no member: %s",
                pool_region (k), m->trail);
    m->used[k] = true;
  }
  if (fua && !was && sync_all () == -1) {
    note (m, "(its sync failed); ");
    return; /* not acknowledged: nothing promised */
  }
  for (unsigned k = k0; k <= k1; ++k)
    if (fua)
      m->promised[k] = true;
    else
      m->pending[k] = true;
}

/* A trim or zero that completed: the whole regions inside read zeros. */
static void
step_trim (struct rng *g, struct model *m)
{
  uint64_t offset, count, cleared, want = 0;
  unsigned k0, k1;

  random_range (g, &offset, &count, &k0, &k1);
  if (rng_below (g, 2) == 0) { /* whole regions, often */
    offset &= ~(REGION - 1);
    count = ((uint64_t) (k1 - k0 + 1)) << SHIFT;
  }
  for (unsigned k = k0; k <= k1; ++k) {
    uint64_t r = pool_region (k);
    if (r << SHIFT >= offset && (r + 1) << SHIFT <= offset + count) {
      want += m->used[k];
      m->used[k] = m->pending[k] = m->promised[k] = false;
    }
  }
  cleared = alloc_clear (&map, offset, count);
  note (m, "trim %" PRIu64 "+%" PRIu64 "; ", offset, count);
  if (cleared != want)
    fail_msg ("clear freed %" PRIu64 " regions, expected %" PRIu64 ": %s",
              cleared, want, m->trail);
}

/* A flush; when it succeeds the blocks it wrote are exactly the map. */
static void
step_flush (struct model *m)
{
  bool was_dirty[2] = { dirty (0), dirty (1) };

  note (m, "flush");
  if (sync_all () == -1) {
    note (m, " (failed); ");
    return;
  }
  note (m, "; ");
  for (unsigned k = 0; k < POOL; ++k) {
    uint64_t r = pool_region (k);
    if (m->pending[k])
      m->promised[k] = true;
    m->pending[k] = false;
    for (unsigned i = 0; i < nr_members; ++i)
      if (was_dirty[r / ALLOC_BLOCK_BITS] && on_member (i, r) != m->used[k])
        fail_msg ("after a flush member %u has region %" PRIu64
                  " %s, the map %s: %s",
                  i, r, on_member (i, r) ? "in use" : "free",
                  m->used[k] ? "in use" : "free", m->trail);
  }
}

/* A member fault for the next writeouts to meet: a write of one block
 * or a sync, once.  Where it strikes a writeout stops half done, some
 * members holding the new block and some not, as a crash leaves them.
 */
static void
step_fault (struct rng *g, struct model *m)
{
  unsigned i = rng_below (g, nr_members);

  if (rng_below (g, 3) == 0) {
    mem_inject (dev_name (i), MEM_FLUSH, 0, 0, EIO, 1);
    note (m, "fault m%u sync; ", i);
  }
  else {
    uint64_t blk = rng_below (g, 2);
    mem_inject (dev_name (i), MEM_WRITE, MAP_OFFSET + blk * ALLOC_BLOCK,
                ALLOC_BLOCK, EIO, 1);
    note (m, "fault m%u block %" PRIu64 "; ", i, blk);
  }
}

/* What holds after every step, and what a crash there would load. */
static void
check_step (struct model *m, struct alloc *fresh)
{
  load_after_crash (fresh);
  for (unsigned k = 0; k < POOL; ++k) {
    uint64_t r = pool_region (k);
    if (in_use (r) != m->used[k])
      fail_msg ("region %" PRIu64 " %s, the model says %s: %s", r,
                in_use (r) ? "in use" : "free", m->used[k] ? "in use" : "free",
                m->trail);
    /* Durable: a crash loads it in use.  (Not "on every member": a
     * load makes what any copy holds durable.)
     */
    if (durable (r) && !(in_use (r) && alloc_test (fresh->bits, r)))
      fail_msg ("region %" PRIu64 " durable but %s: %s", r,
                in_use (r) ? "a crash loads it free" : "free", m->trail);
    if (m->promised[k] && !alloc_test (fresh->bits, r))
      fail_msg ("crash: region %" PRIu64 " holds an acknowledged write but "
                "loads as free: %s",
                r, m->trail);
  }
}

static void
history (uint64_t seed, struct alloc *fresh)
{
  struct rng g = { seed };
  struct model *m = calloc (1, sizeof *m);

  assert_non_null (m);
  m->seed = seed;
  /* Copies that disagree, as members that missed writeouts leave them:
   * whatever they hold may hold data.
   */
  for (unsigned k = 0; k < POOL; ++k)
    if (rng_below (&g, 4) == 0) {
      set_on_member (rng_below (&g, nr_members), pool_region (k));
      m->used[k] = m->promised[k] = true;
    }
  alloc_load_begin (&map);
  for (unsigned i = 0; i < nr_members; ++i)
    alloc_merge (&map, mem_data (dev_name (i), NULL) + MAP_OFFSET);
  alloc_loaded (&map);
  for (unsigned step = 0; step < STEPS; ++step) {
    unsigned what = rng_below (&g, 20);
    if (what < 8)
      step_write (&g, m, false);
    else if (what < 10)
      step_write (&g, m, true);
    else if (what < 14)
      step_trim (&g, m);
    else if (what < 19)
      step_flush (m);
    else
      step_fault (&g, m);
    check_step (m, fresh);
  }
  free (m);
}

static void
a_crash_anywhere_keeps_every_acknowledged_write_in_use (void **state)
{
  struct alloc fresh = { 0 };

  (void) state;
  open_volume (3, 2);
  for (uint64_t seed = 1; seed <= SEEDS; ++seed) {
    for (unsigned i = 0; i < nr_members; ++i) {
      mem_heal (dev_name (i));
      memset (mem_data (dev_name (i), NULL) + MAP_OFFSET, 0, map.map_bytes);
    }
    history (seed, &fresh);
  }
  alloc_free (&fresh);
}

/* Interleavings: a writer marking regions while a writeout is under way,
 * from inside the writeout's first write to a member (the lock held;
 * alloc_mark takes none).  The members' ops are wrapped to call it: a
 * writeout's writes go through the executor (start_op, or rw_now for a
 * lone one).
 */

static const struct member_ops *mem_ops;
static struct member_ops hooked_ops;
static uint64_t hook_offset; /* the write the hook does, count 1 */
static bool hook_armed, hook_durable;

static void
hook_fire (const struct member_op *op)
{
  if (hook_armed && op->kind == OP_WRITE) {
    hook_armed = false;
    hook_durable = alloc_mark (&map, hook_offset, 1);
  }
}

static void
hooked_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  mem_ops->start_op (m, x, op);
  hook_fire (op);
}

static bool
hooked_rw_now (struct member *m, struct member_op *op)
{
  bool r = mem_ops->rw_now (m, op);

  if (r)
    hook_fire (op);
  return r;
}

static void
hook_members (void)
{
  mem_ops = members[0].ops;
  hooked_ops = *mem_ops;
  hooked_ops.start_op = hooked_start_op;
  hooked_ops.rw_now = hooked_rw_now;
  for (unsigned i = 0; i < nr_members; ++i)
    members[i].ops = &hooked_ops;
}

static void
a_region_marked_during_a_writeout_is_not_durable_after_it (void **state)
{
  (void) state;
  open_volume (2, 1);
  hook_members ();
  alloc_mark (&map, 1 * REGION, 1);
  hook_offset = 2 * REGION; /* the same block, after its copy was taken */
  hook_armed = true;
  assert_int_equal (sync_all (), 0);
  assert_false (hook_armed);
  assert_false (hook_durable);
  assert_true (on_every_member (1));
  assert_true (durable (1));
  assert_false (on_member (0, 2) || on_member (1, 2));
  /* Not on the members: a FUA write there must write the map. */
  assert_false (durable (2));
  assert_false (alloc_mark (&map, 2 * REGION, 1));
}

static void
a_region_marked_during_a_writeout_is_written_by_the_next (void **state)
{
  (void) state;
  open_volume (2, 1);
  hook_members ();
  alloc_mark (&map, 1 * REGION, 1);
  hook_offset = 2 * REGION;
  hook_armed = true;
  assert_int_equal (sync_all (), 0);
  /* Its block is dirty again: the next flush writes it. */
  assert_true (dirty (0));
  assert_int_equal (sync_all (), 0);
  assert_true (on_every_member (2));
  assert_true (alloc_mark (&map, 2 * REGION, 1));
}

static void
a_region_marked_during_another_blocks_writeout_is_written (void **state)
{
  (void) state;
  open_volume (2, 2);
  hook_members ();
  alloc_mark (&map, 1 * REGION, 1);
  /* Block 1, not dirty when the writeout began (it is past block 0). */
  hook_offset = (ALLOC_BLOCK_BITS + 3) * REGION;
  hook_armed = true;
  assert_int_equal (sync_all (), 0);
  assert_false (hook_durable);
  if (on_every_member (ALLOC_BLOCK_BITS + 3))
    assert_true (durable (ALLOC_BLOCK_BITS + 3));
  else
    assert_true (dirty (1));
  assert_int_equal (sync_all (), 0);
  assert_true (on_every_member (ALLOC_BLOCK_BITS + 3));
}

/* Threads: writers marking fresh regions, each published as completed
 * once alloc_mark returns, against a flusher that checks, after each
 * alloc_sync, that every write completed before it began is on every
 * member.  A writeout landing between a mark's two steps (its region's
 * bit, its block's dirty bit), which the interleavings above cannot
 * reach, is met only by chance: the writers go round the blocks, one
 * region a block in turn and at a pace, so that a block is seldom
 * marked twice between two flushes (a second mark would hide a first
 * one lost).  Bounded in time, not deterministic.
 */

#define WRITERS 2
#define T_BLOCKS 64
#define T_MARKS (T_BLOCKS * ALLOC_BLOCK_BITS / WRITERS) /* a writer's */
#define T_SECONDS 2
#define T_PACE 300 /* spins between two marks */

static _Atomic uint64_t marks_done[WRITERS];
static _Atomic bool writers_stop;

/* Writer w's mark i: in block (i + w * T_BLOCKS / WRITERS) % T_BLOCKS
 * (the writers half the map apart), regions w, w + WRITERS...
 */
static uint64_t
t_region (unsigned w, uint64_t i)
{
  return (i + w * T_BLOCKS / WRITERS) % T_BLOCKS * ALLOC_BLOCK_BITS
         + i / T_BLOCKS * WRITERS + w;
}

static void *
writer (void *arg)
{
  const unsigned w = (uintptr_t) arg;

  for (uint64_t i = 0; i < T_MARKS && !atomic_load (&writers_stop); ++i) {
    alloc_mark (&map, t_region (w, i) << SHIFT, 1);
    atomic_store (&marks_done[w], i + 1);
    for (volatile unsigned k = 0; k < T_PACE; ++k)
      ;
  }
  return NULL;
}

static void
flushes_cover_the_writes_completed_before_them_under_threads (void **state)
{
  pthread_t t[WRITERS];
  uint64_t checked[WRITERS] = { 0 }, done[WRITERS];
  const uint8_t *copy[2];
  unsigned flushes = 0;
  time_t deadline = time (NULL) + T_SECONDS;
  bool last = false;

  (void) state;
  open_volume (2, T_BLOCKS);
  for (unsigned i = 0; i < 2; ++i)
    copy[i] = mem_data (dev_name (i), NULL) + MAP_OFFSET;
  atomic_store (&writers_stop, false);
  for (uintptr_t w = 0; w < WRITERS; ++w) {
    atomic_store (&marks_done[w], 0);
    assert_int_equal (pthread_create (&t[w], NULL, writer, (void *) w), 0);
  }
  while (!last) {
    bool finished = true;
    for (unsigned w = 0; w < WRITERS; ++w) {
      done[w] = atomic_load (&marks_done[w]);
      finished &= done[w] == T_MARKS;
    }
    last = finished || time (NULL) > deadline;
    if (last)
      atomic_store (&writers_stop, true);
    assert_int_equal (sync_all (), 0);
    ++flushes;
    /* Those completed before this flush: on every member now. */
    for (unsigned w = 0; w < WRITERS; ++w)
      for (; checked[w] < done[w]; ++checked[w]) {
        uint64_t r = t_region (w, checked[w]);
        if ((copy[0][r / 8] & copy[1][r / 8]) >> (r % 8) & 1)
          continue;
        atomic_store (&writers_stop, true);
        for (unsigned k = 0; k < WRITERS; ++k)
          pthread_join (t[k], NULL);
        fail_msg ("flush %u: region %" PRIu64 " was written before it "
                  "began, is not on every member after it",
                  flushes, r);
      }
  }
  for (unsigned w = 0; w < WRITERS; ++w)
    pthread_join (t[w], NULL);
  print_message ("%u flushes, %" PRIu64 " marks\n", flushes,
                 checked[0] + checked[1]);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (plan_gives_a_100_mib_volume_64_kib_regions),
    fixture_test (plan_gives_a_7_gib_volume_2_mib_regions),
    fixture_test (
      plan_picks_the_smallest_region_that_cuts_the_volume_into_4096),
    fixture_test (plan_never_goes_above_4_mib_regions_while_room_allows),
    fixture_test (plan_sizes_regions_by_the_volume_not_by_max_size),
    fixture_test (plan_map_is_the_whole_blocks_that_cover_max_size),
    fixture_test (plan_takes_all_the_room_when_it_cannot_cover_max_size),
    fixture_test (
      plan_coarsens_past_4_mib_only_when_room_cannot_hold_the_volume),
    fixture_test (plan_gives_no_map_without_room_for_one_block),
    fixture_test (init_calls_every_region_in_use_and_durable),
    fixture_test (load_ors_the_copies_and_writes_again_those_that_differ),
    fixture_test (mark_sets_every_region_the_write_touches_and_no_other),
    fixture_test (mark_says_durable_only_when_every_region_is_on_the_members),
    fixture_test (in_use_holds_only_for_a_read_inside_one_region_in_use),
    fixture_test (any_says_whether_some_and_whether_all_regions_are_in_use),
    fixture_test (run_ends_exactly_at_the_region_where_use_changes),
    fixture_test (regions_beyond_the_map_count_as_in_use),
    fixture_test (used_bytes_counts_a_last_partial_region_up_to_size),
    fixture_test (clear_frees_only_the_whole_regions_inside_the_range),
    fixture_test (clear_makes_the_next_write_there_mark_again),
    fixture_test (sync_writes_each_dirty_block_to_every_member_then_syncs),
    fixture_test (
      sync_writes_batches_of_64_blocks_each_synced_before_the_next),
    fixture_test (sync_leaves_out_the_members_in_skip),
    fixture_test (sync_failure_returns_the_errno_and_keeps_the_blocks_dirty),
    fixture_test (sync_failure_of_a_member_sync_keeps_the_blocks_dirty),
    fixture_test (write_copy_writes_the_whole_map_to_one_member_and_syncs),
    fixture_test (write_copy_failure_says_why),
    fixture_test (dirty_all_gives_a_joining_member_its_copy_at_the_next_sync),
    fixture_test (a_crash_anywhere_keeps_every_acknowledged_write_in_use),
    fixture_test (a_region_marked_during_a_writeout_is_not_durable_after_it),
    fixture_test (a_region_marked_during_a_writeout_is_written_by_the_next),
    fixture_test (a_region_marked_during_another_blocks_writeout_is_written),
    fixture_test (
      flushes_cover_the_writes_completed_before_them_under_threads),
  };

  return run_unit_tests ("alloc", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
