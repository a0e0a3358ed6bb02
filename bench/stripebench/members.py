# SPDX-License-Identifier: BSD-3-Clause
"""Members: emulated local SSDs (direct-I/O loop devices throttled by cgroup
block throttling), real drives (--members), emulated remote NBD servers
(--remote: nbdkit memory servers behind the rate and delay filters), and the
calibration that checks the emulation gives what was asked."""

import json
import os
import subprocess
import time

from .util import MB, BenchError, dev_majmin, dev_stat_path, fmt_size, log, run




class Throttle:
    """cgroup v1 blkio or v2 io block throttling for our member devices.

    The servers are started inside our own cgroup.  On v1 the same per-device
    limits are mirrored onto the root blkio cgroup: buffered writeback (the
    file plugin's writes) is charged to the root group on cgroup v1, and the
    root rules only touch devices this harness created."""

    def __init__(self, name):
        self.kind = None
        self.path = None
        self.rules = {}          # majmin -> (rbps, wbps, riops, wiops)
        v1 = "/sys/fs/cgroup/blkio"
        if os.path.exists(os.path.join(v1, "blkio.throttle.read_bps_device")):
            self.kind, self.root = "v1", v1
        elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "io" in f.read().split():
                    self.kind, self.root = "v2", "/sys/fs/cgroup"
        if self.kind is None:
            raise BenchError("no cgroup blkio (v1) or io (v2) controller")
        self.path = os.path.join(self.root, name)
        os.mkdir(self.path)
        if self.kind == "v2":
            try:
                with open(os.path.join(self.root, "cgroup.subtree_control"), "w") as f:
                    f.write("+io")
            except OSError:
                pass
            if not os.path.exists(os.path.join(self.path, "io.max")):
                os.rmdir(self.path)
                raise BenchError("cgroup v2 io controller cannot be enabled")

    def _w(self, path, text):
        with open(path, "w") as f:
            f.write(text)

    def set(self, majmin, rbps, wbps, riops, wiops):
        self.rules[majmin] = (rbps, wbps, riops, wiops)
        if self.kind == "v1":
            for d in (self.path, self.root):
                for key, val in (("read_bps", rbps), ("write_bps", wbps),
                                 ("read_iops", riops), ("write_iops", wiops)):
                    self._w(os.path.join(d, "blkio.throttle.%s_device" % key),
                            "%s %d" % (majmin, val))
        else:
            self._w(os.path.join(self.path, "io.max"),
                    "%s rbps=%d wbps=%d riops=%d wiops=%d" % (majmin, rbps, wbps, riops, wiops))

    def set_write_bps(self, majmin, wbps):
        r = self.rules[majmin]
        self.set(majmin, r[0], wbps, r[2], r[3])

    def enter(self):
        """preexec_fn: put the calling (child) process in the cgroup."""
        self._w(os.path.join(self.path, "cgroup.procs"), str(os.getpid()))

    def suspend(self):
        """Lift every limit (rules are kept for resume())."""
        saved = dict(self.rules)
        for majmin in saved:
            self.set(majmin, 0, 0, 0, 0) if self.kind == "v1" else \
                self._w(os.path.join(self.path, "io.max"),
                        "%s rbps=max wbps=max riops=max wiops=max" % majmin)
        self.rules = saved

    def resume(self):
        for majmin, r in list(self.rules.items()):
            self.set(majmin, *r)

    def cleanup(self):
        if self.kind == "v1":
            for majmin in list(self.rules):
                for key in ("read_bps", "write_bps", "read_iops", "write_iops"):
                    for d in (self.root, self.path):
                        try:
                            self._w(os.path.join(d, "blkio.throttle.%s_device" % key),
                                    "%s 0" % majmin)
                        except OSError:
                            pass
        self.rules.clear()
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        log("warning: could not remove cgroup %s" % self.path)


class MembersMixin:
    """Member setup and calibration; mixed into runner.Bench."""

    def losetup(self, backing):
        last = None
        for _ in range(8):
            r = run(["losetup", "--find", "--show", "--direct-io=on", backing], check=False)
            if r.returncode == 0 and r.stdout.strip():
                dev = r.stdout.strip()
                self.loops.append(dev)
                ro = run(["losetup", "--list", "--noheadings", "-O", "DIO", dev], check=False)
                if ro.stdout.strip() != "1":
                    raise BenchError("%s: direct I/O could not be enabled" % dev)
                return dev
            last = r.stderr.strip()
            time.sleep(0.3)          # another user raced us for the same free device
        raise BenchError("losetup %s: %s" % (backing, last))

    def setup_emulated(self, count):
        a = self.a
        os.makedirs(a.workdir, exist_ok=True)
        try:
            self.throttle = Throttle("nbdstripe-bench-%d" % os.getpid())
        except (BenchError, OSError) as e:
            self.throttle = None
            self.scaling_refused = "cannot throttle: %s" % e
            log("WARNING: %s; members run unthrottled and scaling is NOT reported"
                % self.scaling_refused)
        for i in range(count):
            path = os.path.join(a.workdir, "member%d.img" % i)
            self.files.append(path)
            log("  creating %s (%s, written once so reads and writes hit real blocks)"
                % (path, fmt_size(a.member_size)))
            run(["dd", "if=/dev/zero", "of=" + path, "bs=4M",
                 "count=%d" % (a.member_size // (4 << 20)), "oflag=direct", "status=none"])
            inner = self.losetup(path)
            outer = self.losetup(inner) if a.loop_stack == 2 else inner
            m = {"index": i, "dev": outer, "tdev": inner, "file": path,
                 "majmin": dev_majmin(inner)}
            if self.throttle:
                self.throttle.set(m["majmin"], a.mbps * MB, a.mbps * MB, a.iops, a.iops)
            self.members.append(m)
            log("  member %d: %s%s, throttled at %s: %d MB/s, %d IOPS each way"
                % (i, outer, (" -> %s" % inner) if outer != inner else "", inner, a.mbps, a.iops)
                if self.throttle else "  member %d: %s (unthrottled)" % (i, outer))

    def setup_files(self, counts):
        """--fsync: members are plain files on the machine's disk (in
        --workdir), written once so that writes land on allocated blocks
        (no extent allocation, no size change for fdatasync to journal).
        --ram: the same in a RAM file system (every page allocated before
        the first run).
        The volume has the same size at every N: N files of a 1/N each,
        a set per N; the reference (nbdkit's file plugin) gets one file of
        the whole size."""
        a = self.a
        os.makedirs(a.workdir, exist_ok=True)

        def make(path, size):
            self.files.append(path)
            run(["dd", "if=/dev/zero", "of=" + path, "bs=64K", "count=%d" % (size // (64 << 10)),
                 "status=none"])
            if size % (64 << 10):
                with open(path, "ab") as f:
                    f.write(bytes(size % (64 << 10)))
            os.sync()

        log("  creating the reference file and %s member files of %s in %s (written once)"
            % ("+".join(str(n) for n in counts), "+".join(fmt_size(a.volume_size // n) for n in counts),
               a.workdir))
        self.ref_file = os.path.join(a.workdir, "reference.img")
        make(self.ref_file, a.volume_size)
        self.member_sets = {}
        for n in counts:
            ms = []
            for i in range(n):
                path = os.path.join(a.workdir, "n%d-member%d.img" % (n, i))
                make(path, a.volume_size // n)
                ms.append({"index": i, "dev": path, "tdev": None, "file": path, "majmin": None})
            self.member_sets[n] = ms
        self.members = self.member_sets[max(counts)]

    def setup_real(self):
        for i, dev in enumerate(self.a.members):
            if not os.path.exists(dev):
                raise BenchError("member %s does not exist" % dev)
            self.members.append({"index": i, "dev": dev, "tdev": dev, "file": None,
                                 "majmin": dev_majmin(dev) if os.path.exists(dev_stat_path(dev)) else None})

    # ------------------------------------------------------------ remote members
    def mem_allocator(self):
        """malloc,mlock=true: the whole member is allocated and locked at start,
        so every block is real RAM (no zero-page reads, no page faults on the
        first write, never swapped).  mlock needs root or a big enough
        RLIMIT_MEMLOCK; otherwise plain malloc (noted in results.json)."""
        import resource
        soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        if os.geteuid() == 0 or soft == resource.RLIM_INFINITY or \
                soft >= self.a.member_size * max(self.a.counts):
            return "malloc,mlock=true"
        return "malloc"

    def member_argv(self, limited):
        """A remote member: nbdkit's memory plugin (no disk in the picture),
        behind the rate filter (bandwidth of the whole server, separate
        read and write buckets, in bits/s) and the delay filter (a fixed
        time per request, 1 ms resolution)."""
        a = self.a
        argv = []
        if limited:
            argv.append("--filter=rate")
            if a.delay_ms:
                argv.append("--filter=delay")
        argv += ["memory", "size=%d" % a.member_size, "allocator=" + self.allocator]
        if limited:
            # rate= is bits per second for the whole server (all connections);
            # a plain integer avoids the 1024-based K/M/G suffixes.
            argv += ["rate=%d" % (a.mbps * MB * 8), "burstiness=%g" % a.burstiness]
            if a.delay_ms:
                argv += ["rdelay=%dms" % a.delay_ms, "wdelay=%dms" % a.delay_ms]
        return argv

    def setup_remote(self, count, limited=True):
        """Start (or restart) the member servers; the volume servers that
        used the old ones are stopped first."""
        a = self.a
        self.allocator = self.allocator or self.mem_allocator()
        # Volumes first: on SIGTERM nbdkit waits for its clients to go, so a
        # member server outlives (up to stop_server's 10 s) a volume still
        # connected to it.
        self.stop_volumes()
        for k in list(self.servers):
            self.stop_server(k)
        fresh = not self.members
        for i in range(count):
            key = "member%d" % i
            uri = self.start_server(key, self.member_argv(limited), False,
                                    tcp=(a.transport == "tcp"))
            if fresh:
                self.members.append({"index": i, "dev": uri, "tdev": None, "file": None,
                                     "majmin": None, "key": key})
            else:
                self.members[i]["dev"] = uri
            if fresh or i == 0:
                log("  member %d: %s (pid %d)%s" % (
                    i, uri, self.servers[key][0].pid,
                    (": memory %s, %d MB/s each way (rate=%d bits/s), %s"
                     % (fmt_size(a.member_size), a.mbps, a.mbps * MB * 8,
                        "%d ms per request" % a.delay_ms if a.delay_ms else "no delay"))
                    if limited else ": memory, NO rate or delay limit"))
        self.limited = limited

    def member_pids(self):
        """Every member server's pid (remote members, --flush-us drives):
        their CPU is the run's own, not other processes'."""
        return [v[0].pid for k, v in self.servers.items() if k.startswith("member")]

    # ------------------------------------------------------------ --fsync --flush-us
    def setup_flush_drives(self):
        """--fsync --flush-us: every member file (in RAM, setup_files) is
        served by its own nbdkit, the file plugin behind the flushlat
        filter (bench/flushlat/flushlat.c): an independent drive whose
        cache flush takes --flush-us microseconds, one flush at a time,
        requests that arrive during one sharing the next.  The plugin
        reaches them as NBD exports over Unix sockets."""
        a = self.a
        for n, ms in sorted(self.member_sets.items()):
            for m in ms:
                key = "member-n%d-%d" % (n, m["index"])
                m["dev"] = self.start_server(key, self.flush_drive_argv(m["file"]), False)
                m["key"] = key
        log("  %d drive servers (nbdkit file plugin + flushlat filter, flush-us=%d), e.g. %s"
            % (sum(len(ms) for ms in self.member_sets.values()), a.flush_us,
               self.member_sets[1][0]["dev"]))

    def flush_drive_argv(self, path):
        return ["--filter=" + self.a.flush_filter, "file", "file=" + path,
                "flush-us=%d" % self.a.flush_us]

    def calibrate_remote(self):
        """fio's nbd engine straight at member 0: does the rate filter give the
        configured bandwidth (within 15 %, enforced), and what is a request's
        round trip at QD1 (reported, not enforced)?"""
        a = self.a
        m = self.members[0]
        t = 1.0 if a.quick else 2.0
        cal = {"device": m["dev"], "target_mbps": a.mbps, "target_iops": None,
               "target_delay_ms": a.delay_ms, "checks": []}
        tests = [("read", 1 << 20, 8, "mbps"), ("write", 1 << 20, 8, "mbps")]
        if a.delay_ms:
            tests.append(("randread", 4096, 1, "lat_us"))
        for rw, bs, qd, what in tests:
            job, _ = self.fio(m["dev"], "cal", rw, bs, qd, 0.3, t)
            d = job["write" if "write" in rw else "read"]
            if what == "mbps":
                got, want = d["bw_bytes"] / MB, a.mbps
            else:
                got, want = d.get("lat_ns", {}).get("mean", 0.0) / 1000.0, a.delay_ms * 1000
            ratio = got / want
            enforced = what == "mbps"
            cal["checks"].append({"rw": rw, "bs": bs, "iodepth": qd, "metric": what,
                                  "measured": got, "target": want, "ratio": ratio,
                                  "enforced": enforced})
            log("  calibration %-9s bs=%-7d Q%-2d: %.1f %s (target %d, %.3fx)%s"
                % (rw, bs, qd, got, {"mbps": "MB/s", "lat_us": "us mean latency"}[what], want,
                   ratio, "" if enforced else " [reported, not enforced]"))
        bad = [c for c in cal["checks"] if c["enforced"] and not (0.85 <= c["ratio"] <= 1.15)]
        cal["ok"] = not bad
        if bad:
            self.scaling_refused = ("rate limit does not hold on member 0: %s" % ", ".join(
                "%s %.2fx of target" % (c["rw"], c["ratio"]) for c in bad))
            log("WARNING: %s; scaling is NOT reported" % self.scaling_refused)
        return cal

    def flushbufs(self, members):
        """Write back and drop the page cache of member devices (file plugin)."""
        for m in members:
            run(["blockdev", "--flushbufs", m["dev"]], check=False)


    def calibrate(self):
        """Raw fio on member 0 inside the cgroup: does the throttle hold?"""
        a = self.a
        if not self.throttle:
            return None
        m = self.members[0]
        t = 1.0 if a.quick else 2.0
        cal = {"device": m["dev"], "target_mbps": a.mbps, "target_iops": a.iops, "checks": []}
        tests = [("read", 1 << 20, 8, "mbps"), ("randread", 4096, 32, "iops")]
        if not self.readonly:
            tests += [("write", 1 << 20, 8, "mbps"), ("randwrite", 4096, 32, "iops")]
        for rw, bs, qd, what in tests:
            cmd = ["fio", "--name=cal", "--filename=" + m["dev"], "--direct=1",
                   "--ioengine=io_uring", "--rw=" + rw, "--bs=%d" % bs, "--iodepth=%d" % qd,
                   "--time_based", "--runtime=%dms" % round(t * 1000), "--ramp_time=300ms",
                   "--output-format=json"]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=self.throttle.enter)
            if r.returncode != 0:
                raise BenchError("calibration fio failed: %s" % r.stderr.strip())
            d = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["write" if "write" in rw else "read"]
            got = d["bw_bytes"] / MB if what == "mbps" else d["iops"]
            want = a.mbps if what == "mbps" else a.iops
            ratio = got / want
            cal["checks"].append({"rw": rw, "bs": bs, "iodepth": qd, "metric": what,
                                  "measured": got, "target": want, "ratio": ratio})
            log("  calibration %-9s bs=%-7d Q%-2d: %.1f %s (target %d, %.3fx)"
                % (rw, bs, qd, got, "MB/s" if what == "mbps" else "IOPS", want, ratio))
        bad = [c for c in cal["checks"] if not (0.85 <= c["ratio"] <= 1.15)]
        cal["ok"] = not bad
        if bad:
            self.scaling_refused = ("throttle does not hold: %s" % ", ".join(
                "%s %.2fx of target" % (c["rw"], c["ratio"]) for c in bad))
            log("WARNING: %s; scaling is NOT reported" % self.scaling_refused)
        return cal

