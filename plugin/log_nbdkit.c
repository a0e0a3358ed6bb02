/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: the engine's log lines go where nbdkit sends its
 * own, each at its priority (include/log.h).
 *
 * nbdkit's API has two levels, nbdkit_error and nbdkit_debug, and does not
 * say where its lines go.  Its choice (server/log.c in nbdkit 1.32):
 * --log=stderr|syslog|null, else syslog once it has forked into the
 * background and stderr before.  The plugin makes the same choice and
 * writes what nbdkit_error cannot say itself: a warning, a notice, and
 * under systemd the "<N>" that gives a line its priority in the journal.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cmdline.h"
#include "log.h"
#include "log_nbdkit.h"

static enum cmdline_log option; /* nbdkit's --log */
static pid_t first_pid;         /* nbdkit's pid before any fork */

/* nbdkit's syslog lines are LOG_DAEMON, "PLUGIN: MESSAGE". */
static void
vsyslog_line (int priority, const char *fmt, va_list args)
{
  int saved = errno;
  char *msg = NULL;

  if (vasprintf (&msg, fmt, args) == -1) {
    errno = saved;
    return;
  }
  syslog (LOG_DAEMON | priority, "stripe: %s", msg);
  free (msg);
  errno = saved;
}

static void
nbdkit_vline (int priority, const char *fmt, va_list args)
{
  enum cmdline_log sink = option;

  /* Only nbdkit's fork into the background changes the pid under the
   * plugin's code: the on_change program is spawned, never forked.
   */
  if (sink == CMDLINE_LOG_DEFAULT)
    sink = getpid () != first_pid ? CMDLINE_LOG_SYSLOG : CMDLINE_LOG_STDERR;
  switch (sink) {
  case CMDLINE_LOG_NULL: return;
  case CMDLINE_LOG_SYSLOG:
    if (priority <= LOG_ERR)
      nbdkit_verror (fmt, args);
    else
      vsyslog_line (priority, fmt, args);
    return;
  default:
    /* Errors read as nbdkit's own ("nbdkit: stripe[1]: error: ...", in
     * colour on a terminal) except in the journal, where only our own
     * line can start with its priority.
     */
    if (priority <= LOG_ERR && !log_stderr_is_journal ())
      nbdkit_verror (fmt, args);
    else
      log_vstderr (priority, "nbdkit: stripe", fmt, args);
  }
}

void
log_nbdkit_init (void)
{
  size_t len;
  char *args = cmdline_read_self (&len);

  if (args) {
    option = cmdline_log (args, len, getenv ("POSIXLY_CORRECT") != NULL);
    free (args);
  }
  first_pid = getpid ();
  stripe_log_vline = nbdkit_vline;
  stripe_log_vdebug = nbdkit_vdebug;
}
