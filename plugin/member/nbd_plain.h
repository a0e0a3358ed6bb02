/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: plain synchronous NBD (libnbd), no threads.
 *
 * A connection driven by the calling thread, for headers and probes (the
 * nbdstripe command, assembly, re-probes) and for a member opened raw;
 * served I/O goes through member_nbd.c's pool.  Every step -- connecting
 * with its handshake, each command -- is bounded by timeout seconds: an
 * unreachable or hung server is an error after at most that long, never
 * a hang.  tls-psk-file= and other local-file URI parameters are allowed
 * (the URI is the operator's own).
 *
 * On error: NULL or -1 with errno, and a one-line reason in why.
 */
#ifndef NBDSTRIPE_NBD_PLAIN_H
#define NBDSTRIPE_NBD_PLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nbd_handle;

/* Connect to uri, bounded by timeout seconds (0: MEMBER_CONNECT_TIMEOUT).
 * With meta, asks for base:allocation.
 */
extern struct nbd_handle *member_nbd_plain_connect (const char *uri,
                                                    unsigned timeout,
                                                    bool meta, char *why,
                                                    size_t len);

/* One command each, bounded by timeout seconds (0: an hour).  A flush to
 * a server without flush does nothing.
 */
extern int member_nbd_plain_pread (struct nbd_handle *h, void *buf,
                                   size_t count, uint64_t offset,
                                   unsigned timeout, char *why, size_t len);
extern int member_nbd_plain_pwrite (struct nbd_handle *h, const void *buf,
                                    size_t count, uint64_t offset,
                                    unsigned timeout, char *why, size_t len);
extern int member_nbd_plain_flush (struct nbd_handle *h, unsigned timeout,
                                   char *why, size_t len);
extern int member_nbd_plain_trim (struct nbd_handle *h, uint64_t count,
                                  uint64_t offset, unsigned timeout, char *why,
                                  size_t len);

/* libnbd's last error for a message: "URI: ERROR", or WHAT: strerror. */
extern void member_nbd_plain_why (char *why, size_t len, const char *what,
                                  const char *uri);

#endif /* NBDSTRIPE_NBD_PLAIN_H */
