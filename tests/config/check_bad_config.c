/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks that config_load refuses each bad config named on the command
 * line with the message the file itself promises in its first lines:
 *
 *   # expect: SUBSTRING     the message must contain it (required)
 *   # line: N               the message must start "FILE:N: " (without
 *                           it: "FILE: ", a problem with no line)
 *
 * and that the message names the file first.  Prints each message, as a
 * user would see it.  Exit status 0 only if every file passed.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct promise {
  char expect[1024];
  int line; /* 0: no line */
};

/* Reads the header comments: the leading lines that start with '#'. */
static int
read_promise (const char *path, struct promise *p)
{
  char buf[1024];
  FILE *fp = fopen (path, "r");

  memset (p, 0, sizeof *p);
  if (fp == NULL) {
    perror (path);
    return -1;
  }
  while (fgets (buf, sizeof buf, fp) && buf[0] == '#') {
    buf[strcspn (buf, "\n")] = '\0';
    if (strncmp (buf, "# expect: ", 10) == 0)
      snprintf (p->expect, sizeof p->expect, "%s", buf + 10);
    else if (strncmp (buf, "# line: ", 8) == 0)
      p->line = atoi (buf + 8);
  }
  fclose (fp);
  if (p->expect[0] == '\0') {
    fprintf (stderr, "%s: no \"# expect: ...\" line at the top\n", path);
    return -1;
  }
  return 0;
}

static bool
check (const char *path)
{
  struct stripe_config cfg;
  struct promise p;
  char err[1024], prefix[512];
  int r;

  if (read_promise (path, &p) == -1)
    return false;
  r = config_load (path, &cfg, err, sizeof err);
  config_free (&cfg);
  if (r != -1) {
    fprintf (stderr, "FAIL %s: config_load accepted it (returned %d)\n", path,
             r);
    return false;
  }
  if (p.line > 0)
    snprintf (prefix, sizeof prefix, "%s:%d: ", path, p.line);
  else
    snprintf (prefix, sizeof prefix, "%s: ", path);
  if (strncmp (err, prefix, strlen (prefix)) != 0) {
    fprintf (stderr,
             "FAIL %s: the message does not start with \"%s\":\n"
             "  %s\n",
             path, prefix, err);
    return false;
  }
  if (strstr (err, p.expect) == NULL) {
    fprintf (stderr,
             "FAIL %s: the message does not contain \"%s\":\n"
             "  %s\n",
             path, p.expect, err);
    return false;
  }
  if (strchr (err, '\n') != NULL) {
    fprintf (stderr, "FAIL %s: the message is not one line:\n  %s\n", path,
             err);
    return false;
  }
  printf ("ok: %s\n", err);
  return true;
}

int
main (int argc, char **argv)
{
  bool ok = true;

  if (argc < 2) {
    fprintf (stderr, "usage: %s BAD.conf...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i)
    ok &= check (argv[i]);
  return ok ? 0 : 1;
}
