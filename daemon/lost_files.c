/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe lost-files: the files of an ext2/3/4 file system on a served
 * volume that a loss takes -- every byte of member INDEX (--member:
 * "what if it died") and the volume's lost ranges (lost.h, as its
 * headers keep them).
 *
 * The layout and the lost ranges come from the members' headers, opened
 * read-only as check opens them; the file system is read through the
 * server (nbdio.c), as its clients see it: the command never mounts it
 * and never writes.  A file system libext2fs cannot open gets the lost
 * byte ranges and "cannot name files on this file system".
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>
#include <libnbd.h>

#include "array.h"
#include "json.h"
#include "jsonout.h"
#include "lost_files.h"
#include "nbdstripe.h"

/* What the headers say: the layout and the lost ranges.  member is the
 * config's index, turned into the layout's; a member that cannot be
 * read is the member asked about (*missing: its config index).  0, or
 * -1 (said).
 */
static int
read_volume (const struct stripe_config *cfg, struct layout *l,
             struct lost *lost, int *member, int *missing)
{
  const struct volume_options o = { .readonly = true, .raw = true };
  /* degraded: a member that cannot be read (a volume served without
   * it) is left out, and is the member whose files are asked for.
   * Assembly places it as the volume served degraded did, or refuses
   * as serve --degraded does, saying why (meta.h, places_missing).
   */
  const struct array_options ao = { .volume = o,
                                    .cfg = cfg,
                                    .degraded = true };
  struct array *a = calloc (1, sizeof *a);
  int r = -1;

  if (a == NULL) {
    perror ("nbdstripe: calloc");
    return -1;
  }
  if (array_open (a, &ao) == -1)
    goto out;
  if (a->assembly.reshape.active) {
    fprintf (stderr,
             "nbdstripe: %s: a grow or shrink is under way: files "
             "cannot be placed until it has finished\n",
             cfg->name);
    goto out;
  }
  *l = a->volume.layout;
  *lost = a->volume.meta.lost;
  if (a->volume.missing) {
    uint64_t m = a->volume.missing;
    int gone = __builtin_ctzll (m);

    if (m & (m - 1)) {
      fprintf (stderr,
               "nbdstripe: %s: more than one member is missing: lost-files "
               "names the files of one member at a time\n",
               cfg->name);
      goto out;
    }
    if (*member >= 0 && *member != gone) {
      fprintf (stderr,
               "nbdstripe: %s: member %d is missing: what member %d would "
               "take besides cannot be told apart\n",
               cfg->name, gone, *member);
      goto out;
    }
    *member = gone;
    *missing = gone;
  }
  if (*member >= 0) {
    int j = -1;

    for (unsigned i = 0; i < a->volume.layout.nr_members; ++i)
      if (a->volume.map[i] == (unsigned) *member)
        j = (int) i;
    if (j < 0) {
      fprintf (stderr, "nbdstripe: %s: member %d holds no data\n", cfg->name,
               *member);
      goto out;
    }
    *member = j;
  }
  r = 0;
out:
  array_close (a);
  free (a);
  return r;
}

/* The user name of a PSK file's first key ("alice:00112233..."): nbdkit
 * takes any name the file lists, libnbd would send the login name.
 */
static int
psk_username (struct nbd_handle *h, const char *psk)
{
  char line[512], *colon;
  FILE *fp = fopen (psk, "r");
  int r = 0;

  if (fp == NULL)
    return 0; /* libnbd says why when it reads the file */
  if (fgets (line, sizeof line, fp) && (colon = strchr (line, ':')) != NULL) {
    *colon = '\0';
    r = nbd_set_tls_username (h, line);
  }
  fclose (fp);
  return r;
}

/* A connection to the volume's server, as its config says it listens. */
static struct nbd_handle *
connect_volume (const struct stripe_config *cfg)
{
  struct nbd_handle *h = nbd_create ();
  char port[16], where[300];
  int r;

  if (h == NULL)
    goto fail;
  if (nbd_set_export_name (h, cfg->serve.export_name ? cfg->serve.export_name
                                                     : "")
      == -1)
    goto fail;
  if (cfg->serve.tls != TLS_OFF) {
    if (nbd_set_tls (h, LIBNBD_TLS_REQUIRE) == -1
        || (cfg->serve.tls_psk
            && (nbd_set_tls_psk_file (h, cfg->serve.tls_psk) == -1
                || psk_username (h, cfg->serve.tls_psk) == -1))
        || (cfg->serve.tls_certificates
            && nbd_set_tls_certificates (h, cfg->serve.tls_certificates)
                 == -1))
      goto fail;
  }
  if (cfg->serve.socket)
    r = nbd_connect_unix (h, cfg->serve.socket);
  else {
    snprintf (port, sizeof port, "%d", cfg->serve.port);
    r = nbd_connect_tcp (h, cfg->serve.address, port);
  }
  if (r == -1)
    goto fail;
  return h;

fail:
  if (cfg->serve.socket)
    snprintf (where, sizeof where, "%s", cfg->serve.socket);
  else
    snprintf (where, sizeof where, "%s:%d", cfg->serve.address,
              cfg->serve.port);
  fprintf (stderr,
           "nbdstripe: %s: cannot read it through its server (%s): %s; "
           "lost-files needs it served: nbdstripe serve %s\n",
           cfg->name, where,
           nbd_get_error () ? nbd_get_error () : "out of memory", cfg->path);
  nbd_close (h);
  return NULL;
}

/* The file system through h: the primary superblock, else the backups
 * where mke2fs puts them for each block size.
 */
static ext2_filsys
open_fs (struct nbd_handle *h, const char *name)
{
  static const struct {
    blk64_t super;
    unsigned block_size;
  } tries[] = {
    /* the primary; then the first backup, in group 1, for the default
     * group of 8 x block size blocks, and for smaller groups (mke2fs
     * -g) of 4 KiB blocks
     */
    { 0, 0 },          { 8193, 1024 },    { 16384, 2048 }, { 32768, 4096 },
    { 16384, 4096 },   { 8192, 4096 },
  };
  ext2_filsys fs;

  for (size_t i = 0; i < sizeof tries / sizeof tries[0]; ++i)
    if (ext2fs_open2 (name, NULL,
                      EXT2_FLAG_64BITS
                        | (i ? EXT2_FLAG_IGNORE_CSUM_ERRORS : 0),
                      tries[i].super,
                      tries[i].block_size, nbdio_manager (h), &fs)
        == 0)
      return fs;
  return NULL;
}

static const char *
fs_kind (ext2_filsys fs)
{
  if (ext2fs_has_feature_extents (fs->super)
      || ext2fs_has_feature_flex_bg (fs->super)
      || ext2fs_has_feature_64bit (fs->super))
    return "ext4";
  return ext2fs_has_feature_journal (fs->super) ? "ext3" : "ext2";
}

struct result {
  const struct stripe_config *cfg;
  int member;  /* the config's index, -1: none */
  int missing; /* the config's index of a member missing, -1: none */
  struct lost lost;
  uint64_t member_bytes; /* of the volume, on the member */
  const char *kind;      /* NULL: not a file system we know */
  struct lost_files_report r;
  uint64_t lost_bytes; /* the files' */
};

static void
print_ranges (const struct result *s)
{
  char buf[8192];

  if (s->member >= 0)
    printf ("member %d: every chunk of it, %" PRIu64 " bytes of the volume\n",
            s->member, s->member_bytes);
  if (s->lost.nr) {
    lost_format (&s->lost, buf, sizeof buf);
    printf ("lost ranges of the volume (%" PRIu64 " bytes): %s\n",
            lost_bytes (&s->lost), buf);
  }
  else if (s->member < 0)
    printf ("the volume has no lost ranges\n");
}

static void
print_text (const struct result *s)
{
  const struct lost_files_report *r = &s->r;
  char what[64];

  for (size_t i = 0; i < r->nr_files; ++i) {
    const struct lost_file *f = &r->files[i];
    /* A name is whatever bytes the file system holds: escaped for the
     * terminal (safe_text), at most 6 bytes ("\\u009b") for each.
     */
    size_t n = strlen (f->path), len = 6 * n + 8;
    char *safe = malloc (len);

    printf ("%s  inode %u  %" PRIu64 " of %" PRIu64 " bytes lost%s\n",
            safe ? safe_text (f->path, n, safe, len) : "?", f->ino,
            f->lost_bytes, f->bytes,
            f->metadata_lost ? ", metadata lost" : "");
    free (safe);
  }
  if (r->dir_blocks_lost)
    printf ("directory blocks are among the losses: the names in them go "
            "with them\n");
  if (r->inode_tables_lost)
    printf ("inode table blocks are among the losses: the files whose "
            "inodes they hold are lost\n");
  if (r->super_lost) {
    if (r->backup_super)
      printf ("the primary superblock or group descriptors are among the "
              "losses; backups exist (the first at block %llu: e2fsck -b "
              "%llu)\n",
              (unsigned long long) r->backup_super,
              (unsigned long long) r->backup_super);
    else
      printf ("the primary superblock or group descriptors are among the "
              "losses, and the file system has no backup\n");
  }
  if (r->nr_unnamed) {
    printf ("unnamed inodes (in use, reached by no name):");
    for (size_t i = 0; i < r->nr_unnamed; ++i)
      printf (" %u", r->unnamed[i]);
    printf ("\n");
  }
  if (r->unreadable)
    printf ("some blocks could not be read: the list may be incomplete\n");
  if (s->member >= 0 && s->lost.nr)
    snprintf (what, sizeof what, "member %d or the lost ranges", s->member);
  else if (s->member >= 0)
    snprintf (what, sizeof what, "member %d%s", s->member,
              s->missing >= 0 ? " (missing)" : "");
  else
    snprintf (what, sizeof what, "the volume's lost ranges");
  printf ("%zu file%s of %zu touch %s, %" PRIu64 " bytes lost\n", r->nr_files,
          r->nr_files == 1 ? "" : "s", r->nr_seen, what, s->lost_bytes);
}

static void
print_result_json (const struct result *s, bool ok, const char *err)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *ranges = json_object_new_array ();
  struct json_object *files = NULL, *unnamed = NULL;
  const struct lost_files_report *r = &s->r;
  bool named = ok && s->kind;

  json_put (o, "config", s->cfg ? json_text (s->cfg->path) : NULL);
  json_put (o, "name", s->cfg ? json_text (s->cfg->name) : NULL);
  json_put (o, "member",
            s->member >= 0 ? json_object_new_int (s->member) : NULL);
  for (unsigned i = 0; i < s->lost.nr; ++i) {
    struct json_object *x = json_object_new_object ();

    json_put (x, "offset", json_u64 (s->lost.r[i].offset));
    json_put (x, "length", json_u64 (s->lost.r[i].length));
    json_object_array_add (ranges, x);
  }
  json_put (o, "lost_ranges", ranges);
  json_put (o, "filesystem", s->kind ? json_text (s->kind) : NULL);
  if (named) {
    files = json_object_new_array ();
    for (size_t i = 0; i < r->nr_files; ++i) {
      const struct lost_file *f = &r->files[i];
      struct json_object *x = json_object_new_object ();

      json_put (x, "path", json_text (f->path));
      json_put (x, "inode", json_u64 (f->ino));
      json_put (x, "bytes", json_u64 (f->bytes));
      json_put (x, "lost_bytes", json_u64 (f->lost_bytes));
      json_put (x, "metadata_lost",
                json_object_new_boolean (f->metadata_lost));
      json_object_array_add (files, x);
    }
    unnamed = json_object_new_array ();
    for (size_t i = 0; i < r->nr_unnamed; ++i)
      json_object_array_add (unnamed, json_u64 (r->unnamed[i]));
  }
  json_put (o, "files", files);
  json_put (o, "unnamed_inodes", unnamed);
  json_put (o, "files_seen", named ? json_u64 (r->nr_seen) : NULL);
  json_put (o, "lost_bytes", named ? json_u64 (s->lost_bytes) : NULL);
  json_put (o, "directory_blocks_lost",
            named ? json_object_new_boolean (r->dir_blocks_lost) : NULL);
  json_put (o, "inode_tables_lost",
            named ? json_object_new_boolean (r->inode_tables_lost) : NULL);
  json_put (o, "superblock_lost",
            named ? json_object_new_boolean (r->super_lost) : NULL);
  json_put (o, "backup_superblock",
            named && r->backup_super ? json_u64 (r->backup_super) : NULL);
  json_put (o, "complete",
            named ? json_object_new_boolean (!r->unreadable) : NULL);
  jsonout_result (o, ok, err, false);
}

/* Open, walk, say.  0 (listed), or 1 (said why). */
static int
lost_files (struct result *s, bool json)
{
  struct layout l;
  struct loss x = { .layout = &l, .member = s->member, .lost = &s->lost };
  struct loss whole = { .layout = &l, .member = -1 };
  struct nbd_handle *h;
  ext2_filsys fs;
  char why[256];
  int r = 1;

  if (read_volume (s->cfg, &l, &s->lost, &x.member, &s->missing) == -1)
    return 1;
  if (s->missing >= 0) {
    s->member = s->missing;
    x.member_gone = true;
  }
  whole.member = x.member;
  if (x.member >= 0)
    s->member_bytes = loss_bytes (&whole, 0, l.size);
  h = connect_volume (s->cfg);
  if (h == NULL)
    return 1;
  fs = open_fs (h, s->cfg->name);
  if (fs == NULL) {
    if (!json)
      print_ranges (s);
    fprintf (stderr,
             "nbdstripe: %s: cannot name files on this file "
             "system (not ext2, ext3 or ext4)\n",
             s->cfg->name);
    goto out;
  }
  s->kind = fs_kind (fs);
  if (lost_files_walk (fs, &x, &s->r, why, sizeof why) == -1)
    fprintf (stderr, "nbdstripe: %s: %s\n", s->cfg->name, why);
  else {
    for (size_t i = 0; i < s->r.nr_files; ++i)
      s->lost_bytes += s->r.files[i].lost_bytes;
    r = 0;
  }
  ext2fs_close_free (&fs);
out:
  nbd_close (h);
  return r;
}

int
cmd_lost_files (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "member", required_argument, NULL, 'm' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct result s = { .member = -1, .missing = -1 };
  char err[1024] = "", *end;
  bool json = false;
  int c, r;

  while ((c = getopt_long (argc, argv, "m:jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'm':
      s.member = (int) strtol (optarg, &end, 10);
      if (*optarg < '0' || *optarg > '9' || *end || s.member < 0
          || s.member >= LAYOUT_MAX_MEMBERS)
        return cli_usage_error (cmd, "--member: not a member index: '%s'",
                                optarg);
      break;
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((r = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return r;
  if (json)
    jsonout_watch_stderr ();

  if (load_volume (argv[optind], &cfg, err, sizeof err) == -1)
    r = 1;
  else {
    s.cfg = &cfg;
    if (s.member >= (int) cfg.nr_members)
      r = cli_usage_error (cmd, "%s has no member %d (0 to %u)", argv[optind],
                           s.member, cfg.nr_members - 1);
    else {
      r = lost_files (&s, json);
      if (r == 0 && !json)
        print_text (&s);
    }
  }
  if (json)
    print_result_json (&s, r == 0, err);
  lost_files_report_free (&s.r);
  if (s.cfg)
    config_free (&cfg);
  return r;
}
