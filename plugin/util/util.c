/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the helpers of util.h that are not inline.  See include/util.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

void
why_line (char *why, size_t len, const char *fmt, ...)
{
  size_t n = strlen (why);
  va_list ap;

  if (n > 0 && n + 1 < len)
    why[n++] = '\n', why[n] = '\0';
  if (n + 1 >= len)
    return;
  va_start (ap, fmt);
  vsnprintf (why + n, len - n, fmt, ap);
  va_end (ap);
}

int
fail_why (char *why, size_t len, int err, const char *fmt, ...)
{
  va_list ap;

  if (why && len) {
    va_start (ap, fmt);
    vsnprintf (why, len, fmt, ap);
    va_end (ap);
  }
  errno = err;
  return -1;
}
