/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe lost-files: the files of an ext2/3/4 file system on a served
 * volume that a loss takes -- every byte of the members the volume is
 * served without (serve --degraded) and of member INDEX (--member: "what
 * if it died", too), the volume's lost ranges (lost.h, as its headers
 * keep them) and what the server's last scrub found unreadable (the
 * "scrub" of its status).
 *
 * The layout and the lost ranges come from the members' headers, opened
 * read-only as check opens them; the file system is read through the
 * server (nbdio.c), as its clients see it: the command never mounts it
 * and never writes.  A file system libext2fs cannot open gets the lost
 * byte ranges and "cannot name files on this file system".
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>
#include <libnbd.h>

#include "array.h"
#include "control.h"
#include "json.h"
#include "jsonout.h"
#include "lost_files.h"
#include "nbdstripe.h"
#include "status.h"
#include "util.h"

/* What the headers say: the layout, its map (the layout's member j is
 * the config's map[j]) and the lost ranges.  *members (bit i: the
 * config's member i, the one --member asked about) gets the members
 * that cannot be read (a volume served without them), which *missing
 * says too.  0, or -1 (said).
 */
static int
read_volume (const struct stripe_config *cfg, struct layout *l, uint8_t *map,
             struct lost *lost, uint64_t *members, uint64_t *missing)
{
  const struct volume_options o = { .readonly = true, .raw = true };
  /* degraded: the members that cannot be read (a volume served without
   * them) are left out, and are members whose files are asked for.
   * Assembly places them as the volume served degraded did, or refuses
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
  memcpy (map, a->volume.map, sizeof a->volume.map);
  *missing = a->volume.missing;
  /* The member asked about must hold data; a missing one holds some,
   * or the volume could not have been served without it.
   */
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i) {
    bool placed = false;

    if (!(*members >> i & 1))
      continue;
    for (unsigned j = 0; j < a->volume.layout.nr_members; ++j)
      placed |= a->volume.map[j] == i;
    if (!placed) {
      fprintf (stderr, "nbdstripe: %s: member %u holds no data\n", cfg->name,
               i);
      goto out;
    }
  }
  *members |= *missing;
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

/* The file system through h: the primary superblock, else a backup,
 * where mke2fs puts them.  With sparse_super (every ext4 mke2fs
 * makes) the backups are in groups 1 and the powers of 3, 5 and 7; a
 * group holds 8 x block size blocks unless mke2fs -g made it smaller.
 * A member can hold the primary and the first backups together (on a
 * volume of 4 members, group 1 of 4 KiB blocks and 8192-block groups
 * is chunk 512 of 64K: member 0, as block 0 is), so the others are
 * tried too: most likely first, and none past the end of the volume.
 * A try costs one read of a superblock.
 */
static ext2_filsys
open_fs (struct nbd_handle *h, const char *name)
{
  static const unsigned groups[] = { 1, 3, 5, 7, 9, 25, 27, 49, 81, 125 };
  static const unsigned sizes[] = { 4096, 1024, 2048 };
  int64_t bytes = nbd_get_size (h);
  ext2_filsys fs;

  if (ext2fs_open2 (name, NULL, EXT2_FLAG_64BITS, 0, 0, nbdio_manager (h),
                    &fs)
      == 0)
    return fs;
  /* per_group = 8 x block size >> shift: the default first, then the
   * smaller groups mke2fs -g makes, down to 1024 blocks.
   */
  for (unsigned shift = 0; shift < 6; ++shift)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
      uint64_t bs = sizes[k], per_group = 8 * bs >> shift;

      if (per_group < 1024)
        continue;
      for (size_t g = 0; g < sizeof groups / sizeof groups[0]; ++g) {
        /* 1 KiB blocks: block 0 is the boot block, groups start at 1 */
        blk64_t super = groups[g] * per_group + (bs == 1024);

        if (bytes >= 0 && (super + 1) * bs > (uint64_t) bytes)
          break;
        if (ext2fs_open2 (name, NULL,
                          EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS,
                          super, (unsigned) bs, nbdio_manager (h), &fs)
            == 0)
          return fs;
      }
    }
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
  uint64_t members; /* bit i: the config's member i, asked about or missing */
  uint64_t missing; /* bit i: the config's member i is missing */
  uint64_t member_bytes[LAYOUT_MAX_MEMBERS]; /* of the volume, on each */
  struct lost lost;
  /* What the last scrub found unreadable, sorted, apart (scrub_known:
   * the server's status could be read).
   */
  struct lost_range *scrub;
  size_t nr_scrub;
  bool scrub_known, scrub_truncated;
  struct lost_range *ranges; /* the lost and the scrub's, merged */
  size_t nr_ranges;
  const char *kind; /* NULL: not a file system we know */
  struct lost_files_report r;
  uint64_t lost_bytes; /* the files' */
};

static uint64_t
ranges_total (const struct lost_range *r, size_t n)
{
  uint64_t t = 0;

  for (size_t i = 0; i < n; ++i)
    t += r[i].length;
  return t;
}

/* The last scrub's findings: the first few ranges. */
static void
print_scrub (const struct result *s)
{
  char buf[1024];
  size_t n = 0;

  if (s->nr_scrub == 0)
    return;
  for (size_t i = 0; i < s->nr_scrub && n < sizeof buf - 64; ++i) {
    if (i == 16) {
      n += snprintf (buf + n, sizeof buf - n, ", ... %zu more",
                     s->nr_scrub - i);
      break;
    }
    n += snprintf (buf + n, sizeof buf - n, "%s%" PRIu64 "+%" PRIu64,
                   i ? ", " : "", s->scrub[i].offset, s->scrub[i].length);
  }
  printf ("unreadable where the last scrub read: %" PRIu64 " bytes: %s%s\n",
          ranges_total (s->scrub, s->nr_scrub), buf,
          s->scrub_truncated ? " (the scrub kept only the first it found)"
                             : "");
}

static void
print_ranges (const struct result *s)
{
  char buf[8192];

  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    if (s->members >> i & 1)
      printf ("member %u%s: every chunk of it, %" PRIu64
              " bytes of the volume\n",
              i, s->missing >> i & 1 ? " (missing)" : "", s->member_bytes[i]);
  if (s->lost.nr) {
    lost_format (&s->lost, buf, sizeof buf);
    printf ("lost ranges of the volume (%" PRIu64 " bytes): %s\n",
            lost_bytes (&s->lost), buf);
  }
  else if (s->members == 0)
    printf ("the volume has no lost ranges\n");
  print_scrub (s);
}

/* "member 1 (missing) or member 2 or the lost ranges" */
static void
loss_name (const struct result *s, char *buf, size_t len)
{
  size_t n = 0;

  buf[0] = '\0';
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS && n < len; ++i)
    if (s->members >> i & 1)
      n += snprintf (buf + n, len - n, "%smember %u%s", n ? " or " : "", i,
                     s->missing >> i & 1 ? " (missing)" : "");
  if (s->lost.nr && n < len)
    n += snprintf (buf + n, len - n, "%s", n ? " or the lost ranges"
                                             : "the volume's lost ranges");
  if (s->nr_scrub && n < len)
    n += snprintf (buf + n, len - n, "%sthe scrub's unreadable ranges",
                   n ? " or " : "");
  if (n == 0)
    snprintf (buf, len, "the volume's lost ranges");
}

static void
print_text (const struct result *s)
{
  const struct lost_files_report *r = &s->r;
  char what[1024];

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
              "losses; the first backup the loss leaves is at block %llu "
              "(e2fsck -b %llu)\n",
              (unsigned long long) r->backup_super,
              (unsigned long long) r->backup_super);
    else
      printf ("the primary superblock or group descriptors are among the "
              "losses, and no backup of them survives it\n");
  }
  if (r->nr_unnamed) {
    printf ("unnamed inodes (in use, reached by no name):");
    for (size_t i = 0; i < r->nr_unnamed; ++i)
      printf (" %u", r->unnamed[i]);
    printf ("\n");
  }
  if (r->unreadable)
    printf ("some blocks could not be read: the list may be incomplete\n");
  print_scrub (s);
  loss_name (s, what, sizeof what);
  printf ("%zu file%s of %zu touch %s, %" PRIu64 " bytes lost\n", r->nr_files,
          r->nr_files == 1 ? "" : "s", r->nr_seen, what, s->lost_bytes);
}

static struct json_object *
members_json (uint64_t mask)
{
  struct json_object *a = json_object_new_array ();

  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    if (mask >> i & 1)
      json_object_array_add (a, json_object_new_int ((int) i));
  return a;
}

static struct json_object *
ranges_json (const struct lost_range *r, size_t n)
{
  struct json_object *a = json_object_new_array ();

  for (size_t i = 0; i < n; ++i) {
    struct json_object *x = json_object_new_object ();

    json_put (x, "offset", json_u64 (r[i].offset));
    json_put (x, "length", json_u64 (r[i].length));
    json_object_array_add (a, x);
  }
  return a;
}

static void
print_result_json (const struct result *s, bool ok, const char *err)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *files = NULL, *unnamed = NULL;
  const struct lost_files_report *r = &s->r;
  bool named = ok && s->kind;

  json_put (o, "config", s->cfg ? json_text (s->cfg->path) : NULL);
  json_put (o, "name", s->cfg ? json_text (s->cfg->name) : NULL);
  /* member: the one member counted, as before there could be several */
  json_put (o, "member",
            s->members && !(s->members & (s->members - 1))
              ? json_object_new_int (__builtin_ctzll (s->members))
              : NULL);
  json_put (o, "members", members_json (s->members));
  json_put (o, "missing", members_json (s->missing));
  json_put (o, "lost_ranges", ranges_json (s->lost.r, s->lost.nr));
  json_put (o, "scrub_ranges",
            s->scrub_known ? ranges_json (s->scrub, s->nr_scrub) : NULL);
  json_put (o, "scrub_truncated",
            s->scrub_known ? json_object_new_boolean (s->scrub_truncated)
                           : NULL);
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

static int
by_offset (const void *a, const void *b)
{
  const struct lost_range *x = a, *y = b;

  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* r[0..n) sorted, and overlapping or touching ranges merged: the new n. */
static size_t
ranges_merge (struct lost_range *r, size_t n)
{
  size_t k = 0;

  if (n > 1)
    qsort (r, n, sizeof *r, by_offset);
  for (size_t i = 0; i < n; ++i) {
    if (k && r[k - 1].offset + r[k - 1].length >= r[i].offset) {
      uint64_t end = r[i].offset + r[i].length;

      if (end > r[k - 1].offset + r[k - 1].length)
        r[k - 1].length = end - r[k - 1].offset;
    }
    else
      r[k++] = r[i];
  }
  return k;
}

/* The members the server runs without ("missing" in its status), as
 * a mask of config indices; those this command could not open must be
 * the same.  One it cannot open that the server reads (a file this
 * user may not read, a remote export that takes one client) is not
 * lost: -1, said.  One the server runs without that opens here again
 * (put back after a degraded serve) is lost to the server's clients,
 * whose reads of it fail: added.
 */
static int
check_missing (struct result *s, struct json_object *st)
{
  struct json_object *members = field (st, "members", json_type_array);
  uint64_t served = 0, idx;

  for (size_t k = 0; members && k < json_object_array_length (members);
       ++k) {
    struct json_object *m = json_object_array_get_idx (members, k);

    if (text_is (m, "state", "missing") && get_uint (m, "index", &idx)
        && idx < s->cfg->nr_members)
      served |= UINT64_C (1) << idx;
  }
  for (unsigned i = 0; i < s->cfg->nr_members; ++i)
    if ((s->missing & ~served) >> i & 1) {
      fprintf (stderr,
               "nbdstripe: %s: member %u (%s) cannot be read here, but its "
               "server reads it: run lost-files as a user that can read "
               "every member, as the server does\n",
               s->cfg->name, i, s->cfg->members[i]);
      return -1;
    }
  s->missing |= served;
  s->members |= served;
  return 0;
}

/* What the server says: the members it runs without (check_missing),
 * and what its last scrub found unreadable, in the volume's byte
 * ranges: its live status (the control socket), else the status file
 * it keeps.  A scrub's findings live as long as the server (and until
 * the next scrub), as its status says them.  0; -1 (out of memory);
 * -2 (said); a status that cannot be read is said, and leaves the
 * findings unknown.
 */
static int
read_server (struct result *s)
{
  const struct stripe_config *cfg = s->cfg;
  struct json_object *scrub, *list;
  char ctl[4096];
  struct view w;
  size_t n;

  control_path (cfg->health.status_file, ctl, sizeof ctl);
  if (!judge_live (ctl, cfg->name, cfg->health.set.interval, now_unix (),
                   false, &w))
    judge (cfg->health.status_file, cfg->name, cfg->health.set.interval,
           now_unix (), false, &w);
  if (!w.format_ok) {
    fprintf (stderr,
             "nbdstripe: warning: %s: what the last scrub found, and which "
             "members the server runs without, is not known: %s\n",
             cfg->name, w.reason[0] ? w.reason : "no status");
    view_free (&w);
    return 0;
  }
  if (check_missing (s, w.st) == -1) {
    view_free (&w);
    return -2;
  }
  s->scrub_known = true;
  scrub = field (w.st, "scrub", json_type_object);
  list = field (scrub, "unreadable", json_type_array);
  n = list ? json_object_array_length (list) : 0;
  s->scrub_truncated =
    json_object_get_boolean (field (scrub, "truncated", json_type_boolean));
  if (n && (s->scrub = calloc (n, sizeof *s->scrub)) == NULL) {
    view_free (&w);
    return -1;
  }
  for (size_t i = 0; i < n; ++i) {
    struct json_object *x = json_object_array_get_idx (list, i);
    uint64_t off, len;

    if (get_uint (x, "offset", &off) && get_uint (x, "length", &len) && len
        && off + len > off)
      s->scrub[s->nr_scrub++] = (struct lost_range){ off, len };
  }
  s->nr_scrub = ranges_merge (s->scrub, s->nr_scrub);
  view_free (&w);
  return 0;
}

/* The loss's ranges: the lost ones and the scrub's, merged. */
static int
merge_ranges (struct result *s)
{
  size_t n = s->lost.nr + s->nr_scrub;

  if (n == 0)
    return 0;
  s->ranges = malloc (n * sizeof *s->ranges);
  if (s->ranges == NULL)
    return -1;
  memcpy (s->ranges, s->lost.r, s->lost.nr * sizeof *s->ranges);
  if (s->nr_scrub)
    memcpy (s->ranges + s->lost.nr, s->scrub, s->nr_scrub * sizeof *s->ranges);
  s->nr_ranges = ranges_merge (s->ranges, n);
  return 0;
}

/* Open, walk, say.  0 (listed), or 1 (said why). */
static int
lost_files (struct result *s, bool json)
{
  struct layout l;
  struct loss x = { .layout = &l };
  struct nbd_handle *h;
  ext2_filsys fs;
  uint8_t map[LAYOUT_MAX_MEMBERS];
  char why[256];
  int r = 1;

  if (read_volume (s->cfg, &l, map, &s->lost, &s->members, &s->missing) == -1)
    return 1;
  h = connect_volume (s->cfg);
  if (h == NULL)
    return 1;
  switch (read_server (s)) {
  case -2: goto out;
  case -1:
    fprintf (stderr, "nbdstripe: %s: %s\n", s->cfg->name, strerror (ENOMEM));
    goto out;
  }
  if (merge_ranges (s) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", s->cfg->name, strerror (ENOMEM));
    goto out;
  }
  x.ranges = s->ranges;
  x.nr_ranges = s->nr_ranges;
  for (unsigned j = 0; j < l.nr_members; ++j) {
    const struct loss one = { .layout = &l, .members = UINT64_C (1) << j };
    unsigned i = map[j];

    if (s->members >> i & 1) {
      x.members |= one.members;
      s->member_bytes[i] = loss_bytes (&one, 0, l.size);
    }
    if (s->missing >> i & 1)
      x.gone |= one.members;
  }
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
  struct result s = { 0 };
  char err[1024] = "", *end;
  bool json = false;
  int c, r, member = -1;

  while ((c = getopt_long (argc, argv, "m:jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'm':
      member = (int) strtol (optarg, &end, 10);
      if (*optarg < '0' || *optarg > '9' || *end || member < 0
          || member >= LAYOUT_MAX_MEMBERS)
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
    if (member >= (int) cfg.nr_members)
      r = cli_usage_error (cmd, "%s has no member %d (0 to %u)", argv[optind],
                           member, cfg.nr_members - 1);
    else {
      if (member >= 0)
        s.members = UINT64_C (1) << member;
      r = lost_files (&s, json);
      if (r == 0 && !json)
        print_text (&s);
    }
  }
  if (json)
    print_result_json (&s, r == 0, err);
  lost_files_report_free (&s.r);
  free (s.scrub);
  free (s.ranges);
  if (s.cfg)
    config_free (&cfg);
  return r;
}
