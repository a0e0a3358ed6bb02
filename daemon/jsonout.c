/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: --json's result object and its error (jsonout.h). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json.h"
#include "jsonout.h"
#include "nbdstripe.h"

static char said[1024]; /* the first error said */
static char partial[1024];
static size_t partial_len;

/* One whole line written to stderr: kept when it is the first error.  A
 * journal prefix ("<3>") is not part of it.
 */
static void
heard (const char *line, size_t len)
{
  static const char prefix[] = "nbdstripe: ";

  if (said[0])
    return;
  if (len >= 3 && line[0] == '<' && line[2] == '>') {
    line += 3;
    len -= 3;
  }
  if (len < sizeof prefix - 1 || memcmp (line, prefix, sizeof prefix - 1))
    return;
  line += sizeof prefix - 1;
  len -= sizeof prefix - 1;
  if (len >= 7 && memcmp (line, "warning", 7) == 0)
    return;
  snprintf (said, sizeof said, "%.*s", (int) len, line);
}

static ssize_t
stderr_write (void *cookie, const char *buf, size_t size)
{
  size_t done = 0;

  (void) cookie;
  for (size_t i = 0; i < size; ++i) {
    if (buf[i] == '\n' || buf[i] == '\r') {
      if (partial_len)
        heard (partial, partial_len);
      partial_len = 0;
    }
    else if (partial_len < sizeof partial)
      partial[partial_len++] = buf[i];
  }
  while (done < size) {
    ssize_t w = write (STDERR_FILENO, buf + done, size - done);
    if (w == -1 && errno == EINTR)
      continue;
    if (w <= 0)
      return done ? (ssize_t) done : -1;
    done += (size_t) w;
  }
  return (ssize_t) size;
}

void
jsonout_watch_stderr (void)
{
  static bool watched;
  cookie_io_functions_t io = { .write = stderr_write };
  FILE *fp;

  if (watched)
    return;
  fflush (stderr);
  fp = fopencookie (NULL, "w", io);
  if (fp == NULL)
    return;
  setvbuf (fp, NULL, _IONBF, 0);
  stderr = fp;
  watched = true;
}

const char *
jsonout_said (void)
{
  return said[0] ? said : NULL;
}

int
jsonout_line (struct json_object *o)
{
  const char *t = json_object_to_json_string_ext (
    o, JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
  int r = t && printf ("%s\n", t) >= 0 && fflush (stdout) == 0 ? 0 : -1;

  json_object_put (o);
  return r;
}

int
jsonout_result (struct json_object *o, bool ok, const char *err, bool one_line)
{
  if (err == NULL || err[0] == '\0')
    err = jsonout_said ();
  if (err == NULL && !ok)
    err = "failed";
  json_put (o, "ok", json_object_new_boolean (ok));
  json_put (o, "error", !ok && err ? json_text (err) : NULL);
  if (one_line)
    return jsonout_line (o);
  return print_json (o);
}
