/* nbdstripe create: write the member headers of a new volume.
 *
 * Order matters: every check (config, members distinct and big enough,
 * nothing recognisable on them unless --force) passes before anything is
 * written; then the optional discard; then the headers.  Creation is
 * all-or-nothing: if one header cannot be written, the members already
 * written get their previous first 4 KiB back, so that no member is left
 * claiming to be part of an array that does not exist.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <blkid.h>
#include <uuid.h>

#include "layout.h"
#include "log.h"
#include "nbdstripe.h"
#include "superblock.h"

struct target {
  const char *path;
  int fd;
  bool is_block;
  dev_t st_dev, st_rdev;
  ino_t st_ino;
  uint64_t size;
  uint8_t old_header[SB_SIZE]; /* restored if creation fails */
  bool written;
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

/* What libblkid (or our own magic) recognises on the member, or NULL. */
static const char *
recognise (struct target *t, char *what, size_t len)
{
  blkid_probe pr;
  const char *type = NULL;

  if (memcmp (t->old_header, SB_MAGIC, 8) == 0) {
    struct superblock sb;
    if (sb_decode (t->old_header, SB_SIZE, &sb, NULL) == SB_OK) {
      char uuid[37];
      sb_uuid_unparse (sb.array_uuid, uuid);
      snprintf (what, len,
                "is already member %" PRIu32 " of nbdstripe "
                "volume '%s' (%s)",
                sb.member_index, sb.name, uuid);
    }
    else
      snprintf (what, len, "holds an nbdstripe header (damaged)");
    return what;
  }

  pr = blkid_new_probe ();
  if (pr == NULL)
    return NULL;
  if (blkid_probe_set_device (pr, t->fd, 0, 0) == 0) {
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
  struct stat st;
  int flags = O_RDWR | O_CLOEXEC;

  if (stat (t->path, &st) == 0 && S_ISBLK (st.st_mode))
    flags |= O_EXCL; /* refuse a mounted or in-use device */
  t->fd = open (t->path, flags);
  if (t->fd == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): open: %m\n", i, t->path);
    return -1;
  }
  if (fstat (t->fd, &st) == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): fstat: %m\n", i, t->path);
    return -1;
  }
  t->st_dev = st.st_dev;
  t->st_ino = st.st_ino;
  t->st_rdev = st.st_rdev;
  t->is_block = S_ISBLK (st.st_mode);
  if (t->is_block) {
    if (ioctl (t->fd, BLKGETSIZE64, &t->size) == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): BLKGETSIZE64: %m\n", i,
               t->path);
      return -1;
    }
  }
  else if (S_ISREG (st.st_mode))
    t->size = st.st_size;
  else {
    fprintf (stderr,
             "nbdstripe: member %u (%s): not a regular file or a "
             "block device\n",
             i, t->path);
    return -1;
  }
  memset (t->old_header, 0, SB_SIZE);
  if (pread (t->fd, t->old_header, SB_SIZE, 0) == -1) {
    fprintf (stderr, "nbdstripe: member %u (%s): read: %m\n", i, t->path);
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

  for (uint64_t done = 0; done < len;) {
    uint64_t n = len - done < step ? len - done : step;
    int r;

    if (t->is_block) {
      uint64_t range[2] = { offset + done, n };
      r = ioctl (t->fd, BLKDISCARD, range);
    }
    else
      r = fallocate (t->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                     offset + done, n);
    if (r == -1) {
      if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL) {
        fprintf (stderr,
                 "nbdstripe: member %u (%s): cannot discard (%m), "
                 "skipped\n",
                 i, t->path);
        return 0;
      }
      fprintf (stderr, "nbdstripe: member %u (%s): discard: %m\n", i, t->path);
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

/* Write and make durable; *what says which step failed. */
static int
write_all (int fd, const void *buf, size_t len, off_t off, const char **what)
{
  ssize_t n = pwrite (fd, buf, len, off);

  *what = "writing";
  if (n == -1)
    return -1;
  if ((size_t) n != len) {
    errno = EIO;
    return -1;
  }
  *what = "syncing";
  return fdatasync (fd);
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
  struct superblock sb;
  struct layout *l = NULL;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
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
  for (unsigned i = 0; i < n; ++i)
    t[i].fd = -1;

  /* Every check first. */
  for (unsigned i = 0; i < n; ++i) {
    t[i].path = cfg.members[i];
    if (open_target (i, &t[i]) == -1) {
      ok = false;
      continue;
    }
    for (unsigned j = 0; j < i; ++j)
      if (t[j].fd >= 0
          && (t[i].is_block ? t[j].is_block && t[j].st_rdev == t[i].st_rdev
                            : !t[j].is_block && t[j].st_dev == t[i].st_dev
                                && t[j].st_ino == t[i].st_ino)) {
        fprintf (stderr,
                 "nbdstripe: member %u (%s) and member %u (%s) "
                 "are the same %s\n",
                 j, t[j].path, i, t[i].path,
                 t[i].is_block ? "device" : "file");
        ok = false;
      }
    if (t[i].size < cfg.data_offset + cfg.chunk) {
      fprintf (stderr,
               "nbdstripe: member %u (%s): %" PRIu64 " bytes is "
               "too small: it needs the data offset (%" PRIu64 ") and at "
               "least one chunk (%" PRIu64 ")\n",
               i, t[i].path, t[i].size, cfg.data_offset, cfg.chunk);
      ok = false;
    }
    else
      sizes[i] = (t[i].size - cfg.data_offset) / cfg.chunk * cfg.chunk;
    if (!force) {
      char what[256];
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
  sb.version = SB_VERSION;
  uuid_generate (sb.array_uuid);
  snprintf (sb.name, sizeof sb.name, "%s", cfg.name);
  sb.ctime = time (NULL);
  sb.member_count = n;
  sb.chunk = cfg.chunk;
  sb.layout_id = LAYOUT_ID_RAID0_ALT;
  sb.flags = 0;
  sb.data_offset = cfg.data_offset;
  memcpy (sb.member_sizes, l->member_size, n * sizeof sb.member_sizes[0]);

  for (unsigned i = 0; i < n; ++i) {
    uint8_t buf[SB_SIZE];

    sb.member_index = i;
    uuid_generate (sb.member_uuid);
    sb_encode (&sb, buf);
    const char *what;

    if (write_all (t[i].fd, buf, SB_SIZE, 0, &what) == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s the header: %m\n", i,
               t[i].path, what);
      /* All or nothing: give back what the members held before.  This
       * one too when its write landed but the sync failed: best effort,
       * since its device has just failed us.
       */
      if (strcmp (what, "syncing") == 0) {
        if (pwrite (t[i].fd, t[i].old_header, SB_SIZE, 0) != SB_SIZE)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): could not restore its "
                   "first 4 KiB: check it with 'nbdstripe inspect'\n",
                   i, t[i].path);
        else if (fdatasync (t[i].fd) == -1)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): its first 4 KiB were "
                   "rewritten but the device failed to sync them (%m)\n",
                   i, t[i].path);
      }
      for (unsigned j = 0; j < i; ++j)
        if (write_all (t[j].fd, t[j].old_header, SB_SIZE, 0, &what) == -1)
          fprintf (stderr,
                   "nbdstripe: member %u (%s): could not restore "
                   "its first 4 KiB (%s: %m): check it with "
                   "'nbdstripe inspect' and wipe it by hand\n",
                   j, t[j].path, what);
      fprintf (stderr, "nbdstripe: %s: volume not created\n", cfg.path);
      goto out;
    }
  }

  sb_uuid_unparse (sb.array_uuid, uuid);
  printf ("created volume '%s' (%s): %u members, chunk %" PRIu64 ", "
          "data offset %" PRIu64 ", %s (%" PRIu64 " bytes)\n",
          cfg.name, uuid, n, cfg.chunk, cfg.data_offset,
          human_size (l->size, hs, sizeof hs), l->size);
  status = 0;

out:
  if (t)
    for (unsigned i = n; i-- > 0;)
      if (t[i].fd >= 0)
        close (t[i].fd);
  free (t);
  free (l);
  config_free (&cfg);
  return status;
}
