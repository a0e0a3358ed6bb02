/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: telling a service manager how the server is.
 *
 * sd_notify(3)'s protocol, without libsystemd: one datagram of
 * "VARIABLE=VALUE" lines to the AF_UNIX socket $NOTIFY_SOCKET names (a
 * path, or "@name" for an abstract one).  nbdkit does not speak it, but
 * the plugin knows the moment the server is ready: .after_fork runs once
 * the volume is open and checked and nbdkit listens (it has bound its
 * sockets, or holds the ones systemd passed, and written its pidfile),
 * before it accepts a connection.  So a Type=notify unit is started
 * exactly then, and a start that fails anywhere before is a failed start.
 * Without $NOTIFY_SOCKET nothing is sent.
 */
#ifndef NBDSTRIPE_NOTIFY_H
#define NBDSTRIPE_NOTIFY_H

/* Takes $NOTIFY_SOCKET out of the environment (the on_change program and
 * other children must not speak for this server).  From .load, while
 * nbdkit has one thread.
 */
extern void notify_init (void);

/* Sends state ("READY=1\nSTATUS=..."); quietly nothing without a socket.
 * Returns -1 (errno set) when a socket was given but the datagram could
 * not be sent.
 */
extern int notify_send (const char *state);

#endif /* NBDSTRIPE_NOTIFY_H */
