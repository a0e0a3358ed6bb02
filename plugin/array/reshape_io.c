/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a reshape's clients, copy, checkpoints and journal.  See
 * include/reshape.h and reshape.c.
 *
 * The mover's positions are restripe.h's: forward for a grow, backward
 * for a shrink.  Below rs->mv.recorded the data is in the new layout and
 * every member's header says so; between it and the watermark it is in
 * both (copied, client writes go to both); above, in the old layout.
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assemble.h"
#include "config.h"
#include "header.h"
#include "health.h"
#include "ioexec.h"
#include "json.h"
#include "layout.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "mover.h"
#include "plan.h"
#include "reshape.h"
#include "restripe.h"
#include "util.h"
#include "volume.h"
#include "reshape_impl.h"

/* ---- clients ---- */

/* rq's bytes [lo, hi) of the volume, through view vw. */
static int
part (struct volume *v, const struct volume_view *vw,
      const struct volume_request *rq, uint64_t lo, uint64_t hi)
{
  struct volume_request sub = *rq;

  if (lo >= hi)
    return 0;
  sub.offset = lo;
  sub.count = hi - lo;
  if (sub.buf)
    sub.buf = (uint8_t *) rq->buf + (lo - rq->offset);
  return volume_request_view (v, vw, &sub);
}

/* A client's bytes between recorded and the watermark: read from the new
 * layout, written to both (the headers may still say the old is right).
 */
static int
mixed (struct reshape *rs, struct volume *v, const struct volume_request *rq,
       uint64_t lo, uint64_t hi)
{
  int r;

  if (lo >= hi)
    return 0;
  r = part (v, &rs->new_view, rq, lo, hi);
  if (r == 0 && op_changes_data (rq->kind))
    r = part (v, &rs->old_view, rq, lo, hi);
  return r;
}

int
reshape_request (struct volume_mover *vm, struct volume *v,
                 const struct volume_request *rq)
{
  struct reshape *rs = reshape_of_vm (vm);
  uint64_t lo = rq->offset, hi = rq->offset + rq->count, p, w, size;
  uint64_t a, b;
  struct mover_flight fl;
  struct mover_at at;
  int r, err;

  size = rs->rs.size;
  if (hi > size) {
    if (mover_state (&rs->mv) == MOVER_DONE) /* the new layout's room */
      return volume_request_view (v, &v->view, rq);
    /* A shrink: nothing past the size it shrinks to is kept. */
    stripe_debug ("%s: request at %" PRIu64 "+%" PRIu64 " beyond the size "
                  "the volume is shrinking to (%" PRIu64 "): refused",
                  reshape_kind_names[rs->kind], rq->offset, rq->count, size);
    errno = EIO;
    return -1;
  }
  restripe_position (&rs->rs, lo, hi, &p, &w);
  at = mover_enter (&rs->mv, &fl, p, p + w,
                    op_changes_data (rq->kind) && rq->kind != OP_EXTENTS);
  if (at.state == MOVER_DONE) {
    r = volume_request_view (v, &v->view, rq);
    goto out;
  }
  if ((at.state == MOVER_FAILED || at.state == MOVER_CANCELLED) && rs->fenced
      && p < rs->fence_pos + rs->fence_len && rs->fence_pos < p + w) {
    stripe_debug ("%s: request at %" PRIu64 "+%" PRIu64 ": its window "
                  "stopped half-written (its bytes are in the journal "
                  "until the %s goes on): EIO",
                  reshape_kind_names[rs->kind], rq->offset, rq->count,
                  reshape_kind_names[rs->kind]);
    errno = EIO;
    r = -1;
    goto out;
  }
  /* Logical bytes [a, b) are in both; below a (forward: above b) new. */
  if (rs->rs.backward) {
    a = size - at.watermark;
    b = size - at.recorded;
    r = part (v, &rs->old_view, rq, lo, hi < a ? hi : a);
    if (r == 0)
      r = mixed (rs, v, rq, lo > a ? lo : a, hi < b ? hi : b);
    if (r == 0)
      r = part (v, &rs->new_view, rq, lo > b ? lo : b, hi);
  }
  else {
    a = at.recorded;
    b = at.watermark;
    r = part (v, &rs->new_view, rq, lo, hi < a ? hi : a);
    if (r == 0)
      r = mixed (rs, v, rq, lo > a ? lo : a, hi < b ? hi : b);
    if (r == 0)
      r = part (v, &rs->old_view, rq, lo > b ? lo : b, hi);
  }
out:
  err = errno;
  mover_leave (&rs->mv, &fl);
  errno = err;
  return r;
}

/* Where a read of member i's byte rel goes now, as reshape_request
 * routes it: the new layout's place where the position has passed (reads
 * come from there between the recorded position and the watermark too),
 * the old layout's elsewhere; neither for a place the copy has left
 * behind or not reached yet.
 */
bool
reshape_locate (struct volume_mover *vm, struct volume *v, unsigned i,
                uint64_t rel, uint64_t *logical)
{
  struct reshape *rs = reshape_of_vm (vm);
  uint64_t size = rs->rs.size, w, l;
  enum mover_state state;

  pthread_mutex_lock (&rs->mv.lock);
  state = rs->mv.state;
  w = rs->mv.watermark;
  pthread_mutex_unlock (&rs->mv.lock);
  if (state == MOVER_DONE)
    return volume_view_unmap (&v->view, i, rel, logical);
  /* Forward: [0, w) is new; backward: [size - w, size). */
  if (volume_view_unmap (&rs->new_view, i, rel, &l) && l < size
      && (rs->rs.backward ? l >= size - w : l < w)) {
    *logical = l;
    return true;
  }
  if (volume_view_unmap (&rs->old_view, i, rel, &l) && l < size
      && (rs->rs.backward ? l < size - w : l >= w)) {
    *logical = l;
    return true;
  }
  return false;
}

/* Member operations come only from volume_request_view above. */
int
reshape_run_ops (struct mover *mv, struct volume *v, struct member_op *ops,
                 unsigned nr, volume_run_fn plain)
{
  (void) mv;
  return plain (v, ops, nr);
}

/* ---- the copy ---- */

/* The ops reading or writing logical [lo, hi) of layout l (map) from or
 * into buf, as planned in plan (kept until the next call).
 */
static unsigned
plan_ops (struct reshape *rs, struct io_plan *plan, bool *set,
          const struct layout *l, const uint8_t *map, enum op_kind kind,
          uint8_t *buf, uint64_t lo, uint64_t hi, struct member_op *ops)
{
  struct volume *v = rs->mv.v;

  if (*set)
    plan_free (plan);
  *set = false;
  if (plan_rw (plan, l, buf, hi - lo, lo) == -1) {
    mover_fail (&rs->mv, "out of memory");
    return 0;
  }
  *set = true;
  for (unsigned i = 0; i < plan->nr_ios; ++i) {
    const struct member_io *io = &plan->ios[i];
    struct member *m = &v->members[map[io->member]];
    ops[i] = (struct member_op){ .m = m, .kind = kind,
                                 .offset = m->data_offset + io->member_offset,
                                 .length = io->length, .iov = io->iov,
                                 .nr_iov = io->nr_iov, .shadow = true };
  }
  return plan->nr_ios;
}

unsigned
reshape_read_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
                  struct member_op *ops, struct iovec *iov)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t lo, hi;

  (void) iov;
  restripe_logical (&rs->rs, pos, len, &lo, &hi);
  return plan_ops (rs, &rs->rplan, &rs->rplan_set, &rs->from, rs->from_map,
                   OP_READ, buf, lo, hi, ops);
}

unsigned
reshape_write_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
                   struct member_op *ops, struct iovec *iov)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t lo, hi;

  (void) iov;
  restripe_logical (&rs->rs, pos, len, &lo, &hi);
  return plan_ops (rs, &rs->wplan, &rs->wplan_set, &rs->to, rs->to_map,
                   OP_WRITE, buf, lo, hi, ops);
}

/* Whether positions [pos, pos + n) hold a region in use. */
static bool
positions_used (struct reshape *rs, uint64_t pos, uint64_t n)
{
  uint64_t lo, hi;
  bool all;

  restripe_logical (&rs->rs, pos, n, &lo, &hi);
  return alloc_any (rs->mv.v->alloc, lo, hi - lo, &all);
}

/* Positions [pos, end) (at most a window), cut where their logical
 * bytes change from free to in use or back, a region's worth of
 * positions at a time (positions run through logical bytes one way or
 * the other: a step that straddles two regions is in use if either is).
 * The runs of one window: the mover reads and writes a mixed window run
 * by run, and keeps the window whole for the journal and the records
 * (mover_copy.c).
 */
uint64_t
reshape_used (struct mover *mv, uint64_t pos, uint64_t end, bool *used)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t step, at;

  *used = true;
  if (mv->v->alloc == NULL)
    return end;
  step = UINT64_C (1) << mv->v->alloc->shift;
  at = (pos / step + 1) * step;
  if (at > end)
    at = end;
  *used = positions_used (rs, pos, at - pos);
  for (; at < end; at += step) {
    uint64_t n = end - at < step ? end - at : step;
    if (positions_used (rs, at, n) != *used)
      return at;
  }
  return end;
}

/* The window's buffer holds its logical bytes in order (plan_ops):
 * backward, positions run down through them.
 */
uint64_t
reshape_buf_at (struct mover *mv, uint64_t pos, uint64_t w, uint64_t at,
                uint64_t len)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t lo, hi, run_lo, run_hi;

  restripe_logical (&rs->rs, pos, w, &lo, &hi);
  restripe_logical (&rs->rs, at, len, &run_lo, &run_hi);
  return run_lo - lo;
}

/* The new places of positions [pos, pos + len), made to read zeros:
 * one zero that may trim a member, over its one contiguous range
 * (replace.c's replace_zero_ops says what each kind of member makes of
 * it).  What a restripe moves away from is left behind in the old
 * places; every member's place in the new layout is some position's
 * new place, so the free ones are trimmed as they are passed.  None
 * when a member cannot zero: the mover writes zeros.
 */
unsigned
reshape_zero_ops (struct mover *mv, uint64_t pos, uint64_t len,
                  struct member_op *ops)
{
  struct reshape *rs = reshape_of_mover (mv);
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  uint64_t lo, hi;
  unsigned nr = 0;

  restripe_logical (&rs->rs, pos, len, &lo, &hi);
  layout_spans (&rs->to, lo, hi - lo, spans);
  for (unsigned j = 0; j < rs->to.nr_members; ++j) {
    struct member *m;

    if (!spans[j].touched)
      continue;
    m = &mv->v->members[rs->to_map[j]];
    ops[nr] = (struct member_op){
      .m = m, .kind = OP_ZERO,
      .offset = m->data_offset + spans[j].member_offset,
      .length = spans[j].length, .may_trim = true, .shadow = true };
    if (m->ops->zero_known_unsupported (m, ops[nr].offset, ops[nr].length,
                                        true, false))
      return 0;
    ++nr;
  }
  return nr;
}

uint64_t
reshape_window_size (struct mover *mv, uint64_t pos, bool *exclusive)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t w;

  switch (restripe_window (&rs->rs, pos, MOVER_WINDOW, rs->journal_cap, &w)) {
  case RESTRIPE_IN_PLACE: *exclusive = false; return w;
  case RESTRIPE_JOURNAL: *exclusive = true; return w;
  case RESTRIPE_CANNOT: break;
  }
  *exclusive = true; /* checked feasible at the start: not reached */
  return MOVER_BLOCK;
}

/* Every member of the union: their data durable. */
int
reshape_sync_all (struct reshape *rs)
{
  struct volume *v = rs->mv.v;

  for (unsigned u = 0; u < rs->nr_union; ++u)
    if (mover_io (&rs->mv, &v->members[u], OP_FLUSH, NULL, 0, 0) == -1) {
      mover_fail (&rs->mv, "member %u (%s): sync: %m", u, v->members[u].path);
      return -1;
    }
  return 0;
}

/* The reshape's state on every member, durably: the data first.
 *
 * A crash between two of its header writes (meta_update: the highest
 * index first, a joining member before the others) leaves members at
 * G + 1 holding this record and the others at G holding the one before.
 * Assembly takes the G + 1 record (the newest) and the G members as they
 * are (one behind, not marked), so the reshape goes on from this
 * position.  That is right because both positions are: the data below
 * this one was synced before any header was written (above), the
 * windows between the two were written in both layouts (client writes
 * there go to both until the position passes them), and a journal
 * window this record names was written and synced before it.  The first
 * record (reshape_before_write, before the first window): members at G
 * hold no reshape, those at G + 1 hold it at position 0, nothing is yet
 * in the new layout, and the config already names the joining or
 * leaving members, so the reshape is found under way and goes on.
 */
int
reshape_record (struct reshape *rs)
{
  struct volume *v = rs->mv.v;
  struct member *devs[LAYOUT_MAX_MEMBERS];
  char why[512];

  if (reshape_sync_all (rs) == -1)
    return -1;
  for (unsigned u = 0; u < rs->nr_union; ++u)
    devs[u] = &v->members[u];
  meta_set_reshape (&v->meta, &rs->rec);
  if (meta_update (&v->meta, devs, reshape_kind_names[rs->kind], false, why,
                   sizeof why)
      == -1) {
    mover_fail (&rs->mv, "recording the %s's position: %s",
                reshape_kind_names[rs->kind], why);
    return -1;
  }
  rs->checkpoints++;
  return 0;
}

/* Positions below pos are moved: recorded, and no request uses an old
 * place below it any more.
 */
int
reshape_checkpoint (struct reshape *rs, uint64_t pos)
{
  rs->rec.position = pos;
  rs->rec.journal = false;
  rs->rec.journal_position = rs->rec.journal_length = 0;
  rs->rec.journal_crc = 0;
  if (reshape_record (rs) == -1)
    return -1;
  mover_record (&rs->mv, pos);
  mover_phase (&rs->mv, "recorded");
  return 0;
}

/* Where the journal starts on every member: after the metadata area
 * and the allocation map.
 */
uint64_t
reshape_journal_start (const struct volume *v)
{
  return v->alloc ? v->alloc->map_offset + v->alloc->map_bytes : META_AREA;
}

/* Where the journal keeps its bytes: after each member's metadata area
 * and allocation map, up to its data, member after member.
 */
int
reshape_journal_io (struct reshape *rs, enum op_kind kind, uint8_t *buf, uint64_t len)
{
  struct volume *v = rs->mv.v;
  uint64_t done = 0;

  for (unsigned u = 0; u < rs->nr_union && done < len; ++u) {
    struct member *m = &v->members[u];
    uint64_t at = reshape_journal_start (v);
    uint64_t room = m->data_offset > at
                      ? (m->data_offset - at) / 4096 * 4096
                      : 0;
    uint64_t n = len - done < room ? len - done : room;
    if (n && mover_io (&rs->mv, m, kind, buf + done, n, at) == -1)
      return -1;
    done += n;
  }
  return done == len ? 0 : -1;
}

uint64_t
reshape_journal_room (const struct volume *v, unsigned nr_union)
{
  uint64_t room = 0;

  for (unsigned u = 0; u < nr_union; ++u) {
    const struct member *m = &v->members[u];
    if (m->data_offset > reshape_journal_start (v))
      room += (m->data_offset - reshape_journal_start (v)) / 4096 * 4096;
  }
  return room < MOVER_WINDOW ? room : MOVER_WINDOW;
}

/* Before window [pos, pos + len) (its old bytes in buf) is written in
 * its new place: what it overwrites must be recorded as moved, or be the
 * window itself, kept in the journal first.
 */
int
reshape_before_write (struct mover *mv, const uint8_t *buf, uint64_t pos,
                      uint64_t len)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t clobber = restripe_clobber_end (&rs->rs, pos, len);

  /* The first window of all: the reshape recorded first, whatever it
   * overwrites -- a window written where the old layout keeps nothing
   * (beyond the new size, a shrink) is still the reshape's, and a crash
   * must find it under way, not a volume holding copies beyond its new
   * end.
   */
  if (!rs->on_record) {
    if (reshape_record (rs) == -1)
      return -1;
    rs->on_record = true;
  }
  if (clobber <= mv->recorded)
    return 0;
  if (clobber <= pos) /* in place once the positions below are recorded */
    return reshape_checkpoint (rs, pos);
  if (mv->recorded < pos && reshape_checkpoint (rs, pos) == -1)
    return -1;
  if (reshape_journal_io (rs, OP_WRITE, (uint8_t *) buf, len) == -1) {
    mover_fail (mv, "writing the journal: %m");
    return -1;
  }
  rs->rec.journal = true;
  rs->rec.journal_position = pos;
  rs->rec.journal_length = len;
  rs->rec.journal_crc = crc32c (0, buf, len);
  /* From the record on (some headers may say journal even if it fails),
   * a replay may write the journal's bytes over the window: no client
   * may write it meanwhile, nor read old places the window overwrites.
   */
  rs->fence_pos = pos;
  rs->fence_len = len;
  rs->fence_crc = rs->rec.journal_crc;
  rs->fenced = true;
  if (reshape_record (rs) == -1)
    return -1;
  rs->journaled++;
  mover_phase (mv, "journaled");
  if (mover_debug_crash == 3)
    raise (SIGKILL);
  return 0;
}

/* A journaled window is written: recorded as moved before any client
 * can write its new place (a replay of the journal would undo them).
 */
int
reshape_after_write (struct mover *mv, uint64_t pos, uint64_t len)
{
  struct reshape *rs = reshape_of_mover (mv);

  if (!rs->rec.journal || rs->rec.journal_position != pos)
    return 0;
  if (reshape_checkpoint (rs, pos + len) == -1)
    return -1;
  rs->fenced = false;
  return 0;
}

bool
reshape_logical (struct mover *mv, uint64_t pos, uint64_t *logical)
{
  uint64_t hi;

  restripe_logical (&reshape_of_mover (mv)->rs, pos, MOVER_BLOCK, logical,
                    &hi);
  return true;
}

void
reshape_write_failed (struct mover *mv, const struct member_op *op)
{
  mover_fail_locked (mv, "member %u (%s) failed: write at offset %" PRIu64
                     ": %s",
                     op->m->index, op->m->path, op->offset,
                     strerror (op->err));
}

const char *
reshape_unreadable (struct mover *mv, char *why, size_t len)
{
  snprintf (why, len, "unreadable blocks: the %s stopped (the volume is "
            "served as it is, part moved; --skip-unreadable moves the rest "
            "and lists what is lost)",
            reshape_kind_names[reshape_of_mover (mv)->kind]);
  return why;
}

