/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the arithmetic of a restripe -- moving a volume from one
 * layout to another in place (grow: more members or bigger ones; shrink:
 * a member fewer).  Pure: no I/O, no locks.
 *
 * Members are numbered in the union of both layouts (the volume's
 * members[]: for a grow the old members then the new; for a shrink all
 * of them, the leaving one included); each layout's member j is union
 * member map[j].  Every member keeps its data from the same data offset,
 * so member offsets are comparable across layouts.
 *
 * The data moves window by window in "positions": [0, size) where size is
 * what both layouts hold (the smaller volume).  Forward (a grow: data
 * moves towards the start of each member), position p is logical byte p;
 * backward (a shrink: data moves towards the end), it is logical byte
 * size - 1 - p, so that windows run from the end down.  Below the
 * recorded position (in the members' metadata) the data is in the new
 * layout, above it in the old.
 *
 * Why a window may be written in place, or must go to a journal first:
 * writing window [p, p + w) in the new layout overwrites, on each member,
 * bytes that held some data in the old layout -- the window's "clobber"
 * range of positions.  If that range lies below the recorded position,
 * that data has moved already (and is durably recorded as moved): in
 * place is safe.  If it reaches into the window itself (the critical
 * section: the first windows of a grow, the last of a shrink), the
 * window's old data is written to a journal first, so that a crash in the
 * middle of writing it finds the data there.  If it reaches beyond the
 * window, the window is too large; smaller windows are tried.
 */
#ifndef NBDSTRIPE_RESTRIPE_H
#define NBDSTRIPE_RESTRIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

#define RESTRIPE_NONE 0xffu /* no member in this layout */

struct restripe {
  const struct layout *from, *to;
  uint8_t from_map[LAYOUT_MAX_MEMBERS]; /* from's member j: union member */
  uint8_t to_map[LAYOUT_MAX_MEMBERS];
  uint8_t from_of[LAYOUT_MAX_MEMBERS];  /* union member u: from's j */
  unsigned nr_union;
  bool backward;
  uint64_t size; /* positions: [0, size) */
};

/* Set up rs from the two layouts and their maps (from_of filled in);
 * backward when data moves to higher member offsets.  size: the smaller
 * of the two volumes.
 */
extern void restripe_init (struct restripe *rs, const struct layout *from,
                           const uint8_t *from_map, const struct layout *to,
                           const uint8_t *to_map, unsigned nr_union,
                           bool backward);

/* Positions [p, p + w) as logical bytes [*lo, *hi). */
extern void restripe_logical (const struct restripe *rs, uint64_t p,
                              uint64_t w, uint64_t *lo, uint64_t *hi);
/* Logical bytes [lo, hi) (within size) as positions [*p, *p + *w). */
extern void restripe_position (const struct restripe *rs, uint64_t lo,
                               uint64_t hi, uint64_t *p, uint64_t *w);

/* The end (exclusive) of the positions whose old-layout bytes writing
 * window [p, p + w) in the new layout overwrites; 0 when none.
 */
extern uint64_t restripe_clobber_end (const struct restripe *rs, uint64_t p,
                                      uint64_t w);

/* How the window at position p is to be written. */
enum restripe_how {
  RESTRIPE_IN_PLACE, /* once positions below p are recorded */
  RESTRIPE_JOURNAL,  /* through the journal */
  RESTRIPE_CANNOT,   /* no window size works */
};

/* The window at p: at most max bytes, at most journal bytes when it must
 * go through the journal, a multiple of 4 KiB (the last may be shorter).
 * *w its size.
 */
extern enum restripe_how restripe_window (const struct restripe *rs,
                                          uint64_t p, uint64_t max,
                                          uint64_t journal, uint64_t *w);

/* Whether every window of the whole move works (with a journal of that
 * many bytes); *bad the first position that does not.  The journal bytes
 * the move needs at most in *need.
 */
extern bool restripe_feasible (const struct restripe *rs, uint64_t max,
                               uint64_t journal, uint64_t *bad,
                               uint64_t *need);

/* Whether the two layouts put every position in the same place (a grow
 * into room that moves nothing: the same members, the same zones for
 * what there is).
 */
extern bool restripe_nothing_moves (const struct restripe *rs);

#endif /* NBDSTRIPE_RESTRIPE_H */
