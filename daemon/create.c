/* nbdstripe create: write the member headers of a new volume.
 *
 * Order matters: every check (config, members distinct and big enough,
 * nothing recognisable on them unless --force) passes before anything is
 * written; then the optional discard; then the headers.  Creation is
 * all-or-nothing: if one header cannot be written, the members already
 * written get their previous first 4 KiB back, so that no member is left
 * claiming to be part of an array that does not exist.
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
#include "header.h"

struct target {
  const char *path; /* or URI */
  struct member dev;
  bool opened;
  uint8_t old_header[HEADER_SIZE]; /* restored if creation fails */
};

static int
create_usage (FILE *fp, int status)
{
  fprintf (
    fp, "Usage: nbdstripe create [--force] [--discard] CONFIG\n"
        "Write a header at the start of every member the config lists.\n"
        "  --force     overwrite members that hold a filesystem, partition "
        "table,\n"
        "              RAID/LVM signature or an nbdstripe header\n"
        "  --discard   trim each member's data area first (as mkfs does)\n");
  return status;
}

/* What libblkid (or our own magic) recognises on the member, or NULL.
 * A remote member is probed through a copy (its probe_fd); one that
 * cannot be copied is reported as such, since nothing can be said of it.
 */
static const char *
recognise (struct target *t, char *what, size_t len)
{
  blkid_probe pr;
  const char *type = NULL;
  char why[256];
  int fd;

  if (memcmp (t->old_header, HEADER_MAGIC, 8) == 0) {
    struct header sb;
    if (header_decode (t->old_header, HEADER_SIZE, &sb, NULL) == HEADER_OK) {
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

  fd = t->dev.ops->probe_fd (&t->dev, why, sizeof why);
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
  memset (t->old_header, 0, HEADER_SIZE);
  n = member_pread (&t->dev, t->old_header, HEADER_SIZE, 0, false, why,
                   sizeof why);
  if (n == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, t->path, why);
    return -1;
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

/* Write the first 4 KiB and make them durable.  *sync_failed tells that
 * the write landed and only making it durable failed.
 */
static int
write_header (struct target *t, const uint8_t *buf, bool *sync_failed,
              char *why, size_t len)
{
  *sync_failed = false;
  if (member_pwrite (&t->dev, buf, HEADER_SIZE, 0, why, len) == -1)
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
    if (write_header (&t[j], t[j].old_header, &sync_failed, why, sizeof why)
        == -1)
      fprintf (stderr,
               "nbdstripe: member %u (%s): could not restore "
               "its first 4 KiB (%s): check it with "
               "'nbdstripe inspect' and wipe it by hand\n",
               j, t[j].path, why);
}

int
cmd_create (int argc, char **argv)
{
  static const struct option opts[] = {
    { "force", no_argument, NULL, 'F' },
    { "discard", no_argument, NULL, 'd' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct target *t = NULL;
  struct header sb;
  struct layout *l = NULL;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint8_t member_uuid[LAYOUT_MAX_MEMBERS][16];
  bool force = false, discard = false, ok = true;
  unsigned n = 0, bad;
  char uuid[37], hs[32];
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'F': force = true; break;
    case 'd': discard = true; break;
    case 'h': return create_usage (stdout, 0);
    default: return create_usage (stderr, 2);
    }
  }
  if (optind != argc - 1)
    return create_usage (stderr, 2);

  memset (&cfg, 0, sizeof cfg);
  if (load_config (argv[optind], &cfg) == -1)
    goto out;
  if (cfg.metadata == METADATA_NONE) {
    fprintf (stderr,
             "nbdstripe: %s: metadata = \"none\": there are no "
             "headers to create; serve the volume directly\n",
             cfg.path);
    goto out;
  }
  n = cfg.nr_members;
  t = calloc (n, sizeof *t);
  l = malloc (sizeof *l);
  if (t == NULL || l == NULL) {
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
    if (t[i].dev.size < cfg.data_offset + cfg.chunk) {
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
      if (recognise (&t[i], what, sizeof what)) {
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
  if (layout_init (l, cfg.chunk, n, sizes, &bad) != LAYOUT_OK) {
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
  sb.layout = LAYOUT_MD_ALT;
  sb.flags = 0;
  sb.data_offset = cfg.data_offset;
  sb.events = 1;
  memcpy (sb.member_sizes, l->member_size, n * sizeof sb.member_sizes[0]);

  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[HEADER_SIZE];
    char why[512];
    bool sync_failed;

    sb.member_index = i;
    uuid_generate (sb.member_uuid);
    header_encode (&sb, buf);
    if (write_header (&t[i], buf, &sync_failed, why, sizeof why) == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): writing the header: %s\n",
               i, t[i].path, why);
      /* All or nothing: give back what the members held before.  This
       * one too when its write landed but the sync failed: best effort,
       * since its device has just failed us.
       */
      if (sync_failed) {
        if (member_pwrite (&t[i].dev, t[i].old_header, HEADER_SIZE, 0, why,
                           sizeof why)
            == -1)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): could not restore its "
                   "first 4 KiB (%s): check it with 'nbdstripe inspect'\n",
                   i, t[i].path, why);
        else if (member_sync (&t[i].dev, why, sizeof why) == -1)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): its first 4 KiB were "
                   "rewritten but the device failed to sync them (%s)\n",
                   i, t[i].path, why);
      }
      restore (t, i);
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg.path);
      goto out;
    }
    memcpy (member_uuid[i], sb.member_uuid, 16);
  }

  /* Each header read back through every member must be that member's
   * own: two names for one device (two servers exporting one file, say)
   * show the header written last.
   */
  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[HEADER_SIZE];
    struct header back;
    char why[512];
    ssize_t got;

    got = member_pread (&t[i].dev, buf, HEADER_SIZE, 0, true, why, sizeof why);
    if (got != HEADER_SIZE || header_decode (buf, HEADER_SIZE, &back, NULL) != HEADER_OK
        || memcmp (back.member_uuid, member_uuid[i], 16) != 0) {
      unsigned other = n;
      if (got == HEADER_SIZE && header_decode (buf, HEADER_SIZE, &back, NULL) == HEADER_OK)
        for (unsigned j = 0; j < n; ++j)
          if (memcmp (back.member_uuid, member_uuid[j], 16) == 0)
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

  uuid_format (sb.array_uuid, uuid);
  printf ("created volume '%s' (%s): %u members, chunk %" PRIu64 ", "
          "data offset %" PRIu64 ", %s (%" PRIu64 " bytes)\n",
          cfg.name, uuid, n, cfg.chunk, cfg.data_offset,
          human_size (l->size, hs, sizeof hs), l->size);
  status = 0;

out:
  if (t)
    for (unsigned i = n; i-- > 0;)
      if (t[i].opened)
        member_close (&t[i].dev);
  free (t);
  free (l);
  config_free (&cfg);
  return status;
}
