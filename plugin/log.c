/* nbdstripe: engine logging hooks.  See include/log.h. */

#include <errno.h>
#include <stdio.h>

#include "log.h"

static void
stderr_verror (const char *fmt, va_list args)
{
  fputs ("nbdstripe: error: ", stderr);
  vfprintf (stderr, fmt, args);
  fputc ('\n', stderr);
}

static void
quiet_vdebug (const char *fmt, va_list args)
{
  (void) fmt;
  (void) args;
}

void (*stripe_log_verror) (const char *fmt, va_list args) = stderr_verror;
void (*stripe_log_vdebug) (const char *fmt, va_list args) = quiet_vdebug;

void
stripe_error (const char *fmt, ...)
{
  int saved = errno;
  va_list args;

  va_start (args, fmt);
  stripe_log_verror (fmt, args);
  va_end (args);
  errno = saved;
}

void
stripe_debug (const char *fmt, ...)
{
  int saved = errno;
  va_list args;

  va_start (args, fmt);
  stripe_log_vdebug (fmt, args);
  va_end (args);
  errno = saved;
}
