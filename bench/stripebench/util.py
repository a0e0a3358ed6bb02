# SPDX-License-Identifier: BSD-3-Clause
"""Small helpers shared by every part of stripe-bench: units, sizes,
processes, CPU accounting from /proc, block-device counters."""

import argparse
import os
import socket
import subprocess
import sys

CLK_TCK = os.sysconf("SC_CLK_TCK")
MB = 1_000_000
GIB = 1 << 30


def parse_size(s):
    s = s.strip().upper().rstrip("B").rstrip("I")
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf):
            mult, s = m, s[:-1]
            break
    v = float(s) * mult
    if v <= 0 or v != int(v):
        raise argparse.ArgumentTypeError("bad size")
    return int(v)


def fmt_size(n):
    for suf, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % m == 0:
            return "%d%s" % (n // m, suf)
    return str(n)


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class BenchError(Exception):
    pass


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, **kw)
    if check and r.returncode != 0:
        raise BenchError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


def proc_cpu(pid):
    """utime+stime (seconds) of a process, all its threads."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def sys_cpu():
    """(user+nice, busy) machine-wide seconds from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice) / CLK_TCK, (user + nice + system + irq + softirq) / CLK_TCK


def procs_cpu(pids):
    """(utime, stime) summed over several processes (None when one is gone)."""
    u = t = 0.0
    for pid in pids:
        c = proc_cpu(pid)
        if c is None:
            return None
        u, t = u + c[0], t + c[1]
    return u, t


def free_tcp_port():
    s = socket.socket(socket.AF_INET)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def dev_majmin(dev):
    st = os.stat(dev)
    return "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))


def dev_stat_path(dev):
    name = os.path.basename(os.path.realpath(dev))
    return "/sys/class/block/%s/stat" % name


def dev_sectors(dev):
    """(sectors read, sectors written) of a block device."""
    with open(dev_stat_path(dev)) as f:
        v = f.read().split()
    return int(v[2]), int(v[6])
