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
#include "nbdstripe.h"
#include "member.h"
#include "meta.h"
#include "json.h"
#include "jsonout.h"

/* The bytes create writes at the start of each member, in blocks. */
#define META_BYTES META_AREA
#define BLOCK 4096u
#define TAIL_BYTES 4096u

struct target {
  const char *path; /* or URI */
  struct member dev;
  bool opened;
  uint8_t old_header[META_BYTES]; /* restored if creation fails */
  unsigned blocks; /* bit k: the 4 KiB at k * 4096 are written */
  /* An md 1.0 superblock found near the end: cleared (and restored). */
  bool has_tail;
  uint64_t tail_at;
  uint8_t old_tail[TAIL_BYTES];
  /* What the allocation map's place held (restored if creation fails),
   * and whether the map was written there (map_written).
   */
  uint8_t *old_map;
  bool map_written;
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

  if (meta_describe_header (first, BLOCK, what, len))
    return what;

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
  if (meta_md_tail_location (t->dev.size, &t->tail_at)
      && t->tail_at >= META_BYTES) {
    n = member_pread (&t->dev, t->old_tail, sizeof t->old_tail, t->tail_at,
                      false, why, sizeof why);
    if (n == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
      return -1;
    }
    t->has_tail = n > 0 && meta_md_tail (t->old_tail, n);
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
  for (unsigned k = 0; k < META_BYTES / BLOCK; ++k)
    if ((t->blocks >> k & 1)
        && member_pwrite (&t->dev, buf + k * BLOCK, BLOCK, k * BLOCK, why,
                          len)
             == -1)
      return -1;
  if (t->has_tail
      && member_pwrite (&t->dev, tail, TAIL_BYTES, t->tail_at, why, len)
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

/* The bytes create writes at the start of member i: what is there
 * stays, but metadata of any format is zeroed, and the format's record
 * goes where it lives.  *id is what reading it back must show.
 */
static void
make_meta (const struct meta_ops *ops, void *array, struct target *t,
           unsigned i, uint8_t buf[META_BYTES], uint8_t id[16])
{
  char what[64];

  memcpy (buf, t->old_header, META_BYTES);
  t->blocks = 0;
  for (unsigned k = 0; k < META_BYTES / BLOCK; ++k)
    if (meta_recognise (buf + k * BLOCK, BLOCK, what, sizeof what)) {
      memset (buf + k * BLOCK, 0, BLOCK);
      t->blocks |= 1u << k;
    }
  ops->create_member (array, i, t->dev.size, buf, &t->blocks, id);
}

/* create --json: what was created, or that nothing was (null). */
static void
create_json (const char *arg, const struct stripe_config *cfg, bool loaded,
             const char *err, bool created, const char *uuid,
             const struct layout *l)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *m = NULL;

  json_put (o, "config", json_text (loaded ? cfg->path : arg));
  json_put (o, "created", json_object_new_boolean (created));
  json_put (o, "name", loaded ? json_text (cfg->name) : NULL);
  json_put (o, "metadata",
            loaded ? json_text (meta_ops_for (cfg->metadata)->name) : NULL);
  if (created) {
    m = json_object_new_array ();
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      json_object_array_add (m, json_text (cfg->members[i]));
  }
  json_put (o, "uuid", created ? json_text (uuid) : NULL);
  json_put (o, "members", m);
  json_put (o, "chunk", created ? json_u64 (cfg->chunk) : NULL);
  json_put (o, "layout",
            created ? json_text (layout_name (cfg->layout)) : NULL);
  json_put (o, "data_offset", created ? json_u64 (cfg->data_offset) : NULL);
  json_put (o, "size", created ? json_u64 (l->size) : NULL);
  jsonout_result (o, created, err, false);
}

/* Every check before anything is written: each member opens, is no
 * other's alias, can be claimed, is big enough, and (unless force) holds
 * nothing recognisable.  Every problem said; sizes[i] the member's data
 * bytes, whole chunks.
 */
static bool
check_targets (const struct stripe_config *cfg, struct target *t, bool force,
               uint64_t *sizes)
{
  bool ok = true;

  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    t[i].path = cfg->members[i];
    if (open_target (i, &t[i]) == -1) {
      ok = false;
      continue;
    }
    bool alias = false;
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (t[j].opened
          && identity_alias (&t[j].dev.id, &t[i].dev.id, how, sizeof how)) {
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
    if (t[i].dev.size < cfg->data_offset + cfg->chunk
        || t[i].dev.size < META_BYTES) {
      fprintf (stderr,
               "nbdstripe: member %u (%s): %" PRIu64 " bytes is "
               "too small: it needs the data offset (%" PRIu64 ") and at "
               "least one chunk (%" PRIu64 ")\n",
               i, t[i].path, t[i].dev.size, cfg->data_offset, cfg->chunk);
      ok = false;
    }
    else
      sizes[i] = (t[i].dev.size - cfg->data_offset) / cfg->chunk * cfg->chunk;
    if (meta_unfinished_create (t[i].old_header, META_BYTES, cfg->name))
      fprintf (stderr,
               "nbdstripe: member %u (%s): holds the header of a create of "
               "volume '%s' that did not finish: overwritten\n",
               i, t[i].path, cfg->name);
    else if (!force) {
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
  return ok;
}

/* A member whose header write landed but whose sync failed: its old
 * bytes back, best effort, since its device has just failed us.
 */
static void
restore_unsynced (unsigned i, struct target *t)
{
  bool lost = false;
  char why[512];

  for (unsigned k = 0; k < META_BYTES / BLOCK && !lost; ++k)
    if ((t->blocks >> k & 1)
        && member_pwrite (&t->dev, t->old_header + k * BLOCK, BLOCK, k * BLOCK,
                          why, sizeof why)
             == -1)
      lost = true;
  if (lost
      || (t->has_tail
          && member_pwrite (&t->dev, t->old_tail, TAIL_BYTES, t->tail_at, why,
                            sizeof why)
               == -1))
    fprintf (stderr,
             "nbdstripe: member %u (%s): could not restore its "
             "first %u bytes (%s): check it with 'nbdstripe "
             "inspect'\n",
             i, t->path, META_BYTES, why);
  else if (member_sync (&t->dev, why, sizeof why) == -1)
    fprintf (stderr,
             "nbdstripe: member %u (%s): its first %u bytes were "
             "rewritten but the device failed to sync them (%s)\n",
             i, t->path, META_BYTES, why);
}

/* Member i's record (buf) written and synced: 0, or -1 after giving
 * every member written so far (and i, if its sync failed) back what it
 * held.
 */
static int
write_one (struct target *t, unsigned i, const uint8_t *buf, const char *what,
           const struct stripe_config *cfg)
{
  static const uint8_t zeros[TAIL_BYTES];
  char why[512];
  bool sync_failed;

  if (write_header (&t[i], buf, zeros, &sync_failed, why, sizeof why)
      == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): writing the header: %s\n",
             i, t[i].path, why);
    /* This one too when its write landed but the sync failed. */
    if (sync_failed)
      restore_unsynced (i, &t[i]);
    restore (t, i);
    fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg->path);
    return -1;
  }
  meta_written (i, t[i].path, what);
  return 0;
}

/* Each member's metadata written and synced; member_uuid[i] what it must
 * read back as.  All or nothing: on a failure the members written get
 * back what they held.  Where the format can say "being created"
 * (create_final), every member says it first, then every member gets
 * its final record: a crash in the first round leaves records that a
 * new create overwrites and that assembly names as a create that did
 * not finish, one in the second a volume whose every member has its
 * header, which assembles.  0/-1 (said).
 */
/* What the allocation map's place held, back on every member whose
 * bytes were read (create failed).
 */
static void
restore_maps (const struct meta_ops *ops, const void *array,
              const struct stripe_config *cfg, struct target *t)
{
  uint64_t off, bytes;
  char why[512];

  if (ops->create_map == NULL || !ops->create_map (array, &off, &bytes))
    return;
  for (unsigned i = cfg->nr_members; i-- > 0;) {
    if (!t[i].map_written)
      continue;
    if (member_pwrite (&t[i].dev, t[i].old_map, bytes, off, why, sizeof why)
        == -1)
      fprintf (stderr,
               "nbdstripe: member %u (%s): could not restore the %" PRIu64
               " bytes at %" PRIu64 " (%s)\n",
               i, t[i].path, bytes, off, why);
    else if (member_sync (&t[i].dev, why, sizeof why) == -1)
      fprintf (stderr,
               "nbdstripe: member %u (%s): the %" PRIu64 " bytes at %" PRIu64
               " were rewritten but the device failed to sync them (%s)\n",
               i, t[i].path, bytes, off, why);
  }
}

/* Member i's allocation map, all "in use" (nothing is known of what the
 * members hold: a trim or fstrim through the volume frees what it
 * covers), synced, before its header says there is one.  Its old bytes
 * are kept for restore_maps: every member's read before any is written,
 * so that two names for one device (refused later, by the read-back)
 * give back what it held.  0/-1 (said).
 */
static int
write_map (const struct meta_ops *ops, const void *array,
           const struct stripe_config *cfg, struct target *t, unsigned i)
{
  uint64_t off, bytes;
  uint8_t *ones;
  char why[512];
  int r = 0;

  if (ops->create_map == NULL || !ops->create_map (array, &off, &bytes))
    return 0;
  for (unsigned j = 0; i == 0 && j < cfg->nr_members; ++j) {
    t[j].old_map = malloc (bytes);
    if (t[j].old_map == NULL) {
      perror ("nbdstripe: malloc");
      return -1;
    }
    if (member_pread (&t[j].dev, t[j].old_map, bytes, off, true, why,
                      sizeof why)
        != (ssize_t) bytes) {
      fprintf (stderr,
               "nbdstripe: member %u (%s): reading %" PRIu64 " bytes at %"
               PRIu64 ": %s\n",
               j, t[j].path, bytes, off, why);
      return -1;
    }
  }
  ones = malloc (bytes);
  if (ones == NULL) {
    perror ("nbdstripe: malloc");
    return -1;
  }
  memset (ones, 0xff, bytes);
  t[i].map_written =
    member_pwrite (&t[i].dev, ones, bytes, off, why, sizeof why) == 0;
  if (!t[i].map_written || member_sync (&t[i].dev, why, sizeof why) == -1) {
    fprintf (stderr,
             "nbdstripe: member %u (%s): writing the allocation map "
             "(%" PRIu64 " bytes at %" PRIu64 "): %s\n",
             i, t[i].path, bytes, off, why);
    r = -1;
  }
  free (ones);
  return r;
}

/* A data offset with room for the allocation map of the largest
 * volume the members can make (meta.h), when the config names none:
 * the members' data sizes again.  False (said) when a member is then
 * too small.
 */
static bool
grow_data_offset (const struct meta_ops *ops, struct stripe_config *cfg,
                  struct target *t, uint64_t *sizes)
{
  uint64_t dev[LAYOUT_MAX_MEMBERS], off;

  for (unsigned i = 0; i < cfg->nr_members; ++i)
    dev[i] = t[i].dev.size;
  off = ops->create_data_offset (cfg, dev, cfg->nr_members);
  if (off == cfg->data_offset)
    return true;
  cfg->data_offset = off;
  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    if (dev[i] < off + cfg->chunk) {
      fprintf (stderr,
               "nbdstripe: member %u (%s): %" PRIu64 " bytes is too small: "
               "it needs the data offset (%" PRIu64 ", with room for the "
               "allocation map) and at least one chunk (%" PRIu64 ")\n",
               i, t[i].path, dev[i], off, cfg->chunk);
      return false;
    }
    sizes[i] = (dev[i] - off) / cfg->chunk * cfg->chunk;
  }
  return true;
}

static int
write_headers (const struct meta_ops *ops, void *array,
               const struct stripe_config *cfg, struct target *t,
               uint8_t (*member_uuid)[16])
{
  unsigned n = cfg->nr_members;
  uint8_t (*buf)[META_BYTES] = malloc (n * sizeof *buf);
  int r = -1;

  if (buf == NULL) {
    perror ("nbdstripe: malloc");
    return -1;
  }
  for (unsigned i = 0; i < n; ++i) {
    if (write_map (ops, array, cfg, t, i) == -1) {
      restore (t, i);
      restore_maps (ops, array, cfg, t);
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg->path);
      goto out;
    }
    make_meta (ops, array, &t[i], i, buf[i], member_uuid[i]);
    if (write_one (t, i, buf[i], ops->create_final ? "creating" : "created",
                   cfg)
        == -1) {
      restore_maps (ops, array, cfg, t);
      goto out;
    }
  }
  if (ops->create_final) {
    uint32_t roster = 0;
    for (unsigned i = 0; i < n; ++i)
      roster ^= meta_roster (member_uuid[i]);
    for (unsigned i = 0; i < n; ++i) {
      ops->create_final (buf[i], roster);
      if (write_one (t, i, buf[i], "created", cfg) == -1) {
        restore (t, n);
        restore_maps (ops, array, cfg, t);
        goto out;
      }
    }
  }
  r = 0;
out:
  free (buf);
  return r;
}

/* Each header read back through every member must be that member's
 * own: two names for one device (two servers exporting one file, say)
 * show the header written last.  If not, every member gets its old bytes
 * back.  0/-1 (said).
 */
static int
verify_read_back (const struct meta_ops *ops, const struct stripe_config *cfg,
                  struct target *t, uint8_t (*member_uuid)[16])
{
  unsigned n = cfg->nr_members;

  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[META_BYTES], back[16];
    char why[512];
    ssize_t got;
    bool ours;

    got = member_pread (&t[i].dev, buf, META_BYTES, 0, true, why, sizeof why);
    ours = got == META_BYTES && ops->read_back (buf, back);
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
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg->path);
      return -1;
    }
  }
  return 0;
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
  const struct meta_ops *ops;
  void *array = NULL;
  uint8_t array_uuid[16];
  struct layout *l = NULL;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint8_t member_uuid[LAYOUT_MAX_MEMBERS][16];
  bool force = false, discard = false, json = false, loaded;
  unsigned n = 0, bad;
  char uuid[META_UUID_SHOWN] = "", hs[32], err[1024] = "", line[1024];
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
  if (json)
    jsonout_watch_stderr ();

  loaded = load_volume (argv[optind], &cfg, err, sizeof err) == 0;
  if (!loaded)
    goto out;
  ops = meta_ops_for (cfg.metadata);
  if (ops->create_check (&cfg, line, sizeof line) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", cfg.path, line);
    goto out;
  }
  n = cfg.nr_members;
  t = calloc (n, sizeof *t);
  l = malloc (sizeof *l);
  if (t == NULL || l == NULL) {
    perror ("nbdstripe: calloc");
    goto out;
  }
  if (!check_targets (&cfg, t, force, sizes))
    goto out;
  if (ops->create_data_offset && !grow_data_offset (ops, &cfg, t, sizes))
    goto out;
  if (layout_init_as (l, cfg.layout, LAYOUT_SIZE_MD, cfg.chunk, n, sizes, &bad)
      != LAYOUT_OK) {
    fprintf (stderr, "nbdstripe: %s: cannot lay out the volume\n", cfg.path);
    goto out;
  }

  if (discard)
    for (unsigned i = 0; i < n; ++i)
      if (discard_data (i, &t[i], cfg.data_offset, sizes[i]) == -1)
        goto out;

  uuid_generate (array_uuid);
  array = ops->create_array (&cfg, l, array_uuid, (uint64_t) time (NULL));
  if (array == NULL) {
    perror ("nbdstripe: calloc");
    goto out;
  }
  if (write_headers (ops, array, &cfg, t, member_uuid) == -1)
    goto out;
  if (verify_read_back (ops, &cfg, t, member_uuid) == -1) {
    restore_maps (ops, array, &cfg, t);
    goto out;
  }

  ops->uuid_shown (array_uuid, uuid);
  if (!json) {
    ops->describe_created (&cfg, l, uuid, human_size (l->size, hs, sizeof hs),
                           line, sizeof line);
    printf ("%s\n", line);
  }
  status = 0;

out:
  if (json)
    create_json (argv[optind], &cfg, loaded, err, status == 0, uuid, l);
  if (t)
    for (unsigned i = n; i-- > 0;) {
      if (t[i].opened)
        member_close (&t[i].dev);
      free (t[i].old_map);
    }
  free (t);
  free (l);
  free (array);
  config_free (&cfg);
  return status;
}
