/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: nbdkit's command line.  See include/cmdline.h. */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

/* nbdkit 1.32's options (server/options.h; `nbdkit --short-options` and
 * `--long-options` print them): the short options that take an argument,
 * and every long option, aliases included, with whether it takes one and
 * the short option it stands for (0: none).
 */
static const char short_with_arg[] = "DegiPptuU";

static const struct {
  const char *name;
  bool has_arg;
  char val;
} long_options[] = {
  { "debug", true, 'D' },
  { "dump-config", false, 0 },
  { "dump-plugin", false, 0 },
  { "exit-with-parent", false, 0 },
  { "export", true, 'e' },
  { "export-name", true, 'e' },
  { "exportname", true, 'e' },
  { "filter", true, 0 },
  { "foreground", false, 'f' },
  { "no-fork", false, 'f' },
  { "group", true, 'g' },
  { "help", false, 0 },
  { "ip-addr", true, 'i' },
  { "ipaddr", true, 'i' },
  { "ipv4-only", false, '4' },
  { "ipv6-only", false, '6' },
  { "log", true, 0 },
  { "long-options", false, 0 },
  { "mask-handshake", true, 0 },
  { "new-style", false, 'n' },
  { "newstyle", false, 'n' },
  { "no-sr", false, 0 },
  { "old-style", false, 'o' },
  { "oldstyle", false, 'o' },
  { "pid-file", true, 'P' },
  { "pidfile", true, 'P' },
  { "port", true, 'p' },
  { "read-only", false, 'r' },
  { "readonly", false, 'r' },
  { "run", true, 0 },
  { "selinux-label", true, 0 },
  { "short-options", false, 0 },
  { "single", false, 's' },
  { "stdin", false, 's' },
  { "swap", false, 0 },
  { "threads", true, 't' },
  { "tls", true, 0 },
  { "tls-certificates", true, 0 },
  { "tls-psk", true, 0 },
  { "tls-verify-peer", false, 0 },
  { "unix", true, 'U' },
  { "user", true, 'u' },
  { "verbose", false, 'v' },
  { "version", false, 'V' },
  { "vsock", false, 0 },
};
#define NR_LONG_OPTIONS (sizeof long_options / sizeof long_options[0])

/* The long option "--NAME" or "--NAME=VALUE" (name: after the dashes)
 * stands for, as getopt_long finds it: an exact match, else the only
 * option it is a prefix of, or several that are the same option under
 * other names (--pid: --pid-file, --pidfile).  -1 when unknown or
 * ambiguous: nbdkit then refuses to start, so it does not matter here.
 */
static int
find_long (const char *name)
{
  size_t len = strcspn (name, "=");
  int found = -1;

  for (size_t i = 0; i < NR_LONG_OPTIONS; ++i)
    if (strlen (long_options[i].name) == len
        && strncmp (long_options[i].name, name, len) == 0)
      return i;
  for (size_t i = 0; i < NR_LONG_OPTIONS; ++i) {
    if (strncmp (long_options[i].name, name, len) != 0)
      continue;
    if (found == -1)
      found = i;
    else if (long_options[found].val == 0
             || long_options[found].val != long_options[i].val
             || long_options[found].has_arg != long_options[i].has_arg)
      return -1;
  }
  return found;
}

/* Calls visit for every option nbdkit's getopt_long would see in args,
 * in order: val, the short option it is or stands for (0 for a long
 * option without one), name, the long option's full name (NULL for a
 * short one), and its argument (NULL when it takes none; "" when the
 * command line ends before it).
 */
static void
walk (const char *args, size_t len, bool posixly_correct,
      void (*visit) (char val, const char *name, const char *arg, void *),
      void *opaque)
{
  const char *end = args + len;

  /* argv[0] is nbdkit itself. */
  for (const char *p = args + strnlen (args, len) + 1; p < end;) {
    const char *arg = p;
    const char *next;

    p += strnlen (p, end - p) + 1;
    next = p < end ? p : "";
    if (strcmp (arg, "--") == 0)
      break;
    if (arg[0] != '-' || arg[1] == '\0') {
      /* The plugin's name, key=value, "-": getopt moves them to the end
       * and reads on, unless $POSIXLY_CORRECT.
       */
      if (posixly_correct)
        break;
      continue;
    }
    if (arg[1] == '-') {
      int i = find_long (arg + 2);
      const char *eq = strchr (arg, '=');
      const char *value = NULL;

      if (i < 0)
        continue;
      if (long_options[i].has_arg) {
        if (eq)
          value = eq + 1;
        else {
          value = next;
          if (p < end)
            p += strnlen (p, end - p) + 1;
        }
      }
      visit (long_options[i].val, long_options[i].name, value, opaque);
    }
    else {
      for (const char *c = arg + 1; *c; ++c) {
        if (strchr (short_with_arg, *c)) {
          /* The rest of the cluster is the argument, else the next. */
          const char *value = c[1] ? c + 1 : next;
          if (c[1] == '\0' && p < end)
            p += strnlen (p, end - p) + 1;
          visit (*c, NULL, value, opaque);
          break;
        }
        visit (*c, NULL, NULL, opaque);
      }
    }
  }
}

static void
visit_readonly (char val, const char *name, const char *arg, void *opaque)
{
  (void) name;
  (void) arg;
  if (val == 'r')
    *(bool *) opaque = true;
}

bool
cmdline_readonly (const char *args, size_t len, bool posixly_correct)
{
  bool ro = false;

  walk (args, len, posixly_correct, visit_readonly, &ro);
  return ro;
}

static void
visit_log (char val, const char *name, const char *arg, void *opaque)
{
  enum cmdline_log *log = opaque;

  (void) val;
  if (name == NULL || strcmp (name, "log") != 0)
    return;
  if (strcmp (arg, "stderr") == 0)
    *log = CMDLINE_LOG_STDERR;
  else if (strcmp (arg, "syslog") == 0)
    *log = CMDLINE_LOG_SYSLOG;
  else if (strcmp (arg, "null") == 0)
    *log = CMDLINE_LOG_NULL;
}

enum cmdline_log
cmdline_log (const char *args, size_t len, bool posixly_correct)
{
  enum cmdline_log log = CMDLINE_LOG_DEFAULT;

  walk (args, len, posixly_correct, visit_log, &log);
  return log;
}

char *
cmdline_read_self (size_t *lenp)
{
  char *buf = NULL, *ret = NULL;
  size_t len = 0, size = 0;
  FILE *fp = fopen ("/proc/self/cmdline", "re");

  if (fp == NULL)
    return NULL;
  for (;;) {
    char *p;

    if (len + 1 >= size) {
      size = size ? size * 2 : 4096;
      p = realloc (buf, size);
      if (p == NULL)
        goto out;
      buf = p;
    }
    size_t n = fread (buf + len, 1, size - len - 1, fp);
    if (n == 0)
      break;
    len += n;
  }
  if (ferror (fp))
    goto out;
  buf[len] = '\0';
  *lenp = len;
  ret = buf;
  buf = NULL;
out:
  fclose (fp);
  free (buf);
  return ret;
}
