/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the arithmetic of a restripe
 * (plugin/layout/restripe.c), by moving whole volumes in memory.
 *
 * Members are byte arrays.  The data is placed with the layout oracle
 * (tests/lib/oracle.h, independent of layout.c), then moved window by
 * window as restripe_window says, the recorded position following the
 * rules the reshape job keeps: before a window in place, every position
 * below it is recorded; a journaled window is recorded as done once
 * written.  After every window: every position not yet moved must still
 * be intact where the old layout keeps it (else a crash now loses it),
 * and every position moved must be where the new layout keeps it.  Each
 * window is also "crashed" half-way (a random half of its blocks
 * written), then recovered the way the job does (in place: copy the
 * window again from the old layout; journaled: from the journal) --
 * which works only if the window's old bytes were not overwritten.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "oracle.h"
#include "restripe.h"
#include "unit_main.h"

#define KIB 1024ull
#define MIB (1024 * KIB)
#define BLK 4096u

struct sim {
  struct restripe rs;
  struct layout from, to;
  struct oracle ofrom, oto;
  uint8_t from_map[LAYOUT_MAX_MEMBERS], to_map[LAYOUT_MAX_MEMBERS];
  unsigned nr_union;
  uint64_t member_bytes[LAYOUT_MAX_MEMBERS];
  uint8_t *dev[LAYOUT_MAX_MEMBERS];
  uint8_t *orig; /* the volume's bytes as the old layout held them */
};

static uint8_t *
at (struct sim *s, const struct oracle *o, const uint8_t *map, uint64_t x)
{
  unsigned m;
  uint64_t mo;

  oracle_map (o, x, &m, &mo);
  return s->dev[map[m]] + mo;
}

static void
setup_sim (struct sim *s, uint64_t chunk, unsigned nf,
           const uint64_t *fsizes, const uint8_t *fmap, unsigned nt,
           const uint64_t *tsizes, const uint8_t *tmap, unsigned nr_union,
           bool backward)
{
  unsigned bad;

  memset (s, 0, sizeof *s);
  assert_int_equal (layout_init_as (&s->from, LAYOUT_MD_ALT, LAYOUT_SIZE_MD,
                                    chunk, nf, fsizes, &bad),
                    LAYOUT_OK);
  assert_int_equal (layout_init_as (&s->to, LAYOUT_MD_ALT, LAYOUT_SIZE_MD,
                                    chunk, nt, tsizes, &bad),
                    LAYOUT_OK);
  assert_int_equal (oracle_init (&s->ofrom, chunk, nf, fsizes), 0);
  assert_int_equal (oracle_init (&s->oto, chunk, nt, tsizes), 0);
  memcpy (s->from_map, fmap, nf);
  memcpy (s->to_map, tmap, nt);
  s->nr_union = nr_union;
  for (unsigned j = 0; j < nf; ++j)
    s->member_bytes[fmap[j]] = fsizes[j];
  for (unsigned j = 0; j < nt; ++j)
    if (tsizes[j] > s->member_bytes[tmap[j]])
      s->member_bytes[tmap[j]] = tsizes[j];
  for (unsigned u = 0; u < nr_union; ++u) {
    s->dev[u] = malloc (s->member_bytes[u]);
    assert_non_null (s->dev[u]);
    memset (s->dev[u], 0xee, s->member_bytes[u]);
  }
  restripe_init (&s->rs, &s->from, fmap, &s->to, tmap, nr_union, backward);
  s->orig = malloc (s->from.size);
  assert_non_null (s->orig);
  srandom (42);
  for (uint64_t x = 0; x < s->from.size; ++x)
    s->orig[x] = (uint8_t) random ();
  for (uint64_t x = 0; x < s->from.size; x += BLK)
    memcpy (at (s, &s->ofrom, s->from_map, x), s->orig + x, BLK);
}

static void
free_sim (struct sim *s)
{
  for (unsigned u = 0; u < s->nr_union; ++u)
    free (s->dev[u]);
  free (s->orig);
  oracle_free (&s->ofrom);
  oracle_free (&s->oto);
}

/* Positions [p, p + w) <-> logical bytes, block by block. */
static void
read_old (struct sim *s, uint64_t p, uint64_t w, uint8_t *buf)
{
  uint64_t lo, hi;

  restripe_logical (&s->rs, p, w, &lo, &hi);
  for (uint64_t x = lo; x < hi; x += BLK)
    memcpy (buf + (x - lo), at (s, &s->ofrom, s->from_map, x), BLK);
}

static void
write_new (struct sim *s, uint64_t p, uint64_t w, const uint8_t *buf,
           bool half)
{
  uint64_t lo, hi;

  restripe_logical (&s->rs, p, w, &lo, &hi);
  for (uint64_t x = lo; x < hi; x += BLK)
    if (!half || random () % 2)
      memcpy (at (s, &s->oto, s->to_map, x), buf + (x - lo), BLK);
}

/* Every position below done is in the new layout; every other one where
 * the old layout keeps it.
 */
static void
check_state (struct sim *s, uint64_t done)
{
  for (uint64_t p = 0; p < s->rs.size; p += BLK) {
    uint64_t lo, hi;
    restripe_logical (&s->rs, p, BLK, &lo, &hi);
    const uint8_t *got = p < done ? at (s, &s->oto, s->to_map, lo)
                                  : at (s, &s->ofrom, s->from_map, lo);
    if (memcmp (got, s->orig + lo, BLK) != 0)
      fail_msg ("position %llu (logical %llu), moved up to %llu: the %s "
                "layout's copy is not the data",
                (unsigned long long) p, (unsigned long long) lo,
                (unsigned long long) done, p < done ? "new" : "old");
  }
}

/* The whole move.  Returns how many windows went through the journal. */
static unsigned
move (struct sim *s, uint64_t max, uint64_t journal)
{
  uint8_t *buf = malloc (max), *again = malloc (max);
  uint64_t recorded = 0, w, bad, need;
  unsigned journaled = 0;

  assert_non_null (buf);
  assert_non_null (again);
  assert_true (restripe_feasible (&s->rs, max, journal, &bad, &need));
  assert_true (need <= journal);
  for (uint64_t p = 0; p < s->rs.size; p += w) {
    enum restripe_how how = restripe_window (&s->rs, p, max, journal, &w);

    assert_int_not_equal (how, RESTRIPE_CANNOT);
    assert_true (w > 0 && w <= max && p + w <= s->rs.size);
    read_old (s, p, w, buf);
    recorded = p; /* the checkpoint before the window */
    if (how == RESTRIPE_IN_PLACE)
      assert_true (restripe_clobber_end (&s->rs, p, w) <= recorded);
    else {
      assert_true (w <= journal);
      journaled++;
    }
    /* A crash half-way, and the recovery. */
    write_new (s, p, w, buf, true);
    if (how == RESTRIPE_IN_PLACE) {
      read_old (s, p, w, again);
      assert_memory_equal (again, buf, w);
      write_new (s, p, w, again, false);
    }
    else
      write_new (s, p, w, buf, false); /* replayed from the journal */
    check_state (s, p + w);
  }
  (void) recorded;
  free (buf);
  free (again);
  return journaled;
}

static const uint8_t ident[LAYOUT_MAX_MEMBERS] = {
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
};

static void
grow_by_one_member_moves_every_byte_crash_safely (void **state)
{
  (void) state;
  for (unsigned n = 1; n <= 4; ++n) {
    uint64_t f[8], t[8];
    struct sim s;
    for (unsigned i = 0; i <= n; ++i)
      f[i] = t[i] = 2 * MIB;
    setup_sim (&s, 64 * KIB, n, f, ident, n + 1, t, ident, n + 1, false);
    assert_true (move (&s, 256 * KIB, 128 * KIB) > 0); /* a critical section */
    free_sim (&s);
  }
}

static void
grow_by_two_members_of_other_sizes_moves_every_byte (void **state)
{
  const uint64_t f[] = { 2 * MIB, 3 * MIB };
  const uint64_t t[] = { 2 * MIB, 3 * MIB, 1 * MIB, 2 * MIB + 512 * KIB };
  struct sim s;

  (void) state;
  setup_sim (&s, 128 * KIB, 2, f, ident, 4, t, ident, 4, false);
  move (&s, 512 * KIB, 256 * KIB);
  free_sim (&s);
}

static void
shrink_each_member_out_moves_every_byte_crash_safely (void **state)
{
  (void) state;
  for (unsigned gone = 0; gone < 3; ++gone) {
    const uint64_t f[] = { 2 * MIB, 2 * MIB, 2 * MIB };
    uint64_t t[2] = { 2 * MIB, 2 * MIB };
    uint8_t tmap[2];
    struct sim s;
    for (unsigned j = 0, k = 0; j < 3; ++j)
      if (j != gone)
        tmap[k++] = j;
    setup_sim (&s, 64 * KIB, 3, f, ident, 2, t, tmap, 3, true);
    /* Without member 0 every chunk moves to where a later one was: no
     * critical section.  Otherwise the first chunks stay or move onto
     * themselves: through the journal.
     */
    if (gone == 0)
      assert_int_equal (move (&s, 256 * KIB, 128 * KIB), 0);
    else
      assert_true (move (&s, 256 * KIB, 128 * KIB) > 0);
    free_sim (&s);
  }
}

static void
shrink_mixed_sizes_with_an_odd_chunk_moves_every_byte (void **state)
{
  const uint64_t f[] = { 3 * MIB, 2 * MIB, 2 * MIB + 256 * KIB, 1 * MIB };
  const uint64_t t[] = { 3 * MIB, 2 * MIB + 256 * KIB, 1 * MIB };
  const uint8_t tmap[] = { 0, 2, 3 };
  struct sim s;

  (void) state;
  setup_sim (&s, 192 * KIB, 4, f, ident, 3, t, tmap, 4, true);
  move (&s, 384 * KIB, 192 * KIB);
  free_sim (&s);
}

static void
bigger_members_move_nothing_when_the_zones_stay (void **state)
{
  const uint64_t f[] = { 2 * MIB, 2 * MIB, 2 * MIB };
  const uint64_t t[] = { 4 * MIB, 4 * MIB, 4 * MIB };
  struct sim s;

  (void) state;
  setup_sim (&s, 64 * KIB, 3, f, ident, 3, t, ident, 3, false);
  assert_true (restripe_nothing_moves (&s.rs));
  /* Nothing to copy: every position is where the new layout wants it. */
  check_state (&s, s.rs.size);
  free_sim (&s);
}

static void
bigger_members_of_other_sizes_move_with_their_zones (void **state)
{
  const uint64_t f[] = { 2 * MIB, 1 * MIB };
  const uint64_t t[] = { 3 * MIB, 3 * MIB };
  struct sim s;

  (void) state;
  setup_sim (&s, 64 * KIB, 2, f, ident, 2, t, ident, 2, false);
  assert_false (restripe_nothing_moves (&s.rs));
  move (&s, 256 * KIB, 128 * KIB);
  free_sim (&s);
}

static void
grow_without_room_for_a_journal_is_not_feasible (void **state)
{
  const uint64_t f[] = { 2 * MIB, 2 * MIB };
  const uint64_t t[] = { 2 * MIB, 2 * MIB, 2 * MIB };
  uint64_t bad = 1, need;
  struct sim s;

  (void) state;
  setup_sim (&s, 64 * KIB, 2, f, ident, 3, t, ident, 3, false);
  assert_false (restripe_feasible (&s.rs, 256 * KIB, 0, &bad, &need));
  assert_int_equal (bad, 0);
  free_sim (&s);
}

static void
shrink_run_forward_is_not_feasible (void **state)
{
  const uint64_t f[] = { 2 * MIB, 2 * MIB, 2 * MIB };
  const uint64_t t[] = { 2 * MIB, 2 * MIB };
  uint64_t bad, need;
  struct sim s;

  (void) state;
  setup_sim (&s, 64 * KIB, 3, f, ident, 2, t, ident, 3, false);
  assert_false (restripe_feasible (&s.rs, 256 * KIB, 128 * KIB, &bad, &need));
  free_sim (&s);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (grow_by_one_member_moves_every_byte_crash_safely),
    cmocka_unit_test (grow_by_two_members_of_other_sizes_moves_every_byte),
    cmocka_unit_test (shrink_each_member_out_moves_every_byte_crash_safely),
    cmocka_unit_test (shrink_mixed_sizes_with_an_odd_chunk_moves_every_byte),
    cmocka_unit_test (bigger_members_move_nothing_when_the_zones_stay),
    cmocka_unit_test (bigger_members_of_other_sizes_move_with_their_zones),
    cmocka_unit_test (grow_without_room_for_a_journal_is_not_feasible),
    cmocka_unit_test (shrink_run_forward_is_not_feasible),
  };

  return run_unit_tests ("restripe", tests, sizeof tests / sizeof tests[0],
                         argc, argv);
}
