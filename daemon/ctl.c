/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the client side of a served volume's control socket
 * (include/control.h): one request line, one answer line.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json.h"
#include "nbdstripe.h"

#define ANSWER_MAX (1024 * 1024)

/* Whether path is a control socket our server made: a socket owned by
 * root (or by us), usable by its owner only.  A socket planted while the
 * server is down -- by another user in a shared directory -- must never
 * answer root.
 */
static int
trusted_path (const char *path, char *why, size_t len)
{
  struct stat st;

  if (lstat (path, &st) == -1) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    return -1;
  }
  if (!S_ISSOCK (st.st_mode)) {
    snprintf (why, len, "%s: not a socket", path);
    errno = ENOTSOCK;
    return -1;
  }
  if (st.st_uid != 0 && st.st_uid != geteuid ()) {
    snprintf (why, len, "%s: owned by uid %u, not by root: not a server's "
              "control socket, not asked",
              path, (unsigned) st.st_uid);
    errno = EPERM;
    return -1;
  }
  if (st.st_mode & 077) {
    snprintf (why, len, "%s: mode %04o, open to others: not a server's "
              "control socket, not asked",
              path, (unsigned) (st.st_mode & 07777));
    errno = EPERM;
    return -1;
  }
  return 0;
}

/* The process at the other end (the socket may have been swapped since
 * it was looked at): root, or us.
 */
static int
trusted_peer (int fd, const char *path, char *why, size_t len)
{
  struct ucred cred;
  socklen_t clen = sizeof cred;

  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == -1) {
    snprintf (why, len, "%s: SO_PEERCRED: %s", path, strerror (errno));
    return -1;
  }
  if (cred.uid != 0 && cred.uid != geteuid ()) {
    snprintf (why, len, "%s: answered by pid %ld of uid %u, not by root: "
              "not a server's control socket",
              path, (long) cred.pid, (unsigned) cred.uid);
    errno = EPERM;
    return -1;
  }
  return 0;
}

struct json_object *
control_ask (const char *path, struct json_object *req, int timeout_ms,
             char *why, size_t whylen)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct timeval tv = { timeout_ms / 1000, timeout_ms % 1000 * 1000 };
  struct json_object *ans;
  char *text, *buf;
  size_t n = 0, len, done = 0;
  int fd, e;

  why[0] = '\0';
  if (strlen (path) >= sizeof sa.sun_path) {
    snprintf (why, whylen, "%s: %s", path, strerror (ENAMETOOLONG));
    errno = ENAMETOOLONG;
    return NULL;
  }
  if (trusted_path (path, why, whylen) == -1)
    return NULL;
  strcpy (sa.sun_path, path);
  text = json_text_of (req);
  buf = malloc (ANSWER_MAX + 1);
  if (text == NULL || buf == NULL) {
    free (text);
    free (buf);
    snprintf (why, whylen, "%s", strerror (ENOMEM));
    errno = ENOMEM;
    return NULL;
  }
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  /* The timeouts bound connect (a full backlog), send and each read:
   * a hung server is no server.
   */
  if (fd == -1 || (timeout_ms > 0
                   && (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv)
                         == -1
                       || setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
                                      sizeof tv)
                            == -1))
      || connect (fd, (struct sockaddr *) &sa, sizeof sa) == -1) {
    snprintf (why, whylen, "%s: %s", path, strerror (errno));
    goto fail;
  }
  if (trusted_peer (fd, path, why, whylen) == -1)
    goto fail;
  len = strlen (text);
  while (done < len) {
    ssize_t w = send (fd, text + done, len - done, MSG_NOSIGNAL);
    if (w <= 0)
      goto fail;
    done += w;
  }
  if ((len == 0 || text[len - 1] != '\n')
      && send (fd, "\n", 1, MSG_NOSIGNAL) != 1)
    goto fail;
  for (;;) {
    ssize_t r = read (fd, buf + n, ANSWER_MAX - n);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      goto fail;
    if (r == 0)
      break;
    n += r;
    if (n == ANSWER_MAX || buf[n - 1] == '\n')
      break;
  }
  close (fd);
  buf[n] = '\0';
  free (text);
  ans = json_tokener_parse (buf);
  free (buf);
  if (ans == NULL || !json_object_is_type (ans, json_type_object)) {
    json_object_put (ans);
    snprintf (why, whylen, "%s: the answer is not a JSON object", path);
    errno = EPROTO;
    return NULL;
  }
  return ans;

fail:
  e = errno;
  if (why[0] == '\0')
    snprintf (why, whylen, "%s: %s", path, strerror (e ? e : EPROTO));
  if (fd != -1)
    close (fd);
  free (text);
  free (buf);
  errno = e ? e : EPROTO;
  return NULL;
}
