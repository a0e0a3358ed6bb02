/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: members holding writes not yet synced.  See include/dirty.h
 * for why a flush may rely on what it does.
 */

#include <stdatomic.h>

#include "dirty.h"

void
dirty_init (struct dirty *d)
{
  atomic_init (&d->state, 0);
  pthread_mutex_init (&d->lock, NULL);
  pthread_cond_init (&d->cond, NULL);
  d->started = d->ok = d->ended = 0;
  d->err = 0;
}

void
dirty_destroy (struct dirty *d)
{
  pthread_mutex_destroy (&d->lock);
  pthread_cond_destroy (&d->cond);
}

/* dirty_next with the lock held. */
static enum dirty_next
next_locked (struct dirty *d, uint64_t need, uint64_t *gen, int *err)
{
  if (d->ok >= need)
    return DIRTY_DONE;
  if (d->ended >= need) {
    *err = d->err;
    return DIRTY_FAILED;
  }
  if (atomic_load (&d->state) & DIRTY_SYNCING)
    return DIRTY_BUSY;
  /* Cleared as the sync starts, before it is issued: a write that
   * completes from now on marks the member again.
   */
  *gen = ++d->started;
  atomic_store (&d->state, DIRTY_SYNCING);
  return DIRTY_START;
}

enum dirty_next
dirty_claim (struct dirty *d, uint64_t *need, uint64_t *gen)
{
  enum dirty_next r = DIRTY_DONE;
  unsigned s;
  int err;

  if (dirty_clean (d))
    return DIRTY_DONE;
  pthread_mutex_lock (&d->lock);
  /* SYNCING and started change together, under the lock; only MARKED
   * is set without it (by writes, which may come at any time: those
   * completed before this flush started have set it by now).
   */
  s = atomic_load (&d->state);
  *need = d->started + (s & DIRTY_MARKED ? 1 : 0);
  if (s != 0)
    r = next_locked (d, *need, gen, &err);
  pthread_mutex_unlock (&d->lock);
  return r;
}

enum dirty_next
dirty_next (struct dirty *d, uint64_t need, uint64_t *gen, int *err)
{
  enum dirty_next r;

  pthread_mutex_lock (&d->lock);
  r = next_locked (d, need, gen, err);
  pthread_mutex_unlock (&d->lock);
  return r;
}

void
dirty_end (struct dirty *d, uint64_t gen, int err)
{
  unsigned s, to;

  pthread_mutex_lock (&d->lock);
  d->ended = gen;
  if (err == 0)
    d->ok = gen;
  else
    d->err = err;
  /* Not syncing any more, and (failed) marked again, in one step: a
   * flush that looks without the lock must never find the member clean
   * after a failed sync.
   */
  s = atomic_load (&d->state);
  do
    to = (s & ~DIRTY_SYNCING) | (err ? DIRTY_MARKED : 0);
  while (!atomic_compare_exchange_weak (&d->state, &s, to));
  pthread_cond_broadcast (&d->cond);
  pthread_mutex_unlock (&d->lock);
}

void
dirty_wait (struct dirty *d)
{
  uint64_t running;

  pthread_mutex_lock (&d->lock);
  running = d->started;
  while ((atomic_load (&d->state) & DIRTY_SYNCING) && d->started == running)
    pthread_cond_wait (&d->cond, &d->lock);
  pthread_mutex_unlock (&d->lock);
}
