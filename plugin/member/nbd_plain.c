/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: plain synchronous NBD, no threads: a connection driven by
 * the calling thread, each step bounded in time.  For headers and probes
 * (the nbdstripe command, assembly, re-probes) and for a member opened
 * raw; the I/O path uses member_nbd.c's pool.  See include/nbd_plain.h.
 */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "member.h"
#include "nbd_plain.h"
#include "util.h"

/* libnbd's message already says what failed ("nbd_aio_connect_uri:
 * connect: Connection refused"); ours only when it has none.
 */
void
member_nbd_plain_why (char *why, size_t len, const char *what, const char *uri)
{
  const char *e = nbd_get_error ();
  if (why == NULL || len == 0)
    return;
  if (e)
    snprintf (why, len, "%s%s%s", uri ? uri : "", uri ? ": " : "", e);
  else
    snprintf (why, len, "%s%s%s: %s", uri ? uri : "", uri ? ": " : "", what,
              strerror (errno));
}

/* Drive a handle that has no dispatcher until done() or the deadline. */
static int
drive_until (struct nbd_handle *h, int (*done) (struct nbd_handle *, void *),
             void *arg, uint64_t deadline)
{
  for (;;) {
    int r = done (h, arg);
    if (r != 0)
      return r > 0 ? 0 : -1;
    if (nbd_aio_is_dead (h) || nbd_aio_is_closed (h)) {
      if (errno == 0)
        errno = ENOTCONN;
      return -1;
    }
    uint64_t now = now_ns ();
    if (now >= deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
    int fd = nbd_aio_get_fd (h);
    unsigned dir = nbd_aio_get_direction (h);
    struct pollfd p = { .fd = fd };
    if (dir & LIBNBD_AIO_DIRECTION_READ)
      p.events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE)
      p.events |= POLLOUT;
    int ms = (deadline - now) / 1000000 + 1;
    int pr = poll (&p, 1, ms);
    if (pr == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (pr == 0)
      continue; /* the deadline check above ends it */
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      if (nbd_aio_notify_read (h) == -1)
        return -1;
    }
    else if (p.revents & POLLOUT) {
      if (nbd_aio_notify_write (h) == -1)
        return -1;
    }
  }
}

/* The value of query parameter key in uri (percent-decoded), if any. */
static bool
uri_query_param (const char *uri, const char *key, char *out, size_t len)
{
  const char *q = strchr (uri, '?');
  size_t klen = strlen (key);

  while (q) {
    q++;
    if (strncmp (q, key, klen) == 0 && q[klen] == '=') {
      const char *v = q + klen + 1;
      size_t n = 0;
      while (*v && *v != '&' && *v != '#' && n + 1 < len) {
        unsigned c;
        if (*v == '%' && v[1] && v[2] && sscanf (v + 1, "%2x", &c) == 1) {
          out[n++] = c;
          v += 3;
        }
        else
          out[n++] = *v++;
      }
      out[n] = '\0';
      return n > 0;
    }
    q = strchr (q, '&');
  }
  return false;
}

static int
is_ready (struct nbd_handle *h, void *arg)
{
  (void) arg;
  return nbd_aio_is_ready (h) ? 1 : 0;
}

struct nbd_handle *
member_nbd_plain_connect (const char *uri, unsigned timeout, bool meta,
                          char *why, size_t len)
{
  struct nbd_handle *h = nbd_create ();
  uint64_t deadline =
    now_ns ()
    + (uint64_t) (timeout ? timeout : MEMBER_CONNECT_TIMEOUT) * 1000000000;

  if (h == NULL) {
    member_nbd_plain_why (why, len, "nbd_create", uri);
    return NULL;
  }
  nbd_set_handle_name (h, "nbdstripe");
  /* libnbd 1.14 ignores tls-username= in the URI (and then asks
   * getlogin, which fails without a terminal): set it ourselves.
   */
  {
    char user[256];
    if (uri_query_param (uri, "tls-username", user, sizeof user)
        && nbd_set_tls_username (h, user) == -1) {
      member_nbd_plain_why (why, len, "tls-username", uri);
      nbd_close (h);
      return NULL;
    }
  }
  /* tls-psk-file= and friends: the URI is the operator's own. */
  nbd_set_uri_allow_local_file (h, true);
  if (meta)
    nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION);
  if (nbd_aio_connect_uri (h, uri) == -1) {
    member_nbd_plain_why (why, len, "connect", uri);
    nbd_close (h);
    return NULL;
  }
  if (drive_until (h, is_ready, NULL, deadline) == -1) {
    if (errno == ETIMEDOUT)
      snprintf (why, len, "%s: no answer within %u s", uri,
                timeout ? timeout : MEMBER_CONNECT_TIMEOUT);
    else {
      member_nbd_plain_why (why, len, "connect", uri);
      if (strncmp (uri, "nbds", 4) == 0 && nbd_get_error ()
          && strstr (nbd_get_error (), "handshake")) {
        size_t n = strlen (why);
        snprintf (why + n, len - n,
                  " (TLS: wrong pre-shared key or user name?)");
      }
    }
    nbd_close (h);
    return NULL;
  }
  return h;
}

struct sync_cmd {
  int64_t cookie;
  int err;
  bool done;
};

static int
sync_done_cb (void *user_data, int *error)
{
  struct sync_cmd *c = user_data;
  c->err = *error;
  c->done = true;
  return 1;
}

static int
sync_is_done (struct nbd_handle *h, void *arg)
{
  (void) h;
  return ((struct sync_cmd *) arg)->done ? 1 : 0;
}

static int
plain_finish (struct nbd_handle *h, struct sync_cmd *c, unsigned timeout,
              const char *what, char *why, size_t len)
{
  uint64_t deadline =
    now_ns () + (uint64_t) (timeout ? timeout : 3600) * 1000000000;

  if (c->cookie == -1) {
    int e = nbd_get_errno () ? nbd_get_errno () : EIO;
    member_nbd_plain_why (why, len, what, NULL);
    errno = e;
    return -1;
  }
  if (drive_until (h, sync_is_done, c, deadline) == -1) {
    int e = errno;
    if (e == ETIMEDOUT)
      snprintf (why, len, "%s: no answer within %u s", what,
                timeout ? timeout : 3600);
    else
      snprintf (why, len, "%s: %s", what, strerror (e));
    errno = e;
    return -1;
  }
  if (c->err) {
    snprintf (why, len, "%s: %s", what, strerror (c->err));
    errno = c->err;
    return -1;
  }
  return 0;
}

#define SYNC_CB(c)                                                            \
  ((nbd_completion_callback){ .callback = sync_done_cb, .user_data = &(c) })

int
member_nbd_plain_pread (struct nbd_handle *h, void *buf, size_t count,
                        uint64_t offset, unsigned timeout, char *why,
                        size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_pread (h, buf, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "read", why, len);
}

int
member_nbd_plain_pwrite (struct nbd_handle *h, const void *buf, size_t count,
                         uint64_t offset, unsigned timeout, char *why,
                         size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_pwrite (h, buf, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "write", why, len);
}

int
member_nbd_plain_flush (struct nbd_handle *h, unsigned timeout, char *why,
                        size_t len)
{
  struct sync_cmd c = { 0 };
  if (nbd_can_flush (h) != 1)
    return 0;
  c.cookie = nbd_aio_flush (h, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "flush", why, len);
}

int
member_nbd_plain_trim (struct nbd_handle *h, uint64_t count, uint64_t offset,
                       unsigned timeout, char *why, size_t len)
{
  struct sync_cmd c = { 0 };
  c.cookie = nbd_aio_trim (h, count, offset, SYNC_CB (c), 0);
  return plain_finish (h, &c, timeout, "trim", why, len);
}

