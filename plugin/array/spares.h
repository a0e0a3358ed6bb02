/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume's hot spares (the config's spares = [ ... ]).
 *
 * A spare is a device held for a replace (replace.h): opened with the
 * volume, as its members are, and claimed with them (claim.h: O_EXCL,
 * an OFD lock), so that no second server, no `nbdstripe create` and no
 * mkfs writes it while the volume is served.  Checked as members are:
 * a spare that is another name for a member or for another spare, or
 * that someone else holds, keeps the volume from being opened (-1).
 * One that cannot be opened now, holds metadata (an nbdstripe header, an
 * md superblock: it is somebody's), takes requests larger than the
 * volume promised its clients, or is smaller than a member, is kept
 * with the reason: the status shows it, a replace skips it.
 *
 * A replace onto a spare takes it (spares_take: the opened, claimed
 * member is handed over, never closed and opened again) and gives it
 * back when it did not switch (spares_return); once it switched, the
 * spare is a member and leaves the list.  The spares are looked at
 * again now and then (spares_refresh: still there, or back), from a
 * thread of the array's spare policy that never holds a lock of the
 * I/O path.
 *
 * Locking: the spares' own mutex guards their state and is never held
 * across I/O: a spare being looked at is marked busy meanwhile.
 */
#ifndef NBDSTRIPE_SPARES_H
#define NBDSTRIPE_SPARES_H

#include <stdbool.h>
#include <stddef.h>

#include "member.h"

struct volume;
struct spares;
struct json_object;

/* Open the n spares (paths or NBD URIs) of v, whose members are open:
 * with the members' open parameters, claimed when claim.  -1 after
 * logging why when the volume must not be served with them (an alias,
 * one in use by someone else); a spare that cannot be used now is
 * logged as a warning and kept.  *sp is set (NULL when n is 0), also on
 * failure: spares_close it.
 */
extern int spares_open (struct spares **sp, struct volume *v, unsigned n,
                        char *const *paths, bool claim);
/* Close them (array_close does).  sp may be NULL. */
extern void spares_close (struct spares *sp);

/* The status's "spares": an array of { "path", "size" (bytes or null:
 * never opened), "claimed" (locked by this server now: a local spare;
 * an NBD export is its own server's), "usable" (could take any
 * member's place now), "reason" ("" when usable) }.  NULL without
 * spares.
 */
extern struct json_object *spares_status (struct spares *sp);

/* Each spare not in use looked at again: one that is open must still be
 * there and the same (member_ops.check, no data I/O); one that is not is
 * opened and claimed again.  Changes are logged.  Slow (an NBD connect):
 * never under a lock of the I/O path or of health.
 */
extern void spares_refresh (struct spares *sp);

/* The k-th spare (in the config's order) as a candidate for member i's
 * place, checked now: open, not in use, large enough, and answering --
 * its first block read from the device, its drive (drive.h) not
 * predicting its failure.  Its path in path; 1: it can; 0: it cannot,
 * why (logged by the caller; "" for a spare that is a member now); -1:
 * there is no k-th spare.
 */
extern int spares_candidate (struct spares *sp, unsigned k, unsigned i,
                             char *path, size_t plen, char *why, size_t len);

/* A replace of member index onto path: 1 when path is one of the spares
 * and it was taken (*m is it, opened and claimed, its index set); 0 when
 * it is none of them; -1 with why when it is one that cannot be taken
 * (in use, gone, holding metadata...).
 */
extern int spares_take (struct spares *sp, const char *path, unsigned index,
                        struct member *m, char *why, size_t len);
/* The replace that took path has ended.  switched: the spare is a member
 * now and leaves the list (m is untouched).  Else *m goes back to the
 * spares (it is emptied), usable again unless problem says why not.
 */
extern void spares_return (struct spares *sp, const char *path,
                           struct member *m, bool switched,
                           const char *problem);

#endif /* NBDSTRIPE_SPARES_H */
