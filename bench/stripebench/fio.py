# SPDX-License-Identifier: BSD-3-Clause
"""Running fio and collecting: one fio job through the nbd engine with the
CPU of the server, fio, the member servers and every other process measured
over the same window, and the load of others sampled just before it; when a
run is noisy; one measured row; the progress lines."""

import json
import os
import subprocess
import sys
import threading
import time

from .profiles import FSYNC_JOBS, FSYNC_PROFILE
from .scrub import ScrubDuring, health_params
from .util import GIB, MB, BenchError, fmt_size, idle_load, proc_cpu, procs_cpu, sys_cpu


# the two reasons a run is noisy, as noisy_why words them (results.py
# counts them by these phrases)
NOISY_DURING = "during the run"
NOISY_BEFORE = "just before it"


def noise_reasons(r, threshold):
    """Why run R is noisy (empty: it is not): other processes above
    THRESHOLD CPUs of user time during its window, or in the idle sample
    just before it (a run that starts on a busy machine is suspect even
    when the load pauses for its short window)."""
    why = []
    if r["other_user_cores"] is not None and r["other_user_cores"] > threshold:
        why.append("other processes used %.2f CPUs %s" % (r["other_user_cores"], NOISY_DURING))
    lb = r.get("load_before")
    if lb and lb["other_user_cores"] > threshold:
        why.append("other processes used %.2f CPUs %s" % (lb["other_user_cores"], NOISY_BEFORE))
    return why


def noise_score(r):
    """The higher of the two loads: what a retry must beat to be kept."""
    lb = r.get("load_before")
    return max(r["other_user_cores"] or 0.0, lb["other_user_cores"] if lb else 0.0)


class FioMixin:
    """fio runs and measured rows; mixed into runner.Bench."""

    def fio(self, uri, name, rw, bs, qd, ramp, runtime, extra=(), server_pid=None,
            member_pids=(), jobs=1):
        """Run one fio job (jobs > 1: that many, a connection each, reported
        as one); returns (fio json job, window measurements).
        member_pids: the remote members' servers, whose CPU is part of the
        setup (not "other" load); it is reported as members_cpu_s."""
        cmd = ["fio", "--thread", "--name=" + name, "--ioengine=nbd", "--uri=" + uri,
               "--rw=" + rw, "--bs=%d" % bs, "--iodepth=%d" % qd, "--numjobs=%d" % jobs,
               "--lat_percentiles=1", "--output-format=json"]
        if jobs > 1:
            cmd.append("--group_reporting")
        if runtime:
            # in ms: fio truncates "1.5s" to 1 s and "0.5s" to no ramp at all
            cmd += ["--time_based", "--runtime=%dms" % round(runtime * 1000)]
            if ramp:
                cmd += ["--ramp_time=%dms" % round(ramp * 1000)]
        cmd += list(extra)
        snap = {}

        def snapshot(tag, fio_pid, fio_cpu=None):
            snap[tag] = (time.monotonic(), proc_cpu(server_pid) if server_pid else None,
                         fio_cpu or proc_cpu(fio_pid), sys_cpu(), proc_cpu(os.getpid()),
                         procs_cpu(member_pids) if member_pids else None)

        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.children.add(p)
        try:
            if ramp and runtime:
                timer = threading.Timer(ramp, snapshot, ("start", p.pid))
                timer.start()
            else:
                timer = None
                snapshot("start", p.pid)
            # fio exits at the end of the window: take the end snapshot as
            # late as possible while its /proc entry still exists.
            while p.poll() is None:
                s = proc_cpu(p.pid)
                if s is not None:
                    snapshot("end", p.pid, s)
                time.sleep(0.05)
            out, err = p.communicate()
            if timer:
                timer.join()
        finally:
            self.children.discard(p)
        if p.returncode != 0:
            raise BenchError("fio %s failed: %s" % (name, err.strip()[-500:]))
        job = json.loads(out[out.index("{"):])["jobs"][0]
        w = {}
        if "start" in snap and "end" in snap and snap["start"][2] and snap["end"][2]:
            t0, s0, f0, c0, h0, m0 = snap["start"]
            t1, s1, f1, c1, h1, m1 = snap["end"]
            # the harness itself (its sampling) is not "other" either
            own_u, own_t = h1[0] - h0[0], sum(h1) - sum(h0)
            win = max(t1 - t0, 1e-3)
            srv_u = (s1[0] - s0[0]) if s0 and s1 else 0.0
            srv = (sum(s1) - sum(s0)) if s0 and s1 else 0.0
            mem_u = (m1[0] - m0[0]) if m0 and m1 else 0.0
            mem = (sum(m1) - sum(m0)) if m0 and m1 else 0.0
            fio_u, fio_t = f1[0] - f0[0] + own_u, sum(f1) - sum(f0) + own_t
            w = {"window_s": win, "server_cpu_s": srv,
                 "fio_cpu_s": sum(f1) - sum(f0),
                 "members_cpu_s": (mem if (m0 and m1) else None) if member_pids else None,
                 "other_user_cores": max(0.0, (c1[0] - c0[0]) - srv_u - fio_u - mem_u) / win,
                 "other_cpu_cores": max(0.0, (c1[1] - c0[1]) - srv - fio_t - mem) / win}
        return job, w

    # ------------------------------------------------------------ measurement
    def measure(self, phase, config, n, chunk, prof, rw, rep):
        a = self.a
        name, bs, qd, seq = prof
        key = self.ensure_server(config, n, chunk)   # servers start when first needed
        p, uri, _ = self.servers[key]
        fsync = name == FSYNC_PROFILE[0]
        if config == "file" and not self.ref_file:
            self.flushbufs(self.members[:1])
        fio_rw = ("" if seq else "rand") + rw
        if config == "plugin" and a.trim_first and rw == "write":
            self.trim_volume(uri)
        # the load of others now, with our servers up and idle, before the
        # scrub and fio start
        load = idle_load(a.load_sample, [p.pid] + list(self.member_pids())) if a.load_sample else None
        scrub = self.scrub_start(key) if config == "plugin" else None
        try:
            job, w = self.fio(uri, "%s-%s" % (name, rw), fio_rw,
                              bs, qd, a.ramp, a.runtime, server_pid=p.pid,
                              member_pids=self.member_pids(),
                              extra=["--fsync=1"] if fsync else (),
                              jobs=FSYNC_JOBS if fsync else 1)
        finally:
            scrub = self.scrub_stop(key, scrub)
        if config == "file" and rw == "write" and not self.ref_file:
            self.flushbufs(self.members[:1])    # its writeback must not spill into the next run
        d = job[rw]
        lat = d.get("lat_ns", {})
        pct = lat.get("percentile", {}) or d.get("clat_ns", {}).get("percentile", {})
        io_bytes = d["io_bytes"]
        r = {"phase": phase, "config": config, "n": n, "chunk": chunk if config == "plugin" else None,
             "profile": name, "rw": rw, "repeat": rep,
             "mbps": d["bw_bytes"] / MB, "iops": d["iops"],
             "lat_mean_us": lat.get("mean", 0.0) / 1000.0,
             "lat_p99_us": float(pct.get("99.000000", 0.0)) / 1000.0,
             "io_bytes": io_bytes}
        r["server_cpu_s"] = w.get("server_cpu_s")
        r["cpu_s_per_gib"] = (w["server_cpu_s"] / (io_bytes / GIB)) if w and io_bytes else None
        r["fio_cpu_s"] = w.get("fio_cpu_s")
        r["members_cpu_s"] = w.get("members_cpu_s")
        r["window_s"] = w.get("window_s")
        r["other_user_cores"] = w.get("other_user_cores")
        r["other_cpu_cores"] = w.get("other_cpu_cores")
        r["load_before"] = load
        r["noisy_why"] = noise_reasons(r, a.noise_threshold)
        r["noisy"] = bool(r["noisy_why"])
        if a.scrub_during:
            r["scrub"] = scrub
        return r

    # ------------------------------------------------------------ --scrub-during
    def scrub_start(self, key):
        """--scrub-during: a scrub kept running on volume KEY (a plugin
        server) from before fio starts; None without the option."""
        if not self.a.scrub_during:
            return None
        sd = ScrubDuring(self.ctl_path(key))
        sd.start()
        return sd

    def scrub_stop(self, key, sd):
        """The scrub cancelled; what it did (None without one).  The
        volume's drive poller period is noted from its status the first
        time."""
        if sd is None:
            return None
        info = sd.stop()
        if self.drive_interval is None:
            self.drive_interval = health_params(self.ctl_path(key)).get("drive_interval")
        return info

    def measure_retry(self, *args):
        r = self.measure(*args)
        tries = 0
        while r["noisy"] and tries < self.a.noisy_retries:
            tries += 1
            r2 = self.measure(*args)
            if noise_score(r2) < noise_score(r):
                r = r2
        r["retries"] = tries
        self.runs.append(r)
        self.counter += 1
        self.print_row(r)
        return r

    # ------------------------------------------------------------ terminal
    HDR = "%-9s %-6s %2s %5s %-13s %-5s %9s %8s %9s %9s %8s %6s %6s" % (
        "progress", "config", "N", "chunk", "profile", "rw", "MB/s", "IOPS",
        "mean(us)", "p99(us)", "cpu/GiB", "before", "other")

    def print_header(self, title):
        print("\n== %s" % title)
        print(self.HDR)
        sys.stdout.flush()

    def print_row(self, r):
        el = time.time() - self.t_start
        eta = el / self.counter * (self.total - self.counter) if self.counter else 0
        lb = r.get("load_before")
        print("%4d/%-4d %-6s %2d %5s %-13s %-5s %9.1f %8.0f %9.1f %9.1f %8s %6s %5.2f%s  eta %dm%02ds" % (
            self.counter, self.total, r["config"], r["n"],
            fmt_size(r["chunk"]) if r["chunk"] else "-", r["profile"], r["rw"],
            r["mbps"], r["iops"], r["lat_mean_us"], r["lat_p99_us"],
            "%.2f" % r["cpu_s_per_gib"] if r["cpu_s_per_gib"] is not None else "-",
            "%.2f" % lb["other_user_cores"] if lb else "-", r["other_user_cores"] or 0.0, "!" if r["noisy"] else " ",
            eta // 60, eta % 60))
        sys.stdout.flush()

