/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: growing and shrinking a served volume, a job of the mover:
 * its end, its resumption, its pause and continuation.  See
 * include/reshape.h; the checks and plan of its start are in
 * reshape_start.c, the clients and the copy in reshape_io.c, the
 * arithmetic restripe.c's.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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

const char *const reshape_kind_names[] = { "grow", "shrink", "grow --size" };

/* ---- the end ---- */

/* What the config says once the reshape is done. */
static int
rewrite_config_end (struct reshape *rs, char *why, size_t len)
{
  struct volume *v = rs->mv.v;
  struct stripe_config cfg;
  char *members[LAYOUT_MAX_MEMBERS], *removed[LAYOUT_MAX_MEMBERS];
  unsigned n = 0, nr_removed = 0;
  char err[512];
  int r;

  if (config_load (rs->config, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  for (unsigned j = 0; j < rs->to.nr_members; ++j)
    members[n++] = v->members[rs->to_map[j]].path;
  for (unsigned k = 0; k < cfg.nr_removed; ++k)
    removed[nr_removed++] = cfg.removed[k];
  if (rs->has_leaving && nr_removed < LAYOUT_MAX_MEMBERS)
    removed[nr_removed++] = v->members[rs->leaving].path;
  r = config_rewrite_members (rs->config,
                              &(struct config_members){ n, members, 0, NULL,
                                                        NULL, nr_removed,
                                                        removed },
                              why, len);
  config_free (&cfg);
  return r;
}

/* The room a grow adds holds what the old layout left there: zeroed
 * (trimmed where the members can) before anyone can address it, so that
 * it reads as zeros and a later shrink sees it free.
 */
static int
zero_room (struct reshape *rs)
{
  const uint64_t step = UINT64_C (1) << 30;

  for (uint64_t at = rs->rs.size; at < rs->to.size; at += step) {
    struct volume_request rq = { .kind = OP_ZERO, .offset = at,
                                 .count = rs->to.size - at < step
                                            ? rs->to.size - at
                                            : step,
                                 .may_trim = true };
    if (volume_request_view (rs->mv.v, &rs->new_view, &rq) == -1) {
      mover_fail (&rs->mv, "zeroing the new room at %" PRIu64 ": %m", at);
      return -1;
    }
  }
  /* It reads as zeros: free in the allocation map (alloc.h). */
  if (rs->mv.v->alloc && rs->to.size > rs->rs.size)
    alloc_clear (rs->mv.v->alloc, rs->rs.size, rs->to.size - rs->rs.size);
  return 0;
}

/* Everything is moved: the headers say the new layout, the volume is
 * the new layout, the config names its members.  Each step leaves a
 * volume that assembles: headers at the end position read as the new
 * layout (meta_header.c), and a config still naming joining or leaving
 * members is taken as done (assemble.c).
 */
static void
reshape_finish (struct mover *mv)
{
  struct reshape *rs = reshape_of_mover (mv);
  struct volume *v = mv->v;
  struct member *devs[LAYOUT_MAX_MEMBERS] = { NULL };
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint8_t slot[LAYOUT_MAX_MEMBERS];
  char why[512];

  if (mv->recorded < rs->rs.size && reshape_checkpoint (rs, rs->rs.size) == -1)
    return;
  if (zero_room (rs) == -1)
    return;
  mover_phase (mv, "copied");
  volume_switch_begin (v);
  if (!mover_switching (mv))
    goto release;
  mover_phase (mv, "quiesced");
  for (unsigned u = 0; u < LAYOUT_MAX_MEMBERS; ++u)
    slot[u] = u;
  for (unsigned j = 0; j < rs->to.nr_members; ++j) {
    slot[rs->to_map[j]] = j;
    sizes[j] = rs->to.member_size[j];
    devs[rs->to_map[j]] = &v->members[rs->to_map[j]];
  }
  /* The last update: a crash between two of its header writes leaves
   * members with the final headers (no reshape, the new member count,
   * G + 1) beside members at G recording the reshape at its end
   * position; both say every byte is in the new layout.  Assembly takes
   * the final record (the newest) and the others as they are; a
   * leaving member not yet marked removed is at the end position,
   * which reads as removed (meta_header.c), and the config, rewritten
   * after, still naming it is taken as done (assemble.c).
   */
  volume_lost_truncate (v, rs->to.size);
  meta_end_reshape (&v->meta, rs->to.nr_members, sizes, slot);
  if (meta_record_all (&v->meta, devs, why, sizeof why) == -1)
    /* The headers at the end position say the same: not lost. */
    stripe_error ("%s: the final headers: %s (the members read as the new "
                  "layout all the same)",
                  reshape_kind_names[rs->kind], why);
  if (rs->has_leaving
      && meta_mark_removed (&v->meta, rs->leaving, &v->members[rs->leaving],
                            why, sizeof why)
           == -1)
    stripe_error ("shrink: member %u (%s): could not mark it removed: %s "
                  "(its header is at the end of the shrink, which reads as "
                  "removed)",
                  rs->leaving, v->members[rs->leaving].path, why);
  mover_phase (mv, "metadata");
  volume_switch_layout (v, &rs->to, rs->to_map);
  /* The member leaving holds nothing of the volume now: synced with
   * nothing in flight, so that no flush ever needs it again.
   */
  if (rs->has_leaving)
    volume_remove_member (v, rs->leaving);
  mv->hold_ns = volume_switch_end (v);
  if (rewrite_config_end (rs, why, sizeof why) == -1)
    stripe_error ("%s: %s not rewritten (%s): the volume assembles from it "
                  "all the same; edit it to list the members as the status "
                  "shows them",
                  reshape_kind_names[rs->kind], rs->config, why);
  /* Its claim released once the config no longer names it a member (it
   * lists it under removed): another volume may take it at once, and a
   * crash now finds it nowhere but there.
   */
  if (rs->has_leaving)
    volume_release_member (v, rs->leaving);
  mover_phase (mv, "config");
  volume_bump_generation (v, -1, "a reshape ended");
  mover_done (mv);
  stripe_notice ("%s: done: %" PRIu64 " bytes moved in %.1f s (%u "
                 "checkpoints, %u windows through the journal); the volume "
                 "is %" PRIu64 " bytes on %u member%s (clients see it when "
                 "they connect again)",
                 reshape_kind_names[rs->kind], mv->end - mv->start,
                 (mv->t_end - mv->t_start) / 1e9, rs->checkpoints,
                 rs->journaled, rs->to.size, rs->to.nr_members,
                 rs->to.nr_members == 1 ? "" : "s");
  return;

release:
  mv->hold_ns = volume_switch_end (v);
}

/* A reshape that stopped before its end stays: the volume goes on through
 * both layouts, and goes on moving when it is served again.
 */
static bool
reshape_withdraw (struct mover *mv)
{
  if (mv->state == MOVER_DONE)
    return true;
  /* Before the slot says it stays (what a refusal quotes). */
  snprintf (mv->vm.what, sizeof mv->vm.what, "a %s, paused half-way",
            reshape_kind_names[reshape_of_mover (mv)->kind]);
  return false;
}

enum job_kind
reshape_job_kind (enum reshape_kind kind)
{
  return kind == RESHAPE_SHRINK ? JOB_SHRINK
         : kind == RESHAPE_SIZE ? JOB_SIZE
                                : JOB_GROW;
}

/* How far it is, as a refusal says it: "3 -> 4 members, 41% done";
 * paused, with the way on.
 */
static bool
reshape_describe (struct mover *mv, char *detail, size_t len)
{
  struct reshape *rs = reshape_of_mover (mv);
  uint64_t done, total = mv->end;
  bool paused;

  pthread_mutex_lock (&mv->lock);
  done = mv->watermark;
  paused = (mv->state == MOVER_FAILED || mv->state == MOVER_CANCELLED)
           && !mv->start_failed;
  pthread_mutex_unlock (&mv->lock);
  snprintf (detail, len, "%u -> %u member%s, %" PRIu64 "%% done%s%s%s",
            rs->from.nr_members, rs->to.nr_members,
            rs->to.nr_members == 1 ? "" : "s",
            total ? done * 100 / total : 100, paused ? "; 'nbdstripe " : "",
            paused ? (rs->kind == RESHAPE_SHRINK ? "shrink" : "grow") : "",
            paused ? " --wait VOLUME' goes on" : "");
  return paused;
}

/* Why a reshape stopped half-way, and the way on (mv->lock held). */
static const char *
way_on (struct reshape *rs, char *buf, size_t len)
{
  struct mover *mv = &rs->mv;
  const char *kind = rs->kind == RESHAPE_SHRINK ? "shrink" : "grow";

  if (mv->state == MOVER_CANCELLED)
    snprintf (buf, len, "cancelled; the volume is served as it is; "
              "'nbdstripe %s --wait %s' goes on from here",
              kind, rs->config);
  else
    snprintf (buf, len, "%s; the volume is served as it is; once the member "
              "works again, 'nbdstripe %s --wait %s' goes on from here; to "
              "move it off a dying drive first: stop the volume, "
              "'nbdstripe replace --offline %s INDEX NEW', and serve it "
              "again (the %s goes on)",
              mv->error, kind, rs->config, rs->config, kind);
  return buf;
}

static void
reshape_ended (struct mover *mv)
{
  struct reshape *rs = reshape_of_mover (mv);

  if (mv->state != MOVER_DONE && !mv->start_failed) {
    char why[2048];
    pthread_mutex_lock (&mv->lock);
    way_on (rs, why, sizeof why);
    pthread_mutex_unlock (&mv->lock);
    stripe_error ("%s: paused at %" PRIu64 " of %" PRIu64 " bytes: %s (or "
                  "served again)",
                  reshape_kind_names[rs->kind], mv->watermark - mv->start,
                  mv->end - mv->start, why);
  }
  if (rs->rplan_set)
    plan_free (&rs->rplan);
  if (rs->wplan_set)
    plan_free (&rs->wplan);
  rs->rplan_set = rs->wplan_set = false;
}

static void
reshape_status (struct mover *mv, struct json_object *o)
{
  struct reshape *rs = reshape_of_mover (mv);

  json_put (o, "kind", json_text (reshape_kind_names[rs->kind]));
  json_put (o, "members_from", json_object_new_int64 (rs->from.nr_members));
  json_put (o, "members_to", json_object_new_int64 (rs->to.nr_members));
  json_put (o, "size_from", json_u64 (rs->from.size));
  json_put (o, "size_to", json_u64 (rs->to.size));
  json_put (o, "position_recorded", json_u64 (mv->recorded));
  json_put (o, "checkpoints", json_object_new_int64 (rs->checkpoints));
  json_put (o, "journaled_windows", json_object_new_int64 (rs->journaled));
  json_put (o, "direction",
            json_text (rs->rs.backward ? "backward" : "forward"));
  /* Stopped half-way, it stays, and goes on when asked (the error says
   * how): paused, not over.
   */
  if ((mv->state == MOVER_FAILED || mv->state == MOVER_CANCELLED)
      && !mv->start_failed) {
    char why[2048];
    json_put (o, "state", json_text ("paused"));
    json_put (o, "error", json_text (way_on (rs, why, sizeof why)));
    json_put (o, "paused_by", json_text (mv->state == MOVER_CANCELLED
                                           ? "cancel"
                                           : "error"));
  }
}

void
reshape_free (struct mover *mv)
{
  struct reshape *rs = reshape_of_mover (mv);

  free (rs->config);
  free (rs);
}

static const struct mover_job reshape_job = {
  .status_key   = "reshape",
  .run_ops      = reshape_run_ops,
  .request      = reshape_request,
  .read_ops     = reshape_read_ops,
  .write_ops    = reshape_write_ops,
  .window_size  = reshape_window_size,
  .before_write = reshape_before_write,
  .after_write  = reshape_after_write,
  .logical      = reshape_logical,
  .used         = reshape_used,
  .zero_ops     = reshape_zero_ops,
  .buf_at       = reshape_buf_at,
  .write_failed = reshape_write_failed,
  .unreadable   = reshape_unreadable,
  .finish       = reshape_finish,
  .withdraw     = reshape_withdraw,
  .ended        = reshape_ended,
  .status       = reshape_status,
  .free         = reshape_free,
  .describe     = reshape_describe,
  .locate       = reshape_locate,
};

/* ---- the job's start (reshape_start.c checks and plans it) ---- */

/* The job's mover set up and started at position (0 for a new reshape,
 * the recorded one when it goes on), at rate.
 */
int
reshape_go (struct reshape *rs, struct volume *v, uint64_t position,
            uint64_t rate, char *why, size_t len)
{
  rs->mv.job = &reshape_job;
  rs->mv.v = v;
  rs->mv.rate = rate;
  rs->mv.start = position;
  rs->mv.end = rs->rs.size;
  rs->old_view = (struct volume_view){ &rs->from, rs->from_map };
  rs->new_view = (struct volume_view){ &rs->to, rs->to_map };
  snprintf (rs->mv.vm.what, sizeof rs->mv.vm.what, "a %s",
            reshape_kind_names[rs->kind]);
  rs->mv.vm.kind = reshape_job_kind (rs->kind);
  mover_init (&rs->mv);
  rs->mv.recorded = position;
  return mover_start (&rs->mv, why, len);
}

/* ---- served again mid-way ---- */

/* A journal holding a window beyond the recorded position: the window's
 * old bytes, written to their new place again.
 */
static int
replay (struct reshape *rs, char *why, size_t len)
{
  const struct meta_reshape *r = &rs->rec;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  uint8_t *buf;
  unsigned n;
  int ret = -1;

  if (posix_memalign ((void **) &buf, 4096, r->journal_length) != 0) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  if (reshape_journal_io (rs, OP_READ, buf, r->journal_length) == -1) {
    snprintf (why, len, "reading the journal: %m");
    goto out;
  }
  if (crc32c (0, buf, r->journal_length) != r->journal_crc) {
    snprintf (why, len, "the journal's checksum does not match its bytes: "
              "the window at position %" PRIu64 " cannot be restored",
              r->journal_position);
    goto out;
  }
  n = reshape_write_ops (&rs->mv, buf, r->journal_position, r->journal_length,
                         ops, NULL);
  if (ioexec_run (ops, n, rs->mv.v->uring) == -1) {
    snprintf (why, len, "writing the journal's window back: %m");
    goto out;
  }
  stripe_notice ("%s: the journal's window (%" PRIu64 " bytes at position "
                 "%" PRIu64 ") written back",
                 reshape_kind_names[rs->kind], r->journal_length,
                 r->journal_position);
  rs->rec.position = r->journal_position + r->journal_length;
  rs->rec.journal = false;
  rs->rec.journal_position = rs->rec.journal_length = 0;
  rs->rec.journal_crc = 0;
  ret = reshape_record (rs);
  if (ret == -1)
    snprintf (why, len, "%s", rs->mv.error);
out:
  free (buf);
  return ret;
}

int
reshape_resume (struct volume *v, const struct assembly *a, const char *config,
                char *why, size_t len)
{
  struct reshape *rs;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  unsigned n = 0, bad;

  if (config == NULL) {
    snprintf (why, len, "a reshape is under way: serve the volume from its "
              "config file");
    return -1;
  }
  /* Served again: nothing else runs yet; which restripe it is, the
   * records say below.
   */
  if (mover_reserve (v, JOB_GROW, why, len) == -1)
    return -1;
  rs = calloc (1, sizeof *rs);
  if (rs == NULL || (rs->config = strdup (config)) == NULL) {
    free (rs);
    mover_unreserve (v);
    snprintf (why, len, "out of memory");
    return -1;
  }
  rs->rec = a->reshape;
  rs->nr_union = v->nr_members;
  rs->from = v->layout;
  memcpy (rs->from_map, v->map, sizeof rs->from_map);
  rs->kind = RESHAPE_SIZE;
  for (unsigned u = 0; u < rs->nr_union; ++u) {
    if (rs->rec.old_sizes[u] == 0)
      rs->kind = RESHAPE_GROW;
    if (rs->rec.new_sizes[u] == 0) {
      rs->kind = RESHAPE_SHRINK;
      rs->has_leaving = true;
      rs->leaving = u;
      continue;
    }
    rs->to_map[n] = u;
    sizes[n++] = rs->rec.new_sizes[u];
  }
  if (layout_init_as (&rs->to, rs->from.id, LAYOUT_SIZE_MD, rs->from.chunk,
                      n, sizes, &bad)
      != LAYOUT_OK) {
    snprintf (why, len, "the new layout the headers record is not valid");
    goto err;
  }
  restripe_init (&rs->rs, &rs->from, rs->from_map, &rs->to, rs->to_map,
                 rs->nr_union, rs->rec.backward);
  rs->journal_cap = reshape_journal_room (v, rs->nr_union);
  rs->mv.v = v;
  rs->on_record = true;
  if (rs->rec.journal && replay (rs, why, len) == -1)
    goto err;
  stripe_notice ("%s under way: going on from %" PRIu64 " of %" PRIu64
                 " bytes",
                 reshape_kind_names[rs->kind], rs->rec.position, rs->rs.size);
  if (reshape_go (rs, v, rs->rec.position, 0, why, len) == -1)
    return -1;
  return 0;

err:
  reshape_free (&rs->mv);
  mover_unreserve (v);
  return -1;
}

int
reshape_fix_config (const char *config, const struct assembly *a, char *why,
                    size_t len)
{
  struct stripe_config cfg;
  char *members[LAYOUT_MAX_MEMBERS], *removed[LAYOUT_MAX_MEMBERS];
  unsigned nr_removed = 0;
  char err[512];
  int r;

  if (!a->config_stale || config == NULL)
    return 0;
  if (config_load (config, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  for (unsigned i = 0; i < a->nr; ++i)
    members[i] = (char *) a->paths[i];
  for (unsigned k = 0; k < cfg.nr_removed; ++k)
    removed[nr_removed++] = cfg.removed[k];
  if (a->left && nr_removed < LAYOUT_MAX_MEMBERS)
    removed[nr_removed++] = (char *) a->left;
  r = config_rewrite_members (config,
                              &(struct config_members){ a->nr, members, 0,
                                                        NULL, NULL,
                                                        nr_removed, removed },
                              why, len);
  config_free (&cfg);
  if (r == 0)
    stripe_notice ("%s: rewritten (%s)", config, a->config_note);
  return r;
}


/* ---- paused and continued while served ---- */

/* The job published on v if it is a reshape (NULL: none).  A job is
 * freed only when the volume closes.
 */
static struct reshape *
published (struct volume *v)
{
  struct mover *mv = (struct mover *) atomic_load (&v->mover);

  return mv && mv->job == &reshape_job ? reshape_of_mover (mv) : NULL;
}

int
reshape_cancel (struct volume *v, char *why, size_t len)
{
  struct reshape *rs = published (v);
  struct mover *mv;
  int r = -1;

  if (rs == NULL) {
    snprintf (why, len, "no grow or shrink is under way");
    errno = ENOENT;
    return -1;
  }
  mv = &rs->mv;
  pthread_mutex_lock (&mv->lock);
  if (mv->state == MOVER_COPYING) {
    mv->cancel = true;
    pthread_cond_broadcast (&mv->cond);
    r = 0;
  }
  else if (mv->state == MOVER_SWITCHING) {
    snprintf (why, len, "too late: the %s is switching to the new layout",
              reshape_kind_names[rs->kind]);
    errno = EALREADY;
  }
  else {
    snprintf (why, len, "the %s is paused already", reshape_kind_names[rs->kind]);
    errno = EALREADY;
  }
  pthread_mutex_unlock (&mv->lock);
  return r;
}

/* The new job's reshape from the paused one's: the same layouts and
 * members, from the position recorded.
 */
static struct reshape *
copy_of (const struct reshape *old)
{
  struct reshape *rs = calloc (1, sizeof *rs);

  if (rs == NULL || (rs->config = strdup (old->config)) == NULL) {
    free (rs);
    return NULL;
  }
  rs->kind = old->kind;
  rs->from = old->from;
  rs->to = old->to;
  memcpy (rs->from_map, old->from_map, sizeof rs->from_map);
  memcpy (rs->to_map, old->to_map, sizeof rs->to_map);
  rs->nr_union = old->nr_union;
  rs->has_leaving = old->has_leaving;
  rs->leaving = old->leaving;
  rs->journal_cap = old->journal_cap;
  rs->rec = old->rec;
  rs->rec.position = old->mv.recorded;
  rs->rec.journal = false;
  rs->rec.journal_position = rs->rec.journal_length = 0;
  rs->rec.journal_crc = 0;
  restripe_init (&rs->rs, &rs->from, rs->from_map, &rs->to, rs->to_map,
                 rs->nr_union, rs->rec.backward);
  rs->mv.v = old->mv.v;
  return rs;
}

int
reshape_continue (struct volume *v, uint64_t rate, char *why, size_t len)
{
  struct reshape *old = published (v), *rs;
  enum mover_state s;

  if (old == NULL) {
    snprintf (why, len, "no grow or shrink is under way");
    errno = ENOENT;
    return -1;
  }
  s = mover_state (&old->mv);
  if (s == MOVER_COPYING || s == MOVER_SWITCHING) {
    snprintf (why, len, "the %s is running", reshape_kind_names[old->kind]);
    errno = EALREADY;
    return -1;
  }
  if (volume_mover_reserve_over (v, &old->mv.vm, why, len) == -1)
    return -1;
  /* Its copier has ended or is about to (nothing it waits for): the slot
   * reserved, no one else joins it.
   */
  if (old->mv.thread_started) {
    pthread_join (old->mv.thread, NULL);
    old->mv.thread_started = false;
  }
  rs = copy_of (old);
  if (rs == NULL) {
    mover_unreserve (v);
    snprintf (why, len, "out of memory");
    return -1;
  }
  /* The headers say where it is again (one whose record failed half-way
   * may say more, or a journal), or the journal's window, stopped
   * half-written, is written again from the journal first.  The old job
   * still serves requests meanwhile: it keeps clients off that window.
   */
  if (old->fenced) {
    rs->rec.journal = true;
    rs->rec.journal_position = old->fence_pos;
    rs->rec.journal_length = old->fence_len;
    rs->rec.journal_crc = old->fence_crc;
    if (replay (rs, why, len) == -1)
      goto err;
  }
  else if (reshape_record (rs) == -1) {
    snprintf (why, len, "%s", rs->mv.error);
    goto err;
  }
  stripe_notice ("%s: going on from %" PRIu64 " of %" PRIu64 " bytes",
                 reshape_kind_names[rs->kind], rs->rec.position, rs->rs.size);
  return reshape_go (rs, v, rs->rec.position, rate, why, len);

err:
  reshape_free (&rs->mv);
  mover_unreserve (v);
  return -1;
}
