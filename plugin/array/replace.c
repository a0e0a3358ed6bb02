/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: replacing a member while the volume is served, a job of the
 * mover (mover.h).  See include/replace.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "array.h"
#include "config.h"
#include "health.h"
#include "ioexec.h"
#include "json.h"
#include "layout.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "mover.h"
#include "replace.h"
#include "replace_impl.h"
#include "spares.h"
#include "volume.h"

/* Zeroes written to NEW at a time where it cannot zero. */
#define ZERO_BUF (256u * 1024)

/* struct replace: replace_impl.h. */


static struct replace *
replace_of_mover (struct mover *mv)
{
  return (struct replace *) mv;
}

static struct member *
old_member (struct replace *r)
{
  return &r->mv.v->members[r->index];
}

/* ---- the I/O path ---- */

/* NEW could not zero (EOPNOTSUPP: tmpfs, NFS, a device without
 * write-zeroes): zeroes written.  Returns 0 or an errno.
 */
static int
zero_by_writing (struct replace *r, uint64_t off, uint64_t len)
{
  static const uint8_t zeros[ZERO_BUF] __attribute__ ((aligned (4096)));

  while (len > 0) {
    uint64_t n = len < ZERO_BUF ? len : ZERO_BUF;
    if (mover_io (&r->mv, &r->newm, OP_WRITE, (void *) zeros, n, off) == -1)
      return errno;
    off += n;
    len -= n;
  }
  return 0;
}

/* The request's result from its ops (not NEW's): 0, or -1 with *err the
 * first op's error (*err untouched then).
 */
static int
ops_result (const struct member_op *ops, unsigned nr, int *err)
{
  for (unsigned j = 0; j < nr; ++j)
    if (ops[j].err) {
      *err = ops[j].err;
      return -1;
    }
  return 0;
}

/* ops, and op k again on NEW (a write below the watermark, a flush). */
static int
run_dual (struct replace *r, struct volume *v, struct member_op *ops,
          unsigned nr, unsigned k, volume_run_fn plain)
{
  struct member_op ext[LAYOUT_MAX_MEMBERS + 1];
  int ret, err;

  memcpy (ext, ops, nr * sizeof ops[0]);
  ext[nr] = ops[k];
  ext[nr].m = &r->newm;
  ext[nr].shadow = true;
  ext[nr].fast = false; /* NEW need not be as fast as old at zeroing */
  ret = plain (v, ext, nr + 1);
  err = errno;
  memcpy (ops, ext, nr * sizeof ops[0]);
  if (ext[nr].err == EOPNOTSUPP || ext[nr].err == ENOTSUP) {
    /* A trim is advisory; zeroes are written where NEW cannot zero. */
    if (ext[nr].kind == OP_TRIM)
      ext[nr].err = 0;
    else if (ext[nr].kind == OP_ZERO)
      ext[nr].err = zero_by_writing (r, ext[nr].offset, ext[nr].length);
  }
  if (ext[nr].err) {
    pthread_mutex_lock (&r->mv.lock);
    r->new_failed = true;
    pthread_mutex_unlock (&r->mv.lock);
    mover_fail (&r->mv, "the new member (%s) failed: %s at offset %" PRIu64
                ": %s",
                r->new_path, op_name (ext[nr].kind), ext[nr].offset,
                strerror (ext[nr].err));
  }
  /* The client's request is old's to answer. */
  ret = ops_result (ops, nr, &err);
  errno = err;
  return ret;
}

/* Reads come from old, and from NEW where old fails and the copy has
 * passed; writes, trims and zeroes reach NEW too below the watermark;
 * flushes cover both.
 */
static int
replace_run_ops (struct mover *mv, struct volume *v, struct member_op *ops,
                 unsigned nr, volume_run_fn plain)
{
  struct replace *r = replace_of_mover (mv);
  struct mover_flight fl;
  struct mover_at at;
  unsigned k = nr;
  bool dual;
  int ret, err;

  for (unsigned j = 0; j < nr; ++j)
    if (!ops[j].shadow && ops[j].m == old_member (r))
      k = j;
  if (k == nr)
    return plain (v, ops, nr);

  at = mover_enter (mv, &fl, ops[k].offset, ops[k].offset + ops[k].length,
                    op_changes_data (ops[k].kind));
  dual = at.state == MOVER_COPYING
         && (ops[k].kind == OP_FLUSH || (fl.write && fl.a < at.watermark));
  ret = dual ? run_dual (r, v, ops, nr, k, plain) : plain (v, ops, nr);
  err = errno;

  /* A read old could not serve, from NEW where the copy has passed. */
  if (ops[k].kind == OP_READ && ops[k].err && mover_copied (mv, fl.a, fl.b)) {
    struct member_op s = ops[k];
    s.m = &r->newm;
    s.shadow = true;
    if (plain (v, &s, 1) == 0) {
      stripe_debug ("replace: member %u: read at %" PRIu64 " failed on "
                    "%s, served from %s",
                    r->index, fl.a, r->old_path, r->new_path);
      ops[k].err = 0;
      ret = ops_result (ops, nr, &err);
    }
  }
  mover_leave (mv, &fl);
  errno = err;
  return ret;
}

/* ---- the copy ---- */

/* The requests that read or write [off, off + len) of m (at most a
 * window) from or into buf: one per piece.  Returns how many.
 */
static unsigned
pieces (struct member_op *ops, struct iovec *iov, struct member *m,
        enum op_kind kind, uint8_t *buf, uint64_t len, uint64_t off)
{
  unsigned n = 0;

  for (uint64_t d = 0; d < len; d += MOVER_PIECE, ++n) {
    uint64_t l = len - d < MOVER_PIECE ? len - d : MOVER_PIECE;
    iov[n] = (struct iovec){ buf + d, l };
    ops[n] = (struct member_op){ .m = m, .kind = kind, .offset = off + d,
                                 .length = l, .iov = &iov[n], .nr_iov = 1,
                                 .shadow = true };
  }
  return n;
}

static unsigned
replace_read_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
                  struct member_op *ops, struct iovec *iov)
{
  return pieces (ops, iov, old_member (replace_of_mover (mv)), OP_READ, buf,
                 len, pos);
}

static unsigned
replace_write_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
                   struct member_op *ops, struct iovec *iov)
{
  return pieces (ops, iov, &replace_of_mover (mv)->newm, OP_WRITE, buf, len,
                 pos);
}

static bool
replace_logical (struct mover *mv, uint64_t pos, uint64_t *logical)
{
  struct replace *r = replace_of_mover (mv);

  /* Mid-reshape (stopped, replace_start) the member's bytes are in two
   * layouts and the journal: none is told in the volume's terms, and
   * --skip-unreadable is refused.
   */
  if (r->reshaping || pos < old_member (r)->data_offset)
    return false;
  return layout_unmap (&mv->v->layout, r->index,
                       pos - old_member (r)->data_offset, logical);
}

/* Member offsets [pos, end) of the member replaced, cut where its
 * chunks' logical bytes change from free to in use or back.  What is
 * not the volume's data (the metadata area, mid-reshape the journal and
 * two layouts) is copied.
 */
static uint64_t
replace_used (struct mover *mv, uint64_t pos, uint64_t end, bool *used)
{
  struct replace *r = replace_of_mover (mv);
  const uint64_t base = old_member (r)->data_offset;

  *used = true;
  if (r->reshaping || pos < base)
    return end;
  /* Without a map, the member's own holes: a client write cannot fill
   * one under the mover (the window is locked).
   */
  return pos + volume_member_run_view (mv->v, r->index, pos - base,
                                       end - pos, used);
}

/* NEW's [pos, pos + len) made to read zeros: a zero that may trim --
 * on a file a hole punched; on a block device a discard where it is
 * sure to read back as zeros (a loop device over a file that punches
 * holes, member_local.c), else a write-zeroes that unmaps, which the
 * kernel makes a deallocation where the drive says it reads zeros after
 * one (NVMe's deallocate feature, SCSI's LBPRZ) and a write of zeros
 * where it does not (BLKZEROOUT); on an NBD export WRITE_ZEROES.  Never
 * a plain discard elsewhere: its read-back is the device's business.
 * Where NEW is known not to zero, none: the mover writes zeros.
 */
static unsigned
replace_zero_ops (struct mover *mv, uint64_t pos, uint64_t len,
                  struct member_op *ops)
{
  struct member *n = &replace_of_mover (mv)->newm;

  if (n->ops->zero_known_unsupported (n, pos, len, true, false))
    return 0;
  ops[0] = (struct member_op){ .m = n, .kind = OP_ZERO, .offset = pos,
                               .length = len, .may_trim = true,
                               .shadow = true };
  return 1;
}

static void
replace_write_failed (struct mover *mv, const struct member_op *op)
{
  replace_of_mover (mv)->new_failed = true;
  mover_fail_locked (mv, "the new member (%s) failed: write at offset %"
                     PRIu64 ": %s",
                     replace_of_mover (mv)->new_path, op->offset,
                     strerror (op->err));
}

static const char *
replace_unreadable (struct mover *mv, char *why, size_t len)
{
  snprintf (why, len, "the member to replace (%s) has unreadable blocks: "
            "the copy stopped (--skip-unreadable copies the rest and lists "
            "what is lost)",
            replace_of_mover (mv)->old_path);
  return why;
}

/* ---- the switch ---- */

static void
new_failed (struct replace *r)
{
  int e = errno;

  pthread_mutex_lock (&r->mv.lock);
  r->new_failed = true;
  pthread_mutex_unlock (&r->mv.lock);
  errno = e;
}

/* The config names NEW, or old says it is replaced: false (the replace
 * failed) when neither can be done.  *marked: old was marked.
 */
static bool
record_new (struct replace *r, const struct meta_slot *old_slot, bool *marked)
{
  struct volume *v = r->mv.v;
  char why[512], reason[512];

  *marked = false;
  if (r->config
      && (r->from_spare
            ? config_replace_with_spare (r->config, r->index, r->old_path,
                                         r->new_path, why, sizeof why)
            : config_replace_member (r->config, r->index, r->old_path,
                                     r->new_path, why, sizeof why))
           == 0) {
    pthread_mutex_lock (&r->mv.lock);
    r->config_updated = true;
    pthread_mutex_unlock (&r->mv.lock);
    return true;
  }
  if (r->config == NULL)
    snprintf (why, sizeof why, "no config file");
  /* The config still names old: old must say it is no longer the member
   * before any write goes to NEW alone.
   */
  if (meta_mark_replaced (&v->meta, r->index, old_member (r), old_slot,
                          reason, sizeof reason)
      == -1) {
    mover_fail (&r->mv, "%s cannot be rewritten (%s), and the member to "
                "replace (%s) cannot be marked replaced (%s): not switched, "
                "the volume goes on with %s",
                r->config ? r->config : "the config", why, r->old_path,
                reason, r->old_path);
    return false;
  }
  *marked = true;
  pthread_mutex_lock (&r->mv.lock);
  snprintf (r->config_note, sizeof r->config_note,
            "%.200s not updated (%.200s): member %u must now be \"%.150s\" "
            "(%.150s is marked replaced and will not be assembled)",
            r->config ? r->config : "the config", why, r->index, r->new_path,
            r->old_path);
  pthread_mutex_unlock (&r->mv.lock);
  stripe_error ("replace: %s", r->config_note);
  return true;
}

/* The copy is done: NEW takes old's place.  Clients write both devices
 * (the watermark is at the end) until the volume is quiesced; then,
 * with nothing in flight, NEW is flushed and gets the member's metadata,
 * the config names NEW, and the member switches.  The on-disk record
 * never points at NEW before it holds the member, and never lets old be
 * assembled once a write has gone to NEW alone: when the config cannot be
 * rewritten, old is marked replaced first, and when that cannot be done
 * either (metadata "none", old dying) the replace stops here, not
 * switched.
 */
static void
replace_finish (struct mover *mv)
{
  struct replace *r = replace_of_mover (mv);
  struct volume *v = mv->v;
  uint8_t new_uuid[16] = { 0 };
  struct meta_slot old_slot;
  bool written = false, marked = false;
  char why[512];

  /* What the copier wrote, durable before clients are held: the flush
   * under the hold then has only their writes since to carry.
   */
  if (mover_io (mv, &r->newm, OP_FLUSH, NULL, 0, 0) == -1) {
    new_failed (r);
    mover_fail (mv, "flushing the new member (%s): %m", r->new_path);
    return;
  }
  /* What it could not read is zeros on NEW: lost on every member before
   * any record names NEW (the lost ranges go with NEW's own below).
   */
  if (mv->lost.nr > 0
      && volume_lost_record (v, "the ranges a replace could not read", why,
                             sizeof why)
           == -1) {
    mover_fail (mv, "recording the ranges it could not read: %s", why);
    return;
  }
  mover_phase (mv, "copied");
  volume_switch_begin (v);
  if (!mover_switching (mv))
    goto release;
  mover_phase (mv, "quiesced");

  if (mover_io (mv, old_member (r), OP_FLUSH, NULL, 0, 0) == -1)
    stripe_error ("replace: member %u: flushing %s: %m (the copy is on %s "
                  "already)",
                  r->index, r->old_path, r->new_path);
  if (mover_io (mv, &r->newm, OP_FLUSH, NULL, 0, 0) == -1) {
    new_failed (r);
    mover_fail (mv, "flushing the new member (%s): %m", r->new_path);
    goto release;
  }
  /* NEW's copy of the allocation map before its record: with nothing
   * in flight, the map as it is now (a 1-member volume has no other).
   */
  if (v->alloc != NULL
      && alloc_write_copy (v->alloc, &r->newm, why, sizeof why) == -1) {
    new_failed (r);
    mover_fail (mv, "writing the allocation map on the new member (%s): %s",
                r->new_path, why);
    goto release;
  }
  old_slot = meta_member_slot (&v->meta, r->index);
  if (meta_write_new (&v->meta, r->index, &r->newm, new_uuid, why, sizeof why)
      == -1) {
    new_failed (r);
    mover_fail (mv, "writing the new member's metadata (%s): %s", r->new_path,
                why);
    goto release;
  }
  written = true;
  mover_phase (mv, "metadata");
  if (mover_debug_crash == 1)
    raise (SIGKILL);

  /* The config: NEW in old's place (the volume assembles with whichever
   * the config names from here on).
   */
  if (!record_new (r, &old_slot, &marked))
    goto release;
  mover_phase (mv, "config");
  if (mover_debug_crash == 2)
    raise (SIGKILL);

  /* What a crash leaves, write by write.  NEW's header (record_new,
   * generation G, a member UUID of its own) written, the config not yet
   * rewritten: the config names old, assembly never looks at NEW, and
   * the same replace run again overwrites the copy (meta_copy_left).
   * The config rewritten: it names NEW, whose header is at G like the
   * others', and old, at G, is named by nothing.  In the bump below
   * (meta_update): members at G + 1 beside members at G, one behind and
   * not marked, read as the volume.  Old marked replaced last: until
   * then it is at G, behind the volume, and refused as stale if named.
   */
  /* The switch: nothing is in flight. */
  volume_switch_member (v, r->index, &r->newm);
  meta_switched (&v->meta, r->index, new_uuid);
  mv->hold_ns = volume_switch_end (v);
  health_member_replaced (v->health, r->index, old_member (r)->path);
  mover_phase (mv, "switched");

  /* Old is no longer a member: a new generation everywhere, and old
   * marked (it stays at the old one).  Clients go on, on NEW; the replace
   * is not done (not "done" in the status, a second one refused) until
   * then.
   */
  volume_bump_generation (v, -1, "a member was replaced");
  if (!marked
      && meta_mark_replaced (&v->meta, r->index, &r->newm, &old_slot, why,
                             sizeof why)
           == -1)
    stripe_error ("replace: member %u: could not mark %s replaced (%s)%s",
                  r->index, r->old_path, why,
                  meta_records_dropouts (&v->meta)
                    ? "; its generation is behind the volume's, so it is "
                      "refused as stale anyway"
                    : "");
  mover_done (mv);
  stripe_notice ("replace: member %u: %s replaced by %s (%" PRIu64 " bytes "
                 "copied in %.1f s; clients held %.3f s at the switch)",
                 r->index, r->old_path, r->new_path, mv->end - mv->start,
                 (mv->t_end - mv->t_start) / 1e9, mv->hold_ns / 1e9);
  return;

release:
  if (written)
    meta_clear_new (&v->meta, r->index, &r->newm, r->new_path);
  mv->hold_ns = volume_switch_end (v);
}

/* The end: NEW closed -- after the switch it holds the old member --
 * or, taken from the spares, given back to them when the replace did not
 * switch (failing, if it failed).  An automatic replace's end is told
 * to health, unless mover_start, failing, says it to its caller.
 */
static void
replace_ended (struct mover *mv)
{
  struct replace *r = replace_of_mover (mv);
  bool done = mv->state == MOVER_DONE;
  char problem[600];

  if (!done)
    stripe_error ("replace: member %u (%s) not replaced by %s: %s", r->index,
                  r->old_path, r->new_path, mv->error);
  if (r->from_spare && done) {
    member_close (&r->newm);
    spares_return (r->a->spares, r->new_path, NULL, true, NULL);
  }
  else if (r->from_spare) {
    snprintf (problem, sizeof problem,
              "failing: the replace of member %u "
              "onto it failed: %.500s",
              r->index, mv->error);
    spares_return (r->a->spares, r->new_path, &r->newm, false,
                   r->new_failed ? problem : NULL);
    member_close (&r->newm); /* nothing, unless the spare was not found */
  }
  else
    member_close (&r->newm);
  r->newm_open = false;
  if (r->automatic && !mv->start_failed)
    spare_policy_ended (r->a->policy, r->index, done,
                        done ? "" : mv->error);
}

static void
replace_status_fields (struct mover *mv, struct json_object *o)
{
  struct replace *r = replace_of_mover (mv);

  json_put (o, "member", json_object_new_int64 (r->index));
  json_put (o, "old", json_text (r->old_path));
  json_put (o, "new", json_text (r->new_path));
  json_put (o, "spare", json_object_new_boolean (r->from_spare));
  json_put (o, "automatic", json_object_new_boolean (r->automatic));
  if (r->config) {
    json_put (o, "config", json_text (r->config));
    json_put (o, "config_updated", json_object_new_boolean (r->config_updated));
    if (r->config_note[0])
      json_put (o, "config_note", json_text (r->config_note));
  }
}

void
replace_discard (struct mover *mv)
{
  struct replace *r = replace_of_mover (mv);

  /* Refused before it started: a spare goes back as it was. */
  if (r->newm_open && r->from_spare)
    spares_return (r->a->spares, r->new_path, &r->newm, false, NULL);
  if (r->newm_open)
    member_close (&r->newm);
  free (r->old_path);
  free (r->new_path);
  free (r->config);
  free (r);
}

const struct mover_job replace_job = {
  .status_key   = "replace",
  .run_ops      = replace_run_ops,
  .read_ops     = replace_read_ops,
  .write_ops    = replace_write_ops,
  .logical      = replace_logical,
  .used         = replace_used,
  .zero_ops     = replace_zero_ops,
  .write_failed = replace_write_failed,
  .unreadable   = replace_unreadable,
  .finish       = replace_finish,
  .ended        = replace_ended,
  .status       = replace_status_fields,
  .free         = replace_discard,
};
