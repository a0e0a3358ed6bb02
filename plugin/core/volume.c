/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume, members + layout.  See include/volume.h. */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "header.h"
#include "health.h"
#include "identity.h"
#include "ioexec.h"
#include "json.h"
#include "log.h"
#include "plan.h"
#include "replace.h"
#include "scrub.h"
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
  unsigned bad = 0;
  char why[512];

  memset (v, 0, sizeof *v);
  pthread_mutex_init (&v->header_lock, NULL);
  pthread_mutex_init (&v->replace_lock, NULL);
  pthread_mutex_init (&v->scrub_lock, NULL);
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

  lerr = layout_init_as (&v->layout, a ? a->layout : LAYOUT_MD_ALT,
                         a ? a->size_rule : LAYOUT_SIZE_MD, chunk, nr_members,
                         sizes, &bad);
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
  for (unsigned i = 0; i < nr_members; ++i) {
    v->members[i].need = v->members[i].data_offset + v->layout.member_size[i];
    if ((a == NULL || a->data_sizes[i] == 0)
        && v->layout.member_size[i] != sizes[i])
      stripe_debug ("member %u (%s): last %" PRIu64 " bytes unused "
                    "(not a whole chunk)",
                    i, paths[i], sizes[i] - v->layout.member_size[i]);
  }
  /* What zeroing methods work, learnt where nothing lives: the gap
   * between a header and the data.  So that a fast zero (known to work,
   * or refused) works from the first request.
   */
  if (a && a->metadata == METADATA_HEADER && o->claim && !o->readonly
      && a->hdr.data_offset >= 2 * HEADER_SIZE)
    for (unsigned i = 0; i < nr_members; ++i)
      if (v->members[i].ops->learn_zero)
        v->members[i].ops->learn_zero (&v->members[i], HEADER_SIZE,
                                       HEADER_SIZE);
  if (a && a->metadata == METADATA_MD)
    v->md_sb = a->md.sb;
  if (a && a->metadata == METADATA_HEADER) {
    v->has_header = true;
    v->hdr = a->hdr;
    for (unsigned i = 0; i < nr_members; ++i) {
      memcpy (v->member_uuid[i], a->member_uuid[i], 16);
      v->member_events[i] = a->hdr.events;
    }
  }
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
  scrub_free (v);
  replace_free (v);
  for (unsigned i = v->nr_members; i-- > 0;)
    member_close (&v->members[i]);
  v->nr_members = 0;
  pthread_mutex_destroy (&v->header_lock);
  pthread_mutex_destroy (&v->replace_lock);
  pthread_mutex_destroy (&v->scrub_lock);
  pthread_mutex_destroy (&v->swap_lock);
  pthread_mutex_destroy (&v->gate.lock);
  pthread_cond_destroy (&v->gate.cond);
  pthread_mutex_destroy (&v->gate.drain_lock);
}

/* ---- the gate (struct volume_gate) ----
 *
 * Why it is enough, in C11's terms: every access below is sequentially
 * consistent, so all of them fall into one total order.  A request that
 * read v->rep as NULL did so after it counted itself (fetch_add) and saw
 * the epoch unchanged; a replace stores v->rep, then flips the epoch,
 * then reads the old counter.  The request's load of v->rep precedes the
 * store (it saw NULL), so its fetch_add precedes the drainer's read of
 * the counter, which therefore sees it until the request has ended.  A
 * request that saw the new epoch reads v->rep after the flip, which
 * follows the store: it sees the replace.
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

ssize_t
volume_member_read (struct volume *v, unsigned i, void *buf, size_t count,
                    uint64_t offset, char *why, size_t len)
{
  unsigned k = gate_enter (v);
  ssize_t r;
  int e;

  if (health_failed_mask (v->health) >> i & 1) {
    snprintf (why, len, "the member has failed: not read");
    errno = ENODEV;
    r = -1;
  }
  else
    r = member_pread (&v->members[i], buf, count, offset, true, why, len);
  e = errno;
  gate_leave (v, k);
  errno = e;
  return r;
}

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

/* ... or, while a member is being replaced, through the replace. */
static inline int
run_ops (struct volume *v, struct member_op *ops, unsigned nr)
{
  /* Read after the request was counted (gate_enter): see the gate. */
  struct replace *r = atomic_load (&v->rep);

  if (r != NULL)
    return replace_run_ops (v, r, ops, nr, run_ops_plain);
  return run_ops_plain (v, ops, nr);
}

/* A member found unusable outside of an I/O error: failed at once, named. */
static void
member_gone (struct volume *v, unsigned i, const char *reason)
{
  stripe_error ("member %u (%s): %s", i, v->members[i].path, reason);
  health_member_gone (v->health, i, reason);
}

/* A write must never extend a member file: one truncated under us would
 * be re-extended with holes where its data was, and the loss would go
 * unseen.  Before a write, every regular-file member it touches must
 * still hold what the volume needs; seen[] keeps the sizes found.
 */
static int
guard_sizes (struct volume *v, uint64_t mask, uint64_t *seen)
{
  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *m = &v->members[i];
    char reason[256];

    if (!(mask >> i & 1) || m->kind != MEMBER_FILE)
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

    if (!(mask >> i & 1) || m->kind != MEMBER_FILE)
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

/* The reads or writes of one request, on the members in mask. */
static int
run_rw (struct volume *v, enum op_kind kind, struct member_op *ops,
        unsigned nr, uint64_t mask)
{
  uint64_t seen[LAYOUT_MAX_MEMBERS];
  int r;

  if (refuse_failed (v, mask) == -1)
    return -1;
  if (kind != OP_WRITE)
    return run_ops (v, ops, nr);
  /* A replace switches members only with no request in flight
   * (volume_quiesce): the sizes seen are those of the members written.
   */
  if (guard_sizes (v, mask, seen) == -1)
    return -1;
  r = run_ops (v, ops, nr);
  if (recheck_sizes (v, mask, seen) == -1)
    r = -1;
  return r;
}

static int
rw (struct volume *v, enum op_kind kind, void *buf, uint64_t count,
    uint64_t offset, bool fua)
{
  struct layout_piece p;
  struct io_plan plan;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  uint64_t mask = 0;
  int r = -1;

  if (check_request (v, count, offset) == -1)
    return -1;

  /* Most requests lie inside one chunk: one member, one op, no plan. */
  layout_map (&v->layout, offset, count, &p);
  if (p.length == count) {
    struct iovec iov = { buf, count };
    rw_op (&ops[0], &v->members[p.member], kind,
           v->members[p.member].data_offset + p.member_offset, count, &iov, 1, fua);
    return run_rw (v, kind, ops, 1, UINT64_C (1) << p.member);
  }

  if (plan_rw (&plan, &v->layout, buf, count, offset) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i) {
    const struct member_io *io = &plan.ios[i];
    mask |= UINT64_C (1) << io->member;
    rw_op (&ops[i], &v->members[io->member], kind,
           v->members[io->member].data_offset + io->member_offset, io->length, io->iov,
           io->nr_iov, fua);
  }
  r = run_rw (v, kind, ops, plan.nr_ios, mask);
out : {
  int err = errno;
  plan_free (&plan);
  errno = err;
}
  return r;
}

int
volume_pread (struct volume *v, void *buf, uint64_t count, uint64_t offset)
{
  GATED (v, rw (v, OP_READ, buf, count, offset, false));
}

int
volume_pwrite (struct volume *v, const void *buf, uint64_t count,
               uint64_t offset, bool fua)
{
  /* The iovec is not const, but writes only read from it. */
  GATED (v, rw (v, OP_WRITE, (void *) buf, count, offset,
                fua || v->cache == CACHE_WRITETHROUGH));
}

static uint64_t
spans_mask (const struct volume *v, const struct layout_span *spans)
{
  uint64_t mask = 0;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans == NULL || spans[i].touched)
      mask |= UINT64_C (1) << i;
  return mask;
}

/* Flush the members marked in spans (all of them if spans is NULL),
 * concurrently.
 */
static int
flush_members (struct volume *v, const struct layout_span *spans)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans == NULL || spans[i].touched)
      ops[nr++] = (struct member_op){ .m = &v->members[i], .kind = OP_FLUSH };
  return run_ops (v, ops, nr);
}

static int
flush_ (struct volume *v)
{
  if (refuse_failed (v, spans_mask (v, NULL)) == -1)
    return -1;
  return flush_members (v, NULL);
}

int
volume_flush (struct volume *v)
{
  GATED (v, flush_ (v));
}

/* One op per touched member over its one contiguous range. */
static unsigned
span_ops (struct volume *v, const struct layout_span *spans,
          enum op_kind kind, struct member_op *ops)
{
  unsigned nr = 0;

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans[i].touched)
      ops[nr++] = (struct member_op){
        .m = &v->members[i],
        .kind = kind,
        .offset = v->members[i].data_offset + spans[i].member_offset,
        .length = spans[i].length,
      };
  return nr;
}

/* Each touched member gets ONE contiguous range for the whole request, as
 * Linux md raid0 does since 4.12, never one discard per chunk; all the
 * members at once.
 */
static int
trim_ (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  int r;

  if (check_request (v, count, offset) == -1)
    return -1;
  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;
  r = run_ops (v, ops, span_ops (v, spans, OP_TRIM, ops));
  if ((fua || v->cache == CACHE_WRITETHROUGH) && flush_members (v, spans) == -1
      && r == 0)
    r = -1;
  return r;
}

int
volume_trim (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  GATED (v, trim_ (v, count, offset, fua));
}

static int
zero_ (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
       bool fast, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr;

  if (check_request (v, count, offset) == -1)
    return -1;
  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;

  /* Refuse up front what some member is known not to do, so that a slow
   * zero goes straight to nbdkit writing zeroes; and a fast zero unless
   * every member it touches is known to manage one: a fast zero that
   * fails must have changed nothing.
   */
  nr = span_ops (v, spans, OP_ZERO, ops);
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
  if (fast) {
    unsigned rest = 0;
    for (unsigned k = 0; k < nr; ++k) {
      if (!ops[k].m->ops->async)
        ops[rest++] = ops[k];
      else if (run_ops (v, &ops[k], 1) == -1)
        return -1;
    }
    nr = rest;
  }
  if (nr > 0 && run_ops (v, ops, nr) == -1)
    return -1;
  if (fua || v->cache == CACHE_WRITETHROUGH)
    return flush_members (v, spans);
  return 0;
}

int
volume_zero (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
             bool fast, bool fua)
{
  GATED (v, zero_ (v, count, offset, may_trim, fast, fua));
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
fetch_runs (struct volume *v, struct runs *r, const uint64_t *from,
            const uint64_t *end, const bool *want, unsigned max)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;
  int ret;

  for (unsigned i = 0; i < v->nr_members; ++i) {
    if (!want[i])
      continue;
    r[i].l.nr = 0;
    r[i].from = r[i].to = from[i];
    ops[nr++] = (struct member_op){
      .m = &v->members[i],
      .kind = OP_EXTENTS,
      .offset = from[i],
      .length = end[i] - from[i],
      .max_runs = max,
      .extents = &r[i].l,
    };
  }
  ret = ioexec_run (ops, nr, v->uring);
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (want[i])
      for (unsigned k = 0; k < r[i].l.nr; ++k)
        r[i].to += r[i].l.runs[k].length;
  return ret;
}

static int
extents_ (struct volume *v, uint64_t count, uint64_t offset, bool req_one,
          volume_extent_fn add, void *opaque)
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

  if (check_request (v, count, offset) == -1)
    return -1;
  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;
  memset (r, 0, sizeof r);
  for (unsigned i = 0; i < v->nr_members; ++i) {
    want[i] = spans[i].touched;
    from[i] = v->members[i].data_offset + spans[i].member_offset;
    end[i] = from[i] + spans[i].length;
  }
  /* Every touched member at once; a client wanting one run needs only
   * the first of each.
   */
  if (fetch_runs (v, r, from, end, want, req_one ? 1 : EXTENTS_BATCH) == -1)
    goto out;

  layout_iter_init (&it, &v->layout, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct runs *c = &r[p.member];
    uint64_t base = v->members[p.member].data_offset + p.member_offset;
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
        if (fetch_runs (v, r, f, e, one, EXTENTS_BATCH) == -1)
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
  for (unsigned i = 0; i < v->nr_members; ++i)
    free (r[i].l.runs);
  return ret;
}

int
volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                bool req_one, volume_extent_fn add, void *opaque)
{
  GATED (v, extents_ (v, count, offset, req_one, add, opaque));
}

/* Health's side: from its prober thread. */

int
volume_write_header (struct volume *v, unsigned i, struct member *m,
                      const uint8_t uuid[16], uint64_t events, uint32_t flags,
                      char *why, size_t len)
{
  struct header hdr;
  uint8_t buf[HEADER_SIZE];

  pthread_mutex_lock (&v->header_lock);
  hdr = v->hdr;
  pthread_mutex_unlock (&v->header_lock);
  hdr.version = HEADER_VERSION;
  hdr.member_index = i;
  memcpy (hdr.member_uuid, uuid, 16);
  hdr.events = events;
  hdr.flags = flags;
  header_encode (&hdr, buf);
  if (member_pwrite (m, buf, HEADER_SIZE, 0, why, len) == -1
      || member_sync (m, why, len) == -1)
    return -1;
  return 0;
}

/* Write member m's header (member i of this volume) with generation
 * events, durably.
 */
static int
write_header (struct volume *v, unsigned i, struct member *m, uint64_t events,
              char *why, size_t len)
{
  uint8_t uuid[16];

  pthread_mutex_lock (&v->header_lock);
  memcpy (uuid, v->member_uuid[i], 16);
  pthread_mutex_unlock (&v->header_lock);
  return volume_write_header (v, i, m, uuid, events, 0, why, len);
}

/* A new generation on every member but skip (and failed ones); returns
 * the old and new.  With swap_lock held: no replace switches a member
 * under the writes (the I/O path never takes it).
 */
static void
bump (struct volume *v, int skip, const char *cause, uint64_t *old_out,
      uint64_t *events_out)
{
  uint64_t old, events;
  char why[256];

  /* The lock guards the bookkeeping, never I/O: a member that hangs must
   * not stop the next re-probe.
   */
  pthread_mutex_lock (&v->header_lock);
  old = v->hdr.events;
  events = old + 1;
  v->hdr.events = events;
  pthread_mutex_unlock (&v->header_lock);
  for (unsigned j = 0; j < v->nr_members; ++j) {
    if ((int) j == skip || health_member_state (v->health, j) == MS_FAILED)
      continue;
    if (write_header (v, j, &v->members[j], events, why, sizeof why) == -1) {
      stripe_error ("member %u (%s): cannot record generation %" PRIu64
                    " (%s): %s",
                    j, v->members[j].path, events, cause, why);
      continue;
    }
    pthread_mutex_lock (&v->header_lock);
    v->member_events[j] = events;
    pthread_mutex_unlock (&v->header_lock);
  }
  *old_out = old;
  *events_out = events;
}

void
volume_bump_generation (struct volume *v, int skip, const char *why)
{
  uint64_t old, events;

  if (!v->has_header || v->readonly)
    return;
  pthread_mutex_lock (&v->swap_lock);
  bump (v, skip, why, &old, &events);
  pthread_mutex_unlock (&v->swap_lock);
  stripe_debug ("volume '%s': generation %" PRIu64 " -> %" PRIu64 " (%s)",
                v->hdr.name, old, events, why);
}

/* Member i dropped out of a volume that goes on: bump the generation on
 * every member still in it, then (best effort, through the descriptor
 * still open: a member whose path was replaced is still reachable that
 * way) on member i, so that an older copy of any of them is told apart.
 */
static void
health_dropped (void *opaque, unsigned i)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  uint64_t old, events, size;
  char why[256], cause[64];
  bool reached = false;

  if (!v->has_header || v->readonly)
    return;
  snprintf (cause, sizeof cause, "member %u dropped out", i);
  pthread_mutex_lock (&v->swap_lock);
  bump (v, (int) i, cause, &old, &events);
  /* Not a file cut short: writing its header would extend it. */
  if (!(m->kind == MEMBER_FILE
        && (member_current_size (m, &size) == -1 || size < m->need))
      && write_header (v, i, m, events, why, sizeof why) == 0) {
    pthread_mutex_lock (&v->header_lock);
    v->member_events[i] = events;
    pthread_mutex_unlock (&v->header_lock);
    reached = true;
  }
  stripe_warning ("member %u (%s) dropped out of volume '%s': generation "
                  "%" PRIu64 " -> %" PRIu64 "%s",
                  i, m->path, v->hdr.name, old, events,
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

/* The header in buf must be member i of this volume, at the generation
 * member i had when it dropped out; *events is what it holds.
 */
static int
check_probed_header (struct volume *v, unsigned i, const void *buf,
                     uint64_t *events, char *why, size_t len)
{
  struct header hdr;
  const char *field = NULL;
  enum header_error e;
  char uuid[37];
  uint64_t want;

  e = header_decode (buf, HEADER_SIZE, &hdr, &field);
  if (e != HEADER_OK) {
    snprintf (why, len, "%s: header: %s%s%s", v->members[i].path,
              header_strerror (e), field ? ": field " : "",
              field ? field : "");
    return -1;
  }
  uuid_format (hdr.array_uuid, uuid);
  if (hdr.flags & HEADER_FLAG_REPLACED) {
    snprintf (why, len, "%s holds a member that was replaced (nbdstripe "
              "replace): no longer part of the volume",
              v->members[i].path);
    return -1;
  }
  if (memcmp (hdr.array_uuid, v->hdr.array_uuid, 16) != 0
      || hdr.member_index != i) {
    snprintf (why, len,
              "%s now holds member %u of volume '%s' (%s), not this one",
              v->members[i].path, hdr.member_index, hdr.name, uuid);
    return -1;
  }
  if (memcmp (hdr.member_uuid, v->member_uuid[i], 16) != 0) {
    snprintf (why, len,
              "%s holds member %u of this volume with another member UUID "
              "(a member written by another 'nbdstripe create'?)",
              v->members[i].path, i);
    return -1;
  }
  pthread_mutex_lock (&v->header_lock);
  want = v->member_events[i];
  pthread_mutex_unlock (&v->header_lock);
  if (hdr.events < want) {
    snprintf (why, len,
              "%s holds a stale copy of member %u: older generation "
              "%" PRIu64 " < %" PRIu64,
              v->members[i].path, i, hdr.events, want);
    return -1;
  }
  if (hdr.events > want) {
    snprintf (why, len,
              "%s holds member %u at generation %" PRIu64 ", newer than "
              "this volume's %" PRIu64 " (written by another server?)",
              v->members[i].path, i, hdr.events, want);
    return -1;
  }
  *events = hdr.events;
  return 0;
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
  uint8_t buf[HEADER_SIZE];
  uint64_t now;
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
  if (f->m.kind != m->kind) {
    snprintf (why, len, "%s is no longer a %s", m->path, member_what (m));
    goto err;
  }
  same = identity_same (&m->id, &f->m.id);
  if (!same && m->kind != MEMBER_NBD && (!v->has_header || v->readonly)) {
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
  n = member_pread (&f->m, buf, HEADER_SIZE, 0, true, reason, sizeof reason);
  if (n != HEADER_SIZE) {
    snprintf (why, len, "%s: reading the first %u bytes: %s", m->path,
              HEADER_SIZE, n == -1 ? reason : "short read");
    goto err;
  }
  if (v->has_header
      && check_probed_header (v, i, buf, &f->events, why, len) == -1)
    goto err;
  if (!same && m->kind != MEMBER_NBD) {
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
  if (v->has_header && !v->readonly) {
    pthread_mutex_lock (&v->header_lock);
    now = v->hdr.events;
    pthread_mutex_unlock (&v->header_lock);
    if (f->events != now) {
      struct member *w = same && m->kind != MEMBER_NBD ? m : &f->m;
      if (write_header (v, i, w, now, reason, sizeof reason) == -1) {
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
  if (v->has_header) {
    pthread_mutex_lock (&v->header_lock);
    v->member_events[i] = f->events;
    pthread_mutex_unlock (&v->header_lock);
  }
  health_discard (v, i, f);
}

static void
health_status_extra (void *opaque, struct json_object *root)
{
  struct json_object *r = replace_status (opaque);
  struct json_object *s = scrub_status (opaque);

  if (r)
    json_put (root, "replace", r);
  if (s)
    json_put (root, "scrub", s);
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
