# SPDX-License-Identifier: BSD-3-Clause
"""The run: member servers and volume servers, the phases (main matrix,
limits lifted, chunk sweep, sustained write), the results document and the
cleanup.  Bench is put together from members.MembersMixin and
fio.FioMixin."""

import datetime
import socket
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import results
from .fio import FioMixin
from .members import MembersMixin
from .profiles import FSYNC_JOBS, FSYNC_PROFILE, PROFILES, fsync_targets, ram_targets, targets
from .scrub import SCRUB_DEFAULT_RATE
from .util import MB, BenchError, dev_sectors, fmt_size, free_tcp_port, log, run

SCHEMA_VERSION = 2
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ram_fs(path, what, why=""):
    """The type of the RAM file system PATH is on (tmpfs, ramfs); a
    BenchError naming WHAT (and WHY) when it is on another."""
    fs = run(["stat", "-f", "-c", "%T", path], check=False).stdout.strip()
    if fs not in ("tmpfs", "ramfs"):
        raise BenchError("%s is on %s, not a RAM file system (tmpfs, ramfs)%s"
                         % (what, fs or "an unknown file system", why))
    return fs


class Bench(MembersMixin, FioMixin):
    def __init__(self, a):
        self.a = a
        self.loops = []          # loop devices we created, in creation order
        self.files = []          # backing files we created
        self.servers = {}        # key -> (Popen, socket path)
        self.children = set()    # running Popen objects (fio)
        self.throttle = None
        self.members = []        # dicts: dev (served), tdev (throttled/stat), majmin
        self.runs = []
        self.results = []
        self.notes = []
        self.counter = 0
        self.total = 0
        self.t_start = time.time()
        self.scaling_refused = None
        self.sock_dir = tempfile.mkdtemp(prefix="stripe-bench-")
        self.plugin_cache = None
        self.ref = "nbd" if a.remote else "file"     # the N=1 reference config
        self.allocator = None
        self.limited = True
        self.member_sets = None  # --fsync, --ram: N -> that volume's member files
        self.ref_file = None     # --fsync, --ram: the file plugin's file
        self.drive_interval = None   # --scrub-during: the volumes' drive poller period

    # ------------------------------------------------------------ servers
    def start_server(self, key, argv, readonly, tcp=False):
        """Start nbdkit on a Unix socket in sock_dir (or TCP 127.0.0.1 on a free
        port) and wait until it accepts connections; returns its NBD URI."""
        logpath = os.path.join(self.a.out, "logs", "nbdkit-%s.log" % key)
        for attempt in range(5):
            if tcp:
                port = free_tcp_port()
                addr = ("127.0.0.1", port)
                uri = "nbd://127.0.0.1:%d/" % port
                cmd = ["nbdkit", "-f", "--exit-with-parent", "-i", "127.0.0.1", "-p", str(port)]
            else:
                addr = os.path.join(self.sock_dir, "%s.sock" % key)
                uri = "nbd+unix:///?socket=" + addr
                try:
                    os.unlink(addr)      # nbdkit does not always remove it on exit
                except FileNotFoundError:
                    pass
                cmd = ["nbdkit", "-f", "--exit-with-parent", "-U", addr]
            if readonly:
                cmd.append("-r")
            cmd += argv
            errlog = open(logpath, "a")
            p = subprocess.Popen(cmd, stdout=errlog, stderr=errlog,
                                 preexec_fn=self.throttle.enter if self.throttle else None)
            errlog.close()
            deadline = time.monotonic() + 30     # a busy box, or mlock of a big member
            while time.monotonic() < deadline:
                if p.poll() is not None:
                    break
                if tcp or os.path.exists(addr):
                    s = socket.socket(socket.AF_INET if tcp else socket.AF_UNIX)
                    try:
                        s.connect(addr)
                        s.close()
                        self.servers[key] = (p, uri, " ".join(cmd))
                        return uri
                    except OSError:
                        s.close()
                time.sleep(0.05)
            else:
                p.kill()
                p.wait()
                raise BenchError("nbdkit (%s) did not start within 30 s" % key)
            with open(logpath) as f:
                tail = f.read()[-2000:]
            if tcp and "Address already in use" in tail:
                continue             # another process took the port in between
            raise BenchError("nbdkit (%s) exited: see %s" % (" ".join(cmd), logpath))
        raise BenchError("nbdkit (%s): no free TCP port" % key)

    def plugin_argv(self, n, chunk):
        if self.a.metadata == "nbdstripe":
            return self.header_argv(n, chunk)
        argv = [self.a.plugin]
        if self.plugin_cache:
            argv.append("cache=" + self.plugin_cache)
        argv.append("chunk=" + fmt_size(chunk))
        if self.a.scrub_during:
            # the status file brings the control socket beside it
            argv.append("status=" + self.status_path(self.server_key("plugin", n, chunk)))
        members = self.member_sets[n] if self.member_sets else self.members[:n]
        argv += ["file=" + m["dev"] for m in members]   # a path or an NBD URI
        return argv

    def header_argv(self, n, chunk):
        """--metadata nbdstripe: a volume with nbdstripe headers (and, where
        the plugin keeps one, its allocation map) created afresh on the
        members by `nbdstripe create --force`, served by its config."""
        a = self.a
        members = self.member_sets[n] if self.member_sets else self.members[:n]
        key = self.server_key("plugin", n, chunk)
        cfg = os.path.join(self.sock_dir, "%s.conf" % key)
        with open(cfg, "w") as f:
            f.write('name = "bench%d";\nchunk = "%d";\n' % (n, chunk))
            if self.plugin_cache:
                f.write('cache = "%s";\n' % self.plugin_cache)
            f.write("members = [ %s ];\n" % ", ".join('"%s"' % m["dev"] for m in members))
            if a.scrub_during:
                f.write('health = { status_file = "%s"; };\n' % self.status_path(key))
        r = run([a.nbdstripe, "create", "--force", cfg], check=False)
        if r.returncode != 0:
            raise BenchError("%s create --force %s: %s" % (a.nbdstripe, cfg, (r.stderr or r.stdout).strip()))
        return [a.plugin, "config=" + cfg]

    def trim_volume(self, uri):
        """--trim-first: one TRIM of the whole volume through NBD, so that
        the runs write into free regions of the allocation map."""
        code = ("import nbd, sys\nh = nbd.NBD()\nh.connect_uri(sys.argv[1])\n"
                "h.trim(h.get_size(), 0)\nh.flush()\nh.shutdown()\n")
        r = run(["/usr/bin/python3", "-c", code, uri], check=False)
        if r.returncode != 0:
            raise BenchError("trim of %s (libnbd's python3-nbd): %s" % (uri, (r.stderr or r.stdout).strip()))

    def status_path(self, key):
        return os.path.join(self.sock_dir, "%s.status.json" % key)

    def ctl_path(self, key):
        """The plugin's control socket beside its status file (control.c)."""
        return os.path.join(self.sock_dir, "%s.ctl" % key)

    def stop_volumes(self):
        """Stop every server but the remote members'."""
        for k in list(self.servers):
            if not k.startswith("member"):
                self.stop_server(k)

    def stop_server(self, key):
        p = self.servers.pop(key)[0]
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # ------------------------------------------------------------ phases
    def server_key(self, config, n, chunk):
        return config + "1" if config in ("file", "nbd") else "stripe-n%d-c%s" % (n, fmt_size(chunk))

    def ensure_server(self, config, n, chunk):
        key = self.server_key(config, n, chunk)
        if key not in self.servers:
            if config == "file" and self.ref_file and self.a.flush_us:
                # --fsync --flush-us: the file plugin on one drive like
                # the members'
                argv = self.flush_drive_argv(self.ref_file)
            elif config == "file" and self.ref_file:
                # --fsync, --ram: its defaults (page cache, flush =
                # fdatasync), as a user would run it
                argv = ["file", "file=" + self.ref_file]
            elif config == "file":
                argv = ["file", "file=" + self.members[0]["dev"], "cache=none"]
            elif config == "nbd":
                # what a user would otherwise do: nbdkit's own nbd plugin
                # forwarding to the same member server
                argv = ["nbd", "uri=" + self.members[0]["dev"]]
            else:
                # The plugin owns its members while it serves (exclusive
                # open of block devices, locks): a second volume over the
                # same members is refused.  One stripe volume at a time.
                for k in [k for k in self.servers if k.startswith("stripe-")]:
                    self.stop_server(k)
                argv = self.plugin_argv(n, chunk)
            self.start_server(key, argv, self.readonly)
        return key

    def run_matrix(self, rws, counts, chunk):
        """Main matrix: file plugin N=1 and the stripe plugin at every N, side by side."""
        a = self.a
        configs = [(self.ref, 1)] + [("plugin", n) for n in counts]
        self.print_header("profiles: %s plugin N=1 and stripe plugin N=%s, chunk %s"
                          % (self.ref, ",".join(map(str, counts)), fmt_size(chunk)))
        for rep in range(a.repeat):
            for prof in self.profiles:
                for rw in rws:
                    for c, n in configs:
                        self.measure_retry("main", c, n, chunk, prof, rw, rep)
        lat = [p for p in self.profiles if p[0] == "RND4K-Q1T1"]
        if self.throttle and lat:
            # At QD1 a throttled member is paced by its IOPS token bucket, which
            # is not a latency: consecutive requests on different members do
            # not wait for each other, so QD1 "scales".  The engine's own
            # latency cost is measured with the throttle lifted: every member
            # is then the same virtual disk, so N=k vs N=1 is the striping cost.
            self.print_header("RND4K-Q1T1 with the throttle lifted (striping latency cost)")
            self.throttle.suspend()
            try:
                for rep in range(a.repeat):
                    for rw in rws:
                        for c, n in configs:
                            self.measure_retry("unthrottled", c, n, chunk, lat[0], rw, rep)
            finally:
                self.throttle.resume()
        if self.a.remote and lat:
            # Remote: the same question with rate and delay lifted, i.e. the
            # members are bare memory servers: N=k vs N=1 is the cost of the
            # striping path over NBD itself.
            self.print_header("RND4K-Q1T1 with rate and delay lifted (striping latency cost over NBD)")
            self.setup_remote(max(counts), limited=False)
            for rep in range(a.repeat):
                for rw in rws:
                    for c, n in configs:
                        self.measure_retry("unthrottled", c, n, chunk, lat[0], rw, rep)
            self.setup_remote(max(counts), limited=True)    # for what follows

    def run_sweep(self, rws, n, chunks):
        a = self.a
        self.print_header("chunk sweep at N=%d: %s" % (n, ",".join(fmt_size(c) for c in chunks)))
        for rep in range(a.repeat):
            for prof in self.profiles:
                for rw in rws:
                    for ch in chunks:
                        self.measure_retry("chunks", "plugin", n, ch, prof, rw, rep)

    def run_sustained(self, counts, chunk):
        """Sequential write of several times each member's write cache; the
        array curve comes from fio's per-I/O log, the member curves from
        the members' sector counters.  Emulated members get a write cache:
        full speed for --cache-size bytes, then --slow-mbps."""
        a = self.a
        out = []
        print("\n== sustained write: %s x %s per member (%s)" % (
            a.sustained_factor, fmt_size(a.cache_size),
            "emulated cache, then %d MB/s" % a.slow_mbps if self.throttle else "real drives"))
        for n in counts:
            key = self.ensure_server("plugin", n, chunk)
            p, uri, _ = self.servers[key]
            mem = self.members[:n]
            total = a.sustained_factor * a.cache_size * n
            total -= total % (1 << 20)
            prefix = os.path.join(a.out, "logs", "sustained-n%d" % n)
            base = {m["index"]: dev_sectors(m["tdev"])[1] for m in mem}
            samples = []
            stop = threading.Event()
            cliff = {}
            clock = {}

            def sampler():
                t0 = time.monotonic()
                clock["wall0"] = time.time()
                while not stop.is_set():
                    now = time.monotonic() - t0
                    row = [now]
                    for m in mem:
                        wr = (dev_sectors(m["tdev"])[1] - base[m["index"]]) * 512
                        row.append(wr)
                        if self.throttle and m["index"] not in cliff and wr >= a.cache_size:
                            self.throttle.set_write_bps(m["majmin"], a.slow_mbps * MB)
                            cliff[m["index"]] = now
                    samples.append(row)
                    stop.wait(0.05)

            th = threading.Thread(target=sampler, daemon=True)
            th.start()
            t_start = time.time()
            scrub = self.scrub_start(key)
            try:
                job, w = self.fio(uri, "sustained-n%d" % n, "write",
                                  1 << 20, 8, 0, 0,
                                  extra=["--size=%d" % total, "--write_lat_log=" + prefix,
                                         "--log_unix_epoch=1"],
                                  server_pid=p.pid)
            finally:
                stop.set()
                th.join()
                scrub = self.scrub_stop(key, scrub)
                if self.throttle:
                    for m in mem:
                        self.throttle.set_write_bps(m["majmin"], a.mbps * MB)
            elapsed = time.time() - t_start
            # array curve: bytes completed per bucket, from fio's per-I/O
            # latency log (Unix time of completion in ms, latency in ns,
            # dir, bytes, offset).  Time 0 is fio's first submission; the
            # members' samples (started before fio) are put on that clock.
            step = 0.1 if a.quick else 0.5
            done = []
            logf = prefix + "_lat.1.log"
            if os.path.exists(logf):
                with open(logf) as f:
                    for line in f:
                        v = [x.strip() for x in line.split(",")]
                        done.append((int(v[0]) / 1000.0, int(v[1]) / 1e9, int(v[3])))
            zero = min(t - lat for t, lat, _ in done) if done else clock.get("wall0", t_start)
            shift = clock.get("wall0", zero) - zero      # sampler time -> seconds since zero
            buckets = {}
            for t, _, nbytes in done:
                k = int((t - zero) // step)
                buckets[k] = buckets.get(k, 0) + nbytes
            arr = [[round((k + 1) * step, 3), buckets.get(k, 0) / step / MB]
                   for k in range(max(buckets) + 1)] if buckets else []
            # member curves, from the sector counters, same buckets
            members_curve = []
            nxt, prev = step, samples[0] if samples else None
            for row in samples:
                if row[0] >= nxt:
                    dt = row[0] - prev[0]
                    if row[0] + shift > 0:
                        members_curve.append([round(row[0] + shift, 3)] + [
                            (row[i + 1] - prev[i + 1]) / dt / MB for i in range(n)])
                    prev, nxt = row, nxt + step
            cliff = {k: max(0.0, v + shift) for k, v in cliff.items()}
            d = job["write"]
            res = {"n": n, "chunk": chunk, "bytes": total, "elapsed_s": elapsed,
                   "mean_mbps": d["bw_bytes"] / MB,
                   "cliff_at_s": {str(k): v for k, v in cliff.items()},
                   "cache_bytes": a.cache_size if self.throttle else None,
                   "slow_mbps": a.slow_mbps if self.throttle else None,
                   "array_curve": arr, "member_curves": members_curve}
            if a.scrub_during:
                res["scrub"] = scrub
            out.append(res)
            print("  N=%d: %s written in %.1f s, mean %.1f MB/s%s" % (
                n, fmt_size(total), elapsed, res["mean_mbps"],
                ("; cache exhausted at " + ", ".join("m%s %.1fs" % (k, v) for k, v in sorted(cliff.items())))
                if cliff else ""))
            sys.stdout.flush()
        return out

    # ------------------------------------------------------------ cleanup
    def cleanup(self):
        for p in list(self.children):
            if p.poll() is None:
                p.kill()
                p.wait()
        for key in sorted(self.servers, key=lambda k: k.startswith("member")):   # volumes first
            try:
                self.stop_server(key)
            except Exception as e:  # keep cleaning
                log("warning: stopping %s: %s" % (key, e))
        for dev in reversed(self.loops):
            for _ in range(20):
                if run(["losetup", "-d", dev], check=False).returncode == 0:
                    break
                time.sleep(0.2)
            else:
                log("warning: could not detach %s" % dev)
        self.loops = []
        if self.throttle:
            self.throttle.cleanup()
            self.throttle = None
        if not self.a.keep_files:
            for f in self.files:
                try:
                    os.unlink(f)
                except OSError:
                    pass
            try:
                os.rmdir(self.a.workdir)
            except OSError:
                pass
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    # ------------------------------------------------------------ main
    def main(self):
        a = self.a
        self.readonly = bool(a.members) and not a.destroy_data
        self.rws = ["read"] if self.readonly else a.rw
        self.counts = a.counts
        self.profiles = [p for p in PROFILES + [FSYNC_PROFILE] if p[0] in a.profiles]
        load_before = open("/proc/loadavg").read().split()[:3]
        src = run(["git", "-C", REPO, "describe", "--always", "--dirty", "--abbrev=12"], check=False)
        if src.returncode == 0 and src.stdout.strip():
            self.notes.append("source tree (harness%s): git commit %s" % (
                " and plugin" if a.plugin.startswith(REPO + os.sep) else "", src.stdout.strip()))
        if a.metadata == "nbdstripe":
            self.notes.append("the stripe plugin serves volumes with nbdstripe headers, created afresh by %s "
                              "create --force before every start%s" % (
                                  a.nbdstripe, "; the whole volume trimmed before every write run"
                                  if a.trim_first else ""))
        help_txt = run(["nbdkit", a.plugin, "--help"], check=False).stdout
        if "cache=" in help_txt:
            self.plugin_cache = a.cache
        else:
            self.notes.append("plugin has no cache= parameter: members are opened buffered")
            log("WARNING: the plugin has no cache= parameter: its member I/O goes through the "
                "page cache, which escapes block throttling (writes) and can hit the cache (reads)")
            if not a.members and not a.remote:
                self.scaling_refused = self.scaling_refused or \
                    "plugin cannot open members with O_DIRECT (no cache=direct): throttling does not apply"
        nmax = max(a.counts)
        if a.members:
            self.setup_real()
            if nmax > len(self.members):
                raise BenchError("--counts needs %d members, --members gives %d" % (nmax, len(self.members)))
            method = "real drives"
        elif a.ram:
            fs = ram_fs(a.ram_dir, "--ram-dir %s" % a.ram_dir)
            log("== setting up member files in RAM for N = %s" % ",".join(map(str, a.counts)))
            self.setup_files(a.counts)
            method = ("files in RAM in %s (%s), written once; the volume %s at every N (N files of "
                      "1/N each); nbdkit's file plugin on one file of %s there, with its defaults"
                      % (a.workdir, fs, fmt_size(a.volume_size), fmt_size(a.volume_size)))
        elif a.fsync and a.flush_us:
            where = os.path.dirname(os.path.abspath(a.workdir))
            fs = ram_fs(where, "--flush-us: %s" % where,
                        ": the drives' only flush cost must be the emulated one")
            log("== setting up member drives (files in RAM, flush %d us) for N = %s"
                % (a.flush_us, ",".join(map(str, a.counts))))
            self.setup_files(a.counts)
            self.setup_flush_drives()
            method = ("independent emulated drives: each member a file in RAM in %s (%s), served by "
                      "its own nbdkit (file plugin behind bench's flushlat filter: a cache flush takes "
                      "%d us, one at a time, requests arriving during one share the next), reached "
                      "by the plugin as an NBD export over a Unix socket; the volume %s at every N "
                      "(N drives of 1/N each); the reference: nbdkit's file plugin on one file of %s "
                      "behind the same filter (one drive), its defaults, one NBD hop fewer"
                      % (a.workdir, fs, a.flush_us, fmt_size(a.volume_size), fmt_size(a.volume_size)))
        elif a.fsync:
            log("== setting up member files for N = %s" % ",".join(map(str, a.counts)))
            self.setup_files(a.counts)
            fs = run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "--target", a.workdir],
                     check=False).stdout.strip()
            method = ("files on the machine's disk in %s (%s), written once; the volume %s at every N "
                      "(N files of 1/N each); nbdkit's file plugin on one file of %s with its defaults"
                      % (a.workdir, fs or "?", fmt_size(a.volume_size), fmt_size(a.volume_size)))
        elif a.remote:
            log("== starting %d remote member servers (%s)" % (nmax, a.transport))
            self.setup_remote(nmax)
            method = ("nbdkit memory plugin (allocator=%s) behind --filter=rate (rate=%d bits/s = %d MB/s "
                      "per server, each way, burstiness=%g s) and --filter=delay (rdelay=wdelay=%d ms), "
                      "nbdkit's default 16 threads per connection, on %s"
                      % (self.allocator, a.mbps * MB * 8, a.mbps, a.burstiness, a.delay_ms,
                         "TCP 127.0.0.1" if a.transport == "tcp" else "a Unix socket"))
            if not a.delay_ms:
                method = method.replace("and --filter=delay (rdelay=wdelay=0 ms)", "(no delay filter)")
            if self.allocator != "malloc,mlock=true":
                self.notes.append("remote members are not mlocked (not root, small RLIMIT_MEMLOCK): "
                                  "their pages are faulted in on first write")
        else:
            log("== setting up %d emulated members" % nmax)
            self.setup_emulated(nmax)
            method = ("loop device (--direct-io=on) over its own file, behind a second direct-I/O loop "
                      "device (throttle sees only unsplit bios); cgroup %s block throttling"
                      % (self.throttle.kind if self.throttle else "NONE")) if a.loop_stack == 2 else \
                     "loop device (--direct-io=on) over its own file; cgroup %s block throttling" % (
                         self.throttle.kind if self.throttle else "NONE")
        cal = self.calibrate_remote() if a.remote else (
            self.calibrate() if not (a.members or a.fsync or a.ram) else None)
        sweep_chunks = [c for c in (a.chunks or []) if c != a.chunk] if nmax > 1 else []
        per = len(self.profiles) * len(self.rws) * a.repeat
        self.total = per * (1 + len(a.counts)) + per * len(sweep_chunks + ([a.chunk] if sweep_chunks else []))
        if "RND4K-Q1T1" in a.profiles and not a.members:
            self.total += len(self.rws) * a.repeat * (1 + len(a.counts))
        self.t_start = time.time()
        self.run_matrix(self.rws, a.counts, a.chunk)
        if sweep_chunks:
            # the default chunk is measured again side by side with the others
            self.stop_volumes()
            self.run_sweep(self.rws, nmax, sorted(sweep_chunks + [a.chunk]))
        sustained = []
        if a.sustained and not self.readonly:
            self.stop_volumes()
            sustained = self.run_sustained(a.counts, a.chunk)
        if a.ram:
            self.scaling_refused = "RAM members: nothing to scale (the request path is measured)"
        self.results, idx = results.aggregate(self.runs, a.chunk, self.ref, self.scaling_refused,
                                              ref_every_n=a.ram)
        doc = {
            "schema_version": SCHEMA_VERSION,
            "tool": "nbdstripe stripe-bench",
            "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "duration_s": round(time.time() - self.t_start, 1),
            "machine": {"hostname": platform.node(), "kernel": platform.release(),
                        "cpus": os.cpu_count(),
                        "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                           if l.startswith("model name")), "unknown"),
                        "loadavg_before": " ".join(load_before),
                        "loadavg_after": " ".join(open("/proc/loadavg").read().split()[:3]),
                        "fio": run(["fio", "--version"], check=False).stdout.strip(),
                        "nbdkit": run(["nbdkit", "--version"], check=False).stdout.strip()},
            "parameters": {"quick": a.quick, "counts": a.counts, "chunk": a.chunk,
                           "chunks": sorted(set(sweep_chunks + [a.chunk])) if sweep_chunks else [],
                           "profiles": [p[0] for p in self.profiles], "rw": self.rws,
                           "ramp_s": a.ramp, "runtime_s": a.runtime, "repeat": a.repeat,
                           "noise_threshold_cores": a.noise_threshold,
                           "load_sample_s": a.load_sample,
                           "plugin": a.plugin, "plugin_cache": self.plugin_cache,
                           "readonly": self.readonly, "reference": self.ref,
                           "volume_size": a.volume_size if (a.fsync or a.ram) else None,
                           "jobs": FSYNC_JOBS if a.fsync else 1,
                           "flush_us": a.flush_us,
                           "scrub_during": a.scrub_during,
                           "metadata": a.metadata, "trim_first": a.trim_first,
                           "scrub_rate": SCRUB_DEFAULT_RATE if a.scrub_during else None,
                           "drive_interval_s": self.drive_interval},
            "members": {"mode": "real" if a.members else ("remote" if a.remote else (
                            ("drives" if a.flush_us else "files") if a.fsync else ("ram" if a.ram else "emulated"))),
                        "count": len(self.members), "method": method,
                        "devices": [m["dev"] for m in self.members],
                        "mbps": None if (a.members or a.fsync or a.ram) else a.mbps,
                        "iops": None if (a.members or a.remote or a.fsync or a.ram) else a.iops,
                        "size": None if a.members else (
                            a.volume_size // nmax if (a.fsync or a.ram) else a.member_size),
                        "throttle": (self.throttle.kind if self.throttle else None)
                        if not (a.members or a.remote or a.fsync or a.ram) else None,
                        "remote": {"transport": a.transport, "server": "memory",
                                   "allocator": self.allocator,
                                   "rate_bits_per_s": a.mbps * MB * 8,
                                   "burstiness_s": a.burstiness,
                                   "delay_ms": a.delay_ms,
                                   "server_threads": 16,
                                   "plugin_connections": None} if a.remote else None,
                        "calibration": cal},
            "scaling_refused": self.scaling_refused,
            "noise": results.noise_verdict(self.results, a.noise_threshold),
            "notes": self.notes,
            "results": self.results,
            "runs": self.runs,
            "targets": fsync_targets(idx, a.chunk, self.counts) if a.fsync else
                       ram_targets(idx, a.chunk, self.counts) if a.ram else
                       targets(idx, a.remote, a.chunk, self.counts, self.rws),
            "sustained": sustained,
            "charts": [],
        }
        results.write_outputs(doc, a.out)      # also makes the charts
        print("\n== done in %.0f s: %s" % (time.time() - self.t_start, a.out))
        if self.scaling_refused:
            print("   scaling NOT reported: %s" % self.scaling_refused)
        tg = doc["targets"]
        if tg:
            miss = [t for t in tg if t["met"] is False]
            print("   targets: %d met, %d missed%s" % (
                sum(1 for t in tg if t["met"]), len(miss),
                "".join("\n     MISSED %s %s %s: %.3f < %.2f" % (
                    t["target"], t["profile"], t["rw"], t["measured"], t["threshold"]) for t in miss)))
        return results.report_noise(doc, a.strict)


