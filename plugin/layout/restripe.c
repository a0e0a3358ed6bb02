/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the arithmetic of a restripe.  See include/restripe.h. */

#include <string.h>

#include "layout.h"
#include "restripe.h"

#define STEP 4096u
/* The smallest window tried before a position is given up on. */
#define MIN_WINDOW STEP

void
restripe_init (struct restripe *rs, const struct layout *from,
               const uint8_t *from_map, const struct layout *to,
               const uint8_t *to_map, unsigned nr_union, bool backward)
{
  memset (rs, 0, sizeof *rs);
  rs->from = from;
  rs->to = to;
  rs->nr_union = nr_union;
  rs->backward = backward;
  rs->size = from->size < to->size ? from->size : to->size;
  memset (rs->from_of, RESTRIPE_NONE, sizeof rs->from_of);
  for (unsigned j = 0; j < from->nr_members; ++j) {
    rs->from_map[j] = from_map[j];
    rs->from_of[from_map[j]] = j;
  }
  for (unsigned j = 0; j < to->nr_members; ++j)
    rs->to_map[j] = to_map[j];
}

void
restripe_logical (const struct restripe *rs, uint64_t p, uint64_t w,
                  uint64_t *lo, uint64_t *hi)
{
  if (rs->backward) {
    *lo = rs->size - p - w;
    *hi = rs->size - p;
  }
  else {
    *lo = p;
    *hi = p + w;
  }
}

void
restripe_position (const struct restripe *rs, uint64_t lo, uint64_t hi,
                   uint64_t *p, uint64_t *w)
{
  *w = hi - lo;
  *p = rs->backward ? rs->size - hi : lo;
}

/* The logical bytes [*c_lo, *c_hi) of the old layout that hold, on the
 * members, what the new layout puts logical [lo, hi) in.  On each member
 * both layouts put logical bytes in increasing order, so what the old
 * layout has in a member range is one logical range: its first and last
 * byte's.  False when the new layout's bytes hold nothing of the old.
 */
static bool
clobbered (const struct restripe *rs, uint64_t lo, uint64_t hi,
           uint64_t *c_lo, uint64_t *c_hi)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  bool any = false;

  layout_spans (rs->to, lo, hi - lo, spans);
  for (unsigned j = 0; j < rs->to->nr_members; ++j) {
    unsigned f = rs->from_of[rs->to_map[j]];
    uint64_t s = spans[j].member_offset, e, a, b;

    if (!spans[j].touched || f == RESTRIPE_NONE)
      continue;
    e = s + spans[j].length;
    if (e > rs->from->member_size[f])
      e = rs->from->member_size[f];
    if (s >= e || !layout_unmap (rs->from, f, s, &a))
      continue;
    if (!layout_unmap (rs->from, f, e - 1, &b))
      b = rs->from->size - 1; /* past md's size rule: up to its end */
    if (!any || a < *c_lo)
      *c_lo = a;
    if (!any || b + 1 > *c_hi)
      *c_hi = b + 1;
    any = true;
  }
  return any;
}

uint64_t
restripe_clobber_end (const struct restripe *rs, uint64_t p, uint64_t w)
{
  uint64_t lo, hi, c_lo, c_hi;

  restripe_logical (rs, p, w, &lo, &hi);
  if (!clobbered (rs, lo, hi, &c_lo, &c_hi))
    return 0;
  if (rs->backward) {
    /* What lies past the end of the smaller volume is no one's data. */
    if (c_lo >= rs->size)
      return 0;
    return rs->size - c_lo;
  }
  return c_hi > rs->size ? rs->size : c_hi;
}

/* The window sizes tried at p: max, halved down to MIN_WINDOW, each in
 * whole 4 KiB (the last window may end the move shorter).
 */
static uint64_t
clip (const struct restripe *rs, uint64_t p, uint64_t w)
{
  w = w / STEP * STEP;
  if (w == 0)
    w = STEP;
  return rs->size - p < w ? rs->size - p : w;
}

enum restripe_how
restripe_window (const struct restripe *rs, uint64_t p, uint64_t max,
                 uint64_t journal, uint64_t *w)
{
  /* In place: what the window overwrites has moved before p. */
  for (uint64_t t = max; t >= MIN_WINDOW; t /= 2) {
    uint64_t c = clip (rs, p, t);
    if (restripe_clobber_end (rs, p, c) <= p) {
      *w = c;
      return RESTRIPE_IN_PLACE;
    }
  }
  /* Through the journal: what it overwrites is at most itself. */
  for (uint64_t t = journal < max ? journal : max; t >= MIN_WINDOW; t /= 2) {
    uint64_t c = clip (rs, p, t);
    if (c <= journal && restripe_clobber_end (rs, p, c) <= p + c) {
      *w = c;
      return RESTRIPE_JOURNAL;
    }
  }
  return RESTRIPE_CANNOT;
}

bool
restripe_feasible (const struct restripe *rs, uint64_t max, uint64_t journal,
                   uint64_t *bad, uint64_t *need)
{
  uint64_t w;

  *need = 0;
  for (uint64_t p = 0; p < rs->size; p += w) {
    switch (restripe_window (rs, p, max, journal, &w)) {
    case RESTRIPE_IN_PLACE: break;
    case RESTRIPE_JOURNAL:
      if (w > *need)
        *need = w;
      break;
    case RESTRIPE_CANNOT: *bad = p; return false;
    }
  }
  return true;
}

bool
restripe_nothing_moves (const struct restripe *rs)
{
  const struct layout *f = rs->from, *t = rs->to;

  if (f->chunk != t->chunk || f->id != t->id || t->nr_zones < f->nr_zones)
    return false;
  for (unsigned z = 0; z < f->nr_zones; ++z) {
    const struct layout_zone *a = &f->zones[z], *b = &t->zones[z];
    if (a->start != b->start || a->dev_start != b->dev_start
        || a->nr_devs != b->nr_devs || a->shift != b->shift
        || (z + 1 < f->nr_zones && a->end != b->end) || b->end < a->end)
      return false;
    for (unsigned d = 0; d < a->nr_devs; ++d)
      if (rs->from_map[a->devs[d]] != rs->to_map[b->devs[d]])
        return false;
  }
  return true;
}
