# SPDX-License-Identifier: BSD-3-Clause
"""Small helpers shared by every part of stripe-bench: units, sizes,
processes, CPU accounting from /proc, block-device counters."""

import argparse
import os
import socket
import subprocess
import sys
from time import monotonic as _now, sleep as _sleep

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


def psi_cpu_some_avg10():
    """/proc/pressure/cpu "some" avg10 (percent of the last 10 s in which a
    runnable task waited for a CPU); None without PSI."""
    try:
        with open("/proc/pressure/cpu") as f:
            for line in f:
                if line.startswith("some "):
                    return float(line.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        pass
    return None


def idle_load(sample_s, own_pids=()):
    """The load of other processes now: CPUs they used over SAMPLE_S seconds
    while the harness is idle between runs (its servers idle, no fio).

    /proc/stat over a short idle window is the direct measure: everything
    busy in it is someone else's.  The load average is not: it is a
    1-minute decaying mean, so it still holds the previous run's own fio
    and servers, and it counts tasks in D state, i.e. our own throttled
    I/O.  PSI's cpu "some" avg10 is a 10 s mean with the same lag (and on
    2 CPUs our own runs saturate it); it is recorded beside, not judged.
    OWN_PIDS (the servers) are subtracted in case they were not idle."""
    own = [os.getpid()] + list(own_pids)
    c0, p0, t0 = sys_cpu(), procs_cpu(own), _now()
    _sleep(sample_s)
    c1, p1, t1 = sys_cpu(), procs_cpu(own), _now()
    win = max(t1 - t0, 1e-3)
    own_u = (p1[0] - p0[0]) if p0 and p1 else 0.0
    own_t = (sum(p1) - sum(p0)) if p0 and p1 else 0.0
    with open("/proc/loadavg") as f:
        la = float(f.read().split()[0])
    return {"sample_s": round(win, 3),
            "other_user_cores": round(max(0.0, (c1[0] - c0[0]) - own_u) / win, 3),
            "other_cpu_cores": round(max(0.0, (c1[1] - c0[1]) - own_t) / win, 3),
            "psi_cpu_some_avg10": psi_cpu_some_avg10(),
            "loadavg_1m": la}


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
