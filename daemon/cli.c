/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the command line's one grammar.  Every sub-command is
 * described here once -- its synopsis, what it does, its options -- and
 * both `nbdstripe --help` and `nbdstripe COMMAND --help` print from this
 * table, so they cannot disagree.  Each command parses its argv with
 * getopt_long (options before or after the operands, "--" ends them),
 * -h/--help and -V/--version included, and hands anything it does not
 * know to cli_option.
 *
 * A VOLUME operand is a config file or a volume's name: see
 * volume_config_path.
 */

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "log.h"
#include "nbdstripe.h"

#define DEFAULT_CONF_DIR "/etc/nbdstripe"

const struct command commands[] = {
  {
    .name = "create",
    .run = cmd_create,
    .synopsis = "[--force] [--discard] [--json] VOLUME",
    .summary = "write the member headers",
    .help = "Write a header at the start of every member the config lists\n"
            "(metadata = \"md\": an md v1.2 superblock, as mdadm --create).\n"
            "  -f, --force       overwrite members that hold a filesystem,\n"
            "                    partition table, RAID/LVM signature or an\n"
            "                    nbdstripe header\n"
            "      --discard     trim each member's data area first (as "
            "mkfs does)\n"
            "  -j, --json        say what was created, as JSON\n",
    .usage_status = 2,
  },
  {
    .name = "serve",
    .run = cmd_serve,
    .synopsis = "[--foreground] [--read-only | --degraded] VOLUME",
    .summary = "check, then serve with nbdkit",
    .help = "Check the volume (as 'nbdstripe check'), then serve it with "
            "nbdkit and\n"
            "the stripe plugin as the config's serve group says.  Without\n"
            "--foreground nbdkit goes to the background once it is "
            "listening.\n"
            "A member that cannot be opened for writing is refused before "
            "anything\n"
            "is served, unless --read-only.\n"
            "A member missing or unreadable (a dead drive) is refused, "
            "unless --degraded:\n"
            "the rest is served read-only, and every read touching the "
            "missing member's\n"
            "chunks fails with EIO (never zeros).\n"
            "NBDSTRIPE_PLUGIN overrides the plugin's path.\n"
            "  -f, --foreground  stay in the foreground (systemd)\n"
            "  -r, --read-only   serve read-only (nbdkit -r): no write "
            "reaches a member\n"
            "      --degraded    serve read-only without the members that "
            "cannot be opened\n"
            "                    or read; nothing is written to any member.  "
            "Only where the\n"
            "                    others' records place them (headers do; md "
            "and none do\n"
            "                    not: refused, saying why)\n",
    .usage_status = 2,
  },
  {
    .name = "check",
    .run = cmd_check,
    .synopsis = "[--json] VOLUME",
    .summary = "the assembly checks alone",
    .help = "Check that the volume can be served: every member's header "
            "agrees\n"
            "with the config.  Writes nothing.  Exit status 0 when it can "
            "be served.\n"
            "  -j, --json        the verdict, geometry and mkfs options, as "
            "JSON\n",
    .usage_status = 2,
  },
  {
    .name = "status",
    .run = cmd_status,
    .synopsis = "[--json] VOLUME",
    .summary = "a served volume's health",
    .help = "Print the health of the volume, live from its server (the "
            "control\n"
            "socket, NAME.ctl), else from the status file the server keeps\n"
            "(health.status_file): volume and member states, a replace's "
            "progress,\n"
            "I/O counters, latencies, last errors, and the stripe geometry "
            "for mkfs.\n"
            "  -j, --json        {\"state\": the verdict, \"reason\": why, "
            "...,\n"
            "                    \"status\": the status itself, or null}\n"
            "Exit status (and verdict): 0 ok, 1 degraded, 2 failed, 3 "
            "not-running,\n"
            "stale or unknown (status file missing, invalid or stale, "
            "server not\n"
            "running; also a usage error).\n",
    .usage_status = 3, /* 2 would read "failed" to a monitoring script */
  },
  {
    .name = "list",
    .run = cmd_list,
    .synopsis = "[--json]",
    .summary = "every volume configured or served here",
    .help = "List every volume configured in the config directory (*.conf) "
            "and\n"
            "every volume served on this host (status files and pidfiles "
            "in\n"
            "/run/nbdstripe, NBDSTRIPE_RUNDIR): name, state (ok, degraded, "
            "failed,\n"
            "not-running, stale, unknown), server pid, socket or address, "
            "config.\n"
            "  -j, --json        the same, as a JSON array\n",
    .usage_status = 2,
  },
  {
    .name = "stop",
    .run = cmd_stop,
    .synopsis = "[--timeout SECONDS] [--strict] [--json] VOLUME",
    .summary = "stop a served volume",
    .help = "Stop the server of a volume: SIGTERM to its nbdkit (the "
            "process its\n"
            "pidfile, as serve writes it, or the status file names, and "
            "only if its\n"
            "command line serves that config), then wait until it has "
            "gone.  Exit\n"
            "status 0 when it stopped or was not running (said so, as "
            "systemctl stop),\n"
            "1 when it did not stop.\n"
            "VOLUME may also be the name of a volume served here without a "
            "config\n"
            "in the config directory.\n"
            "  -t, --timeout S   wait at most S seconds (1 to 3600, default "
            "30)\n"
            "      --strict      exit status 1 when it was not running\n"
            "  -j, --json        say what happened, as JSON\n",
    .usage_status = 2,
  },
  {
    .name = "accept",
    .run = cmd_accept,
    .synopsis = "[--json] VOLUME INDEX",
    .summary = "take back a stale member",
    .help = "Take back member INDEX, refused as stale (behind the volume's\n"
            "generation), when it is the member itself and nothing wrote to "
            "it\n"
            "since it dropped out.  Writes only that member's header.\n"
            "  -j, --json        say what was done, as JSON\n",
    .usage_status = 2,
  },
  {
    .name = "inspect",
    .run = cmd_inspect,
    .synopsis = "[--json] MEMBER...",
    .summary = "print members' headers",
    .help = "Print the nbdstripe header or the Linux md superblock (1.0, "
            "1.1, 1.2)\n"
            "of each member (file, device or NBD URI).\n"
            "Exit status 1 if any member has neither.\n"
            "  -j, --json        a JSON array, one object per member\n",
    .usage_status = 2,
  },
  {
    .name = "import",
    .run = cmd_import,
    .synopsis = "[--out CONFIG [--json]] [--force] [--name NAME]\n"
                "        [--layout original|alternate] MEMBER...",
    .summary = "a config for an md raid0 array",
    .help = "Write a config for an existing Linux md raid0 array (md "
            "metadata 1.0,\n"
            "1.1 or 1.2) from its members' superblocks; the members are "
            "only read.\n"
            "  -o, --out CONFIG  where to write it (default: standard "
            "output)\n"
            "  -j, --json        with --out: a JSON summary on standard "
            "output\n"
            "  -f, --force       overwrite CONFIG if it exists\n"
            "      --name NAME   the volume's name (default: the md array's "
            "name)\n"
            "      --layout L    md's multi-zone layout, for an array whose\n"
            "                    superblocks do not record it\n",
    .usage_status = 2,
  },
  {
    .name = "replace",
    .run = cmd_replace,
    .synopsis = "[--rate RATE] [--wait] [--force] [--skip-unreadable]\n"
                "        [--offline [--accept-stale]] [--dry-run] [--json]\n"
                "        VOLUME INDEX NEW\n"
                "        | --cancel [--json] VOLUME",
    .summary = "move a member to another device",
    .help = "Copy member INDEX of the volume to NEW (a file, block device "
            "or NBD\n"
            "URI at least as large) while clients go on, then switch the "
            "volume to\n"
            "NEW: its header, the config file, the server.  The request "
            "goes to the\n"
            "server through its control socket; 'nbdstripe status' shows "
            "the progress.\n"
            "      --rate RATE   copy at most RATE bytes a second, such as "
            "200M\n"
            "                    (default: as fast as it goes)\n"
            "  -w, --wait        follow the copy to its end (a progress bar "
            "on a\n"
            "                    terminal, a line every 5% otherwise); exit "
            "status 0\n"
            "                    when the member was replaced\n"
            "  -f, --force       NEW may hold data (a filesystem, a "
            "header...)\n"
            "      --skip-unreadable  copy past blocks of the old member "
            "that cannot\n"
            "                    be read (zeros on NEW) and list them, "
            "instead of\n"
            "                    stopping\n"
            "      --offline     the volume is not served: copy here (implies "
            "--wait);\n"
            "                    also mid-grow or mid-shrink (the grow or "
            "shrink goes\n"
            "                    on when the volume is served again)\n"
            "      --accept-stale  with --offline: member INDEX may be behind "
            "the\n"
            "                    volume's generation (it dropped out while "
            "served):\n"
            "                    copied as it is, on your word\n"
            "  -n, --dry-run     say what it would do (the member, NEW, the "
            "bytes to\n"
            "                    copy, the checks passed); write nothing\n"
            "      --cancel      stop the running replace (the volume keeps "
            "the old\n"
            "                    member)\n"
            "  -j, --json        say what was done (and with --wait the "
            "replace's\n"
            "                    last state), as JSON; with --wait, JSON "
            "Lines\n",
    .usage_status = 2,
  },
  {
    .name = "grow",
    .run = cmd_grow,
    .synopsis = "[--rate RATE] [--wait] [--force] [--offline] [--dry-run]\n"
                "        [--json] VOLUME NEW... | --size max VOLUME\n"
                "        | [--wait] [--rate RATE] VOLUME | --cancel VOLUME",
    .summary = "add members, restriped while served",
    .help = "Add NEW (files, block devices or NBD URIs) as members and "
            "restripe the\n"
            "data over all of them while clients go on; the volume's size "
            "grows at\n"
            "the end (clients see it when they connect again).  --size max: "
            "take the\n"
            "room of members replaced by bigger ones.  Crash-safe: served "
            "again, it\n"
            "goes on where it was.  'nbdstripe status' shows the progress.\n"
            "VOLUME alone: the grow or shrink under way (paused, or going on "
            "after a\n"
            "restart) goes on, and with --wait is followed to its end; none "
            "under way:\n"
            "--wait says so and exits 0, without it that is an error.\n"
            "      --size max    no NEW: the room of bigger members\n"
            "      --rate RATE   move at most RATE bytes a second, such as "
            "200M\n"
            "                    (default: as fast as it goes)\n"
            "  -w, --wait        follow it to its end\n"
            "  -f, --force       NEW may hold data (a filesystem, a "
            "header...)\n"
            "      --offline     the volume is not served: move here "
            "(implies --wait)\n"
            "  -n, --dry-run     say what it would do, do nothing (served or "
            "not)\n"
            "      --cancel      pause the grow or shrink at the end of its "
            "window: the\n"
            "                    volume is served as it is; VOLUME alone goes "
            "on\n"
            "  -j, --json        say what was done, as JSON\n",
    .usage_status = 2,
  },
  {
    .name = "shrink",
    .run = cmd_shrink,
    .synopsis = "[--rate RATE] [--wait] [--force] [--offline] [--dry-run]\n"
                "        [--json] VOLUME INDEX --size BYTES\n"
                "        | [--wait] [--rate RATE] VOLUME | --cancel VOLUME",
    .summary = "remove a member, restriped while served",
    .help = "Move the data off member INDEX onto the others while clients "
            "go on, then\n"
            "remove it (its header says so, the config lists it removed).  "
            "The volume\n"
            "gets smaller: shrink its file system first, to the size "
            "--dry-run gives,\n"
            "and give that size as --size; refused while the volume holds "
            "data beyond\n"
            "it (fstrim the file system first).  VOLUME alone, --cancel: "
            "as grow's.\n"
            "      --size BYTES  the size the volume will have\n"
            "      --rate RATE   move at most RATE bytes a second, such as "
            "200M\n"
            "                    (default: as fast as it goes)\n"
            "  -w, --wait        follow it to its end\n"
            "  -f, --force       members that cannot tell data from free "
            "space\n"
            "      --offline     the volume is not served: move here "
            "(implies --wait)\n"
            "  -n, --dry-run     say the size it would have, do nothing "
            "(served or not)\n"
            "      --cancel      pause it at the end of its window\n"
            "  -j, --json        say what was done, as JSON\n",
    .usage_status = 2,
  },
  {
    .name = "scrub",
    .run = cmd_scrub,
    .synopsis = "[--rate RATE] [--wait] [--json] VOLUME\n"
                "        | --cancel [--json] VOLUME",
    .summary = "read every member of a served volume, report bad places",
    .help = "Read every member's data area from the device, in the "
            "background while\n"
            "clients go on (a patrol read): what cannot be read is "
            "reported as the\n"
            "volume's byte ranges and per member, and the member is "
            "failing from\n"
            "then on.  The request goes to the server through its control "
            "socket;\n"
            "'nbdstripe status' shows the progress and the findings.\n"
            "      --rate RATE   read at most RATE bytes a second in all, "
            "such as 64M\n"
            "                    (default: 256M);\n"
            "                    while clients are at work it also pauses "
            "before\n"
            "                    each read\n"
            "  -w, --wait        follow it to its end (a progress bar on a "
            "terminal,\n"
            "                    a line every 5% otherwise); exit status 0 "
            "when\n"
            "                    everything was read\n"
            "      --cancel      stop the running scrub\n"
            "  -j, --json        say what was done (and with --wait what "
            "was found,\n"
            "                    \"unreadable\": the volume's byte ranges), "
            "as JSON;\n"
            "                    with --wait, JSON Lines\n",
    .usage_status = 2,
  },
  {
    .name = "lost-files",
    .run = cmd_lost_files,
    .synopsis = "[--member INDEX] [--json] VOLUME",
    .summary = "the files a lost member or range takes (ext2/3/4)",
    .help = "List the files of the ext2, ext3 or ext4 file system on a "
            "served volume\n"
            "whose data or metadata lie on a member it is served without, "
            "in the\n"
            "volume's lost ranges (its headers keep them), where the "
            "server's last\n"
            "scrub found unreadable blocks or, with --member, on member "
            "INDEX too:\n"
            "what its death would take.\n"
            "Reads through the server, never mounts, writes nothing.  "
            "Exit status 0\n"
            "when the files could be named, 1 otherwise (a file system it "
            "does not\n"
            "know: the lost byte ranges and why).\n"
            "  -m, --member INDEX  every chunk of member INDEX counts as "
            "lost\n"
            "  -j, --json        {\"files\": [{\"path\", \"inode\", "
            "\"bytes\", \"lost_bytes\",\n"
            "                    \"metadata_lost\"}...], "
            "\"unnamed_inodes\": [...], ...}\n",
    .usage_status = 2,
  },
  { .name = NULL },
};

const struct command *
command_named (const char *name)
{
  for (const struct command *c = commands; c->name; ++c)
    if (strcmp (c->name, name) == 0)
      return c;
  return NULL;
}

/* The synopsis's continuation lines start with 8 spaces; indent more
 * puts them under the first option, after whatever preceded the synopsis.
 */
static void
print_synopsis (FILE *fp, const struct command *c, int indent)
{
  for (const char *p = c->synopsis; *p; ++p) {
    fputc (*p, fp);
    if (*p == '\n' && indent > 0)
      fprintf (fp, "%*s", indent, "");
  }
}

void
usage (FILE *fp)
{
  fprintf (fp, "Usage: nbdstripe COMMAND [OPTION]... [OPERAND]...\n"
               "       nbdstripe --help | --version\n"
               "\n"
               "A RAID-0 volume over N files or block devices, served over "
               "NBD.\n"
               "\n"
               "Commands:\n");
  for (const struct command *c = commands; c->name; ++c) {
    fprintf (fp, "  %s ", c->name);
    print_synopsis (fp, c, (int) strlen (c->name) + 3 - 8);
    fprintf (fp, "\n      %s\n", c->summary);
  }
  fprintf (fp,
           "\n"
           "VOLUME is a config file (an operand with a '/' or ending in "
           ".conf) or a\n"
           "volume's name: NAME is %s/NAME.conf (NBDSTRIPE_CONFDIR moves "
           "it).\n"
           "Options may come before or after the operands; every command "
           "takes\n"
           "-h (--help) and -V (--version).\n"
           "\n"
           "  nbdstripe COMMAND --help   help on one command\n"
           "  nbdstripe --version\n"
           "\n"
           "See nbdstripe(8) and nbdkit-stripe-plugin(1).\n",
           DEFAULT_CONF_DIR);
}

/* For a bare `nbdstripe`: a few lines, not the whole --help. */
void
short_usage (FILE *fp)
{
  int col = 0;

  fprintf (fp, "Usage: nbdstripe COMMAND [OPTION]... [OPERAND]...\n"
               "Commands:");
  for (const struct command *c = commands; c->name; ++c) {
    if (col + strlen (c->name) > 60) {
      fprintf (fp, "\n         ");
      col = 0;
    }
    col += fprintf (fp, " %s", c->name);
  }
  fprintf (fp, "\nTry 'nbdstripe --help' for more, 'nbdstripe COMMAND "
               "--help' for one command.\n");
}

int
cli_help (const struct command *c, FILE *fp, int status)
{
  fprintf (fp, "Usage: nbdstripe %s ", c->name);
  print_synopsis (fp, c, (int) strlen (c->name) + 18 - 8);
  fprintf (fp, "\n%s", c->help);
  fprintf (fp, "  -h, --help        this help\n"
               "  -V, --version     print the version\n");
  if (strstr (c->synopsis, "VOLUME"))
    fprintf (fp, "VOLUME: a config file, or a name (%s/NAME.conf).\n",
             DEFAULT_CONF_DIR);
  fprintf (fp, "Options may come before or after the operands.\n");
  return status;
}

int
cli_usage_error (const struct command *c, const char *fmt, ...)
{
  va_list args;

  if (fmt) {
    fputs ("nbdstripe: ", stderr);
    va_start (args, fmt);
    vfprintf (stderr, fmt, args);
    va_end (args);
    fputc ('\n', stderr);
  }
  fprintf (stderr, "Usage: nbdstripe %s ", c->name);
  print_synopsis (stderr, c, (int) strlen (c->name) + 18 - 8);
  fprintf (stderr, "\nTry 'nbdstripe %s --help' for more.\n", c->name);
  return c->usage_status;
}

int
cli_option (const struct command *c, int opt)
{
  switch (opt) {
  case 'h': return cli_help (c, stdout, 0);
  case 'V': printf ("nbdstripe %s\n", PACKAGE_VERSION); return 0;
  default: /* getopt has said what is wrong */
    return cli_usage_error (c, NULL);
  }
}

int
cli_operands (const struct command *c, int argc, char **argv, int min, int max,
              const char *what)
{
  int n = argc - optind;

  if (n < min)
    return cli_usage_error (c, "missing %s", what);
  if (max >= 0 && n > max)
    return cli_usage_error (c, "unexpected operand '%s'", argv[optind + max]);
  return 0;
}

const char *
conf_dir (void)
{
  const char *d = getenv ("NBDSTRIPE_CONFDIR");
  return d && *d ? d : DEFAULT_CONF_DIR;
}

const char *
run_dir (void)
{
  return config_run_dir ();
}

bool
volume_is_path (const char *arg)
{
  size_t n = strlen (arg);

  return strchr (arg, '/') != NULL
         || (n >= 5 && strcmp (arg + n - 5, ".conf") == 0);
}

/* A path as it is; a name as CONFDIR/NAME.conf (as the systemd unit
 * nbdstripe@NAME reads it).  Returns a malloc'd string, NULL when out of
 * memory.
 */
char *
volume_config_path (const char *arg)
{
  char *path;

  if (volume_is_path (arg))
    return strdup (arg);
  if (asprintf (&path, "%s/%s.conf", conf_dir (), arg) == -1)
    return NULL;
  return path;
}

/* How to name cfg's volume in a command to run: its name when the name
 * leads to this config (CONFDIR/NAME.conf is its file), else its path
 * -- another config of that name in the config directory, or two
 * served volumes of one name, would take a name elsewhere.
 */
const char *
volume_operand (const struct stripe_config *cfg)
{
  char *named = volume_config_path (cfg->name);
  struct stat a, b;
  bool same = named && stat (named, &a) == 0 && stat (cfg->path, &b) == 0
              && a.st_dev == b.st_dev && a.st_ino == b.st_ino;

  free (named);
  return same ? cfg->name : cfg->path;
}

/* The config of the one volume served on this host under name and not
 * configured in the config directory (a demo's, a config kept
 * elsewhere: served.c finds them), malloc'd; NULL when there is none,
 * or with msg saying why when there are several.
 */
static char *
served_config (const char *name, char *msg, size_t len)
{
  struct served *v;
  size_t n, found = 0;
  char *config = NULL;

  msg[0] = '\0';
  served_list (&v, &n);
  for (size_t i = 0; i < n; ++i)
    if (!v[i].configured && v[i].pid && v[i].config && v[i].name
        && strcmp (v[i].name, name) == 0 && found++ == 0)
      config = strdup (v[i].config);
  served_free (v, n);
  if (found > 1) {
    snprintf (msg, len,
              "%s: %zu volumes of that name are served here: name one by "
              "its config",
              name, found);
    free (config);
    return NULL;
  }
  return config;
}

int
load_volume (const char *arg, struct stripe_config *cfg, char *err,
             size_t errlen)
{
  char msg[1024];
  char *path = volume_config_path (arg);
  struct stat st;
  int r;

  memset (cfg, 0, sizeof *cfg);
  if (path == NULL) {
    snprintf (msg, sizeof msg, "%s: %s", arg, strerror (ENOMEM));
    fprintf (stderr, "nbdstripe: %s\n", msg);
    goto fail;
  }
  if (!volume_is_path (arg) && stat (path, &st) == -1 && errno == ENOENT) {
    char *served = served_config (arg, msg, sizeof msg);

    if (served) {
      free (path);
      path = served;
    }
    else {
      /* "fast0.cfg" in this directory was meant as a path, say. */
      if (msg[0] == '\0')
        snprintf (
          msg, sizeof msg,
          "no volume named '%s': no %s%s%s%s, and none served here "
          "under that name",
          arg, path, stat (arg, &st) == 0 ? " (a file here? write ./" : "",
          stat (arg, &st) == 0 ? arg : "", stat (arg, &st) == 0 ? ")" : "");
      fprintf (stderr, "%snbdstripe: %s\n", log_journal_prefix (LOG_ERR), msg);
      free (path);
      goto fail;
    }
  }
  r = config_load (path, cfg, msg, sizeof msg);
  free (path);
  if (r == -1) {
    fprintf (stderr, "%snbdstripe: %s\n", log_journal_prefix (LOG_ERR), msg);
    goto fail;
  }
  return 0;

fail:
  if (err && errlen)
    snprintf (err, errlen, "%s", msg);
  return -1;
}

int
print_json (struct json_object *o)
{
  char *text = json_text_of (o);

  json_object_put (o);
  if (text == NULL) {
    fprintf (stderr, "nbdstripe: cannot print JSON: out of memory\n");
    return -1;
  }
  fputs (text, stdout);
  free (text);
  return 0;
}
