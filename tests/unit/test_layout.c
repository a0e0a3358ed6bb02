/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the RAID-0 layout (plugin/layout/layout.c) against a
 * brute-force md raid0 oracle (tests/lib/oracle.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "layout_cases.h"

#define KiB UINT64_C (1024)

/* Build both the layout and the oracle for a case; fails the test if
 * layout_init refuses or disagrees with the oracle on sizes.
 */
static void
setup_case (const struct tcase *tc, struct layout *l, struct oracle *o)
{
  unsigned bad = 12345;
  enum layout_error err = layout_init_as (l, case_layout (tc), LAYOUT_SIZE_MD,
                                          tc->chunk, tc->n, tc->sizes, &bad);

  CHECK (err == LAYOUT_OK, "%s: layout_init failed: %s", describe_case (tc),
         layout_strerror (err));
  CHECK (oracle_init_as (o, case_layout (tc), tc->chunk, tc->n, tc->sizes)
           == 0,
         "%s: the oracle refused it", describe_case (tc));
  CHECK (l->size == o->size, "%s: size %llu, expected %llu",
         describe_case (tc), (ull) l->size, (ull) o->size);
}

/* layout_map of [x, x + count) must give the oracle's member and member
 * offset, and stop at the chunk boundary or at the end of the request.
 */
static void
check_map_one (const struct tcase *tc, const struct layout *l,
               const struct oracle *o, uint64_t x, uint64_t count)
{
  struct layout_piece p;
  unsigned m;
  uint64_t mo, want_len = o->chunk - x % o->chunk;

  if (want_len > count)
    want_len = count;
  oracle_map (o, x, &m, &mo);
  memset (&p, 0xa5, sizeof p);
  layout_map (l, x, count, &p);
  CHECK (p.offset == x && p.length == want_len && p.member == m
           && p.member_offset == mo,
         "%s: layout_map(offset %llu, count %llu) gave offset %llu "
         "length %llu member %u member_offset %llu; expected length %llu "
         "member %u member_offset %llu",
         describe_case (tc), (ull) x, (ull) count, (ull) p.offset,
         (ull) p.length, p.member, (ull) p.member_offset, (ull) want_len, m,
         (ull) mo);
}

/* Every step-aligned offset of the volume, with requests that run to the
 * end of the volume (crossing chunk, stripe and zone boundaries), that end
 * exactly at the chunk boundary, of one byte, and of a random length.
 */
static void
check_map_all (const struct tcase *tc, const struct layout *l,
               const struct oracle *o, uint64_t step, struct rng *r)
{
  for (uint64_t x = 0; x < o->size; x += step) {
    uint64_t left = o->size - x, to_chunk_end = o->chunk - x % o->chunk;

    check_map_one (tc, l, o, x, left);
    check_map_one (tc, l, o, x, 1);
    check_map_one (tc, l, o, x, to_chunk_end);
    if (to_chunk_end > 1)
      check_map_one (tc, l, o, x, to_chunk_end - 1);
    check_map_one (tc, l, o, x, rng_range (r, 1, left));
  }
  /* and the very last byte */
  check_map_one (tc, l, o, o->size - 1, 1);
}

static void check_iter (const struct tcase *tc, const struct layout *l,
                        const struct oracle *o, uint64_t offset,
                        uint64_t count);
static void check_spans (const struct tcase *tc, const struct layout *l,
                         const struct oracle *o, uint64_t offset,
                         uint64_t count);

/* ---- layout_init ---- */

static void
layout_init_rejects_no_members (void **state)
{
  struct layout l;
  uint64_t sizes[1] = { 1 << 20 };
  unsigned bad = 99;

  (void) state;
  assert_int_equal (layout_init (&l, 4096, 0, sizes, &bad),
                    LAYOUT_ERR_NO_MEMBERS);
  assert_int_equal (layout_init (&l, 4096, 0, NULL, NULL),
                    LAYOUT_ERR_NO_MEMBERS);
}

static void
layout_init_rejects_more_than_64_members (void **state)
{
  struct layout l;
  uint64_t sizes[LAYOUT_MAX_MEMBERS + 2];

  (void) state;
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS + 2; ++i)
    sizes[i] = 64 * KiB;
  assert_int_equal (
    layout_init (&l, 4096, LAYOUT_MAX_MEMBERS + 1, sizes, NULL),
    LAYOUT_ERR_TOO_MANY_MEMBERS);
  assert_int_equal (
    layout_init (&l, 4096, LAYOUT_MAX_MEMBERS + 2, sizes, NULL),
    LAYOUT_ERR_TOO_MANY_MEMBERS);
  assert_int_equal (layout_init (&l, 4096, UINT32_MAX, sizes, NULL),
                    LAYOUT_ERR_TOO_MANY_MEMBERS);
  /* exactly 64 is fine */
  assert_int_equal (layout_init (&l, 4096, LAYOUT_MAX_MEMBERS, sizes, NULL),
                    LAYOUT_OK);
  assert_int_equal (l.nr_members, LAYOUT_MAX_MEMBERS);
  assert_int_equal (l.size, LAYOUT_MAX_MEMBERS * 64 * KiB);
}

static void
layout_init_rejects_chunk_not_a_multiple_of_4k (void **state)
{
  static const uint64_t bad_chunks[] = {
    0,
    1,
    512,
    1024,
    2048,
    4095,
    4097,
    6000,
    8191,
    8192 + 512,
    12289,
    65536 + 1,
    UINT64_C (1) << 63 | 1,
  };
  static const uint64_t good_chunks[] = {
    4096, 8192, 12288, 20480, 24576, 65536, 131072, 1 << 20,
  };
  uint64_t sizes[3] = { 1 << 24, 1 << 24, 1 << 24 };
  struct layout l;

  (void) state;
  for (size_t i = 0; i < sizeof bad_chunks / sizeof bad_chunks[0]; ++i) {
    unsigned bad = 99;
    enum layout_error err = layout_init (&l, bad_chunks[i], 3, sizes, &bad);
    CHECK (err == LAYOUT_ERR_CHUNK, "chunk %llu: got error %d (%s)",
           (ull) bad_chunks[i], err, layout_strerror (err));
  }
  for (size_t i = 0; i < sizeof good_chunks / sizeof good_chunks[0]; ++i) {
    enum layout_error err = layout_init (&l, good_chunks[i], 3, sizes, NULL);
    CHECK (err == LAYOUT_OK, "chunk %llu: got error %d (%s)",
           (ull) good_chunks[i], err, layout_strerror (err));
    assert_int_equal (l.chunk, good_chunks[i]);
    assert_int_equal (l.id, LAYOUT_MD_ALT);
  }
}

static void
layout_init_names_the_member_smaller_than_one_chunk (void **state)
{
  const uint64_t chunk = 12288;
  struct layout l;
  unsigned bad;

  (void) state;
  {
    uint64_t sizes[] = { chunk, chunk - 1, 0, 10 * chunk };
    bad = 99;
    assert_int_equal (layout_init (&l, chunk, 4, sizes, &bad),
                      LAYOUT_ERR_MEMBER_TOO_SMALL);
    assert_int_equal (bad, 1);
  }
  {
    uint64_t sizes[] = { 0, 10 * chunk };
    bad = 99;
    assert_int_equal (layout_init (&l, chunk, 2, sizes, &bad),
                      LAYOUT_ERR_MEMBER_TOO_SMALL);
    assert_int_equal (bad, 0);
  }
  {
    uint64_t sizes[8];
    for (unsigned i = 0; i < 8; ++i)
      sizes[i] = 3 * chunk + 1;
    sizes[7] = 4096; /* a multiple of 4 KiB, but < one chunk */
    bad = 99;
    assert_int_equal (layout_init (&l, chunk, 8, sizes, &bad),
                      LAYOUT_ERR_MEMBER_TOO_SMALL);
    assert_int_equal (bad, 7);
    /* bad_member may be NULL */
    assert_int_equal (layout_init (&l, chunk, 8, sizes, NULL),
                      LAYOUT_ERR_MEMBER_TOO_SMALL);
    /* exactly one chunk is enough */
    sizes[7] = chunk;
    assert_int_equal (layout_init (&l, chunk, 8, sizes, &bad), LAYOUT_OK);
    assert_int_equal (l.member_size[7], chunk);
    assert_int_equal (l.size, 7 * md_counted (3 * chunk, chunk)
                                + md_counted (chunk, chunk));
  }
  {
    /* 64 members, the last one too small */
    uint64_t sizes[LAYOUT_MAX_MEMBERS];
    for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
      sizes[i] = chunk * (1 + i % 3);
    sizes[LAYOUT_MAX_MEMBERS - 1] = chunk - 4096;
    bad = 99;
    assert_int_equal (layout_init (&l, chunk, LAYOUT_MAX_MEMBERS, sizes, &bad),
                      LAYOUT_ERR_MEMBER_TOO_SMALL);
    assert_int_equal (bad, LAYOUT_MAX_MEMBERS - 1);
  }
}

static void
layout_init_rejects_volume_size_overflow (void **state)
{
  struct layout l;
  const uint64_t top = UINT64_C (1) << 63;

  (void) state;
  {
    uint64_t sizes[] = { UINT64_MAX, UINT64_MAX };
    assert_int_equal (layout_init (&l, 4096, 2, sizes, NULL),
                      LAYOUT_ERR_TOO_BIG);
  }
  {
    /* zone 0: 3 x 4096, zone 1: 2 x (2^63 - 8192), zone 2: 4096 => 2^64 */
    uint64_t sizes[] = { top, top - 4096, 4096 };
    assert_int_equal (layout_init (&l, 4096, 3, sizes, NULL),
                      LAYOUT_ERR_TOO_BIG);
  }
  {
    uint64_t sizes[] = { top, top };
    assert_int_equal (layout_init (&l, 4096, 2, sizes, NULL),
                      LAYOUT_ERR_TOO_BIG);
  }
  {
    /* 2^64 - 4096 fits */
    uint64_t sizes[] = { top, top - 4096 };
    assert_int_equal (layout_init (&l, 4096, 2, sizes, NULL), LAYOUT_OK);
    assert_int_equal (l.size, UINT64_MAX - 4095);
  }
  {
    uint64_t sizes[] = { UINT64_MAX };
    assert_int_equal (layout_init (&l, 4096, 1, sizes, NULL), LAYOUT_OK);
    assert_int_equal (l.size, UINT64_MAX - 4095);
    assert_int_equal (l.member_size[0], UINT64_MAX - 4095);
  }
}

static void
layout_strerror_describes_every_error (void **state)
{
  static const enum layout_error errs[] = {
    LAYOUT_OK,        LAYOUT_ERR_NO_MEMBERS,       LAYOUT_ERR_TOO_MANY_MEMBERS,
    LAYOUT_ERR_CHUNK, LAYOUT_ERR_MEMBER_TOO_SMALL, LAYOUT_ERR_TOO_BIG,
  };
  const size_t nerrs = sizeof errs / sizeof errs[0];

  (void) state;
  for (size_t i = 0; i < nerrs; ++i) {
    const char *s = layout_strerror (errs[i]);
    assert_non_null (s);
    assert_true (strlen (s) > 0);
    for (size_t j = 0; j < i; ++j)
      assert_string_not_equal (s, layout_strerror (errs[j]));
  }
  assert_non_null (layout_strerror ((enum layout_error) 1000));
}

/* ---- sizes and zones ---- */

static void
layout_rounds_members_down_to_whole_chunks (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    const struct tcase *tc = &tcs[c];
    struct layout l;
    uint64_t sum = 0;

    assert_int_equal (layout_init (&l, tc->chunk, tc->n, tc->sizes, NULL),
                      LAYOUT_OK);
    assert_int_equal (l.id, LAYOUT_MD_ALT);
    assert_int_equal (l.chunk, tc->chunk);
    assert_int_equal (l.nr_members, tc->n);
    for (unsigned i = 0; i < tc->n; ++i) {
      uint64_t want = tc->sizes[i] - tc->sizes[i] % tc->chunk;
      CHECK (l.member_size[i] == want,
             "%s: member %u usable %llu, expected %llu", describe_case (tc), i,
             (ull) l.member_size[i], (ull) want);
      sum += md_counted (want, tc->chunk);
    }
    CHECK (l.size == sum, "%s: size %llu, expected %llu", describe_case (tc),
           (ull) l.size, (ull) sum);
  }
  free (tcs);
}

/* The zone table is public: check it is the md create_strip_zones one --
 * zones partition the volume, each starts (on the members) where the
 * previous ended, and stripes over exactly the members that still have
 * room, in index order.
 */
static void
layout_zones_follow_md_create_strip_zones (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    const struct tcase *tc = &tcs[c];
    struct layout l;
    uint64_t logical = 0, dev = 0;
    unsigned distinct = 0;

    assert_int_equal (layout_init (&l, tc->chunk, tc->n, tc->sizes, NULL),
                      LAYOUT_OK);
    for (unsigned i = 0; i < tc->n; ++i) {
      bool seen = false;
      for (unsigned j = 0; j < i; ++j)
        seen |= l.member_size[j] == l.member_size[i];
      distinct += !seen;
    }
    CHECK (l.nr_zones == distinct, "%s: %u zones, expected %u",
           describe_case (tc), l.nr_zones, distinct);
    for (unsigned zi = 0; zi < l.nr_zones; ++zi) {
      const struct layout_zone *z = &l.zones[zi];
      unsigned nd = 0;
      uint64_t next = UINT64_MAX;

      CHECK (z->start == logical && z->dev_start == dev,
             "%s: zone %u starts at %llu/%llu, expected %llu/%llu",
             describe_case (tc), zi, (ull) z->start, (ull) z->dev_start,
             (ull) logical, (ull) dev);
      for (unsigned i = 0; i < tc->n; ++i) {
        if (l.member_size[i] > dev) {
          CHECK (nd < z->nr_devs && z->devs[nd] == i,
                 "%s: zone %u should contain member %u", describe_case (tc),
                 zi, i);
          nd++;
          if (l.member_size[i] < next)
            next = l.member_size[i];
        }
      }
      CHECK (nd == z->nr_devs, "%s: zone %u has %u members, expected %u",
             describe_case (tc), zi, z->nr_devs, nd);
      CHECK (z->end - z->start == (next - dev) * nd,
             "%s: zone %u is %llu bytes, expected %llu", describe_case (tc),
             zi, (ull) (z->end - z->start), (ull) ((next - dev) * nd));
      logical = z->end;
      dev = next;
    }
    /* the zones hold every rounded member; md's size rule may end the
     * volume before their end, never after
     */
    uint64_t sum = 0;
    for (unsigned i = 0; i < tc->n; ++i)
      sum += tc->sizes[i] / tc->chunk * tc->chunk;
    CHECK (logical == sum && l.size <= logical,
           "%s: zones end at %llu (members hold %llu), size %llu",
           describe_case (tc), (ull) logical, (ull) sum, (ull) l.size);
  }
  free (tcs);
}

/* md's two layouts, worked out by hand (members A, B, C, D; "B1" = member
 * B's chunk 1), from the mapping md's raid0.c describes:
 *   members 3, 3, 1 chunks: zone 1 = volume chunks 3-6 over A, B; it
 *   starts at chunk 3, odd, so the original layout swaps them:
 *     alternate  A0 B0 C0 A1 B1 A2 B2
 *     original   A0 B0 C0 B1 A1 B2 A2
 *   members 4, 4, 4, 2: zone 1 = chunks 8-13 over A, B, C, rotated by
 *   8 mod 3 = 2:
 *     alternate  ... A2 B2 C2 A3 B3 C3
 *     original   ... C2 A2 B2 C3 A3 B3
 *   members 4, 4, 2: zone 1 = chunks 6-9 over A, B, 6 mod 2 = 0: alike.
 */
static void
layout_md_original_and_alternate_match_hand_tables (void **state)
{
  static const struct {
    unsigned n, chunks[4];
    const char *alt, *orig; /* member letter, member chunk: per volume chunk */
  } t[] = {
    { 3, { 3, 3, 1 }, "A0B0C0A1B1A2B2", "A0B0C0B1A1B2A2" },
    { 4, { 4, 4, 4, 2 }, "A0B0C0D0A1B1C1D1A2B2C2A3B3C3",
      "A0B0C0D0A1B1C1D1C2A2B2C3A3B3" },
    { 3, { 4, 4, 2 }, "A0B0C0A1B1C1A2B2A3B3", "A0B0C0A1B1C1A2B2A3B3" },
  };
  const uint64_t chunk = 8192;

  (void) state;
  for (size_t c = 0; c < sizeof t / sizeof t[0]; ++c) {
    uint64_t sizes[4];
    for (unsigned i = 0; i < t[c].n; ++i)
      sizes[i] = t[c].chunks[i] * chunk;
    for (unsigned id = LAYOUT_MD_ORIG; id <= LAYOUT_MD_ALT; ++id) {
      const char *want = id == LAYOUT_MD_ORIG ? t[c].orig : t[c].alt;
      struct layout l;
      struct oracle o;

      assert_int_equal (layout_init_as (&l, id, LAYOUT_SIZE_MD, chunk,
                                        t[c].n, sizes, NULL),
                        LAYOUT_OK);
      assert_int_equal (oracle_init_as (&o, id, chunk, t[c].n, sizes), 0);
      assert_int_equal (l.size, strlen (want) / 2 * chunk);
      for (size_t k = 0; k < strlen (want) / 2; ++k) {
        struct layout_piece p;
        unsigned m;
        uint64_t mo, back;

        layout_map (&l, k * chunk + 512, chunk - 512, &p);
        CHECK (p.member == (unsigned) (want[2 * k] - 'A')
                 && p.member_offset
                      == (uint64_t) (want[2 * k + 1] - '0') * chunk + 512,
               "case %zu layout %u: chunk %zu on member %u at %llu, "
               "expected %c%c", c, id, k, p.member, (ull) p.member_offset,
               want[2 * k], want[2 * k + 1]);
        oracle_map (&o, k * chunk + 512, &m, &mo);
        CHECK (m == p.member && mo == p.member_offset,
               "case %zu layout %u: the oracle puts chunk %zu on %u at %llu",
               c, id, k, m, (ull) mo);
        CHECK (layout_unmap (&l, p.member, p.member_offset, &back)
                 && back == k * chunk + 512,
               "case %zu layout %u: unmap of chunk %zu", c, id, k);
      }
      oracle_free (&o);
    }
    assert_int_equal (layout_md_layouts_agree (chunk, t[c].n, sizes),
                      strcmp (t[c].alt, t[c].orig) == 0);
  }
  /* two members: zone 1 has one member, so always alike */
  {
    const uint64_t sizes[] = { 7 * chunk, 2 * chunk };
    assert_true (layout_md_layouts_agree (chunk, 2, sizes));
  }
}

/* Unknown layout numbers are refused, by number and by name. */
static void
layout_refuses_unknown_layout_numbers (void **state)
{
  const uint64_t sizes[] = { 65536, 65536 };
  struct layout l;

  (void) state;
  assert_int_equal (layout_init_as (&l, 0, LAYOUT_SIZE_MD, 4096, 2, sizes,
                                    NULL),
                    LAYOUT_ERR_ID);
  assert_int_equal (layout_init_as (&l, 3, LAYOUT_SIZE_MD, 4096, 2, sizes,
                                    NULL),
                    LAYOUT_ERR_ID);
  assert_int_equal (layout_parse_name ("original"), LAYOUT_MD_ORIG);
  assert_int_equal (layout_parse_name ("alternate"), LAYOUT_MD_ALT);
  assert_int_equal (layout_parse_name ("1"), LAYOUT_MD_ORIG);
  assert_int_equal (layout_parse_name ("2"), LAYOUT_MD_ALT);
  assert_int_equal (layout_parse_name ("dangerous"), 0);
  assert_string_equal (layout_name (LAYOUT_MD_ORIG), "original");
  assert_string_equal (layout_name (LAYOUT_MD_ALT), "alternate");
  assert_null (layout_name (0));
  /* the zones' size rule of version-1 headers: all the zones */
  {
    const uint64_t s3[] = { 3 * 12288, 12288, 2 * 12288 };
    assert_int_equal (layout_init_as (&l, LAYOUT_MD_ALT, LAYOUT_SIZE_ZONES,
                                      12288, 3, s3, NULL),
                      LAYOUT_OK);
    assert_int_equal (l.size, 6 * 12288);
  }
}

/* ---- layout_map ---- */

/* Validates the oracle too: members of 3, 1 and 2 chunks (with ragged
 * tails), worked out by hand from md's alt layout.
 *   zone 0 (member chunk 0, members 0 1 2): L0->m0c0 L1->m1c0 L2->m2c0
 *   zone 1 (member chunk 1, members 0 2):   L3->m0c1 L4->m2c1
 *   zone 2 (member chunk 2, member 0):      L5->m0c2
 */
static void
layout_small_mixed_example_matches_hand_computed_table (void **state)
{
  static const struct {
    unsigned member;
    uint64_t mchunk;
  } want[] = {
    { 0, 0 }, { 1, 0 }, { 2, 0 }, { 0, 1 }, { 2, 1 }, { 0, 2 },
  };
  const uint64_t chunk = 12288;
  const uint64_t sizes[] = { 3 * chunk + 100, 1 * chunk + 4096,
                             2 * chunk + chunk - 1 };
  struct layout l;
  struct oracle o;
  struct layout_piece p;

  (void) state;
  assert_int_equal (layout_init (&l, chunk, 3, sizes, NULL), LAYOUT_OK);
  /* md's size rule with a 24-sector chunk: 72 & ~23 + 24 & ~23 + 48 & ~23
   * = 72 + 8 + 32 sectors, not the 144 the zones hold
   */
  assert_int_equal (l.size, 112 * 512);
  assert_int_equal (oracle_init (&o, chunk, 3, sizes), 0);
  assert_int_equal (o.size, 112 * 512);
  for (unsigned k = 0; k < 6; ++k) {
    for (uint64_t in = 0; in < chunk; in += 4096) {
      uint64_t x = k * chunk + in;
      unsigned m;
      uint64_t mo;

      oracle_map (&o, x, &m, &mo);
      assert_int_equal (m, want[k].member);
      assert_int_equal (mo, want[k].mchunk * chunk + in);
      layout_map (&l, x, 6 * chunk - x, &p);
      assert_int_equal (p.member, want[k].member);
      assert_int_equal (p.member_offset, want[k].mchunk * chunk + in);
      assert_int_equal (p.length, chunk - in);
    }
  }
  oracle_free (&o);
}

/* Equal members: logical chunk k is on member k mod N at member offset
 * (k div N) * chunk.  Checked both with that closed formula and with the
 * oracle, at every 512-byte offset.
 */
static void
layout_equal_members_match_md_raid0 (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_EQUAL);
  struct rng r = { 1 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    const struct tcase *tc = &tcs[c];
    const uint64_t chunk = tc->chunk, n = tc->n;
    struct layout l;
    struct oracle o;

    setup_case (tc, &l, &o);
    CHECK (l.size == n * md_counted (tc->sizes[0] / chunk * chunk, chunk),
           "%s: size %llu", describe_case (tc), (ull) l.size);
    for (uint64_t x = 0; x < l.size; x += 512) {
      struct layout_piece p;
      uint64_t k = x / chunk;

      layout_map (&l, x, l.size - x, &p);
      uint64_t len = chunk - x % chunk;
      if (len > l.size - x) /* md's size rule can end it inside a chunk */
        len = l.size - x;
      CHECK (p.member == k % n && p.member_offset == k / n * chunk + x % chunk
               && p.length == len,
             "%s: offset %llu -> member %u offset %llu length %llu",
             describe_case (tc), (ull) x, p.member, (ull) p.member_offset,
             (ull) p.length);
    }
    check_map_all (tc, &l, &o, 512, &r);
    oracle_free (&o);
  }
  free (tcs);
}

/* Different sizes: md raid0 with RAID0_ALT_MULTIZONE_LAYOUT. */
static void
layout_mixed_members_match_md_raid0_alt_zones (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_MIXED);
  struct rng r = { 2 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    struct layout l;
    struct oracle o;

    setup_case (&tcs[c], &l, &o);
    check_map_all (&tcs[c], &l, &o, 512, &r);
    oracle_free (&o);
  }
  free (tcs);
}

/* Tiny volumes: every byte offset. */
static void
layout_tiny_volumes_map_every_byte (void **state)
{
  struct rng r = { 3 };

  (void) state;
  for (unsigned t = 0; t < 24; ++t) {
    struct tcase tc = { .chunk = t % 3 == 2 ? 8192 : 4096,
                        .n = 1 + t % 4,
                        .kind = "tiny" };
    struct layout l;
    struct oracle o;

    for (unsigned i = 0; i < tc.n; ++i)
      tc.sizes[i] = rng_range (&r, 1, 3) * tc.chunk + rng_below (&r, tc.chunk);
    setup_case (&tc, &l, &o);
    check_map_all (&tc, &l, &o, 1, &r);
    oracle_free (&o);
  }
}

/* The maximum number of members, mixed sizes. */
static void
layout_64_members_match_md_raid0_alt_zones (void **state)
{
  struct rng r = { 4 };

  (void) state;
  for (unsigned t = 0; t < 4; ++t) {
    struct tcase tc = { .chunk = t & 1 ? 12288 : 4096,
                        .n = LAYOUT_MAX_MEMBERS,
                        .kind = "64 members" };
    struct layout l;
    struct oracle o;

    for (unsigned i = 0; i < tc.n; ++i)
      tc.sizes[i] = (t < 2 ? rng_range (&r, 1, 4) : 3) * tc.chunk
                    + rng_below (&r, tc.chunk);
    setup_case (&tc, &l, &o);
    check_map_all (&tc, &l, &o, 512, &r);
    check_iter (&tc, &l, &o, 0, o.size);
    check_spans (&tc, &l, &o, 0, o.size);
    for (unsigned i = 0; i < 300; ++i) {
      uint64_t offset, count;
      pick_request (&r, &o, o.size, &offset, &count);
      check_iter (&tc, &l, &o, offset, count);
      check_spans (&tc, &l, &o, offset, count);
    }
    oracle_free (&o);
  }
}

/* Near 2^64: no overflow in the arithmetic at large offsets. */
static void
layout_maps_offsets_near_2_64 (void **state)
{
  const uint64_t top = UINT64_C (1) << 63;
  struct layout l;
  struct layout_piece p;
  struct layout_span spans[2];
  uint64_t x;

  (void) state;
  {
    /* zone 0: members 0,1 up to 2^63 - 4096; zone 1: member 0, one chunk */
    uint64_t sizes[] = { top, top - 4096 };
    const uint64_t z0_end = 2 * (top - 4096);

    assert_int_equal (layout_init (&l, 4096, 2, sizes, NULL), LAYOUT_OK);
    assert_int_equal (l.size, UINT64_MAX - 4095);
    /* last byte of zone 0: last chunk of the last row, on member 1 */
    layout_map (&l, z0_end - 1, 1, &p);
    assert_int_equal (p.member, 1);
    assert_int_equal (p.member_offset, top - 4097);
    /* the byte before: member 0 */
    layout_map (&l, z0_end - 4097, 10, &p);
    assert_int_equal (p.member, 0);
    assert_int_equal (p.member_offset, top - 4097);
    assert_int_equal (p.length, 1);
    /* zone 1: member 0 at 2^63 - 4096 */
    layout_map (&l, z0_end + 7, 100000, &p);
    assert_int_equal (p.member, 0);
    assert_int_equal (p.member_offset, top - 4096 + 7);
    assert_int_equal (p.length, 4096 - 7);
    layout_map (&l, l.size - 1, 1, &p);
    assert_int_equal (p.member, 0);
    assert_int_equal (p.member_offset, top - 1);

    /* a request over the zone boundary */
    assert_int_equal (layout_spans (&l, z0_end - 8192 + 100, 8192, spans), 2);
    assert_true (spans[0].touched && spans[1].touched);
    assert_int_equal (spans[0].member_offset, top - 8192 + 100);
    assert_int_equal (spans[0].length, 4096);
    assert_int_equal (spans[0].nr_pieces, 2);
    assert_int_equal (spans[1].member_offset, top - 8192);
    assert_int_equal (spans[1].length, 4096);
    assert_int_equal (spans[1].nr_pieces, 1);

    assert_true (layout_unmap (&l, 0, top - 1, &x));
    assert_int_equal (x, l.size - 1);
    assert_true (layout_unmap (&l, 1, top - 4097, &x));
    assert_int_equal (x, z0_end - 1);
    assert_false (layout_unmap (&l, 1, top - 4096, &x));
    assert_false (layout_unmap (&l, 0, top, &x));
    assert_false (layout_unmap (&l, 0, UINT64_MAX, &x));
  }
  {
    /* 4 equal members of 2^61: the last chunk is on member 3 */
    uint64_t sizes[] = { top / 4, top / 4, top / 4, top / 4 };
    assert_int_equal (layout_init (&l, 131072, 4, sizes, NULL), LAYOUT_OK);
    assert_int_equal (l.size, top);
    layout_map (&l, top - 1, 1, &p);
    assert_int_equal (p.member, 3);
    assert_int_equal (p.member_offset, top / 4 - 1);
    layout_map (&l, top - 131072 * 4, 131072 * 4, &p);
    assert_int_equal (p.member, 0);
    assert_int_equal (p.member_offset, top / 4 - 131072);
    assert_int_equal (p.length, 131072);
  }
}

/* ---- layout_iter ---- */

static void
check_iter (const struct tcase *tc, const struct layout *l,
            const struct oracle *o, uint64_t offset, uint64_t count)
{
  struct layout_iter it;
  struct layout_piece p;
  uint64_t at = offset, nr = 0;
  const uint64_t chunk = o->chunk;
  const uint64_t want_nr = (offset + count - 1) / chunk - offset / chunk + 1;

  layout_iter_init (&it, l, offset, count);
  while (layout_iter_next (&it, &p)) {
    unsigned m;
    uint64_t mo;

    CHECK (p.offset == at && p.length > 0 && p.length <= offset + count - at,
           "%s: request %llu+%llu: piece %llu+%llu, expected to start at "
           "%llu",
           describe_case (tc), (ull) offset, (ull) count, (ull) p.offset,
           (ull) p.length, (ull) at);
    CHECK (p.offset % chunk + p.length <= chunk,
           "%s: request %llu+%llu: piece %llu+%llu crosses a chunk boundary",
           describe_case (tc), (ull) offset, (ull) count, (ull) p.offset,
           (ull) p.length);
    oracle_map (o, p.offset, &m, &mo);
    CHECK (p.member == m && p.member_offset == mo,
           "%s: request %llu+%llu: piece %llu+%llu on member %u at %llu, "
           "expected member %u at %llu",
           describe_case (tc), (ull) offset, (ull) count, (ull) p.offset,
           (ull) p.length, p.member, (ull) p.member_offset, m, (ull) mo);
    at += p.length;
    nr++;
    CHECK (nr <= want_nr, "%s: request %llu+%llu: too many pieces",
           describe_case (tc), (ull) offset, (ull) count);
  }
  CHECK (at == offset + count && nr == want_nr,
         "%s: request %llu+%llu: pieces cover up to %llu in %llu pieces, "
         "expected %llu pieces",
         describe_case (tc), (ull) offset, (ull) count, (ull) at, (ull) nr,
         (ull) want_nr);
  CHECK (!layout_iter_next (&it, &p), "%s: iterator not exhausted",
         describe_case (tc));
}

static void
layout_iter_yields_chunk_bounded_pieces_in_logical_order (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);
  struct rng r = { 5 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    struct layout l;
    struct oracle o;
    uint64_t offset, count;

    setup_case (&tcs[c], &l, &o);
    check_iter (&tcs[c], &l, &o, 0, o.size);
    check_iter (&tcs[c], &l, &o, o.size - 1, 1);
    for (unsigned i = 0; i < 150; ++i) {
      pick_request (&r, &o, o.size, &offset, &count);
      check_iter (&tcs[c], &l, &o, offset, count);
    }
    oracle_free (&o);
  }
  free (tcs);
}

/* ---- layout_spans ---- */

static void
check_spans (const struct tcase *tc, const struct layout *l,
             const struct oracle *o, uint64_t offset, uint64_t count)
{
  struct oracle_member_use use[ORACLE_MAX_MEMBERS];
  /* exactly nr_members entries, so that ASan sees any overrun */
  struct layout_span *spans = malloc (o->nr_members * sizeof *spans);
  unsigned want_touched, touched;

  assert_non_null (spans);
  memset (spans, 0xa5, o->nr_members * sizeof *spans);
  want_touched = oracle_uses (o, offset, count, use, NULL);
  touched = layout_spans (l, offset, count, spans);
  CHECK (touched == want_touched,
         "%s: request %llu+%llu: %u members touched, expected %u",
         describe_case (tc), (ull) offset, (ull) count, touched, want_touched);
  for (unsigned m = 0; m < o->nr_members; ++m) {
    const struct layout_span *s = &spans[m];
    const struct oracle_member_use *u = &use[m];

    CHECK (s->touched == u->touched,
           "%s: request %llu+%llu: member %u touched=%d, expected %d",
           describe_case (tc), (ull) offset, (ull) count, m, s->touched,
           u->touched);
    if (!u->touched)
      continue;
    CHECK (s->member_offset == u->first && s->length == u->end - u->first
             && s->nr_pieces == u->pieces,
           "%s: request %llu+%llu: member %u span %llu+%llu in %u pieces, "
           "expected %llu+%llu in %u pieces",
           describe_case (tc), (ull) offset, (ull) count, m,
           (ull) s->member_offset, (ull) s->length, s->nr_pieces,
           (ull) u->first, (ull) (u->end - u->first), u->pieces);
  }
  free (spans);
}

/* A trim (or any request) is sent as ONE range per touched member, and that
 * range is exactly the union of the request's pieces on the member.
 */
static void
trim_sends_one_range_per_member (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);
  struct rng r = { 6 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    struct layout l;
    struct oracle o;
    uint64_t offset, count;

    setup_case (&tcs[c], &l, &o);
    check_spans (&tcs[c], &l, &o, 0, o.size);
    check_spans (&tcs[c], &l, &o, o.size - 1, 1);
    check_spans (&tcs[c], &l, &o, 0, 1);
    /* every request from one row start to another (whole stripes, whole
     * zones, the last partial stripe), shifted by a few bytes
     */
    for (uint64_t a = 0; a <= o.nr_rows; ++a) {
      for (uint64_t b = a + 1; b <= o.nr_rows; ++b) {
        uint64_t x = o.row_start[a] * o.chunk, y = o.row_start[b] * o.chunk;
        check_spans (&tcs[c], &l, &o, x, y - x);
        check_spans (&tcs[c], &l, &o, x + 512, y - x - 512);
        if (y < o.size)
          check_spans (&tcs[c], &l, &o, x + 1, y - x);
      }
    }
    for (unsigned i = 0; i < 400; ++i) {
      pick_request (&r, &o, o.size, &offset, &count);
      check_spans (&tcs[c], &l, &o, offset, count);
    }
    oracle_free (&o);
  }
  free (tcs);
}

/* Tiny volumes: every request between points near chunk boundaries. */
static void
trim_sends_one_range_per_member_exhaustively_on_tiny_volumes (void **state)
{
  struct rng r = { 7 };

  (void) state;
  for (unsigned t = 0; t < 16; ++t) {
    struct tcase tc = { .chunk = t % 4 == 3 ? 12288 : 4096,
                        .n = 1 + t % 5,
                        .kind = "tiny" };
    struct layout l;
    struct oracle o;
    uint64_t *pts;
    unsigned npts = 0;

    for (unsigned i = 0; i < tc.n; ++i)
      tc.sizes[i] = rng_range (&r, 1, 4) * tc.chunk + rng_below (&r, 4096);
    setup_case (&tc, &l, &o);
    pts = xcalloc (4 * o.nr_chunks + 1, sizeof *pts);
    for (uint64_t k = 0; k < o.nr_chunks; ++k) {
      pts[npts++] = k * o.chunk;
      pts[npts++] = k * o.chunk + 1;
      pts[npts++] = k * o.chunk + 512;
      pts[npts++] = k * o.chunk + o.chunk - 1;
    }
    /* md's size rule may end the volume before the last chunks */
    while (npts > 0 && pts[npts - 1] >= o.size)
      npts--;
    pts[npts++] = o.size;
    for (unsigned a = 0; a < npts; ++a)
      for (unsigned b = a + 1; b < npts; ++b)
        check_spans (&tc, &l, &o, pts[a], pts[b] - pts[a]);
    free (pts);
    oracle_free (&o);
  }
}

/* ---- layout_unmap ---- */

static void
layout_unmap_inverts_layout_map_for_every_chunk (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);
  struct rng r = { 8 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    const struct tcase *tc = &tcs[c];
    struct layout l;
    struct oracle o;

    setup_case (tc, &l, &o);
    for (unsigned m = 0; m < o.nr_members; ++m) {
      for (uint64_t mc = 0; mc < o.member_chunks[m]; ++mc) {
        const uint64_t ins[] = {
          0, 1, 511, 512, o.chunk / 2, o.chunk - 1, rng_below (&r, o.chunk)
        };
        for (size_t i = 0; i < sizeof ins / sizeof ins[0]; ++i) {
          uint64_t mo = mc * o.chunk + ins[i], x = UINT64_MAX, want = 0;
          struct layout_piece p;
          bool ok = layout_unmap (&l, m, mo, &x);
          bool want_ok = oracle_unmap (&o, m, mo, &want);

          /* false only past md's size rule's end of the volume */
          CHECK (ok == want_ok && (!ok || x == want),
                 "%s: unmap(member %u, %llu) = %d, %llu; expected %d, %llu",
                 describe_case (tc), m, (ull) mo, ok, (ull) x, want_ok,
                 (ull) want);
          if (!ok)
            continue;
          layout_map (&l, x, 1, &p);
          CHECK (p.member == m && p.member_offset == mo,
                 "%s: map(unmap(member %u, %llu)) = member %u, %llu",
                 describe_case (tc), m, (ull) mo, p.member,
                 (ull) p.member_offset);
        }
      }
    }
    /* and map then unmap, for every chunk */
    for (uint64_t k = 0; k < o.nr_chunks; ++k) {
      struct layout_piece p;
      uint64_t x = k * o.chunk + rng_below (&r, o.chunk), back = 0;

      if (x >= l.size)
        break;
      layout_map (&l, x, 1, &p);
      CHECK (layout_unmap (&l, p.member, p.member_offset, &back) && back == x,
             "%s: unmap(map(%llu)) = %llu", describe_case (tc), (ull) x,
             (ull) back);
    }
    oracle_free (&o);
  }
  free (tcs);
}

static void
layout_unmap_rejects_offsets_beyond_the_usable_size (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    const struct tcase *tc = &tcs[c];
    struct layout l;

    assert_int_equal (layout_init (&l, tc->chunk, tc->n, tc->sizes, NULL),
                      LAYOUT_OK);
    for (unsigned m = 0; m < tc->n; ++m) {
      const uint64_t usable = l.member_size[m];
      const uint64_t beyond[] = {
        usable,
        usable + 1,
        usable + 4096,
        usable + tc->chunk,
        tc->sizes[m] > usable ? tc->sizes[m] - 1 : usable,
        tc->sizes[m],
        1000 * tc->chunk,
        UINT64_MAX,
      };
      for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; ++i) {
        uint64_t x = 4242;
        bool ok = layout_unmap (&l, m, beyond[i], &x);
        CHECK (!ok,
               "%s: unmap(member %u, %llu) accepted (-> %llu), usable "
               "size is %llu",
               describe_case (tc), m, (ull) beyond[i], (ull) x, (ull) usable);
      }
    }
  }
  free (tcs);
}

/* Many random shapes (N = 1..8, any test chunk, sizes of 1..40 chunks with
 * random tails, sizes often shared): map, iter, spans and unmap against the
 * oracle.
 */
static void
layout_random_volumes_agree_with_md_raid0_oracle (void **state)
{
  struct rng r = { 9 };

  (void) state;
  for (unsigned t = 0; t < 1500; ++t) {
    struct tcase tc = { .chunk = test_chunks[rng_below (&r, NR_TEST_CHUNKS)],
                        .n = (unsigned) rng_range (&r, 1, 8),
                        .kind = "random",
                        .layout = t % 2 ? ORACLE_ORIG : ORACLE_ALT };
    const uint64_t maxc = tc.chunk <= 20480 ? 40 : 10;
    struct layout l;
    struct oracle o;
    uint64_t offset, count;

    for (unsigned i = 0; i < tc.n; ++i) {
      if (i > 0 && rng_below (&r, 3) == 0) /* same number of chunks */
        tc.sizes[i] = tc.sizes[rng_below (&r, i)] / tc.chunk * tc.chunk;
      else
        tc.sizes[i] = rng_range (&r, 1, maxc) * tc.chunk;
      tc.sizes[i] += tail (&r, tc.chunk);
    }
    setup_case (&tc, &l, &o);
    check_map_all (&tc, &l, &o, tc.chunk / 4, &r);
    for (unsigned i = 0; i < 40; ++i) {
      pick_request (&r, &o, o.size, &offset, &count);
      check_iter (&tc, &l, &o, offset, count);
      check_spans (&tc, &l, &o, offset, count);
    }
    for (unsigned i = 0; i < 40; ++i) {
      unsigned m = (unsigned) rng_below (&r, tc.n);
      uint64_t mo = rng_below (&r, o.usable[m]), x = 0, want = 0;
      bool ok = layout_unmap (&l, m, mo, &x);
      bool want_ok = oracle_unmap (&o, m, mo, &want);

      CHECK (ok == want_ok && (!ok || x == want),
             "%s: unmap(member %u, %llu) = %d, %llu; expected %d, %llu",
             describe_case (&tc), m, (ull) mo, ok, (ull) x, want_ok,
             (ull) want);
    }
    oracle_free (&o);
  }
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (layout_init_rejects_no_members),
    cmocka_unit_test (layout_init_rejects_more_than_64_members),
    cmocka_unit_test (layout_init_rejects_chunk_not_a_multiple_of_4k),
    cmocka_unit_test (layout_init_names_the_member_smaller_than_one_chunk),
    cmocka_unit_test (layout_init_rejects_volume_size_overflow),
    cmocka_unit_test (layout_strerror_describes_every_error),
    cmocka_unit_test (layout_rounds_members_down_to_whole_chunks),
    cmocka_unit_test (layout_zones_follow_md_create_strip_zones),
    cmocka_unit_test (layout_small_mixed_example_matches_hand_computed_table),
    cmocka_unit_test (layout_md_original_and_alternate_match_hand_tables),
    cmocka_unit_test (layout_refuses_unknown_layout_numbers),
    cmocka_unit_test (layout_equal_members_match_md_raid0),
    cmocka_unit_test (layout_mixed_members_match_md_raid0_alt_zones),
    cmocka_unit_test (layout_tiny_volumes_map_every_byte),
    cmocka_unit_test (layout_64_members_match_md_raid0_alt_zones),
    cmocka_unit_test (layout_maps_offsets_near_2_64),
    cmocka_unit_test (
      layout_iter_yields_chunk_bounded_pieces_in_logical_order),
    cmocka_unit_test (trim_sends_one_range_per_member),
    cmocka_unit_test (
      trim_sends_one_range_per_member_exhaustively_on_tiny_volumes),
    cmocka_unit_test (layout_unmap_inverts_layout_map_for_every_chunk),
    cmocka_unit_test (layout_unmap_rejects_offsets_beyond_the_usable_size),
    cmocka_unit_test (layout_random_volumes_agree_with_md_raid0_oracle),
  };

  return run_unit_tests ("layout", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
