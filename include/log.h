/* nbdstripe: logging for the engine.
 *
 * The engine does not know nbdkit: the plugin points these hooks at
 * nbdkit_verror / nbdkit_vdebug; other users (daemon, tests, bench) get
 * stderr.  Both preserve errno, so "%m" works in messages.
 */
#ifndef NBDSTRIPE_LOG_H
#define NBDSTRIPE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

extern void (*stripe_log_verror) (const char *fmt, va_list args);
extern void (*stripe_log_vdebug) (const char *fmt, va_list args);

extern void stripe_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_debug (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

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
