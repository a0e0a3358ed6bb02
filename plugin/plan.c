/* nbdstripe: request planning.  See include/plan.h. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int
plan_rw (struct io_plan *plan, const struct layout *l, void *buf,
         uint64_t count, uint64_t offset)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_io *by_member[LAYOUT_MAX_MEMBERS];
  size_t total = 0;
  const uint64_t chunk = l->chunk, end = offset + count;

  plan->nr_ios = 0;
  plan->iov = plan->inline_iov;

  memset (by_member, 0, l->nr_members * sizeof *by_member);
  layout_spans (l, offset, count, spans);
  for (unsigned m = 0; m < l->nr_members; ++m)
    if (spans[m].touched)
      total += spans[m].nr_pieces;
  if (total > PLAN_INLINE_IOV) {
    plan->iov = malloc (total * sizeof *plan->iov);
    if (plan->iov == NULL) {
      errno = ENOMEM;
      return -1;
    }
  }

  total = 0;
  for (unsigned m = 0; m < l->nr_members; ++m) {
    if (!spans[m].touched)
      continue;
    struct member_io *io = &plan->ios[plan->nr_ios++];
    io->member = m;
    io->member_offset = spans[m].member_offset;
    io->length = 0;
    io->nr_iov = 0;
    io->iov = &plan->iov[total];
    total += spans[m].nr_pieces;
    by_member[m] = io;
  }

  /* Each member's pieces, in member order: zone by zone, and in a zone
   * every nd-th chunk (the arithmetic of layout_spans, one addition per
   * piece).
   */
  for (unsigned zi = 0; zi < l->nr_zones; ++zi) {
    const struct layout_zone *z = &l->zones[zi];
    if (end <= z->start || offset >= z->end)
      continue;
    uint64_t a = (offset > z->start ? offset : z->start) - z->start;
    uint64_t b = (end < z->end ? end : z->end) - z->start;
    uint64_t nd = z->nr_devs;
    uint64_t c0 = a / chunk, cl = (b - 1) / chunk;
    struct layout_cut cut;

    layout_cut_init (&cut, nd, c0, cl);

    for (unsigned d = 0; d < nd; ++d) {
      struct member_io *io = by_member[z->devs[d]];
      uint64_t k1, k2, row1, row2;

      if (!layout_member_chunks (&cut, d, &k1, &k2, &row1, &row2))
        continue;

      /* In locals: the compiler cannot keep io's fields in registers
       * across the stores into iov.
       */
      struct iovec *iov = io->iov;
      unsigned n = io->nr_iov;
      /* Zone-relative offsets to the buffer's (unsigned wrap-around
       * cancels: z->start + lo >= offset).
       */
      uint64_t to_buf = z->start - offset;
      /* One member: the zone's part of the request is one piece. */
      uint64_t step = nd == 1 ? k2 - k1 + 1 : nd;
      uint64_t bytes = 0;

      for (uint64_t k = k1; k <= k2; k += step) {
        uint64_t lo = k == c0 ? a : k * chunk;
        uint64_t hi = nd == 1 || k == cl ? b : (k + 1) * chunk;
        char *base = (char *) buf + (to_buf + lo);

        /* Only a member's first piece in a zone can follow on from its
         * last one (in the zone before); this merges them.
         */
        if (n > 0 && (char *) iov[n - 1].iov_base + iov[n - 1].iov_len == base)
          iov[n - 1].iov_len += hi - lo;
        else
          iov[n++] = (struct iovec){ base, hi - lo };
        bytes += hi - lo;
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
