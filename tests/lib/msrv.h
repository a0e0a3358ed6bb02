/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration tests: member servers, stock nbdkit processes
 * exporting a backing file, for remote members (NBD URIs).
 *
 * A member server is `nbdkit -f --exit-with-parent [--tls=require
 * --tls-psk=FILE] --filter=log ARGS... logfile=REQLOG logappend=true`,
 * ARGS being the caller's (e.g. "file", BACKING, or "--filter=multi-conn",
 * "file", BACKING, "multi-conn-mode=disable").  As for our own server
 * (harness.h), the harness makes the listening socket and hands it over
 * with socket activation: a Unix socket in the case's directory or
 * 127.0.0.1 on a free port.  A client may connect the moment msrv_start
 * returns; nothing sleeps.  A restart listens again at the same address
 * (same socket path, same port) with the same arguments.
 *
 * The log filter (outermost, so it sees what the client sent) records
 * every connection and request: that is how the tests count the
 * connections our plugin opens.
 *
 * Member servers never get STRIPE_LD_PRELOAD: they do not load our plugin.
 * The cleanup registry kills them (SIGKILL) at the end of the case.
 */
#ifndef NBDSTRIPE_TEST_MSRV_H
#define NBDSTRIPE_TEST_MSRV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <libnbd.h>

enum msrv_transport { MSRV_UNIX, MSRV_TCP };

struct msrv_opts {
  enum msrv_transport transport;
  const char *tls_psk; /* server side: --tls=require --tls-psk=FILE */
};

struct msrv {
  pid_t pid; /* 0 when not running */
  enum msrv_transport transport;
  char *name;    /* for messages */
  char *sock;    /* MSRV_UNIX */
  int port;      /* MSRV_TCP, on 127.0.0.1 */
  char **argv;   /* the whole command */
  char *log;     /* nbdkit's stdout and stderr (appended over restarts) */
  char *reqlog;  /* the log filter's file */
  unsigned runs; /* how many times started */
};

/* Start a member server named name (file names in dir derive from it).
 * args: NULL-terminated, what follows the common options (see above).
 */
extern void msrv_start (struct msrv *m, const char *dir, const char *name,
                        const struct msrv_opts *o, const char *const *args);
/* Send sig and reap the process. */
extern void msrv_kill (struct msrv *m, int sig);
/* SIGTERM; FAILs unless it exits with status 0. */
extern void msrv_stop (struct msrv *m);
/* Start it again at the same address with the same arguments. */
extern void msrv_restart (struct msrv *m);

/* The NBD URI of the export; with psk_file, the TLS form with user in the
 * authority and tls-psk-file= (the client's key, which need not be the
 * server's): nbds+unix://USER@/?socket=S&tls-psk-file=F,
 * nbds://USER@127.0.0.1:P/?tls-psk-file=F.  Caller frees.
 */
extern char *msrv_uri (const struct msrv *m, const char *psk_file,
                       const char *user);
/* The same with the user as a tls-username= parameter instead (the form
 * the issue and the plugin's manual give).
 */
extern char *msrv_uri_tls_username (const struct msrv *m, const char *psk_file,
                                    const char *user);

/* A libnbd client of the server (base:allocation requested), registered
 * for cleanup like server_connect's.  Close with close_handle.
 */
extern struct nbd_handle *
msrv_connect (const struct msrv *m, const char *psk_file, const char *user);

/* The request log's size now: a mark for the functions below. */
extern uint64_t msrv_log_mark (const struct msrv *m);
/* From the mark on: connections opened, and the most open at once
 * (Connect and Disconnect lines of the log filter, in order).
 */
extern void msrv_connections (const struct msrv *m, uint64_t mark,
                              unsigned *opened, unsigned *peak);
/* From the mark on: requests of a kind ("Read", "Write", "Flush", "Trim",
 * "Zero", "Extents") whose line also contains with (unless NULL), e.g.
 * " fua=1 ".
 */
extern unsigned msrv_requests (const struct msrv *m, uint64_t mark,
                               const char *kind, const char *with);

/* A PSK file for user with a fresh random key, made by psktool (gnutls-bin)
 * in dir; SKIPs the case without psktool.  The path is freed at the end
 * of the case.
 */
extern char *make_psk_file (const char *dir, const char *name,
                            const char *user);

/* The pause filter's control socket: pause (returns once the filter says
 * it is paused: no request in flight reaches the plugin any more) or
 * resume.
 */
extern void pause_control (const char *ctl, bool pause);

#endif /* NBDSTRIPE_TEST_MSRV_H */
