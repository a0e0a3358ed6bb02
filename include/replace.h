/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: replacing a member while the volume is served.
 *
 * A copier thread copies member INDEX (old) to a new device (NEW, any
 * kind of member: file, block device, NBD URI) window by window, in
 * increasing member offsets, while clients go on.  Unthrottled, the copy
 * is a pipeline: window k is written to NEW while window k + 1 is read
 * from old, each window as a few requests at once, so that it runs at
 * the pace of the slower device (not of both, one after the other).
 * What clients do meanwhile (the job's hook on the volume's I/O path):
 *
 * - Every request is counted in the volume's gate (volume.h) before it
 *   reads v->mover: the copier waits for the requests that started before
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
 * NEW may be one of the volume's spares (spares.h): it is taken from
 * them as it is (opened and claimed already), and the config is then
 * rewritten by config_replace_with_spare (NEW in old's place, out of the
 * spares, old listed as removed).  A replace that does not switch gives
 * the spare back (usable again, unless NEW failed).
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
  bool automatic;        /* started by on_failing = "replace": its end is
                          * told to the spare policy (array.h) */
};

/* Start replacing.  Refused (-1, why) when a replace runs (or is being
 * started) already (errno EAGAIN), the volume is read-only (EROFS), the
 * index is wrong, NEW cannot be opened for writing,
 * is too small, is another member (or overlaps one), takes blocks larger
 * than the volume promised its clients, or holds metadata without force;
 * or when the volume has neither a config nor metadata (ad hoc).  Nothing
 * has been written to NEW then.  NEW is opened and checked with no lock
 * that the status or the I/O path takes.
 */
struct array;
extern int replace_start (struct array *a, const struct replace_params *p,
                          char *why, size_t len);

/* on_failing = "replace" (the array's spare policy): member index onto the
 * first of the volume's spares, in the config's order, that can take its
 * place now (spares_candidate), config as replace_params has it.  Each
 * spare skipped is logged with the reason.  0: started, the spare's path
 * in spare; 1: a replace or a reshape runs (try again later), why; -1:
 * none can (why names each spare and its reason), or the volume cannot
 * be replaced at all (read-only).  Slow (a spare's drive is read): from
 * a thread of its own, no lock held.
 */
extern int replace_onto_spare (struct array *a, unsigned index,
                               const char *config, char *spare, size_t slen,
                               char *why, size_t len);

/* What runs the copy, and what the control socket asks of it (cancel,
 * wait, status, the test gate's step), is the mover's (mover.h): a
 * replace's status is under "replace", with member, old, new, spare
 * (NEW was a spare), automatic (started by on_failing) and, with a
 * config, config, config_updated and config_note beside the mover's
 * fields.
 */

#endif /* NBDSTRIPE_REPLACE_H */
