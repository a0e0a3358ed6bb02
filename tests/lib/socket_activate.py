#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""socket_activate.py SOCKET COMMAND...: socket activation as systemd does
it for a service of a .socket unit (Accept=no), for the tests.

Binds and listens on the Unix socket SOCKET, prints "listening" on stdout
(the caller reads it: from then on a client may connect, and waits in the
queue), then waits for the first connection, and execs COMMAND in this
process with the listening socket as fd 3, LISTEN_FDS=1, LISTEN_PID this
pid, LISTEN_FDNAMES=connection (sd_listen_fds(3)).  stdout becomes
stderr's target before the exec.  Like systemd-socket-activate(1), but
saying when it listens.
"""
import os
import select
import socket
import sys

if len(sys.argv) < 3:
    sys.exit("usage: socket_activate.py SOCKET COMMAND...")
path, argv = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(128)
print("listening", flush=True)
select.select([s], [], [])
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
    s.close()
os.set_inheritable(3, True)
os.dup2(2, 1)
env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()),
           LISTEN_FDNAMES="connection")
os.execvpe(argv[0], argv, env)
