# SPDX-License-Identifier: BSD-3-Clause
"""replace-impact: what `nbdstripe replace` costs and how fast it copies, on
emulated members (the stripebench emulation: direct-I/O loop devices
throttled by cgroup block throttling).

One run, side by side:
  a. the devices' own sequential rates (raw fio, O_DIRECT, 1M, QD8, inside
     the throttle): read on the member being replaced, write on the new one;
  b. the copy rate of `nbdstripe replace --wait` with no client connected:
     bytes_total / elapsed_seconds from the replace status, and its ratio to
     min(a.read, a.write) (issue #15: >= 0.80);
  c. `--rate` at half the device rate: the copy rate stays at or below it
     (+5 %);
  d. RND4K-Q32T1 random reads on the volume (fio's nbd engine), without a
     replace and with one running, interleaved, --repeat times;
  e. the copy time of a full-speed replace while a hot spot (the volume's
     first 64 MiB, which the copy must pass) is written 4K at random at
     QD32, next to b's idle copy time, and the longest a client write
     waited for a window of the copy (the status's
     longest_client_wait_seconds);
  f. a trim of 4 GiB (less 1 MiB: NBD's lengths are 32-bit) of the
     volume sent once the copy is 10 % in: how long it takes, and how far
     the copy has gone meanwhile (it must not wait for the copy to pass
     its whole span).

The volume is served by nbdkit with the stripe plugin and config=FILE
(metadata "none", cache "direct", a health.status_file so that the plugin
opens its control socket NAME.ctl beside it).  Every replace is driven with
the `nbdstripe replace` command; the harness reads the replace's progress
from the control socket (the same "replace" object as the status file)."""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

from .runner import Bench, REPO
from .util import MB, BenchError, fmt_size, log, parse_size, proc_cpu, run, sys_cpu

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # bench/
VOLUME = "replbench"
OLD, KEEP, NEW = 0, 1, 2                # member files: the replaced one, the other one, the new one
COPY_TARGET = 0.80                      # issue #15: copy >= 80 % of the slower device
RATE_SLACK = 1.05                       # --rate: at most 5 % over
PROFILE = ("RND4K-Q32T1", 4096, 32)

DESCRIPTION = """\
replace-impact: how fast `nbdstripe replace` copies a member while the volume
is served, whether --rate bounds it, and what a running replace costs the
clients (RND4K-Q32T1 random read IOPS and p99 latency, with and without).
Emulated members: 2 volume members + 1 new member, each a direct-I/O loop
device throttled by cgroup block throttling (--mbps, --iops), as
bench/stripe-bench's.  Needs root."""

EPILOG = """\
examples:
  bench/replace-impact                      # full run: 3G members, about 4 minutes
  bench/replace-impact --quick --out /tmp/ri   # CI size: 512M members, under a minute
  bench/replace-impact --impact-rate 75000000  # the measured replace bounded at 75 MB/s

outputs (in --out, default bench/out/replace-YYYYmmdd-HHMMSS): results.json,
summary.md, logs/ (nbdkit's log, the replace commands' output, the config).
Units: MB/s = 10^6 bytes/s; latencies in microseconds; sizes accept K/M/G
(1024-based, as nbdstripe's own --rate does: pass plain bytes/s to be exact).
Exit status: 0 ran (whether or not the targets were met: see results.json),
1 error, 2 usage, 130 interrupted.
"""


def find_tool(env, rel):
    for p in (os.environ.get(env), os.path.join(REPO, "build", rel)):
        if p and os.path.exists(p):
            return p
    return None


def common_args(ap, tag):
    """The options replace-impact and reshape-impact share (TAG names
    their default output and work directories)."""
    ap.add_argument("--plugin", default=find_tool("NBDSTRIPE_PLUGIN", "plugin/nbdkit-stripe-plugin.so"),
                    help="nbdkit-stripe-plugin.so (default: $NBDSTRIPE_PLUGIN, else build/plugin/)")
    ap.add_argument("--nbdstripe", default=find_tool("NBDSTRIPE", "daemon/nbdstripe"),
                    help="the nbdstripe command (default: $NBDSTRIPE, else build/daemon/nbdstripe)")
    ap.add_argument("--out", help="output directory (default: bench/out/%s-YYYYmmdd-HHMMSS)" % tag)
    ap.add_argument("--iops", type=int, default=2500, help="per-member IOPS each way (default 2500)")
    ap.add_argument("--chunk", type=parse_size, default=128 << 10, help="the volume's chunk (default 128K)")
    ap.add_argument("--ramp", type=float, help="fio ramp seconds, not measured (default 2; quick 0.5)")
    ap.add_argument("--runtime", type=float, help="fio measured seconds (default 10; quick 1.5)")
    ap.add_argument("--noise-threshold", type=float, default=0.15,
                    help="a run is noisy when other processes used more than this many CPUs "
                         "of user time during it (default 0.15)")
    ap.add_argument("--noisy-retries", type=int, default=2,
                    help="re-run a noisy fio run up to this many times, keep the quietest (default 2)")
    ap.add_argument("--workdir", default="/var/tmp/nbdstripe-%s-%d" % (tag, os.getpid()),
                    help="where the member files go (default /var/tmp/nbdstripe-%s-PID)" % tag)
    ap.add_argument("--keep-files", action="store_true", help="do not delete the member files at exit")


def common_checks(ap, a, tag):
    """What common_args gave, checked and completed (a.repeat is each
    tool's own)."""
    if a.chunk % 4096:
        ap.error("--chunk must be a multiple of 4K")
    a.ramp = a.ramp if a.ramp is not None else (0.5 if a.quick else 2.0)
    a.runtime = a.runtime if a.runtime is not None else (1.5 if a.quick else 10.0)
    for what, p in (("stripe plugin", a.plugin), ("nbdstripe", a.nbdstripe)):
        if not p or not os.path.exists(p):
            ap.error("%s not found: build it (cmake --build build) or pass --%s"
                     % (what, "plugin" if what != "nbdstripe" else "nbdstripe"))
    a.plugin, a.nbdstripe = os.path.abspath(a.plugin), os.path.abspath(a.nbdstripe)
    if not a.out:
        a.out = os.path.join(BENCH, "out", datetime.datetime.now().strftime(tag + "-%Y%m%d-%H%M%S"))
    # what the stripebench mixins read
    a.remote, a.loop_stack, a.members, a.transport = False, 2, None, "unix"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="replace-impact", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, "replace")
    ap.add_argument("--quick", action="store_true",
                    help="CI size: 512M members, 1.5 s fio runs, 2 repetitions, 1 s device runs")
    ap.add_argument("--mbps", type=int, default=150, help="per-member MB/s each way (default 150)")
    ap.add_argument("--member-size", type=parse_size,
                    help="size of each member (default 3G: a copy of 20-45 s at 150 MB/s; quick 512M)")
    ap.add_argument("--repeat", type=int, help="repetitions of the with/without pair (default 3; quick 2)")
    ap.add_argument("--device-runtime", type=float,
                    help="seconds of each raw device run (default 5; quick 1)")
    ap.add_argument("--rate-fraction", type=float, default=0.5,
                    help="the --rate check copies at this fraction of --mbps (default 0.5)")
    ap.add_argument("--impact-rate", type=int, default=0,
                    help="--rate (bytes/s) of the replace that runs during the with-replace fio runs "
                         "(default 0: none, full speed: the worst case for clients)")
    ap.add_argument("--no-hot-spot", action="store_true",
                    help="leave out e (the copy under a hot-spot writer): for a plugin whose copier "
                         "a hot spot starves (it would never end)")
    a = ap.parse_args(argv)
    if a.member_size is None:
        a.member_size = (512 << 20) if a.quick else (3 << 30)
    if a.member_size % (4 << 20):
        ap.error("--member-size must be a multiple of 4M")
    common_checks(ap, a, "replace")
    a.repeat = a.repeat if a.repeat is not None else (2 if a.quick else 3)
    a.device_runtime = a.device_runtime if a.device_runtime is not None else (1.0 if a.quick else 5.0)
    if a.repeat < 1 or not 0 < a.rate_fraction <= 1 or a.impact_rate < 0:
        ap.error("--repeat >= 1, 0 < --rate-fraction <= 1, --impact-rate >= 0")
    return a


def spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def case_summary(runs, case):
    """The fio rows of one case: medians and ranges over the repetitions."""
    rs = [r for r in runs if r["case"] == case]
    return {"repeats": len(rs), "iops": spread([r["iops"] for r in rs]),
            "lat_mean_us": spread([r["lat_mean_us"] for r in rs]),
            "lat_p99_us": spread([r["lat_p99_us"] for r in rs]),
            "other_user_cores": spread([r["other_user_cores"] for r in rs]),
            "noisy_runs": sum(1 for r in rs if r["noisy"])}


class ReplaceBench(Bench):
    def __init__(self, a):
        super().__init__(a)
        self.cfg = os.path.join(self.sock_dir, VOLUME + ".conf")
        self.status_file = os.path.join(self.sock_dir, VOLUME + ".status.json")
        self.ctl_path = os.path.join(self.sock_dir, VOLUME + ".ctl")
        self.cur = OLD            # which member file is the volume's member 0 now
        self.spare = NEW          # and which one a replace copies it to
        self.nlog = 0
        self.readonly = False     # the calibration writes too

    # ------------------------------------------------------------ helpers
    def watched(self, cmd, server_pid=None, preexec=None, stdout=None):
        """Run cmd to its end; returns (CompletedProcess-like, window) with the
        CPU of other processes over its lifetime, as FioMixin.fio measures it
        (the server, the child, the harness itself are not "other")."""
        t0, c0, h0 = time.monotonic(), sys_cpu(), proc_cpu(os.getpid())
        s0 = proc_cpu(server_pid) if server_pid else None
        p = subprocess.Popen(cmd, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=preexec)
        self.children.add(p)
        last, s1, t1, c1, h1 = None, s0, t0, c0, h0
        try:
            while p.poll() is None:
                last = proc_cpu(p.pid) or last
                s1 = proc_cpu(server_pid) if server_pid else None
                t1, c1, h1 = time.monotonic(), sys_cpu(), proc_cpu(os.getpid())
                time.sleep(0.05)
            out, err = p.communicate()
        finally:
            self.children.discard(p)
        win = max((t1 if last else time.monotonic()) - t0, 1e-3)
        w = {"window_s": win, "other_user_cores": None}
        if last:
            srv = (s1[0] - s0[0]) if s0 and s1 else 0.0
            w["other_user_cores"] = max(0.0, (c1[0] - c0[0]) - srv - last[0] - (h1[0] - h0[0])) / win
            w["server_cpu_s"] = (sum(s1) - sum(s0)) if s0 and s1 else None
        w["noisy"] = w["other_user_cores"] is not None and w["other_user_cores"] > self.a.noise_threshold
        return p.returncode, out, err, w

    def ctl(self, req):
        """One request on the volume's control socket, one JSON answer."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(self.ctl_path)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        return json.loads(buf.decode())

    def replace_status(self):
        ans = self.ctl({"op": "status"})
        if not ans.get("ok"):
            raise BenchError("control socket: %s" % ans.get("error"))
        return (ans.get("status") or ans).get("replace")

    def nbdstripe(self, args, name):
        """nbdstripe ARGS (a short command); its output goes to logs/."""
        r = run([self.a.nbdstripe] + args, check=False)
        self.save_log(name, r.stdout + r.stderr)
        if r.returncode != 0:
            raise BenchError("nbdstripe %s: %s" % (" ".join(args), (r.stderr or r.stdout).strip()))
        return r

    def save_log(self, name, text):
        self.nlog += 1
        with open(os.path.join(self.a.out, "logs", "%02d-%s.log" % (self.nlog, name)), "w") as f:
            f.write(text)

    def dev(self, i):
        return self.members[i]["dev"]

    def config_member0(self):
        """Which member file the config names as member 0 (replace rewrites it)."""
        with open(self.cfg) as f:
            m = re.search(r'^\s*members\s*=\s*\[\s*"([^"]*)"', f.read(), re.M)
        devs = [os.path.realpath(x["dev"]) for x in self.members]
        return devs.index(os.path.realpath(m.group(1))) if m and os.path.realpath(m.group(1)) in devs else None

    # ------------------------------------------------------------ setup
    def write_config(self):
        a = self.a
        with open(self.cfg, "w") as f:
            f.write('# replace-impact: the volume under test (members are throttled loop devices)\n'
                    'name = "%s";\nchunk = "%s";\nmembers = [ "%s", "%s" ];\nmetadata = "none";\n'
                    'cache = "direct";\nhealth = {\n  status_file = "%s";\n  interval = 1;\n};\n'
                    % (VOLUME, fmt_size(a.chunk), self.dev(OLD), self.dev(KEEP), self.status_file))

    def serve(self):
        self.write_config()
        self.save_log("config-initial", open(self.cfg).read())
        self.uri = self.start_server("volume", [self.a.plugin, "config=" + self.cfg], False)
        self.pid = self.servers["volume"][0].pid
        deadline = time.monotonic() + 10
        while not os.path.exists(self.ctl_path):
            if time.monotonic() > deadline:
                raise BenchError("the server made no control socket %s (see logs/nbdkit-volume.log)"
                                 % self.ctl_path)
            time.sleep(0.05)

    # ------------------------------------------------------------ a. devices
    def device_rate(self, i, rw):
        a = self.a
        cmd = ["fio", "--name=dev%d-%s" % (i, rw), "--filename=" + self.dev(i), "--direct=1",
               "--ioengine=io_uring", "--rw=" + rw, "--bs=1M", "--iodepth=8",
               "--time_based", "--runtime=%dms" % round(a.device_runtime * 1000),
               "--ramp_time=300ms", "--output-format=json"]
        rc, out, err, w = self.watched(cmd, preexec=self.throttle.enter)
        if rc != 0:
            raise BenchError("fio on %s failed: %s" % (self.dev(i), err.strip()[-500:]))
        d = json.loads(out[out.index("{"):])["jobs"][0][rw]
        r = {"member_file": i, "device": self.dev(i), "rw": rw, "bs": 1 << 20, "iodepth": 8,
             "mbps": d["bw_bytes"] / MB, "target_mbps": a.mbps,
             "other_user_cores": w["other_user_cores"], "noisy": w["noisy"]}
        log("  device %-12s %-5s 1M Q8: %6.1f MB/s (%.3fx of %d)%s"
            % (self.dev(i), rw, r["mbps"], r["mbps"] / a.mbps, a.mbps, "  noisy" if r["noisy"] else ""))
        return r

    def serial_copy(self, src, dst):
        """dd bs=4M iflag=direct oflag=direct from src to dst inside the
        throttle: a copy that reads a 4 MiB block, then writes it, never
        both at once -- what the copier does with its windows.  On a drive
        with a fixed transfer rate it gets about 1/(1/read + 1/write); on a
        token-bucket throttle an idle device banks credit, so it may not."""
        a = self.a
        size = min(a.member_size, (256 << 20) if a.quick else (1 << 30))
        cmd = ["dd", "if=" + self.dev(src), "of=" + self.dev(dst), "bs=4M",
               "count=%d" % (size // (4 << 20)), "iflag=direct", "oflag=direct"]
        t0 = time.monotonic()
        rc, out, err, w = self.watched(cmd, preexec=self.throttle.enter)
        el = time.monotonic() - t0
        if rc != 0:
            raise BenchError("%s: %s" % (" ".join(cmd), err.strip()[-300:]))
        m = re.search(r"^(\d+) bytes .* copied, ([0-9.]+) s", err, re.M)
        nbytes, secs = (int(m.group(1)), float(m.group(2))) if m else (size, el)
        r = {"command": " ".join(cmd), "bytes": nbytes, "seconds": secs, "mbps": nbytes / secs / MB,
             "other_user_cores": w["other_user_cores"], "noisy": w["noisy"]}
        log("  serial copy (dd bs=4M, O_DIRECT) %s -> %s: %s in %.1f s = %.1f MB/s%s"
            % (self.dev(src), self.dev(dst), fmt_size(nbytes), secs, r["mbps"],
               "  noisy" if r["noisy"] else ""))
        return r

    # ------------------------------------------------------------ b, c. copies
    def copy(self, rate, name):
        """nbdstripe replace --wait [--rate RATE]: member 0 to the spare."""
        src, dst = self.cur, self.spare
        args = ["replace", "--wait", "--force"] + (["--rate", str(rate)] if rate else []) + \
            [self.cfg, "0", self.dev(dst)]
        t0 = time.monotonic()
        rc, out, err, w = self.watched([self.a.nbdstripe] + args, server_pid=self.pid)
        wall = time.monotonic() - t0
        self.save_log(name, "$ nbdstripe %s\n%s%s" % (" ".join(args), out, err))
        st = self.replace_status()
        if rc != 0 or not st or st.get("state") != "done":
            raise BenchError("nbdstripe replace (%s) did not complete: %s %s"
                             % (name, (err or out).strip()[-500:], st))
        self.cur, self.spare = dst, src
        m0 = self.config_member0()
        if m0 != dst:
            raise BenchError("after the replace the config's member 0 is not %s" % self.dev(dst))
        mbps = st["bytes_total"] / st["elapsed_seconds"] / MB
        r = {"old": self.dev(src), "new": self.dev(dst), "old_file": src, "new_file": dst,
             "rate_limit_bytes_per_s": rate or None,
             "bytes_total": st["bytes_total"], "elapsed_s": st["elapsed_seconds"],
             "command_wall_s": wall, "mbps": mbps, "status_rate_mbps": st.get("rate", 0) / MB,
             "config_updated": st.get("config_updated"),
             "other_user_cores": w["other_user_cores"], "noisy": w["noisy"],
             "server_cpu_s": w.get("server_cpu_s")}
        log("  %s: %s -> %s: %s in %.1f s = %.1f MB/s%s%s" % (
            name, self.dev(src), self.dev(dst), fmt_size(st["bytes_total"]), st["elapsed_seconds"],
            mbps, (" (--rate %.1f MB/s)" % (rate / MB)) if rate else "",
            "  noisy (other %.2f CPUs)" % w["other_user_cores"] if w["noisy"] else ""))
        return r

    # ------------------------------------------------------------ d. impact
    def fio_row(self, case, rep, extra=None):
        a = self.a
        name, bs, qd = PROFILE
        job, w = self.fio(self.uri, "%s-%s" % (name, case), "randread", bs, qd, a.ramp, a.runtime,
                          server_pid=self.pid)
        d = job["read"]
        lat = d.get("lat_ns", {})
        pct = lat.get("percentile", {}) or d.get("clat_ns", {}).get("percentile", {})
        r = {"case": case, "repeat": rep, "profile": name, "rw": "read",
             "iops": d["iops"], "mbps": d["bw_bytes"] / MB,
             "lat_mean_us": lat.get("mean", 0.0) / 1000.0,
             "lat_p99_us": float(pct.get("99.000000", 0.0)) / 1000.0,
             "server_cpu_s": w.get("server_cpu_s"), "window_s": w.get("window_s"),
             "other_user_cores": w.get("other_user_cores"),
             "noisy": bool(w) and w["other_user_cores"] > a.noise_threshold}
        r.update(extra or {})
        return r

    def wait_replace_ended(self, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            st = self.replace_status()
            if st and st.get("state") not in ("copying", "switching"):
                return st
            if time.monotonic() > deadline:
                raise BenchError("the replace did not stop within %d s: %s" % (timeout, st))
            time.sleep(0.1)

    def with_replace(self, rep):
        """Start a replace (no --wait), run the fio job while it copies, then
        cancel it: the volume keeps member 0, the next run starts afresh."""
        a = self.a
        args = ["replace", "--force"] + (["--rate", str(a.impact_rate)] if a.impact_rate else []) + \
            [self.cfg, "0", self.dev(self.spare)]
        for attempt in range(20):
            r = run([a.nbdstripe] + args, check=False)
            if r.returncode == 0:
                break
            if "runs already" not in r.stderr and "running" not in r.stderr:
                raise BenchError("nbdstripe %s: %s" % (" ".join(args), r.stderr.strip()))
            time.sleep(0.2)
        else:
            raise BenchError("nbdstripe %s: %s" % (" ".join(args), r.stderr.strip()))
        t0, s0 = time.monotonic(), self.replace_status()
        try:
            row = self.fio_row("with_replace", rep)
        finally:
            t1, s1 = time.monotonic(), self.replace_status()
            if s1 and s1.get("state") == "copying":
                self.nbdstripe(["replace", "--cancel", self.cfg], "cancel")
            end = self.wait_replace_ended()
        outlasted = bool(s1) and s1.get("state") == "copying"
        if end.get("state") == "done":
            # the copy finished during the run: the volume now has the spare
            self.cur, self.spare = self.spare, self.cur
        copied = (s1 or {}).get("bytes_copied", 0) - (s0 or {}).get("bytes_copied", 0)
        row.update({"replace_outlasted_fio": outlasted,
                    "replace_rate_limit_bytes_per_s": a.impact_rate or None,
                    "replace_copy_mbps_during_fio": copied / max(t1 - t0, 1e-3) / MB,
                    "replace_fraction_copied_at_end": ((s1 or {}).get("bytes_copied", 0) /
                                                       max((s1 or {}).get("bytes_total", 1), 1)),
                    "replace_end_state": end.get("state")})
        return row

    # ------------------------------------------------------------ e, f. never starved
    def start_replace(self):
        args = ["replace", "--force", self.cfg, "0", self.dev(self.spare)]
        self.nbdstripe(args, "replace-start")
        t0 = time.monotonic()
        while True:
            st = self.replace_status()
            if st and st.get("new") == self.dev(self.spare) and st.get("state") == "copying":
                return st
            if time.monotonic() - t0 > 10:
                raise BenchError("the replace did not show up in the status: %s" % st)
            time.sleep(0.02)

    def end_replace(self):
        end = self.wait_replace_ended(timeout=3600)
        if end.get("state") != "done":
            raise BenchError("the replace ended %s: %s" % (end.get("state"), end.get("error")))
        self.cur, self.spare = self.spare, self.cur
        return end

    def hot_copy(self):
        """A full-speed replace while fio writes a 64 MiB hot spot at QD32."""
        cmd = ["fio", "--thread", "--name=hotspot", "--ioengine=nbd", "--uri=" + self.uri,
               "--rw=randwrite", "--bs=4k", "--iodepth=32", "--numjobs=1", "--size=64M",
               "--offset=0", "--time_based", "--runtime=3600s", "--output-format=json"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.children.add(p)
        try:
            time.sleep(1.0)           # the writer at full queue depth first
            if p.poll() is not None:
                raise BenchError("fio (hot spot) ended early: %s" % p.communicate()[1][-300:])
            self.start_replace()
            end = self.end_replace()
        finally:
            p.terminate()
            out, err = p.communicate()
            self.children.discard(p)
        try:
            job = json.loads(out[out.index("{"):])["jobs"][0]["write"]
            iops = job["iops"]
        except (ValueError, KeyError, IndexError):
            iops = None
        r = {"bytes_total": end["bytes_total"], "elapsed_s": end["elapsed_seconds"],
             "mbps": end["bytes_total"] / end["elapsed_seconds"] / MB,
             "writer_iops": iops, "writer": "fio randwrite 4K QD32 over the volume's first 64 MiB",
             "longest_client_wait_s": end.get("longest_client_wait_seconds"),
             "switch_hold_s": end.get("switch_hold_seconds")}
        log("  hot spot: %s copied in %.1f s = %.1f MB/s, writer %s IOPS, longest client wait %.3f s, "
            "clients held %.3f s at the switch"
            % (fmt_size(r["bytes_total"]), r["elapsed_s"], r["mbps"],
               "%.0f" % iops if iops else "?", r["longest_client_wait_s"] or 0,
               r["switch_hold_s"] or 0))
        return r

    def big_trim(self):
        """A 4 GiB trim (less 1 MiB) once the copy is 10 % in."""
        length = (4 << 30) - (1 << 20)
        size = 2 * self.a.member_size
        if size < length + (1 << 20):
            return {"skipped": "the volume (%s) is smaller than the trim" % fmt_size(size)}
        # The same trim with no replace running: what the devices take.
        cmd = ["fio", "--thread", "--name=bigtrim", "--ioengine=nbd", "--uri=" + self.uri,
               "--rw=trim", "--bs=%d" % length, "--size=%d" % length, "--offset=0",
               "--iodepth=1", "--number_ios=1", "--output-format=json"]
        t0 = time.monotonic()
        r = run(cmd, check=False)
        alone = time.monotonic() - t0
        if r.returncode != 0:
            raise BenchError("fio (trim) failed: %s" % r.stderr.strip()[-300:])
        log("  4 GiB trim, no replace running: %.3f s" % alone)
        st = self.start_replace()
        total = st["bytes_total"]
        while True:
            st = self.replace_status()
            if st.get("state") != "copying" or st.get("bytes_copied", 0) >= total // 10:
                break
            time.sleep(0.01)
        at = st.get("bytes_copied", 0)
        t0 = time.monotonic()
        r = run(cmd, check=False)
        secs = time.monotonic() - t0
        after = self.replace_status()
        if r.returncode != 0:
            raise BenchError("fio (trim) failed: %s" % r.stderr.strip()[-300:])
        try:
            lat = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["trim"]["lat_ns"]["max"] / 1e9
        except (ValueError, KeyError, IndexError):
            lat = None
        end = self.end_replace()
        span = length // 2           # the trim's part on member 0
        res = {"trim_bytes": length, "member0_span_bytes": span,
               "copied_at_issue": at, "copied_at_completion": after.get("bytes_copied", 0),
               "trim_latency_s": lat, "command_s": secs, "alone_s": alone,
               "copy_seconds_to_pass_the_span_at_idle_rate": None,
               "longest_client_wait_s": end.get("longest_client_wait_seconds"),
               "copy_elapsed_s": end["elapsed_seconds"]}
        log("  4 GiB trim sent at %s copied: %.3f s (fio latency %s), copy at %s then; longest "
            "client wait %.3f s" % (fmt_size(at), secs, "%.3f s" % lat if lat is not None else "?",
                                    fmt_size(res["copied_at_completion"]),
                                    res["longest_client_wait_s"] or 0))
        return res

    def quietest(self, fn, rep):
        """fn(rep), one fio row, re-run while noisy (up to --noisy-retries),
        the quietest kept."""
        r, tries = fn(rep), 0
        while r["noisy"] and tries < self.a.noisy_retries:
            tries += 1
            r2 = fn(rep)
            if r2["other_user_cores"] < r["other_user_cores"]:
                r = r2
        r["retries"] = tries
        return r

    def print_row(self, r, case, rep, during=""):
        print("  %d/%d %-13s %-12s IOPS %7.0f  mean %8.1f us  p99 %9.1f us  other %.2f%s%s" % (
            rep + 1, self.a.repeat, r["profile"], case, r["iops"], r["lat_mean_us"], r["lat_p99_us"],
            r["other_user_cores"] or 0.0, "!" if r["noisy"] else " ", during))
        sys.stdout.flush()

    def measure(self, case, rep):
        """One row, re-run while noisy, the quietest kept."""
        fn = self.with_replace if case == "with_replace" else (lambda rep: self.fio_row(case, rep))
        r = self.quietest(fn, rep)
        self.print_row(r, case, rep, (
            "  copy %.1f MB/s during the run%s" % (
                r["replace_copy_mbps_during_fio"],
                "" if r["replace_outlasted_fio"] else ", ENDED BEFORE fio did"))
            if case == "with_replace" else "")
        return r

    # ------------------------------------------------------------ main
    def main(self):
        a = self.a
        t_start = time.time()
        load_before = open("/proc/loadavg").read().split()[:3]
        notes = []
        src = run(["git", "-C", REPO, "describe", "--always", "--dirty", "--abbrev=12"], check=False)
        if src.returncode == 0 and src.stdout.strip():
            notes.append("source tree: git commit %s" % src.stdout.strip())
        log("== setting up 3 emulated members (2 volume members + the new one), %s each"
            % fmt_size(a.member_size))
        self.setup_emulated(3)
        if not self.throttle:
            raise BenchError("no cgroup block throttling: %s" % self.scaling_refused)
        log("== calibration (member file 0, as stripe-bench)")
        cal = self.calibrate()

        print("\n== a. the devices' own sequential rates (raw fio, O_DIRECT, 1M Q8, in the throttle)")
        sys.stdout.flush()
        rates = {}
        for i, rw in ((OLD, "read"), (NEW, "write"), (NEW, "read"), (OLD, "write")):
            rates[(i, rw)] = self.device_rate(i, rw)
        serial = self.serial_copy(OLD, NEW)

        self.serve()
        log("== volume served: %s (config %s, control socket %s)" % (self.uri, self.cfg, self.ctl_path))

        print("\n== b. nbdstripe replace --wait, no client connected: member 0 (file %d) -> file %d"
              % (OLD, NEW))
        sys.stdout.flush()
        idle = self.copy(0, "replace-idle")
        ref = min(rates[(idle["old_file"], "read")]["mbps"], rates[(idle["new_file"], "write")]["mbps"])
        idle["reference_mbps"] = ref
        idle["ratio"] = idle["mbps"] / ref
        idle["threshold"] = COPY_TARGET
        idle["met"] = idle["ratio"] >= COPY_TARGET
        print("  copy %.1f MB/s = %.3f of the slower device (%.1f MB/s): %s"
              % (idle["mbps"], idle["ratio"], ref, "met" if idle["met"] else "BELOW %.2f" % COPY_TARGET))

        rate = int(round(a.rate_fraction * a.mbps * MB))
        print("\n== c. nbdstripe replace --wait --rate %d (%.1f MB/s, %g x --mbps): member 0 back to file %d"
              % (rate, rate / MB, a.rate_fraction, self.spare))
        sys.stdout.flush()
        limited = self.copy(rate, "replace-rate")
        limited["limit_mbps"] = rate / MB
        limited["ratio"] = limited["mbps"] / (rate / MB)
        limited["threshold"] = RATE_SLACK
        limited["met"] = limited["ratio"] <= RATE_SLACK
        ref2 = min(rates[(limited["old_file"], "read")]["mbps"],
                   rates[(limited["new_file"], "write")]["mbps"])
        limited["reference_mbps"] = ref2
        limited["discriminating"] = idle["mbps"] > rate / MB * RATE_SLACK
        print("  %.1f MB/s = %.3f x the limit: %s%s" % (
            limited["mbps"], limited["ratio"], "met" if limited["met"] else "OVER the limit",
            "" if limited["discriminating"] else
            " (not a test of --rate: the unlimited copy (%.1f MB/s) is no faster)" % idle["mbps"]))

        print("\n== d. %s random read on the volume, without and with a replace running%s, %d x %g s (+%g s ramp)"
              % (PROFILE[0], (" (--rate %d)" % a.impact_rate) if a.impact_rate else " (no --rate: full speed)",
                 a.repeat, a.runtime, a.ramp))
        sys.stdout.flush()
        runs = []
        for rep in range(a.repeat):
            runs.append(self.measure("without_replace", rep))
            runs.append(self.measure("with_replace", rep))
        cases = {case: case_summary(runs, case) for case in ("without_replace", "with_replace")}
        wr = [r for r in runs if r["case"] == "with_replace"]
        cases["with_replace"]["copy_mbps_during_fio"] = spread([r["replace_copy_mbps_during_fio"] for r in wr])
        cases["with_replace"]["replace_outlasted_every_run"] = all(r["replace_outlasted_fio"] for r in wr)
        wo, wi = cases["without_replace"], cases["with_replace"]
        impact = {"profile": PROFILE[0], "bs": PROFILE[1], "iodepth": PROFILE[2], "rw": "randread",
                  "replace_rate_limit_bytes_per_s": a.impact_rate or None,
                  "how_the_copy_outlasts_fio": (
                      "member size %s: a full copy takes longer than ramp + runtime (%g s) even at the "
                      "device rate (%.1f s at %d MB/s); the replace is cancelled when fio ends"
                      % (fmt_size(a.member_size), a.ramp + a.runtime, a.member_size / (a.mbps * MB), a.mbps)),
                  "cases": cases,
                  "iops_ratio": (wi["iops"]["median"] / wo["iops"]["median"]) if wo["iops"]["median"] else None,
                  "p99_ratio": (wi["lat_p99_us"]["median"] / wo["lat_p99_us"]["median"])
                  if wo["lat_p99_us"]["median"] else None,
                  "runs": runs}
        sref = serial["mbps"] / ref
        idle["serial_copy_ratio"] = sref
        if sref >= COPY_TARGET:
            notes.append(
                "a plain serial copy (dd bs=4M, reads then writes, never both at once) ran at %.2f x the "
                "slower device on these members: block throttling is a token bucket, so a device banks "
                "credit while the copy works on the other one and a copy that does not overlap reads "
                "and writes loses nothing here. On a drive with a fixed transfer rate such a copy gets "
                "about 1/(1/read + 1/write) (0.5 x for equal rates): the copy ratio above does not tell "
                "whether the copier overlaps its reads and writes." % sref)
        if not wi["replace_outlasted_every_run"]:
            notes.append("a with-replace run outlasted its copy: raise --member-size or set --impact-rate")

        hot = None
        if not a.no_hot_spot:
            print("\n== e. a full-speed replace while a hot spot is written at QD32 (next to b's idle copy)")
            sys.stdout.flush()
            hot = self.hot_copy()
            hot["idle_elapsed_s"] = idle["elapsed_s"]
            hot["ratio_to_idle"] = hot["elapsed_s"] / idle["elapsed_s"]
            print("  copy %.1f s under the hot spot, %.1f s idle: x%.2f"
                  % (hot["elapsed_s"], idle["elapsed_s"], hot["ratio_to_idle"]))
        print("\n== f. a 4 GiB trim of the volume sent once the copy is 10 % in")
        sys.stdout.flush()
        trim = self.big_trim()
        if "skipped" not in trim:
            trim["copy_seconds_to_pass_the_span_at_idle_rate"] = (
                (trim["member0_span_bytes"] - trim["copied_at_issue"]) / (idle["mbps"] * MB))

        self.save_log("config-final", open(self.cfg).read())
        doc = {
            "tool": "nbdstripe replace-impact",
            **run_header(t_start, load_before),
            "parameters": {"quick": a.quick, "mbps": a.mbps, "iops": a.iops, "member_size": a.member_size,
                           "chunk": a.chunk, "ramp_s": a.ramp, "runtime_s": a.runtime, "repeat": a.repeat,
                           "device_runtime_s": a.device_runtime, "rate_fraction": a.rate_fraction,
                           "impact_rate": a.impact_rate or None, "no_hot_spot": a.no_hot_spot,
                           "noise_threshold_cores": a.noise_threshold,
                           "plugin": a.plugin, "nbdstripe": a.nbdstripe},
            "members": {"method": "loop device (--direct-io=on) over its own file, behind a second "
                                  "direct-I/O loop device; cgroup %s block throttling" % self.throttle.kind,
                        "devices": [m["dev"] for m in self.members],
                        "roles": {"volume": [self.dev(OLD), self.dev(KEEP)], "new": self.dev(NEW)},
                        "volume": {"metadata": "none", "cache": "direct", "chunk": a.chunk,
                                   "server": "nbdkit %s config=FILE" % os.path.basename(a.plugin)},
                        "calibration": cal},
            "device_rates": list(rates.values()),
            "serial_copy_reference": serial,
            "copy_idle": idle,
            "copy_rate_limited": limited,
            "impact": impact,
            "copy_under_hot_spot": hot,
            "trim_during_copy": trim,
            "targets": [
                {"target": "copy with idle clients >= 0.80 x the slower device", "measured": idle["ratio"],
                 "threshold": COPY_TARGET, "met": idle["met"]},
                {"target": "--rate respected (copy <= 1.05 x rate)", "measured": limited["ratio"],
                 "threshold": RATE_SLACK, "met": limited["met"]}],
            "notes": notes,
        }
        return write_outputs(a.out, doc, summary(doc), t_start)


def summary(doc):
    p, im = doc["parameters"], doc["impact"]
    idle, lim = doc["copy_idle"], doc["copy_rate_limited"]
    f1 = lambda v: "-" if v is None else "%.1f" % v
    L = ["Command: `%s`  " % doc["command"],
         "Date: %s; %s, %d CPUs; load before %s, after %s; %.0f s  " % (
             doc["date"], doc["machine"]["kernel"], doc["machine"]["cpus"],
             doc["machine"]["loadavg_before"], doc["machine"]["loadavg_after"], doc["duration_s"]),
         "Members: 3 emulated (%s), %d MB/s and %d IOPS each way, %s each; volume: 2 members, "
         "chunk %s, metadata none, cache direct  " % (
             doc["members"]["method"], p["mbps"], p["iops"], fmt_size(p["member_size"]),
             fmt_size(p["chunk"])),
         ""]
    L.append("Device rates (raw fio, O_DIRECT, 1M Q8, %g s):\n" % p["device_runtime_s"])
    L.append("| device | role | read MB/s | write MB/s |")
    L.append("|---|---|---|---|")
    devs = {}
    for r in doc["device_rates"]:
        devs.setdefault(r["device"], {})[r["rw"]] = r["mbps"]
    for dev, v in devs.items():
        role = "replaced member" if dev == idle["old"] else "new member"
        L.append("| %s | %s | %s | %s |" % (dev, role, f1(v.get("read")), f1(v.get("write"))))
    L.append("")
    L.append("| copy | bytes | seconds | MB/s | vs | ratio | target | met |")
    L.append("|---|---|---|---|---|---|---|---|")
    L.append("| `replace --wait`, idle clients | %s | %.1f | %.1f | slower device %.1f MB/s | %.3f | >= %.2f | %s |" % (
        fmt_size(idle["bytes_total"]), idle["elapsed_s"], idle["mbps"], idle["reference_mbps"],
        idle["ratio"], idle["threshold"], "yes" if idle["met"] else "**NO**"))
    sc = doc["serial_copy_reference"]
    L.append("| `dd bs=4M iflag=direct oflag=direct` (reference: reads, then writes, never both) | %s | %.1f | %.1f "
             "| slower device %.1f MB/s | %.3f | - | - |" % (
                 fmt_size(sc["bytes"]), sc["seconds"], sc["mbps"], idle["reference_mbps"],
                 sc["mbps"] / idle["reference_mbps"]))
    L.append("| `replace --wait --rate %d` | %s | %.1f | %.1f | the rate %.1f MB/s | %.3f | <= %.2f | %s |" % (
        lim["rate_limit_bytes_per_s"], fmt_size(lim["bytes_total"]), lim["elapsed_s"], lim["mbps"],
        lim["limit_mbps"], lim["ratio"], lim["threshold"], "yes" if lim["met"] else "**NO**"))
    L.append("")
    L.append("%s random read on the volume (fio nbd engine, %g s + %g s ramp, %d repetitions; "
             "medians, min-max)%s:\n" % (
                 im["profile"], p["runtime_s"], p["ramp_s"], p["repeat"],
                 "; the replace at --rate %d" % p["impact_rate"] if p["impact_rate"] else
                 "; the replace at full speed (no --rate)"))
    L.append("| case | IOPS | IOPS min-max | mean us | p99 us | p99 min-max | copy MB/s meanwhile | noisy runs |")
    L.append("|---|---|---|---|---|---|---|---|")
    for case, label in (("without_replace", "no replace"), ("with_replace", "replace running")):
        c = im["cases"][case]
        cp = c.get("copy_mbps_during_fio")
        L.append("| %s | %.0f | %.0f-%.0f | %.0f | %.0f | %.0f-%.0f | %s | %d |" % (
            label, c["iops"]["median"], c["iops"]["min"], c["iops"]["max"], c["lat_mean_us"]["median"],
            c["lat_p99_us"]["median"], c["lat_p99_us"]["min"], c["lat_p99_us"]["max"],
            f1(cp["median"]) if cp else "-", c["noisy_runs"]))
    L.append("")
    L.append("With a replace running: IOPS x%.2f, p99 x%.2f.%s" % (
        im["iops_ratio"] or 0, im["p99_ratio"] or 0,
        "" if im["cases"]["with_replace"]["replace_outlasted_every_run"]
        else " **A copy ended before its fio run did.**"))
    hot, tr = doc.get("copy_under_hot_spot"), doc.get("trim_during_copy")
    if hot:
        L.append("")
        L.append("| replace of member 0, full speed | copy s | MB/s | x idle | longest client wait s "
                 "| clients held at the switch s |")
        L.append("|---|---|---|---|---|---|")
        L.append("| idle clients (b) | %.1f | %.1f | 1.00 | - | - |" % (idle["elapsed_s"], idle["mbps"]))
        L.append("| %s (%s IOPS) | %.1f | %.1f | %.2f | %.3f | %.3f |" % (
            hot["writer"], "%.0f" % hot["writer_iops"] if hot["writer_iops"] else "?",
            hot["elapsed_s"], hot["mbps"], hot["ratio_to_idle"], hot["longest_client_wait_s"] or 0,
            hot["switch_hold_s"] or 0))
    if tr and "skipped" not in tr:
        L.append("")
        L.append("A trim of %s (member 0's share %s): %.3f s with no replace running; sent with %s "
                 "of member 0 copied, %.3f s (fio's latency %s), of which %.3f s waiting for the "
                 "copier's windows (the status's longest client wait); the copy was at %s when it "
                 "returned (it waits for the trim on the windows it spans); the copy would have "
                 "needed %.1f s at the idle rate to pass the trim's span." % (
                     fmt_size(tr["trim_bytes"]), fmt_size(tr["member0_span_bytes"]), tr["alone_s"],
                     fmt_size(tr["copied_at_issue"]), tr["command_s"],
                     "%.3f s" % tr["trim_latency_s"] if tr["trim_latency_s"] is not None else "?",
                     tr["longest_client_wait_s"] or 0, fmt_size(tr["copied_at_completion"]),
                     tr["copy_seconds_to_pass_the_span_at_idle_rate"]))
    for n in doc["notes"]:
        L.append("\nNote: " + n)
    return "\n".join(L) + "\n"


def run_header(t_start, load_before):
    """The fields of a results document that say which run it was, where."""
    return {
        "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "duration_s": round(time.time() - t_start, 1),
        "machine": {"hostname": platform.node(), "kernel": platform.release(),
                    "cpus": os.cpu_count(),
                    "loadavg_before": " ".join(load_before),
                    "loadavg_after": " ".join(open("/proc/loadavg").read().split()[:3]),
                    "fio": run(["fio", "--version"], check=False).stdout.strip(),
                    "nbdkit": run(["nbdkit", "--version"], check=False).stdout.strip()},
    }


def write_outputs(out, doc, text, t_start):
    """results.json and summary.md (TEXT) in OUT; the summary printed."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print("\n== done in %.0f s: %s" % (time.time() - t_start, out))
    print(text)
    return 0


def run_main(name, cls, a):
    """replace-impact's and reshape-impact's main: the tools, root, the
    run, and its cleanup whatever happens (signals included)."""
    import signal
    for tool in ("fio", "nbdkit", "losetup"):
        if not shutil.which(tool):
            log("%s: %s not found" % (name, tool))
            return 1
    if os.geteuid() != 0:
        log("%s: emulated members need root (loop devices, cgroup throttling)" % name)
        return 1
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    b = cls(a)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return b.main()
    except KeyboardInterrupt:
        log("\n%s: interrupted, cleaning up" % name)
        return 130
    except BenchError as e:
        log("%s: %s" % (name, e))
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        b.cleanup()


def main(argv):
    return run_main("replace-impact", ReplaceBench, parse_args(argv))
