/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: a server says, in the run directory, that it
 * serves, so that `nbdstripe list`, `status NAME` and `stop NAME` find
 * every volume served on this host wherever its config and status file
 * live (a demo's in /var/tmp, an admin's in a home directory).
 *
 * One file per server, RUNDIR/NAME.PID.served (config.h's
 * config_run_dir), a JSON object: "name", "pid", "config" (absolute, or
 * null for an ad hoc server) and "status_file" (or null).  Written whole
 * (write_file_atomic) once the server is ready, removed at a clean stop.
 * A server killed leaves its file behind: the readers (daemon/served.c)
 * take it only while its pid lives and its command line serves that
 * config, so a leftover, or a pid reused, says nothing.
 */
#ifndef NBDSTRIPE_REGISTRY_H
#define NBDSTRIPE_REGISTRY_H

/* Register this process as the server of name.  A run directory that
 * cannot be written is a warning, not a failure: the volume is served
 * all the same (list then finds it by its process).
 */
extern void registry_add (const char *name, const char *config,
                          const char *status_file);

/* Remove what registry_add wrote, if anything. */
extern void registry_remove (void);

#endif /* NBDSTRIPE_REGISTRY_H */
