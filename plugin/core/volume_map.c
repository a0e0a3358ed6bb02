/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume's requests where its allocation map (alloc.h)
 * changes what they do: reads of free regions, trims and zeros of whole
 * regions, block status, and what the jobs ask of it.  The rest of the
 * requests are volume_io.c's.
 */

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "health_record.h"
#include "ioexec.h"
#include "member.h"
#include "volume.h"
#include "volume_impl.h"
#include "volume_lost.h"

/* Writes out the allocation map's changes to every member that can
 * take them (alloc.h).
 */
int
volume_alloc_sync (struct volume *v)
{
  uint64_t skip = health_failed_mask (v->health) | v->missing
                  | atomic_load (&v->removed);

  return alloc_sync (v->alloc, v->members, v->nr_members, skip);
}

/* A read that reaches a free region: zeros there, without asking a
 * member where every region is free; else read, and the free regions'
 * bytes zeroed (a member's bytes there are zeros too, by the map's
 * invariant, unless a write racing a trim left some).
 */
int
volume_read_free (struct volume *v, void *buf, uint64_t count,
                  uint64_t offset)
{
  const struct volume_request rq = { .kind = OP_READ, .buf = buf,
                                     .count = count, .offset = offset };
  bool all;
  int r;

  if (!alloc_any (v->alloc, offset, count, &all)) {
    memset (buf, 0, count);
    /* A lost range stays lost, free or not. */
    if (atomic_load (&v->lost_nr) && volume_lost_touches (v, offset, count)) {
      errno = EIO;
      return -1;
    }
    return 0;
  }
  r = volume_request_rq (v, &rq);
  if (r == 0)
    for (uint64_t at = offset, end = offset + count; at < end;) {
      bool used;
      uint64_t next = alloc_run (v->alloc, at, end, &used);
      if (!used)
        memset ((uint8_t *) buf + (at - offset), 0, next - at);
      at = next;
    }
  return r;
}

/* After a plain trim of [offset, offset + count): whether the members
 * say the range now reads as zeros (an NBD server that punched a hole
 * without offering a fast zero, nbdkit's file plugin among them).  A
 * member that cannot tell says "data": no.
 */
struct zero_walk {
  uint64_t end; /* of the runs seen so far */
  bool zero;
};

static int
zero_add (void *opaque, uint64_t offset, uint64_t length, uint32_t flags)
{
  struct zero_walk *z = opaque;

  if (!(flags & MEMBER_EXTENT_ZERO))
    z->zero = false;
  z->end = offset + length;
  return 0;
}

static bool
trimmed_to_zeros (struct volume *v, uint64_t offset, uint64_t count)
{
  const uint64_t end = offset + count;
  struct zero_walk z = { offset, true };

  while (z.zero && z.end < end) {
    const uint64_t from = z.end;
    const struct volume_request rq = { .kind = OP_EXTENTS, .offset = from,
                                       .count = end - from, .add = zero_add,
                                       .opaque = &z };

    if (volume_request_rq (v, &rq) == -1 || z.end <= from)
      return false;
  }
  return z.zero;
}

/* A trim or a zero on a volume with an allocation map, that covers
 * whole regions.  A zero frees them once it has completed (the members
 * read zeros there).  A trim asks the members for a zero that may trim
 * and must not write (fast) over them: a file punches a hole, a block
 * device gets a write-zeroes that unmaps (a loop device over a file a
 * discard, member_local.c says when), an NBD export a fast
 * WRITE_ZEROES -- a discard that is bound to read back as zeros, which
 * a plain discard is not (a drive's zeroing after discard is its own
 * business) -- and frees them when it has; where a member cannot, the
 * trim goes down as a trim, and the regions are freed only if every
 * member then says they read as zeros (block status).  The parts of
 * regions at either end are trimmed as usual.
 */
int
volume_map_trim_zero (struct volume *v, const struct volume_request *rq)
{
  const uint64_t region = UINT64_C (1) << v->alloc->shift;
  const uint64_t end = rq->offset + rq->count;
  const uint64_t a = (rq->offset + region - 1) / region * region;
  const uint64_t b = end / region * region;
  struct volume_request part = *rq;
  int r;

  if (rq->kind == OP_ZERO) {
    r = volume_request_rq (v, rq);
    if (r == 0)
      alloc_clear (v->alloc, rq->offset, rq->count);
    return r;
  }
  if (a > rq->offset) {
    part.count = a - rq->offset;
    if (volume_request_rq (v, &part) == -1)
      return -1;
  }
  part = (struct volume_request){ .kind = OP_ZERO, .offset = a,
                                  .count = b - a, .may_trim = true,
                                  .fast = true, .fua = rq->fua };
  r = volume_request_rq (v, &part);
  if (r == 0)
    alloc_clear (v->alloc, a, b - a);
  else if (errno == EOPNOTSUPP) {
    part = *rq;
    part.offset = a;
    part.count = b - a;
    r = volume_request_rq (v, &part);
    /* Not while a job moves data: its windows are not this trim's, and
     * the members' block status is then no proof (regions stay in use,
     * which is allowed).
     */
    if (r == 0 && atomic_load (&v->mover) == NULL
        && trimmed_to_zeros (v, a, b - a))
      alloc_clear (v->alloc, a, b - a);
  }
  if (r == 0 && end > b) {
    part = *rq;
    part.offset = b;
    part.count = end - b;
    r = volume_request_rq (v, &part);
  }
  return r;
}

/* Block status on a volume with an allocation map: free regions are
 * holes that read as zeros (whatever the members say, and whatever they
 * are: a block device tells nothing), the rest as the members say.
 */
struct map_runs {
  const struct volume_request *rq;
  uint64_t end; /* of the runs added so far */
};

static int
map_add (void *opaque, uint64_t offset, uint64_t length, uint32_t flags)
{
  struct map_runs *m = opaque;

  m->end = offset + length;
  return m->rq->add (m->rq->opaque, offset, length, flags);
}

int
volume_map_extents (struct volume *v, const struct volume_request *rq)
{
  const uint64_t end = rq->offset + rq->count;
  struct map_runs m = { rq, rq->offset };

  while (m.end < end) {
    bool used;
    uint64_t next = alloc_run (v->alloc, m.end, end, &used);

    if (used) {
      struct volume_request part = *rq;
      part.offset = m.end;
      part.count = next - m.end;
      part.add = map_add;
      part.opaque = &m;
      if (volume_request_rq (v, &part) == -1)
        return -1;
      /* The walk stopped short (a bound): the client asks again. */
      if (m.end < next)
        break;
    }
    else if (map_add (&m, m.end, next - m.end,
                      MEMBER_EXTENT_HOLE | MEMBER_EXTENT_ZERO) == -1)
      return -1;
    if (rq->req_one)
      break;
  }
  return 0;
}

uint64_t
volume_member_holes (struct volume *v, unsigned i, uint64_t off, uint64_t len,
                     bool *used)
{
  struct extent_list l = { 0 };
  struct member_op op = { .m = &v->members[i], .kind = OP_EXTENTS,
                          .offset = off, .length = len, .max_runs = 1,
                          .extents = &l, .shadow = true };
  uint64_t n = len;

  *used = true;
  if (ioexec_run (&op, 1, v->uring) == 0 && l.nr > 0) {
    *used = !(l.runs[0].flags & MEMBER_EXTENT_ZERO);
    if (l.runs[0].length < len)
      n = l.runs[0].length;
  }
  free (l.runs);
  return n;
}

/* Where member i's byte rel lies in the volume's logical bytes. */
typedef bool (*member_locate_fn) (struct volume *v, unsigned i, uint64_t rel,
                                  uint64_t *logical);

static bool
view_locate (struct volume *v, unsigned i, uint64_t rel, uint64_t *logical)
{
  return volume_view_unmap (&v->view, i, rel, logical);
}

/* volume_member_run's walk, chunk by chunk through locate. */
static uint64_t
member_run (struct volume *v, unsigned i, uint64_t rel, uint64_t len,
            bool *used, member_locate_fn locate)
{
  const uint64_t chunk = v->layout.chunk;

  *used = true;
  if (v->alloc == NULL)
    return volume_member_holes (v, i, v->members[i].data_offset + rel, len,
                                used);
  for (uint64_t at = 0; at < len;) {
    uint64_t logical, run;
    bool u;

    if (!locate (v, i, rel + at, &logical))
      u = true, run = len - at;
    else {
      uint64_t lim = chunk - (rel + at) % chunk;
      if (lim > len - at)
        lim = len - at;
      run = alloc_run (v->alloc, logical, logical + lim, &u) - logical;
    }
    if (at == 0)
      *used = u;
    else if (u != *used)
      return at;
    at += run;
  }
  return len;
}

uint64_t
volume_member_run (struct volume *v, unsigned i, uint64_t rel, uint64_t len,
                   bool *used)
{
  return member_run (v, i, rel, len, used, volume_member_logical);
}

uint64_t
volume_member_run_view (struct volume *v, unsigned i, uint64_t rel,
                        uint64_t len, bool *used)
{
  return member_run (v, i, rel, len, used, view_locate);
}

uint64_t
volume_member_used_bytes (struct volume *v, unsigned i)
{
  const struct member *m = &v->members[i];
  uint64_t len = m->need > m->data_offset ? m->need - m->data_offset : 0;
  uint64_t used_bytes = 0;

  for (uint64_t at = 0; at < len;) {
    bool used;
    uint64_t n = volume_member_run (v, i, at, len - at, &used);
    if (used)
      used_bytes += n;
    at += n;
  }
  return used_bytes;
}
