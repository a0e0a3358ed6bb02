/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: which members hold writes not yet synced
 * (plugin/core/dirty.c, include/dirty.h).
 *
 * The named cases walk one member through the orders that matter, step by
 * step (dirty.h's only blocking call is dirty_wait; dirty_check is its
 * look).  The last one checks the promise itself on every interleaving of
 * three writes and three flushes (each sync succeeding or failing),
 * followed by a flush after all of them: a flush that succeeds has made
 * durable every write answered before it started, and a write's mark is
 * never lost.  The oracle is a model of what a sync covers -- the writes
 * that had landed on the member when it started -- kept apart from the
 * code under test.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dirty.h"
#include "unit_main.h"

/* A flush starting now must start a sync (s): its number. */
static uint64_t
claim_starts (struct dirty *d, struct dirty_sync *s)
{
  uint64_t need = 0;

  assert_int_equal (dirty_claim (d, s, &need), DIRTY_START);
  assert_int_equal (s->gen, need);
  return need;
}

/* A flush starting now must rely on a running sync: its number. */
static uint64_t
claim_waits (struct dirty *d)
{
  struct dirty_sync s;
  uint64_t need = 0;

  assert_int_equal (dirty_claim (d, &s, &need), DIRTY_WAIT);
  return need;
}

/* A flush starting now has nothing to do on the member. */
static void
claim_nothing (struct dirty *d)
{
  struct dirty_sync s;
  uint64_t need;

  assert_int_equal (dirty_claim (d, &s, &need), DIRTY_CLEAN);
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
  struct dirty_sync s;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  assert_false (dirty_clean (d));
  claim_starts (d, &s);
  assert_false (dirty_clean (d)); /* syncing */
  dirty_end (d, &s, 0);
  assert_int_equal (dirty_check (d, s.gen, &err), 1);
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
  struct dirty_sync s, s2;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s);
  dirty_mark (d); /* completed while the sync runs */
  dirty_end (d, &s, 0);
  assert_false (dirty_clean (d));
  assert_true (claim_starts (d, &s2) > s.gen);
  dirty_end (d, &s2, 0);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* No write since the running sync started: a flush relies on that sync
 * (it started after whatever the flush must cover), starting none, and
 * is covered once it has succeeded.
 */
static void
flush_during_a_sync_without_new_writes_relies_on_it (void **state)
{
  struct dirty d_, *d = &d_;
  struct dirty_sync s;
  uint64_t need;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s);
  need = claim_waits (d);
  assert_int_equal (need, s.gen);
  assert_int_equal (dirty_check (d, need, &err), 0);
  dirty_end (d, &s, 0);
  assert_int_equal (dirty_check (d, need, &err), 1);
  assert_int_equal (dirty_wait (d, need), 0);
  assert_int_equal (d->started, 1);
  dirty_destroy (d);
}

/* A write since the running sync started: the flush starts a sync of
 * its own at once (the running one need not cover the write), without
 * waiting for the running one.
 */
static void
flush_after_a_write_during_a_sync_starts_its_own (void **state)
{
  struct dirty d_, *d = &d_;
  struct dirty_sync s1, s2;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s1);
  dirty_mark (d);
  assert_int_equal (claim_starts (d, &s2), s1.gen + 1);
  /* Both run; the later one may end first. */
  dirty_end (d, &s2, 0);
  assert_false (dirty_clean (d)); /* s1 runs */
  dirty_end (d, &s1, 0);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* A flush relying on the last sync to start waits for that one, not
 * for earlier ones still running; and a later sync that succeeded
 * covers it too.
 */
static void
flush_relies_on_the_last_sync_started (void **state)
{
  struct dirty d_, *d = &d_;
  struct dirty_sync s1, s2, s3;
  uint64_t need;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s1);
  dirty_mark (d);
  claim_starts (d, &s2);
  need = claim_waits (d);
  assert_int_equal (need, s2.gen);
  dirty_end (d, &s2, 0);
  assert_int_equal (dirty_check (d, need, &err), 1); /* s1 still runs */
  dirty_mark (d);
  claim_starts (d, &s3);
  need = claim_waits (d);
  assert_int_equal (need, s3.gen);
  dirty_end (d, &s1, 0);
  assert_int_equal (dirty_check (d, need, &err), 0);
  dirty_end (d, &s3, 0);
  assert_int_equal (dirty_check (d, need, &err), 1);
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
  struct dirty_sync s, s2;
  uint64_t need;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s);
  need = claim_waits (d);
  dirty_end (d, &s, EIO);
  assert_int_equal (dirty_check (d, need, &err), -1);
  assert_int_equal (err, EIO);
  assert_int_equal (dirty_wait (d, need), -1);
  assert_int_equal (errno, EIO);
  assert_false (dirty_clean (d));
  assert_true (claim_starts (d, &s2) > s.gen);
  dirty_end (d, &s2, 0);
  assert_true (dirty_clean (d));
  dirty_destroy (d);
}

/* A later sync that succeeded covers a flush whose sync failed: it
 * started later still.
 */
static void
later_sync_that_succeeded_covers_an_earlier_need (void **state)
{
  struct dirty d_, *d = &d_;
  struct dirty_sync s1, s2;
  uint64_t need;
  int err = 0;

  (void) state;
  dirty_init (d);
  dirty_mark (d);
  claim_starts (d, &s1);
  need = claim_waits (d);
  dirty_mark (d);
  claim_starts (d, &s2);
  dirty_end (d, &s2, 0);
  dirty_end (d, &s1, EIO);
  assert_int_equal (dirty_check (d, need, &err), 1);
  assert_false (dirty_clean (d)); /* s1's failure marked it */
  dirty_destroy (d);
}

/* ---- every interleaving ---- */

#define NW 3 /* writes */
#define NF 3 /* flushes */

enum { W_LAND, W_MARK, W_DONE };                /* a write's steps */
enum { F_CLAIM, F_SYNCING, F_WAITING, F_DONE }; /* a flush's */

static struct dirty md;            /* the member under test */
static struct dirty_sync node[NF]; /* each flush's own sync */
static unsigned long paths, bad;

/* What of md and the nodes changes (the lock and condition stay put). */
struct snap {
  unsigned state;
  uint64_t started, ok;
  int err;
  int running; /* index in node[] of the list's head, or -1 */
  uint64_t gen[NF];
  int next[NF];
};

struct world {
  struct snap d;
  unsigned landed;   /* writes whose data is on the member */
  unsigned answered; /* writes marked and answered */
  unsigned durable;  /* covered by a sync that succeeded */
  int w[NW];
  struct {
    int pc;
    unsigned must;   /* answered when it started */
    unsigned covers; /* what its sync covers (landed when it started) */
    uint64_t need;
  } f[NF];
};

static int
node_index (const struct dirty_sync *s)
{
  return s ? (int) (s - node) : -1;
}

static void
save (struct snap *s)
{
  s->state = atomic_load (&md.state);
  s->started = md.started;
  s->ok = md.ok;
  s->err = md.err;
  s->running = node_index (md.running);
  for (int i = 0; i < NF; ++i) {
    s->gen[i] = node[i].gen;
    s->next[i] = node_index (node[i].next);
  }
}

static void
restore (const struct snap *s)
{
  atomic_store (&md.state, s->state);
  md.started = s->started;
  md.ok = s->ok;
  md.err = s->err;
  md.running = s->running < 0 ? NULL : &node[s->running];
  for (int i = 0; i < NF; ++i) {
    node[i].gen = s->gen[i];
    node[i].next = s->next[i] < 0 ? NULL : &node[s->next[i]];
  }
}

static void
check_covered (const struct world *w, unsigned must, const char *who)
{
  if (must & ~w->durable) {
    if (bad++ < 5)
      fprintf (stderr,
               "%s returned success but writes %#x are not durable "
               "(durable %#x)\n",
               who, must & ~w->durable, w->durable);
  }
}

/* After everything: a flush run alone, its sync succeeding, must leave
 * every answered write durable (a lost mark would skip the member).
 */
static void
final_flush (struct world w)
{
  struct dirty_sync s;
  uint64_t need;
  int err;

  switch (dirty_claim (&md, &s, &need)) {
  case DIRTY_CLEAN: break;
  case DIRTY_START:
    dirty_end (&md, &s, 0);
    w.durable |= w.landed;
    break;
  case DIRTY_WAIT:
    if (dirty_check (&md, need, &err) != 1)
      fail_msg ("a flush alone must not wait"); /* nothing runs */
    break;
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
      int err = 0, r;

      restore (&w->d);
      switch (n.f[i].pc) {
      case F_CLAIM:
        n.f[i].must = n.answered;
        switch (dirty_claim (&md, &node[i], &n.f[i].need)) {
        case DIRTY_CLEAN:
          check_covered (&n, n.f[i].must, who);
          n.f[i].pc = F_DONE;
          break;
        case DIRTY_START:
          n.f[i].covers = n.landed; /* the sync is issued now */
          n.f[i].pc = F_SYNCING;
          break;
        case DIRTY_WAIT: n.f[i].pc = F_WAITING; break;
        }
        break;
      case F_SYNCING:
        /* Its own sync covers the flush that started it. */
        dirty_end (&md, &node[i], fail ? EIO : 0);
        if (!fail) {
          n.durable |= n.f[i].covers;
          check_covered (&n, n.f[i].must, who);
        }
        n.f[i].pc = F_DONE;
        break;
      case F_WAITING:
        r = dirty_check (&md, n.f[i].need, &err);
        if (r == 0)
          continue; /* still waits: not a step */
        if (r == 1)
          check_covered (&n, n.f[i].must, who);
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
    cmocka_unit_test (flush_after_a_write_during_a_sync_starts_its_own),
    cmocka_unit_test (flush_relies_on_the_last_sync_started),
    cmocka_unit_test (failed_sync_keeps_the_mark_and_fails_who_relied_on_it),
    cmocka_unit_test (later_sync_that_succeeded_covers_an_earlier_need),
    cmocka_unit_test (
      every_interleaving_of_writes_and_flushes_keeps_the_promise),
  };

  return run_unit_tests ("dirty", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
