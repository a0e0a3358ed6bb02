/* nbdstripe: the command users and systemd run.  Dispatches to the
 * sub-commands; each lives in its own file.
 */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nbdstripe.h"

static void
usage (FILE *fp)
{
  fprintf (
    fp,
    "Usage: nbdstripe COMMAND [OPTIONS] ...\n"
    "\n"
    "A RAID-0 volume over N files or block devices, served over NBD.\n"
    "\n"
    "Commands:\n"
    "  create CONFIG [--force] [--discard]   write the member headers\n"
    "  serve CONFIG [--foreground]           check, then serve with nbdkit\n"
    "  check CONFIG                          the assembly checks alone\n"
    "  inspect [--json] MEMBER...            print members' headers\n"
    "  status CONFIG [--json]                a served volume's health\n"
    "  accept CONFIG INDEX                   take back a stale member\n"
    "  import [--out CONFIG] MEMBER...       a config for an md raid0 array\n"
    "  replace CONFIG INDEX NEW [--wait]     move a member to another device\n"
    "\n"
    "  nbdstripe COMMAND --help   help on one command\n"
    "  nbdstripe --version\n"
    "\n"
    "See nbdstripe(8) and nbdkit-stripe-plugin(1).\n");
}

int
load_config (const char *path, struct stripe_config *cfg)
{
  char err[1024];

  if (config_load (path, cfg, err, sizeof err) == -1) {
    fprintf (stderr, "%snbdstripe: %s\n", log_journal_prefix (LOG_ERR), err);
    return -1;
  }
  return 0;
}

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

int
main (int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*fn) (int, char **);
  } cmds[] = {
    { "create", cmd_create }, { "serve", cmd_serve },
    { "check", cmd_check },   { "inspect", cmd_inspect },
    { "status", cmd_status }, { "accept", cmd_accept },
    { "import", cmd_import }, { "replace", cmd_replace },
  };

  if (argc < 2) {
    usage (stderr);
    return 2;
  }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0) {
    usage (stdout);
    return 0;
  }
  if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0) {
    printf ("nbdstripe %s\n", PACKAGE_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i)
    if (strcmp (argv[1], cmds[i].name) == 0)
      return cmds[i].fn (argc - 1, argv + 1);

  fprintf (stderr, "nbdstripe: unknown command '%s'\n", argv[1]);
  usage (stderr);
  return 2;
}
