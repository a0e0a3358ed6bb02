/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe import: write a config for an existing Linux md raid0 array,
 * from its members' md superblocks.  Writes nothing to any member.
 *
 * The members may be given in any order: their roles say the order.  The
 * config is then checked exactly as serve would check it (assemble_md),
 * so that an array import accepts is one serve accepts, byte for byte.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assemble.h"
#include "json.h"
#include "jsonout.h"
#include "layout.h"
#include "log.h"
#include "md_super.h"
#include "member.h"
#include "nbdstripe.h"

/* The md name ("homehost:name" or "name") as a volume name: the part
 * after the last ':', characters outside [A-Za-z0-9._-] as '_'; "md-" and
 * the UUID's first 8 digits when nothing is left.
 */
static void
volume_name (const struct md_super *sb, char *out, size_t len)
{
  const char *s = strrchr (sb->set_name, ':');
  size_t n = 0;

  s = s ? s + 1 : sb->set_name;
  for (; *s && n + 1 < len && n < 63; ++s) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out[n++] = ok ? c : '_';
  }
  out[n] = '\0';
  if (n == 0 || strcmp (out, ".") == 0 || strcmp (out, "..") == 0) {
    char u[36];
    md_super_uuid_format (sb->set_uuid, u);
    snprintf (out, len, "md-%.8s", u);
  }
}

/* A config string: the characters libconfig needs escaped. */
static void
put_string (FILE *fp, const char *s)
{
  fputc ('"', fp);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      fputc ('\\', fp);
    fputc (*s, fp);
  }
  fputc ('"', fp);
}

/* What import gathers: the members in role order, the config it will
 * write (pointing into this struct and path[]), the assembly and layout
 * that checked it.
 */
struct import {
  const char *out;  /* --out, or NULL: standard output */
  const char *name; /* --name, or NULL */
  uint32_t layout;  /* --layout, 0 when not given */
  bool force, json;
  unsigned n;
  struct md_super *sb; /* in role order */
  char **path;         /* in role order: absolute paths, URIs as given */
  struct stripe_config cfg;
  struct assembly *a;
  struct layout *l;
  char vname[64], uuid[36];
  /* md names come from the disks: shown escaped (md_super.h). */
  char nm[MD_SUPER_NAME_SHOWN];
};

/* The options and operands.  false when the command ends here (help,
 * version, a usage error), with *status its exit status.
 */
static bool
import_options (const struct command *cmd, int argc, char **argv,
                struct import *im, int *status)
{
  static const struct option opts[] = {
    { "out", required_argument, NULL, 'o' },
    { "force", no_argument, NULL, 'f' },
    { "json", no_argument, NULL, 'j' },
    { "name", required_argument, NULL, 'n' },
    { "layout", required_argument, NULL, 'l' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  int c;

  while ((c = getopt_long (argc, argv, "o:fjhV", opts, NULL)) != -1) {
    switch (c) {
    case 'o': im->out = optarg; break;
    case 'f': im->force = true; break;
    case 'j': im->json = true; break;
    case 'n': im->name = optarg; break;
    case 'l':
      im->layout = layout_parse_name (optarg);
      if (im->layout == 0) {
        *status = cli_usage_error (cmd,
                                   "--layout: expected \"original\" or "
                                   "\"alternate\", got \"%s\"",
                                   optarg);
        return false;
      }
      break;
    default: *status = cli_option (cmd, c); return false;
    }
  }
  if ((*status = cli_operands (cmd, argc, argv, 1, -1, "MEMBER")) != 0)
    return false;
  /* Without --out the config itself is standard output. */
  if (im->json && im->out == NULL) {
    *status = cli_usage_error (cmd, "--json needs --out: without it the "
                                    "config goes to standard output");
    return false;
  }
  return true;
}

/* Member arg's superblock, into its role's place: whether it is a
 * servable member of an array of n, and the only one with its role.
 */
static bool
read_member (struct import *im, const char *arg)
{
  struct md_super s;
  char why[512], *abs;
  unsigned role;

  if (md_read_member (arg, &s, NULL, NULL, NULL, why, sizeof why) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", arg, why);
    return false;
  }
  if (!md_super_raid0_servable (&s, why, sizeof why)) {
    fprintf (stderr, "nbdstripe: %s: md superblock 1.%u: %s\n", arg, s.minor,
             why);
    return false;
  }
  role = md_super_role (&s);
  if (s.raid_disks != im->n) {
    md_super_uuid_format (s.set_uuid, im->uuid);
    fprintf (stderr,
             "nbdstripe: %s: member of md array '%s' (%s) of %" PRIu32
             " members; %u given\n",
             arg, md_super_name_shown (&s, im->nm), im->uuid, s.raid_disks,
             im->n);
    return false;
  }
  if (im->path[role]) {
    fprintf (stderr, "nbdstripe: %s and %s both have role %u\n",
             im->path[role], arg, role);
    return false;
  }
  /* A config names members by absolute path (URIs as they are). */
  abs = member_is_uri (arg) ? strdup (arg) : realpath (arg, NULL);
  if (abs == NULL) {
    fprintf (stderr, "nbdstripe: %s: %s\n", arg, strerror (errno));
    return false;
  }
  im->path[role] = abs;
  im->sb[role] = s;
  return true;
}

/* Every member read (each problem said), and all of one array. */
static bool
read_members (struct import *im, char **args)
{
  char nm2[MD_SUPER_NAME_SHOWN];
  bool ok = true;

  for (unsigned i = 0; i < im->n; ++i)
    if (!read_member (im, args[i]))
      ok = false;
  if (!ok)
    return false;
  for (unsigned i = 1; i < im->n; ++i)
    if (memcmp (im->sb[i].set_uuid, im->sb[0].set_uuid, 16) != 0) {
      char other[36];
      md_super_uuid_format (im->sb[0].set_uuid, im->uuid);
      md_super_uuid_format (im->sb[i].set_uuid, other);
      fprintf (stderr,
               "nbdstripe: %s belongs to md array '%s' (%s), %s to '%s' "
               "(%s): give the members of one array\n",
               im->path[0], md_super_name_shown (&im->sb[0], im->nm), im->uuid,
               im->path[i], md_super_name_shown (&im->sb[i], nm2), other);
      return false;
    }
  return true;
}

/* The config as it will be written, checked as serve will check it
 * (assemble), and the volume's layout.  0/-1 (said).
 */
static int
check_as_serve (struct import *im)
{
  struct stripe_config *cfg = &im->cfg;
  const struct md_super *sb = im->sb;
  unsigned n = im->n;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];

  volume_name (&sb[0], im->vname, sizeof im->vname);
  if (im->name)
    snprintf (im->vname, sizeof im->vname, "%s", im->name);
  cfg->name = im->vname;
  cfg->path = (char *) (im->out ? im->out : "<import>");
  cfg->chunk = (uint64_t) sb[0].chunk_sectors * 512;
  cfg->nr_members = n;
  for (unsigned i = 0; i < n; ++i)
    cfg->members[i] = im->path[i];
  config_metadata_parse ("md", &cfg->metadata);
  cfg->layout = im->layout ? im->layout : LAYOUT_MD_ALT;
  cfg->layout_given = im->layout != 0;
  memcpy (cfg->uuid, sb[0].set_uuid, 16);
  cfg->uuid_given = true;
  /* The layout, when nothing records it and it matters: only the user
   * knows (assemble_md would ask for the config key; here it is the
   * option).
   */
  if (!im->layout && md_super_raid0_layout (&sb[0]) == 0) {
    for (unsigned i = 0; i < n; ++i)
      sizes[i] = sb[i].data_size * 512;
    if (!layout_md_layouts_agree (cfg->chunk, n, sizes)) {
      md_super_uuid_format (sb[0].set_uuid, im->uuid);
      fprintf (stderr,
               "nbdstripe: import: md array '%s' (%s) has members of "
               "different sizes and its superblocks do not say which of "
               "md's two layouts it was written with: give --layout "
               "original (Linux before 3.14, or raid0.default_layout=1) or "
               "--layout alternate (Linux 3.14 to 5.3, or "
               "raid0.default_layout=2)\n",
               md_super_name_shown (&sb[0], im->nm), im->uuid);
      return -1;
    }
  }
  if (assemble (cfg, im->a) == -1)
    return -1;
  for (unsigned i = 0; i < n; ++i)
    sizes[i] = im->a->data_sizes[i];
  if (layout_init_as (im->l, im->a->layout, im->a->size_rule, cfg->chunk, n,
                      sizes, NULL)
      != LAYOUT_OK) {
    fprintf (stderr, "nbdstripe: import: cannot lay out the array\n");
    return -1;
  }
  return 0;
}

/* Where the config goes: standard output, or --out written whole under
 * a temporary name (tmp), then renamed (close_out) -- never half a
 * config, never over one unless --force.  NULL (said) on failure.
 */
static FILE *
open_out (const struct import *im, char *tmp, size_t tmplen)
{
  FILE *fp;
  int fd;

  if (im->out == NULL)
    return stdout;
  if (!im->force && access (im->out, F_OK) == 0) {
    fprintf (stderr, "nbdstripe: %s: exists (use --force to replace it)\n",
             im->out);
    return NULL;
  }
  snprintf (tmp, tmplen, "%s.XXXXXX", im->out);
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd == -1 || (fp = fdopen (fd, "w")) == NULL) {
    fprintf (stderr, "nbdstripe: %s: %s\n", im->out, strerror (errno));
    if (fd != -1)
      close (fd);
    tmp[0] = '\0';
    return NULL;
  }
  return fp;
}

static void
write_config (struct import *im, FILE *fp)
{
  const struct md_super *sb = im->sb;

  md_super_uuid_format (sb[0].set_uuid, im->uuid);
  fprintf (fp,
           "# Linux md raid0 array '%s' (UUID %s), imported by nbdstripe "
           "import.\n"
           "# md metadata 1.%u; nbdstripe reads the superblocks and never "
           "writes them:\n"
           "# the array stays an md array.\n",
           md_super_name_shown (&sb[0], im->nm), im->uuid, sb[0].minor);
  fprintf (fp, "name = ");
  put_string (fp, im->vname);
  fprintf (fp, ";\nmetadata = \"md\";\nuuid = \"%s\";\n", im->uuid);
  fprintf (fp, "chunk = \"%" PRIu64 "K\";\n", im->cfg.chunk / 1024);
  if (im->l->nr_zones > 1 || im->layout)
    fprintf (fp, "layout = \"%s\";  # %s\n", layout_name (im->a->layout),
             md_super_raid0_layout (&sb[0])
               ? "as the superblocks record it"
               : "given with --layout: the superblocks do not record it");
  fprintf (fp, "members = [\n");
  for (unsigned i = 0; i < im->n; ++i) {
    fprintf (fp, "  ");
    put_string (fp, im->path[i]);
    fprintf (fp, "%s  # role %u, data at %" PRIu64 ", %" PRIu64 " bytes\n",
             i + 1 < im->n ? "," : "", i, im->a->data_offsets[i],
             im->a->data_sizes[i]);
  }
  fprintf (fp, "];\n");
  fprintf (fp, "serve = { socket = \"/run/nbdstripe/%s.sock\"; };\n",
           im->vname);
}

/* --out made durable and renamed into place; *fp closed.  0/-1 (said;
 * tmp is still to be removed).
 */
static int
close_out (const struct import *im, FILE **fp, char *tmp)
{
  if (im->out == NULL)
    return 0;
  if (fflush (*fp) != 0 || fsync (fileno (*fp)) != 0 || fclose (*fp) != 0) {
    *fp = NULL;
    fprintf (stderr, "nbdstripe: %s: %s\n", im->out, strerror (errno));
    return -1;
  }
  *fp = NULL;
  if (rename (tmp, im->out) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", im->out, strerror (errno));
    return -1;
  }
  tmp[0] = '\0';
  return 0;
}

/* What was imported: a JSON summary, or a line for people (on stderr
 * when the config itself went to standard output).
 */
static void
report (struct import *im)
{
  const struct md_super *sb = im->sb;
  const char *out = im->out;

  if (im->json) {
    struct json_object *o = json_object_new_object ();
    struct json_object *m = json_object_new_array ();

    json_put (o, "config", json_text (out));
    json_put (o, "written", json_object_new_boolean (true));
    json_put (o, "name", json_text (im->vname));
    json_put (o, "md_name", json_text (sb[0].set_name));
    json_put (o, "uuid", json_text (im->uuid));
    json_put (o, "md_version", json_object_new_int64 ((int64_t) sb[0].minor));
    for (unsigned i = 0; i < im->n; ++i)
      json_object_array_add (m, json_text (im->path[i]));
    json_put (o, "members", m);
    json_put (o, "chunk", json_u64 (im->cfg.chunk));
    json_put (o, "layout", json_text (layout_name (im->a->layout)));
    json_put (o, "size", json_u64 (im->l->size));
    jsonout_result (o, true, NULL, false);
  }
  else {
    char hs[32];
    fprintf (out ? stdout : stderr,
             "md raid0 array '%s' (UUID %s): %u member%s, chunk %" PRIu64
             ", layout %s, %s (%" PRIu64 " bytes, %" PRIu64 " KiB as "
             "mdadm --detail says)%s%s\n",
             md_super_name_shown (&sb[0], im->nm), im->uuid, im->n,
             im->n == 1 ? "" : "s", im->cfg.chunk, layout_name (im->a->layout),
             human_size (im->l->size, hs, sizeof hs), im->l->size,
             im->l->size / 1024, out ? ": config written to " : "",
             out ? out : "");
  }
}

/* import --json when nothing was written: report's keys, null. */
static void
import_failed_json (const struct import *im)
{
  static const char *const unknown[] = {
    "name",    "md_name", "uuid",   "md_version",
    "members", "chunk",   "layout", "size",
  };
  struct json_object *o = json_object_new_object ();

  json_put (o, "config", json_text (im->out));
  json_put (o, "written", json_object_new_boolean (false));
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; ++i)
    json_put (o, unknown[i], NULL);
  jsonout_result (o, false, NULL, false);
}

int
cmd_import (const struct command *cmd, int argc, char **argv)
{
  struct import im = { 0 };
  char tmp[PATH_MAX + 16] = "";
  int status = 1;
  FILE *fp = NULL;

  if (!import_options (cmd, argc, argv, &im, &status))
    return status;
  if (im.json)
    jsonout_watch_stderr ();
  status = 1;
  im.n = argc - optind;
  if (im.n > LAYOUT_MAX_MEMBERS) {
    fprintf (stderr, "nbdstripe: import: %u members: at most %d\n", im.n,
             LAYOUT_MAX_MEMBERS);
    im.n = 0;
    goto done;
  }
  im.sb = calloc (im.n, sizeof *im.sb);
  im.path = calloc (im.n, sizeof *im.path);
  im.a = calloc (1, sizeof *im.a);
  im.l = calloc (1, sizeof *im.l);
  if (im.sb == NULL || im.path == NULL || im.a == NULL || im.l == NULL) {
    perror ("nbdstripe: import");
    goto done;
  }

  if (!read_members (&im, &argv[optind]) || check_as_serve (&im) == -1)
    goto done;
  fp = open_out (&im, tmp, sizeof tmp);
  if (fp == NULL)
    goto done;
  write_config (&im, fp);
  if (close_out (&im, &fp, tmp) == -1)
    goto done;
  report (&im);
  status = 0;

done:
  if (im.json && status != 0)
    import_failed_json (&im);
  if (fp && fp != stdout)
    fclose (fp);
  if (tmp[0])
    unlink (tmp);
  if (im.path)
    for (unsigned i = 0; i < im.n; ++i)
      free (im.path[i]);
  free (im.path);
  free (im.sb);
  if (im.a)
    assembly_free (im.a);
  free (im.a);
  free (im.l);
  return status;
}
