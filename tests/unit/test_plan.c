/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: request planning (plugin/layout/plan.c) against the
 * brute-force md raid0 oracle (tests/lib/oracle.h).
 *
 * Each case has a "volume" whose logical byte x holds pattern_byte(x), and
 * the member images the oracle says hold those bytes.  A planned write must
 * gather from the caller's buffer exactly the member image bytes of its
 * member range; a planned read must scatter the member ranges back into
 * exactly the caller's buffer.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "layout.h"
#include "plan.h"
#include "layout_cases.h"

/* ---- malloc failure injection (the test is linked with --wrap=malloc) */

void *__real_malloc (size_t size);
void *__wrap_malloc (size_t size);
static bool fail_next_malloc;

void *
__wrap_malloc (size_t size)
{
  if (fail_next_malloc) {
    fail_next_malloc = false;
    errno = ENOMEM;
    return NULL;
  }
  return __real_malloc (size);
}

/* ---- a case: layout, oracle, volume contents, member images ---- */

struct world {
  const struct tcase *tc;
  struct layout l;
  struct oracle o;
  uint8_t *vol;                     /* logical contents */
  uint8_t *img[ORACLE_MAX_MEMBERS]; /* member contents */
};

static void
world_init (struct world *w, const struct tcase *tc)
{
  enum layout_error err;

  memset (w, 0, sizeof *w);
  w->tc = tc;
  err = layout_init_as (&w->l, case_layout (tc), LAYOUT_SIZE_MD, tc->chunk,
                        tc->n, tc->sizes, NULL);
  CHECK (err == LAYOUT_OK, "%s: layout_init: %s", describe_case (tc),
         layout_strerror (err));
  CHECK (oracle_init_as (&w->o, case_layout (tc), tc->chunk, tc->n,
                         tc->sizes) == 0,
         "%s: the oracle refused it", describe_case (tc));
  CHECK (w->l.size == w->o.size, "%s: size %llu, expected %llu",
         describe_case (tc), (ull) w->l.size, (ull) w->o.size);
  /* All the zones hold, which md's size rule may cut short of. */
  w->vol = xcalloc (w->o.nr_chunks * w->o.chunk, 1);
  for (uint64_t x = 0; x < w->o.nr_chunks * w->o.chunk; ++x)
    w->vol[x] = pattern_byte (x);
  for (unsigned m = 0; m < tc->n; ++m) {
    w->img[m] = xcalloc (w->o.usable[m], 1);
    for (uint64_t mc = 0; mc < w->o.member_chunks[m]; ++mc)
      memcpy (w->img[m] + mc * w->o.chunk,
              w->vol + w->o.rev[m][mc] * w->o.chunk, w->o.chunk);
  }
}

static void
world_free (struct world *w)
{
  for (unsigned m = 0; m < w->o.nr_members; ++m)
    free (w->img[m]);
  free (w->vol);
  oracle_free (&w->o);
}

static uint64_t
first_difference (const uint8_t *a, const uint8_t *b, uint64_t len)
{
  if (memcmp (a, b, len) == 0)
    return len;
  for (uint64_t i = 0; i < len; ++i)
    if (a[i] != b[i])
      return i;
  return len;
}

static int
iov_cmp (const void *a, const void *b)
{
  const uint8_t *x = ((const struct iovec *) a)->iov_base;
  const uint8_t *y = ((const struct iovec *) b)->iov_base;
  return x < y ? -1 : x > y;
}

/* Plan [offset, offset + count) and check everything about the plan.  If
 * plan_out is not NULL the plan is made there and left for the caller to
 * look at and plan_free; otherwise it is freed here.
 */
static void
check_plan (const struct world *w, uint64_t offset, uint64_t count,
            struct io_plan *plan_out)
{
  const struct tcase *tc = w->tc;
  const struct oracle *o = &w->o;
  struct oracle_member_use use[ORACLE_MAX_MEMBERS];
  uint64_t nr_pieces;

  /* Requests built around stripe rows can reach past the volume where
   * md's size rule ends it before the last row: cut them there.
   */
  if (plan_out == NULL && offset < o->size && count > o->size - offset)
    count = o->size - offset;
  assert_true (offset < o->size && count > 0);

  unsigned touched = oracle_uses (o, offset, count, use, &nr_pieces);
  uint8_t *buf = malloc (count); /* exactly count: ASan-checked */
  uint8_t *rbuf = calloc (count, 1);
  struct iovec *all = malloc (nr_pieces * sizeof *all); /* every iovec */
  unsigned nr_all = 0;
  struct io_plan *plan = plan_out ? plan_out : malloc (sizeof *plan);
  unsigned prev = 0;
  int rc;

  assert_non_null (buf);
  assert_non_null (rbuf);
  assert_non_null (plan);
  assert_non_null (all);
  memcpy (buf, w->vol + offset, count);
  memset (plan, 0x5a, sizeof *plan);

  rc = plan_rw (plan, &w->l, buf, count, offset);
  CHECK (rc == 0, "%s: request %llu+%llu: plan_rw failed", describe_case (tc),
         (ull) offset, (ull) count);
  CHECK (plan->nr_ios == touched,
         "%s: request %llu+%llu: %u member ios, expected %u",
         describe_case (tc), (ull) offset, (ull) count, plan->nr_ios, touched);
  if (nr_pieces > PLAN_INLINE_IOV)
    CHECK (plan->iov != plan->inline_iov,
           "%s: request %llu+%llu: %llu pieces but inline iovecs",
           describe_case (tc), (ull) offset, (ull) count, (ull) nr_pieces);
  else
    CHECK (plan->iov == plan->inline_iov,
           "%s: request %llu+%llu: %llu pieces but heap iovecs",
           describe_case (tc), (ull) offset, (ull) count, (ull) nr_pieces);

  for (unsigned i = 0; i < plan->nr_ios; ++i) {
    const struct member_io *io = &plan->ios[i];
    const unsigned m = io->member;
    uint64_t sum = 0, pos = 0, diff;
    uint8_t *gathered;

    CHECK (m < o->nr_members && (i == 0 || m > prev) && use[m].touched,
           "%s: request %llu+%llu: io %u is for member %u (previous %u), "
           "not a touched member in member order",
           describe_case (tc), (ull) offset, (ull) count, i, m, prev);
    prev = m;
    CHECK (io->member_offset == use[m].first
             && io->length == use[m].end - use[m].first,
           "%s: request %llu+%llu: member %u io %llu+%llu, expected "
           "%llu+%llu",
           describe_case (tc), (ull) offset, (ull) count, m,
           (ull) io->member_offset, (ull) io->length, (ull) use[m].first,
           (ull) (use[m].end - use[m].first));
    CHECK (io->nr_iov == use[m].runs,
           "%s: request %llu+%llu: member %u has %u iovecs, expected %u "
           "(%u pieces, adjacent ones merged)",
           describe_case (tc), (ull) offset, (ull) count, m, io->nr_iov,
           use[m].runs, use[m].pieces);
    for (unsigned j = 0; j < io->nr_iov; ++j) {
      const uint8_t *base = io->iov[j].iov_base;
      size_t len = io->iov[j].iov_len;

      CHECK (len > 0 && base >= buf && base + len <= buf + count,
             "%s: request %llu+%llu: member %u iovec %u (%p, %zu) outside "
             "the buffer %p+%llu",
             describe_case (tc), (ull) offset, (ull) count, m, j,
             (const void *) base, len, (const void *) buf, (ull) count);
      if (j > 0) {
        const uint8_t *pend =
          (const uint8_t *) io->iov[j - 1].iov_base + io->iov[j - 1].iov_len;
        CHECK (pend != base,
               "%s: request %llu+%llu: member %u iovecs %u "
               "and %u are adjacent but not merged",
               describe_case (tc), (ull) offset, (ull) count, m, j - 1, j);
      }
      sum += len;
      if (nr_all < nr_pieces)
        all[nr_all] = io->iov[j];
      nr_all++;
    }
    CHECK (sum == io->length,
           "%s: request %llu+%llu: member %u iovecs total %llu, length %llu",
           describe_case (tc), (ull) offset, (ull) count, m, (ull) sum,
           (ull) io->length);

    /* write: gather the iovec; it must be the member image's range */
    gathered = malloc (io->length);
    assert_non_null (gathered);
    for (unsigned j = 0; j < io->nr_iov; ++j) {
      memcpy (gathered + pos, io->iov[j].iov_base, io->iov[j].iov_len);
      pos += io->iov[j].iov_len;
    }
    diff =
      first_difference (gathered, w->img[m] + io->member_offset, io->length);
    if (diff < io->length) {
      uint64_t want_x = 0;
      oracle_unmap (o, m, io->member_offset + diff, &want_x);
      CHECK (diff == io->length,
             "%s: request %llu+%llu: member %u offset %llu would get the "
             "wrong byte (it holds logical byte %llu)",
             describe_case (tc), (ull) offset, (ull) count, m,
             (ull) (io->member_offset + diff), (ull) want_x);
    }
    free (gathered);

    /* read: scatter the member image's range through the iovec (into a
     * second buffer at the same positions, so that buf stays intact)
     */
    pos = io->member_offset;
    for (unsigned j = 0; j < io->nr_iov; ++j) {
      const uint8_t *base = io->iov[j].iov_base;
      memcpy (rbuf + (base - buf), w->img[m] + pos, io->iov[j].iov_len);
      pos += io->iov[j].iov_len;
    }
  }

  /* the iovecs of all members tile the buffer: every byte exactly once */
  CHECK (nr_all <= nr_pieces,
         "%s: request %llu+%llu: %u iovecs for %llu "
         "pieces",
         describe_case (tc), (ull) offset, (ull) count, nr_all,
         (ull) nr_pieces);
  qsort (all, nr_all, sizeof *all, iov_cmp);
  {
    const uint8_t *at = buf;
    for (unsigned j = 0; j < nr_all; ++j) {
      CHECK (all[j].iov_base == at,
             "%s: request %llu+%llu: buffer byte "
             "%llu is %s",
             describe_case (tc), (ull) offset, (ull) count, (ull) (at - buf),
             (const uint8_t *) all[j].iov_base > at ? "in no iovec"
                                                    : "in two iovecs");
      at += all[j].iov_len;
    }
    CHECK (at == buf + count,
           "%s: request %llu+%llu: buffer byte %llu is "
           "in no iovec",
           describe_case (tc), (ull) offset, (ull) count, (ull) (at - buf));
  }
  {
    uint64_t diff = first_difference (rbuf, w->vol + offset, count);
    CHECK (diff == count,
           "%s: request %llu+%llu: read puts the wrong byte "
           "at logical %llu",
           describe_case (tc), (ull) offset, (ull) count,
           (ull) (offset + diff));
  }

  if (!plan_out) {
    plan_free (plan);
    free (plan);
  }
  free (all);
  free (rbuf);
  free (buf);
}

/* ---- tests ---- */

static void
plan_rw_gives_each_member_exactly_its_range_byte_for_byte (void **state)
{
  struct tcase *tcs;
  unsigned nr = make_cases (&tcs, KINDS_ALL);
  struct rng r = { 11 };

  (void) state;
  for (unsigned c = 0; c < nr; ++c) {
    struct world w;
    uint64_t offset, count;

    world_init (&w, &tcs[c]);
    check_plan (&w, 0, w.o.size, NULL);
    check_plan (&w, w.o.size - 1, 1, NULL);
    check_plan (&w, 0, 1, NULL);
    for (uint64_t a = 1; a < w.o.nr_rows; ++a) {
      const uint64_t *rs = w.o.row_start;
      uint64_t x = rs[a] * w.o.chunk;
      uint64_t width = (rs[a + 1] - rs[a]) * w.o.chunk;
      uint64_t prev_width = (rs[a] - rs[a - 1]) * w.o.chunk;

      if (x >= w.o.size) /* md's size rule ended the volume before */
        break;
      /* around every stripe (row) boundary, a stripe or so each side */
      check_plan (&w, x - 1, 2, NULL);
      check_plan (&w, x - prev_width + 512, prev_width + width - 1024, NULL);
      check_plan (&w, x - prev_width, prev_width + width, NULL);
      /* zone boundaries (the row gets narrower): to and from them, and
       * into the last, maybe partial, stripe
       */
      if (width != prev_width) {
        check_plan (&w, x, w.o.size - x, NULL);
        check_plan (&w, 0, x + 1, NULL);
      }
    }
    {
      /* into the last (maybe partial) stripe, stopping a byte short */
      uint64_t x = w.o.row_start[w.o.nr_rows - 1] * w.o.chunk;
      x = x >= 4096 ? x - 4096 : 0;
      if (x >= w.o.size)
        x = w.o.size - 1;
      check_plan (&w, x, w.o.size - x - (w.o.size - x > 1), NULL);
    }
    for (unsigned i = 0; i < 40; ++i) {
      /* mostly small requests, some up to the whole volume */
      uint64_t max = i % 4 == 0 ? w.o.size : 3 * w.o.nr_members * w.o.chunk;
      pick_request (&r, &w.o, max, &offset, &count);
      check_plan (&w, offset, count, NULL);
    }
    world_free (&w);
  }
  free (tcs);
}

static void
plan_rw_makes_one_io_per_touched_member_in_member_order (void **state)
{
  const uint64_t chunk = 8192;
  struct tcase tc = { .chunk = chunk,
                      .n = 4,
                      .kind = "4 equal",
                      .sizes = { 4 * chunk, 4 * chunk, 4 * chunk,
                                 4 * chunk } };
  struct world w;
  struct io_plan plan;

  (void) state;
  world_init (&w, &tc);
  /* logical chunks 2, 3, 4: members 2, 3, 0 -- not member 1 */
  check_plan (&w, 2 * chunk + 100, 2 * chunk + 200, &plan);
  assert_int_equal (plan.nr_ios, 3);
  assert_int_equal (plan.ios[0].member, 0);
  assert_int_equal (plan.ios[0].member_offset, chunk);
  assert_int_equal (plan.ios[0].length, 300);
  assert_int_equal (plan.ios[1].member, 2);
  assert_int_equal (plan.ios[1].member_offset, 100);
  assert_int_equal (plan.ios[1].length, chunk - 100);
  assert_int_equal (plan.ios[2].member, 3);
  assert_int_equal (plan.ios[2].member_offset, 0);
  assert_int_equal (plan.ios[2].length, chunk);
  plan_free (&plan);
  world_free (&w);
}

/* One member: a request is one contiguous member range, one iovec, however
 * many chunks it spans (also beyond PLAN_INLINE_IOV chunks).
 */
static void
plan_rw_single_member_request_is_one_iovec (void **state)
{
  struct rng r = { 12 };

  (void) state;
  for (unsigned ci = 0; ci < NR_TEST_CHUNKS; ++ci) {
    struct tcase tc = { .chunk = test_chunks[ci], .n = 1, .kind = "single" };
    struct world w;
    uint64_t offset, count;

    tc.sizes[0] = (test_chunks[ci] <= 20480 ? 150 : 70) * tc.chunk
                  + rng_below (&r, tc.chunk);
    world_init (&w, &tc);
    for (unsigned i = 0; i < 30; ++i) {
      struct io_plan plan;

      if (i == 0) {
        offset = 0;
        count = w.o.size;
      }
      else
        pick_request (&r, &w.o, w.o.size, &offset, &count);
      check_plan (&w, offset, count, &plan);
      assert_int_equal (plan.nr_ios, 1);
      assert_int_equal (plan.ios[0].member, 0);
      assert_int_equal (plan.ios[0].member_offset, offset);
      assert_int_equal (plan.ios[0].length, count);
      assert_int_equal (plan.ios[0].nr_iov, 1);
      assert_int_equal (plan.ios[0].iov[0].iov_len, count);
      plan_free (&plan);
    }
    world_free (&w);
  }
}

/* Members of 2, 2 and 10 chunks: zone 1 is member 2 alone, so logical
 * chunks 5 (last of zone 0, on member 2) .. 13 are one buffer run on
 * member 2 and must be one iovec.
 */
static void
plan_rw_merges_pieces_adjacent_in_the_buffer (void **state)
{
  const uint64_t chunk = 4096;
  struct tcase tc = { .chunk = chunk,
                      .n = 3,
                      .kind = "2,2,10",
                      .sizes = { 2 * chunk, 2 * chunk + 5, 10 * chunk } };
  struct world w;
  struct io_plan plan;

  (void) state;
  world_init (&w, &tc);
  assert_int_equal (w.l.size, 14 * chunk);

  check_plan (&w, 0, 14 * chunk, &plan);
  assert_int_equal (plan.nr_ios, 3);
  assert_int_equal (plan.ios[0].nr_iov, 2); /* L0, L3 */
  assert_int_equal (plan.ios[1].nr_iov, 2); /* L1, L4 */
  assert_int_equal (plan.ios[2].nr_iov, 2); /* L2, L5..L13 */
  assert_int_equal (plan.ios[2].member_offset, 0);
  assert_int_equal (plan.ios[2].length, 10 * chunk);
  assert_int_equal (plan.ios[2].iov[1].iov_len, 9 * chunk);
  plan_free (&plan);

  /* from inside L5 into zone 1: a single io with a single iovec */
  check_plan (&w, 5 * chunk + 1000, 3 * chunk, &plan);
  assert_int_equal (plan.nr_ios, 1);
  assert_int_equal (plan.ios[0].member, 2);
  assert_int_equal (plan.ios[0].member_offset, chunk + 1000);
  assert_int_equal (plan.ios[0].nr_iov, 1);
  plan_free (&plan);

  /* inside zone 1 only */
  check_plan (&w, 7 * chunk, 7 * chunk, &plan);
  assert_int_equal (plan.nr_ios, 1);
  assert_int_equal (plan.ios[0].member_offset, 3 * chunk);
  assert_int_equal (plan.ios[0].nr_iov, 1);
  plan_free (&plan);
  world_free (&w);
}

/* More than PLAN_INLINE_IOV pieces: the iovecs come from the heap (and
 * plan_free releases them: LeakSanitizer would say otherwise).
 */
static void
plan_rw_uses_heap_iovecs_beyond_the_inline_ones (void **state)
{
  const uint64_t chunk = 4096;
  struct tcase tc = { .chunk = chunk,
                      .n = 3,
                      .kind = "3x40",
                      .sizes = { 40 * chunk, 40 * chunk, 40 * chunk } };
  struct world w;
  struct io_plan plan;

  (void) state;
  world_init (&w, &tc);

  check_plan (&w, 0, PLAN_INLINE_IOV * chunk, &plan);
  assert_ptr_equal (plan.iov, plan.inline_iov);
  plan_free (&plan);

  check_plan (&w, 0, PLAN_INLINE_IOV * chunk + 1, &plan);
  assert_ptr_not_equal (plan.iov, plan.inline_iov);
  plan_free (&plan);

  check_plan (&w, 100, PLAN_INLINE_IOV * chunk, &plan);
  assert_ptr_not_equal (plan.iov, plan.inline_iov);
  plan_free (&plan);

  check_plan (&w, 0, w.o.size, &plan);
  assert_ptr_not_equal (plan.iov, plan.inline_iov);
  assert_int_equal (plan.nr_ios, 3);
  for (unsigned i = 0; i < 3; ++i) {
    assert_int_equal (plan.ios[i].nr_iov, 40);
    assert_int_equal (plan.ios[i].length, 40 * chunk);
  }
  plan_free (&plan);
  world_free (&w);
}

static void
plan_rw_fails_with_enomem_when_iovecs_cannot_be_allocated (void **state)
{
  const uint64_t chunk = 4096;
  const uint64_t sizes[] = { 40 * chunk, 40 * chunk };
  struct layout l;
  struct io_plan plan;
  uint8_t *buf = malloc (80 * chunk);
  int rc;

  (void) state;
  assert_non_null (buf);
  assert_int_equal (layout_init (&l, chunk, 2, sizes, NULL), LAYOUT_OK);
  fail_next_malloc = true;
  errno = 0;
  rc = plan_rw (&plan, &l, buf, 80 * chunk, 0);
  assert_false (fail_next_malloc); /* plan_rw did call malloc */
  fail_next_malloc = false;
  assert_int_equal (rc, -1);
  assert_int_equal (errno, ENOMEM);
  plan_free (&plan); /* allowed, and must not crash */

  /* and the same request works when memory is there */
  assert_int_equal (plan_rw (&plan, &l, buf, 80 * chunk, 0), 0);
  assert_int_equal (plan.nr_ios, 2);
  plan_free (&plan);
  free (buf);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (
      plan_rw_gives_each_member_exactly_its_range_byte_for_byte),
    cmocka_unit_test (plan_rw_makes_one_io_per_touched_member_in_member_order),
    cmocka_unit_test (plan_rw_single_member_request_is_one_iovec),
    cmocka_unit_test (plan_rw_merges_pieces_adjacent_in_the_buffer),
    cmocka_unit_test (plan_rw_uses_heap_iovecs_beyond_the_inline_ones),
    cmocka_unit_test (
      plan_rw_fails_with_enomem_when_iovecs_cannot_be_allocated),
  };

  return run_unit_tests ("plan", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
