/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what a command prints with --json (nbdstripe(8), "JSON
 * OUTPUT").  Every command's object has "ok" (its exit status was 0) and
 * "error" (why not, or null), whatever happened; its other keys are
 * always there too, null when they do not apply.  A command that follows
 * a job (--wait) prints JSON Lines: a progress object a line, then its
 * result on one line.
 *
 * The reason of a failure is often said deep down (check_volume, the
 * member checks) on stderr, one line a problem.  Rather than thread a why
 * buffer through every one of them, stderr is watched once --json is
 * asked: the first "nbdstripe: " line that is not a warning becomes the
 * error.
 */
#ifndef NBDSTRIPE_DAEMON_JSONOUT_H
#define NBDSTRIPE_DAEMON_JSONOUT_H

#include <stdbool.h>

#include <json-c/json.h>

/* From here on, the lines said on stderr are watched (they still go to
 * fd 2, unbuffered as before).  Once a process; a no-op when stderr
 * cannot be wrapped.
 */
extern void jsonout_watch_stderr (void);

/* The first error said on stderr since jsonout_watch_stderr (without
 * "nbdstripe: "), or NULL.
 */
extern const char *jsonout_said (void);

/* o (taken) gets "ok" and "error" -- err when it is not NULL or "", else
 * the first error said, else "failed" when !ok -- and is printed on
 * stdout: indented, or on one line (JSON Lines).  0/-1.
 */
extern int jsonout_result (struct json_object *o, bool ok, const char *err,
                           bool one_line);

/* o (taken) on one line on stdout, flushed. 0/-1. */
extern int jsonout_line (struct json_object *o);

#endif /* NBDSTRIPE_DAEMON_JSONOUT_H */
