/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume's requests: one request into per-member work,
 * through a view (the volume's own, or a restripe's); block status is
 * volume_extents.c's.  See include/volume.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "health_record.h"
#include "ioexec.h"
#include "log.h"
#include "plan.h"
#include "util.h"
#include "volume.h"
#include "volume_impl.h"
#include "volume_lost.h"

/* Out of line: the request's path has only the test (refuse_failed). */
int __attribute__ ((noinline))
volume_refuse (struct volume *v, uint64_t failed)
{
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (failed >> i & 1) {
      health_rejected (v->health, i);
      stripe_debug (
        "member %u (%s) %s: request refused (EIO)", i, v->members[i].path,
        v->missing >> i & 1 ? "is missing (served degraded)" : "has failed");
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

/* Run ops, recording each one with health.  Inlined into every caller
 * whatever the compiler would choose: on the path of a read or a write
 * the call cost ~20 instructions a request (bench/cost-per-request).
 */
static inline __attribute__ ((always_inline)) int
run_ops_plain_ (struct volume *v, struct member_op *ops, unsigned nr)
{
  /* One clock read: since when the request is in flight (health) and
   * when a lone read or write started (ioexec).
   */
  uint64_t now = now_ns ();
  _Atomic uint64_t *busy = health_io_begin (v->health, now);
  int r, err;

  for (unsigned i = 0; i < nr; ++i)
    ops[i].busy = ops[i].shadow ? NULL : busy;
  r = ioexec_run_at (ops, nr, v->uring, now);
  err = r == -1 ? errno : 0; /* what follows touches it only for errors */
  health_io_end (v->health);
  if (v->health)
    for (unsigned i = 0; i < nr; ++i)
      if (ops[i].kind < OP_NR_TRACKED && !ops[i].shadow)
        health_record (v->health, ops[i].m->index, ops[i].kind,
                       ops[i].kind == OP_FLUSH ? 0 : ops[i].length, ops[i].ns,
                       ops[i].err, ops[i].offset);
  if (r == -1)
    errno = err;
  return r;
}

/* The same as a function, for a job's run_ops (mover.h). */
static int
run_ops_plain (struct volume *v, struct member_op *ops, unsigned nr)
{
  return run_ops_plain_ (v, ops, nr);
}

/* ... or, while data moves, through the job moving it (mover.h): vm,
 * the request's one reading of v->mover, made after it was counted
 * (gate_enter; see the gate).  One reading for the whole request: a
 * request that saw no job is waited for by the job's drain, whatever it
 * does after.
 */
static inline int
run_ops (struct volume *v, struct volume_mover *vm, struct member_op *ops,
         unsigned nr)
{
  if (vm != NULL)
    return vm->run_ops (vm, v, ops, nr, run_ops_plain);
  return run_ops_plain_ (v, ops, nr);
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

/* run_rw's writes when some reach a member file's end (tail): sizes
 * checked before and after (guard_sizes).  Out of line: rare.
 */
static int __attribute__ ((noinline))
run_tail_writes (struct volume *v, struct volume_mover *vm,
                 struct member_op *ops, unsigned nr, uint64_t mask,
                 uint64_t tail)
{
  uint64_t seen[LAYOUT_MAX_MEMBERS];
  int r;

  /* A member is switched only with no request in flight
   * (volume_quiesce): the sizes seen are those of the members written.
   */
  if (guard_sizes (v, tail, seen) == -1)
    return -1;
  r = run_ops (v, vm, ops, nr);
  if (!ops[0].fua) /* whatever the outcome: see run_rw */
    mark_dirty (v, mask);
  if (recheck_sizes (v, tail, seen) == -1)
    r = -1;
  return r;
}

/* The reads or writes of one request, on the members in mask. */
static inline int
run_rw (struct volume *v, struct volume_mover *vm, enum op_kind kind,
        struct member_op *ops, unsigned nr, uint64_t mask)
{
  uint64_t tail;
  int r;

  if (refuse_failed (v, mask) == -1)
    return -1;
  if (kind != OP_WRITE)
    return run_ops (v, vm, ops, nr);
  tail = tail_writes (ops, nr);
  if (tail)
    return run_tail_writes (v, vm, ops, nr, mask, tail);
  r = run_ops (v, vm, ops, nr);
  /* Marked whatever the outcome: a write that failed on one member may
   * have landed on another, or in part.
   */
  if (ops[0].fua)
    return r;
  if (nr == 1) /* one member, one bit */
    dirty_mark (&v->dirty[__builtin_ctzll (mask)]);
  else
    mark_dirty (v, mask);
  return r;
}

/* A read or write over more than one chunk: planned.  Out of line, with
 * the frame its op array needs.
 */
static int __attribute__ ((noinline))
rw_planned (struct volume *v, const struct volume_view *vw,
            struct volume_mover *vm, enum op_kind kind, void *buf,
            uint64_t count, uint64_t offset, bool fua)
{
  struct io_plan plan;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  uint64_t mask = 0;
  int r = -1;

  if (plan_rw (&plan, vw->layout, buf, count, offset) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i) {
    const struct member_io *io = &plan.ios[i];
    struct member *m = &v->members[vw->map[io->member]];
    mask |= UINT64_C (1) << vw->map[io->member];
    rw_op (&ops[i], m, kind, m->data_offset + io->member_offset, io->length,
           io->iov, io->nr_iov, fua);
  }
  r = run_rw (v, vm, kind, ops, plan.nr_ios, mask);
out : {
  int err = errno;
  plan_free (&plan);
  errno = err;
}
  return r;
}

/* A read or write through view vw. */
static inline int
rw (struct volume *v, const struct volume_view *vw, struct volume_mover *vm,
    enum op_kind kind, void *buf, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_piece p;
  struct member_op op;
  struct iovec iov = { buf, count };
  struct member *m;

  /* Most requests lie inside one chunk: one member, one op, no plan. */
  layout_map (vw->layout, offset, count, &p);
  if (p.length != count)
    return rw_planned (v, vw, vm, kind, buf, count, offset, fua);
  m = &v->members[vw->map[p.member]];
  rw_op (&op, m, kind, m->data_offset + p.member_offset, count, &iov, 1, fua);
  return run_rw (v, vm, kind, &op, 1, UINT64_C (1) << vw->map[p.member]);
}

static int view_request (struct volume *v, const struct volume_view *vw,
                         struct volume_mover *vm,
                         const struct volume_request *rq);

/* A request through the volume's own view, or through the job moving
 * data when it sees requests whole (a restripe).
 */
static int flush_ (struct volume *v);
static int lost_after (struct volume *v, enum op_kind kind, uint64_t count,
                       uint64_t offset);

int
volume_request_rq (struct volume *v, const struct volume_request *rq)
{
  struct volume_mover *vm;
  int r;

  if (check_request (v, rq->count, rq->offset) == -1)
    return -1;
  /* Read after the request was counted (gate_enter): see the gate. */
  vm = atomic_load (&v->mover);
  if (vm != NULL && vm->request != NULL)
    r = vm->request (vm, v, rq);
  else
    r = view_request (v, &v->view, vm, rq);
  if (r == 0 && atomic_load (&v->lost_nr))
    return lost_after (v, rq->kind, rq->count, rq->offset);
  return r;
}

/* A read or write for a job that takes requests whole (out of line). */
static int __attribute__ ((noinline))
job_rw (struct volume *v, struct volume_mover *vm, enum op_kind kind,
        void *buf, uint64_t count, uint64_t offset, bool fua)
{
  const struct volume_request rq = { .kind = kind, .buf = buf,
                                     .count = count, .offset = offset,
                                     .fua = fua };
  return vm->request (vm, v, &rq);
}

/* A request that went through, on a volume with lost ranges: a read
 * of one fails -- looked at after the read, so that a range a job adds
 * while the read is under way (before it writes zeros where the read may
 * go) is seen -- and a write over one takes it off the list once what
 * it wrote is durable (the members' flush first: the list must never
 * say "written" of bytes a power cut can still take).
 */
static int __attribute__ ((noinline))
lost_after (struct volume *v, enum op_kind kind, uint64_t count,
            uint64_t offset)
{
  if (kind == OP_EXTENTS || !volume_lost_touches (v, offset, count))
    return 0;
  if (kind == OP_READ) {
    errno = EIO;
    return -1;
  }
  if (flush_ (v) == -1)
    return -1;
  return volume_lost_covered (v, offset, count);
}

static inline int
with_lost (struct volume *v, int r, enum op_kind kind, uint64_t count,
           uint64_t offset)
{
  if (r == 0 && atomic_load_explicit (&v->lost_nr, memory_order_acquire))
    return lost_after (v, kind, count, offset);
  return r;
}

/* The same for a read or a write, nearly every request: straight to
 * rw, a struct volume_request built only for a job that takes it whole.
 */
static inline int
request_rw (struct volume *v, enum op_kind kind, void *buf, uint64_t count,
            uint64_t offset, bool fua)
{
  struct volume_mover *vm;
  int r;

  if (check_request (v, count, offset) == -1)
    return -1;
  if (v->alloc != NULL && count > 0) {
    if (kind == OP_WRITE) {
      if (!alloc_mark (v->alloc, offset, count) && fua
          && volume_alloc_sync (v) == -1)
        return -1;
    }
    else if (!alloc_in_use (v->alloc, offset, count))
      return volume_read_free (v, buf, count, offset);
  }
  /* Read after the request was counted (gate_enter): see the gate. */
  vm = atomic_load (&v->mover);
  if (vm != NULL && vm->request != NULL)
    r = job_rw (v, vm, kind, buf, count, offset, fua);
  else
    r = rw (v, &v->view, vm, kind, buf, count, offset, fua);
  return with_lost (v, r, kind, count, offset);
}

int
volume_pread (struct volume *v, void *buf, uint64_t count, uint64_t offset)
{
  GATED (v, request_rw (v, OP_READ, buf, count, offset, false));
}

int
volume_pwrite (struct volume *v, const void *buf, uint64_t count,
               uint64_t offset, bool fua)
{
  /* The iovec is not const, but writes only read from it. */
  GATED (v, request_rw (v, OP_WRITE, (void *) buf, count, offset,
                        fua || v->cache == CACHE_WRITETHROUGH));
}

/* Flush the members marked in spans, concurrently: FUA for a trim or a
 * zero, whatever else the members hold.
 */
static int
flush_members (struct volume *v, const struct volume_view *vw,
               struct volume_mover *vm, const struct layout_span *spans)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;

  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (spans[j].touched)
      ops[nr++] = (struct member_op){ .m = &v->members[vw->map[j]],
                                      .kind = OP_FLUSH };
  return run_ops (v, vm, ops, nr);
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
  struct volume_mover *vm;
  int err = 0;

  /* The map first: the regions of every write completed before this
   * flush started are on the members when it returns (alloc.h).
   */
  if (v->alloc != NULL && volume_alloc_sync (v) == -1)
    return -1;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (!dirty_clean (&v->dirty[i]))
      held |= UINT64_C (1) << i;
  if (held == 0)
    return 0;
  if (refuse_failed (v, held) == -1)
    return -1;
  /* Read after the request was counted (gate_enter): see the gate. */
  vm = atomic_load (&v->mover);
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
    run_ops (v, vm, ops, nr);
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
trim_ (struct volume *v, const struct volume_view *vw,
       struct volume_mover *vm, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  int r;

  layout_spans (vw->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (vw, spans)) == -1)
    return -1;
  r = run_ops (v, vm, ops, span_ops (v, vw, spans, OP_TRIM, ops));
  if (!fua && v->cache != CACHE_WRITETHROUGH)
    mark_dirty (v, spans_mask (vw, spans));
  else if (flush_members (v, vw, vm, spans) == -1 && r == 0)
    r = -1;
  return r;
}

/* Whether a trim or zero covers a whole region of the map. */
static inline bool
map_whole (const struct volume *v, uint64_t count, uint64_t offset)
{
  uint64_t region;

  if (v->alloc == NULL || count == 0 || check_request (v, count, offset))
    return false;
  region = UINT64_C (1) << v->alloc->shift;
  return (offset + region - 1) / region * region + region <= offset + count;
}

int
volume_trim (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  const struct volume_request rq = { .kind = OP_TRIM, .count = count,
                                     .offset = offset, .fua = fua };
  if (map_whole (v, count, offset))
    GATED (v, volume_map_trim_zero (v, &rq));
  GATED (v, volume_request_rq (v, &rq));
}

static int
zero_ (struct volume *v, const struct volume_view *vw,
       struct volume_mover *vm, uint64_t count, uint64_t offset,
       bool may_trim, bool fast, bool fua)
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
      else if (run_ops (v, vm, &ops[k], 1) == -1) {
        if (!durable)
          mark_dirty (v, spans_mask (vw, spans));
        return -1;
      }
    }
    nr = rest;
  }
  r = nr > 0 ? run_ops (v, vm, ops, nr) : 0;
  if (!durable)
    mark_dirty (v, spans_mask (vw, spans));
  if (r == -1)
    return -1;
  if (durable)
    return flush_members (v, vw, vm, spans);
  return 0;
}

int
volume_zero (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
             bool fast, bool fua)
{
  const struct volume_request rq = { .kind = OP_ZERO, .count = count,
                                     .offset = offset, .may_trim = may_trim,
                                     .fast = fast, .fua = fua };
  if (map_whole (v, count, offset))
    GATED (v, volume_map_trim_zero (v, &rq));
  GATED (v, volume_request_rq (v, &rq));
}

static int
view_request (struct volume *v, const struct volume_view *vw,
              struct volume_mover *vm, const struct volume_request *rq)
{
  switch (rq->kind) {
  case OP_READ:
  case OP_WRITE:
    return rw (v, vw, vm, rq->kind, rq->buf, rq->count, rq->offset,
               rq->fua);
  case OP_TRIM: return trim_ (v, vw, vm, rq->count, rq->offset, rq->fua);
  case OP_ZERO:
    return zero_ (v, vw, vm, rq->count, rq->offset, rq->may_trim, rq->fast,
                  rq->fua);
  case OP_EXTENTS:
    return volume_view_extents (v, vw, rq->count, rq->offset, rq->req_one,
                                rq->add, rq->opaque);
  case OP_FLUSH: break;
  }
  errno = EINVAL;
  return -1;
}

int
volume_request_view (struct volume *v, const struct volume_view *vw,
                     const struct volume_request *rq)
{
  return view_request (v, vw, atomic_load (&v->mover), rq);
}

int
volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                bool req_one, volume_extent_fn add, void *opaque)
{
  const struct volume_request rq = { .kind = OP_EXTENTS, .count = count,
                                     .offset = offset, .req_one = req_one,
                                     .add = add, .opaque = opaque };
  if (v->alloc != NULL && count > 0) {
    if (check_request (v, count, offset) == -1)
      return -1;
    GATED (v, volume_map_extents (v, &rq));
  }
  GATED (v, volume_request_rq (v, &rq));
}


ssize_t
volume_member_read (struct volume *v, unsigned i, void *buf, size_t count,
                    uint64_t offset, char *why, size_t len)
{
  unsigned k = gate_enter (v);
  ssize_t r;

  if (health_failed_mask (v->health) >> i & 1) {
    snprintf (why, len, "the member has failed: not read");
    errno = ENODEV;
    r = -1;
  }
  else if (v->removed >> i & 1) {
    snprintf (why, len, "the member was removed by a shrink: not read");
    errno = ENODEV;
    r = -1;
  }
  else
    r = member_pread (&v->members[i], buf, count, offset, true, why, len);
  gate_leave (v, k);
  return r;
}

bool
volume_view_unmap (const struct volume_view *vw, unsigned i, uint64_t rel,
                   uint64_t *logical)
{
  for (unsigned j = 0; j < vw->layout->nr_members; ++j)
    if (vw->map[j] == i)
      return layout_unmap (vw->layout, j, rel, logical);
  return false;
}

/* Counted in the gate as a request is: a restripe's switch to its new
 * layout (clients held, nothing in flight) is never seen half-done.
 */
bool
volume_member_logical (struct volume *v, unsigned i, uint64_t rel,
                       uint64_t *logical)
{
  unsigned k = gate_enter (v);
  struct volume_mover *vm = atomic_load (&v->mover);
  bool found = vm && vm->locate
                 ? vm->locate (vm, v, i, rel, logical)
                 : volume_view_unmap (&v->view, i, rel, logical);

  gate_leave (v, k);
  return found;
}
