/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: which members hold writes not yet synced, so that a FLUSH
 * syncs only those -- and what a flush may rely on when another flush is
 * syncing the same member.
 *
 * One struct dirty per member of a volume.  A write, trim or zero marks
 * its members once it has completed on them (dirty_mark, before the
 * request is answered); a flush asks each member what it needs
 * (dirty_claim), then starts a sync of it or waits for one another flush
 * started (dirty_wait, dirty_next), and reports how the syncs it started
 * ended (dirty_end).  At most one sync runs per member: a flush that
 * finds one running relies on it when it started late enough to cover
 * its writes, else waits for it to end and starts the next one, which
 * then covers every flush that was waiting (group commit).
 *
 * The promise (NBD multi-conn): a flush covers every write completed, on
 * any connection, before the flush started.  Why it holds:
 *
 *  - The mark is set AFTER the write has completed on the member and
 *    BEFORE the write is answered: a write that completed before a flush
 *    started has its mark in place when the flush looks (the answer, the
 *    client and the flush request order the two; the marking store and
 *    the flush's load are sequentially consistent atomics).  Marked
 *    before the write completed, a sync that cleared the mark could start
 *    before the data reached the member and the write would be left
 *    unmarked.
 *
 *  - The mark is cleared when a sync STARTS, in the same atomic step that
 *    says "syncing", and before the sync call is issued: a write that
 *    completes while the sync runs marks the member again, so that the
 *    next flush syncs it again (cleared at the END, the mark of such a
 *    write would be lost, and a later flush would find the member clean
 *    with that write not durable).
 *
 *  - A flush that finds the member neither marked nor syncing has nothing
 *    to do there: the mark its writes left was cleared by a sync that
 *    started after them, that sync has ended (else "syncing"), and it
 *    succeeded -- the last sync to start did (else it would have marked
 *    the member again, below), and it started after the clear.
 *
 *  - A flush that finds a sync running and no mark relies on that sync:
 *    the mark its writes left was cleared by a sync that started after
 *    them, and the running sync is that one or a later one.  Marked, it
 *    needs the next sync (one that starts after it looked).  Syncs are
 *    numbered as they start; a flush needs number N to have succeeded,
 *    or any later one (which started later still).
 *
 *  - A sync that fails marks the member again before it ends: the mark
 *    stays until a sync succeeds, and a flush relying on the failed sync
 *    fails with its errno.
 *
 * Writes made durable by themselves (FUA, cache=writethrough) need no
 * mark.  Every cache mode that leaves data volatile needs one: buffered
 * writes sit in the page cache, and O_DIRECT writes (cache=direct) in the
 * device's write cache, which only fdatasync flushes.
 */
#ifndef NBDSTRIPE_DIRTY_H
#define NBDSTRIPE_DIRTY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DIRTY_MARKED 1u  /* writes completed since the last sync started */
#define DIRTY_SYNCING 2u /* a sync runs (number 'started') */

struct dirty {
  /* Alone on its cache line: every write to the member reads it. */
  _Alignas (64) _Atomic unsigned state;
  pthread_mutex_t lock; /* the counters; syncs start and end under it */
  pthread_cond_t cond;  /* a sync ended */
  uint64_t started;     /* syncs started: the running one's number */
  uint64_t ok;          /* the last one that succeeded (0: none) */
  uint64_t ended;       /* the last one that ended */
  int err;              /* how the last failed one failed */
};

extern void dirty_init (struct dirty *d);
extern void dirty_destroy (struct dirty *d);

/* A write, trim or zero completed on the member (call before answering
 * it).  Once marked, writes only read the flag: the cache line stays
 * shared until a sync starts.
 */
static inline void
dirty_mark (struct dirty *d)
{
  if (!(atomic_load (&d->state) & DIRTY_MARKED))
    atomic_fetch_or (&d->state, DIRTY_MARKED);
}

/* Whether a flush starting now may skip the member: nothing written
 * since a sync that started after it and succeeded, none running.
 */
static inline bool
dirty_clean (struct dirty *d)
{
  return atomic_load (&d->state) == 0;
}

enum dirty_next {
  DIRTY_DONE,   /* sync need (or a later one) succeeded: nothing to do */
  DIRTY_FAILED, /* it failed (*err): the member stays marked */
  DIRTY_START,  /* the caller starts sync *gen now, then dirty_end */
  DIRTY_BUSY,   /* a sync runs: dirty_wait, then dirty_next */
};

/* A flush starting now: *need is the number of the sync it needs to
 * succeed (or any later one), and what it does first.  DIRTY_DONE: the
 * member holds nothing for it.
 */
extern enum dirty_next dirty_claim (struct dirty *d, uint64_t *need,
                                    uint64_t *gen);

/* What a flush needing sync need does next (after DIRTY_BUSY). */
extern enum dirty_next dirty_next (struct dirty *d, uint64_t need,
                                   uint64_t *gen, int *err);

/* Sync gen (DIRTY_START) ended with err (0: success).  It covers the
 * flush that started it, and every flush needing gen or less.
 */
extern void dirty_end (struct dirty *d, uint64_t gen, int err);

/* Wait until the sync running now (if any) has ended. */
extern void dirty_wait (struct dirty *d);

#endif /* NBDSTRIPE_DIRTY_H */
