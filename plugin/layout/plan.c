/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: request planning.  See include/plan.h. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* The part of [offset, end) in zone z, zone-relative [*a, *b), and its
 * chunks; false when it has none.
 */
static inline bool
zone_part (const struct layout *l, const struct layout_zone *z,
           uint64_t offset, uint64_t end, uint64_t *a, uint64_t *b,
           struct layout_cut *cut)
{
  if (end <= z->start || offset >= z->end)
    return false;
  *a = (offset > z->start ? offset : z->start) - z->start;
  *b = (end < z->end ? end : z->end) - z->start;
  layout_cut_init (cut, z->nr_devs, *a / l->chunk, (*b - 1) / l->chunk);
  return true;
}

int
plan_rw (struct io_plan *plan, const struct layout *l, void *buf,
         uint64_t count, uint64_t offset)
{
  /* Per member: where its range starts and how many pieces it has, found
   * in a first pass over the zones; the second fills in the iovecs.
   */
  struct {
    uint64_t first;
    unsigned nr; /* 0: untouched */
    struct member_io *io;
  } mem[LAYOUT_MAX_MEMBERS];
  const uint64_t chunk = l->chunk, end = offset + count;
  size_t total = 0;
  uint64_t a, b, k1, k2, row1, row2;
  struct layout_cut cut;

  plan->nr_ios = 0;
  plan->iov = plan->inline_iov;
  memset (mem, 0, l->nr_members * sizeof mem[0]);

  for (unsigned zi = 0; zi < l->nr_zones; ++zi) {
    const struct layout_zone *z = &l->zones[zi];
    if (!zone_part (l, z, offset, end, &a, &b, &cut))
      continue;
    for (unsigned d = 0; d < z->nr_devs; ++d) {
      if (!layout_member_chunks (&cut, d, &k1, &k2, &row1, &row2))
        continue;
      unsigned m = z->devs[d];
      if (mem[m].nr == 0)
        mem[m].first = z->dev_start + row1 * chunk
                       + (k1 == cut.c0 ? a - cut.c0 * chunk : 0);
      mem[m].nr += row2 - row1 + 1;
      total += row2 - row1 + 1;
    }
  }
  if (total > PLAN_INLINE_IOV) {
    plan->iov = malloc (total * sizeof *plan->iov);
    if (plan->iov == NULL) {
      errno = ENOMEM;
      return -1;
    }
  }

  total = 0;
  for (unsigned m = 0; m < l->nr_members; ++m) {
    if (mem[m].nr == 0)
      continue;
    struct member_io *io = &plan->ios[plan->nr_ios++];
    io->member = m;
    io->member_offset = mem[m].first;
    io->length = 0;
    io->nr_iov = 0;
    io->iov = &plan->iov[total];
    total += mem[m].nr;
    mem[m].io = io;
  }

  /* Each member's pieces, in member order: zone by zone, and in a zone
   * every nd-th chunk.
   */
  for (unsigned zi = 0; zi < l->nr_zones; ++zi) {
    const struct layout_zone *z = &l->zones[zi];
    if (!zone_part (l, z, offset, end, &a, &b, &cut))
      continue;
    /* Zone-relative offsets to the buffer's (unsigned wrap-around
     * cancels: z->start + lo >= offset).
     */
    uint64_t to_buf = z->start - offset;
    uint64_t nd = z->nr_devs;

    for (unsigned d = 0; d < nd; ++d) {
      if (!layout_member_chunks (&cut, d, &k1, &k2, &row1, &row2))
        continue;

      /* In locals: the compiler cannot keep io's fields in registers
       * across the stores into iov.
       */
      struct member_io *io = mem[z->devs[d]].io;
      struct iovec *iov = io->iov;
      unsigned n = io->nr_iov;
      /* The first piece (with one member: the zone's part of the request,
       * all of it) may follow on from the member's last one, in the zone
       * before: then they merge.
       */
      uint64_t lo = k1 == cut.c0 ? a : k1 * chunk;
      uint64_t hi = nd == 1 || k1 == cut.cl ? b : (k1 + 1) * chunk;
      char *base = (char *) buf + (to_buf + lo);
      uint64_t bytes = hi - lo;

      if (n > 0 && (char *) iov[n - 1].iov_base + iov[n - 1].iov_len == base)
        iov[n - 1].iov_len += hi - lo;
      else
        iov[n++] = (struct iovec){ base, hi - lo };
      /* The others: whole chunks nd apart, the last perhaps cut short. */
      if (nd > 1)
        for (uint64_t k = k1 + nd; k <= k2; k += nd) {
          uint64_t len = k == cut.cl ? b - k * chunk : chunk;
          iov[n++] = (struct iovec){ (char *) buf + (to_buf + k * chunk), len };
          bytes += len;
        }
      io->nr_iov = n;
      io->length += bytes;
    }
  }
  return 0;
}

void
plan_free (struct io_plan *plan)
{
  if (plan->iov != plan->inline_iov)
    free (plan->iov);
  plan->iov = plan->inline_iov;
}
