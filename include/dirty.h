/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: which members hold writes not yet synced, so that a FLUSH
 * syncs only those -- and what a flush may rely on when another flush is
 * syncing the same member.
 *
 * One struct dirty per member of a volume.  A write, trim or zero marks
 * its members once it has completed on them (dirty_mark, before the
 * request is answered); a flush asks each member what it needs
 * (dirty_claim): nothing; a sync of its own, started at once, which
 * clears the mark (dirty_end when it is done); or one that another flush
 * started late enough, which it waits for (dirty_wait).  Syncs of one
 * member may run at once, as concurrent fsyncs of a file do: a flush
 * never waits for a sync that does not cover it.
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
 *    counts it running, and before the sync call is issued: a write that
 *    completes while the sync runs marks the member again, so that the
 *    next flush syncs it again (cleared at the END, the mark of such a
 *    write would be lost, and a later flush would find the member clean
 *    with that write not durable).
 *
 *  - A flush that finds the member neither marked nor syncing has nothing
 *    to do there: the mark its writes left was cleared by a sync that
 *    started after them; the last sync to start (that one or a later one)
 *    has ended (none runs) and succeeded (else it would have marked the
 *    member again, below).
 *
 *  - A flush that finds syncs running and no mark relies on the last one
 *    to have started: the mark its writes left was cleared by a sync that
 *    started after them, and the last one is that one or a later one.
 *    Marked, it starts a sync of its own.  Syncs are numbered as they
 *    start; a flush relying on number N is covered when N, or any later
 *    one (which started later still), has succeeded.
 *
 *  - A sync that fails marks the member again as it ends (in the same
 *    atomic step that counts it ended): the mark stays until a sync
 *    succeeds, and a flush relying on the failed sync fails too.
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

#define DIRTY_MARKED 1u /* writes completed since the last sync started */
#define DIRTY_SYNC 2u   /* state / DIRTY_SYNC: syncs running */

/* One sync of the member, on the stack of the flush that starts it. */
struct dirty_sync {
  uint64_t gen; /* its number */
  struct dirty_sync *next;
};

struct dirty {
  /* Alone on its cache line: every write to the member reads it. */
  _Alignas(64) _Atomic unsigned state;
  pthread_mutex_t lock;       /* what follows; syncs start and end under it */
  pthread_cond_t cond;        /* a sync ended */
  uint64_t started;           /* syncs started: the last one's number */
  uint64_t ok;                /* the highest-numbered one that succeeded */
  int err;                    /* how the last failed one failed */
  struct dirty_sync *running; /* the syncs running */
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

/* The member was synced by the caller with no request in flight (the
 * volume quiesced) and none will write it again (a member removed by a
 * shrink): no flush has anything to do there from now on.
 */
static inline void
dirty_forget (struct dirty *d)
{
  atomic_store (&d->state, 0);
}

enum dirty_claim {
  DIRTY_CLEAN, /* nothing to do on the member */
  DIRTY_START, /* s is a new sync: start it now, then dirty_end */
  DIRTY_WAIT,  /* rely on sync *need: dirty_wait */
};

/* A flush starting now: what it does on the member. */
extern enum dirty_claim dirty_claim (struct dirty *d, struct dirty_sync *s,
                                     uint64_t *need);

/* Sync s (DIRTY_START) ended with err (0: success). */
extern void dirty_end (struct dirty *d, struct dirty_sync *s, int err);

/* Whether what a flush relying on sync need waits for is over: 1 that or
 * a later sync succeeded, -1 (*err) it failed, 0 not yet.
 */
extern int dirty_check (struct dirty *d, uint64_t need, int *err);

/* Wait for it: 0, or -1 with errno the failed sync's. */
extern int dirty_wait (struct dirty *d, uint64_t need);

#endif /* NBDSTRIPE_DIRTY_H */
