/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: what test_layout.c and test_plan.c share -- a
 * check that says where it failed, a PRNG, the matrix of volume shapes
 * (test cases), random requests biased towards boundaries, and a request
 * summarised per member according to the layout oracle.
 *
 * The oracle itself, a brute-force md raid0 model written independently
 * of plugin/layout/layout.c, is tests/lib/oracle.h (shared with the integration
 * tests).
 *
 * Everything here is static inline so that each test file can use what it
 * needs without unused-function warnings.
 */
#ifndef NBDSTRIPE_TEST_LAYOUT_CASES_H
#define NBDSTRIPE_TEST_LAYOUT_CASES_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "oracle.h"

/* A check that says where and on what it failed. */
#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      print_error ("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      print_error (__VA_ARGS__);                                              \
      print_error ("\n");                                                     \
      fail ();                                                                \
    }                                                                         \
  } while (0)

typedef unsigned long long ull;

/* ---- PRNG: splitmix64, fixed seeds so that runs are reproducible ---- */

struct rng {
  uint64_t s;
};

static inline uint64_t
rng_next (struct rng *r)
{
  uint64_t z = (r->s += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n == 0. */
static inline uint64_t
rng_below (struct rng *r, uint64_t n)
{
  return n ? rng_next (r) % n : 0;
}

/* Uniform in [lo, hi]. */
static inline uint64_t
rng_range (struct rng *r, uint64_t lo, uint64_t hi)
{
  return lo + rng_below (r, hi - lo + 1);
}

/* ---- memory ---- */

static inline void *
xcalloc (size_t n, size_t size)
{
  void *p = calloc (n ? n : 1, size ? size : 1);
  if (p == NULL) {
    print_error ("out of memory\n");
    abort ();
  }
  return p;
}

/* ---- a request according to the oracle ---- */

/* Per-member summary of a request according to the oracle. */
struct oracle_member_use {
  bool touched;
  uint64_t first;            /* member offset of the first byte */
  uint64_t end;              /* member offset one past the last byte */
  unsigned pieces;           /* chunk pieces on this member */
  unsigned runs;             /* maximal runs of buffer-adjacent pieces */
  uint64_t last_logical_end; /* logical end of the last piece */
};

/* Walk the request chunk piece by chunk piece and summarise it per member.
 * Checks on the way that the pieces of one member are contiguous on that
 * member (the property layout_spans relies on).  Returns the number of
 * touched members and the total number of pieces in *nr_pieces.
 */
static inline unsigned
oracle_uses (const struct oracle *o, uint64_t offset, uint64_t count,
             struct oracle_member_use *use, uint64_t *nr_pieces)
{
  const uint64_t end = offset + count;
  unsigned touched = 0;
  uint64_t pieces = 0;

  memset (use, 0, o->nr_members * sizeof *use);
  for (uint64_t x = offset; x < end;) {
    uint64_t next = (x / o->chunk + 1) * o->chunk;
    uint64_t len = (next < end ? next : end) - x;
    unsigned m;
    uint64_t mo;

    oracle_map (o, x, &m, &mo);
    struct oracle_member_use *u = &use[m];
    if (!u->touched) {
      u->touched = true;
      u->first = mo;
      u->runs = 1;
      touched++;
    }
    else {
      CHECK (mo == u->end,
             "oracle: member %u not contiguous: piece at logical %llu "
             "starts at member offset %llu, previous ended at %llu",
             m, (ull) x, (ull) mo, (ull) u->end);
      if (u->last_logical_end != x)
        u->runs++;
    }
    u->end = mo + len;
    u->pieces++;
    u->last_logical_end = x + len;
    pieces++;
    x += len;
  }
  if (nr_pieces)
    *nr_pieces = pieces;
  return touched;
}

/* ---- test cases ---- */

struct tcase {
  uint64_t chunk;
  unsigned n;
  uint64_t sizes[ORACLE_MAX_MEMBERS];
  const char *kind;
  unsigned layout; /* ORACLE_ORIG / ORACLE_ALT (= LAYOUT_MD_*); 0: ALT */
};

static inline unsigned
case_layout (const struct tcase *tc)
{
  return tc->layout ? tc->layout : ORACLE_ALT;
}

static const uint64_t test_chunks[] = {
  4096, 8192, 12288, 20480, 65536, 131072,
};
#define NR_TEST_CHUNKS (sizeof test_chunks / sizeof test_chunks[0])

static inline const char *
describe_case (const struct tcase *tc)
{
  static char buf[2048];
  int len = snprintf (buf, sizeof buf, "[%s %s chunk=%llu n=%u sizes=",
                      tc->kind, case_layout (tc) == ORACLE_ORIG ? "orig" : "alt",
                      (ull) tc->chunk, tc->n);
  for (unsigned i = 0; i < tc->n && len < (int) sizeof buf - 40; ++i)
    len += snprintf (buf + len, sizeof buf - len, "%s%llu", i ? "," : "",
                     (ull) tc->sizes[i]);
  snprintf (buf + len, sizeof buf - len, "]");
  return buf;
}

enum case_kind {
  CASE_EQUAL,        /* all members the same whole number of chunks */
  CASE_EQUAL_RAGGED, /* same number of chunks, different tails */
  CASE_MIXED,        /* random sizes, random tails */
  CASE_MIXED_DUPS,   /* few distinct sizes, shared by several members */
  CASE_FIXED,        /* hand-picked shapes */
};

static const char *const case_kind_name[] = {
  "equal", "equal-ragged", "mixed", "mixed-dups", "fixed",
};

static inline uint64_t
tail (struct rng *r, uint64_t chunk)
{
  switch (rng_below (r, 4)) {
  case 0: return 0;
  case 1: return chunk - 1;
  case 2: return rng_range (r, 1, chunk - 1) & ~UINT64_C (511);
  default: return rng_range (r, 1, chunk - 1);
  }
}

/* Build the standard matrix of cases: N = 1..8, every test chunk, equal,
 * equal-but-ragged, mixed and mixed-with-duplicates, plus a few fixed shapes.
 * Sizes are kept small (a few chunks per member) so that exhaustive checks
 * stay cheap.  Only kinds whose bit is set in kinds_mask are returned.
 */
static inline unsigned
make_cases (struct tcase **out, unsigned kinds_mask)
{
  static const unsigned fixed[][9] = {
    /* n, then chunks per member */
    { 3, 3, 1, 2 },
    { 3, 1, 1, 5 },
    { 3, 5, 1, 1 },
    { 4, 1, 2, 3, 4 },
    { 4, 4, 3, 2, 1 },
    { 5, 2, 7, 2, 7, 1 },
    { 6, 1, 1, 1, 1, 1, 9 },
    { 8, 1, 2, 3, 4, 5, 6, 7, 8 },
    { 8, 8, 1, 8, 1, 8, 1, 8, 1 },
    { 2, 1, 12 },
  };
  const unsigned nfixed = sizeof fixed / sizeof fixed[0];
  /* Each mixed shape twice: md's alternate and original layouts. */
  unsigned cap = 2 * NR_TEST_CHUNKS * (8 * 4 + nfixed), nr = 0;
  struct tcase *tcs = xcalloc (cap, sizeof *tcs);

  for (unsigned ci = 0; ci < NR_TEST_CHUNKS; ++ci) {
    const uint64_t chunk = test_chunks[ci];
    const uint64_t maxc = chunk <= 20480 ? 12 : 5;

    for (unsigned n = 1; n <= 8; ++n) {
      for (unsigned kind = CASE_EQUAL; kind <= CASE_MIXED_DUPS; ++kind) {
        struct rng r = { (ci + 1) * 1000003u + n * 101u + kind };
        struct tcase *tc = &tcs[nr];

        if (!(kinds_mask & (1u << kind)))
          continue;
        memset (tc, 0, sizeof *tc);
        tc->chunk = chunk;
        tc->n = n;
        tc->kind = case_kind_name[kind];
        switch (kind) {
        case CASE_EQUAL: {
          uint64_t c = rng_range (&r, 1, maxc);
          for (unsigned i = 0; i < n; ++i)
            tc->sizes[i] = c * chunk;
          break;
        }
        case CASE_EQUAL_RAGGED: {
          uint64_t c = rng_range (&r, 1, maxc);
          for (unsigned i = 0; i < n; ++i)
            tc->sizes[i] = c * chunk + tail (&r, chunk);
          if (n > 1)
            tc->sizes[n - 1] = c * chunk + chunk - 1;
          break;
        }
        case CASE_MIXED:
          for (unsigned i = 0; i < n; ++i)
            tc->sizes[i] = rng_range (&r, 1, maxc) * chunk + tail (&r, chunk);
          if (n > 1 && tc->sizes[0] / chunk == tc->sizes[1] / chunk) {
            /* make sure it is really mixed */
            uint64_t c = tc->sizes[0] / chunk;
            tc->sizes[1] = (c == 1 ? 2 : c - 1) * chunk + tail (&r, chunk);
          }
          break;
        case CASE_MIXED_DUPS: {
          uint64_t vals[3];
          unsigned nv = n < 3 ? 1 : (n < 6 ? 2 : 3);
          for (unsigned v = 0; v < nv; ++v)
            vals[v] = rng_range (&r, 1, maxc);
          if (nv > 1 && vals[0] == vals[1])
            vals[1] = vals[0] == 1 ? 2 : vals[0] - 1;
          for (unsigned i = 0; i < n; ++i)
            tc->sizes[i] =
              vals[i < nv ? i : rng_below (&r, nv)] * chunk + tail (&r, chunk);
          break;
        }
        }
        nr++;
        if (kind == CASE_MIXED || kind == CASE_MIXED_DUPS) {
          tcs[nr] = *tc;
          tcs[nr++].layout = ORACLE_ORIG;
        }
      }
    }

    if (kinds_mask & (1u << CASE_FIXED)) {
      struct rng r = { 77u + ci };
      for (unsigned f = 0; f < nfixed; ++f) {
        struct tcase *tc = &tcs[nr++];
        memset (tc, 0, sizeof *tc);
        tc->chunk = chunk;
        tc->n = fixed[f][0];
        tc->kind = case_kind_name[CASE_FIXED];
        for (unsigned i = 0; i < tc->n; ++i)
          tc->sizes[i] = fixed[f][i + 1] * chunk + tail (&r, chunk);
        tcs[nr] = *tc;
        tcs[nr++].layout = ORACLE_ORIG;
      }
    }
  }
  *out = tcs;
  return nr;
}

#define KINDS_ALL 0x1fu
#define KINDS_EQUAL ((1u << CASE_EQUAL) | (1u << CASE_EQUAL_RAGGED))
#define KINDS_MIXED                                                           \
  ((1u << CASE_MIXED) | (1u << CASE_MIXED_DUPS) | (1u << CASE_FIXED))

/* What a member rounded to whole chunks adds to the volume by md's rule
 * (raid0_size: its sectors masked with ~(chunk sectors - 1)); all of it
 * for a power-of-two chunk.
 */
static inline uint64_t
md_counted (uint64_t rounded, uint64_t chunk)
{
  return ((rounded / 512) & ~(chunk / 512 - 1)) * 512;
}

/* ---- requests ---- */

/* A logical offset in [0, size], biased towards the places where things go
 * wrong: chunk boundaries, stripe (row) starts -- which include the zone
 * boundaries and the start of the last partial stripe -- and the end.
 */
static inline uint64_t
pick_point (struct rng *r, const struct oracle *o)
{
  uint64_t x;

  switch (rng_below (r, 6)) {
  case 0: x = rng_range (r, 0, o->size); break;
  case 1: x = rng_range (r, 0, o->size / 512) * 512; break;
  case 2: x = rng_range (r, 0, o->nr_chunks) * o->chunk; break;
  case 3:
  case 4: {
    static const int64_t deltas[] = { 0, 0, 1, -1, 512, -512, 4096, -4096 };
    x = o->row_start[rng_range (r, 0, o->nr_rows)] * o->chunk;
    int64_t d = deltas[rng_below (r, sizeof deltas / sizeof deltas[0])];
    if (d < 0 && (uint64_t) -d > x)
      x = 0;
    else
      x += d;
    break;
  }
  default: x = rng_below (r, 2) ? o->size : 0; break;
  }
  return x > o->size ? o->size : x;
}

/* A random request [*offset, *offset + *count) inside the volume, count > 0,
 * count <= max_count.
 */
static inline void
pick_request (struct rng *r, const struct oracle *o, uint64_t max_count,
              uint64_t *offset, uint64_t *count)
{
  uint64_t a = pick_point (r, o), b = pick_point (r, o);

  if (a > b) {
    uint64_t t = a;
    a = b;
    b = t;
  }
  if (a == b) {
    if (a == o->size)
      a--;
    else
      b++;
  }
  if (b - a > max_count) {
    if (rng_below (r, 2))
      b = a + max_count;
    else
      a = b - max_count;
  }
  *offset = a;
  *count = b - a;
}

/* A byte that depends on all bits of its logical offset. */
static inline uint8_t
pattern_byte (uint64_t x)
{
  x ^= x >> 31;
  x *= UINT64_C (0x7fb5d329728ea185);
  x ^= x >> 27;
  x *= UINT64_C (0x81dadef4bc2dd44d);
  x ^= x >> 33;
  return (uint8_t) x;
}

#include "unit_main.h"

#endif /* NBDSTRIPE_TEST_LAYOUT_CASES_H */
