/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a config file's new text put in place of the old, as a
 * whole or not at all, for config_edit.c's rewrites: a temporary beside
 * the file, written, synced, renamed over it, the directory synced.  The
 * file keeps its owner, group and mode; a temporary a crash left is
 * removed by the next rewrite of the same file.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_impl.h"

/* The temporary's name: ".BASE.nbdstripe-" and 8 random characters,
 * beside the file.  It has a name only between linkat and rename (with
 * O_TMPFILE), so that a crash leaves at most one; the next rewrite of the
 * same file removes what an earlier one left.
 */
#define TMP_TAG ".nbdstripe-"

static int
write_all (int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t w = write (fd, buf, len);
    if (w == -1 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    buf += w;
    len -= w;
  }
  return 0;
}

/* Remove temporaries of this file that a crash left in dir. */
static void
remove_stale (int dirfd, const char *base)
{
  char prefix[NAME_MAX + 1];
  struct dirent *e;
  DIR *d;
  int fd;

  if (snprintf (prefix, sizeof prefix, ".%s" TMP_TAG, base)
      >= (int) sizeof prefix)
    return;
  fd = dup (dirfd);
  if (fd == -1 || (d = fdopendir (fd)) == NULL) {
    if (fd != -1)
      close (fd);
    return;
  }
  while ((e = readdir (d)) != NULL)
    if (strncmp (e->d_name, prefix, strlen (prefix)) == 0
        && strlen (e->d_name) == strlen (prefix) + 8)
      unlinkat (dirfd, e->d_name, 0);
  closedir (d);
}

static void
random_name (char *out, size_t len, const char *base)
{
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char r[8];

  if (getrandom (r, sizeof r, 0) != sizeof r)
    for (unsigned i = 0; i < sizeof r; ++i)
      r[i] = (unsigned char) rand ();
  snprintf (out, len, ".%s" TMP_TAG "%c%c%c%c%c%c%c%c", base,
            chars[r[0] % 36], chars[r[1] % 36], chars[r[2] % 36],
            chars[r[3] % 36], chars[r[4] % 36], chars[r[5] % 36],
            chars[r[6] % 36], chars[r[7] % 36]);
}

/* Replace the file base in dirfd with text, atomically, keeping st's
 * owner, group and mode.
 */
static int
replace_file (int dirfd, const char *dir, const char *base, const char *text,
              const struct stat *st, char *why, size_t len)
{
  char tmp[NAME_MAX + 1], proc[64];
  bool named = false;
  int fd, r = -1;

  remove_stale (dirfd, base);
  random_name (tmp, sizeof tmp, base);
  /* Unnamed until complete: nothing is left by a crash meanwhile. */
  fd = openat (dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd == -1) {
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      snprintf (why, len, "%s: cannot create a file there: %s", dir,
                strerror (errno));
      return -1;
    }
    /* A file system without O_TMPFILE: a named temporary from the
     * start.
     */
    fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC
                 | O_NOFOLLOW, 0600);
    if (fd == -1) {
      snprintf (why, len, "%s/%s: %s", dir, tmp, strerror (errno));
      return -1;
    }
    named = true;
  }
  if (write_all (fd, text, strlen (text)) == -1) {
    snprintf (why, len, "%s: writing the new config: %s", dir,
              strerror (errno));
    goto out;
  }
  if (fchown (fd, st->st_uid, st->st_gid) == -1) {
    snprintf (why, len, "%s: cannot keep the config's owner (%u:%u): %s",
              dir, (unsigned) st->st_uid, (unsigned) st->st_gid,
              strerror (errno));
    goto out;
  }
  if (fchmod (fd, st->st_mode & 07777) == -1 || fsync (fd) == -1) {
    snprintf (why, len, "%s: the new config: %s", dir, strerror (errno));
    goto out;
  }
  if (!named) {
    snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat (AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == -1) {
      snprintf (why, len, "%s/%s: %s", dir, tmp, strerror (errno));
      goto out;
    }
    named = true;
  }
  if (renameat (dirfd, tmp, dirfd, base) == -1) {
    snprintf (why, len, "%s/%s: %s", dir, base, strerror (errno));
    goto out;
  }
  named = false;
  if (fsync (dirfd) == -1) {
    snprintf (why, len, "%s: syncing the directory: %s (the new config "
              "may not survive a power cut)",
              dir, strerror (errno));
    goto out;
  }
  r = 0;

out:
  if (named)
    unlinkat (dirfd, tmp, 0);
  close (fd);
  return r;
}

int
config_commit (const char *real, const char *text, char *why, size_t len)
{
  char dir[PATH_MAX], base[PATH_MAX];
  const char *bn;
  struct stat st;
  int dirfd, r = -1;

  snprintf (dir, sizeof dir, "%s", real);
  snprintf (base, sizeof base, "%s", real);
  bn = basename (base);
  dirfd = open (dirname (dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd == -1) {
    snprintf (why, len, "%s: %s", dir, strerror (errno));
    return -1;
  }
  if (fstatat (dirfd, bn, &st, AT_SYMLINK_NOFOLLOW) == -1)
    snprintf (why, len, "%s: %s", real, strerror (errno));
  else if (!S_ISREG (st.st_mode))
    snprintf (why, len, "%s: not a regular file", real);
  else
    r = replace_file (dirfd, dir, bn, text, &st, why, len);
  close (dirfd);
  return r;
}
