/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the command users and systemd run.  Dispatches to the
 * sub-commands (cli.c describes them; each lives in its own file), and
 * the helpers they share.
 */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "nbdstripe.h"

void
print_config_warnings (const struct stripe_config *cfg)
{
  for (unsigned i = 0; i < cfg->nr_warnings; ++i)
    fprintf (stderr, "%snbdstripe: WARNING: %s\n",
             log_journal_prefix (LOG_WARNING), cfg->warnings[i]);
}

const char *
human_size (uint64_t bytes, char *buf, size_t len)
{
  static const char units[] = "KMGTPE";
  double v = bytes;
  int u = -1;

  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  if (u < 0)
    snprintf (buf, len, "%llu bytes", (unsigned long long) bytes);
  else
    snprintf (buf, len, "%.4g%ciB", v, units[u]);
  return buf;
}

/* Exact, in the largest unit that divides it, as the config takes it
 * back (nbdstripe(8), SIZES): "128KiB", "1536KiB", "4097".
 */
const char *
exact_size (uint64_t bytes, char *buf, size_t len)
{
  static const char units[] = "KMGTPE";
  int u = -1;

  while (bytes && bytes % 1024 == 0 && u < 5) {
    bytes /= 1024;
    u++;
  }
  if (u < 0)
    snprintf (buf, len, "%llu", (unsigned long long) bytes);
  else
    snprintf (buf, len, "%llu%ciB", (unsigned long long) bytes, units[u]);
  return buf;
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  static char name[] = "nbdstripe";
  const struct command *cmd;
  int c;

  /* Every error the command prints reads "nbdstripe: MESSAGE", the
   * engine's (assembly, members) as the command's own.
   */
  stripe_log_vline = log_command_vline;
  /* A member in use is named by the volume its server serves. */
  member_set_config_namer (config_volume_name);
  /* The crash tests of the metadata updates (meta.h), as the plugin's
   * -D stripe.meta_log and stripe.meta_crash.
   */
  if (getenv ("NBDSTRIPE_DEBUG_META_LOG"))
    meta_debug_log = atoi (getenv ("NBDSTRIPE_DEBUG_META_LOG"));
  if (getenv ("NBDSTRIPE_DEBUG_META_CRASH"))
    meta_debug_crash = atoi (getenv ("NBDSTRIPE_DEBUG_META_CRASH"));

  /* '+': the options before COMMAND are nbdstripe's own; the command's
   * come after its name, in any order.
   */
  while ((c = getopt_long (argc, argv, "+hV", opts, NULL)) != -1) {
    switch (c) {
    case 'h': usage (stdout); return 0;
    case 'V': printf ("nbdstripe %s\n", PACKAGE_VERSION); return 0;
    default: usage (stderr); return 2;
    }
  }
  /* No command at all: what the commands are, not the whole --help, and
   * 3 as status's "unknown" -- nothing was asked, nothing was done.
   */
  if (optind >= argc) {
    short_usage (stderr);
    return 3;
  }
  cmd = command_named (argv[optind]);
  if (cmd == NULL) {
    fprintf (stderr, "nbdstripe: unknown command '%s'\n", argv[optind]);
    usage (stderr);
    return 2;
  }
  /* getopt's messages then say "nbdstripe: ...", as every error does;
   * the usage line after them names the command.
   */
  argv[optind] = name;
  argc -= optind;
  argv += optind;
  optind = 0; /* glibc: start again, with this argv */
  return cmd->run (cmd, argc, argv);
}
