/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what the volume's files share (plugin/core): the gate's
 * entry and exit, on the path of every request.  See include/volume.h and
 * gate.c for why the gate is enough.
 */
#ifndef NBDSTRIPE_VOLUME_IMPL_H
#define NBDSTRIPE_VOLUME_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "volume.h"

#define GATE_CLOSED 2u

/* Wake the drainer: the last request of the old counter has ended.
 * errno kept (the request's).  Out of line: rare, and the request's path
 * stays short.
 */
static void __attribute__ ((noinline, unused))
gate_wake (struct volume_gate *g)
{
  int e = errno;

  pthread_mutex_lock (&g->lock);
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
  errno = e;
}

/* Count this request out; errno is kept. */
static inline void
gate_leave (struct volume *v, unsigned k)
{
  struct volume_gate *g = &v->gate;

  if (atomic_fetch_sub (&g->count[k], 1) == 1 && atomic_load (&g->draining))
    gate_wake (g);
}

/* Count this request in; returns its counter, for gate_leave. */
static inline unsigned
gate_enter (struct volume *v)
{
  struct volume_gate *g = &v->gate;

  for (;;) {
    unsigned e = atomic_load (&g->epoch);

    if (!(e & GATE_CLOSED)) {
      atomic_fetch_add (&g->count[e & 1], 1);
      if (atomic_load (&g->epoch) == e)
        return e & 1;
      gate_leave (v, e & 1); /* a drain flipped it meanwhile: again */
      continue;
    }
    pthread_mutex_lock (&g->lock);
    atomic_fetch_add (&g->waiters, 1);
    while (atomic_load (&g->epoch) & GATE_CLOSED)
      pthread_cond_wait (&g->cond, &g->lock);
    atomic_fetch_sub (&g->waiters, 1);
    pthread_mutex_unlock (&g->lock);
  }
}

/* Run a request's body between gate_enter and gate_leave (which keeps
 * errno).
 */
#define GATED(v, call)                                                        \
  do {                                                                        \
    unsigned k_ = gate_enter (v);                                             \
    int r_ = (call);                                                          \
    gate_leave (v, k_);                                                       \
    return r_;                                                                \
  } while (0)


#endif /* NBDSTRIPE_VOLUME_IMPL_H */
