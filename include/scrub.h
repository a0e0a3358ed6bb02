/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the patrol read (scrub) of a served volume.
 *
 * A RAID-0 has no copy to rebuild a sector from: a sector that went bad
 * where nothing reads it is found when it is needed, and lost.  A scrub
 * reads every member's data area (from the member's data offset to the
 * end of what the layout uses) from the device itself, past any cache,
 * in the background while clients go on, so that bad places are found
 * while the member can still be moved (nbdstripe replace).
 *
 * A thread of its own reads the same member offsets of every member in
 * turn, PIECE bytes at a time; each read is counted in the volume's gate
 * like a client request (a replace's switch waits for it) and kept out of
 * health's books.  It yields to clients: at most rate bytes a second in
 * all (0: as fast as it goes), and while clients are at work (their
 * requests counted by health since its last read) it pauses YIELD_MS
 * before each read.  A member that has failed is skipped (said in its
 * status).  A piece that cannot be read is read again block by block
 * (4 KiB, twice each): the blocks that stay unreadable are reported, per
 * member as member offsets and as the volume's logical byte ranges, and
 * the member is failing from then on (health_scrub_result), until a later
 * scrub reads all of it.  A member that read clean in a scrub that ran to
 * its end loses an earlier scrub's finding.
 *
 * It runs beside a replace, a grow or a shrink (jobs.h), started before
 * or after it: an unreadable block's logical bytes are those a read of
 * it serves when it is found (volume_member_logical: during a grow or
 * shrink, the new layout where the data has moved, the old one where it
 * has not, none for a place the data has left).  It reads the members
 * the volume has when it starts, each up to what the layouts use of it
 * then; a member that joins later (a grow) is read by the next scrub.
 *
 * One scrub at a time; its status (the last one's once it has ended) is
 * the status's "scrub" object:
 *   { "state": "running" | "done" | "cancelled" | "failed",
 *     "rate_limit": R (bytes/s, 0 none), "started_unix": T,
 *     "finished_unix": T | null, "elapsed_seconds": S,
 *     "bytes_read": N, "bytes_skipped": N (not read: a member gone),
 *     "bytes_total": N, "rate": B/s (mean),
 *     "eta_seconds": S (running only),
 *     "unreadable_bytes": N,
 *     "unreadable": [ { "offset": L, "length": N }, ... ],  // logical,
 *                                                           // sorted
 *     "members": [ { "index": I, "path": "...", "bytes_read": N,
 *                    "bytes_skipped": N, "bytes_total": N,
 *                    "unreadable_bytes": N,
 *                    "unreadable": [ { "member_offset": O,
 *                                      "length": N }, ... ],
 *                    "skipped": null | "why it was not (all) read" },
 *                  ... ],
 *     "truncated": false,   // true: more ranges than were kept
 *     "error": null | "why it failed or was cancelled" }
 */
#ifndef NBDSTRIPE_SCRUB_H
#define NBDSTRIPE_SCRUB_H

#include <stddef.h>
#include <stdint.h>

struct array;
struct json_object;
struct jobs_running;

/* What a scrub reads a second at most unless told otherwise (the
 * command's --rate, the control socket's "rate").
 */
#define SCRUB_DEFAULT_RATE (256 * 1024 * 1024)

struct scrub_params {
  uint64_t rate; /* bytes a second in all, 0: as fast as it goes */
};

/* Start a scrub.  Refused (-1, why) where jobs.h's table says so: one
 * runs already.
 */
extern int scrub_start (struct array *a, const struct scrub_params *p,
                        char *why, size_t len);

/* The scrub under way, added to r (jobs.h); takes a->scrub_lock, never
 * with the volume's mover_lock held.
 */
extern void scrub_jobs (struct array *a, struct jobs_running *r);

/* Ask the running scrub to stop (at its next read). */
extern int scrub_cancel (struct array *a, char *why, size_t len);

/* The current (or last) scrub as JSON (above), NULL when there never was
 * one.
 */
extern struct json_object *scrub_status (struct array *a);

/* Stop a scrub still running and wait for it; its status stays (the
 * server's last status file).
 */
extern void scrub_stop (struct array *a);

/* For array_close: scrub_stop, then free it. */
extern void scrub_free (struct array *a);

#endif /* NBDSTRIPE_SCRUB_H */
