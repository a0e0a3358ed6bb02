/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: members holding writes not yet synced.  See include/dirty.h
 * for why a flush may rely on what it does.
 */

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#include "dirty.h"

void
dirty_init (struct dirty *d)
{
  atomic_init (&d->state, 0);
  pthread_mutex_init (&d->lock, NULL);
  pthread_cond_init (&d->cond, NULL);
  d->started = d->ok = 0;
  d->err = 0;
  d->running = NULL;
}

void
dirty_destroy (struct dirty *d)
{
  pthread_mutex_destroy (&d->lock);
  pthread_cond_destroy (&d->cond);
}

enum dirty_claim
dirty_claim (struct dirty *d, struct dirty_sync *s, uint64_t *need)
{
  enum dirty_claim r = DIRTY_CLEAN;
  unsigned st;

  if (dirty_clean (d))
    return DIRTY_CLEAN;
  pthread_mutex_lock (&d->lock);
  /* The count of syncs and the numbers change under the lock; only the
   * mark is set without it (by writes, which may come at any time: those
   * completed before this flush started have set it by now).
   */
  st = atomic_load (&d->state);
  if (st & DIRTY_MARKED) {
    /* One more running and the mark cleared, in one step, before the
     * sync is issued: a write that completes from now on marks again.
     */
    while (!atomic_compare_exchange_weak (&d->state, &st,
                                          (st & ~DIRTY_MARKED) + DIRTY_SYNC))
      ;
    s->gen = *need = ++d->started;
    s->next = d->running;
    d->running = s;
    r = DIRTY_START;
  }
  else if (st != 0) {
    *need = d->started;
    r = DIRTY_WAIT;
  }
  pthread_mutex_unlock (&d->lock);
  return r;
}

void
dirty_end (struct dirty *d, struct dirty_sync *s, int err)
{
  unsigned st;

  pthread_mutex_lock (&d->lock);
  for (struct dirty_sync **p = &d->running; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  if (err == 0 && s->gen > d->ok)
    d->ok = s->gen;
  if (err)
    d->err = err;
  /* One fewer running, and (failed) marked again, in one step: a flush
   * that looks without the lock never finds the member clean after a
   * failed sync.
   */
  st = atomic_load (&d->state);
  while (!atomic_compare_exchange_weak (
    &d->state, &st, (st - DIRTY_SYNC) | (err ? DIRTY_MARKED : 0)))
    ;
  pthread_cond_broadcast (&d->cond);
  pthread_mutex_unlock (&d->lock);
}

/* dirty_check with the lock held. */
static int
check_locked (struct dirty *d, uint64_t need, int *err)
{
  if (d->ok >= need)
    return 1;
  for (struct dirty_sync *s = d->running; s; s = s->next)
    if (s->gen == need)
      return 0;
  /* Ended, and neither it nor a later one succeeded. */
  *err = d->err ? d->err : EIO;
  return -1;
}

int
dirty_check (struct dirty *d, uint64_t need, int *err)
{
  int r;

  pthread_mutex_lock (&d->lock);
  r = check_locked (d, need, err);
  pthread_mutex_unlock (&d->lock);
  return r;
}

int
dirty_wait (struct dirty *d, uint64_t need)
{
  int r, err = 0;

  pthread_mutex_lock (&d->lock);
  while ((r = check_locked (d, need, &err)) == 0)
    pthread_cond_wait (&d->cond, &d->lock);
  pthread_mutex_unlock (&d->lock);
  if (r < 0) {
    errno = err;
    return -1;
  }
  return 0;
}
