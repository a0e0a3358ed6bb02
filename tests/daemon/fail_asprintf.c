/* SPDX-License-Identifier: BSD-3-Clause */
/* LD_PRELOAD shim for serve_arg_oom.sh: asprintf fails with ENOMEM when
 * its format is exactly $FAIL_ASPRINTF_FORMAT, as it would when out of
 * memory; any other format is formatted as usual.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
asprintf (char **strp, const char *fmt, ...)
{
  const char *fail = getenv ("FAIL_ASPRINTF_FORMAT");
  va_list args;
  int r;

  if (fail && strcmp (fmt, fail) == 0) {
    errno = ENOMEM;
    return -1;
  }
  va_start (args, fmt);
  r = vasprintf (strp, fmt, args);
  va_end (args);
  return r;
}
