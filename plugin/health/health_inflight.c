/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health, the requests in flight: a slot for each
 * I/O thread saying since when its request has waited and on which
 * members, and the check that fails a member a request has waited on
 * longer than io_timeout.
 */

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "health_impl.h"
#include "util.h"

static struct slot {
  _Atomic uint64_t since;
  _Atomic uint64_t mask;
  _Atomic int used;
} slots[MAX_SLOTS];
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static THREAD_LOCAL int my_slot = -1; /* -2: none was free */

/* In-flight tracking. */

static void
slot_release (void *p)
{
  int idx = (int) (intptr_t) p - 1;
  atomic_store (&slots[idx].since, 0);
  atomic_store (&slots[idx].mask, 0);
  atomic_store (&slots[idx].used, 0);
}

static void
make_slot_key (void)
{
  pthread_key_create (&slot_key, slot_release);
}

/* The calling thread's slot, taken on its first request: -2 when none
 * was free.
 */
static int
take_slot (void)
{
  pthread_once (&slot_once, make_slot_key);
  my_slot = -2;
  for (int i = 0; i < MAX_SLOTS; ++i) {
    int expected = 0;
    if (atomic_compare_exchange_strong (&slots[i].used, &expected, 1)) {
      my_slot = i;
      pthread_setspecific (slot_key, (void *) (intptr_t) (i + 1));
      break;
    }
  }
  return my_slot;
}

_Atomic uint64_t *
health_io_begin (struct health *h, uint64_t now)
{
  int s;

  if (h == NULL || h->p.set.io_timeout == 0)
    return NULL;
  s = my_slot;
  if (s == -1)
    s = take_slot ();
  if (s < 0)
    return NULL;
  atomic_store_explicit (&slots[s].mask, 0, memory_order_relaxed);
  atomic_store_explicit (&slots[s].since, now, memory_order_release);
  return &slots[s].mask;
}

void
health_io_end (struct health *h)
{
  int s = my_slot;

  if (h == NULL || s < 0)
    return;
  atomic_store_explicit (&slots[s].since, 0, memory_order_release);
  atomic_store_explicit (&slots[s].mask, 0, memory_order_relaxed);
}

void
health_check_in_flight (struct health *h, uint64_t now)
{
  uint64_t limit = (uint64_t) h->p.set.io_timeout * 1000000000;

  if (h->p.set.io_timeout == 0)
    return;
  for (unsigned k = 0; k < MAX_SLOTS; ++k) {
    uint64_t since, mask;
    if (!atomic_load_explicit (&slots[k].used, memory_order_relaxed))
      continue;
    since = atomic_load_explicit (&slots[k].since, memory_order_acquire);
    if (since == 0 || now < since || now - since < limit)
      continue;
    mask = atomic_load (&slots[k].mask);
    if (atomic_load (&slots[k].since) != since)
      continue; /* another request began meanwhile */
    for (unsigned i = 0; i < h->n && i < 64; ++i)
      if ((mask >> i & 1) && atomic_load (&h->m[i].state) != MS_FAILED) {
        char reason[REASON_MAX];
        snprintf (reason, sizeof reason,
                  "not answering: a request has waited %" PRIu64
                  " s (io_timeout %u s)",
                  (now - since) / 1000000000, h->p.set.io_timeout);
        health_set_state (h, i, MS_FAILED, reason);
      }
  }
}
