/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: rewriting one member of a config file (nbdstripe replace).
 * See config_replace_member in include/config.h.
 *
 * The file is the user's: comments, order and layout stay as they are.
 * Only the member's string changes, and only if the file names it
 * exactly once; the result is loaded before it replaces the file, and it
 * replaces it atomically (a temporary file in the same directory, synced,
 * renamed, the directory synced).
 */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* s as a libconfig string literal, quotes included (malloc'd). */
static char *
quote (const char *s)
{
  size_t n = strlen (s);
  char *q = malloc (2 * n + 3), *p = q;

  if (q == NULL)
    return NULL;
  *p++ = '"';
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      *p++ = '\\';
    *p++ = *s;
  }
  *p++ = '"';
  *p = '\0';
  return q;
}

static char *
read_all (const char *path, size_t *len, char *why, size_t wlen)
{
  FILE *fp = fopen (path, "re");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  if (fp == NULL) {
    snprintf (why, wlen, "%s: %s", path, strerror (errno));
    return NULL;
  }
  for (;;) {
    if (n + 4096 + 1 > cap) {
      char *b = realloc (buf, cap = cap ? 2 * cap : 8192);
      if (b == NULL || cap > (2u << 20)) {
        snprintf (why, wlen, "%s: too large", path);
        free (b ? b : buf);
        fclose (fp);
        return NULL;
      }
      buf = b;
    }
    size_t got = fread (buf + n, 1, cap - n - 1, fp);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror (fp)) {
    snprintf (why, wlen, "%s: %s", path, strerror (errno));
    free (buf);
    fclose (fp);
    return NULL;
  }
  fclose (fp);
  buf[n] = '\0';
  *len = n;
  return buf;
}

int
config_replace_member (const char *path, unsigned index, const char *old,
                       const char *new_member, char *why, size_t len)
{
  struct stripe_config cfg, after;
  char err[1024], tmp[PATH_MAX] = "", dir[PATH_MAX];
  char *text = NULL, *qold = NULL, *qnew = NULL, *out = NULL, *at = NULL;
  size_t n = 0, lo, lnew, count = 0;
  struct stat st;
  int fd = -1, r = -1;

  memset (&cfg, 0, sizeof cfg);
  memset (&after, 0, sizeof after);
  if (config_load (path, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    goto out;
  }
  if (index >= cfg.nr_members || strcmp (cfg.members[index], old) != 0) {
    snprintf (why, len, "%s: member %u is not %s", path, index, old);
    goto out;
  }
  text = read_all (path, &n, why, len);
  qold = quote (old);
  qnew = quote (new_member);
  if (text == NULL || qold == NULL || qnew == NULL) {
    if (text)
      snprintf (why, len, "out of memory");
    goto out;
  }
  lo = strlen (qold);
  lnew = strlen (qnew);
  for (char *p = strstr (text, qold); p; p = strstr (p + lo, qold)) {
    count++;
    at = p;
  }
  if (count != 1) {
    snprintf (why, len, "%s names %s %zu times, not once", path, qold, count);
    goto out;
  }
  out = malloc (n - lo + lnew + 1);
  if (out == NULL) {
    snprintf (why, len, "out of memory");
    goto out;
  }
  memcpy (out, text, at - text);
  memcpy (out + (at - text), qnew, lnew);
  memcpy (out + (at - text) + lnew, at + lo, n - (at - text) - lo + 1);

  if (stat (path, &st) == -1) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    goto out;
  }
  snprintf (tmp, sizeof tmp, "%s.XXXXXX", path);
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd == -1) {
    snprintf (why, len, "%s: %s", tmp, strerror (errno));
    goto out;
  }
  size_t total = strlen (out);
  for (size_t done = 0; done < total;) {
    ssize_t w = write (fd, out + done, total - done);
    if (w <= 0) {
      snprintf (why, len, "%s: %s", tmp, strerror (errno));
      goto out;
    }
    done += w;
  }
  if (fchmod (fd, st.st_mode & 07777) == -1 || fsync (fd) == -1) {
    snprintf (why, len, "%s: %s", tmp, strerror (errno));
    goto out;
  }
  close (fd);
  fd = -1;
  /* What it says now: the same config with one member changed. */
  if (config_load (tmp, &after, err, sizeof err) == -1) {
    snprintf (why, len, "the rewritten config does not load: %s", err);
    goto out;
  }
  if (after.nr_members != cfg.nr_members
      || strcmp (after.members[index], new_member) != 0) {
    snprintf (why, len, "the rewritten config does not name %s as member %u",
              new_member, index);
    goto out;
  }
  for (unsigned i = 0; i < cfg.nr_members; ++i)
    if (i != index && strcmp (after.members[i], cfg.members[i]) != 0) {
      snprintf (why, len, "the rewritten config changed member %u", i);
      goto out;
    }
  if (rename (tmp, path) == -1) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    goto out;
  }
  tmp[0] = '\0';
  snprintf (dir, sizeof dir, "%s", path);
  fd = open (dirname (dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd != -1)
    fsync (fd);
  r = 0;

out:
  if (fd != -1)
    close (fd);
  if (r == -1 && tmp[0])
    unlink (tmp);
  config_free (&cfg);
  config_free (&after);
  free (text);
  free (qold);
  free (qnew);
  free (out);
  return r;
}
