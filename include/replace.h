/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: replacing a member while the volume is served.
 *
 * A copier thread copies member INDEX (old) to a new device (NEW, any
 * kind of member: file, block device, NBD URI) window by window, in
 * increasing member offsets, while clients go on.  Unthrottled, the copy
 * is a pipeline: window k is written to NEW while window k + 1 is read
 * from old, each window as a few requests at once, so that it runs at
 * the pace of the slower device (not of both, one after the other).
 * What clients do meanwhile (replace_run_ops, on the volume's I/O path):
 *
 * - Every request is counted in the volume's gate (volume.h) before it
 *   reads v->rep: the copier waits for the requests that started before
 *   the replace was published (they go to old alone) before it reads
 *   anything.
 * - Reads come from old.  A read from old that fails is retried on NEW
 *   where the copy has passed.
 * - Writes, trims and zeroes reach old, and NEW too where the copy has
 *   passed (below the watermark); beyond it the copier will carry them
 *   over.  Zeroes NEW cannot do are written; a trim it cannot do is
 *   skipped (advisory).  A write never races the copier: the copier
 *   announces a window, then waits for the client writes over it that
 *   started before; a client write waits for the windows announced before
 *   it started -- so NEW never gets data older than what a client wrote,
 *   a hot region at any queue depth cannot keep the copier out, and a
 *   trim over the whole member waits for at most the two windows of the
 *   pipeline, not for the copy to pass it.
 * - Flushes (and FUA) cover both: a write mirrored onto NEW marks its
 *   member dirty (dirty.h) as any write does, and the flush that syncs
 *   the member syncs NEW too.  At the switch NEW is synced with nothing
 *   in flight, and marked dirty all the same (one sync more).
 * - An operation on NEW that fails aborts the replace; the client's
 *   request is answered by old alone, and the volume goes on with it.
 *
 * The end: NEW is flushed; then the volume is quiesced (every request
 * waits at the entry, none fails, none is in flight), NEW is flushed
 * again and gets the member's metadata (a header with the volume's array
 * UUID, the same index, a new member UUID and the volume's generation; or
 * an md superblock with a new device UUID), the config file's members
 * element is rewritten with NEW (atomically, config_replace_member), and
 * the volume switches to NEW; requests go on.  When the config cannot be
 * rewritten, old is marked replaced before the switch (so that the config
 * naming it is refused, never served with old data); when even that
 * cannot be (metadata "none", old dying) the replace fails, not
 * switched, and NEW's metadata is cleared.  After the switch the
 * generation is bumped on every member (headers), and old is marked
 * replaced (header flag; md: its role set faulty), so that it is never
 * assembled again.
 * Until NEW's metadata is written it holds none (its first bytes are
 * cleared when the copy starts): a server killed at any moment leaves a
 * volume that assembles with the config as it then is, and a half-copied
 * NEW is refused.
 *
 * Read errors on old: each window is read again, then block by block;
 * blocks that stay unreadable stop the replace, which reports them as the
 * volume's logical byte ranges -- or, with skip_unreadable, are written as
 * zeros on NEW and listed.
 */
#ifndef NBDSTRIPE_REPLACE_H
#define NBDSTRIPE_REPLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct volume;
struct replace;
struct member_op;
struct json_object;

struct replace_params {
  unsigned index;        /* the member to replace */
  const char *new_path;  /* path or NBD URI */
  uint64_t rate;         /* bytes per second at most, 0: as fast as it goes */
  bool force;            /* NEW may hold an nbdstripe header or md superblock */
  bool skip_unreadable;  /* copy on past unreadable blocks (zeros on NEW) */
  const char *config;    /* the config file to rewrite, or NULL */
};

/* Start replacing.  Refused (-1, why) when a replace runs (or is being
 * started) already, the index is wrong, NEW cannot be opened for writing,
 * is too small, is another member (or overlaps one), takes blocks larger
 * than the volume promised its clients, or holds metadata without force;
 * or when the volume has neither a config nor metadata (ad hoc).  Nothing
 * has been written to NEW then.  NEW is opened and checked with no lock
 * that the status or the I/O path takes.
 */
extern int replace_start (struct volume *v, const struct replace_params *p,
                          char *why, size_t len);

/* Ask the running replace to stop (it stops at the end of its window:
 * NEW is left without metadata, the volume goes on with old).
 */
extern int replace_cancel (struct volume *v, char *why, size_t len);

/* Wait for the copier to end (the command's --offline).  0 when the
 * member was replaced, -1 otherwise (reason logged).
 */
extern int replace_wait (struct volume *v);

/* The current (or last) replace as JSON, or NULL when there never was
 * one: state ("copying", "switching", "done", "failed", "cancelled"),
 * member, old, new, bytes_copied, bytes_total, rate (B/s), eta_seconds,
 * error, unreadable (the logical ranges), config_updated.
 */
extern struct json_object *replace_status (struct volume *v);

/* For volume.c: run a request's member operations while replace r runs
 * (see above; r is v->rep as the request read it once counted in the
 * volume's gate).  plain runs them as without a replace.
 */
typedef int (*replace_plain_fn) (struct volume *v, struct member_op *ops,
                                 unsigned nr);
extern int replace_run_ops (struct volume *v, struct replace *r,
                            struct member_op *ops, unsigned nr,
                            replace_plain_fn plain);

/* Test hooks, set from the plugin's -D flags: hold each window this many
 * ms; kill the process (SIGKILL) at step 1 (NEW's metadata written) or 2
 * (the config rewritten) of the end; hold the copier at each phase
 * boundary (gate) until replace_debug_release.  The phases, in order:
 *   published  the replace is visible to requests from now on
 *   drained    the requests that started before it have ended
 *   locked     a window taken (the first; later ones as the pipeline
 *              reads ahead, or one at a time with a rate)
 *   advanced   a window written to NEW, the watermark past it
 *   copied     the copy done and NEW flushed; clients still write both
 *   quiesced   clients held, nothing in flight
 *   metadata   NEW's metadata written
 *   config     the config rewritten (or old marked replaced)
 *   switched   NEW is the member, clients go on
 */
extern int replace_debug_hold_ms;
extern int replace_debug_crash;
extern int replace_debug_gate;

/* Let the copier held at a phase go on (at: the phase it must be held
 * at, or NULL for any).  -1 with why when it is not held (there).
 */
extern int replace_debug_release (struct volume *v, const char *at,
                                  char *why, size_t len);

/* Stop a copier still running (cancelled, or if switching let finish)
 * and wait for it; what replace_status shows stays, for the server's
 * last status file.
 */
extern void replace_stop (struct volume *v);

/* For volume_close: replace_stop, then free what is left. */
extern void replace_free (struct volume *v);

#endif /* NBDSTRIPE_REPLACE_H */
