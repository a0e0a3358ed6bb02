/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the helpers of util.h that are not inline.  See include/util.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int
mkdir_parents (const char *path)
{
  char *d = strdup (path), *p;
  int r = 0;

  if (d == NULL)
    return -1;
  for (p = d + 1; (p = strchr (p, '/')) != NULL; ++p) {
    *p = '\0';
    if (mkdir (d, 0755) == -1 && errno != EEXIST) {
      r = -1;
      break;
    }
    *p = '/';
  }
  free (d);
  return r;
}

int
write_file_atomic (const char *path, const char *data, size_t len)
{
  const char *base = strrchr (path, '/');
  char tmp[4096];
  int fd, r, e;

  base = base ? base + 1 : path;
  if (snprintf (tmp, sizeof tmp, "%.*s.%s.XXXXXX", (int) (base - path), path,
                base)
      >= (int) sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = mkostemp (tmp, O_CLOEXEC | O_NOFOLLOW);
  if (fd == -1 && errno == ENOENT && mkdir_parents (path) == 0) {
    memcpy (&tmp[strlen (tmp) - 6], "XXXXXX", 6); /* mkostemp changed it */
    fd = mkostemp (tmp, O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd == -1)
    return -1;
  if (fchmod (fd, 0644) == -1)
    goto err;
  while (len > 0) {
    ssize_t n = write (fd, data, len);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      goto err;
    }
    data += n;
    len -= n;
  }
  if (fsync (fd) == -1)
    goto err;
  r = close (fd);
  fd = -1;
  if (r == -1 || rename (tmp, path) == -1)
    goto err;
  return 0;

err:
  e = errno;
  if (fd >= 0)
    close (fd);
  unlink (tmp);
  errno = e;
  return -1;
}
