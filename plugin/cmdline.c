/* nbdstripe: nbdkit's command line.  See include/cmdline.h. */

#include <stdbool.h>
#include <stddef.h>
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

bool
cmdline_readonly (const char *args, size_t len, bool posixly_correct)
{
  const char *end = args + len;
  bool ro = false;

  /* argv[0] is nbdkit itself. */
  for (const char *p = args + strnlen (args, len) + 1; p < end;) {
    const char *arg = p;
    bool skip_next = false;

    p += strnlen (p, end - p) + 1;
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

      if (i >= 0) {
        if (long_options[i].val == 'r')
          ro = true;
        skip_next = long_options[i].has_arg && strchr (arg, '=') == NULL;
      }
    }
    else {
      for (const char *c = arg + 1; *c; ++c) {
        if (*c == 'r')
          ro = true;
        if (strchr (short_with_arg, *c)) {
          skip_next = c[1] == '\0'; /* else the rest is the argument */
          break;
        }
      }
    }
    if (skip_next && p < end)
      p += strnlen (p, end - p) + 1;
  }
  return ro;
}
