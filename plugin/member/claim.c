/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: owning members.  See include/claim.h. */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "claim.h"
#include "member.h"
#include "util.h"

static const char *
file_type (mode_t mode)
{
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISSOCK (mode))
    return "a socket";
  if (S_ISCHR (mode))
    return "a character device";
  if (S_ISDIR (mode))
    return "a directory";
  return "not a regular file";
}

int
claim_lock (int fd, bool shared, char *why, size_t len)
{
  struct flock fl = {
    .l_type = shared ? F_RDLCK : F_WRLCK,
    .l_whence = SEEK_SET,
    .l_start = 0,
    .l_len = 0, /* to the end, however far */
  };
  struct stat st;
  char holder[512];

  if (fcntl (fd, F_OFD_SETLK, &fl) == 0)
    return 0;
  if (errno != EAGAIN && errno != EACCES)
    return fail_why (why, len, errno, "lock (F_OFD_SETLK): %s",
                     strerror (errno));
  if (fstat (fd, &st) == -1)
    return fail_why (why, len, EBUSY, "in use (locked by another open file)");
  return fail_why (why, len, EBUSY, "in use by %s",
                   claim_holder (&st, holder, sizeof holder));
}

int
claim_open (const char *path, bool readonly, int extra, struct stat *st,
            char *why, size_t len)
{
  int mode = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | extra;
  int fd, fl, e;

  /* O_NONBLOCK: opening a FIFO must not wait for a writer; nothing but
   * a regular file or a block device goes further.
   */
  fd = open (path, mode | O_NONBLOCK);
  if (fd == -1) {
    e = errno;
    if (e == EISDIR)
      return fail_why (why, len, EINVAL,
                       "a directory, not a regular file or a "
                       "block device");
    return fail_why (why, len, e, "open: %s", strerror (e));
  }
  if (fstat (fd, st) == -1) {
    e = errno;
    close (fd);
    return fail_why (why, len, e, "fstat: %s", strerror (e));
  }
  if (!S_ISREG (st->st_mode) && !S_ISBLK (st->st_mode)) {
    close (fd);
    return fail_why (why, len, EINVAL,
                     "%s, not a regular file or a block device",
                     file_type (st->st_mode));
  }
  fl = fcntl (fd, F_GETFL);
  if (fl == -1 || fcntl (fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
    e = errno;
    close (fd);
    return fail_why (why, len, e, "fcntl: %s", strerror (e));
  }
  return fd;
}

int
claim_take (int *fd, const char *path, bool excl, bool shared, char *why,
            size_t len)
{
  struct stat st, st2;
  int xfd, fl, e;

  if (fstat (*fd, &st) == -1)
    return fail_why (why, len, errno, "fstat: %s", strerror (errno));
  if (S_ISBLK (st.st_mode) && excl) {
    /* Claim the device itself: reopen it exclusively, with the flags of
     * the first descriptor (which never claimed it).
     */
    fl = fcntl (*fd, F_GETFL);
    if (fl == -1)
      return fail_why (why, len, errno, "fcntl: %s", strerror (errno));
    xfd = open (path, (fl & (O_ACCMODE | O_DIRECT)) | O_CLOEXEC | O_NOCTTY
                        | O_EXCL);
    if (xfd == -1) {
      char holder[512];
      e = errno;
      if (e == EBUSY)
        return fail_why (why, len, EBUSY,
                         "in use by %s (the device cannot be opened "
                         "exclusively)",
                         claim_holder (&st, holder, sizeof holder));
      return fail_why (why, len, e, "open (O_EXCL): %s", strerror (e));
    }
    if (fstat (xfd, &st2) == -1 || !S_ISBLK (st2.st_mode)
        || st2.st_rdev != st.st_rdev) {
      close (xfd);
      return fail_why (why, len, EAGAIN, "changed while it was being opened");
    }
    close (*fd);
    *fd = xfd;
  }
  return claim_lock (*fd, shared, why, len);
}

/* Who holds it. */

static bool
read_small (const char *path, char *buf, size_t len, size_t *got)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ssize_t n;

  if (fd == -1)
    return false;
  n = read (fd, buf, len - 1);
  close (fd);
  if (n < 0)
    return false;
  buf[n] = '\0';
  if (got)
    *got = n;
  return true;
}

static void
append (char *buf, size_t len, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
append (char *buf, size_t len, const char *fmt, ...)
{
  size_t n = strlen (buf);
  va_list ap;

  if (n + 1 >= len)
    return;
  va_start (ap, fmt);
  vsnprintf (buf + n, len - n, fmt, ap);
  va_end (ap);
}

/* Printable: control characters of paths become '?'. */
static void
sanitise (char *s)
{
  for (; *s; ++s)
    if ((unsigned char) *s < 0x20 || *s == 0x7f)
      *s = '?';
}

static member_config_namer config_namer;

void
member_set_config_namer (member_config_namer namer)
{
  config_namer = namer;
}

/* "nbdkit (pid 1234) serving volume 'fast0' (config /etc/...)" */
static void
describe_pid (long pid, char *buf, size_t len)
{
  char path[64], comm[64] = "?", args[4096];
  size_t n = 0;
  const char *config = NULL;
  unsigned files = 0;

  snprintf (path, sizeof path, "/proc/%ld/comm", pid);
  if (read_small (path, comm, sizeof comm, NULL))
    comm[strcspn (comm, "\n")] = '\0';
  sanitise (comm);
  snprintf (path, sizeof path, "/proc/%ld/cmdline", pid);
  if (!read_small (path, args, sizeof args, &n))
    n = 0;
  for (size_t i = 0; i < n; i += strlen (args + i) + 1) {
    if (strncmp (args + i, "config=", 7) == 0)
      config = args + i + 7;
    else if (strncmp (args + i, "file=", 5) == 0)
      files++;
  }

  snprintf (buf, len, "%s (pid %ld)", comm, pid);
  if (config) {
    char conf[PATH_MAX + 64], name[256];

    if (config[0] == '/')
      snprintf (conf, sizeof conf, "%s", config);
    else
      snprintf (conf, sizeof conf, "/proc/%ld/cwd/%s", pid, config);
    if (config_namer && config_namer (conf, name, sizeof name))
      append (buf, len, " serving volume '%s'", name);
    char shown[PATH_MAX];
    snprintf (shown, sizeof shown, "%s", config);
    sanitise (shown);
    append (buf, len, " (config %s)", shown);
  }
  else if (files)
    append (buf, len, " serving an ad hoc stripe volume of %u member%s",
            files, files == 1 ? "" : "s");
  else if (strcmp (comm, "nbdstripe") == 0 && n > 0) {
    /* "nbdstripe create CONFIG" */
    append (buf, len, ":");
    for (size_t i = strlen (args) + 1; i < n && strlen (buf) + 1 < len;
         i += strlen (args + i) + 1) {
      char a[256];
      snprintf (a, sizeof a, "%s", args + i);
      sanitise (a);
      append (buf, len, " %s", a);
    }
  }
}

static bool
is_pid_dir (const struct dirent *d)
{
  for (const char *p = d->d_name; *p; ++p)
    if (!isdigit ((unsigned char) *p))
      return false;
  return d->d_name[0] != '\0';
}

/* Processes (not us) that hold an fcntl/OFD/flock lock on st's inode:
 * their /proc/PID/fdinfo has a "lock:" line naming MAJ:MIN:INO.
 */
static bool
find_lockers (const struct stat *st, char *buf, size_t len)
{
  char want[64];
  DIR *proc = opendir ("/proc");
  struct dirent *d;
  long self = getpid ();
  bool found = false;

  if (proc == NULL)
    return false;
  snprintf (want, sizeof want, " %02x:%02x:%llu ", major (st->st_dev),
            minor (st->st_dev), (unsigned long long) st->st_ino);
  while ((d = readdir (proc)) != NULL && !found) {
    char dir[64];
    DIR *fdi;
    struct dirent *f;
    long pid;

    if (!is_pid_dir (d) || (pid = atol (d->d_name)) == self)
      continue;
    snprintf (dir, sizeof dir, "/proc/%ld/fdinfo", pid);
    fdi = opendir (dir);
    if (fdi == NULL)
      continue;
    while ((f = readdir (fdi)) != NULL && !found) {
      char p[320], text[4096];
      if (!is_pid_dir (f))
        continue;
      snprintf (p, sizeof p, "%s/%s", dir, f->d_name);
      if (read_small (p, text, sizeof text, NULL) && strstr (text, "lock:")
          && strstr (text, want)) {
        describe_pid (pid, buf, len);
        found = true;
      }
    }
    closedir (fdi);
  }
  closedir (proc);
  return found;
}

/* Processes (not us) with the block device rdev open. */
static bool
find_openers (dev_t rdev, char *buf, size_t len)
{
  DIR *proc = opendir ("/proc");
  struct dirent *d;
  long self = getpid ();
  bool found = false;

  if (proc == NULL)
    return false;
  while ((d = readdir (proc)) != NULL && !found) {
    char dir[64];
    DIR *fds;
    struct dirent *f;
    long pid;

    if (!is_pid_dir (d) || (pid = atol (d->d_name)) == self)
      continue;
    snprintf (dir, sizeof dir, "/proc/%ld/fd", pid);
    fds = opendir (dir);
    if (fds == NULL)
      continue;
    while ((f = readdir (fds)) != NULL && !found) {
      char p[320];
      struct stat st;
      if (!is_pid_dir (f))
        continue;
      snprintf (p, sizeof p, "%s/%s", dir, f->d_name);
      if (stat (p, &st) == 0 && S_ISBLK (st.st_mode) && st.st_rdev == rdev) {
        describe_pid (pid, buf, len);
        found = true;
      }
    }
    closedir (fds);
  }
  closedir (proc);
  return found;
}

/* Where rdev is mounted (mountinfo's third field is MAJ:MIN). */
static bool
find_mount (dev_t rdev, char *buf, size_t len)
{
  FILE *fp = fopen ("/proc/self/mountinfo", "re");
  char line[4096];
  bool found = false;

  if (fp == NULL)
    return false;
  while (!found && fgets (line, sizeof line, fp)) {
    unsigned maj, min;
    char mnt[2048];
    if (sscanf (line, "%*d %*d %u:%u %*s %2047s", &maj, &min, mnt) == 3
        && makedev (maj, min) == rdev) {
      sanitise (mnt);
      snprintf (buf, len, "a file system mounted on %s", mnt);
      found = true;
    }
  }
  fclose (fp);
  return found;
}

/* What the kernel stacks on rdev: md arrays, device-mapper devices. */
static bool
find_holders (dev_t rdev, char *buf, size_t len)
{
  char dir[128];
  DIR *d;
  struct dirent *e;
  bool found = false;

  snprintf (dir, sizeof dir, "/sys/dev/block/%u:%u/holders", major (rdev),
            minor (rdev));
  d = opendir (dir);
  if (d == NULL)
    return false;
  while ((e = readdir (d)) != NULL) {
    char name[256] = "", p[512];
    if (e->d_name[0] == '.')
      continue;
    snprintf (p, sizeof p, "/sys/class/block/%s/dm/name", e->d_name);
    if (read_small (p, name, sizeof name, NULL))
      name[strcspn (name, "\n")] = '\0';
    if (!found)
      snprintf (buf, len, "%s%s%s%s", e->d_name, name[0] ? " (" : "", name,
                name[0] ? ")" : "");
    else
      append (buf, len, ", %s", e->d_name);
    found = true;
  }
  closedir (d);
  if (found) {
    char tmp[512];
    snprintf (tmp, sizeof tmp, "%s", buf);
    snprintf (buf, len, "%s, stacked on it", tmp);
  }
  return found;
}

const char *
claim_holder (const struct stat *st, char *buf, size_t len)
{
  if (find_lockers (st, buf, len))
    return buf;
  if (S_ISBLK (st->st_mode)
      && (find_mount (st->st_rdev, buf, len)
          || find_holders (st->st_rdev, buf, len)
          || find_openers (st->st_rdev, buf, len)))
    return buf;
  snprintf (buf, len, "another process");
  return buf;
}
