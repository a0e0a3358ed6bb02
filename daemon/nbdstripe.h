/* nbdstripe: the command.  Sub-commands, one file each. */
#ifndef NBDSTRIPE_DAEMON_H
#define NBDSTRIPE_DAEMON_H

#include <stdint.h>

#include "config.h"

extern int cmd_create (int argc, char **argv);
extern int cmd_serve (int argc, char **argv);
extern int cmd_check (int argc, char **argv);
extern int cmd_inspect (int argc, char **argv);
extern int cmd_status (int argc, char **argv);
extern int cmd_accept (int argc, char **argv);
extern int cmd_import (int argc, char **argv);
extern int cmd_replace (int argc, char **argv);

/* Load a config, printing the one-line error on failure.  Returns 0/-1;
 * cfg needs config_free either way.
 */
extern int load_config (const char *path, struct stripe_config *cfg);

/* The config's warnings (config.h), one line each on stderr: check and
 * serve print them.
 */
extern void print_config_warnings (const struct stripe_config *cfg);

/* Check that the volume described by cfg can be served: headers agree
 * with the config (metadata "header"), the members open, none is
 * another's alias, and they are big enough.  Nothing is written.  With
 * claim, members are also locked for the check (shared), so that one in
 * use by a server is refused, naming it.  Prints every problem; returns
 * 0/-1.  On success fills in the volume's size and UUID text ("" without
 * header).
 */
extern int check_volume (const struct stripe_config *cfg, bool claim,
                         uint64_t *size, char uuid[37]);

/* The mkfs.ext4 and mkfs.xfs stripe options for this geometry, two
 * indented lines on stdout (check and status print them).
 */
extern void print_mkfs_geometry (uint64_t chunk, unsigned nr_members);

/* What libblkid (or our own magic, in first: the member's first 4 KiB)
 * recognises on a member, worded into what, or NULL.  A remote member is
 * probed through a copy (its probe_fd); one that cannot be copied is
 * reported as such, since nothing can be said of it.
 */
struct member;
extern const char *recognise_member (struct member *m, const uint8_t *first,
                                     char *what, size_t len);

/* "128K", "1.5G": human-readable size. */
extern const char *human_size (uint64_t bytes, char *buf, size_t len);

#endif /* NBDSTRIPE_DAEMON_H */
