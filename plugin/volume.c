/* nbdstripe: a volume, members + layout.  See include/volume.h. */

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "ioexec.h"
#include "log.h"
#include "plan.h"
#include "volume.h"

/* Stop an extents walk after this many runs: the client asks again for
 * the rest, and one request must not do unbounded work.
 */
#define EXTENTS_MAX_RUNS 65536

int
volume_open (struct volume *v, unsigned nr_members, const char *const *paths,
             uint64_t chunk, enum cache_mode cache, bool readonly,
             uint64_t data_offset, const uint64_t *data_sizes)
{
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  enum layout_error lerr;
  unsigned bad = 0;

  memset (v, 0, sizeof *v);
  v->readonly = readonly;
  v->cache = cache;
  v->data_offset = data_offset;
  if (nr_members == 0) {
    stripe_error ("no members: give at least one file=PATH");
    errno = EINVAL;
    return -1;
  }
  if (nr_members > LAYOUT_MAX_MEMBERS) {
    stripe_error ("%u members given: at most %d are supported", nr_members,
                  LAYOUT_MAX_MEMBERS);
    errno = EINVAL;
    return -1;
  }
  if (chunk == 0 || chunk % LAYOUT_CHUNK_ALIGN != 0) {
    stripe_error ("chunk=%" PRIu64 ": %s", chunk,
                  layout_strerror (LAYOUT_ERR_CHUNK));
    errno = EINVAL;
    return -1;
  }

  for (unsigned i = 0; i < nr_members; ++i) {
    if (member_open (&v->members[i], i, paths[i], readonly,
                     cache == CACHE_DIRECT)
        == -1) {
      v->nr_members = i + 1; /* member_open leaves it closable */
      goto err;
    }
    v->nr_members = i + 1;
    for (unsigned j = 0; j < i; ++j)
      if (member_same (&v->members[j], &v->members[i])) {
        stripe_error ("member %u (%s) and member %u (%s) are the same %s: "
                      "a member may be given only once",
                      j, paths[j], i, paths[i],
                      v->members[i].is_block ? "block device" : "file");
        errno = EINVAL;
        goto err;
      }
    if (v->members[i].size < data_offset) {
      stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                    "the data offset (%" PRIu64 ")",
                    i, paths[i], v->members[i].size, data_offset);
      errno = EINVAL;
      goto err;
    }
    sizes[i] = v->members[i].size - data_offset;
    if (data_sizes) {
      /* The header says how much data the member holds: a member that
       * shrank (or was replaced by a smaller one) would lose data.
       */
      if (data_sizes[i] > sizes[i]) {
        stripe_error ("member %u (%s): holds %" PRIu64 " bytes of data "
                      "but the volume expects %" PRIu64 ": truncated or "
                      "replaced by a smaller member?",
                      i, paths[i], sizes[i], data_sizes[i]);
        errno = EINVAL;
        goto err;
      }
      sizes[i] = data_sizes[i];
    }
    if (v->members[i].logical_block > v->min_block)
      v->min_block = v->members[i].logical_block;
    if (v->members[i].physical_block > v->preferred_block)
      v->preferred_block = v->members[i].physical_block;
  }
  if (v->preferred_block < 4096)
    v->preferred_block = 4096;

  lerr = layout_init (&v->layout, chunk, nr_members, sizes, &bad);
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
  for (unsigned i = 0; i < nr_members; ++i)
    if (data_sizes == NULL && v->layout.member_size[i] != sizes[i])
      stripe_debug ("member %u (%s): last %" PRIu64 " bytes unused "
                    "(not a whole chunk)",
                    i, paths[i], sizes[i] - v->layout.member_size[i]);
  stripe_debug ("volume: %u members, chunk %" PRIu64 ", %u zone(s), "
                "%" PRIu64 " bytes, cache=%s",
                nr_members, chunk, v->layout.nr_zones, v->layout.size,
                cache_mode_name (cache));
  return 0;

err:
  volume_close (v);
  return -1;
}

void
volume_close (struct volume *v)
{
  for (unsigned i = v->nr_members; i-- > 0;)
    member_close (&v->members[i]);
  v->nr_members = 0;
}

static int
rw (struct volume *v, enum op_kind kind, void *buf, uint64_t count,
    uint64_t offset, bool fua)
{
  struct io_plan plan;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  int r = -1;

  if (plan_rw (&plan, &v->layout, buf, count, offset) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i) {
    const struct member_io *io = &plan.ios[i];
    ops[i] = (struct member_op){
      .m = &v->members[io->member],
      .kind = kind,
      .offset = v->data_offset + io->member_offset,
      .length = io->length,
      .iov = io->iov,
      .nr_iov = io->nr_iov,
      .fua = fua,
    };
  }
  r = ioexec_run (ops, plan.nr_ios);
out:
  plan_free (&plan);
  return r;
}

int
volume_pread (struct volume *v, void *buf, uint64_t count, uint64_t offset)
{
  return rw (v, OP_READ, buf, count, offset, false);
}

int
volume_pwrite (struct volume *v, const void *buf, uint64_t count,
               uint64_t offset, bool fua)
{
  /* The iovec is not const, but writes only read from it. */
  return rw (v, OP_WRITE, (void *) buf, count, offset,
             fua || v->cache == CACHE_WRITETHROUGH);
}

/* fdatasync the members marked in spans (all of them if spans is NULL),
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
  return ioexec_run (ops, nr);
}

int
volume_flush (struct volume *v)
{
  return flush_members (v, NULL);
}

/* Each touched member gets ONE contiguous range for the whole request, as
 * Linux md raid0 does since 4.12, never one discard per chunk.
 */
int
volume_trim (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  int r = 0, err = 0;

  layout_spans (&v->layout, offset, count, spans);
  for (unsigned i = 0; i < v->nr_members; ++i) {
    if (!spans[i].touched)
      continue;
    if (member_discard (&v->members[i],
                        v->data_offset + spans[i].member_offset,
                        spans[i].length)
          == -1
        && err == 0)
      err = errno;
  }
  if ((fua || v->cache == CACHE_WRITETHROUGH) && flush_members (v, spans) == -1
      && err == 0)
    err = errno;
  if (err) {
    errno = err;
    r = -1;
  }
  return r;
}

int
volume_zero (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
             bool fast, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];

  layout_spans (&v->layout, offset, count, spans);

  /* Refuse up front what some member is known not to do, so that a fast
   * zero that cannot be fast changes nothing, and a slow one goes straight
   * to nbdkit writing zeroes.
   */
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans[i].touched
        && member_zero_known_unsupported (
          &v->members[i], v->data_offset + spans[i].member_offset,
          spans[i].length, may_trim, fast)) {
      errno = EOPNOTSUPP;
      return -1;
    }

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans[i].touched
        && member_zero (&v->members[i],
                        v->data_offset + spans[i].member_offset,
                        spans[i].length, may_trim, fast)
             == -1)
      return -1;

  if (fua || v->cache == CACHE_WRITETHROUGH)
    return flush_members (v, spans);
  return 0;
}

struct run_cache {
  bool valid;
  bool is_data;
  uint64_t start, end; /* member offsets */
};

int
volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                bool req_one, volume_extent_fn add, void *opaque)
{
  struct run_cache cache[LAYOUT_MAX_MEMBERS] = { 0 };
  struct layout_iter it;
  struct layout_piece p;
  unsigned runs = 0;
  bool first_is_data = false;

  layout_iter_init (&it, &v->layout, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct run_cache *c = &cache[p.member];
    /* Runs are cached in raw member offsets (data_offset included). */
    uint64_t base = v->data_offset + p.member_offset;
    uint64_t pos = base, end = base + p.length;

    while (pos < end) {
      if (!c->valid || pos < c->start || pos >= c->end) {
        uint64_t run_end;
        if (member_extent (&v->members[p.member], pos,
                           v->data_offset + v->layout.member_size[p.member],
                           &c->is_data, &run_end)
            == -1)
          return -1;
        c->valid = true;
        c->start = pos;
        c->end = run_end;
      }
      uint64_t len = (c->end < end ? c->end : end) - pos;

      if (runs == 0)
        first_is_data = c->is_data;
      else if (req_one && c->is_data != first_is_data)
        return 0;
      if (add (opaque, p.offset + (pos - base), len, !c->is_data) == -1)
        return -1;
      if (++runs >= EXTENTS_MAX_RUNS)
        return 0;
      pos += len;
    }
  }
  return 0;
}
