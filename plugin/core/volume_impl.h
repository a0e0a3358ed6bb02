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
#include <stdbool.h>
#include <stdint.h>

#include "health_record.h"
#include "layout.h"
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

/* The members in failed have failed: the request is refused (EIO), the
 * first of them named (volume_io.c).
 */
extern int volume_refuse (struct volume *v, uint64_t failed);

/* Fail fast: a request touching a failed or missing member fails at
 * once with EIO, before any member is touched.
 */
static inline int
refuse_failed (struct volume *v, uint64_t mask)
{
  uint64_t failed = (health_failed_mask (v->health) | v->missing) & mask;

  return failed == 0 ? 0 : volume_refuse (v, failed);
}

/* The volume's members that spans (one per member of vw's layout)
 * touch.
 */
static inline uint64_t
spans_mask (const struct volume_view *vw, const struct layout_span *spans)
{
  uint64_t mask = 0;
  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (spans[j].touched)
      mask |= UINT64_C (1) << vw->map[j];
  return mask;
}

/* The block status of [offset, offset + count) through view vw, run by
 * run to add (volume_extents.c).
 */
/* One request through the job moving data, or the volume's own view,
 * then its lost ranges (volume_io.c).
 */
extern int volume_request_rq (struct volume *v,
                              const struct volume_request *rq);
/* What the allocation map changes (volume_map.c): a read that reaches
 * a free region; a trim or zero that covers whole regions; block
 * status.
 */
extern int volume_read_free (struct volume *v, void *buf, uint64_t count,
                             uint64_t offset);
extern int volume_map_trim_zero (struct volume *v,
                                 const struct volume_request *rq);
extern int volume_map_extents (struct volume *v,
                               const struct volume_request *rq);
extern int volume_view_extents (struct volume *v, const struct volume_view *vw,
                                uint64_t count, uint64_t offset, bool req_one,
                                volume_extent_fn add, void *opaque);

#endif /* NBDSTRIPE_VOLUME_IMPL_H */
