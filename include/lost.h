/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the lost-range list -- logical byte ranges of a volume whose
 * data is known to be gone (a replace --skip-unreadable could not read
 * them from the member it copied, a scrub found them unreadable on a
 * member that was then replaced), as md keeps a bad-block log.  Reads
 * that touch one fail with EIO until a write, a trim or a write of zeroes
 * covers it: never zeros, never another device's bytes in their place.
 *
 * The list is the metadata's (header.h keeps it on every member, in the
 * same multi-member update as a generation); this is its arithmetic,
 * pure code.  Ranges are whole sectors (512 bytes), sorted, apart from
 * one another; an added range that touches or overlaps others is merged
 * with them.  The list has room for LOST_MAX ranges: past that, the two
 * ranges with the smallest gap between them are merged, gap included
 * (more reads at EIO than were lost, never fewer), and lost_add says so.
 */
#ifndef NBDSTRIPE_LOST_H
#define NBDSTRIPE_LOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOST_MAX 176u /* HEADER_LOST_MAX */

struct lost_range {
  uint64_t offset, length;
};

struct lost {
  unsigned nr;
  struct lost_range r[LOST_MAX];
};

/* [offset, offset + length) rounded out to sectors, added: true when the
 * list changed; *merged (may be NULL) set when ranges had to be merged
 * across a gap to make room.
 */
extern bool lost_add (struct lost *l, uint64_t offset, uint64_t length,
                      bool *merged);
/* [offset, offset + length) is no longer lost (written, trimmed): the
 * sectors it covers whole are taken out, a partial sector stays.  True
 * when the list changed.
 */
extern bool lost_remove (struct lost *l, uint64_t offset, uint64_t length);
/* Whether [offset, offset + length) touches a lost range. */
extern bool lost_touches (const struct lost *l, uint64_t offset,
                          uint64_t length);
/* Ranges at or beyond size dropped or cut (a shrink): true if any. */
extern bool lost_truncate (struct lost *l, uint64_t size);
/* Total bytes the list holds. */
extern uint64_t lost_bytes (const struct lost *l);
/* The list as text, "OFFSET+LENGTH, ..." in bytes, cut with ", ..."
 * when it does not fit; returns the length written.
 */
extern size_t lost_format (const struct lost *l, char *out, size_t len);

#endif /* NBDSTRIPE_LOST_H */
