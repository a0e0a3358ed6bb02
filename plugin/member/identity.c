/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: member identity and aliases.  See include/identity.h. */

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "claim.h"
#include "identity.h"
#include "member.h"
#include "util.h"

/* Loops over loops, partitions of loops: a few levels are real, more is
 * a cycle or a pathology.
 */
#define MAX_DEPTH 8

/* LOOP_GET_STATUS64 gives device numbers in the kernel's "new" 32-bit
 * encoding (huge_encode_dev), not glibc's dev_t.
 */
static dev_t
decode_kernel_dev (uint64_t v)
{
  unsigned maj = (v & 0xfff00) >> 8;
  unsigned min = (v & 0xff) | ((v >> 12) & 0xfff00);
  return makedev (maj, min);
}

bool
identity_sysfs_read (dev_t dev, const char *rel, char *buf, size_t len)
{
  char path[128];
  FILE *fp;

  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/%s", major (dev),
            minor (dev), rel);
  fp = fopen (path, "re");
  if (fp == NULL)
    return false;
  if (fgets (buf, len, fp) == NULL) {
    fclose (fp);
    return false;
  }
  fclose (fp);
  buf[strcspn (buf, "\n")] = '\0';
  return true;
}

static bool
sysfs_u64 (dev_t dev, const char *rel, uint64_t *v)
{
  char buf[64], *end;

  if (!identity_sysfs_read (dev, rel, buf, sizeof buf))
    return false;
  errno = 0;
  *v = strtoull (buf, &end, 10);
  return errno == 0 && end != buf;
}

static bool
parse_devno (const char *s, dev_t *dev)
{
  unsigned maj, min;

  if (sscanf (s, "%u:%u", &maj, &min) != 2)
    return false;
  *dev = makedev (maj, min);
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

  if (n >= len)
    return;
  va_start (ap, fmt);
  vsnprintf (buf + n, len - n, fmt, ap);
  va_end (ap);
}

/* Where the bytes of block device dev (size bytes, from offset bytes into
 * it) live: a loop device's backing file or device, a partition's disk,
 * else the device itself as a whole disk.  fd: dev opened, or -1 (then
 * sysfs says what a loop device is backed by).
 */
static int
resolve_block (struct identity *id, dev_t dev, int fd, uint64_t offset,
               uint64_t size, unsigned depth, char *why, size_t len)
{
  char buf[PATH_MAX];
  uint64_t v;

  if (depth > MAX_DEPTH)
    return fail_why (why, len, ELOOP, "block device %u:%u: stacked too deeply",
                     major (dev), minor (dev));

  /* A loop device: the backing file's bytes from lo_offset. */
  if (identity_sysfs_read (dev, "loop/backing_file", buf, sizeof buf)) {
    struct loop_info64 info;
    struct stat st;
    dev_t bdev = 0, bino_dev = 0;
    ino_t bino = 0;
    uint64_t lo_offset = 0;
    bool backing_is_block = false;

    if (fd >= 0 && ioctl (fd, LOOP_GET_STATUS64, &info) == 0) {
      bino_dev = decode_kernel_dev (info.lo_device);
      bino = info.lo_inode;
      lo_offset = info.lo_offset;
      if (info.lo_rdevice) {
        bdev = decode_kernel_dev (info.lo_rdevice);
        backing_is_block = true;
      }
    }
    else {
      /* sysfs names the backing file; the offset is there too. */
      if (stat (buf, &st) == -1)
        return fail_why (why, len, errno,
                         "loop device %u:%u: its backing file %s: %s",
                         major (dev), minor (dev), buf, strerror (errno));
      bino_dev = st.st_dev;
      bino = st.st_ino;
      if (S_ISBLK (st.st_mode)) {
        bdev = st.st_rdev;
        backing_is_block = true;
      }
      if (sysfs_u64 (dev, "loop/offset", &v))
        lo_offset = v;
    }
    append (id->via, sizeof id->via, "%sloop device %u:%u from offset %" PRIu64,
            id->via[0] ? ", " : "", major (dev), minor (dev), lo_offset);
    if (backing_is_block)
      return resolve_block (id, bdev, -1, offset + lo_offset, size, depth + 1,
                            why, len);
    id->extent.base = EXTENT_FILE;
    id->extent.dev = bino_dev;
    id->extent.ino = bino;
    id->extent.start = offset + lo_offset;
    id->extent.end = id->extent.start + size;
    append (id->via, sizeof id->via, " over inode %llu on %u:%u",
            (unsigned long long) bino, major (bino_dev), minor (bino_dev));
    return 0;
  }

  /* A partition: a range of its disk (start is in 512-byte sectors). */
  if (sysfs_u64 (dev, "partition", &v) && sysfs_u64 (dev, "start", &v)) {
    dev_t parent;
    uint64_t start = v * 512;

    if (!identity_sysfs_read (dev, "../dev", buf, sizeof buf)
        || !parse_devno (buf, &parent))
      return fail_why (why, len, EINVAL,
                       "partition %u:%u: cannot find its disk in sysfs",
                       major (dev), minor (dev));
    append (id->via, sizeof id->via, "%spartition %u:%u at %" PRIu64,
            id->via[0] ? ", " : "", major (dev), minor (dev), start);
    return resolve_block (id, parent, -1, offset + start, size, depth + 1,
                          why, len);
  }

  id->extent.base = EXTENT_DISK;
  id->extent.dev = dev;
  id->extent.ino = 0;
  id->extent.start = offset;
  id->extent.end = offset + size;
  if (depth > 0)
    append (id->via, sizeof id->via, " of disk %u:%u", major (dev),
            minor (dev));
  return 0;
}

int
identity_of_fd (int fd, uint64_t size, struct identity *id, char *why,
                size_t len)
{
  struct stat st;

  memset (id, 0, sizeof *id);
  if (fstat (fd, &st) == -1)
    return fail_why (why, len, errno, "fstat: %s", strerror (errno));
  id->st_dev = st.st_dev;
  id->st_ino = st.st_ino;
  id->st_rdev = st.st_rdev;
  if (S_ISREG (st.st_mode)) {
    id->kind = ID_FILE;
    id->extent.base = EXTENT_FILE;
    id->extent.dev = st.st_dev;
    id->extent.ino = st.st_ino;
    id->extent.start = 0;
    id->extent.end = size;
    return 0;
  }
  if (S_ISBLK (st.st_mode)) {
    id->kind = ID_BLOCK;
    return resolve_block (id, st.st_rdev, fd, 0, size, 0, why, len);
  }
  return fail_why (why, len, EINVAL, "not a regular file or a block device");
}

/* NBD URIs. */

static int
hexval (int c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Percent-decode [s, s + n) into out. */
static bool
decode (const char *s, size_t n, char *out, size_t len)
{
  size_t o = 0;

  for (size_t i = 0; i < n; ++i) {
    int c = (unsigned char) s[i];
    if (c == '%' && i + 2 < n && hexval (s[i + 1]) >= 0
        && hexval (s[i + 2]) >= 0) {
      c = hexval (s[i + 1]) * 16 + hexval (s[i + 2]);
      i += 2;
    }
    if (o + 1 >= len)
      return false;
    out[o++] = (char) c;
  }
  out[o] = '\0';
  return true;
}

/* Query parameter key of the query [q, end), decoded into out. */
static bool
query_param (const char *q, const char *end, const char *key, char *out,
             size_t len)
{
  size_t klen = strlen (key);

  while (q && q < end) {
    const char *amp = memchr (q, '&', end - q);
    const char *stop = amp ? amp : end;
    if ((size_t) (stop - q) > klen && strncmp (q, key, klen) == 0
        && q[klen] == '=')
      return decode (q + klen + 1, stop - q - klen - 1, out, len);
    q = amp ? amp + 1 : NULL;
  }
  return false;
}

static void
add_addr (struct identity *id, const char *a)
{
  for (unsigned i = 0; i < id->nr_addrs; ++i)
    if (strcmp (id->addrs[i], a) == 0)
      return;
  if (id->nr_addrs < IDENTITY_MAX_ADDRS)
    snprintf (id->addrs[id->nr_addrs++], sizeof id->addrs[0], "%s", a);
}

/* Whether a resolved address is this host's: loopback, or an address of
 * one of its interfaces (a server bound to the wildcard answers on all).
 */
static bool
is_local_addr (const struct sockaddr *sa, const struct ifaddrs *ifs)
{
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const void *) sa;
    if ((ntohl (in->sin_addr.s_addr) >> 24) == 127)
      return true;
  }
  else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const void *) sa;
    if (IN6_IS_ADDR_LOOPBACK (&in6->sin6_addr))
      return true;
    if (IN6_IS_ADDR_V4MAPPED (&in6->sin6_addr)
        && in6->sin6_addr.s6_addr[12] == 127)
      return true;
  }
  for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != sa->sa_family)
      continue;
    if (sa->sa_family == AF_INET
        && ((const struct sockaddr_in *) (const void *) i->ifa_addr)
               ->sin_addr.s_addr
             == ((const struct sockaddr_in *) (const void *) sa)
                  ->sin_addr.s_addr)
      return true;
    if (sa->sa_family == AF_INET6
        && memcmp (&((const struct sockaddr_in6 *) (const void *) i->ifa_addr)
                      ->sin6_addr,
                   &((const struct sockaddr_in6 *) (const void *) sa)
                      ->sin6_addr,
                   16)
             == 0)
      return true;
  }
  return false;
}

static int
resolve_tcp (struct identity *id, const char *host, const char *port,
             char *why, size_t len)
{
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
  struct ifaddrs *ifs = NULL;
  char a[80];
  int e;

  e = getaddrinfo (host, port, &hints, &res);
  if (e != 0) {
    /* Unresolvable now: two identical spellings still compare equal. */
    snprintf (a, sizeof a, "tcp:name:%.40s:%.16s", host, port);
    add_addr (id, a);
    return 0;
  }
  if (getifaddrs (&ifs) == -1)
    ifs = NULL;
  for (struct addrinfo *r = res; r; r = r->ai_next) {
    char num[INET6_ADDRSTRLEN] = "";
    if (is_local_addr (r->ai_addr, ifs)) {
      snprintf (a, sizeof a, "tcp:local:%.16s", port);
      add_addr (id, a);
      continue;
    }
    if (getnameinfo (r->ai_addr, r->ai_addrlen, num, sizeof num, NULL, 0,
                     NI_NUMERICHOST)
        != 0)
      continue;
    snprintf (a, sizeof a, "tcp:%.46s:%.16s", num, port);
    add_addr (id, a);
  }
  if (ifs)
    freeifaddrs (ifs);
  freeaddrinfo (res);
  if (id->nr_addrs == 0)
    return fail_why (why, len, EINVAL, "%s: no usable address", host);
  return 0;
}

int
identity_of_uri (const char *uri, struct identity *id, char *why,
                 size_t len)
{
  const char *sep = strstr (uri, "://"), *auth, *path, *query, *end;
  char scheme[16], host[256], port[32], sock[PATH_MAX], a[80];
  struct stat st;

  memset (id, 0, sizeof *id);
  id->kind = ID_NBD;
  if (sep == NULL || (size_t) (sep - uri) >= sizeof scheme)
    return fail_why (why, len, EINVAL, "not an NBD URI");
  memcpy (scheme, uri, sep - uri);
  scheme[sep - uri] = '\0';
  auth = sep + 3;
  end = auth + strcspn (auth, "#");
  query = memchr (auth, '?', end - auth);
  if (query == NULL)
    query = end;
  path = memchr (auth, '/', query - auth);
  if (path == NULL)
    path = query;

  /* The export name is the path after its first slash. */
  if (path < query
      && !decode (path + 1, query - path - 1, id->export_name,
                  sizeof id->export_name))
    return fail_why (why, len, EINVAL, "export name too long");

  if (strstr (scheme, "+unix")) {
    if (!query_param (query < end ? query + 1 : NULL, end, "socket", sock,
                      sizeof sock))
      return fail_why (why, len, EINVAL, "no socket= parameter");
    if (stat (sock, &st) == 0)
      snprintf (a, sizeof a, "unix:%lx:%lx", (unsigned long) st.st_dev,
                (unsigned long) st.st_ino);
    else
      snprintf (a, sizeof a, "unix:path:%.60s", sock);
    add_addr (id, a);
    return 0;
  }

  /* host[:port], host possibly [IPv6], after optional userinfo@. */
  const char *h = auth, *hend = path;
  const char *at = memchr (h, '@', hend - h);
  if (at)
    h = at + 1;
  const char *colon = NULL;
  if (h < hend && *h == '[') {
    const char *close = memchr (h, ']', hend - h);
    if (close == NULL)
      return fail_why (why, len, EINVAL, "unterminated [ in the host");
    if ((size_t) (close - h - 1) >= sizeof host)
      return fail_why (why, len, EINVAL, "host name too long");
    memcpy (host, h + 1, close - h - 1);
    host[close - h - 1] = '\0';
    if (close + 1 < hend && close[1] == ':')
      colon = close + 1;
  }
  else {
    colon = memchr (h, ':', hend - h);
    size_t n = (colon ? colon : hend) - h;
    if (n >= sizeof host)
      return fail_why (why, len, EINVAL, "host name too long");
    memcpy (host, h, n);
    host[n] = '\0';
  }
  if (colon && colon + 1 < hend) {
    size_t n = hend - colon - 1;
    if (n >= sizeof port)
      return fail_why (why, len, EINVAL, "port too long");
    memcpy (port, colon + 1, n);
    port[n] = '\0';
  }
  else
    snprintf (port, sizeof port, "%s", "10809");

  if (strstr (scheme, "+vsock")) {
    snprintf (a, sizeof a, "vsock:%.32s:%.16s", host, port);
    add_addr (id, a);
    return 0;
  }
  if (host[0] == '\0')
    snprintf (host, sizeof host, "%s", "localhost");
  return resolve_tcp (id, host, port, why, len);
}

int
identity_of_name (const char *name, struct identity *id, char *why,
                  size_t len)
{
  struct stat st;
  uint64_t size = 0;
  int fd, r, e;

  if (member_is_uri (name))
    return identity_of_uri (name, id, why, len);
  fd = claim_open (name, true, 0, &st, why, len);
  if (fd == -1)
    return -1;
  if (S_ISREG (st.st_mode))
    size = st.st_size;
  if (!S_ISREG (st.st_mode) && ioctl (fd, BLKGETSIZE64, &size) == -1)
    r = fail_why (why, len, errno, "BLKGETSIZE64: %s", strerror (errno));
  else
    r = identity_of_fd (fd, size, id, why, len);
  e = errno;
  close (fd);
  errno = e;
  return r;
}

/* Comparison. */

static bool
nbd_same (const struct identity *a, const struct identity *b, const char **addr)
{
  if (strcmp (a->export_name, b->export_name) != 0)
    return false;
  for (unsigned i = 0; i < a->nr_addrs; ++i)
    for (unsigned j = 0; j < b->nr_addrs; ++j)
      if (strcmp (a->addrs[i], b->addrs[j]) == 0) {
        if (addr)
          *addr = a->addrs[i];
        return true;
      }
  return false;
}

static bool
same_base (const struct identity *a, const struct identity *b)
{
  return a->extent.base == b->extent.base && a->extent.dev == b->extent.dev
         && (a->extent.base == EXTENT_DISK || a->extent.ino == b->extent.ino);
}

bool
identity_alias (const struct identity *a, const struct identity *b, char *how,
                size_t len)
{
  const char *addr = NULL;

  if (how && len)
    how[0] = '\0';
  if (a->kind == ID_NBD || b->kind == ID_NBD) {
    if (a->kind != b->kind || !nbd_same (a, b, &addr))
      return false;
    if (how)
      snprintf (how, len, "the same NBD server (%s) and export '%s'", addr,
                a->export_name);
    return true;
  }
  if (a->kind == ID_FILE && b->kind == ID_FILE && a->st_dev == b->st_dev
      && a->st_ino == b->st_ino) {
    if (how)
      snprintf (how, len, "the same file");
    return true;
  }
  if (a->kind == ID_BLOCK && b->kind == ID_BLOCK && a->st_rdev == b->st_rdev) {
    if (how)
      snprintf (how, len, "the same block device (%u:%u)",
                major (a->st_rdev), minor (a->st_rdev));
    return true;
  }
  if (!same_base (a, b) || a->extent.start >= b->extent.end
      || b->extent.start >= a->extent.end)
    return false;
  if (how) {
    char da[256], db[256];
    snprintf (how, len, "overlapping: %s, and %s",
              identity_describe (a, da, sizeof da),
              identity_describe (b, db, sizeof db));
  }
  return true;
}

bool
identity_same (const struct identity *a, const struct identity *b)
{
  if (a->kind != b->kind)
    return false;
  switch (a->kind) {
  case ID_FILE: return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
  case ID_BLOCK:
    return a->st_rdev == b->st_rdev && same_base (a, b)
           && a->extent.start == b->extent.start
           && a->extent.end == b->extent.end;
  case ID_NBD: return nbd_same (a, b, NULL);
  }
  return false;
}

const char *
identity_describe (const struct identity *id, char *buf, size_t len)
{
  switch (id->kind) {
  case ID_FILE:
    snprintf (buf, len, "bytes %" PRIu64 "-%" PRIu64 " of inode %llu on %u:%u",
              id->extent.start, id->extent.end,
              (unsigned long long) id->st_ino, major (id->st_dev),
              minor (id->st_dev));
    break;
  case ID_BLOCK:
    if (id->via[0] && id->extent.base == EXTENT_FILE)
      snprintf (buf, len,
                "block device %u:%u: bytes %" PRIu64 "-%" PRIu64
                " of inode %llu on %u:%u (%s)",
                major (id->st_rdev), minor (id->st_rdev), id->extent.start,
                id->extent.end, (unsigned long long) id->extent.ino,
                major (id->extent.dev), minor (id->extent.dev), id->via);
    else if (id->via[0])
      snprintf (buf, len,
                "block device %u:%u: bytes %" PRIu64 "-%" PRIu64
                " of disk %u:%u (%s)",
                major (id->st_rdev), minor (id->st_rdev), id->extent.start,
                id->extent.end, major (id->extent.dev),
                minor (id->extent.dev), id->via);
    else
      snprintf (buf, len, "block device %u:%u", major (id->st_rdev),
                minor (id->st_rdev));
    break;
  case ID_NBD:
    snprintf (buf, len, "NBD %s export '%s'",
              id->nr_addrs ? id->addrs[0] : "?", id->export_name);
    break;
  }
  return buf;
}
