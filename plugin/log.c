/* nbdstripe: engine logging hooks.  See include/log.h. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

const char *
log_quote (const char *s, char *buf, size_t len)
{
  size_t n = 0;

  if (len < 8)
    return "\"...\"";
  buf[n++] = '"';
  for (; *s; ++s) {
    unsigned char c = *s;
    if (n + 8 >= len) {
      memcpy (&buf[n], "...", 3);
      n += 3;
      break;
    }
    if (c == '"' || c == '\\')
      n += snprintf (&buf[n], len - n, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      n += snprintf (&buf[n], len - n, "\\x%02x", c);
    else
      buf[n++] = c;
  }
  buf[n++] = '"';
  buf[n] = '\0';
  return buf;
}

bool
log_has_control (const char *s)
{
  for (; *s; ++s)
    if ((unsigned char) *s < 0x20 || *s == 0x7f)
      return true;
  return false;
}
