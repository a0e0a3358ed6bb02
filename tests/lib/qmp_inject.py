#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Faults a throw-away VM's guest asks for, injected through qemu's QMP
# socket (tests/vm/drive_health.sh): the guest prints on its serial
# console
#     vm: QOM-SET PATH PROPERTY VALUE
# (VALUE an integer) and this script, following the console log, runs
# qom-set PATH PROPERTY VALUE on the QMP socket, reads it back with
# qom-get and logs both, one line per request, on stdout:
#     qmp: qom-set PATH PROPERTY VALUE: ok, qom-get says VALUE
# It ends once STOP_FILE exists (the test makes it when the boot is
# over).
#
#   qmp_inject.py QMP_SOCKET CONSOLE_LOG STOP_FILE
import json
import os
import re
import socket
import sys
import time

REQUEST = re.compile(r"^vm: QOM-SET (\S+) (\S+) (-?\d+)\s*$")


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.buf = b""
        self.read()                  # the greeting
        self.call("qmp_capabilities")

    def read(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("QMP socket closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self.read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise RuntimeError("%s: %s" % (command, reply["error"]))
            return reply.get("return")


def main():
    qmp_path, console, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    qmp = None
    pos = 0
    pending = b""
    while True:
        done = os.path.exists(stop)
        try:
            with open(console, "rb") as f:
                f.seek(pos)
                data = f.read()
        except FileNotFoundError:
            data = b""
        pos += len(data)
        pending += data
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            m = REQUEST.match(raw.decode(errors="replace").replace("\r", ""))
            if not m:
                continue
            path, prop, value = m.group(1), m.group(2), int(m.group(3))
            try:
                if qmp is None:
                    qmp = Qmp(qmp_path)
                qmp.call("qom-set", path=path, property=prop, value=value)
                got = qmp.call("qom-get", path=path, property=prop)
                print("qmp: qom-set %s %s %d: ok, qom-get says %s"
                      % (path, prop, value, got), flush=True)
            except Exception as e:   # said, and the guest times out
                print("qmp: qom-set %s %s %d: FAILED: %s"
                      % (path, prop, value, e), flush=True)
        if done:
            return 0
        # Following a file another process writes: no event to wait on.
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
