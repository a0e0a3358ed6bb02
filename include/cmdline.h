/* nbdstripe: nbdkit's own command line, read as nbdkit reads it.
 *
 * nbdkit tells a plugin whether it serves read-only (-r) only per
 * connection, in .open; the plugin must know before, in .get_ready, to
 * open its members read-only or not.  So it reads /proc/self/cmdline.
 */
#ifndef NBDSTRIPE_CMDLINE_H
#define NBDSTRIPE_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the command line args (len bytes, NUL-separated as in
 * /proc/PID/cmdline, argv[0] first; args[len] must be a NUL) asks nbdkit
 * for read-only: -r, --readonly or --read-only, or an abbreviation of
 * them, anywhere getopt_long would see an option -- as nbdkit 1.32
 * parses it (its options table, GNU getopt's argument permutation:
 * options after the plugin name count; "--" ends the options; with
 * posixly_correct, $POSIXLY_CORRECT set, so does the first non-option).
 * The argument of an option that takes one (-P FILE, --run CMD, -e NAME)
 * is never read as an option, whatever it looks like.
 */
extern bool cmdline_readonly (const char *args, size_t len,
                              bool posixly_correct);

#endif /* NBDSTRIPE_CMDLINE_H */
