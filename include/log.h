/* nbdstripe: logging for the engine.
 *
 * The engine does not know nbdkit: the plugin points these hooks at
 * nbdkit_verror / nbdkit_vdebug; other users (daemon, tests, bench) get
 * stderr.  Both preserve errno, so "%m" works in messages.
 */
#ifndef NBDSTRIPE_LOG_H
#define NBDSTRIPE_LOG_H

#include <stdarg.h>

extern void (*stripe_log_verror) (const char *fmt, va_list args);
extern void (*stripe_log_vdebug) (const char *fmt, va_list args);

extern void stripe_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void stripe_debug (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* NBDSTRIPE_LOG_H */
