/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: sd_notify(3)'s protocol.  See notify.h. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "notify.h"

static struct sockaddr_un addr;
static socklen_t addr_len; /* 0: no socket */

void
notify_init (void)
{
  const char *s = getenv ("NOTIFY_SOCKET");
  size_t n;

  addr_len = 0;
  if (s == NULL)
    return;
  n = strlen (s);
  /* Only AF_UNIX; systemd 254's "vsock:" sockets are not ours to serve. */
  if ((s[0] == '/' || s[0] == '@') && n >= 2 && n < sizeof addr.sun_path) {
    addr.sun_family = AF_UNIX;
    memcpy (addr.sun_path, s, n);
    if (s[0] == '@')
      addr.sun_path[0] = '\0'; /* abstract */
    addr_len = offsetof (struct sockaddr_un, sun_path) + n;
  }
  unsetenv ("NOTIFY_SOCKET");
}

int
notify_send (const char *state)
{
  int fd, r;

  if (addr_len == 0)
    return 0;
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return -1;
  /* The manager reads our credentials from the socket itself. */
  r = sendto (fd, state, strlen (state), MSG_NOSIGNAL | MSG_DONTWAIT,
              (struct sockaddr *) &addr, addr_len);
  if (r == -1) {
    int e = errno;
    close (fd);
    errno = e;
    return -1;
  }
  close (fd);
  return 0;
}
