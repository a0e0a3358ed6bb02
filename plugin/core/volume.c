/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume, members + layout: opening, closing, members
 * switched or added.  See include/volume.h; the requests are in
 * volume_io.c, the gate and the job slot in gate.c, health's side in
 * volume_health.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "assemble.h"
#include "health_record.h"
#include "identity.h"
#include "log.h"
#include "util.h"
#include "volume.h"
#include "volume_lost.h"

/* The volume's own state, before any member: nothing to undo but
 * volume_close.
 */
static int
init_state (struct volume *v, const struct volume_options *o)
{
  void *d;
  int e;

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
  e = posix_memalign (&d, _Alignof (struct dirty),
                      LAYOUT_MAX_MEMBERS * sizeof (struct dirty));
  if (e != 0) {
    errno = e;
    stripe_error ("cannot allocate the volume's state: %m");
    return -1;
  }
  v->dirty = d;
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    dirty_init (&v->dirty[i]);
  return 0;
}

/* Member i: opened, no alias of one before it, claimed, its data offset
 * and (*size) the bytes of data it holds.
 */
static int
open_member (struct volume *v, unsigned i, const char *const *paths,
             const struct member_open_params *p,
             const struct volume_options *o, uint64_t *size)
{
  const struct assembly *a = o->assembly;
  struct member *m = &v->members[i];
  char why[512];

  v->nr_members = i + 1; /* member_open leaves it closable */
  if (a && (a->missing >> i & 1)) {
    /* Served degraded: its place is the header's word, its data lost. */
    if (!o->readonly) {
      stripe_error ("member %u (%s): missing: a volume is served without "
                    "a member only read-only",
                    i, paths[i]);
      errno = EROFS;
      return -1;
    }
    if (a->data_sizes[i] == 0
        || member_open_absent (m, i, paths[i],
                               a->data_offsets[i] + a->data_sizes[i], why,
                               sizeof why)
             == -1) {
      stripe_error ("member %u (%s): missing, and its size is unknown: "
                    "cannot be served degraded",
                    i, paths[i]);
      errno = EINVAL;
      return -1;
    }
    v->missing |= UINT64_C (1) << i;
    m->data_offset = a->data_offsets[i];
    *size = a->data_sizes[i];
    return 0;
  }
  if (member_open (m, i, paths[i], p, why, sizeof why) == -1) {
    int err = errno;
    if (!o->readonly && (err == EROFS || err == EACCES || err == EPERM))
      stripe_error ("member %u (%s): cannot be opened for writing: %s "
                    "(serve the volume read-only: nbdstripe serve --read-only, or "
                    "nbdkit -r)",
                    i, paths[i], why);
    else
      stripe_error ("member %u (%s): %s", i, paths[i], why);
    errno = err;
    return -1;
  }
  for (unsigned j = 0; j < i; ++j) {
    char how[512];
    if (identity_alias (&v->members[j].id, &m->id, how, sizeof how)) {
      stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                    "may be given only once, and members must not "
                    "overlap",
                    j, paths[j], i, paths[i], how);
      errno = EINVAL;
      return -1;
    }
  }
  /* Only now: a second name for a member is an alias, not "in use". */
  if (o->claim && member_claim (m, why, sizeof why) == -1) {
    int err = errno;
    stripe_error ("member %u (%s): %s", i, paths[i], why);
    errno = err;
    return -1;
  }
  m->data_offset = a ? a->data_offsets[i] : 0;
  if (m->size < m->data_offset) {
    stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                  "the data offset (%" PRIu64 ")",
                  i, paths[i], m->size, m->data_offset);
    errno = EINVAL;
    return -1;
  }
  *size = m->size - m->data_offset;
  if (a && a->data_sizes[i] != 0) {
    /* The metadata says how much data the member holds: a member that
     * shrank (or was replaced by a smaller one) would lose data.
     */
    if (a->data_sizes[i] > *size) {
      stripe_error ("member %u (%s): holds %" PRIu64 " bytes of data "
                    "but the volume expects %" PRIu64 ": truncated or "
                    "replaced by a smaller member?",
                    i, paths[i], *size, a->data_sizes[i]);
      errno = EINVAL;
      return -1;
    }
    *size = a->data_sizes[i];
  }
  if (m->min_io > v->min_block)
    v->min_block = m->min_io;
  if (m->physical_block > v->preferred_block)
    v->preferred_block = m->physical_block;
  return 0;
}

/* The layout over the members (sizes[i]: member i's data).  Mid-reshape
 * the volume is the old layout, over the members that have a size in it
 * (reshape.h); the job takes the new one.
 */
static int
init_layout (struct volume *v, const char *const *paths,
             const struct volume_options *o, uint64_t *sizes)
{
  const struct assembly *a = o->assembly;
  unsigned bad = 0, nr = v->nr_members;
  enum layout_error lerr;

  if (a && a->reshape.active) {
    nr = 0;
    for (unsigned i = 0; i < v->nr_members; ++i)
      if (a->reshape.old_sizes[i]) {
        v->map[nr] = i;
        sizes[nr++] = a->reshape.old_sizes[i];
      }
  }
  lerr = layout_init_as (&v->layout, a ? a->layout : LAYOUT_MD_ALT,
                         a ? a->size_rule : LAYOUT_SIZE_MD, o->chunk, nr,
                         sizes, &bad);
  if (lerr == LAYOUT_ERR_MEMBER_TOO_SMALL) {
    stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                  "one chunk (chunk=%" PRIu64 ")",
                  v->map[bad], paths[v->map[bad]], sizes[bad], o->chunk);
    errno = EINVAL;
    return -1;
  }
  if (lerr != LAYOUT_OK) {
    stripe_error ("%s", layout_strerror (lerr));
    errno = EINVAL;
    return -1;
  }
  /* NBD sizes and offsets are signed 64-bit in nbdkit and most clients. */
  if (v->layout.size > INT64_MAX) {
    stripe_error ("the members add up to %" PRIu64 " bytes: a volume can "
                  "be at most %" PRId64 " bytes (2^63 - 1, NBD's limit)",
                  v->layout.size, INT64_MAX);
    errno = EFBIG;
    return -1;
  }
  return 0;
}

/* What each member must hold: its data offset and its data in the
 * layout, and mid-reshape in the new one too.
 */
static int
set_needs (struct volume *v, const char *const *paths,
           const struct assembly *a, const uint64_t *sizes)
{
  for (unsigned j = 0; j < v->layout.nr_members; ++j) {
    struct member *m = &v->members[v->map[j]];
    m->need = m->data_offset + v->layout.member_size[j];
    if ((a == NULL || a->data_sizes[j] == 0)
        && v->layout.member_size[j] != sizes[j])
      stripe_debug ("member %u (%s): last %" PRIu64 " bytes unused "
                    "(not a whole chunk)",
                    j, paths[j], sizes[j] - v->layout.member_size[j]);
  }
  if (a && a->reshape.active)
    for (unsigned i = 0; i < v->nr_members; ++i) {
      struct member *m = &v->members[i];
      uint64_t n = a->reshape.new_sizes[i];
      if (m->data_offset + n > m->need)
        m->need = m->data_offset + n;
      if (m->size < m->need) {
        stripe_error ("member %u (%s): size %" PRIu64 " bytes, the reshape "
                      "under way needs %" PRIu64,
                      i, paths[i], m->size, m->need);
        errno = EINVAL;
        return -1;
      }
    }
  return 0;
}

/* The allocation map: the union of every member's copy (header.h), or
 * of those that can be read when the volume is served degraded.  It
 * must cover the volume (a grow is refused past it).
 */
static int
load_map (struct volume *v, const struct assembly *a)
{
  struct alloc *m = malloc (sizeof *m);
  uint8_t *copy = NULL;
  uint64_t size = v->layout.size;
  char why[256];

  if (m == NULL
      || alloc_init (m, a->map_shift, a->map_offset, a->map_bytes) == -1) {
    stripe_error ("allocation map: %m");
    free (m);
    return -1;
  }
  m->uring = v->uring;
  v->alloc = m; /* volume_close frees it from now on */
  copy = malloc (a->map_bytes);
  if (copy == NULL) {
    stripe_error ("allocation map: %m");
    return -1;
  }
  if (a->reshape.active) {
    uint64_t n = 0;
    for (unsigned i = 0; i < v->nr_members; ++i)
      n += a->reshape.new_sizes[i];
    if (n > size)
      size = n;
  }
  if (((size - 1) >> m->shift) >= m->nr_regions) {
    stripe_error ("the allocation map (%" PRIu64 " regions of %" PRIu64
                  " bytes) does not cover the volume (%" PRIu64 " bytes)",
                  m->nr_regions, UINT64_C (1) << m->shift, size);
    free (copy);
    errno = EINVAL;
    return -1;
  }
  alloc_load_begin (m);
  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *d = &v->members[i];
    ssize_t n;

    if (v->missing >> i & 1)
      continue;
    n = member_pread (d, copy, a->map_bytes, a->map_offset, false, why,
                      sizeof why);
    if (n != (ssize_t) a->map_bytes) {
      stripe_error ("member %u (%s): reading the allocation map (%" PRIu64
                    " bytes at %" PRIu64 "): %s",
                    i, d->path, a->map_bytes, a->map_offset,
                    n == -1 ? why : "short read");
      free (copy);
      errno = EIO;
      return -1;
    }
    alloc_merge (m, copy);
  }
  alloc_loaded (m);
  free (copy);
  stripe_debug ("allocation map: regions of %" PRIu64 " bytes, %" PRIu64
                " of %" PRIu64 " bytes in use",
                UINT64_C (1) << m->shift, alloc_used_bytes (m, size), size);
  return 0;
}

int
volume_adopt_map (struct volume *v)
{
  const struct meta_ops *ops = v->meta.ops;
  uint64_t largest = 0, off, bytes, size = v->layout.size;
  uint64_t skip = v->missing | atomic_load (&v->removed)
                  | health_failed_mask (v->health);
  struct alloc *m;
  uint8_t *ones;
  unsigned shift;
  char why[256];

  if (v->alloc != NULL || v->readonly || ops->map_room == NULL
      || meta_reshape_recorded (&v->meta) || skip != 0)
    return 0;
  for (unsigned j = 0; j < v->layout.nr_members; ++j)
    if (v->layout.member_size[j] > largest)
      largest = v->layout.member_size[j];
  if (!ops->map_room (&v->meta, size, largest * LAYOUT_MAX_MEMBERS, &shift,
                      &off, &bytes))
    return 0;
  m = malloc (sizeof *m);
  ones = malloc (bytes);
  if (m == NULL || ones == NULL || alloc_init (m, shift, off, bytes) == -1) {
    free (m);
    free (ones);
    return -1;
  }
  m->uring = v->uring;
  /* Every region in use (nothing is known), on every member, synced,
   * before a record says there is a map.
   */
  memset (ones, 0xff, bytes);
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (member_pwrite (&v->members[i], ones, bytes, off, why, sizeof why)
          == -1
        || member_sync (&v->members[i], why, sizeof why) == -1) {
      stripe_error ("member %u (%s): writing the allocation map: %s; the "
                    "volume goes on without one",
                    i, v->members[i].path, why);
      alloc_free (m);
      free (m);
      free (ones);
      return -1;
    }
  free (ones);
  ops->set_map (&v->meta, shift, off, bytes);
  v->alloc = m;
  stripe_info ("volume '%s': an allocation map now (regions of %" PRIu64
               " bytes), every region in use until a trim frees it",
               v->meta.name, UINT64_C (1) << shift);
  return 0;
}

int
volume_open (struct volume *v, unsigned nr_members, const char *const *paths,
             const struct volume_options *o)
{
  const struct assembly *a = o->assembly;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  const struct member_open_params p = {
    .readonly = o->readonly,
    .direct = o->cache == CACHE_DIRECT,
    .raw = o->raw,
    .connections = o->connections,
    .timeout = o->timeout,
  };
  uint64_t scratch, slen;

  if (init_state (v, o) == -1)
    goto err;
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
  if (o->chunk == 0 || o->chunk % LAYOUT_CHUNK_ALIGN != 0) {
    stripe_error ("chunk=%" PRIu64 ": %s", o->chunk,
                  layout_strerror (LAYOUT_ERR_CHUNK));
    errno = EINVAL;
    goto err;
  }
  for (unsigned i = 0; i < nr_members; ++i)
    if (open_member (v, i, paths, &p, o, &sizes[i]) == -1)
      goto err;
  if (v->preferred_block < 4096)
    v->preferred_block = 4096;
  if (init_layout (v, paths, o, sizes) == -1
      || set_needs (v, paths, a, sizes) == -1)
    goto err;
  meta_free (&v->meta);
  if (meta_init (&v->meta, a, nr_members, !o->readonly) == -1) {
    stripe_error ("malloc: %m");
    goto err;
  }
  volume_lost_init (v);
  if (a != NULL && a->map_shift != 0 && load_map (v, a) == -1)
    goto err;
  /* What zeroing methods work, learnt where nothing lives (the gap
   * between a header and the data), so that a fast zero (known to work,
   * or refused) works from the first request.
   */
  if (o->claim && !o->readonly && meta_scratch (&v->meta, &scratch, &slen))
    for (unsigned i = 0; i < nr_members; ++i)
      if (v->members[i].ops->learn_zero)
        v->members[i].ops->learn_zero (&v->members[i], scratch, slen);
  stripe_debug ("volume: %u member%s, chunk %" PRIu64 ", %u zone(s), "
                "md layout %s, %" PRIu64 " bytes, cache=%s",
                nr_members, nr_members == 1 ? "" : "s", o->chunk,
                v->layout.nr_zones, layout_name (v->layout.id), v->layout.size,
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
  if (v->alloc) {
    alloc_free (v->alloc);
    free (v->alloc);
    v->alloc = NULL;
  }
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
  uint64_t size = v->layout.size;

  pthread_mutex_unlock (&v->swap_lock);
  /* Not under swap_lock: health's prober takes it under its own lock. */
  health_volume_resized (v->health, size);
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
  /* Its zeroing methods learnt as the others' were at open: a grow's
   * zero of the new room then goes to it at once with the others'.
   */
  {
    uint64_t scratch, slen;
    if (meta_scratch (&v->meta, &scratch, &slen)
        && v->members[i].ops->learn_zero)
      v->members[i].ops->learn_zero (&v->members[i], scratch, slen);
  }
  v->nr_members = i + 1;
  return 0;
}

void
volume_remove_member (struct volume *v, unsigned i)
{
  struct member *m = &v->members[i];
  char why[256];

  if (member_sync (m, why, sizeof why) == -1)
    /* What it holds is no longer the volume's: only its removed mark is
     * worth keeping, and a header that missed it reads as removed
     * anyway (the end of the shrink is recorded on the others).
     */
    stripe_error ("member %u (%s): syncing it as it is removed: %s", i,
                  m->path, why);
  dirty_forget (&v->dirty[i]);
  v->removed |= UINT64_C (1) << i;
}

void
volume_release_member (struct volume *v, unsigned i)
{
  pthread_mutex_lock (&v->swap_lock);
  member_release (&v->members[i]);
  pthread_mutex_unlock (&v->swap_lock);
  /* Not under swap_lock: health's prober takes it under its own lock. */
  health_member_removed (v->health, i,
                         "removed by a shrink: no longer a member; its "
                         "claim released");
  stripe_notice ("member %u (%s): removed, closed and released (no longer "
                 "claimed by this server)",
                 i, v->members[i].path);
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
volume_renumbered (struct volume *v)
{
  bool renumbered = false;

  pthread_mutex_lock (&v->swap_lock);
  for (unsigned j = 0; j < v->layout.nr_members; ++j)
    if (v->map[j] != j)
      renumbered = true;
  pthread_mutex_unlock (&v->swap_lock);
  return renumbered;
}

bool
volume_alias_of (struct volume *v, const struct member *m, unsigned *j,
                 char *how, size_t len)
{
  bool alias = false;

  pthread_mutex_lock (&v->swap_lock);
  for (unsigned k = 0; k < v->nr_members && !alias; ++k)
    if (!(v->removed >> k & 1)
        && identity_alias (&v->members[k].id, &m->id, how, len)) {
      *j = k;
      alias = true;
    }
  pthread_mutex_unlock (&v->swap_lock);
  return alias;
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
    if (!(v->removed >> i & 1)
        && !v->members[i].ops->can_fast_zero (&v->members[i]))
      return false;
  return true;
}

