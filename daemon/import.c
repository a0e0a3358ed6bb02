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

int
cmd_import (const struct command *cmd, int argc, char **argv)
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
  const char *out = NULL, *name = NULL;
  uint32_t layout = 0;
  bool force = false, json = false, ok = true;
  struct md_super *sb = NULL;
  char **path = NULL; /* in role order */
  struct stripe_config cfg;
  struct assembly *a = NULL;
  struct layout *l = NULL;
  char vname[64], uuid[36], tmp[PATH_MAX + 16] = "";
  /* md names come from the disks: shown escaped (md_super.h). */
  char nm[MD_SUPER_NAME_SHOWN], nm2[MD_SUPER_NAME_SHOWN];
  unsigned n;
  int c, status = 1;
  FILE *fp = NULL;

  while ((c = getopt_long (argc, argv, "o:fjhV", opts, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case 'f': force = true; break;
    case 'j': json = true; break;
    case 'n': name = optarg; break;
    case 'l':
      layout = layout_parse_name (optarg);
      if (layout == 0) {
        fprintf (stderr,
                 "nbdstripe: import: --layout: expected \"original\" or "
                 "\"alternate\", got \"%s\"\n",
                 optarg);
        return 2;
      }
      break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, -1, "MEMBER")) != 0)
    return c;
  /* Without --out the config itself is standard output. */
  if (json && out == NULL)
    return cli_usage_error (cmd, "--json needs --out: without it the "
                                 "config goes to standard output");
  n = argc - optind;
  memset (&cfg, 0, sizeof cfg);
  if (n > LAYOUT_MAX_MEMBERS) {
    fprintf (stderr, "nbdstripe: import: %u members: at most %d\n", n,
             LAYOUT_MAX_MEMBERS);
    n = 0;
    goto done;
  }
  sb = calloc (n, sizeof *sb);
  path = calloc (n, sizeof *path);
  a = calloc (1, sizeof *a);
  l = calloc (1, sizeof *l);
  if (sb == NULL || path == NULL || a == NULL || l == NULL) {
    perror ("nbdstripe: import");
    goto done;
  }

  /* Each member's superblock, and its role: the member's place. */
  for (unsigned i = 0; i < n; ++i) {
    const char *arg = argv[optind + i];
    struct md_super s;
    char why[512], *abs;
    unsigned role;

    if (md_read_member (arg, &s, NULL, NULL, NULL, why, sizeof why) == -1) {
      fprintf (stderr, "nbdstripe: %s: %s\n", arg, why);
      ok = false;
      continue;
    }
    if (!md_super_raid0_servable (&s, why, sizeof why)) {
      fprintf (stderr, "nbdstripe: %s: md superblock 1.%u: %s\n", arg,
               s.minor, why);
      ok = false;
      continue;
    }
    role = md_super_role (&s);
    if (s.raid_disks != n) {
      md_super_uuid_format (s.set_uuid, uuid);
      fprintf (stderr,
               "nbdstripe: %s: member of md array '%s' (%s) of %" PRIu32
               " members; %u given\n",
               arg, md_super_name_shown (&s, nm), uuid, s.raid_disks, n);
      ok = false;
      continue;
    }
    if (path[role]) {
      fprintf (stderr, "nbdstripe: %s and %s both have role %u\n",
               path[role], arg, role);
      ok = false;
      continue;
    }
    /* A config names members by absolute path (URIs as they are). */
    abs = member_is_uri (arg) ? strdup (arg) : realpath (arg, NULL);
    if (abs == NULL) {
      fprintf (stderr, "nbdstripe: %s: %s\n", arg, strerror (errno));
      ok = false;
      continue;
    }
    path[role] = abs;
    sb[role] = s;
  }
  if (!ok)
    goto done;
  for (unsigned i = 1; i < n; ++i)
    if (memcmp (sb[i].set_uuid, sb[0].set_uuid, 16) != 0) {
      char other[36];
      md_super_uuid_format (sb[0].set_uuid, uuid);
      md_super_uuid_format (sb[i].set_uuid, other);
      fprintf (stderr,
               "nbdstripe: %s belongs to md array '%s' (%s), %s to '%s' "
               "(%s): give the members of one array\n",
               path[0], md_super_name_shown (&sb[0], nm), uuid, path[i],
               md_super_name_shown (&sb[i], nm2), other);
      goto done;
    }

  /* The config as it will be written, checked as serve will check it. */
  volume_name (&sb[0], vname, sizeof vname);
  if (name)
    snprintf (vname, sizeof vname, "%s", name);
  cfg.name = vname;
  cfg.path = (char *) (out ? out : "<import>");
  cfg.chunk = (uint64_t) sb[0].chunk_sectors * 512;
  cfg.nr_members = n;
  for (unsigned i = 0; i < n; ++i)
    cfg.members[i] = path[i];
  config_metadata_parse ("md", &cfg.metadata);
  cfg.layout = layout ? layout : LAYOUT_MD_ALT;
  cfg.layout_given = layout != 0;
  memcpy (cfg.uuid, sb[0].set_uuid, 16);
  cfg.uuid_given = true;
  /* The layout, when nothing records it and it matters: only the user
   * knows (assemble_md would ask for the config key; here it is the
   * option).
   */
  if (!layout && md_super_raid0_layout (&sb[0]) == 0) {
    uint64_t sizes[LAYOUT_MAX_MEMBERS];
    for (unsigned i = 0; i < n; ++i)
      sizes[i] = sb[i].data_size * 512;
    if (!layout_md_layouts_agree (cfg.chunk, n, sizes)) {
      md_super_uuid_format (sb[0].set_uuid, uuid);
      fprintf (stderr,
               "nbdstripe: import: md array '%s' (%s) has members of "
               "different sizes and its superblocks do not say which of "
               "md's two layouts it was written with: give --layout "
               "original (Linux before 3.14, or raid0.default_layout=1) or "
               "--layout alternate (Linux 3.14 to 5.3, or "
               "raid0.default_layout=2)\n",
               md_super_name_shown (&sb[0], nm), uuid);
      goto done;
    }
  }
  if (assemble (&cfg, a) == -1)
    goto done;
  {
    uint64_t sizes[LAYOUT_MAX_MEMBERS];
    for (unsigned i = 0; i < n; ++i)
      sizes[i] = a->data_sizes[i];
    if (layout_init_as (l, a->layout, a->size_rule, cfg.chunk, n, sizes,
                        NULL)
        != LAYOUT_OK) {
      fprintf (stderr, "nbdstripe: import: cannot lay out the array\n");
      goto done;
    }
  }

  if (out) {
    /* Written whole under a temporary name, then renamed: never half a
     * config, never over one unless --force.
     */
    int fd;
    if (!force && access (out, F_OK) == 0) {
      fprintf (stderr, "nbdstripe: %s: exists (use --force to replace it)\n",
               out);
      goto done;
    }
    snprintf (tmp, sizeof tmp, "%s.XXXXXX", out);
    fd = mkostemp (tmp, O_CLOEXEC);
    if (fd == -1 || (fp = fdopen (fd, "w")) == NULL) {
      fprintf (stderr, "nbdstripe: %s: %s\n", out, strerror (errno));
      if (fd != -1)
        close (fd);
      tmp[0] = '\0';
      goto done;
    }
  }
  else
    fp = stdout;

  md_super_uuid_format (sb[0].set_uuid, uuid);
  fprintf (fp,
           "# Linux md raid0 array '%s' (UUID %s), imported by nbdstripe "
           "import.\n"
           "# md metadata 1.%u; nbdstripe reads the superblocks and never "
           "writes them:\n"
           "# the array stays an md array.\n",
           md_super_name_shown (&sb[0], nm), uuid, sb[0].minor);
  fprintf (fp, "name = ");
  put_string (fp, vname);
  fprintf (fp, ";\nmetadata = \"md\";\nuuid = \"%s\";\n", uuid);
  fprintf (fp, "chunk = \"%" PRIu64 "K\";\n", cfg.chunk / 1024);
  if (l->nr_zones > 1 || layout)
    fprintf (fp, "layout = \"%s\";  # %s\n", layout_name (a->layout),
             md_super_raid0_layout (&sb[0])
               ? "as the superblocks record it"
               : "given with --layout: the superblocks do not record it");
  fprintf (fp, "members = [\n");
  for (unsigned i = 0; i < n; ++i) {
    fprintf (fp, "  ");
    put_string (fp, path[i]);
    fprintf (fp, "%s  # role %u, data at %" PRIu64 ", %" PRIu64 " bytes\n",
             i + 1 < n ? "," : "", i, a->data_offsets[i], a->data_sizes[i]);
  }
  fprintf (fp, "];\n");
  fprintf (fp, "serve = { socket = \"/run/nbdstripe/%s.sock\"; };\n", vname);
  if (out) {
    if (fflush (fp) != 0 || fsync (fileno (fp)) != 0 || fclose (fp) != 0) {
      fp = NULL;
      fprintf (stderr, "nbdstripe: %s: %s\n", out, strerror (errno));
      goto done;
    }
    fp = NULL;
    if (rename (tmp, out) == -1) {
      fprintf (stderr, "nbdstripe: %s: %s\n", out, strerror (errno));
      goto done;
    }
    tmp[0] = '\0';
  }

  if (json) {
    struct json_object *o = json_object_new_object ();
    struct json_object *m = json_object_new_array ();

    json_put (o, "config", json_text (out));
    json_put (o, "written", json_object_new_boolean (true));
    json_put (o, "name", json_text (vname));
    json_put (o, "md_name", json_text (sb[0].set_name));
    json_put (o, "uuid", json_text (uuid));
    json_put (o, "md_version", json_object_new_int64 ((int64_t) sb[0].minor));
    for (unsigned i = 0; i < n; ++i)
      json_object_array_add (m, json_text (path[i]));
    json_put (o, "members", m);
    json_put (o, "chunk", json_u64 (cfg.chunk));
    json_put (o, "layout", json_text (layout_name (a->layout)));
    json_put (o, "size", json_u64 (l->size));
    print_json (o);
  }
  else {
    char hs[32];
    fprintf (out ? stdout : stderr,
             "md raid0 array '%s' (UUID %s): %u members, chunk %" PRIu64
             ", layout %s, %s (%" PRIu64 " bytes, %" PRIu64 " KiB as "
             "mdadm --detail says)%s%s\n",
             md_super_name_shown (&sb[0], nm), uuid, n, cfg.chunk,
             layout_name (a->layout),
             human_size (l->size, hs, sizeof hs), l->size, l->size / 1024,
             out ? ": config written to " : "", out ? out : "");
  }
  status = 0;

done:
  if (json && status != 0) {
    struct json_object *o = json_object_new_object ();

    json_put (o, "config", json_text (out));
    json_put (o, "written", json_object_new_boolean (false));
    print_json (o);
  }
  if (fp && fp != stdout)
    fclose (fp);
  if (tmp[0])
    unlink (tmp);
  if (path)
    for (unsigned i = 0; i < n; ++i)
      free (path[i]);
  free (path);
  free (sb);
  if (a)
    assembly_free (a);
  free (a);
  free (l);
  return status;
}
