/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume's block status (NBD_CMD_BLOCK_STATUS): each touched
 * member asked for its runs at once, the runs merged in the volume's
 * order through a view, the walk bounded per request.  The request's
 * other kinds are volume_io.c's.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ioexec.h"
#include "layout.h"
#include "member.h"
#include "volume.h"
#include "volume_impl.h"

/* Stop an extents walk after this many runs: the client asks again for
 * the rest, and one request must not do unbounded work.
 */
#define EXTENTS_MAX_RUNS 65536
/* Runs asked of a member at once. */
#define EXTENTS_BATCH 64

/* A member's block status from 'from' on: what was asked so far. */
struct runs {
  struct extent_list l;
  uint64_t from, to; /* member offsets covered by l */
};

/* Ask each member in want[] for the block status of [from[i], end[i]),
 * at most max runs each, all at once.
 */
static int
fetch_runs (struct volume *v, const struct volume_view *vw, struct runs *r,
            const uint64_t *from, const uint64_t *end, const bool *want,
            unsigned max)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;
  int ret;

  for (unsigned i = 0; i < vw->layout->nr_members; ++i) {
    if (!want[i])
      continue;
    r[i].l.nr = 0;
    r[i].from = r[i].to = from[i];
    ops[nr++] = (struct member_op){
      .m = &v->members[vw->map[i]],
      .kind = OP_EXTENTS,
      .offset = from[i],
      .length = end[i] - from[i],
      .max_runs = max,
      .extents = &r[i].l,
    };
  }
  ret = ioexec_run (ops, nr, v->uring);
  for (unsigned i = 0; i < vw->layout->nr_members; ++i)
    if (want[i])
      for (unsigned k = 0; k < r[i].l.nr; ++k)
        r[i].to += r[i].l.runs[k].length;
  return ret;
}

int
volume_view_extents (struct volume *v, const struct volume_view *vw,
                     uint64_t count, uint64_t offset, bool req_one,
                     volume_extent_fn add, void *opaque)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  struct runs r[LAYOUT_MAX_MEMBERS];
  uint64_t from[LAYOUT_MAX_MEMBERS], end[LAYOUT_MAX_MEMBERS];
  bool want[LAYOUT_MAX_MEMBERS];
  struct layout_iter it;
  struct layout_piece p;
  unsigned runs = 0;
  uint32_t first_flags = 0;
  int ret = -1;

  layout_spans (vw->layout, offset, count, spans);
  /* A missing member's chunks are data, not an error: a copy tool reads
   * them and gets EIO, and copies what is around them.
   */
  if (refuse_failed (v, spans_mask (vw, spans) & ~v->missing) == -1)
    return -1;
  memset (r, 0, sizeof r);
  for (unsigned i = 0; i < vw->layout->nr_members; ++i) {
    want[i] = spans[i].touched && !(v->missing >> vw->map[i] & 1);
    from[i] = v->members[vw->map[i]].data_offset + spans[i].member_offset;
    end[i] = from[i] + spans[i].length;
  }
  /* Every touched member at once; a client wanting one run needs only
   * the first of each.
   */
  if (fetch_runs (v, vw, r, from, end, want, req_one ? 1 : EXTENTS_BATCH)
      == -1)
    goto out;

  layout_iter_init (&it, vw->layout, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct runs *c = &r[p.member];
    uint64_t base =
      v->members[vw->map[p.member]].data_offset + p.member_offset;
    uint64_t pos = base, pend = base + p.length;

    while (pos < pend) {
      uint64_t at = c->from;
      unsigned k = 0;

      if (!want[p.member]) {
        /* Missing (served degraded): lost, never a hole reading as
         * zeros.
         */
        if (runs == 0)
          first_flags = 0;
        else if (req_one && first_flags != 0) {
          ret = 0;
          goto out;
        }
        if (add (opaque, p.offset, p.length, 0) == -1)
          goto out;
        if (++runs >= EXTENTS_MAX_RUNS) {
          ret = 0;
          goto out;
        }
        break;
      }
      if (pos >= c->to) {
        /* This member has more runs than it sent: ask again, alone. */
        bool one[LAYOUT_MAX_MEMBERS] = { 0 };
        uint64_t f[LAYOUT_MAX_MEMBERS], e[LAYOUT_MAX_MEMBERS];
        one[p.member] = true;
        f[p.member] = pos;
        e[p.member] = end[p.member];
        if (fetch_runs (v, vw, r, f, e, one, EXTENTS_BATCH) == -1)
          goto out;
        if (c->to <= pos) {
          errno = EIO; /* a member that reports nothing */
          goto out;
        }
        continue;
      }
      while (at + c->l.runs[k].length <= pos)
        at += c->l.runs[k++].length;
      uint64_t run_end = at + c->l.runs[k].length;
      uint64_t len = (run_end < pend ? run_end : pend) - pos;
      uint32_t flags = c->l.runs[k].flags;

      if (runs == 0)
        first_flags = flags;
      else if (req_one && flags != first_flags) {
        ret = 0;
        goto out;
      }
      if (add (opaque, p.offset + (pos - base), len, flags) == -1)
        goto out;
      if (++runs >= EXTENTS_MAX_RUNS) {
        ret = 0;
        goto out;
      }
      pos += len;
    }
  }
  ret = 0;
out:
  for (unsigned i = 0; i < vw->layout->nr_members; ++i)
    free (r[i].l.runs);
  return ret;
}
