/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the start of a grow or shrink (reshape.c is the job): the
 * devices a grow adds opened and checked, a shrink's data checked to fit,
 * the new layout planned, the config and the joining devices prepared,
 * nothing written to any member until every check has passed.
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
#include "owned.h"
#include "plan.h"
#include "reshape.h"
#include "restripe.h"
#include "util.h"
#include "volume.h"
#include "reshape_impl.h"

/* ---- the start ---- */

/* Usable bytes of a member from data_offset on: whole chunks. */
static uint64_t
usable (const struct member *m, uint64_t data_offset, uint64_t chunk)
{
  return m->size > data_offset ? (m->size - data_offset) / chunk * chunk : 0;
}

/* Open and check the devices a grow adds (nothing written to them): none
 * may be a device the volume has (cfg: its config), by any name.
 */
static int
open_new (struct volume *v, const struct reshape_params *p,
          const struct stripe_config *cfg, struct member *nm,
          unsigned *opened, char *why, size_t len)
{
  const struct member *m0 = &v->members[0];
  char reason[512], how[512];
  unsigned j;

  for (unsigned k = 0; k < p->nr_new; ++k) {
    struct member *m = &nm[k];
    const char *path = p->new_paths[k];
    uint8_t first[META_AREA];
    ssize_t n;

    if (member_open (m, v->nr_members + k, path, &m0->params, reason,
                     sizeof reason)
        == -1) {
      snprintf (why, len, "%s: %s", path, reason);
      return -1;
    }
    *opened = k + 1;
    if (owned_check (cfg, path, &m->id,
                     OWNED_MEMBERS | OWNED_SPARES | OWNED_REMOVED, why, len)
        == -1)
      return -1;
    if (volume_alias_of (v, m, &j, how, sizeof how)) {
      snprintf (why, len, "%s and member %u (%s) are %s", path, j,
                v->members[j].path, how);
      return -1;
    }
    for (unsigned i = 0; i < k; ++i)
      if (identity_alias (&nm[i].id, &m->id, how, sizeof how)) {
        snprintf (why, len, "%s and %s are %s: a device is added once",
                  p->new_paths[i], path, how);
        return -1;
      }
    if (usable (m, m0->data_offset, v->layout.chunk) == 0) {
      snprintf (why, len, "%s: %" PRIu64 " bytes: it needs the data offset "
                "(%" PRIu64 ") and at least one chunk (%" PRIu64 ")",
                path, m->size, m0->data_offset, v->layout.chunk);
      return -1;
    }
    if (m->min_io > v->min_block) {
      snprintf (why, len, "%s takes requests of %" PRIu32 " bytes at least, "
                "but the volume's clients were promised %" PRIu32,
                path, m->min_io, v->min_block);
      return -1;
    }
    n = member_pread (m, first, sizeof first, 0, false, reason, sizeof reason);
    if (!p->force && n > 0 && meta_recognise (first, n, how, sizeof how)) {
      snprintf (why, len, "%s %s: refusing to overwrite it (--force)", path,
                how);
      return -1;
    }
    if (member_claim (m, reason, sizeof reason) == -1) {
      snprintf (why, len, "%s: %s", path, reason);
      return -1;
    }
    if (member_start (m) == -1) {
      snprintf (why, len, "%s: cannot start: %m", path);
      return -1;
    }
  }
  return 0;
}

/* Data the volume holds at or beyond offset: a shrink would lose it. */
struct beyond {
  uint64_t first; /* where the first data run starts */
  bool found;
};

static int
note_data (void *opaque, uint64_t offset, uint64_t length, uint32_t flags)
{
  struct beyond *b = opaque;

  (void) length;
  if (!(flags & (MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO)) && !b->found) {
    b->found = true;
    b->first = offset;
  }
  return 0;
}

static int
check_shrink (struct volume *v, const struct reshape_params *p,
              const struct layout *to, char *why, size_t len)
{
  struct beyond b = { 0 };

  if (p->size != to->size) {
    snprintf (why, len, "--size: the volume will have %" PRIu64 " bytes "
              "without member %u: give --size %" PRIu64 " once its file "
              "system is shrunk to fit (shrink --dry-run says it)",
              to->size, p->index, to->size);
    return -1;
  }
  for (uint64_t at = to->size; at < v->layout.size && !b.found;) {
    uint64_t n = v->layout.size - at < (UINT64_C (1) << 30)
                   ? v->layout.size - at
                   : UINT64_C (1) << 30;
    if (volume_extents (v, n, at, false, note_data, &b) == -1) {
      snprintf (why, len, "the volume's block status beyond %" PRIu64
                ": %m", to->size);
      return -1;
    }
    at += n;
  }
  if (b.found && !p->force) {
    snprintf (why, len, "the volume holds data at %" PRIu64 ", beyond the "
              "size it would have (%" PRIu64 "): shrink the file system "
              "first and run fstrim (or, on members that cannot tell data "
              "from free space, --force)",
              b.first, to->size);
    return -1;
  }
  return 0;
}

/* The new layout, its members' union indices and the reshape's record. */
static int
plan_layout (struct reshape *rs, struct volume *v,
             const struct reshape_params *p, const struct member *nm,
             char *why, size_t len)
{
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  const uint64_t off = v->members[0].data_offset, chunk = v->layout.chunk;
  unsigned n = 0, bad;

  rs->from = v->layout;
  memcpy (rs->from_map, v->map, sizeof rs->from_map);
  rs->nr_union = v->nr_members + (p->kind == RESHAPE_GROW ? p->nr_new : 0);
  for (unsigned j = 0; j < rs->from.nr_members; ++j)
    rs->rec.old_sizes[rs->from_map[j]] = rs->from.member_size[j];
  for (unsigned u = 0; u < rs->nr_union; ++u) {
    const struct member *m = u < v->nr_members ? &v->members[u]
                                               : &nm[u - v->nr_members];
    uint64_t s = rs->rec.old_sizes[u];
    if (p->kind == RESHAPE_SHRINK && u == p->index)
      continue;
    if (p->kind == RESHAPE_SIZE || u >= v->nr_members)
      s = usable (m, off, chunk);
    rs->to_map[n] = u;
    sizes[n++] = s;
    rs->rec.new_sizes[u] = s;
  }
  if (layout_init_as (&rs->to, rs->from.id, LAYOUT_SIZE_MD, chunk, n, sizes,
                      &bad)
      != LAYOUT_OK) {
    snprintf (why, len, "the new layout: a member smaller than a chunk");
    return -1;
  }
  if (rs->to.size > INT64_MAX) {
    snprintf (why, len, "the volume would be %" PRIu64 " bytes: more than "
              "NBD's 2^63 - 1", rs->to.size);
    return -1;
  }
  rs->rec.active = true;
  rs->rec.backward = p->kind == RESHAPE_SHRINK;
  restripe_init (&rs->rs, &rs->from, rs->from_map, &rs->to, rs->to_map,
                 rs->nr_union, rs->rec.backward);
  return 0;
}

static struct json_object *
plan_json (const struct reshape *rs, struct volume *v, bool moves)
{
  struct json_object *o = json_object_new_object (), *m;

  json_put (o, "kind", json_text (reshape_kind_names[rs->kind]));
  json_put (o, "size_from", json_u64 (rs->from.size));
  json_put (o, "size_to", json_u64 (rs->to.size));
  /* What the allocation map says is in use: the rest is made to read
   * zeros in its new place, not copied.
   */
  json_put (o, "bytes_to_move",
            json_u64 (!moves ? 0
                      : v->alloc ? alloc_used_bytes (v->alloc, rs->rs.size)
                                 : rs->rs.size));
  json_put (o, "bytes_free",
            json_u64 (moves && v->alloc
                        ? rs->rs.size
                            - alloc_used_bytes (v->alloc, rs->rs.size)
                        : 0));
  json_put (o, "direction", json_text (rs->rs.backward ? "backward"
                                                        : "forward"));
  m = json_object_new_array ();
  for (unsigned j = 0; j < rs->to.nr_members; ++j)
    json_object_array_add (m, json_object_new_int64 (rs->to_map[j]));
  json_put (o, "members_to", m);
  return o;
}

/* The config names what is under way: the joining members, or the one
 * leaving.  !write: only checked (the rewritten config loads), before
 * anything is written.
 */
static int
rewrite_config_start (struct reshape *rs, struct volume *v,
                      const struct reshape_params *p, bool write, char *why,
                      size_t len)
{
  struct stripe_config cfg;
  char *members[LAYOUT_MAX_MEMBERS];
  char err[512];
  int r;

  if (config_load (rs->config, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  for (unsigned i = 0; i < v->nr_members; ++i)
    members[i] = v->members[i].path;
  r = (write ? config_rewrite_members : config_check_members) (
    rs->config,
    &(struct config_members){ v->nr_members, members,
                              p->kind == RESHAPE_GROW ? p->nr_new : 0,
                              (char *const *) p->new_paths,
                              p->kind == RESHAPE_SHRINK
                                ? v->members[p->index].path
                                : NULL,
                              cfg.nr_removed, cfg.removed },
    why, len);
  config_free (&cfg);
  return r;
}

/* Nothing of an older header must be left on a joining device. */
static int
clear_new (struct member *nm, unsigned n, char *why, size_t len)
{
  static const uint8_t zeros[META_AREA];

  for (unsigned k = 0; k < n; ++k)
    if (member_pwrite (&nm[k], zeros, sizeof zeros, 0, why, len) == -1
        || member_sync (&nm[k], why, len) == -1)
      return -1;
  return 0;
}

/* The joining members join the volume (no layout uses them yet), each
 * with a member UUID of its own.
 */
static int
add_members (struct volume *v, struct member *nm, unsigned n, char *why,
             size_t len)
{
  int r = 0;

  volume_switch_begin (v);
  for (unsigned k = 0; k < n && r == 0; ++k) {
    nm[k].data_offset = v->members[0].data_offset;
    /* Its copy of the allocation map before any record names it. */
    if (v->alloc != NULL)
      r = alloc_write_copy (v->alloc, &nm[k], why, len);
    if (r == 0)
      r = volume_add_member (v, &nm[k], why, len);
    if (r == 0)
      meta_add_member (&v->meta, v->nr_members - 1);
  }
  volume_switch_end (v);
  return r;
}

/* Checks a reshape of any kind must pass. */
static int
check_can (struct volume *v, const struct reshape_params *p, char *why,
           size_t len)
{
  if (v->meta.ops->no_reshape) {
    snprintf (why, len, "metadata \"%s\": %s", meta_format (&v->meta),
              v->meta.ops->no_reshape);
    return -1;
  }
  if (p->config == NULL) {
    snprintf (why, len, "the volume is served without a config file: the "
              "config must name the members a reshape changes");
    return -1;
  }
  if (v->meta.reshape.active) {
    snprintf (why, len, "a reshape is under way already");
    return -1;
  }
  if (v->removed) {
    unsigned i = (unsigned) __builtin_ctzll (v->removed);
    snprintf (why, len, "member %u (%s) was removed by a shrink while "
              "served: serve the volume again first (its members are then "
              "numbered as the config lists them)",
              i, v->members[i].path);
    return -1;
  }
  if (p->kind == RESHAPE_SHRINK
      && (p->index >= v->nr_members || v->nr_members < 2)) {
    snprintf (why, len, "no member %u to remove: the volume has %u", p->index,
              v->nr_members);
    return -1;
  }
  if (p->kind == RESHAPE_GROW
      && (p->nr_new == 0 || v->nr_members + p->nr_new > LAYOUT_MAX_MEMBERS)) {
    snprintf (why, len, "%u members to add: the volume has %u, at most %d",
              p->nr_new, v->nr_members, LAYOUT_MAX_MEMBERS);
    return -1;
  }
  return 0;
}

static int
start_ (struct reshape *rs, struct volume *v, const struct reshape_params *p,
        struct member *nm, unsigned *opened, struct json_object **result,
        char *why, size_t len)
{
  uint64_t bad, need;
  bool moves;

  if (p->kind == RESHAPE_GROW) {
    struct stripe_config cfg;
    char err[512];
    int r;

    if (config_load (p->config, &cfg, err, sizeof err) == -1) {
      snprintf (why, len, "%s", err);
      return -1;
    }
    r = open_new (v, p, &cfg, nm, opened, why, len);
    config_free (&cfg);
    if (r == -1)
      return -1;
  }
  if (plan_layout (rs, v, p, nm, why, len) == -1)
    return -1;
  if (v->alloc != NULL
      && ((rs->to.size - 1) >> v->alloc->shift) >= v->alloc->nr_regions) {
    snprintf (why, len, "the volume's allocation map covers %" PRIu64
              " bytes (%" PRIu64 " regions of %" PRIu64 " bytes), the new "
              "layout would be %" PRIu64 ": a volume this large needs a "
              "new one (create it with a larger data_offset)",
              v->alloc->nr_regions << v->alloc->shift, v->alloc->nr_regions,
              UINT64_C (1) << v->alloc->shift, rs->to.size);
    return -1;
  }
  if (p->kind == RESHAPE_SHRINK && !p->dry_run
      && check_shrink (v, p, &rs->to, why, len) == -1)
    return -1;
  if (p->kind == RESHAPE_SIZE && rs->to.size <= rs->from.size) {
    snprintf (why, len, "the members have no more room than the volume uses "
              "(%" PRIu64 " bytes): replace them by bigger ones first",
              rs->from.size);
    return -1;
  }
  moves = !restripe_nothing_moves (&rs->rs);
  rs->journal_cap = (uint64_t) rs->nr_union
                    * ((v->members[0].data_offset > reshape_journal_start (v)
                          ? v->members[0].data_offset
                              - reshape_journal_start (v)
                          : 0) / 4096 * 4096);
  if (rs->journal_cap > MOVER_WINDOW)
    rs->journal_cap = MOVER_WINDOW;
  if (moves && !restripe_feasible (&rs->rs, MOVER_WINDOW, rs->journal_cap,
                                   &bad, &need)) {
    snprintf (why, len, "the data cannot be moved in place from position "
              "%" PRIu64 " on with a journal of %" PRIu64 " bytes (the room "
              "between each member's header and its data_offset)",
              bad, rs->journal_cap);
    return -1;
  }
  /* The config rewrite checked too: it refuses what the next serve
   * would, and NEW's header is cleared next.
   */
  if (p->kind != RESHAPE_SIZE
      && rewrite_config_start (rs, v, p, false, why, len) == -1)
    return -1;
  if (result)
    *result = plan_json (rs, v, moves);
  if (p->dry_run)
    return 0;
  if (p->kind == RESHAPE_GROW && clear_new (nm, p->nr_new, why, len) == -1)
    return -1;
  if (p->kind != RESHAPE_SIZE
      && rewrite_config_start (rs, v, p, true, why, len) == -1)
    return -1;
  /* What the new layout uses of the joining members, as a volume served
   * again mid-grow has it (volume.c's set_needs): a scrub reads that.
   */
  for (unsigned k = 0; p->kind == RESHAPE_GROW && k < p->nr_new; ++k)
    nm[k].need =
      v->members[0].data_offset + rs->rec.new_sizes[v->nr_members + k];
  if (p->kind == RESHAPE_GROW && add_members (v, nm, p->nr_new, why, len) == -1)
    return -1;
  *opened = 0; /* the volume's now */
  rs->has_leaving = p->kind == RESHAPE_SHRINK;
  rs->leaving = p->index;
  meta_set_reshape (&v->meta, &rs->rec);
  return reshape_go (rs, v, 0, p->rate, why, len);
}

int
reshape_start (struct volume *v, const struct reshape_params *p,
               struct json_object **result, char *why, size_t len)
{
  struct member nm[LAYOUT_MAX_MEMBERS];
  struct reshape *rs;
  unsigned opened = 0;
  int r;

  if (result)
    *result = NULL;
  /* The job under way named first (jobs.h), before what it implies. */
  if (volume_job_may_start (v, reshape_job_kind (p->kind), why, len) == -1
      || check_can (v, p, why, len) == -1
      || mover_reserve (v, reshape_job_kind (p->kind), why, len) == -1)
    return -1;
  rs = calloc (1, sizeof *rs);
  if (rs == NULL || (rs->config = strdup (p->config)) == NULL) {
    free (rs);
    snprintf (why, len, "out of memory");
    mover_unreserve (v);
    return -1;
  }
  rs->kind = p->kind;
  memset (nm, 0, sizeof nm);
  r = start_ (rs, v, p, nm, &opened, result, why, len);
  for (unsigned k = 0; k < opened; ++k)
    member_close (&nm[k]);
  if (r == -1 || p->dry_run) {
    if (!rs->mv.thread_started)
      reshape_free (&rs->mv);
    mover_unreserve (v);
  }
  else
    stripe_info ("%s: %u -> %u member%s, %" PRIu64 " -> %" PRIu64 " bytes, "
                 "%" PRIu64 " bytes to move",
                 reshape_kind_names[rs->kind], rs->from.nr_members,
                 rs->to.nr_members, rs->to.nr_members == 1 ? "" : "s",
                 rs->from.size, rs->to.size, rs->rs.size);
  return r;
}

