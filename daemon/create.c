/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe create: write the member headers of a new volume: nbdstripe
 * headers, or (metadata = "md") Linux md v1.2 superblocks that mdadm
 * assembles.
 *
 * Order matters: every check (config, members distinct and big enough,
 * nothing recognisable on them unless --force) passes before anything is
 * written; then the optional discard; then the headers.  Creation is
 * all-or-nothing: if one header cannot be written, the members already
 * written get their previous bytes back, so that no member is left
 * claiming to be part of an array that does not exist.
 *
 * What is written: the header (at 0), or the md superblock (at 4 KiB);
 * and zeros over the other 4 KiB of the first 8 and over an md 1.0
 * superblock near the end when an older nbdstripe header or md
 * superblock is there, so that none is left behind to be assembled by
 * mistake.  Nothing else.
 *
 * A member is a path or an NBD URI, opened raw (member.h): a remote
 * member gets its header as a local one does (written, then flushed), and
 * libblkid looks at a copy of its first and last MiB.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <blkid.h>
#include <uuid.h>

#include "layout.h"
#include "log.h"
#include "md_super.h"
#include "nbdstripe.h"
#include "member.h"
#include "header.h"
#include "json.h"

/* The bytes create writes at the start of each member. */
#define META_BYTES (2 * HEADER_SIZE)

struct target {
  const char *path; /* or URI */
  struct member dev;
  bool opened;
  uint8_t old_header[META_BYTES]; /* restored if creation fails */
  unsigned blocks; /* bit k: the 4 KiB at k * 4096 are written */
  /* An md 1.0 superblock found near the end: cleared (and restored). */
  bool has_tail;
  uint64_t tail_at;
  uint8_t old_tail[MD_SUPER_BYTES];
};

/* What libblkid (or our own magic, in first: the member's first 4 KiB)
 * recognises on the member (nbdstripe.h).
 */
const char *
recognise_member (struct member *m, const uint8_t *first, char *what,
                  size_t len)
{
  blkid_probe pr;
  const char *type = NULL;
  char why[256];
  int fd;

  if (memcmp (first, HEADER_MAGIC, 8) == 0) {
    struct header sb;
    if (header_decode (first, HEADER_SIZE, &sb, NULL) == HEADER_OK) {
      char uuid[37];
      uuid_format (sb.array_uuid, uuid);
      snprintf (what, len,
                "is already member %" PRIu32 " of nbdstripe "
                "volume '%s' (%s)",
                sb.member_index, sb.name, uuid);
    }
    else
      snprintf (what, len, "holds an nbdstripe header (damaged)");
    return what;
  }

  fd = m->ops->probe_fd (m, why, sizeof why);
  if (fd == -1) {
    snprintf (what, len, "cannot be probed for signatures (%s)", why);
    return what;
  }
  pr = blkid_new_probe ();
  if (pr == NULL)
    return NULL;
  if (blkid_probe_set_device (pr, fd, 0, 0) == 0) {
    blkid_probe_enable_superblocks (pr, 1);
    blkid_probe_set_superblocks_flags (pr,
                                       BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL);
    blkid_probe_enable_partitions (pr, 1);
    int r = blkid_do_safeprobe (pr);
    if (r == 0) {
      const char *v;
      if (blkid_probe_lookup_value (pr, "TYPE", &v, NULL) == 0)
        snprintf (what, len,
                  "holds a signature of type %s (filesystem, RAID or "
                  "LVM)",
                  v);
      else if (blkid_probe_lookup_value (pr, "PTTYPE", &v, NULL) == 0)
        snprintf (what, len, "holds a %s partition table", v);
      else
        snprintf (what, len, "holds a recognisable signature");
      type = what;
    }
    else if (r == -2) {
      snprintf (what, len, "holds several conflicting signatures");
      type = what;
    }
  }
  blkid_free_probe (pr);
  return type;
}

static int
open_target (unsigned i, struct target *t)
{
  char why[512];
  ssize_t n;

  const struct member_open_params params = { .raw = true };

  if (member_open (&t->dev, i, t->path, &params, why, sizeof why) == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
    return -1;
  }
  t->opened = true;
  memset (t->old_header, 0, sizeof t->old_header);
  n = member_pread (&t->dev, t->old_header, sizeof t->old_header, 0, false,
                    why, sizeof why);
  if (n == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
    return -1;
  }
  /* An md 1.0 superblock lives near the end, out of the way of the rest. */
  if (md_super_location (0, t->dev.size, &t->tail_at)
      && t->tail_at >= META_BYTES) {
    n = member_pread (&t->dev, t->old_tail, sizeof t->old_tail, t->tail_at,
                      false, why, sizeof why);
    if (n == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
      return -1;
    }
    t->has_tail = n == (ssize_t) sizeof t->old_tail
                  && t->old_tail[0] == 0xfc && t->old_tail[1] == 0x4e
                  && t->old_tail[2] == 0x2b && t->old_tail[3] == 0xa9;
  }
  return 0;
}

/* Discard [offset, offset + len) in steps, with a progress bar on a
 * terminal.  Advisory: a member that cannot discard is only reported.
 */
static int
discard_data (unsigned i, struct target *t, uint64_t offset, uint64_t len)
{
  const uint64_t step = 1024ull * 1024 * 1024;
  bool tty = isatty (STDERR_FILENO);
  char why[512];

  for (uint64_t done = 0; done < len;) {
    uint64_t n = len - done < step ? len - done : step;

    if (t->dev.ops->discard (&t->dev, offset + done, n, why, sizeof why)
        == -1) {
      if (tty && done > 0)
        fputc ('\n', stderr);
      if (errno == EOPNOTSUPP) {
        fprintf (stderr, "nbdstripe: member %u (%s): %s, skipped\n", i,
                 t->path, why);
        return 0;
      }
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
      return -1;
    }
    done += n;
    if (tty)
      fprintf (stderr, "\rdiscarding member %u (%s): %3d%%", i, t->path,
               (int) (done * 100 / len));
  }
  if (tty)
    fputc ('\n', stderr);
  return 0;
}

/* Write the first META_BYTES (and tail, if the member has one there) and
 * make them durable.  *sync_failed tells that the writes landed and only
 * making them durable failed.
 */
static int
write_header (struct target *t, const uint8_t *buf, const uint8_t *tail,
              bool *sync_failed, char *why, size_t len)
{
  *sync_failed = false;
  for (unsigned k = 0; k < META_BYTES / HEADER_SIZE; ++k)
    if ((t->blocks >> k & 1)
        && member_pwrite (&t->dev, buf + k * HEADER_SIZE, HEADER_SIZE,
                          k * HEADER_SIZE, why, len)
             == -1)
      return -1;
  if (t->has_tail
      && member_pwrite (&t->dev, tail, MD_SUPER_BYTES, t->tail_at, why, len)
           == -1)
    return -1;
  if (member_sync (&t->dev, why, len) == -1) {
    *sync_failed = true;
    return -1;
  }
  return 0;
}

/* All or nothing: give members 0..n-1 back what they held before. */
static void
restore (struct target *t, unsigned n)
{
  bool sync_failed;
  char why[512];

  for (unsigned j = 0; j < n; ++j)
    if (write_header (&t[j], t[j].old_header, t[j].old_tail, &sync_failed,
                      why, sizeof why)
        == -1)
      fprintf (stderr,
               "nbdstripe: member %u (%s): could not restore "
               "its first %u bytes (%s): check it with "
               "'nbdstripe inspect' and wipe it by hand\n",
               j, t[j].path, META_BYTES, why);
}

/* The bytes create writes at the start of member i.  Header: the header,
 * then zeros.  md: zeros, then the v1.2 superblock at 4 KiB.  *id is
 * what reading it back must show (member or device UUID).
 */
static bool
holds_metadata (const uint8_t *p)
{
  static const uint8_t md_magic[4] = { 0xfc, 0x4e, 0x2b, 0xa9 };
  return memcmp (p, HEADER_MAGIC, 8) == 0 || memcmp (p, md_magic, 4) == 0;
}

static void
make_meta (const struct stripe_config *cfg, const struct layout *l,
           struct target *t, unsigned i, struct header *hdr,
           struct md_super *md, uint8_t buf[META_BYTES], uint8_t id[16])
{
  /* What is there stays, but another format's metadata. */
  memcpy (buf, t->old_header, META_BYTES);
  t->blocks = cfg->metadata == METADATA_MD ? 2 : 1;
  for (unsigned k = 0; k < META_BYTES / HEADER_SIZE; ++k)
    if (holds_metadata (buf + k * HEADER_SIZE)) {
      memset (buf + k * HEADER_SIZE, 0, HEADER_SIZE);
      t->blocks |= 1u << k;
    }
  if (cfg->metadata == METADATA_MD) {
    md->dev_number = i;
    uuid_generate (md->device_uuid);
    md->data_offset = cfg->data_offset / 512;
    md->data_size = (t->dev.size - cfg->data_offset) / 512;
    md_super_encode (md, buf + HEADER_SIZE);
    memcpy (id, md->device_uuid, 16);
  }
  else {
    (void) l;
    hdr->member_index = i;
    uuid_generate (hdr->member_uuid);
    header_encode (hdr, buf);
    memcpy (id, hdr->member_uuid, 16);
  }
}

/* What reading back member i shows: the UUID make_meta wrote there, or
 * false when nothing of ours is there.
 */
static bool
read_back_id (const struct stripe_config *cfg, const uint8_t buf[META_BYTES],
              uint8_t id[16])
{
  if (cfg->metadata == METADATA_MD) {
    struct md_super sb;
    if (md_super_decode (buf + HEADER_SIZE, HEADER_SIZE, HEADER_SIZE, &sb,
                         NULL)
        != MD_SUPER_OK)
      return false;
    memcpy (id, sb.device_uuid, 16);
    return true;
  }
  struct header back;
  if (header_decode (buf, HEADER_SIZE, &back, NULL) != HEADER_OK)
    return false;
  memcpy (id, back.member_uuid, 16);
  return true;
}

/* create --json: what was created, or that nothing was. */
static struct json_object *
create_json (const char *arg, const struct stripe_config *cfg, bool loaded,
             const char *err, bool created, const char *uuid,
             const struct layout *l)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *m;

  json_put (o, "config", json_text (loaded ? cfg->path : arg));
  json_put (o, "created", json_object_new_boolean (created));
  if (!loaded) {
    json_put (o, "error", json_text (err));
    return o;
  }
  json_put (o, "name", json_text (cfg->name));
  json_put (o, "metadata",
            json_text (cfg->metadata == METADATA_MD ? "md" : "header"));
  if (!created)
    return o;
  json_put (o, "uuid", json_text (uuid));
  m = json_object_new_array ();
  for (unsigned i = 0; i < cfg->nr_members; ++i)
    json_object_array_add (m, json_text (cfg->members[i]));
  json_put (o, "members", m);
  json_put (o, "chunk", json_u64 (cfg->chunk));
  json_put (o, "layout", json_text (layout_name (cfg->layout)));
  json_put (o, "data_offset", json_u64 (cfg->data_offset));
  json_put (o, "size", json_u64 (l->size));
  return o;
}

int
cmd_create (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "force", no_argument, NULL, 'f' },
    { "discard", no_argument, NULL, 'd' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct target *t = NULL;
  struct header sb;
  struct md_super *md = NULL;
  struct layout *l = NULL;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint8_t member_uuid[LAYOUT_MAX_MEMBERS][16];
  static const uint8_t zeros[MD_SUPER_BYTES];
  bool force = false, discard = false, json = false, ok = true, loaded;
  unsigned n = 0, bad;
  char uuid[37] = "", hs[32], err[1024] = "";
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "fjhV", opts, NULL)) != -1) {
    switch (c) {
    case 'f': force = true; break;
    case 'd': discard = true; break;
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;

  loaded = load_volume (argv[optind], &cfg, err, sizeof err) == 0;
  if (!loaded)
    goto out;
  if (cfg.metadata == METADATA_NONE) {
    fprintf (stderr,
             "nbdstripe: %s: metadata = \"none\": there are no "
             "headers to create; serve the volume directly\n",
             cfg.path);
    goto out;
  }
  if (cfg.metadata == METADATA_MD && strlen (cfg.name) > 32) {
    fprintf (stderr,
             "nbdstripe: %s: name: '%s' is %zu characters; an md "
             "superblock keeps at most 32\n",
             cfg.path, cfg.name, strlen (cfg.name));
    goto out;
  }
  n = cfg.nr_members;
  t = calloc (n, sizeof *t);
  l = malloc (sizeof *l);
  md = calloc (1, sizeof *md);
  if (t == NULL || l == NULL || md == NULL) {
    perror ("nbdstripe: calloc");
    goto out;
  }
  /* Every check first. */
  for (unsigned i = 0; i < n; ++i) {
    t[i].path = cfg.members[i];
    if (open_target (i, &t[i]) == -1) {
      ok = false;
      continue;
    }
    bool alias = false;
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (t[j].opened && identity_alias (&t[j].dev.id, &t[i].dev.id, how, sizeof how)) {
        alias = true;
        fprintf (stderr,
                 "nbdstripe: member %u (%s) and member %u (%s) are %s: a "
                 "member may be given only once, and members must not "
                 "overlap\n",
                 j, t[j].path, i, t[i].path, how);
        ok = false;
      }
    }
    if (!alias) {
      char why[512];
      if (member_claim (&t[i].dev, why, sizeof why) == -1) {
        fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t[i].path,
                 why);
        ok = false;
      }
    }
    if (t[i].dev.size < cfg.data_offset + cfg.chunk
        || t[i].dev.size < META_BYTES) {
      fprintf (stderr,
               "nbdstripe: member %u (%s): %" PRIu64 " bytes is "
               "too small: it needs the data offset (%" PRIu64 ") and at "
               "least one chunk (%" PRIu64 ")\n",
               i, t[i].path, t[i].dev.size, cfg.data_offset, cfg.chunk);
      ok = false;
    }
    else
      sizes[i] = (t[i].dev.size - cfg.data_offset) / cfg.chunk * cfg.chunk;
    if (!force) {
      char what[512];
      if (recognise_member (&t[i].dev, t[i].old_header, what, sizeof what)) {
        fprintf (stderr,
                 "nbdstripe: member %u (%s): %s; refusing to "
                 "overwrite it (use --force)\n",
                 i, t[i].path, what);
        ok = false;
      }
    }
  }
  if (!ok)
    goto out;
  if (layout_init_as (l, cfg.layout, LAYOUT_SIZE_MD, cfg.chunk, n, sizes,
                      &bad)
      != LAYOUT_OK) {
    fprintf (stderr, "nbdstripe: %s: cannot lay out the volume\n", cfg.path);
    goto out;
  }

  if (discard)
    for (unsigned i = 0; i < n; ++i)
      if (discard_data (i, &t[i], cfg.data_offset, sizes[i]) == -1)
        goto out;

  memset (&sb, 0, sizeof sb);
  sb.version = HEADER_VERSION;
  uuid_generate (sb.array_uuid);
  snprintf (sb.name, sizeof sb.name, "%s", cfg.name);
  sb.ctime = time (NULL);
  sb.member_count = n;
  sb.chunk = cfg.chunk;
  sb.layout = cfg.layout;
  sb.flags = 0;
  sb.data_offset = cfg.data_offset;
  sb.events = 1;
  memcpy (sb.member_sizes, l->member_size, n * sizeof sb.member_sizes[0]);

  /* md: what mdadm --create --level=0 --metadata=1.2 writes, but no
   * bad-block log (raid0 never uses one) and the layout said always
   * where the members make more than one zone (feature 0x1000).
   */
  memcpy (md->set_uuid, sb.array_uuid, 16);
  snprintf (md->set_name, sizeof md->set_name, "%s", cfg.name);
  md->ctime = md->utime = sb.ctime;
  md->level = 0;
  md->layout = cfg.layout;
  if (l->nr_zones > 1)
    md->feature_map = MD_FEATURE_RAID0_LAYOUT;
  md->chunk_sectors = cfg.chunk / 512;
  md->raid_disks = n;
  md->super_offset = HEADER_SIZE / 512;
  md->resync_offset = UINT64_MAX;
  md->max_dev = 128;
  while (md->max_dev < n)
    md->max_dev += 256;
  for (unsigned i = 0; i < md->max_dev; ++i)
    md->dev_roles[i] = i < n ? i : MD_ROLE_SPARE;

  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[META_BYTES];
    char why[512];
    bool sync_failed;

    make_meta (&cfg, l, &t[i], i, &sb, md, buf, member_uuid[i]);
    if (write_header (&t[i], buf, zeros, &sync_failed, why, sizeof why)
        == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): writing the header: %s\n",
               i, t[i].path, why);
      /* All or nothing: give back what the members held before.  This
       * one too when its write landed but the sync failed: best effort,
       * since its device has just failed us.
       */
      if (sync_failed) {
        bool lost = false;
        for (unsigned k = 0; k < META_BYTES / HEADER_SIZE && !lost; ++k)
          if ((t[i].blocks >> k & 1)
              && member_pwrite (&t[i].dev, t[i].old_header + k * HEADER_SIZE,
                                HEADER_SIZE, k * HEADER_SIZE, why, sizeof why)
                   == -1)
            lost = true;
        if (lost
            || (t[i].has_tail
                && member_pwrite (&t[i].dev, t[i].old_tail, MD_SUPER_BYTES,
                                  t[i].tail_at, why, sizeof why)
                     == -1))
          fprintf (stderr,
                   "nbdstripe: member %u (%s): could not restore its "
                   "first %u bytes (%s): check it with 'nbdstripe "
                   "inspect'\n",
                   i, t[i].path, META_BYTES, why);
        else if (member_sync (&t[i].dev, why, sizeof why) == -1)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): its first %u bytes were "
                   "rewritten but the device failed to sync them (%s)\n",
                   i, t[i].path, META_BYTES, why);
      }
      restore (t, i);
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg.path);
      goto out;
    }
  }

  /* Each header read back through every member must be that member's
   * own: two names for one device (two servers exporting one file, say)
   * show the header written last.
   */
  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[META_BYTES], back[16];
    char why[512];
    ssize_t got;
    bool ours;

    got = member_pread (&t[i].dev, buf, META_BYTES, 0, true, why, sizeof why);
    ours = got == META_BYTES && read_back_id (&cfg, buf, back);
    if (!ours || memcmp (back, member_uuid[i], 16) != 0) {
      unsigned other = n;
      if (ours)
        for (unsigned j = 0; j < n; ++j)
          if (memcmp (back, member_uuid[j], 16) == 0)
            other = j;
      if (other < n)
        fprintf (stderr,
                 "nbdstripe: member %u (%s) and member %u (%s) are the "
                 "same device: read back, member %u shows the header "
                 "written to member %u\n",
                 other, t[other].path, i, t[i].path, i, other);
      else
        fprintf (stderr,
                 "nbdstripe: member %u (%s): its header did not read back "
                 "as written%s%s\n",
                 i, t[i].path, got == -1 ? ": " : "", got == -1 ? why : "");
      restore (t, n);
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg.path);
      goto out;
    }
  }

  if (cfg.metadata == METADATA_MD) {
    char mdu[36];
    md_super_uuid_format (sb.array_uuid, mdu);
    snprintf (uuid, sizeof uuid, "%s", mdu);
  }
  else
    uuid_format (sb.array_uuid, uuid);
  if (json)
    ; /* at out */
  else if (cfg.metadata == METADATA_MD) {
    printf ("created md raid0 array '%s' (UUID %s, md metadata 1.2): %u "
            "members, chunk %" PRIu64 ", layout %s, data offset %" PRIu64
            ", %s (%" PRIu64 " bytes)\n",
            cfg.name, uuid, n, cfg.chunk, layout_name (cfg.layout),
            cfg.data_offset, human_size (l->size, hs, sizeof hs), l->size);
  }
  else {
    printf ("created volume '%s' (%s): %u members, chunk %" PRIu64 ", "
            "data offset %" PRIu64 ", %s (%" PRIu64 " bytes)\n",
            cfg.name, uuid, n, cfg.chunk, cfg.data_offset,
            human_size (l->size, hs, sizeof hs), l->size);
  }
  status = 0;

out:
  if (json)
    print_json (
      create_json (argv[optind], &cfg, loaded, err, status == 0, uuid, l));
  if (t)
    for (unsigned i = n; i-- > 0;)
      if (t[i].opened)
        member_close (&t[i].dev);
  free (t);
  free (l);
  free (md);
  config_free (&cfg);
  return status;
}
