/* nbdstripe: request planning.  See include/plan.h. */

#include <errno.h>
#include <stdlib.h>

#include "plan.h"

int
plan_rw (struct io_plan *plan, const struct layout *l, void *buf,
         uint64_t count, uint64_t offset)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct member_io *by_member[LAYOUT_MAX_MEMBERS] = { 0 };
  size_t total = 0;
  struct layout_iter it;
  struct layout_piece p;

  plan->nr_ios = 0;
  plan->iov = plan->inline_iov;

  /* Most requests lie inside one chunk: one member, one piece. */
  layout_map (l, offset, count, &p);
  if (p.length == count) {
    struct member_io *io = &plan->ios[plan->nr_ios++];
    io->member = p.member;
    io->member_offset = p.member_offset;
    io->length = count;
    io->nr_iov = 1;
    io->iov = plan->iov;
    plan->iov[0] = (struct iovec){ buf, count };
    return 0;
  }

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

  layout_iter_init (&it, l, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct member_io *io = by_member[p.member];
    char *base = (char *) buf + (p.offset - offset);
    struct iovec *last = io->nr_iov ? &io->iov[io->nr_iov - 1] : NULL;

    if (last && (char *) last->iov_base + last->iov_len == base)
      last->iov_len += p.length;
    else
      io->iov[io->nr_iov++] = (struct iovec){ base, p.length };
    io->length += p.length;
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
