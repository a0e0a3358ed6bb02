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

#include "config.h"
#include "health.h"
#include "ioexec.h"
#include "json.h"
#include "layout.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "mover.h"
#include "owned.h"
#include "replace.h"
#include "spares.h"
#include "volume.h"

/* Zeroes written to NEW at a time where it cannot zero. */
#define ZERO_BUF (256u * 1024)

/* The mover's positions are member INDEX's offsets. */
struct replace {
  struct mover mv; /* first */
  unsigned index;
  struct member newm; /* NEW (after the switch: old, to be closed) */
  bool newm_open;
  bool from_spare; /* NEW was taken from the volume's spares */
  bool automatic;  /* on_failing's (replace_params) */
  bool reshaping;  /* a grow or shrink stopped half-way (replace_start) */
  char *old_path, *new_path, *config;
  /* Under mv.lock. */
  bool config_updated;
  bool new_failed; /* NEW failed an operation: a spare goes back failing */
  char config_note[1024];
};

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

static bool
is_write (enum op_kind k)
{
  return k == OP_WRITE || k == OP_TRIM || k == OP_ZERO;
}

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
                    is_write (ops[k].kind));
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
    spares_return (mv->v, r->new_path, NULL, true, NULL);
  }
  else if (r->from_spare) {
    snprintf (problem, sizeof problem,
              "failing: the replace of member %u "
              "onto it failed: %.500s",
              r->index, mv->error);
    spares_return (mv->v, r->new_path, &r->newm, false,
                   r->new_failed ? problem : NULL);
    member_close (&r->newm); /* nothing, unless the spare was not found */
  }
  else
    member_close (&r->newm);
  r->newm_open = false;
  if (r->automatic && !mv->start_failed)
    health_spare_ended (mv->v->health, r->index, done, done ? "" : mv->error);
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

static void
replace_discard (struct mover *mv)
{
  struct replace *r = replace_of_mover (mv);

  /* Refused before it started: a spare goes back as it was. */
  if (r->newm_open && r->from_spare)
    spares_return (mv->v, r->new_path, &r->newm, false, NULL);
  if (r->newm_open)
    member_close (&r->newm);
  free (r->old_path);
  free (r->new_path);
  free (r->config);
  free (r);
}

static const struct mover_job replace_job = {
  .status_key   = "replace",
  .run_ops      = replace_run_ops,
  .read_ops     = replace_read_ops,
  .write_ops    = replace_write_ops,
  .logical      = replace_logical,
  .write_failed = replace_write_failed,
  .unreadable   = replace_unreadable,
  .finish       = replace_finish,
  .ended        = replace_ended,
  .status       = replace_status_fields,
  .free         = replace_discard,
};

/* ---- the start ---- */

/* Whether NEW holds metadata a user may want (an nbdstripe header, an md
 * superblock) -- replace overwrites it only with force.  A copy of a
 * member that a replace cut short left on NEW is nobody's
 * (meta_copy_left): the same replace run again takes it.
 */
static bool
holds_metadata (struct volume *v, struct member *m, char *what, size_t len)
{
  uint8_t buf[META_AREA];
  char why[128];
  ssize_t n = member_pread (m, buf, sizeof buf, 0, false, why, sizeof why);

  if (n <= 0 || meta_recognise (buf, n, what, len) == NULL)
    return false;
  if (meta_copy_left (&v->meta, buf, n)) {
    stripe_notice ("replace: %s holds a copy of a member that a replace "
                   "did not finish: overwritten",
                   m->path);
    return false;
  }
  return true;
}

/* Whether NEW can serve what the volume promised its clients: requests
 * as small as the volume's minimum block size.
 */
static bool
new_serves_clients (const struct volume *v, const struct member *n,
                    const char *path, char *why, size_t len)
{
  if (n->min_io > v->min_block) {
    snprintf (why, len, "%s takes requests of %" PRIu32 " bytes at least "
              "(its minimum block size), but the volume's clients were "
              "promised %" PRIu32 ": it cannot take their place",
              path, n->min_io, v->min_block);
    return false;
  }
  return true;
}

/* NEW holds no metadata until the end: a copy cut short (a crash) is
 * never taken for a member.
 */
static int
clear_new_start (struct replace *r, uint64_t data_offset, char *why,
                 size_t len)
{
  static const uint8_t zeros[META_AREA];
  uint64_t n = data_offset < META_AREA ? data_offset : META_AREA;

  if (n > 0
      && (member_pwrite (&r->newm, zeros, n, 0, why, len) == -1
          || member_sync (&r->newm, why, len) == -1))
    return -1;
  return 0;
}

/* NEW none of the spares under another name (one named as the config
 * names it is taken from the spares) and none of the removed members:
 * the config rewritten at the end would list it twice, and the next
 * serve refuse it.
 */
static int
check_owned (const char *config, const char *path, const struct identity *id,
             char *why, size_t len)
{
  struct stripe_config cfg;
  char err[512];
  int r;

  if (config == NULL)
    return 0;
  if (config_load (config, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  r = owned_check (&cfg, path, id,
                   OWNED_SPARES | OWNED_REMOVED | OWNED_SPARE_AS_NAMED, why,
                   len);
  config_free (&cfg);
  return r;
}

/* Checks of NEW, with no lock held (opening an NBD export may take
 * seconds): r->newm opened, claimed and started, its first bytes
 * cleared.  Nothing is written to NEW before every check has passed.
 */
static int
prepare_new (struct volume *v, struct replace *r,
             const struct replace_params *p, char *why, size_t len)
{
  const struct member *old = &v->members[p->index];
  uint64_t need = old->need;
  char reason[512], how[512];
  unsigned j;
  int t;

  /* One of the spares: taken as it is, opened and claimed. */
  t = spares_take (v, p->new_path, p->index, &r->newm, reason, sizeof reason);
  if (t == -1) {
    snprintf (why, len, "%s", reason);
    return -1;
  }
  r->from_spare = t == 1;
  if (!r->from_spare
      && member_open (&r->newm, p->index, p->new_path, &old->params, reason,
                      sizeof reason)
           == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  r->newm_open = true;
  if (volume_alias_of (v, &r->newm, &j, how, sizeof how)) {
    if (j == p->index)
      snprintf (why, len, "%s is member %u itself (%s)", p->new_path, j, how);
    else
      snprintf (why, len, "%s and member %u (%s) are %s", p->new_path, j,
                v->members[j].path, how);
    return -1;
  }
  if (check_owned (p->config, p->new_path, &r->newm.id, why, len) == -1)
    return -1;
  if (meta_fits (&v->meta, p->index, r->newm.size, need, reason,
                 sizeof reason)
      == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  if (r->newm.size < need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes: member %u needs %" PRIu64
              " (its data offset and data)",
              p->new_path, r->newm.size, p->index, need);
    return -1;
  }
  if (!new_serves_clients (v, &r->newm, p->new_path, why, len))
    return -1;
  if (!p->force
      && holds_metadata (v, &r->newm, reason, sizeof reason)) {
    snprintf (why, len, "%s %s: refusing to overwrite it (force)",
              p->new_path, reason);
    return -1;
  }
  if (!r->from_spare && member_claim (&r->newm, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  if (member_start (&r->newm) == -1) {
    snprintf (why, len, "%s: cannot start: %m", p->new_path);
    return -1;
  }
  if (clear_new_start (r, old->data_offset, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  return 0;
}

static struct replace *
new_replace (struct volume *v, const struct replace_params *p)
{
  struct replace *r = calloc (1, sizeof *r);

  if (r == NULL)
    return NULL;
  r->mv.job = &replace_job;
  r->mv.v = v;
  r->mv.rate = p->rate;
  r->mv.skip_unreadable = p->skip_unreadable;
  r->index = p->index;
  r->automatic = p->automatic;
  r->old_path = strdup (v->members[p->index].path);
  r->new_path = strdup (p->new_path);
  r->config = p->config ? strdup (p->config) : NULL;
  if (r->old_path == NULL || r->new_path == NULL
      || (p->config && r->config == NULL)) {
    replace_discard (&r->mv);
    return NULL;
  }
  snprintf (r->mv.vm.what, sizeof r->mv.vm.what, "a replace of member %u%s",
            p->index, p->automatic ? " onto a spare" : "");
  r->mv.vm.kind = p->automatic ? JOB_SPARE : JOB_REPLACE;
  return r;
}

int
replace_start (struct volume *v, const struct replace_params *p, char *why,
               size_t len)
{
  struct replace *r;
  bool reshaping;

  if (p->index >= v->nr_members) {
    snprintf (why, len, "no member %u: the volume has %u (0 to %u)",
              p->index, v->nr_members, v->nr_members - 1);
    return -1;
  }
  if (v->removed >> p->index & 1) {
    snprintf (why, len, "member %u (%s) was removed by a shrink: it is no "
              "longer a member",
              p->index, v->members[p->index].path);
    return -1;
  }
  /* The command names the member by its place in the config, which the
   * shrink rewrote; this server still numbers them as they were.  One
   * index meaning two members is how the wrong disk gets replaced.
   */
  if (volume_renumbered (v)) {
    snprintf (why, len, "a shrink while served renumbered the members (the "
              "config lists them anew): serve the volume again first");
    return -1;
  }
  if (p->config == NULL && !meta_on_members (&v->meta)) {
    snprintf (why, len, "the volume has neither a config file to name the "
              "new member in nor metadata on its members (served ad hoc, "
              "file=...): after a restart it would be served from the old "
              "member again; serve it from a config file");
    return -1;
  }
  /* A grow or shrink under way on a volume opened stopped (served, its
   * job holds the volume's one job slot and mover_reserve refuses): the
   * member's bytes are where either layout puts them, and its journal
   * may hold a window the headers record (reshape.h).  Copied whole from
   * the end of its header on, with the header's reshape fields given to
   * NEW (meta_write_new writes them), the volume goes on from the same
   * position on NEW when served again.  Which layout an unreadable
   * block belongs to depends on the position: no logical ranges, so no
   * zeros written in place of lost data.
   */
  if (p->skip_unreadable && !v->meta.ops->keeps_lost) {
    snprintf (why, len, "metadata \"%s\" keeps no list of lost ranges: "
              "what --skip-unreadable cannot copy would read as zeros, "
              "silently; replace without it, or copy the member with "
              "ddrescue first",
              meta_format (&v->meta));
    return -1;
  }
  reshaping = meta_reshape_recorded (&v->meta);
  if (reshaping && p->skip_unreadable) {
    snprintf (why, len, "a grow or shrink is under way on the members: "
              "--skip-unreadable cannot say which of the volume's bytes "
              "would be lost; replace without it, or let the grow or "
              "shrink end first");
    return -1;
  }
  if (mover_reserve (v, p->automatic ? JOB_SPARE : JOB_REPLACE, why, len)
      == -1) {
    size_t n = strlen (why);
    /* Served, its grow or shrink paused (a member failing): the way on. */
    if (reshaping && n < len)
      snprintf (why + n, len - n, "; to replace member %u before it goes "
                "on, stop the volume (nbdstripe stop), replace it with "
                "--offline, and serve the volume again (the grow or shrink "
                "goes on from where it stopped)",
                p->index);
    return -1;
  }
  r = new_replace (v, p);
  if (r == NULL) {
    snprintf (why, len, "out of memory");
    mover_unreserve (v);
    return -1;
  }
  /* Slow (an NBD connect): no lock that status or the I/O path takes. */
  if (prepare_new (v, r, p, why, len) == -1) {
    replace_discard (&r->mv);
    mover_unreserve (v);
    return -1;
  }
  r->mv.start = v->members[p->index].data_offset;
  r->mv.end = v->members[p->index].need;
  r->reshaping = reshaping;
  if (reshaping && r->mv.start > META_AREA)
    r->mv.start = META_AREA; /* the journal too */
  mover_init (&r->mv);
  /* on_failing's: said before the copier runs (health_spare.c). */
  if (r->automatic)
    health_spare_started (v->health, r->index, r->new_path);
  if (mover_start (&r->mv, why, len) == -1)
    return -1;
  stripe_info ("replace: member %u: copying %s to %s (%" PRIu64 " bytes)",
               r->index, r->old_path, r->new_path, r->mv.end - r->mv.start);
  return 0;
}

/* ---- on_failing = "replace" ---- */

int
replace_onto_spare (struct volume *v, unsigned index, const char *config,
                    char *spare, size_t slen, char *why, size_t len)
{
  char path[4096], reason[1024], skipped[1024] = "";
  size_t n = 0;
  int c;

  /* Not now: spares are looked at (their drives read) only when a
   * replace could start.
   */
  if (volume_job_may_start (v, JOB_SPARE, why, len) == -1)
    return 1;
  for (unsigned k = 0; (c = spares_candidate (v, k, index, path, sizeof path,
                                              reason, sizeof reason))
                       != -1;
       ++k) {
    struct replace_params p = {
      .index = index, .new_path = path, .config = config, .automatic = true
    };

    if (c == 0 && reason[0] == '\0')
      continue; /* a spare that is a member now */
    if (c == 1 && replace_start (v, &p, reason, sizeof reason) == 0) {
      snprintf (spare, slen, "%s", path);
      return 0;
    }
    if (c == 1 && errno == EAGAIN) {
      snprintf (why, len, "%s", reason);
      return 1;
    }
    if (c == 1 && errno == EROFS) {
      snprintf (why, len, "%s", reason);
      return -1;
    }
    stripe_warning ("on_failing: member %u: spare %s skipped: %s", index, path,
                    reason);
    if (n < sizeof skipped)
      n += snprintf (skipped + n, sizeof skipped - n, "%s%s: %s",
                     n ? "; " : "", path, reason);
  }
  snprintf (why, len, "no spare can take its place%s%s", n ? ": " : "",
            n ? skipped : " (none left)");
  return -1;
}

static int
spare_start_op (void *opaque, unsigned i, const char *config, char *spare,
                size_t slen, char *why, size_t len)
{
  return replace_onto_spare (opaque, i, config, spare, slen, why, len);
}

void
replace_health_ops (struct health_ops *ops)
{
  ops->spare_start = spare_start_op;
}
