#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""notify_recv.py SOCKET: a service manager's notify socket, for tests.

Binds SOCKET (AF_UNIX datagrams, as systemd's $NOTIFY_SOCKET), prints
"bound", then one line per message received: the sender's pid (from the
kernel's credentials, as systemd reads them), a tab, the message with its
newlines as "|".  Runs until killed.
"""
import os
import socket
import struct
import sys


def main():
    path = sys.argv[1]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    s.bind(path)
    print("bound", flush=True)
    size = struct.calcsize("3i")
    while True:
        msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(size))
        pid = -1
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("3i", data[:size])[0]
        text = msg.decode("utf-8", "replace").replace("\n", "|")
        print("%d\t%s" % (pid, text), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
