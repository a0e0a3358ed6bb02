/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: logging for the engine.
 *
 * Every line has a priority, syslog(3)'s: LOG_ERR for what failed (an I/O
 * error, a refusal, a member that has failed), LOG_WARNING for what is
 * worse than it should be but still serving (a member slow, full or
 * failing, a member dropped out of the volume), LOG_NOTICE for what is
 * well again (a member back to ok, a replace done), LOG_INFO for the
 * server starting and stopping and a replace starting; stripe_debug for the rest (nbdkit -v).
 *
 * The engine does not know where lines go: the plugin points
 * stripe_log_vline at nbdkit's sink (stripe.c: as nbdkit would, to
 * stderr, to syslog(3) when it runs in the background or with
 * --log=syslog, nowhere with --log=null) and stripe_log_vdebug at
 * nbdkit_vdebug; other users (daemon, tests, bench) get stderr.  Both
 * preserve errno, so "%m" works in messages.
 *
 * Priorities under systemd.  When stderr is the journal ($JOURNAL_STREAM
 * names the device and inode of fd 2, as systemd sets it for a unit with
 * StandardError=journal), a line on stderr starts with "<N>", N the
 * priority (sd-daemon(3)); journald strips it and stores the line at that
 * priority (SyslogLevelPrefix=yes, the default).  nbdkit's own lines
 * ("nbdkit: stripe[1]: error: ...") cannot carry one, since the prefix
 * must open the line, so the plugin writes its own lines itself there:
 * "<4>nbdkit: stripe: warning: health: member 1 (/dev/sdb): ok -> ...".
 * Outside the journal a line reads as before ("PREFIX: LEVEL: MESSAGE";
 * the plugin's errors through nbdkit_verror).  Why stderr rather than
 * nbdkit --log=syslog under systemd: a stream's lines are attributed to
 * the unit when the stream is opened, a syslog datagram when journald
 * reads it -- and an nbdkit that fails at start has exited by then, so
 * its reason would be missing from `systemctl status`; one stream also
 * keeps nbdkit's lines and ours in order.
 */
#ifndef NBDSTRIPE_LOG_H
#define NBDSTRIPE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

/* Where a line of priority LOG_ERR..LOG_INFO goes. */
extern void (*stripe_log_vline) (int priority, const char *fmt, va_list args);
extern void (*stripe_log_vdebug) (const char *fmt, va_list args);

extern void stripe_log (int priority, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void stripe_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_warning (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_notice (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_info (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_debug (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* "error", "warning", "notice", "info" (LOG_ERR or worse: "error"). */
extern const char *log_priority_name (int priority);

/* Whether stderr is the journal: $JOURNAL_STREAM ("DEVICE:INODE", in
 * decimal) names fd 2.  Inherited by a child whose stderr went elsewhere,
 * the variable no longer matches and this is false.
 */
extern bool log_stderr_is_journal (void);

/* "<N>" when stderr is the journal, else "": for a line of another form
 * than log_vstderr's (nbdstripe serve's own).
 */
extern const char *log_journal_prefix (int priority);

/* One line on stderr, written at once (never interleaved with nbdkit's
 * own): "<N>" when stderr is the journal, then "PREFIX: LEVEL: MESSAGE".
 */
extern void log_vstderr (int priority, const char *prefix, const char *fmt,
                         va_list args);

/* The nbdstripe command's sink for the engine's lines (daemon/main.c
 * points stripe_log_vline at it): log_vstderr's with the prefix
 * "nbdstripe", but an error has no level's word -- "nbdstripe: MESSAGE",
 * the one shape of every error the command prints, its own included;
 * the rest keep theirs ("nbdstripe: warning: MESSAGE").
 */
extern void log_command_vline (int priority, const char *fmt, va_list args);

/* s for a message: in double quotes, '"' and '\\' escaped, every
 * control byte (below 0x20, and 0x7f) as \xNN, so that a message stays
 * one line whatever a path or a name holds; cut short with "..." to fit
 * in len bytes.  Returns buf.
 */
extern const char *log_quote (const char *s, char *buf, size_t len);

/* Whether s holds a control byte (below 0x20, or 0x7f): a newline or an
 * escape sequence that would reach a log line or a terminal raw.
 */
extern bool log_has_control (const char *s);

#endif /* NBDSTRIPE_LOG_H */
