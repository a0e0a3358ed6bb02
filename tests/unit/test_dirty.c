/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: which members hold writes not yet synced
 * (plugin/core/dirty.c, include/dirty.h).
 *
 * The named cases walk one member through the orders that matter, step by
 * step (dirty.h's API has no blocking call but dirty_wait).  The last one
 * checks the promise itself on every interleaving of three writes and three
 * flushes (each sync succeeding or failing), followed by a flush after
 * all of them: a flush that succeeds has made durable every write
 * answered before it started, and a write's mark is never lost.  The
 * oracle is a model of what a sync covers -- the writes that had landed
 * on the member when it started -- kept apart from the code under test.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dirty.h"
#include "unit_main.h"

/* A flush starting now must start a sync: its number (*need its need). */
static uint64_t
claim_starts (struct dirty *d, uint64_t *need)
{
  uint64_t gen = 0;

  assert_int_equal (dirty_claim (d, need, &gen), DIRTY_START);
  assert_true (gen >= *need);
  return gen;
}

/* A flush starting now must wait for the running sync. */
static void
claim_waits (struct dirty *d, uint64_t *need)
{
  uint64_t gen = 0;

  assert_int_equal (dirty_claim (d, need, &gen), DIRTY_BUSY);
}

/* A flush starting now has nothing to do on the member. */
static void
claim_nothing (struct dirty *d)
{
  uint64_t need, gen;

  assert_int_equal (dirty_claim (d, &need, &gen), DIRTY_DONE);
}

/* After a wait: the flush needing need must start a sync now. */
static uint64_t
next_starts (struct dirty *d, uint64_t need)
{
  uint64_t gen = 0;
  int err = 0;

  assert_int_equal (dirty_next (d, need, &gen, &err), DIRTY_START);
  assert_true (gen >= need);
  return gen;
}

static void
member_never_written_needs_no_sync (void **state)
{
  struct dirty d_, *d = &d_;

  (void) state;
  dirty_init (d);
  assert_true (dirty_clean (d));
  claim_nothing (d);
  dirty_destroy (d);
}

static void
marked_member_is_synced_then_clean (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need, gen;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  assert_false (dirty_clean (d));
  gen = claim_starts (d, &need);
  dirty_end (d, gen, 0);
  assert_true (dirty_clean (d));
  claim_nothing (d);
  dirty_destroy (d);
}

/* The mark is cleared as the sync starts: a write that completes while
 * it runs marks the member again, and the mark outlives the sync.
 */
static void
write_completed_during_a_sync_keeps_the_member_dirty (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need, need2, gen, gen2;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  gen = claim_starts (d, &need);
  dirty_mark (d); /* completed while the sync runs */
  dirty_end (d, gen, 0);
  assert_false (dirty_clean (d));
  gen2 = claim_starts (d, &need2);
  assert_true (need2 > gen);
  dirty_end (d, gen2, 0);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* No write since the running sync started: a flush relies on that sync
 * (it started after whatever the flush must cover), starting none.
 */
static void
flush_during_a_sync_without_new_writes_relies_on_it (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need1, need2, gen, g2 = 0;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  gen = claim_starts (d, &need1);
  claim_waits (d, &need2);
  assert_int_equal (need2, gen);
  assert_int_equal (dirty_next (d, need2, &g2, &err), DIRTY_BUSY);
  dirty_end (d, gen, 0);
  assert_int_equal (dirty_next (d, need2, &g2, &err), DIRTY_DONE);
  assert_int_equal (d->started, 1);
  dirty_destroy (d);
}

/* A write since the running sync started: the flush needs the next one,
 * waits for the running one to end, then starts it.
 */
static void
flush_after_a_write_during_a_sync_needs_the_next_sync (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need1, need2, gen, g2 = 0;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  gen = claim_starts (d, &need1);
  dirty_mark (d);
  claim_waits (d, &need2);
  assert_int_equal (need2, gen + 1);
  dirty_end (d, gen, 0);
  /* Not covered by the sync that just ended. */
  g2 = next_starts (d, need2);
  assert_int_equal (g2, need2);
  dirty_end (d, g2, 0);
  assert_int_equal (dirty_next (d, need2, &g2, &err), DIRTY_DONE);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* Flushes needing the same next sync share it: one starts it, the
 * other finds it done.
 */
static void
flushes_needing_the_next_sync_share_it (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need1, a, b, gen, g = 0;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  gen = claim_starts (d, &need1);
  dirty_mark (d);
  claim_waits (d, &a);
  claim_waits (d, &b);
  assert_int_equal (a, b);
  dirty_end (d, gen, 0);
  g = next_starts (d, a);
  assert_int_equal (dirty_next (d, b, &g, &err), DIRTY_BUSY);
  dirty_end (d, a, 0);
  assert_int_equal (dirty_next (d, b, &g, &err), DIRTY_DONE);
  assert_int_equal (d->started, 2);
  dirty_destroy (d);
}

/* A sync that fails leaves the member marked (the flush fails; the next
 * one syncs it again), and a flush that relied on it fails too, with its
 * errno.
 */
static void
failed_sync_keeps_the_mark_and_fails_who_relied_on_it (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need1, need2, need3, gen, g = 0;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  gen = claim_starts (d, &need1);
  claim_waits (d, &need2); /* relies on gen */
  dirty_end (d, gen, EIO);
  assert_int_equal (dirty_next (d, need2, &g, &err), DIRTY_FAILED);
  assert_int_equal (err, EIO);
  assert_false (dirty_clean (d));
  g = claim_starts (d, &need3);
  assert_true (need3 > gen);
  dirty_end (d, g, 0);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* A later sync that succeeded covers a flush whose own sync failed
 * meanwhile: it started later still.
 */
static void
later_sync_that_succeeded_covers_an_earlier_need (void **state)
{
  struct dirty d_, *d = &d_;
  uint64_t need, need2, g1, g2, g = 0;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  g1 = claim_starts (d, &need);
  dirty_end (d, g1, EIO);
  g2 = claim_starts (d, &need2);
  dirty_end (d, g2, 0);
  assert_int_equal (dirty_next (d, need, &g, &err), DIRTY_DONE);
  dirty_destroy (d);
}

/* dirty_wait returns at once when no sync runs. */
static void
wait_without_a_running_sync_returns (void **state)
{
  struct dirty d_, *d = &d_;

  (void) state;
  dirty_init (d);
  dirty_wait (d);
  dirty_mark (d);
  dirty_wait (d);
  dirty_destroy (d);
}

/* ---- every interleaving ---- */

#define NW 3 /* writes */
#define NF 3 /* flushes */

enum { W_LAND, W_MARK, W_DONE };               /* a write's steps */
enum { F_CLAIM, F_NEXT, F_SYNCING, F_DONE };   /* a flush's */

/* What of struct dirty changes (the lock and condition stay put). */
struct snap {
  unsigned state;
  uint64_t started, ok, ended;
  int err;
};

struct world {
  struct snap d;
  unsigned landed;   /* writes whose data is on the member */
  unsigned answered; /* writes marked and answered */
  unsigned durable;  /* covered by a sync that succeeded */
  unsigned covers;   /* what the running sync covers (landed at start) */
  int w[NW];
  struct {
    int pc;
    unsigned must; /* answered when it started */
    uint64_t need, gen;
  } f[NF];
};

static struct dirty md; /* the member under test */
static unsigned long paths, bad;

static void
save (struct snap *s)
{
  s->state = atomic_load (&md.state);
  s->started = md.started;
  s->ok = md.ok;
  s->ended = md.ended;
  s->err = md.err;
}

static void
restore (const struct snap *s)
{
  atomic_store (&md.state, s->state);
  md.started = s->started;
  md.ok = s->ok;
  md.ended = s->ended;
  md.err = s->err;
}

static void
check_covered (const struct world *w, unsigned must, const char *who)
{
  if (must & ~w->durable) {
    if (bad++ < 5)
      fprintf (stderr, "%s returned success but writes %#x are not durable "
               "(durable %#x)\n",
               who, must & ~w->durable, w->durable);
  }
}

/* After everything: a flush run alone, its syncs succeeding, must leave
 * every answered write durable (a lost mark would skip the member).
 */
static void
final_flush (struct world w)
{
  uint64_t need, gen;
  int err;

  (void) err;
  switch (dirty_claim (&md, &need, &gen)) {
  case DIRTY_DONE: break;
  case DIRTY_START:
    w.covers = w.landed;
    dirty_end (&md, gen, 0);
    w.durable |= w.covers;
    break;
  default: fail_msg ("a flush alone must not wait"); /* nothing runs */
  }
  check_covered (&w, w.answered, "a flush after everything");
}

static void
explore (struct world *w)
{
  bool moved = false;

  for (int i = 0; i < NW; ++i) {
    if (w->w[i] == W_DONE)
      continue;
    struct world n = *w;
    restore (&w->d);
    if (n.w[i] == W_LAND) {
      n.landed |= 1u << i;
      n.w[i] = W_MARK;
    }
    else {
      dirty_mark (&md);
      n.answered |= 1u << i;
      n.w[i] = W_DONE;
    }
    save (&n.d);
    moved = true;
    explore (&n);
  }
  for (int i = 0; i < NF; ++i) {
    char who[32];
    snprintf (who, sizeof who, "flush %d", i);
    if (w->f[i].pc == F_DONE)
      continue;
    for (int fail = 0; fail < (w->f[i].pc == F_SYNCING ? 2 : 1); ++fail) {
      struct world n = *w;
      int err = 0;

      restore (&w->d);
      switch (n.f[i].pc) {
      case F_CLAIM:
        n.f[i].must = n.answered;
        switch (dirty_claim (&md, &n.f[i].need, &n.f[i].gen)) {
        case DIRTY_DONE:
          check_covered (&n, n.f[i].must, who);
          n.f[i].pc = F_DONE;
          break;
        case DIRTY_START:
          n.covers = n.landed; /* the sync is issued now */
          n.f[i].pc = F_SYNCING;
          break;
        case DIRTY_BUSY: n.f[i].pc = F_NEXT; break;
        case DIRTY_FAILED: fail_msg ("dirty_claim said FAILED"); break;
        }
        break;
      case F_NEXT:
        switch (dirty_next (&md, n.f[i].need, &n.f[i].gen, &err)) {
        case DIRTY_DONE:
          check_covered (&n, n.f[i].must, who);
          n.f[i].pc = F_DONE;
          break;
        case DIRTY_FAILED: n.f[i].pc = F_DONE; break;
        case DIRTY_START:
          n.covers = n.landed; /* the sync is issued now */
          n.f[i].pc = F_SYNCING;
          break;
        case DIRTY_BUSY: continue; /* waits: not a step */
        }
        break;
      case F_SYNCING:
        /* Its own sync covers the flush that started it. */
        dirty_end (&md, n.f[i].gen, fail ? EIO : 0);
        if (!fail) {
          n.durable |= n.covers;
          check_covered (&n, n.f[i].must, who);
        }
        n.f[i].pc = F_DONE;
        break;
      }
      save (&n.d);
      moved = true;
      explore (&n);
    }
  }
  if (!moved) {
    bool stuck = false;
    for (int i = 0; i < NF; ++i)
      stuck |= w->f[i].pc != F_DONE;
    if (stuck && bad++ < 5)
      fprintf (stderr, "a flush waits and nothing runs\n");
    restore (&w->d);
    final_flush (*w);
    paths++;
  }
}

static void
every_interleaving_of_writes_and_flushes_keeps_the_promise (void **state)
{
  struct world w;

  (void) state;
  dirty_init (&md);
  memset (&w, 0, sizeof w);
  save (&w.d);
  explore (&w);
  dirty_destroy (&md);
  fprintf (stderr, "%lu interleavings, %lu broken\n", paths, bad);
  assert_true (paths > 100000);
  assert_int_equal (bad, 0);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (member_never_written_needs_no_sync),
    cmocka_unit_test (marked_member_is_synced_then_clean),
    cmocka_unit_test (write_completed_during_a_sync_keeps_the_member_dirty),
    cmocka_unit_test (flush_during_a_sync_without_new_writes_relies_on_it),
    cmocka_unit_test (flush_after_a_write_during_a_sync_needs_the_next_sync),
    cmocka_unit_test (flushes_needing_the_next_sync_share_it),
    cmocka_unit_test (failed_sync_keeps_the_mark_and_fails_who_relied_on_it),
    cmocka_unit_test (later_sync_that_succeeded_covers_an_earlier_need),
    cmocka_unit_test (wait_without_a_running_sync_returns),
    cmocka_unit_test (
      every_interleaving_of_writes_and_flushes_keeps_the_promise),
  };

  return run_unit_tests ("dirty", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
