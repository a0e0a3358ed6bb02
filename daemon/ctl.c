/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the client side of a served volume's control socket
 * (include/control.h): one request line, one answer line.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json.h"
#include "nbdstripe.h"

#define ANSWER_MAX (1024 * 1024)

struct json_object *
control_ask (const char *path, struct json_object *req, int timeout_ms)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct timeval tv = { timeout_ms / 1000, timeout_ms % 1000 * 1000 };
  struct json_object *ans;
  char *text, *buf;
  size_t n = 0, len, done = 0;
  int fd, e;

  if (strlen (path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  strcpy (sa.sun_path, path);
  text = json_text_of (req);
  buf = malloc (ANSWER_MAX + 1);
  if (text == NULL || buf == NULL) {
    free (text);
    free (buf);
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
      || connect (fd, (struct sockaddr *) &sa, sizeof sa) == -1)
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
    errno = EPROTO;
    return NULL;
  }
  return ans;

fail:
  e = errno;
  if (fd != -1)
    close (fd);
  free (text);
  free (buf);
  errno = e ? e : EPROTO;
  return NULL;
}
