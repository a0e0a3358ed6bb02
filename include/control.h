/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the control socket of a served volume.
 *
 * A Unix stream socket beside the status file (NAME.status.json ->
 * NAME.ctl), mode 0600, owned by the server's user; a client of another
 * user is refused (SO_PEERCRED) even if the mode was changed.  One request
 * per connection: the client sends one line of JSON (at most 64 KiB,
 * within 5 s for the whole of it) and reads one line of JSON back (each
 * send bounded by 5 s), then the server closes.  Each client is served by
 * a thread of its own, 16 at most (one more is answered busy): a slow
 * client never holds up another, nor the server's shutdown.
 *
 *   {"op": "status"}
 *      -> {"ok": true, "status": {... the status file's object ...}}
 *   {"op": "replace", "member": N, "new": "PATH-OR-URI",
 *    "rate": BYTES_PER_SECOND, "force": false, "skip_unreadable": false}
 *      -> {"ok": true} once the copy has started (replace.h); progress
 *         is then in the status ("replace").  Each field of its type:
 *         member an integer index of the volume, new a non-empty string,
 *         rate an integer >= 0 (0: unbounded), force and skip_unreadable
 *         booleans; another field is refused.
 *   {"op": "cancel"}            -> {"ok": true}: the copy stops
 *   {"op": "scrub", "rate": BYTES_PER_SECOND}
 *      -> {"ok": true} once the scrub has started (scrub.h; rate an
 *         integer >= 0, 0: as fast as it goes, absent:
 *         SCRUB_DEFAULT_RATE); its progress and findings are in the
 *         status ("scrub")
 *   {"op": "scrub_cancel"}      -> {"ok": true}: the scrub stops
 *   {"op": "step", "at": PHASE} -> with -D stripe.replace_gate=1 only: the
 *         copier held at PHASE goes on (replace.h)
 *
 * Every refusal: {"ok": false, "error": "one line"}.
 *
 * The command (daemon/ctl.c) asks a socket only if it is owned by root
 * (or the caller) with no permission for others, and the process that
 * answers is root's (or the caller's).
 */
#ifndef NBDSTRIPE_CONTROL_H
#define NBDSTRIPE_CONTROL_H

#include <stddef.h>

struct array;
struct control;

/* The control socket's path for a status file's path. */
extern void control_path (const char *status_file, char *out, size_t len);

/* Listen at path (replacing a stale socket there, never another kind of
 * file: EEXIST then, and the server goes on without one), for array a
 * (its config file, if any, is what a replace or reshape rewrites).
 * NULL with errno on failure.
 * Before nbdkit forks: the socket exists once the server's pidfile does;
 * clients that connect before control_serve wait.
 */
extern struct control *control_listen (const char *path, struct array *a);

/* Serve requests from a thread of its own (after the fork).  -1 with
 * errno on failure.
 */
extern int control_serve (struct control *c);

/* Stop the thread, remove the socket. */
extern void control_stop (struct control *c);

#endif /* NBDSTRIPE_CONTROL_H */
