#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""sandbox.py UNIT -- COMMAND...: run COMMAND under the seccomp part of a
systemd service's sandbox, as systemd 252 sets it up, without systemd.

From UNIT's [Service] section:
  SystemCallFilter=       the allow list (groups expanded by
                          `systemd-analyze syscall-filter`), less every
                          "~" line after it
  SystemCallErrorNumber=  what a call outside it gets (else the process
                          is killed, as systemd does)
  RestrictAddressFamilies= socket(2) for those families only
  MemoryDenyWriteExecute= systemd 252's seccomp rules: no mmap writable
                          and executable, no mprotect/pkey_mprotect to
                          executable, no shmat with SHM_EXEC
Capabilities and no_new_privs are setpriv's part (the caller's); the
namespaces (ProtectSystem=, PrivateTmp=, ...) and the device cgroup are
not emulated.  Needs python3-seccomp (libseccomp).
"""
import errno
import os
import socket
import subprocess
import sys

import seccomp

PROT_WRITE, PROT_EXEC, SHM_EXEC = 0x2, 0x4, 0o100000


def service_settings(path):
    out, section = [], None
    for line in open(path):
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.append((key.strip(), value.strip()))
    return out


def expand(names, seen=None):
    seen = set() if seen is None else seen
    calls = set()
    for name in names:
        if not name.startswith("@"):
            calls.add(name)
            continue
        if name in seen:
            continue
        seen.add(name)
        text = subprocess.run(["systemd-analyze", "syscall-filter", name],
                              check=True, capture_output=True,
                              text=True).stdout
        members = [t.strip() for t in text.splitlines()[1:]]
        calls |= expand([t for t in members if t and not t.startswith("#")],
                        seen)
    return calls


def main():
    unit, cmd = sys.argv[1], sys.argv[3:]
    assert sys.argv[2] == "--" and cmd, __doc__
    allow, deny, err, families, mdwe = None, set(), None, None, False
    for key, value in service_settings(unit):
        if key == "SystemCallFilter":
            if value.startswith("~"):
                deny |= expand(value[1:].split())
            elif allow is None:
                allow = expand(value.split())
            else:
                allow |= expand(value.split())
        elif key == "SystemCallErrorNumber":
            err = getattr(errno, value)
        elif key == "RestrictAddressFamilies":
            families = [getattr(socket, f) for f in value.split()]
        elif key == "MemoryDenyWriteExecute":
            mdwe = value == "yes"
    if allow is None:
        sys.exit("sandbox.py: %s has no SystemCallFilter= allow list" % unit)
    f = seccomp.SyscallFilter(
        seccomp.ERRNO(err) if err is not None else seccomp.KILL_PROCESS)
    special = {"socket", "mmap", "mprotect", "pkey_mprotect", "shmat"}
    for name in sorted((allow - deny) - special):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # not a system call of this architecture
    if "socket" in allow - deny:
        if families is None:
            f.add_rule(seccomp.ALLOW, "socket")
        for fam in families or []:
            f.add_rule(seccomp.ALLOW, "socket", seccomp.Arg(0, seccomp.EQ, fam))
    wx = PROT_WRITE | PROT_EXEC
    for name, arg, bits, ok in (("mmap", 2, wx, (0, PROT_WRITE, PROT_EXEC)),
                                ("mprotect", 2, PROT_EXEC, (0,)),
                                ("pkey_mprotect", 2, PROT_EXEC, (0,)),
                                ("shmat", 2, SHM_EXEC, (0,))):
        if name not in allow - deny:
            continue
        if not mdwe:
            f.add_rule(seccomp.ALLOW, name)
            continue
        for value in ok:
            f.add_rule(seccomp.ALLOW, name,
                       seccomp.Arg(arg, seccomp.MASKED_EQ, bits, value))
    f.load()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
