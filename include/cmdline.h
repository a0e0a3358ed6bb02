/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: nbdkit's own command line, read as nbdkit reads it.
 *
 * nbdkit tells a plugin whether it serves read-only (-r) only per
 * connection, in .open; the plugin must know before, in .get_ready, to
 * open its members read-only or not.  Nor does it say where its log goes
 * (--log), which the plugin's own lines must follow (log.h).  So the
 * plugin reads /proc/self/cmdline.
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

/* Where nbdkit sends its log lines, read from the same command line:
 * --log=stderr|syslog|null (the last one given wins, as in nbdkit);
 * CMDLINE_LOG_DEFAULT without one -- then nbdkit logs to stderr in the
 * foreground and to syslog once it has forked into the background.  A
 * value nbdkit would refuse leaves the answer as it was (nbdkit exits).
 */
enum cmdline_log {
  CMDLINE_LOG_DEFAULT,
  CMDLINE_LOG_STDERR,
  CMDLINE_LOG_SYSLOG,
  CMDLINE_LOG_NULL,
};
extern enum cmdline_log cmdline_log (const char *args, size_t len,
                                     bool posixly_correct);

/* This process's command line as /proc/self/cmdline has it, with the
 * NUL the functions above ask for after it (*len excludes it); NULL when
 * it cannot be read.  Free it.
 */
extern char *cmdline_read_self (size_t *len);

#endif /* NBDSTRIPE_CMDLINE_H */
