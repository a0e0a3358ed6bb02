/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: growing and shrinking a served volume -- a restripe from one
 * layout to another, a job of the mover (mover.h) over the arithmetic of
 * restripe.h.
 *
 * grow adds members (the new ones last) and moves the data forward, from
 * the start; shrink removes one and moves the data backward, from the
 * end; grow --size max takes the room bigger members have (a replace
 * onto bigger devices), moving data only where the zones change.  The
 * volume's size changes at the end (a client sees it when it connects
 * again: NBD has no resize notice).
 *
 * Requests meanwhile (the job's request hook, each request whole):
 * positions below the recorded position (durably in every member's
 * metadata) are in the new layout only; between it and the watermark
 * (copied, not yet recorded) reads come from the new layout and writes go
 * to both, so that either record is right after a crash; above the
 * watermark everything is in the old layout, and writes wait for a
 * window announced before them.  A shrink refuses requests beyond the
 * size the volume is shrinking to (the user shrank the file system
 * first: nothing there is kept).
 *
 * Crash safety (md's reshape, without its detour through a parity
 * level): before a window is written where old data lies, the position
 * below it is recorded, and the requests that may still read or write
 * old places below it are waited for; a window whose new place overlaps
 * its own old bytes (the critical section: the first windows of a grow,
 * the last of a shrink) is written to the journal (the gap between each
 * member's header and its data) and recorded there first, and recorded
 * as done before any client can write it.  Served again after a crash,
 * the volume replays a journal that holds a window beyond the recorded
 * position and goes on from there.
 *
 * The config names what is under way (joining, leaving) from the start
 * and what the volume is at the end (config.h); the members' headers
 * carry the rest (header.h).  md and none cannot record a reshape and are
 * refused, saying why.
 */
#ifndef NBDSTRIPE_RESHAPE_H
#define NBDSTRIPE_RESHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct volume;
struct assembly;
struct json_object;

enum reshape_kind { RESHAPE_GROW, RESHAPE_SHRINK, RESHAPE_SIZE };

struct reshape_params {
  enum reshape_kind kind;
  unsigned nr_new;              /* grow: the devices to add */
  const char *const *new_paths;
  unsigned index;               /* shrink: the member to remove */
  uint64_t size;                /* shrink: the size it will have (bytes) */
  bool force;                   /* new devices may hold metadata; a
                                 * shrink where extents cannot tell */
  bool dry_run;                 /* say what it would do, do nothing */
  uint64_t rate;                /* bytes per second at most, 0: no limit */
  const char *config;           /* the volume's config file */
};

/* Start a grow or a shrink of the served volume v: every check first
 * (nothing written before they pass), then the config and every
 * member's header say what is under way, the new members join the
 * volume, and the copier starts.  *result (may be NULL): what it does or
 * would do (sizes, members).  -1 with why.
 */
extern int reshape_start (struct volume *v, const struct reshape_params *p,
                          struct json_object **result, char *why, size_t len);

/* A volume opened mid-reshape (a->reshape.active): replay the journal if
 * it holds a window beyond the recorded position, then go on.  config:
 * the config file.  -1 with why.
 */
extern int reshape_resume (struct volume *v, const struct assembly *a,
                           const char *config, char *why, size_t len);

/* A reshape stopped half-way (cancelled, or a member failed) stays: the
 * volume is served through both layouts from where it stopped, its
 * status's state "paused" (paused_by "cancel" or "error", the error
 * saying why and how to go on), and it goes on when served again or:
 *
 * reshape_cancel: ask the running reshape to stop at the end of its
 * window.  reshape_continue: a paused one goes on from the position
 * recorded (rate: as reshape_params'), the headers written again first
 * (the journal's window replayed if it stopped half-written).  -1 with
 * why: errno ENOENT when none is under way, EALREADY when it runs
 * (continue) or is paused or switching already (cancel).
 */
extern int reshape_cancel (struct volume *v, char *why, size_t len);
extern int reshape_continue (struct volume *v, uint64_t rate, char *why,
                             size_t len);

/* The config of a volume assembled from it names a reshape its members
 * say is not under way (a->config_stale: a crash between the config's
 * rewrite and the headers' at either end): written as the members say.
 */
extern int reshape_fix_config (const char *config, const struct assembly *a,
                               char *why, size_t len);

#endif /* NBDSTRIPE_RESHAPE_H */
