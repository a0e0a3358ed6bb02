/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the helpers of util.h that are not inline.  See include/util.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

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
