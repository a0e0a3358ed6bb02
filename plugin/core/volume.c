/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume, members + layout.  See include/volume.h. */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assemble.h"
#include "header.h"
#include "health.h"
#include "identity.h"
#include "ioexec.h"
#include "json.h"
#include "log.h"
#include "plan.h"
#include "util.h"
#include "volume.h"

/* Stop an extents walk after this many runs: the client asks again for
 * the rest, and one request must not do unbounded work.
 */
#define EXTENTS_MAX_RUNS 65536
/* Runs asked of a member at once. */
#define EXTENTS_BATCH 64

int
volume_open (struct volume *v, unsigned nr_members, const char *const *paths,
             const struct volume_options *o)
{
  const struct assembly *a = o->assembly;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint64_t chunk = o->chunk;
  struct member_open_params p = {
    .readonly = o->readonly,
    .direct = o->cache == CACHE_DIRECT,
    .raw = o->raw,
    .connections = o->connections,
    .timeout = o->timeout,
  };
  enum layout_error lerr;
  uint64_t scratch, slen;
  unsigned bad = 0, nr_layout;
  char why[512];

  memset (v, 0, sizeof *v);
  for (unsigned j = 0; j < LAYOUT_MAX_MEMBERS; ++j)
    v->map[j] = j;
  v->view = (struct volume_view){ &v->layout, v->map };
  meta_init (&v->meta, NULL, 0, false);
  pthread_mutex_init (&v->mover_lock, NULL);
  pthread_mutex_init (&v->swap_lock, NULL);
  pthread_mutex_init (&v->gate.lock, NULL);
  pthread_cond_init (&v->gate.cond, NULL);
  pthread_mutex_init (&v->gate.drain_lock, NULL);
  v->readonly = o->readonly;
  v->uring = o->uring;
  v->cache = o->cache;
  if (nr_members == 0) {
    stripe_error ("no members: give at least one file=PATH");
    errno = EINVAL;
    goto err;
  }
  if (nr_members > LAYOUT_MAX_MEMBERS) {
    stripe_error ("%u members given: at most %d are supported", nr_members,
                  LAYOUT_MAX_MEMBERS);
    errno = EINVAL;
    goto err;
  }
  if (chunk == 0 || chunk % LAYOUT_CHUNK_ALIGN != 0) {
    stripe_error ("chunk=%" PRIu64 ": %s", chunk,
                  layout_strerror (LAYOUT_ERR_CHUNK));
    errno = EINVAL;
    goto err;
  }
  {
    void *p;
    int e = posix_memalign (&p, _Alignof (struct dirty),
                            LAYOUT_MAX_MEMBERS * sizeof (struct dirty));
    if (e != 0) {
      errno = e;
      stripe_error ("cannot allocate the volume's state: %m");
      goto err;
    }
    v->dirty = p;
    for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
      dirty_init (&v->dirty[i]);
  }

  for (unsigned i = 0; i < nr_members; ++i) {
    struct member *m = &v->members[i];

    v->nr_members = i + 1; /* member_open leaves it closable */
    if (member_open (m, i, paths[i], &p, why, sizeof why) == -1) {
      int err = errno;
      if (!o->readonly && (err == EROFS || err == EACCES || err == EPERM))
        stripe_error ("member %u (%s): cannot be opened for writing: %s "
                      "(serve the volume read-only with nbdkit -r)",
                      i, paths[i], why);
      else
        stripe_error ("member %u (%s): %s", i, paths[i], why);
      errno = err;
      goto err;
    }
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (identity_alias (&v->members[j].id, &m->id, how, sizeof how)) {
        stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                      "may be given only once, and members must not "
                      "overlap",
                      j, paths[j], i, paths[i], how);
        errno = EINVAL;
        goto err;
      }
    }
    /* Only now: a second name for a member is an alias, not "in use". */
    if (o->claim && member_claim (m, why, sizeof why) == -1) {
      int err = errno;
      stripe_error ("member %u (%s): %s", i, paths[i], why);
      errno = err;
      goto err;
    }
    m->data_offset = a ? a->data_offsets[i] : 0;
    if (m->size < m->data_offset) {
      stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                    "the data offset (%" PRIu64 ")",
                    i, paths[i], m->size, m->data_offset);
      errno = EINVAL;
      goto err;
    }
    sizes[i] = m->size - m->data_offset;
    if (a && a->data_sizes[i] != 0) {
      /* The metadata says how much data the member holds: a member that
       * shrank (or was replaced by a smaller one) would lose data.
       */
      if (a->data_sizes[i] > sizes[i]) {
        stripe_error ("member %u (%s): holds %" PRIu64 " bytes of data "
                      "but the volume expects %" PRIu64 ": truncated or "
                      "replaced by a smaller member?",
                      i, paths[i], sizes[i], a->data_sizes[i]);
        errno = EINVAL;
        goto err;
      }
      sizes[i] = a->data_sizes[i];
    }
    if (m->min_io > v->min_block)
      v->min_block = m->min_io;
    if (m->physical_block > v->preferred_block)
      v->preferred_block = m->physical_block;
  }
  if (v->preferred_block < 4096)
    v->preferred_block = 4096;

  /* Mid-reshape the volume is the old layout, over the members that have
   * a size in it (reshape.h); the job takes the new one.
   */
  nr_layout = nr_members;
  if (a && a->reshape.active) {
    nr_layout = 0;
    for (unsigned i = 0; i < nr_members; ++i)
      if (a->reshape.old_sizes[i]) {
        v->map[nr_layout] = i;
        sizes[nr_layout++] = a->reshape.old_sizes[i];
      }
  }
  lerr = layout_init_as (&v->layout, a ? a->layout : LAYOUT_MD_ALT,
                         a ? a->size_rule : LAYOUT_SIZE_MD, chunk, nr_layout,
                         sizes, &bad);
  bad = v->map[bad];
  if (lerr == LAYOUT_ERR_MEMBER_TOO_SMALL) {
    stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                  "one chunk (chunk=%" PRIu64 ")",
                  bad, paths[bad], sizes[bad], chunk);
    errno = EINVAL;
    goto err;
  }
  if (lerr != LAYOUT_OK) {
    stripe_error ("%s", layout_strerror (lerr));
    errno = EINVAL;
    goto err;
  }
  /* NBD sizes and offsets are signed 64-bit in nbdkit and most clients. */
  if (v->layout.size > INT64_MAX) {
    stripe_error ("the members add up to %" PRIu64 " bytes: a volume can "
                  "be at most %" PRId64 " bytes (2^63 - 1, NBD's limit)",
                  v->layout.size, INT64_MAX);
    errno = EFBIG;
    goto err;
  }
  for (unsigned j = 0; j < nr_layout; ++j) {
    struct member *m = &v->members[v->map[j]];
    m->need = m->data_offset + v->layout.member_size[j];
    if ((a == NULL || a->data_sizes[j] == 0)
        && v->layout.member_size[j] != sizes[j])
      stripe_debug ("member %u (%s): last %" PRIu64 " bytes unused "
                    "(not a whole chunk)",
                    j, paths[j], sizes[j] - v->layout.member_size[j]);
  }
  if (a && a->reshape.active)
    for (unsigned i = 0; i < nr_members; ++i) {
      struct member *m = &v->members[i];
      uint64_t n = a->reshape.new_sizes[i];
      if (m->data_offset + n > m->need)
        m->need = m->data_offset + n;
      if (m->size < m->need) {
        stripe_error ("member %u (%s): size %" PRIu64 " bytes, the reshape "
                      "under way needs %" PRIu64,
                      i, paths[i], m->size, m->need);
        errno = EINVAL;
        goto err;
      }
    }
  meta_free (&v->meta);
  if (meta_init (&v->meta, a, nr_members, !o->readonly) == -1) {
    stripe_error ("malloc: %m");
    goto err;
  }
  /* What zeroing methods work, learnt where nothing lives (the gap
   * between a header and the data), so that a fast zero (known to work,
   * or refused) works from the first request.
   */
  if (o->claim && !o->readonly && meta_scratch (&v->meta, &scratch, &slen))
    for (unsigned i = 0; i < nr_members; ++i)
      if (v->members[i].ops->learn_zero)
        v->members[i].ops->learn_zero (&v->members[i], scratch, slen);
  stripe_debug ("volume: %u members, chunk %" PRIu64 ", %u zone(s), "
                "md layout %s, %" PRIu64 " bytes, cache=%s",
                nr_members, chunk, v->layout.nr_zones,
                layout_name (v->layout.id), v->layout.size,
                cache_mode_name (o->cache));
  return 0;

err:
  volume_close (v);
  return -1;
}

void
volume_close (struct volume *v)
{
  volume_mover_stop (v);
  while (v->movers) {
    struct volume_mover *vm = v->movers;
    v->movers = vm->next;
    vm->free (vm);
  }
  for (unsigned i = v->nr_members; i-- > 0;)
    member_close (&v->members[i]);
  v->nr_members = 0;
  meta_free (&v->meta);
  pthread_mutex_destroy (&v->mover_lock);
  pthread_mutex_destroy (&v->swap_lock);
  pthread_mutex_destroy (&v->gate.lock);
  pthread_cond_destroy (&v->gate.cond);
  pthread_mutex_destroy (&v->gate.drain_lock);
  if (v->dirty) {
    for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
      dirty_destroy (&v->dirty[i]);
    free (v->dirty);
    v->dirty = NULL;
  }
}

/* ---- the gate (struct volume_gate) ----
 *
 * Why it is enough, in C11's terms: every access below is sequentially
 * consistent, so all of them fall into one total order.  A request that
 * read v->mover as NULL did so after it counted itself (fetch_add) and
 * saw the epoch unchanged; a job stores v->mover, then flips the epoch,
 * then reads the old counter.  The request's load of v->mover precedes the
 * store (it saw NULL), so its fetch_add precedes the drainer's read of
 * the counter, which therefore sees it until the request has ended.  A
 * request that saw the new epoch reads v->mover after the flip, which
 * follows the store: it sees the job.
 */

#define GATE_CLOSED 2u

static inline void
gate_leave (struct volume *v, unsigned k)
{
  struct volume_gate *g = &v->gate;

  if (atomic_fetch_sub (&g->count[k], 1) == 1 && atomic_load (&g->draining)) {
    pthread_mutex_lock (&g->lock);
    pthread_cond_broadcast (&g->cond);
    pthread_mutex_unlock (&g->lock);
  }
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

/* Flip the epoch (closing the gate too if close) and wait for the old
 * counter.  With drain_lock held: the other counter was emptied by the
 * drain before.
 */
static void
gate_flip_and_wait (struct volume *v, bool close)
{
  struct volume_gate *g = &v->gate;
  unsigned e, old;

  pthread_mutex_lock (&g->lock);
  e = atomic_load (&g->epoch);
  old = e & 1;
  atomic_store (&g->draining, true);
  atomic_store (&g->epoch, (e ^ 1) | (close ? GATE_CLOSED : 0));
  while (atomic_load (&g->count[old]) != 0)
    pthread_cond_wait (&g->cond, &g->lock);
  atomic_store (&g->draining, false);
  pthread_mutex_unlock (&g->lock);
}

void
volume_drain (struct volume *v)
{
  pthread_mutex_lock (&v->gate.drain_lock);
  gate_flip_and_wait (v, false);
  pthread_mutex_unlock (&v->gate.drain_lock);
}

void
volume_quiesce (struct volume *v)
{
  pthread_mutex_lock (&v->gate.drain_lock);
  v->gate.closed_ns = now_ns ();
  gate_flip_and_wait (v, true);
}

unsigned
volume_clients_held (struct volume *v)
{
  return atomic_load (&v->gate.waiters);
}

/* ---- the job slot and the switch (mover.h) ---- */

static bool
mover_ended (struct volume *v)
{
  struct volume_mover *vm = atomic_load (&v->mover);

  return vm != NULL && vm->ended (vm);
}

int
volume_mover_reserve (struct volume *v, char *why, size_t len)
{
  pthread_mutex_lock (&v->mover_lock);
  /* A job that has ended is not running: once the status says so (and
   * the command's --wait has returned), a new one is not refused.  Wait
   * (10 s at most) for its copier to let go of the volume.
   */
  for (int i = 0; i < 1000 && mover_ended (v); ++i) {
    struct timespec ts = { 0, 10 * 1000000L };
    pthread_mutex_unlock (&v->mover_lock);
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&v->mover_lock);
  }
  if (v->mover_starting)
    snprintf (why, len, "a replace is being started already");
  else if (atomic_load (&v->mover) != NULL)
    snprintf (why, len, "%s is running already",
              atomic_load (&v->mover)->what);
  else if (v->readonly)
    snprintf (why, len, "the volume is served read-only");
  else {
    v->mover_starting = true;
    pthread_mutex_unlock (&v->mover_lock);
    return 0;
  }
  pthread_mutex_unlock (&v->mover_lock);
  return -1;
}

void
volume_mover_unreserve (struct volume *v)
{
  pthread_mutex_lock (&v->mover_lock);
  v->mover_starting = false;
  pthread_mutex_unlock (&v->mover_lock);
}

void
volume_mover_publish (struct volume *v, struct volume_mover *vm)
{
  pthread_mutex_lock (&v->mover_lock);
  v->mover_starting = false;
  vm->next = v->movers;
  v->movers = vm;
  atomic_store (&v->mover, vm);
  pthread_mutex_unlock (&v->mover_lock);
}

void
volume_mover_withdraw (struct volume *v)
{
  atomic_store (&v->mover, NULL);
  volume_drain (v);
}

struct volume_mover *
volume_mover_last (struct volume *v)
{
  struct volume_mover *vm;

  pthread_mutex_lock (&v->mover_lock);
  vm = v->movers;
  pthread_mutex_unlock (&v->mover_lock);
  return vm;
}

void
volume_mover_stop (struct volume *v)
{
  pthread_mutex_lock (&v->mover_lock);
  struct volume_mover *vm = v->movers;
  pthread_mutex_unlock (&v->mover_lock);
  for (; vm; vm = vm->next)
    vm->stop (vm);
}

void
volume_switch_begin (struct volume *v)
{
  pthread_mutex_lock (&v->swap_lock);
  volume_quiesce (v);
}

uint64_t
volume_switch_end (struct volume *v)
{
  uint64_t held = volume_resume (v);

  pthread_mutex_unlock (&v->swap_lock);
  return held;
}

void
volume_switch_member (struct volume *v, unsigned i, struct member *m)
{
  struct member *old = &v->members[i];
  struct member tmp = *old;

  m->data_offset = old->data_offset;
  m->need = old->need;
  *old = *m;
  *m = tmp;
  /* The new device takes over the index's dirty state (dirty.h), and is
   * marked: it was synced with nothing in flight, so every write answered
   * so far is durable on it already, but one sync more after a switch
   * costs nothing and keeps it right even if it ever stops being synced
   * under the hold.
   */
  dirty_mark (&v->dirty[i]);
}

int
volume_add_member (struct volume *v, struct member *m, char *why, size_t len)
{
  unsigned i = v->nr_members;

  if (i >= LAYOUT_MAX_MEMBERS) {
    snprintf (why, len, "the volume has %u members already, the most there "
              "can be", i);
    return -1;
  }
  if (health_member_add (v->health, m->path, member_remote (m)) == -1) {
    snprintf (why, len, "health: %s", strerror (errno));
    return -1;
  }
  m->index = i;
  v->members[i] = *m;
  memset (m, 0, sizeof *m);
  dirty_init (&v->dirty[i]);
  if (v->members[i].min_io > v->min_block)
    v->min_block = v->members[i].min_io;
  v->nr_members = i + 1;
  return 0;
}

void
volume_switch_layout (struct volume *v, const struct layout *l,
                      const uint8_t *map)
{
  v->layout = *l;
  memcpy (v->map, map, l->nr_members);
  for (unsigned j = 0; j < l->nr_members; ++j) {
    struct member *m = &v->members[map[j]];
    m->need = m->data_offset + l->member_size[j];
  }
}

bool
volume_alias_of (struct volume *v, const struct member *m, unsigned *j,
                 char *how, size_t len)
{
  bool alias = false;

  pthread_mutex_lock (&v->swap_lock);
  for (unsigned k = 0; k < v->nr_members && !alias; ++k)
    if (identity_alias (&v->members[k].id, &m->id, how, len)) {
      *j = k;
      alias = true;
    }
  pthread_mutex_unlock (&v->swap_lock);
  return alias;
}

uint64_t
volume_resume (struct volume *v)
{
  struct volume_gate *g = &v->gate;
  uint64_t held = now_ns () - g->closed_ns;

  pthread_mutex_lock (&g->lock);
  atomic_store (&g->epoch, atomic_load (&g->epoch) & ~GATE_CLOSED);
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
  pthread_mutex_unlock (&g->drain_lock);
  return held;
}

/* Run a request's body between gate_enter and gate_leave, errno kept. */
#define GATED(v, call)                                                        \
  do {                                                                        \
    unsigned k_ = gate_enter (v);                                             \
    int r_ = (call), e_ = errno;                                              \
    gate_leave (v, k_);                                                       \
    errno = e_;                                                               \
    return r_;                                                                \
  } while (0)

int
volume_start (struct volume *v)
{
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (member_start (&v->members[i]) == -1)
      return -1;
  return 0;
}

bool
volume_can_fast_zero (const struct volume *v)
{
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (!v->members[i].ops->can_fast_zero (&v->members[i]))
      return false;
  return true;
}

/* Fail fast: a request touching a failed member fails at once with EIO,
 * before any member is touched.
 */
static int
refuse_failed (struct volume *v, uint64_t mask)
{
  uint64_t failed = health_failed_mask (v->health) & mask;

  if (failed == 0)
    return 0;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (failed >> i & 1) {
      health_rejected (v->health, i);
      stripe_debug ("member %u (%s) has failed: request refused (EIO)", i,
                    v->members[i].path);
      errno = EIO;
      return -1;
    }
  return 0;
}

/* A request the members cannot take is the client's error: refused with
 * EINVAL to that client alone, before it reaches a member, and no
 * member's health.
 */
static inline int
check_request (const struct volume *v, uint64_t count, uint64_t offset)
{
  if (((offset | count) & (v->min_block - 1)) != 0 || offset > v->layout.size
      || count > v->layout.size - offset) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Run ops, recording each one with health. */
static int
run_ops_plain (struct volume *v, struct member_op *ops, unsigned nr)
{
  _Atomic uint64_t *busy = health_io_begin (v->health);
  int r, err;

  for (unsigned i = 0; i < nr; ++i)
    ops[i].busy = ops[i].shadow ? NULL : busy;
  r = ioexec_run (ops, nr, v->uring);
  err = errno;
  health_io_end (v->health);
  if (v->health)
    for (unsigned i = 0; i < nr; ++i)
      if (ops[i].kind < OP_NR_TRACKED && !ops[i].shadow)
        health_record (v->health, ops[i].m->index, ops[i].kind,
                       ops[i].kind == OP_FLUSH ? 0 : ops[i].length, ops[i].ns,
                       ops[i].err, ops[i].offset);
  errno = err;
  return r;
}

/* ... or, while data moves, through the job moving it (mover.h). */
static inline int
run_ops (struct volume *v, struct member_op *ops, unsigned nr)
{
  /* Read after the request was counted (gate_enter): see the gate. */
  struct volume_mover *vm = atomic_load (&v->mover);

  if (vm != NULL)
    return vm->run_ops (vm, v, ops, nr, run_ops_plain);
  return run_ops_plain (v, ops, nr);
}

/* A member found unusable outside of an I/O error: failed at once, named. */
static void
member_gone (struct volume *v, unsigned i, const char *reason)
{
  stripe_error ("member %u (%s): %s", i, v->members[i].path, reason);
  health_member_gone (v->health, i, reason);
}

/* A write must never make a truncated member file look whole: one cut
 * short under us and written up to its end would have its old size again,
 * with holes where its data was, and the loss would go unseen -- by
 * health's prober too, which checks sizes.  Only a write that reaches the
 * member's end (m->need: no write goes past it) can do that, so only
 * those are checked, before and after (tail_writes).  Other writes cost
 * nothing here: one that lands past a cut extends the file to less than
 * the volume needs, and the prober fails the member within a second
 * (member_ops.check, every member every tick).  The kernel has no way to
 * refuse a write past end of file that applies to one file (file seals
 * are for memfd and tmpfs, RLIMIT_FSIZE is the process's), and a size
 * check before every write was two fstat calls per request.  Before such
 * a write, every regular-file member in mask must still hold what the
 * volume needs; seen[] keeps the sizes found.
 */
static int
guard_sizes (struct volume *v, uint64_t mask, uint64_t *seen)
{
  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *m = &v->members[i];
    char reason[256];

    if (!(mask >> i & 1) || !member_may_shrink (m))
      continue;
    if (member_current_size (m, &seen[i]) == -1) {
      snprintf (reason, sizeof reason, "device gone: size: %s",
                strerror (errno));
      member_gone (v, i, reason);
      errno = EIO;
      return -1;
    }
    if (seen[i] < m->need) {
      snprintf (reason, sizeof reason,
                "device gone: truncated to %" PRIu64 " bytes, the volume "
                "needs %" PRIu64 " (nothing written to it)",
                seen[i], m->need);
      member_gone (v, i, reason);
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

/* After the write: a size that changed meanwhile means the file was cut
 * (and perhaps re-extended by this very write).
 */
static int
recheck_sizes (struct volume *v, uint64_t mask, const uint64_t *seen)
{
  int r = 0;

  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *m = &v->members[i];
    uint64_t now;
    char reason[256];

    if (!(mask >> i & 1) || !member_may_shrink (m))
      continue;
    if (member_current_size (m, &now) == 0 && now == seen[i])
      continue;
    snprintf (reason, sizeof reason,
              "device gone: its size changed during a write (%" PRIu64
              " -> %" PRIu64 " bytes): truncated under the volume?",
              seen[i], now);
    member_gone (v, i, reason);
    r = -1;
  }
  if (r == -1)
    errno = EIO;
  return r;
}

/* One read or write op, its fields but the executor's and the backend's
 * (which need no initialising): cheaper than a compound literal that
 * clears all of it, on the path of every request.
 */
static inline void
rw_op (struct member_op *op, struct member *m, enum op_kind kind,
       uint64_t offset, uint64_t length, const struct iovec *iov,
       unsigned nr_iov, bool fua)
{
  op->m = m;
  op->kind = kind;
  op->offset = offset;
  op->length = length;
  op->iov = iov;
  op->nr_iov = nr_iov;
  op->fua = fua;
  op->may_trim = op->fast = op->shadow = false;
  op->max_runs = 0;
  op->extents = NULL;
  op->busy = NULL;
}

/* The members in mask hold what a request wrote, trimmed or zeroed, now
 * completed and about to be answered: the next flush syncs them
 * (dirty.h).  Not for what is durable already (FUA, writethrough).
 */
static inline void
mark_dirty (struct volume *v, uint64_t mask)
{
  for (; mask; mask &= mask - 1)
    dirty_mark (&v->dirty[__builtin_ctzll (mask)]);
}

/* The regular-file members that ops write up to their end (guard_sizes). */
static inline uint64_t
tail_writes (const struct member_op *ops, unsigned nr)
{
  uint64_t mask = 0;

  for (unsigned k = 0; k < nr; ++k)
    if (ops[k].offset + ops[k].length == ops[k].m->need
        && member_may_shrink (ops[k].m))
      mask |= UINT64_C (1) << ops[k].m->index;
  return mask;
}

/* The reads or writes of one request, on the members in mask. */
static int
run_rw (struct volume *v, enum op_kind kind, struct member_op *ops,
        unsigned nr, uint64_t mask)
{
  uint64_t seen[LAYOUT_MAX_MEMBERS], tail;
  int r;

  if (refuse_failed (v, mask) == -1)
    return -1;
  if (kind != OP_WRITE)
    return run_ops (v, ops, nr);
  /* A member is switched only with no request in flight
   * (volume_quiesce): the sizes seen are those of the members written.
   */
  tail = tail_writes (ops, nr);
  if (tail && guard_sizes (v, tail, seen) == -1)
    return -1;
  r = run_ops (v, ops, nr);
  /* Marked whatever the outcome: a write that failed on one member may
   * have landed on another, or in part.
   */
  if (!ops[0].fua)
    mark_dirty (v, mask);
  if (tail && recheck_sizes (v, tail, seen) == -1)
    r = -1;
  return r;
}

static int
rw (struct volume *v, const struct volume_view *vw, enum op_kind kind,
    void *buf, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_piece p;
  struct io_plan plan;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  uint64_t mask = 0;
  int r = -1;

  /* Most requests lie inside one chunk: one member, one op, no plan. */
  layout_map (vw->layout, offset, count, &p);
  if (p.length == count) {
    struct iovec iov = { buf, count };
    struct member *m = &v->members[vw->map[p.member]];
    rw_op (&ops[0], m, kind, m->data_offset + p.member_offset, count, &iov, 1,
           fua);
    return run_rw (v, kind, ops, 1, UINT64_C (1) << vw->map[p.member]);
  }

  if (plan_rw (&plan, vw->layout, buf, count, offset) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i) {
    const struct member_io *io = &plan.ios[i];
    struct member *m = &v->members[vw->map[io->member]];
    mask |= UINT64_C (1) << vw->map[io->member];
    rw_op (&ops[i], m, kind, m->data_offset + io->member_offset, io->length,
           io->iov, io->nr_iov, fua);
  }
  r = run_rw (v, kind, ops, plan.nr_ios, mask);
out : {
  int err = errno;
  plan_free (&plan);
  errno = err;
}
  return r;
}

/* A request through the volume's own view, or through the job moving
 * data when it sees requests whole (a restripe).
 */
static int
request (struct volume *v, const struct volume_request *rq)
{
  struct volume_mover *vm;

  if (check_request (v, rq->count, rq->offset) == -1)
    return -1;
  /* Read after the request was counted (gate_enter): see the gate. */
  vm = atomic_load (&v->mover);
  if (vm != NULL && vm->request != NULL)
    return vm->request (vm, v, rq);
  return volume_request_view (v, &v->view, rq);
}

int
volume_pread (struct volume *v, void *buf, uint64_t count, uint64_t offset)
{
  const struct volume_request rq = { .kind = OP_READ, .buf = buf,
                                     .count = count, .offset = offset };
  GATED (v, request (v, &rq));
}

int
volume_pwrite (struct volume *v, const void *buf, uint64_t count,
               uint64_t offset, bool fua)
{
  /* The iovec is not const, but writes only read from it. */
  const struct volume_request rq = {
    .kind = OP_WRITE, .buf = (void *) buf, .count = count, .offset = offset,
    .fua = fua || v->cache == CACHE_WRITETHROUGH,
  };
  GATED (v, request (v, &rq));
}

/* The volume's members that spans (one per member of vw's layout)
 * touch.
 */
static uint64_t
spans_mask (const struct volume_view *vw, const struct layout_span *spans)
{
  uint64_t mask = 0;
  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (spans[j].touched)
      mask |= UINT64_C (1) << vw->map[j];
  return mask;
}

/* Flush the members marked in spans, concurrently: FUA for a trim or a
 * zero, whatever else the members hold.
 */
static int
flush_members (struct volume *v, const struct volume_view *vw,
               const struct layout_span *spans)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;

  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (spans[j].touched)
      ops[nr++] = (struct member_op){ .m = &v->members[vw->map[j]],
                                      .kind = OP_FLUSH };
  return run_ops (v, ops, nr);
}

/* FLUSH: every write, trim and zero completed (on any connection) before
 * this call is durable when it returns 0.  Syncs only the members that
 * hold such writes, concurrently, or relies on a sync of theirs that
 * another flush started late enough (dirty.h); returns at once when no
 * member holds any.  A member that holds some and has failed fails the
 * flush at once (EIO); one that holds none is not asked.
 */
static int
flush_ (struct volume *v)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  struct dirty_sync syncs[LAYOUT_MAX_MEMBERS];
  uint64_t need[LAYOUT_MAX_MEMBERS], held = 0, wait = 0;
  unsigned idx[LAYOUT_MAX_MEMBERS], nr = 0;
  int err = 0;

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (!dirty_clean (&v->dirty[i]))
      held |= UINT64_C (1) << i;
  if (held == 0)
    return 0;
  if (refuse_failed (v, held) == -1)
    return -1;
  for (; held; held &= held - 1) {
    unsigned i = __builtin_ctzll (held);

    switch (dirty_claim (&v->dirty[i], &syncs[nr], &need[i])) {
    case DIRTY_CLEAN: break;
    case DIRTY_START:
      idx[nr] = i;
      ops[nr++] = (struct member_op){ .m = &v->members[i], .kind = OP_FLUSH };
      break;
    case DIRTY_WAIT: wait |= UINT64_C (1) << i; break;
    }
  }
  /* This flush's own syncs, all at once, ended (waking whoever relies on
   * them) before it waits for anyone else's.
   */
  if (nr > 0) {
    run_ops (v, ops, nr);
    for (unsigned k = 0; k < nr; ++k) {
      dirty_end (&v->dirty[idx[k]], &syncs[k], ops[k].err);
      if (ops[k].err && err == 0)
        err = ops[k].err;
    }
  }
  for (; wait; wait &= wait - 1) {
    unsigned i = __builtin_ctzll (wait);
    if (dirty_wait (&v->dirty[i], need[i]) == -1 && err == 0)
      err = errno;
  }
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

int
volume_flush (struct volume *v)
{
  GATED (v, flush_ (v));
}

/* One op per touched member over its one contiguous range. */
static unsigned
span_ops (struct volume *v, const struct volume_view *vw,
          const struct layout_span *spans, enum op_kind kind,
          struct member_op *ops)
{
  unsigned nr = 0;

  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (spans[j].touched) {
      struct member *m = &v->members[vw->map[j]];
      ops[nr++] = (struct member_op){
        .m = m,
        .kind = kind,
        .offset = m->data_offset + spans[j].member_offset,
        .length = spans[j].length,
      };
    }
  return nr;
}

/* Each touched member gets ONE contiguous range for the whole request, as
 * Linux md raid0 does since 4.12, never one discard per chunk; all the
 * members at once.
 */
static int
trim_ (struct volume *v, const struct volume_view *vw, uint64_t count,
       uint64_t offset, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  int r;

  layout_spans (vw->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (vw, spans)) == -1)
    return -1;
  r = run_ops (v, ops, span_ops (v, vw, spans, OP_TRIM, ops));
  if (!fua && v->cache != CACHE_WRITETHROUGH)
    mark_dirty (v, spans_mask (vw, spans));
  else if (flush_members (v, vw, spans) == -1 && r == 0)
    r = -1;
  return r;
}

int
volume_trim (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  const struct volume_request rq = { .kind = OP_TRIM, .count = count,
                                     .offset = offset, .fua = fua };
  GATED (v, request (v, &rq));
}

static int
zero_ (struct volume *v, const struct volume_view *vw, uint64_t count,
       uint64_t offset, bool may_trim, bool fast, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr;
  bool durable;
  int r;

  layout_spans (vw->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (vw, spans)) == -1)
    return -1;

  /* Refuse up front what some member is known not to do, so that a slow
   * zero goes straight to nbdkit writing zeroes; and a fast zero unless
   * every member it touches is known to manage one: a fast zero that
   * fails must have changed nothing.
   */
  nr = span_ops (v, vw, spans, OP_ZERO, ops);
  for (unsigned k = 0; k < nr; ++k) {
    const struct member *m = ops[k].m;

    ops[k].may_trim = may_trim;
    ops[k].fast = fast;
    if (m->ops->zero_known_unsupported (m, ops[k].offset, ops[k].length,
                                        may_trim, fast)
        || (fast
            && !m->ops->fast_zero_known (m, ops[k].offset, ops[k].length,
                                         may_trim))) {
      errno = EOPNOTSUPP;
      return -1;
    }
  }
  /* A fast zero that fails must change nothing: an NBD server that
   * advertised fast zero can still refuse it, so those go first, one at a
   * time, and the rest (known to manage) only when they all did.
   */
  durable = fua || v->cache == CACHE_WRITETHROUGH;
  if (fast) {
    unsigned rest = 0;
    for (unsigned k = 0; k < nr; ++k) {
      if (!ops[k].m->ops->async)
        ops[rest++] = ops[k];
      else if (run_ops (v, &ops[k], 1) == -1) {
        if (!durable)
          mark_dirty (v, spans_mask (vw, spans));
        return -1;
      }
    }
    nr = rest;
  }
  r = nr > 0 ? run_ops (v, ops, nr) : 0;
  if (!durable)
    mark_dirty (v, spans_mask (vw, spans));
  if (r == -1)
    return -1;
  if (durable)
    return flush_members (v, vw, spans);
  return 0;
}

int
volume_zero (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
             bool fast, bool fua)
{
  const struct volume_request rq = { .kind = OP_ZERO, .count = count,
                                     .offset = offset, .may_trim = may_trim,
                                     .fast = fast, .fua = fua };
  GATED (v, request (v, &rq));
}

/* A member's block status from 'from' on: what was asked so far. */
struct runs {
  struct extent_list l;
  uint64_t from, to; /* member offsets covered by l */
};

/* Ask each member in want[] for the block status of [from[i], end[i]),
 * at most max runs each, all at once.
 */
static int
fetch_runs (struct volume *v, const struct volume_view *vw, struct runs *r,
            const uint64_t *from, const uint64_t *end, const bool *want,
            unsigned max)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;
  int ret;

  for (unsigned i = 0; i < vw->layout->nr_members; ++i) {
    if (!want[i])
      continue;
    r[i].l.nr = 0;
    r[i].from = r[i].to = from[i];
    ops[nr++] = (struct member_op){
      .m = &v->members[vw->map[i]],
      .kind = OP_EXTENTS,
      .offset = from[i],
      .length = end[i] - from[i],
      .max_runs = max,
      .extents = &r[i].l,
    };
  }
  ret = ioexec_run (ops, nr, v->uring);
  for (unsigned i = 0; i < vw->layout->nr_members; ++i)
    if (want[i])
      for (unsigned k = 0; k < r[i].l.nr; ++k)
        r[i].to += r[i].l.runs[k].length;
  return ret;
}

static int
extents_ (struct volume *v, const struct volume_view *vw, uint64_t count,
          uint64_t offset, bool req_one, volume_extent_fn add, void *opaque)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct runs r[LAYOUT_MAX_MEMBERS];
  uint64_t from[LAYOUT_MAX_MEMBERS], end[LAYOUT_MAX_MEMBERS];
  bool want[LAYOUT_MAX_MEMBERS];
  struct layout_iter it;
  struct layout_piece p;
  unsigned runs = 0;
  uint32_t first_flags = 0;
  int ret = -1;

  layout_spans (vw->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (vw, spans)) == -1)
    return -1;
  memset (r, 0, sizeof r);
  for (unsigned i = 0; i < vw->layout->nr_members; ++i) {
    want[i] = spans[i].touched;
    from[i] = v->members[vw->map[i]].data_offset + spans[i].member_offset;
    end[i] = from[i] + spans[i].length;
  }
  /* Every touched member at once; a client wanting one run needs only
   * the first of each.
   */
  if (fetch_runs (v, vw, r, from, end, want, req_one ? 1 : EXTENTS_BATCH)
      == -1)
    goto out;

  layout_iter_init (&it, vw->layout, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct runs *c = &r[p.member];
    uint64_t base =
      v->members[vw->map[p.member]].data_offset + p.member_offset;
    uint64_t pos = base, pend = base + p.length;

    while (pos < pend) {
      uint64_t at = c->from;
      unsigned k = 0;

      if (pos >= c->to) {
        /* This member has more runs than it sent: ask again, alone. */
        bool one[LAYOUT_MAX_MEMBERS] = { 0 };
        uint64_t f[LAYOUT_MAX_MEMBERS], e[LAYOUT_MAX_MEMBERS];
        one[p.member] = true;
        f[p.member] = pos;
        e[p.member] = end[p.member];
        if (fetch_runs (v, vw, r, f, e, one, EXTENTS_BATCH) == -1)
          goto out;
        if (c->to <= pos) {
          errno = EIO; /* a member that reports nothing */
          goto out;
        }
        continue;
      }
      while (at + c->l.runs[k].length <= pos)
        at += c->l.runs[k++].length;
      uint64_t run_end = at + c->l.runs[k].length;
      uint64_t len = (run_end < pend ? run_end : pend) - pos;
      uint32_t flags = c->l.runs[k].flags;

      if (runs == 0)
        first_flags = flags;
      else if (req_one && flags != first_flags) {
        ret = 0;
        goto out;
      }
      if (add (opaque, p.offset + (pos - base), len, flags) == -1)
        goto out;
      if (++runs >= EXTENTS_MAX_RUNS) {
        ret = 0;
        goto out;
      }
      pos += len;
    }
  }
  ret = 0;
out:
  for (unsigned i = 0; i < vw->layout->nr_members; ++i)
    free (r[i].l.runs);
  return ret;
}

int
volume_request_view (struct volume *v, const struct volume_view *vw,
                     const struct volume_request *rq)
{
  switch (rq->kind) {
  case OP_READ:
  case OP_WRITE:
    return rw (v, vw, rq->kind, rq->buf, rq->count, rq->offset, rq->fua);
  case OP_TRIM: return trim_ (v, vw, rq->count, rq->offset, rq->fua);
  case OP_ZERO:
    return zero_ (v, vw, rq->count, rq->offset, rq->may_trim, rq->fast,
                  rq->fua);
  case OP_EXTENTS:
    return extents_ (v, vw, rq->count, rq->offset, rq->req_one, rq->add,
                     rq->opaque);
  case OP_FLUSH: break;
  }
  errno = EINVAL;
  return -1;
}

int
volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                bool req_one, volume_extent_fn add, void *opaque)
{
  const struct volume_request rq = { .kind = OP_EXTENTS, .count = count,
                                     .offset = offset, .req_one = req_one,
                                     .add = add, .opaque = opaque };
  GATED (v, request (v, &rq));
}

/* Health's side: from its prober thread. */

/* A new generation on every member but skip (and failed ones); returns
 * the old and new.  With swap_lock held: no replace switches a member
 * under the writes (the I/O path never takes it).
 */
static void
bump (struct volume *v, int skip, const char *cause, uint64_t *old,
      uint64_t *events)
{
  char why[256];

  *events = meta_next_generation (&v->meta, old);
  for (unsigned j = 0; j < v->nr_members; ++j) {
    if ((int) j == skip || health_member_state (v->health, j) == MS_FAILED)
      continue;
    if (meta_write_generation (&v->meta, j, &v->members[j], *events, why,
                               sizeof why)
        == -1)
      stripe_error ("member %u (%s): cannot record generation %" PRIu64
                    " (%s): %s",
                    j, v->members[j].path, *events, cause, why);
  }
}

void
volume_bump_generation (struct volume *v, int skip, const char *why)
{
  uint64_t old, events;

  if (!meta_records_dropouts (&v->meta))
    return;
  pthread_mutex_lock (&v->swap_lock);
  bump (v, skip, why, &old, &events);
  pthread_mutex_unlock (&v->swap_lock);
  stripe_debug ("volume '%s': generation %" PRIu64 " -> %" PRIu64 " (%s)",
                v->meta.name, old, events, why);
}

/* Member i dropped out of a volume that goes on: bump the generation on
 * every member still in it, then (best effort, through the descriptor
 * still open: a member whose path was replaced is still reachable that
 * way) on member i, so that an older copy of any of them is told apart.
 * Formats that record no drop-out (meta.h) say why.
 */
static void
health_dropped (void *opaque, unsigned i)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  uint64_t old, events;
  char why[256], cause[64];
  bool reached = false;

  if (!meta_records_dropouts (&v->meta))
    return;
  snprintf (cause, sizeof cause, "member %u dropped out", i);
  pthread_mutex_lock (&v->swap_lock);
  bump (v, (int) i, cause, &old, &events);
  /* Not a file cut short: writing its record would extend it. */
  if (!member_cut_short (m)
      && meta_write_generation (&v->meta, i, m, events, why, sizeof why) == 0)
    reached = true;
  stripe_warning ("member %u (%s) dropped out of volume '%s': generation "
                  "%" PRIu64 " -> %" PRIu64 "%s",
                  i, m->path, v->meta.name, old, events,
                  reached ? " (on it too)"
                          : " (not on it: it is taken back at the old one)");
  pthread_mutex_unlock (&v->swap_lock);
}

static int
health_check (void *opaque, unsigned i, char *why, size_t len)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  int r;

  pthread_mutex_lock (&v->swap_lock);
  r = m->ops->check (m, why, len);
  pthread_mutex_unlock (&v->swap_lock);
  return r;
}

/* What a re-probe found, for adopt. */
struct fresh {
  struct member m; /* opened afresh on the member's name */
  uint64_t events; /* the generation its header holds now */
};

static void
health_discard (void *opaque, unsigned i, void *p)
{
  struct fresh *f = p;

  (void) opaque;
  (void) i;
  if (f == NULL)
    return;
  member_close (&f->m);
  free (f);
}

static int probe_ (struct volume *v, unsigned i, void **out, char *why,
                   size_t len);

/* Open member i afresh and prove it is the same member: the same inode
 * or device (without a header, or read-only), else its header and
 * generation; claim it if it is another file; read its first block from
 * the device; bring its header up to the volume's generation.  Under
 * swap_lock: a replace does not switch the member meanwhile (it waits for
 * the probe).
 */
static int
health_probe (void *opaque, unsigned i, void **out, char *why, size_t len)
{
  struct volume *v = opaque;
  int r;

  pthread_mutex_lock (&v->swap_lock);
  r = probe_ (v, i, out, why, len);
  pthread_mutex_unlock (&v->swap_lock);
  return r;
}

static int
probe_ (struct volume *v, unsigned i, void **out, char *why, size_t len)
{
  struct member *m = &v->members[i];
  struct fresh *f = calloc (1, sizeof *f);
  char reason[384], a[256], b[256];
  uint8_t buf[META_PROBE_BYTES];
  bool same;
  ssize_t n;

  *out = NULL;
  if (f == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  if (member_open (&f->m, i, m->path, &m->params, reason, sizeof reason)
      == -1) {
    snprintf (why, len, "%s: %s", m->path, reason);
    goto err;
  }
  if (!member_same_kind (&f->m, m)) {
    snprintf (why, len, "%s is no longer a %s", m->path, member_what (m));
    goto err;
  }
  same = identity_same (&m->id, &f->m.id);
  if (!same && member_has_inode (m)
      && (!v->meta.ops->proves_identity || v->readonly)) {
    /* Nothing but the inode or device says which member this is. */
    snprintf (why, len, "another file: %s now names %s, the volume opened %s",
              m->path, identity_describe (&f->m.id, a, sizeof a),
              identity_describe (&m->id, b, sizeof b));
    goto err;
  }
  if (f->m.size < m->need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes, the volume needs %" PRIu64,
              m->path, f->m.size, m->need);
    goto err;
  }
  /* The device itself must answer. */
  n = member_pread (&f->m, buf, sizeof buf, 0, true, reason, sizeof reason);
  if (n != sizeof buf) {
    snprintf (why, len, "%s: reading the first %u bytes: %s", m->path,
              META_PROBE_BYTES, n == -1 ? reason : "short read");
    goto err;
  }
  if (meta_check_probed (&v->meta, i, m->path, buf, n, &f->events, why, len)
      == -1)
    goto err;
  if (!same && member_has_inode (m)) {
    /* Another file that proves to be this member (a device that came
     * back under another number, a remounted file system): it must not
     * be another member too, and it is claimed as the first was.
     */
    for (unsigned j = 0; j < v->nr_members; ++j) {
      char how[512];
      if (j != i
          && identity_alias (&v->members[j].id, &f->m.id, how, sizeof how)) {
        snprintf (why, len, "%s and member %u (%s) are %s", m->path, j,
                  v->members[j].path, how);
        goto err;
      }
    }
    if (member_claim (&f->m, reason, sizeof reason) == -1) {
      snprintf (why, len, "%s: %s", m->path, reason);
      goto err;
    }
  }
  /* Taken back: at the volume's generation, like the others. */
  if (meta_records_dropouts (&v->meta)) {
    uint64_t now = meta_generation (&v->meta);
    if (f->events != now) {
      struct member *w = same && member_has_inode (m) ? m : &f->m;
      if (meta_write_generation (&v->meta, i, w, now, reason, sizeof reason)
          == -1) {
        snprintf (why, len, "%s: %s", m->path, reason);
        goto err;
      }
      f->events = now;
    }
  }
  *out = f;
  return 0;

err:
  health_discard (v, i, f);
  return -1;
}

static void
health_adopt (void *opaque, unsigned i, void *p)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  struct fresh *f = p;

  pthread_mutex_lock (&v->swap_lock);
  m->ops->adopt (m, &f->m);
  pthread_mutex_unlock (&v->swap_lock);
  meta_member_at (&v->meta, i, f->events);
  health_discard (v, i, f);
}

static void
health_status_extra (void *opaque, struct json_object *root)
{
  struct volume_mover *vm = volume_mover_last (opaque);

  if (vm)
    vm->status (vm, root);
}

void
volume_health_ops (struct volume *v, struct health_ops *ops)
{
  ops->opaque = v;
  ops->check = health_check;
  ops->probe = health_probe;
  ops->adopt = health_adopt;
  ops->discard = health_discard;
  ops->dropped = health_dropped;
  ops->status_extra = health_status_extra;
}
