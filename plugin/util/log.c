/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: engine logging hooks.  See include/log.h. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"

static void
stderr_vline (int priority, const char *fmt, va_list args)
{
  log_vstderr (priority, "nbdstripe", fmt, args);
}

static void
quiet_vdebug (const char *fmt, va_list args)
{
  (void) fmt;
  (void) args;
}

void (*stripe_log_vline) (int priority, const char *fmt,
                          va_list args) = stderr_vline;
void (*stripe_log_vdebug) (const char *fmt, va_list args) = quiet_vdebug;

static void
vlog (int priority, const char *fmt, va_list args)
{
  int saved = errno;

  stripe_log_vline (priority, fmt, args);
  errno = saved;
}

void
stripe_log (int priority, const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vlog (priority, fmt, args);
  va_end (args);
}

void
stripe_error (const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vlog (LOG_ERR, fmt, args);
  va_end (args);
}

void
stripe_warning (const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vlog (LOG_WARNING, fmt, args);
  va_end (args);
}

void
stripe_notice (const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vlog (LOG_NOTICE, fmt, args);
  va_end (args);
}

void
stripe_info (const char *fmt, ...)
{
  va_list args;

  va_start (args, fmt);
  vlog (LOG_INFO, fmt, args);
  va_end (args);
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
log_priority_name (int priority)
{
  switch (priority) {
  case LOG_WARNING: return "warning";
  case LOG_NOTICE: return "notice";
  case LOG_INFO: return "info";
  case LOG_DEBUG: return "debug";
  default: return "error";
  }
}

bool
log_stderr_is_journal (void)
{
  const char *s = getenv ("JOURNAL_STREAM");
  uintmax_t dev, ino;
  struct stat st;
  int end = 0;

  if (s == NULL
      || sscanf (s, "%" SCNuMAX ":%" SCNuMAX "%n", &dev, &ino, &end) != 2
      || s[end] != '\0')
    return false;
  if (fstat (STDERR_FILENO, &st) == -1)
    return false;
  return (uintmax_t) st.st_dev == dev && (uintmax_t) st.st_ino == ino;
}

const char *
log_journal_prefix (int priority)
{
  static const char *const head[] = { "<0>", "<1>", "<2>", "<3>",
                                      "<4>", "<5>", "<6>", "<7>" };

  if (priority < LOG_EMERG || priority > LOG_DEBUG)
    priority = LOG_ERR;
  return log_stderr_is_journal () ? head[priority] : "";
}

/* One line on stderr: "PREFIX: LEVEL: MESSAGE", or with errors_bare
 * "PREFIX: MESSAGE" for LOG_ERR and worse.
 */
static void
vstderr (int priority, const char *prefix, bool errors_bare, const char *fmt,
         va_list args)
{
  int saved = errno;
  char *msg = NULL;
  char head[16] = "", level[16] = "";
  int n;

  if (priority < LOG_EMERG || priority > LOG_DEBUG)
    priority = LOG_ERR;
  if (log_stderr_is_journal ())
    snprintf (head, sizeof head, "<%d>", priority);
  if (!errors_bare || priority > LOG_ERR)
    snprintf (level, sizeof level, "%s: ", log_priority_name (priority));
  errno = saved; /* for %m */
  n = vasprintf (&msg, fmt, args);
  /* One fwrite of the whole line under the stream's lock: nbdkit's own
   * lines (flockfile too) never land inside ours.
   */
  flockfile (stderr);
  if (n >= 0) {
    char *line = NULL;
    int len = asprintf (&line, "%s%s: %s%s\n", head, prefix, level, msg);
    if (len >= 0)
      fwrite (line, 1, len, stderr);
    else
      fprintf (stderr, "%s%s: %s%s\n", head, prefix, level, msg);
    free (line);
  }
  else
    fprintf (stderr, "%s%s: %s(out of memory formatting a message: %s)\n",
             head, prefix, level, fmt);
  funlockfile (stderr);
  free (msg);
  errno = saved;
}

void
log_vstderr (int priority, const char *prefix, const char *fmt, va_list args)
{
  vstderr (priority, prefix, false, fmt, args);
}

void
log_command_vline (int priority, const char *fmt, va_list args)
{
  vstderr (priority, "nbdstripe", true, fmt, args);
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
