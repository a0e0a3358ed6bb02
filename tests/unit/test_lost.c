/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the lost-range list's arithmetic
 * (plugin/meta/lost.c, include/lost.h).
 *
 * The named cases say what a caller relies on; the last one checks the
 * list against a model kept apart from the code: a map of sectors, lost
 * or not, after random sequences of adds and removes -- every sector the
 * model calls lost is lost in the list (never fewer: a read there must
 * fail), and, while the list has room, exactly those; the list is always
 * sorted, apart, of whole sectors, at most LOST_MAX ranges.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lost.h"
#include "unit_main.h"

#define S 512u

static void
lost_ranges_are_sectors_merged_when_they_touch_or_overlap (void **state)
{
  struct lost l = { 0 };

  (void) state;
  assert_true (lost_add (&l, 1000, 10, NULL)); /* inside sector 1 */
  assert_int_equal (l.nr, 1);
  assert_int_equal (l.r[0].offset, 512);
  assert_int_equal (l.r[0].length, 512);
  assert_true (lost_add (&l, 4096, 4096, NULL));
  assert_int_equal (l.nr, 2);
  /* Touching the first on its right: one range. */
  assert_true (lost_add (&l, 1024, 512, NULL));
  assert_int_equal (l.nr, 2);
  assert_int_equal (l.r[0].length, 1024);
  /* Bridging both. */
  assert_true (lost_add (&l, 1536, 2560, NULL));
  assert_int_equal (l.nr, 1);
  assert_int_equal (l.r[0].offset, 512);
  assert_int_equal (l.r[0].length, 8192 - 512);
  /* Already lost: no change. */
  assert_false (lost_add (&l, 2048, 512, NULL));
}

static void
lost_write_over_part_of_a_range_leaves_the_rest_lost (void **state)
{
  struct lost l = { 0 };

  (void) state;
  lost_add (&l, 0, 16 * S, NULL);
  /* The middle: two ranges. */
  assert_true (lost_remove (&l, 4 * S, 4 * S));
  assert_int_equal (l.nr, 2);
  assert_true (lost_touches (&l, 3 * S, S));
  assert_false (lost_touches (&l, 4 * S, 4 * S));
  assert_true (lost_touches (&l, 8 * S, S));
  /* A partial sector written leaves the sector lost. */
  assert_false (lost_remove (&l, 8 * S + 1, S - 1));
  assert_true (lost_touches (&l, 8 * S, S));
  /* Everything. */
  assert_true (lost_remove (&l, 0, 16 * S));
  assert_int_equal (l.nr, 0);
  assert_int_equal (lost_bytes (&l), 0);
}

static void
lost_list_full_merges_the_closest_and_says_so (void **state)
{
  struct lost l = { 0 };
  bool merged;

  (void) state;
  for (unsigned i = 0; i < LOST_MAX; ++i)
    assert_true (lost_add (&l, (uint64_t) i * 100 * S, S, &merged));
  assert_false (merged);
  /* Ranges 99 sectors apart, but the first two 9 apart: one more, in
   * another gap, makes those two one, the gap between them included.
   */
  lost_remove (&l, 100 * S, S);
  assert_true (lost_add (&l, 10 * S, S, &merged));
  assert_false (merged);
  assert_true (lost_add (&l, 150 * S, S, &merged));
  assert_true (merged);
  assert_int_equal (l.nr, LOST_MAX);
  assert_int_equal (l.r[0].offset, 0);
  assert_int_equal (l.r[0].length, 11 * S);
  assert_true (lost_touches (&l, 5 * S, S)); /* the gap is lost too */
  assert_true (lost_touches (&l, 150 * S, S));
  assert_false (lost_touches (&l, 151 * S, 49 * S));
}

static void
lost_truncate_drops_what_lies_past_the_end (void **state)
{
  struct lost l = { 0 };

  (void) state;
  lost_add (&l, 0, S, NULL);
  lost_add (&l, 10 * S, 10 * S, NULL);
  lost_add (&l, 40 * S, S, NULL);
  assert_true (lost_truncate (&l, 15 * S));
  assert_int_equal (l.nr, 2);
  assert_int_equal (l.r[1].offset + l.r[1].length, 15 * S);
  assert_false (lost_truncate (&l, 15 * S));
}

static void
lost_format_writes_offset_plus_length_and_cuts (void **state)
{
  struct lost l = { 0 };
  char buf[32];

  (void) state;
  lost_add (&l, 0, S, NULL);
  lost_add (&l, 4096, 4096, NULL);
  lost_format (&l, buf, sizeof buf);
  assert_string_equal (buf, "0+512, 4096+4096");
  for (unsigned i = 0; i < 10; ++i)
    lost_add (&l, 1048576 * (i + 1), S, NULL);
  lost_format (&l, buf, sizeof buf);
  assert_non_null (strstr (buf, ", ..."));
  assert_true (strlen (buf) < sizeof buf);
}

/* ---- against a model ---- */

#define SECTORS 4096u

static bool
well_formed (const struct lost *l)
{
  if (l->nr > LOST_MAX)
    return false;
  for (unsigned i = 0; i < l->nr; ++i) {
    if (l->r[i].length == 0 || l->r[i].offset % S || l->r[i].length % S)
      return false;
    if (i > 0 && l->r[i].offset <= l->r[i - 1].offset + l->r[i - 1].length)
      return false;
  }
  return true;
}

static void
lost_list_agrees_with_a_sector_map_under_random_adds_and_removes (
  void **state)
{
  static bool model[SECTORS];
  unsigned seed = 12345, runs = 0;

  (void) state;
  for (unsigned round = 0; round < 200; ++round) {
    struct lost l = { 0 };
    bool ever_merged = false;

    memset (model, 0, sizeof model);
    for (unsigned step = 0; step < 400; ++step, ++runs) {
      uint64_t a = rand_r (&seed) % (SECTORS * S);
      uint64_t n = 1 + rand_r (&seed) % (64 * S);
      bool merged = false;

      if (a + n > SECTORS * S)
        n = SECTORS * S - a;
      if (rand_r (&seed) % 3) {
        lost_add (&l, a, n, &merged);
        ever_merged |= merged;
        for (uint64_t s = a / S; s * S < a + n; ++s)
          model[s] = true;
      }
      else {
        lost_remove (&l, a, n);
        for (uint64_t s = (a + S - 1) / S; (s + 1) * S <= a + n; ++s)
          model[s] = false;
      }
      assert_true (well_formed (&l));
      /* Every sector every 16th step, after a merge and at a round's
       * end; else those the step touched and 64 around them, where a
       * merge or a split would go wrong (a whole check every step took
       * 154 s of the sanitizer build's unit tests).
       */
      unsigned lo = 0, hi = SECTORS;
      /* A merge across a gap (a full list) touches ranges far away. */
      if (step % 16 != 15 && step != 399 && !merged) {
        lo = a / S > 64 ? (unsigned) (a / S) - 64 : 0;
        hi = (a + n) / S + 65 < SECTORS ? (unsigned) ((a + n) / S) + 65
                                        : SECTORS;
      }
      for (unsigned s = lo; s < hi; ++s) {
        bool in = lost_touches (&l, (uint64_t) s * S, S);
        if (model[s] && !in)
          fail_msg ("round %u step %u: sector %u lost, not in the list",
                    round, step, s);
        /* Merged across a gap, the list may hold more, never less. */
        if (!ever_merged && !model[s] && in)
          fail_msg ("round %u step %u: sector %u in the list, not lost",
                    round, step, s);
      }
    }
  }
  fprintf (stderr, "%u steps checked\n", runs);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (
      lost_ranges_are_sectors_merged_when_they_touch_or_overlap),
    cmocka_unit_test (lost_write_over_part_of_a_range_leaves_the_rest_lost),
    cmocka_unit_test (lost_list_full_merges_the_closest_and_says_so),
    cmocka_unit_test (lost_truncate_drops_what_lies_past_the_end),
    cmocka_unit_test (lost_format_writes_offset_plus_length_and_cuts),
    cmocka_unit_test (
      lost_list_agrees_with_a_sector_map_under_random_adds_and_removes),
  };

  return run_unit_tests ("lost", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
