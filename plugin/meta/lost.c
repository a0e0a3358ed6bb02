/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the lost-range list's arithmetic.  See include/lost.h. */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lost.h"

#define SECTOR 512u

static uint64_t
end_of (const struct lost_range *r)
{
  return r->offset + r->length;
}

static void
drop (struct lost *l, unsigned i)
{
  memmove (&l->r[i], &l->r[i + 1], (l->nr - i - 1) * sizeof l->r[0]);
  l->nr--;
}

/* Room for one more: the two neighbours with the smallest gap become one. */
static void
make_room (struct lost *l)
{
  unsigned best = 0;
  uint64_t gap = UINT64_MAX;

  for (unsigned i = 0; i + 1 < l->nr; ++i)
    if (l->r[i + 1].offset - end_of (&l->r[i]) < gap) {
      gap = l->r[i + 1].offset - end_of (&l->r[i]);
      best = i;
    }
  l->r[best].length = end_of (&l->r[best + 1]) - l->r[best].offset;
  drop (l, best + 1);
}

bool
lost_add (struct lost *l, uint64_t offset, uint64_t length, bool *merged)
{
  uint64_t a = offset / SECTOR * SECTOR;
  uint64_t b = (offset + length + SECTOR - 1) / SECTOR * SECTOR;
  unsigned i, j;

  if (merged)
    *merged = false;
  if (length == 0)
    return false;
  /* The first range that ends at or after a (touching counts). */
  for (i = 0; i < l->nr && end_of (&l->r[i]) < a; ++i)
    ;
  if (i < l->nr && l->r[i].offset <= a && end_of (&l->r[i]) >= b)
    return false; /* lost already */
  /* Every range from i that starts at or before b is merged in. */
  for (j = i; j < l->nr && l->r[j].offset <= b; ++j) {
    if (l->r[j].offset < a)
      a = l->r[j].offset;
    if (end_of (&l->r[j]) > b)
      b = end_of (&l->r[j]);
  }
  if (j > i) {
    l->r[i] = (struct lost_range){ a, b - a };
    while (j > i + 1)
      drop (l, --j);
    return true;
  }
  if (l->nr == LOST_MAX) {
    make_room (l);
    if (merged)
      *merged = true;
    return lost_add (l, a, b - a, NULL) || true;
  }
  memmove (&l->r[i + 1], &l->r[i], (l->nr - i) * sizeof l->r[0]);
  l->r[i] = (struct lost_range){ a, b - a };
  l->nr++;
  return true;
}

bool
lost_remove (struct lost *l, uint64_t offset, uint64_t length)
{
  uint64_t a = (offset + SECTOR - 1) / SECTOR * SECTOR;
  uint64_t b = (offset + length) / SECTOR * SECTOR;
  bool changed = false;

  if (b <= a)
    return false;
  for (unsigned i = 0; i < l->nr;) {
    struct lost_range *r = &l->r[i];
    uint64_t e = end_of (r);
    if (e <= a || r->offset >= b) {
      ++i;
      continue;
    }
    changed = true;
    if (r->offset >= a && e <= b) { /* all of it */
      drop (l, i);
      continue;
    }
    if (r->offset < a && e > b) { /* a hole in the middle: two ranges */
      if (l->nr == LOST_MAX) {
        /* No room to split it: room made as lost_add makes it (a gap
         * elsewhere called lost: more reads fail, never fewer), then
         * again.
         */
        make_room (l);
        lost_remove (l, offset, length);
        return true;
      }
      memmove (&l->r[i + 1], &l->r[i], (l->nr - i) * sizeof l->r[0]);
      l->nr++;
      l->r[i].length = a - l->r[i].offset;
      l->r[i + 1].offset = b;
      l->r[i + 1].length = e - b;
      return true;
    }
    if (r->offset < a) /* its tail written */
      r->length = a - r->offset;
    else { /* its head written */
      r->length = e - b;
      r->offset = b;
    }
    ++i;
  }
  return changed;
}

bool
lost_touches (const struct lost *l, uint64_t offset, uint64_t length)
{
  for (unsigned i = 0; i < l->nr; ++i) {
    if (l->r[i].offset >= offset + length)
      return false;
    if (end_of (&l->r[i]) > offset)
      return true;
  }
  return false;
}

bool
lost_truncate (struct lost *l, uint64_t size)
{
  bool changed = false;

  while (l->nr > 0 && l->r[l->nr - 1].offset >= size) {
    l->nr--;
    changed = true;
  }
  if (l->nr > 0 && end_of (&l->r[l->nr - 1]) > size) {
    l->r[l->nr - 1].length = size - l->r[l->nr - 1].offset;
    changed = true;
  }
  return changed;
}

uint64_t
lost_bytes (const struct lost *l)
{
  uint64_t n = 0;

  for (unsigned i = 0; i < l->nr; ++i)
    n += l->r[i].length;
  return n;
}

size_t
lost_format (const struct lost *l, char *out, size_t len)
{
  size_t used = 0;

  if (len)
    out[0] = '\0';
  for (unsigned i = 0; i < l->nr; ++i) {
    char piece[64];
    size_t n = snprintf (piece, sizeof piece, "%s%" PRIu64 "+%" PRIu64,
                         i ? ", " : "", l->r[i].offset, l->r[i].length);

    if (used + n + 5 > len) {
      if (used + 5 <= len)
        used += snprintf (out + used, len - used, ", ...");
      break;
    }
    memcpy (out + used, piece, n + 1);
    used += n;
  }
  return used;
}
