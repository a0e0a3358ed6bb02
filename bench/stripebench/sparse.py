# SPDX-License-Identifier: BSD-3-Clause
"""sparse-moves: what the allocation map (include/alloc.h) saves a move, on
emulated members (the stripebench emulation: direct-I/O loop devices
throttled by cgroup block throttling, here over SPARSE files, so that what
a member holds shows in its file's allocated blocks).

One run, two volumes of the same size, each on 4 members of its own, the
same steps on each:
  A. "sparse": the volume discarded through the kernel (nbdfuse exposes the
     NBD export as a file, a loop device over it: blkdiscard), ext4 made
     on it (mkfs.ext4, which discards too), mounted, filled with files to
     --fill of the volume (random bytes, their SHA-256 kept), sync,
     fstrim, unmounted: the map holds about what the file system does;
  B. "full": every byte of the volume written through NBD (fio's nbd
     engine, 1M QD8, crc32c verify headers): the map all in use, as every
     volume was before the map.
Then, on each:
  1. `nbdstripe replace --wait` of member 1 onto a fresh sparse member;
  2. `nbdstripe grow --wait` 4 -> 5 onto a fresh sparse member;
  3. `nbdstripe shrink --wait VOL 2 --size SIZE` 5 -> 4 (SIZE: the size
     before the grow), the volume served again (as the README says to
     before the next grow or shrink);
  4. `nbdstripe grow --wait` 4 -> 5 again, onto another fresh sparse
     member (the one the shrink removed is refused: a removed member is
     never used again until it is wiped and dropped from the config);
  5. the data checked: A's files read back by the kernel (mounted
     read-only) against their SHA-256, B's bytes by fio --verify_only.
After each step the map's "in use" (status), the volume's extents (NBD
block status: a free region is a hole), each member's share of the bytes
in use (by the layout: chunk c on member c mod N) and its backing file's
allocated bytes (st_blocks * 512) are recorded.

Targets: A's replace and first grow each <= 0.2 x B's time (status
elapsed_seconds); after the replace, A's new member allocated <= 1.2 x the
bytes in use it holds; after the shrink and the second grow, every member
of A <= 1.2 x its share.

On loop devices a free region's new place costs what a write would: the
plugin's zero that may trim is, on a block device, fallocate(PUNCH_HOLE),
which the kernel sends as WRITE_ZEROES, and block throttling charges that
its full length (a DISCARD one sector).  --emulation nbd puts the members
behind nbdkit's rate filter instead, which counts reads and writes only."""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

from .members import Throttle
from .replace import common_args, common_checks, run_header, run_main, write_outputs
from .reshape import DATA_OFFSET, ReshapeBench
from .runner import REPO
from .util import MB, BenchError, dev_majmin, fmt_size, log, parse_size, run

TIME_TARGET = 0.2                       # A's move time <= 0.2 x B's
ALLOC_TARGET = 1.2                      # allocated <= 1.2 x the data held
WIDTH = 4                               # members of each volume
REPLACED = 1                            # the member the replace moves
# Devices of a volume's set, by role: 0-3 its members, then the replace's
# new member, the grow's and the second grow's (a member the shrink has
# removed is never used again: `nbdstripe grow` refuses it).
NEW_REPLACE, NEW_GROW, NEW_REGROW = WIDTH, WIDTH + 1, WIDTH + 2
PER_SET = WIDTH + 3
FILE_SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)

DESCRIPTION = """\
sparse-moves: what the allocation map saves `nbdstripe replace`, `grow` and
`shrink`.  Side by side in one run, two volumes of the same size on 4
emulated members each (direct-I/O loop devices over sparse files, throttled
by cgroup block throttling): "sparse", an ext4 made through the kernel
(nbdfuse + a loop device), filled with files to --fill of the volume and
fstrimmed; "full", every byte written through NBD.  On each: a replace of
member 1, a grow 4 -> 5, a shrink 5 -> 4 and a grow again: their times, and
each member file's allocated bytes against its share of the data in use.
Needs root, nbdfuse, mkfs.ext4, fstrim, blkdiscard, nbdinfo, fio."""

EPILOG = """\
examples:
  bench/sparse-moves                        # 1G members, about 3.5 minutes
  bench/sparse-moves --quick --out /tmp/sm  # 256M members, about a minute
  bench/sparse-moves --emulation nbd        # members whose zeroing is free
  bench/sparse-moves --fill 0.25            # a file system 25 % full

outputs (in --out, default bench/out/sparse-YYYYmmdd-HHMMSS): results.json,
summary.md, logs/ (nbdkit's log, the nbdstripe commands' output, the
configs, mkfs/fstrim output).  Units: MB/s = 10^6 bytes/s; sizes accept
K/M/G (1024-based).  Exit status: 0 ran (whether or not the targets were
met: see results.json), 1 error, 2 usage, 130 interrupted.
"""


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="sparse-moves", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, "sparse")
    ap.add_argument("--quick", action="store_true", help="CI size: 256M members")
    ap.add_argument("--mbps", type=int, default=80,
                    help="per-member MB/s each way (default 80, as reshape-impact: a 4 -> 5 grow "
                         "moves 640 MB/s, under this machine's ~1.1 GB/s disk)")
    ap.add_argument("--member-size", type=parse_size,
                    help="size of each member (default 1G; quick 256M)")
    ap.add_argument("--fill", type=float, default=0.10,
                    help="the sparse volume's files: this fraction of the volume (default 0.10)")
    ap.add_argument("--shrink-index", type=int, default=2,
                    help="the member the shrink removes (default 2)")
    ap.add_argument("--no-verify", action="store_true",
                    help="do not read the data back at the end")
    ap.add_argument("--emulation", choices=("loop", "nbd"), default="loop",
                    help="loop (default): members are direct-I/O loop devices over sparse files, "
                         "throttled by cgroup block throttling, which charges a write-zeroes as a "
                         "write of its length; nbd: members are nbdkit file servers over sparse "
                         "files behind the rate filter, which does not charge zero or trim (a "
                         "device that deallocates for free)")
    ap.add_argument("--loop-stack", type=int, choices=(1, 2), default=2,
                    help="--emulation loop: 2 (default), a member is a loop device over a throttled "
                         "loop device over its file, as stripe-bench's (the throttle sees no split "
                         "bios), and a discard on it reaches the throttled one as a write-zeroes, "
                         "charged its length; 1, a single throttled loop device over its file, "
                         "which the plugin zeroes with discards (charged one sector)")
    a = ap.parse_args(argv)
    if a.member_size is None:
        a.member_size = (256 << 20) if a.quick else (1 << 30)
    if a.member_size % (4 << 20) or a.member_size < (64 << 20):
        ap.error("--member-size must be a multiple of 4M, at least 64M")
    if not 0 < a.fill < 0.9:
        ap.error("--fill: between 0 and 0.9")
    if not 0 <= a.shrink_index <= WIDTH:
        ap.error("--shrink-index: 0 to %d" % WIDTH)
    stack = a.loop_stack
    common_checks(ap, a, "sparse")     # sets stripebench's defaults, loop_stack 2
    a.loop_stack = stack
    a.repeat = 1
    return a


def dev_io(dev):
    """(bytes read, bytes written, bytes discarded) of a block device so
    far: /sys/class/block/X/stat.  A write-zeroes counts as written."""
    with open("/sys/class/block/%s/stat" % os.path.basename(os.path.realpath(dev))) as f:
        v = [int(x) for x in f.read().split()]
    return v[2] * 512, v[6] * 512, (v[13] * 512 if len(v) > 13 else 0)


def allocated(path):
    return os.stat(path).st_blocks * 512


def ratio(a, b):
    return a / b if b else None


class SparseBench(ReshapeBench):
    """ReshapeBench's control socket, commands and logs; two volumes, each
    on a set of PER_SET members of its own."""

    def __init__(self, a):
        super().__init__(a)
        self.vname = None
        self.sets = {}                 # volume name -> member indexes of its set
        self.fs = {}                   # the kernel's view: fuse dir, nbdfuse, loop, mount
        self.nfs = 0

    # ------------------------------------------------------------ members
    def setup_sparse(self, count):
        """count emulated members as stripebench's (a direct-I/O loop device,
        throttled, under another one the servers open), over sparse files:
        what a member holds is then its file's allocated blocks."""
        a = self.a
        os.makedirs(a.workdir, exist_ok=True)
        if a.emulation == "nbd":
            return self.setup_sparse_nbd(count)
        self.throttle = Throttle("nbdstripe-bench-%d" % os.getpid())
        for i in range(count):
            path = os.path.join(a.workdir, "member%d.img" % i)
            with open(path, "wb"):
                pass
            self.files.append(path)
            os.truncate(path, a.member_size)
            inner = self.losetup(path)
            outer = self.losetup(inner) if a.loop_stack == 2 else inner
            m = {"index": i, "dev": outer, "tdev": inner, "file": path, "majmin": dev_majmin(inner)}
            self.throttle.set(m["majmin"], a.mbps * MB, a.mbps * MB, a.iops, a.iops)
            self.members.append(m)
        log("  %d members: sparse files of %s in %s, loop devices %s .. %s, throttled at %d MB/s, "
            "%d IOPS each way" % (count, fmt_size(a.member_size), a.workdir, self.members[0]["dev"],
                                  self.members[-1]["dev"], a.mbps, a.iops))

    def setup_sparse_nbd(self, count):
        """--emulation nbd: each member an nbdkit file server over a sparse
        file, behind the rate filter (bits/s for the whole server, burst
        credit 0.1 s), on a Unix socket.  The rate filter counts reads and
        writes only: a zero or trim is a short message, free, and the file
        plugin punches a hole for one that may trim.  nbdkit 1.32's file
        plugin does not advertise fast zero, so the volume's trims (a fast
        zero that may trim, volume_map.c) would go down as plain trims and
        free nothing in the map: the nozero filter's fastzeromode=ignore
        advertises it (a hole punched in a file is fast anyway)."""
        a = self.a
        for i in range(count):
            path = os.path.join(a.workdir, "member%d.img" % i)
            with open(path, "wb"):
                pass
            self.files.append(path)
            os.truncate(path, a.member_size)
            key = "member%d" % i
            uri = self.start_server(key, ["--filter=rate", "--filter=nozero", "file", "file=" + path,
                                          "zeromode=plugin", "fastzeromode=ignore",
                                          "rate=%d" % (a.mbps * MB * 8), "burstiness=0.1"], False)
            self.members.append({"index": i, "dev": uri, "tdev": None, "file": path, "majmin": None,
                                 "key": key})
        log("  %d members: nbdkit file servers over sparse files of %s in %s, rate filter %d MB/s "
            "each way (zero and trim not counted)" % (count, fmt_size(a.member_size), a.workdir, a.mbps))

    def calibrate_nbd(self):
        """fio's nbd engine straight at member 0, 1M QD8, write then read."""
        a = self.a
        cal = {"device": self.members[0]["dev"], "target_mbps": a.mbps, "checks": []}
        for rw in ("write", "read"):
            cmd = ["fio", "--thread", "--name=cal", "--ioengine=nbd", "--uri=" + self.members[0]["dev"],
                   "--rw=" + rw, "--bs=1M", "--iodepth=8", "--time_based", "--runtime=2000ms",
                   "--ramp_time=300ms", "--size=%d" % a.member_size, "--output-format=json"]
            r = run(cmd)
            got = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0][rw]["bw_bytes"] / MB
            cal["checks"].append({"rw": rw, "bs": 1 << 20, "iodepth": 8, "metric": "mbps",
                                  "measured": got, "target": a.mbps, "ratio": got / a.mbps})
            log("  calibration %-5s 1M Q8: %.1f MB/s (target %d, %.3fx)" % (rw, got, a.mbps, got / a.mbps))
        cal["ok"] = all(0.85 <= c["ratio"] <= 1.15 for c in cal["checks"])
        return cal

    def queue_limits(self, dev):
        q = "/sys/class/block/%s/queue/" % os.path.basename(os.path.realpath(dev))
        out = {}
        for k in ("discard_max_bytes", "write_zeroes_max_bytes", "discard_granularity"):
            try:
                out[k] = int(open(q + k).read())
            except (OSError, ValueError):
                out[k] = None
        return out

    def by_dev(self, dev):
        same = (lambda x, y: x == y) if "://" in dev else \
            (lambda x, y: os.path.realpath(x) == os.path.realpath(y))
        for m in self.members:
            if same(m["dev"], dev):
                return m
        raise BenchError("%s is none of our members" % dev)

    # ------------------------------------------------------------ the volume
    def use_volume(self, name):
        self.vname = name
        self.cfg = os.path.join(self.sock_dir, name + ".conf")
        self.status_file = os.path.join(self.sock_dir, name + ".status.json")
        self.ctl_path = os.path.join(self.sock_dir, name + ".ctl")

    def write_config(self):
        devs = [self.members[i]["dev"] for i in self.sets[self.vname][:WIDTH]]
        with open(self.cfg, "w") as f:
            f.write('# sparse-moves: volume "%s" (members: throttled loop devices over sparse files)\n'
                    'name = "%s";\nchunk = "%s";\nmembers = [ %s ];\ncache = "direct";\n'
                    'health = {\n  status_file = "%s";\n  interval = 1;\n};\n'
                    % (self.vname, self.vname, fmt_size(self.a.chunk),
                       ", ".join('"%s"' % d for d in devs), self.status_file))

    def create_volume(self):
        self.write_config()
        self.save_log("config-%s" % self.vname, open(self.cfg).read())
        self.nbdstripe(["create", "--force", self.cfg], "create-%s" % self.vname)
        first = self.members[self.sets[self.vname][0]]["dev"]
        r = run([self.a.nbdstripe, "inspect", "--json", first], check=False)
        self.save_log("inspect-%s" % self.vname, r.stdout + r.stderr)
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            doc = {}
        hdr = find_key(doc, "data_offset")
        self.data_offset = hdr.get("data_offset", DATA_OFFSET) if hdr else DATA_OFFSET
        amap = (hdr or {}).get("allocation_map")
        if not amap:
            raise BenchError("%s: the new volume has no allocation map (nbdstripe inspect: %s)"
                             % (self.vname, (r.stdout or r.stderr).strip()[:300]))
        return {"data_offset": self.data_offset, "map_on_members": amap}

    def serve(self):
        if "volume" in self.servers:
            self.stop_server("volume")
        for p in (self.status_file, self.ctl_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.serve_config()

    def config_members(self):
        """The config's members, in role order (the commands rewrite it)."""
        text = re.sub(r"#[^\n]*", "", open(self.cfg).read())
        m = re.search(r"(?:^|;)\s*members\s*=\s*\[([^]]*)\]", text)
        if not m:
            raise BenchError("%s names no members" % self.cfg)
        return re.findall(r'"([^"]*)"', m.group(1))

    def status(self):
        ans = self.ctl({"op": "status"})
        if not ans.get("ok"):
            raise BenchError("control socket: %s" % ans.get("error"))
        return ans.get("status") or ans

    def size(self):
        r = run(["nbdinfo", "--size", self.uri])
        return int(r.stdout.strip())

    def extents(self, size):
        """The volume's extents (NBD block status): [offset, length, in use]."""
        r = run(["nbdinfo", "--map", "--json", self.uri])
        out = []
        for e in json.loads(r.stdout):
            o, n = e["offset"], e["length"]
            if o >= size:
                break
            n = min(n, size - o)
            used = not (e["type"] & 1)          # a free region is a hole (that reads zeros)
            if out and out[-1][2] == used and out[-1][0] + out[-1][1] == o:
                out[-1][1] += n
            else:
                out.append([o, n, used])
        return out

    def shares(self, extents, n):
        """Bytes in use on each of n members: chunk c is on member c mod n
        (equal members: one zone)."""
        ch = self.a.chunk
        per = [0] * n
        for o, length, used in extents:
            if not used:
                continue
            end = o + length
            while o < end:
                c = o // ch
                step = min(end, (c + 1) * ch) - o
                per[c % n] += step
                o += step
        return per

    def snapshot(self, label):
        """The map, the extents, and every member's allocated bytes against
        its share of what is in use."""
        size = self.size()
        st = self.status()
        amap = st.get("allocation_map") or {}
        ext = self.extents(size)
        devs = self.config_members()
        sh = self.shares(ext, len(devs))
        mem = []
        for role, dev in enumerate(devs):
            m = self.by_dev(dev)
            al = allocated(m["file"])
            mem.append({"role": role, "dev": dev, "file": os.path.basename(m["file"]),
                        "allocated": al, "share": sh[role], "ratio": ratio(al, sh[role])})
        in_use = sum(x[1] for x in ext if x[2])
        snap = {"label": label, "size": size, "map": amap,
                "in_use_by_block_status": in_use, "extents": len(ext), "members": mem}
        log("  [%s] %s: size %s, map %s in use (block status %s, %d extents); allocated/share: %s"
            % (self.vname, label, fmt_size(size), mib(amap.get("bytes_in_use")), mib(in_use), len(ext),
               ", ".join("%d:%s/%s" % (x["role"], mib(x["allocated"]), mib(x["share"])) for x in mem)))
        return snap

    # ------------------------------------------------------------ the moves
    def move(self, args, key, label):
        """nbdstripe ARGS (--wait), the job's status under KEY sampled every
        0.1 s; its time, what it moved and what the devices of this
        volume's set did meanwhile."""
        devs = [self.members[i] for i in self.sets[self.vname]]
        devs = [m for m in devs if m["tdev"]]        # block devices: their counters
        io0 = {m["tdev"]: dev_io(m["tdev"]) for m in devs}
        samples = []
        stop = threading.Event()
        t0 = time.monotonic()

        def sampler():
            while not stop.is_set():
                try:
                    st = self.status().get(key)
                except (OSError, ValueError, BenchError):
                    st = None
                if st and st.get("state"):
                    samples.append([round(time.monotonic() - t0, 3), st.get("bytes_copied", 0),
                                    st.get("bytes_free", 0), st.get("state")])
                stop.wait(0.1)
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        try:
            rc, out, err, w = self.watched([self.a.nbdstripe] + args, server_pid=self.pid)
        finally:
            stop.set()
            th.join()
        wall = time.monotonic() - t0
        self.save_log("%s-%s" % (self.vname, label), "$ nbdstripe %s\n%s%s" % (" ".join(args), out, err))
        st = self.status().get(key) or {}
        if rc != 0 or st.get("state") != "done":
            raise BenchError("%s: nbdstripe %s did not complete (exit %d): %s %s"
                             % (self.vname, " ".join(args), rc, (err or out).strip()[-500:], st))
        io = {}
        for m in devs:
            d = [b - a for a, b in zip(io0[m["tdev"]], dev_io(m["tdev"]))]
            if any(d):
                io[os.path.basename(m["file"])] = {"read": d[0], "written": d[1], "discarded": d[2]}
        secs = st["elapsed_seconds"]
        moved = st["bytes_total"] - st.get("bytes_free", 0)
        on_free, on_used = split_time(samples)
        r = {"command": "nbdstripe " + " ".join(args), "elapsed_s": secs, "command_wall_s": wall,
             "bytes_total": st["bytes_total"], "bytes_free": st.get("bytes_free", 0),
             "bytes_copied": moved, "copied_mbps": moved / secs / MB if secs else None,
             "size_from": st.get("size_from"), "size_to": st.get("size_to"),
             "device_io": io, "device_written": sum(v["written"] for v in io.values()),
             "device_read": sum(v["read"] for v in io.values()),
             "device_discarded": sum(v["discarded"] for v in io.values()),
             "sampled_s_on_free": on_free, "sampled_s_on_used": on_used,
             "zero_mbps": st.get("bytes_free", 0) / on_free / MB if on_free else None,
             "elapsed_less_free_s": max(0.0, secs - on_free),
             "progress": samples,
             "progress_columns": ["seconds since the command started", "bytes_copied (free included)",
                                  "bytes_free", "state"],
             "other_user_cores": w["other_user_cores"], "noisy": w["noisy"],
             "server_cpu_s": w.get("server_cpu_s")}
        log("  [%s] %s: %.2f s (command %.2f s): %s of %s free (zeroed, %.1f s of the samples), %s "
            "copied (%.1f s); devices read %s, wrote %s (write-zeroes included), discarded %s%s"
            % (self.vname, label, secs, wall, mib(r["bytes_free"]), mib(r["bytes_total"]), on_free,
               mib(moved), on_used,
               mib(r["device_read"]), mib(r["device_written"]), mib(r["device_discarded"]),
               "  noisy (other %.2f CPUs)" % w["other_user_cores"] if w["noisy"] else ""))
        return r

    # ------------------------------------------------------------ the kernel's view
    def fs_attach(self, readonly):
        """The served volume as a file (nbdfuse) and a loop device over it."""
        self.nfs += 1
        tag = "%s-%d" % (self.vname, self.nfs)
        fuse = os.path.join(self.sock_dir, "fuse-" + tag)
        os.makedirs(fuse)
        pidfile = os.path.join(self.sock_dir, "nbdfuse-%s.pid" % tag)
        logf = open(os.path.join(self.a.out, "logs", "nbdfuse-%s.log" % tag), "w")
        p = subprocess.Popen(["nbdfuse"] + (["-r"] if readonly else []) +
                             ["-P", pidfile, os.path.join(fuse, "volume"), self.uri],
                             stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        self.fs = {"fuse": fuse, "proc": p, "loop": None, "mnt": None, "fuse_mounted": False}
        deadline = time.monotonic() + 60
        while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
            if p.poll() is not None or time.monotonic() > deadline:
                raise BenchError("nbdfuse did not mount the volume (see logs/nbdfuse-%s.log)" % tag)
            time.sleep(0.05)
        self.fs["fuse_mounted"] = True
        r = run(["losetup", "--find", "--show"] + (["--read-only"] if readonly else []) +
                [os.path.join(fuse, "volume")])
        self.fs["loop"] = r.stdout.strip()
        return self.fs["loop"]

    def fs_mount(self, options):
        mnt = os.path.join(self.sock_dir, "mnt-%s-%d" % (self.vname, self.nfs))
        os.makedirs(mnt, exist_ok=True)
        run(["mount", "-t", "ext4", "-o", options, self.fs["loop"], mnt])
        self.fs["mnt"] = mnt
        return mnt

    def fs_detach(self):
        """Unmount, detach the loop device, unmount nbdfuse (also on failure)."""
        fs, self.fs = self.fs, {}
        if not fs:
            return
        if fs.get("mnt"):
            if run(["umount", fs["mnt"]], check=False).returncode != 0:
                run(["umount", "-l", fs["mnt"]], check=False)
        if fs.get("loop"):
            for _ in range(50):
                if run(["losetup", "-d", fs["loop"]], check=False).returncode == 0:
                    break
                time.sleep(0.1)
        if fs.get("fuse_mounted"):
            # The loop device lets go of the FUSE file asynchronously:
            # umount may be busy for a while.
            for _ in range(600):
                r = run(["umount", fs["fuse"]], check=False)
                if r.returncode == 0 or "busy" not in r.stderr.lower():
                    break
                time.sleep(0.1)
            else:
                run(["umount", "-l", fs["fuse"]], check=False)
        p = fs.get("proc")
        if p and p.poll() is None:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def timed(self, steps, name, cmd):
        t0 = time.monotonic()
        r = run(cmd, check=False)
        secs = time.monotonic() - t0
        self.save_log("%s-%s" % (self.vname, name), "$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        if r.returncode != 0:
            raise BenchError("%s: %s failed: %s" % (self.vname, " ".join(cmd), r.stderr.strip()[-300:]))
        st = self.status().get("allocation_map") or {}
        steps.append({"step": name, "command": " ".join(cmd), "seconds": round(secs, 3),
                      "map_in_use_after": st.get("bytes_in_use"), "output": r.stdout.strip()[-300:]})
        log("  [%s] %s: %.1f s, map then %s in use" % (self.vname, name, secs, mib(st.get("bytes_in_use"))))
        return r

    def fill_fs(self, size):
        """A: discard, mkfs, files to --fill of the volume, fstrim."""
        a = self.a
        steps = []
        st = self.status().get("allocation_map") or {}
        steps.append({"step": "created", "map_in_use_after": st.get("bytes_in_use")})
        loop = self.fs_attach(False)
        self.timed(steps, "blkdiscard", ["blkdiscard", "-f", loop])
        self.timed(steps, "mkfs", ["mkfs.ext4", "-F", "-q", "-E", "discard", loop])
        # noinit_itable: no lazy inode-table zeroing in the background
        # (it would write while the map is measured)
        mnt = self.fs_mount("noinit_itable")
        want = int(size * a.fill)
        rnd = random.Random(20261207)
        files, total, t0 = {}, 0, time.monotonic()
        while total < want:
            n = min(rnd.choice(FILE_SIZES), want - total)
            rel = "d%02d/f%04d" % (len(files) // 100, len(files))
            os.makedirs(os.path.join(mnt, os.path.dirname(rel)), exist_ok=True)
            h = hashlib.sha256()
            with open(os.path.join(mnt, rel), "wb") as f:
                left = n
                while left:
                    b = os.urandom(min(left, 1 << 20))
                    f.write(b)
                    h.update(b)
                    left -= len(b)
            files[rel] = h.hexdigest()
            total += n
        os.sync()
        st = self.status().get("allocation_map") or {}
        steps.append({"step": "files", "seconds": round(time.monotonic() - t0, 3), "files": len(files),
                      "bytes": total, "map_in_use_after": st.get("bytes_in_use")})
        log("  [%s] %d files, %s, written and synced in %.1f s; map then %s in use"
            % (self.vname, len(files), mib(total), time.monotonic() - t0, mib(st.get("bytes_in_use"))))
        r = self.timed(steps, "fstrim", ["fstrim", "-v", mnt])
        m = re.search(r"\((\d+) bytes\) trimmed", r.stdout)
        vfs = os.statvfs(mnt)
        fs_used = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
        self.fs_detach()
        st = self.status().get("allocation_map") or {}
        steps.append({"step": "unmounted", "map_in_use_after": st.get("bytes_in_use")})
        self.files_sha = files
        return {"how": "nbdfuse + loop device; blkdiscard; mkfs.ext4 -E discard; mount -o noinit_itable; "
                       "files of random bytes; sync; fstrim; umount",
                "target_bytes": want, "files": len(files), "file_bytes": total,
                "fs_used_bytes": fs_used, "fstrim_bytes": int(m.group(1)) if m else None,
                "steps": steps}

    def verify_fs(self):
        """A's files read back through the kernel (read-only) against their SHA-256."""
        t0 = time.monotonic()
        self.fs_attach(True)
        mnt = self.fs_mount("ro,noload")
        bad = []
        for rel, want in sorted(self.files_sha.items()):
            h = hashlib.sha256()
            try:
                with open(os.path.join(mnt, rel), "rb") as f:
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
            except OSError as e:
                bad.append("%s: %s" % (rel, e))
                continue
            if h.hexdigest() != want:
                bad.append("%s: different bytes" % rel)
        self.fs_detach()
        r = {"how": "mounted read-only (nbdfuse, loop, ext4 ro,noload), every file's SHA-256",
             "files": len(self.files_sha), "bad": bad[:20], "bad_count": len(bad), "ok": not bad,
             "seconds": round(time.monotonic() - t0, 2)}
        log("  [%s] data check: %d files, %s" % (
            self.vname, len(self.files_sha),
            "all identical" if not bad else "%d BAD: %s" % (len(bad), bad[:3])))
        return r

    def fio_fill(self, size, verify_only=False):
        """B: every byte written (1M QD8, crc32c verify headers), or, with
        verify_only, read back and checked."""
        cmd = ["fio", "--thread", "--name=fill", "--ioengine=nbd", "--uri=" + self.uri, "--rw=write",
               "--bs=1M", "--iodepth=8", "--size=%d" % size, "--verify=crc32c",
               "--verify_state_save=0", "--output-format=json"]
        cmd += ["--verify_only=1"] if verify_only else ["--do_verify=0"]
        t0 = time.monotonic()
        rc, out, err, w = self.watched(cmd, server_pid=self.pid)
        secs = time.monotonic() - t0
        self.save_log("%s-%s" % (self.vname, "verify" if verify_only else "fill"),
                      "$ %s\n%s%s" % (" ".join(cmd), out, err))
        try:
            job = json.loads(out[out.index("{"):])["jobs"][0]
        except (ValueError, KeyError, IndexError):
            job = {}
        if verify_only:
            r = {"how": "fio --verify=crc32c --verify_only=1 over the bytes written",
                 "bytes": size, "seconds": round(secs, 2), "ok": rc == 0 and job.get("error", 1) == 0,
                 "error": err.strip()[-300:] if rc else None}
            log("  [%s] data check: %s in %.1f s: %s" % (
                self.vname, mib(size), secs,
                "all verified" if r["ok"] else "FAILED: " + err.strip()[-200:]))
            return r
        if rc != 0:
            raise BenchError("fio (fill) failed: %s" % err.strip()[-500:])
        wrote = job.get("write", {}).get("io_bytes")
        if wrote != size:
            raise BenchError("fio wrote %s bytes of the %d-byte volume" % (wrote, size))
        st = self.status().get("allocation_map") or {}
        log("  [%s] fio wrote every byte (%s) in %.1f s; map then %s in use"
            % (self.vname, mib(size), secs, mib(st.get("bytes_in_use"))))
        return {"how": "fio nbd engine, sequential write 1M QD8 of every byte (crc32c verify headers)",
                "bytes": size, "seconds": round(secs, 2), "map_in_use_after": st.get("bytes_in_use")}

    # ------------------------------------------------------------ one volume
    def one_volume(self, name):
        a = self.a
        self.use_volume(name)
        s = self.sets[name]
        dev = lambda role: self.members[s[role]]["dev"]
        base = lambda role: os.path.basename(self.members[s[role]]["file"])
        print("\n== volume %s: members %s; replace onto %s, grow onto %s, after the shrink onto %s"
              % (name, ", ".join(base(i) for i in range(WIDTH)), base(NEW_REPLACE), base(NEW_GROW),
                 base(NEW_REGROW)))
        sys.stdout.flush()
        v = {"name": name, "members_files": [os.path.basename(self.members[i]["file"]) for i in s]}
        v["created"] = self.create_volume()
        self.serve()
        size0 = self.size()
        v["size"] = size0
        v["fill"] = self.fill_fs(size0) if name == "sparse" else self.fio_fill(size0)
        v["filled"] = self.snapshot("filled")

        v["replace"] = self.move(["replace", "--wait", "--force", self.cfg, str(REPLACED), dev(NEW_REPLACE)],
                                 "replace", "replace")
        v["replaced"] = self.snapshot("replaced")
        if self.config_members()[REPLACED] != dev(NEW_REPLACE):
            raise BenchError("%s: after the replace the config's member %d is not %s"
                             % (name, REPLACED, dev(NEW_REPLACE)))
        new = v["replaced"]["members"][REPLACED]
        v["replace_new_member"] = {"file": new["file"], "allocated": new["allocated"],
                                   "data_held": new["share"], "ratio": new["ratio"]}

        v["grow"] = self.move(["grow", "--wait", "--force", self.cfg, dev(NEW_GROW)], "reshape", "grow")
        v["grown"] = self.snapshot("grown")

        removed = self.config_members()[a.shrink_index]
        args = ["shrink", "--wait", self.cfg, str(a.shrink_index), "--size", str(size0)]
        try:
            v["shrink"] = self.move(args, "reshape", "shrink")
        except BenchError as e:
            # the map says the room beyond size0 holds data: --force
            log("  [%s] shrink refused (%s); again with --force" % (name, e))
            v["shrink_refused"] = str(e)
            v["shrink"] = self.move(args[:2] + ["--force"] + args[2:], "reshape", "shrink")
        v["shrunk"] = self.snapshot("shrunk")
        v["shrink_removed"] = {"file": os.path.basename(self.by_dev(removed)["file"]),
                               "allocated": allocated(self.by_dev(removed)["file"])}
        self.serve()                      # before the next grow or shrink (README)
        v["regrow"] = self.move(["grow", "--wait", "--force", self.cfg, dev(NEW_REGROW)], "reshape", "regrow")
        v["regrown"] = self.snapshot("regrown")

        if not a.no_verify:
            v["verify"] = self.verify_fs() if name == "sparse" else self.fio_fill(size0, verify_only=True)
        self.stop_server("volume")
        return v

    # ------------------------------------------------------------ main
    def main(self):
        a = self.a
        t_start = time.time()
        load_before = open("/proc/loadavg").read().split()[:3]
        for tool in ("nbdfuse", "nbdinfo", "mkfs.ext4", "fstrim", "blkdiscard", "mount"):
            if not shutil.which(tool):
                raise BenchError("%s not found" % tool)
        if not os.path.exists("/dev/fuse"):
            raise BenchError("no /dev/fuse")
        notes = []
        src = run(["git", "-C", REPO, "describe", "--always", "--dirty", "--abbrev=12"], check=False)
        if src.returncode == 0 and src.stdout.strip():
            notes.append("source tree: git commit %s" % src.stdout.strip())
        log("== setting up %d emulated members over sparse files (2 sets of %d), %s each"
            % (2 * PER_SET, PER_SET, fmt_size(a.member_size)))
        self.setup_sparse(2 * PER_SET)
        # the calibration writes to member 0: the full volume's, written in full anyway
        self.sets = {"full": list(range(PER_SET)), "sparse": list(range(PER_SET, 2 * PER_SET))}
        log("== calibration (member file 0: the full volume's)")
        if a.emulation == "nbd":
            cal, limits = self.calibrate_nbd(), None
        else:
            cal = self.calibrate()
            limits = {"outer": self.queue_limits(self.members[0]["dev"]),
                      "inner": self.queue_limits(self.members[0]["tdev"])}
            log("  discard/write-zeroes limits: served loop %s; throttled loop %s"
                % (limits["outer"], limits["inner"]))
        vols = {}
        for name in ("sparse", "full"):
            vols[name] = self.one_volume(name)
        A, B = vols["sparse"], vols["full"]

        targets = []
        for step, what in (("replace", "replace of member 1"), ("grow", "grow 4 -> 5")):
            r = ratio(A[step]["elapsed_s"], B[step]["elapsed_s"])
            targets.append({"target": "sparse volume's %s <= %.1f x the full one's time"
                                      % (what, TIME_TARGET),
                            "step": step, "measured": r, "threshold": TIME_TARGET,
                            "met": r is not None and r <= TIME_TARGET,
                            "sparse_s": A[step]["elapsed_s"], "full_s": B[step]["elapsed_s"]})
        nm = A["replace_new_member"]
        targets.append({"target": "sparse volume: the replace's new member allocated <= %.1f x the data "
                                  "in use it holds" % ALLOC_TARGET,
                        "measured": nm["ratio"], "threshold": ALLOC_TARGET,
                        "met": nm["ratio"] is not None and nm["ratio"] <= ALLOC_TARGET,
                        "allocated": nm["allocated"], "data_held": nm["data_held"]})
        worst = max((m for m in A["regrown"]["members"]), key=lambda m: m["ratio"] or 0)
        targets.append({"target": "sparse volume after the shrink and the grow: every member allocated "
                                  "<= %.1f x its share of the data in use" % ALLOC_TARGET,
                        "measured": worst["ratio"], "threshold": ALLOC_TARGET,
                        "met": all(m["ratio"] is not None and m["ratio"] <= ALLOC_TARGET
                                   for m in A["regrown"]["members"]),
                        "worst_member": worst["file"],
                        "members": [[m["file"], m["allocated"], m["share"], m["ratio"]]
                                    for m in A["regrown"]["members"]]})
        for name, v in vols.items():
            if v.get("verify") and not v["verify"]["ok"]:
                notes.append("%s volume: the data check FAILED: %s" % (name, v["verify"]))
            if v.get("shrink_refused"):
                notes.append("%s volume: the shrink to %d bytes was refused without --force: %s"
                             % (name, v["size"], v["shrink_refused"]))
        zeroed = A["replace"]["bytes_free"]
        if a.emulation == "nbd":
            notes.append("members: nbdkit file servers behind the rate filter, which counts reads "
                         "and writes only; their CPU is counted as other processes' (noisy marks). "
                         "Block status through NBD members reports the member files' holes too, so "
                         "a member's share is of the bytes block status calls data, which can be "
                         "less than the map's regions in use (see each snapshot's map)")
        elif a.loop_stack == 1 and B["replace"]["elapsed_s"]:
            notes.append(
                "members: single throttled loop devices (--loop-stack 1), which the plugin zeroes "
                "with discards (charged one sector each). The full volume's replace copied %s in "
                "%.1f s, %.0f MB/s against a write limit of %d MB/s: a bio the loop device splits is "
                "throttled at about half the rate (bench/README.md, pitfalls; why stripe-bench stacks "
                "two loop devices), for both volumes alike"
                % (mib(B["replace"]["device_written"]), B["replace"]["elapsed_s"],
                   B["replace"]["device_written"] / B["replace"]["elapsed_s"] / MB, a.mbps))
        elif zeroed and A["replace"]["device_written"] >= 0.5 * zeroed:
            notes.append(
                "the sparse volume's replace zeroed %s of free regions and the devices counted %s "
                "written meanwhile: on a block device the plugin's zero that may trim is a "
                "fallocate(PUNCH_HOLE) that the kernel issues as WRITE_ZEROES, and cgroup block "
                "throttling charges a WRITE_ZEROES bio its full length against the write bps limit "
                "(only a DISCARD is charged as one sector), so every zeroed byte costs the emulated "
                "member as much time as a written one, though the loop device only punches a hole. "
                "A drive that deallocates on write-zeroes does it far faster than it writes (one that "
                "cannot would be as slow as here): on this emulation the time targets measure the "
                "throttle, not the copy saved (--emulation nbd: members whose zeroing is free). The "
                "sparse volume's moves zeroed at %s MB/s (bytes_free over the sampled seconds spent "
                "on free regions; the write limit is %d MB/s a device: a replace zeroes one member, "
                "a grow or shrink every one); less those seconds, the replace took %.2f s "
                "(%.2f x the full one's) and the grow %.2f s (%.2f x): derived, not measured."
                % (mib(zeroed), mib(A["replace"]["device_written"]),
                   "/".join("%.0f" % A[k]["zero_mbps"] for k in ("replace", "grow", "shrink", "regrow")
                            if A[k]["zero_mbps"]), a.mbps,
                   A["replace"]["elapsed_less_free_s"],
                   A["replace"]["elapsed_less_free_s"] / B["replace"]["elapsed_s"],
                   A["grow"]["elapsed_less_free_s"],
                   A["grow"]["elapsed_less_free_s"] / B["grow"]["elapsed_s"]))
        doc = {
            "tool": "nbdstripe sparse-moves",
            **run_header(t_start, load_before),
            "parameters": {"quick": a.quick, "emulation": a.emulation,
                           "loop_stack": a.loop_stack if a.emulation == "loop" else None,
                           "mbps": a.mbps, "iops": a.iops,
                           "member_size": a.member_size,
                           "chunk": a.chunk, "fill": a.fill, "shrink_index": a.shrink_index,
                           "verify": not a.no_verify, "noise_threshold_cores": a.noise_threshold,
                           "plugin": a.plugin, "nbdstripe": a.nbdstripe},
            "members": {"method": (("loop device (--direct-io=on) over its own SPARSE file, behind a second "
                                    "direct-I/O loop device; cgroup %s block throttling" if a.loop_stack == 2 else
                                    "loop device (--direct-io=on) over its own SPARSE file; cgroup %s block "
                                    "throttling on it") % self.throttle.kind)
                        if self.throttle else
                        "nbdkit file plugin over its own SPARSE file, behind the rate filter (reads "
                        "and writes counted, zero and trim free) and the nozero filter "
                        "(zeromode=plugin fastzeromode=ignore: fast zero advertised), Unix socket",
                        "devices": [m["dev"] for m in self.members],
                        "files": [m["file"] for m in self.members],
                        "queue_limits": limits,
                        "volume": {"metadata": "nbdstripe", "cache": "direct", "chunk": a.chunk,
                                   "server": "nbdkit %s config=FILE" % os.path.basename(a.plugin)},
                        "calibration": cal},
            "volumes": vols,
            "targets": targets,
            "notes": notes,
        }
        return write_outputs(a.out, doc, summary(doc), t_start)

    def cleanup(self):
        try:
            self.fs_detach()
        except Exception as e:  # keep cleaning
            log("warning: taking the file system down: %s" % e)
        super().cleanup()


def split_time(samples):
    """Of the sampled time of a move, the seconds in which it went over
    free regions (bytes_free grew more than the bytes copied) and over
    regions in use: where its time goes."""
    on_free = on_used = 0.0
    for (t0, c0, f0, _), (t1, c1, f1, _) in zip(samples, samples[1:]):
        dfree, dused = f1 - f0, (c1 - f1) - (c0 - f0)
        if dfree > dused:
            on_free += t1 - t0
        elif dused > 0:
            on_used += t1 - t0
    return round(on_free, 2), round(on_used, 2)


def find_key(doc, key):
    """The first object in doc (JSON) that has key."""
    if isinstance(doc, dict):
        if key in doc:
            return doc
        doc = list(doc.values())
    if isinstance(doc, list):
        for x in doc:
            r = find_key(x, key)
            if r:
                return r
    return None


def mib(n):
    return "-" if n is None else "%.1fMiB" % (n / (1 << 20))


def summary(doc):
    p, A, B = doc["parameters"], doc["volumes"]["sparse"], doc["volumes"]["full"]
    f2 = lambda v: "-" if v is None else "%.2f" % v
    L = ["Command: `%s`  " % doc["command"],
         "Date: %s; %s, %d CPUs; load before %s, after %s; %.0f s  " % (
             doc["date"], doc["machine"]["kernel"], doc["machine"]["cpus"],
             doc["machine"]["loadavg_before"], doc["machine"]["loadavg_after"], doc["duration_s"]),
         "Members: %d emulated (%s), %d MB/s and %s IOPS each way, %s each; two volumes of %d members "
         "(%s), chunk %s, nbdstripe headers, cache direct  " % (
             len(doc["members"]["devices"]), doc["members"]["method"], p["mbps"],
             "no limit of" if p.get("emulation") == "nbd" else "%d" % p["iops"],
             fmt_size(p["member_size"]), WIDTH, mib(A["size"]), fmt_size(p["chunk"])),
         ""]
    fa = A["fill"]
    L.append("**sparse**: ext4 through the kernel (%s): %d files, %s (%.0f %% of the volume); the file "
             "system used %s; fstrim trimmed %s. Map in use after each step: %s.  " % (
                 fa["how"], fa["files"], mib(fa["file_bytes"]), 100.0 * fa["file_bytes"] / A["size"],
                 mib(fa["fs_used_bytes"]), mib(fa["fstrim_bytes"]),
                 ", ".join("%s %s" % (s["step"], mib(s.get("map_in_use_after"))) for s in fa["steps"])))
    L.append("**full**: %s in %.1f s; map in use %s." % (B["fill"]["how"], B["fill"]["seconds"],
                                                       mib(B["fill"]["map_in_use_after"])))
    L.append("")
    L.append("| move (`--wait`, no client) | sparse s | full s | sparse / full | target | met "
             "| sparse: copied / zeroed | sparse: s on copied / zeroed | sparse: devices wrote "
             "| full: copied / zeroed | full: devices wrote |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    tmap = {t["step"]: t for t in doc["targets"] if t.get("step")}
    dw = (lambda m: "-") if p.get("emulation") == "nbd" else (lambda m: mib(m["device_written"]))
    for key, label in (("replace", "replace of member 1"), ("grow", "grow 4 -> 5"),
                       ("shrink", "shrink 5 -> 4 (member %d out)" % p["shrink_index"]),
                       ("regrow", "grow 4 -> 5 again")):
        a, b = A[key], B[key]
        t = tmap.get(key)
        L.append("| %s | %.2f%s | %.2f%s | %s | %s | %s | %s / %s | %.1f / %.1f | %s | %s / %s | %s |" % (
            label, a["elapsed_s"], " (noisy)" if a["noisy"] else "", b["elapsed_s"],
            " (noisy)" if b["noisy"] else "", f2(ratio(a["elapsed_s"], b["elapsed_s"])),
            "<= %.1f" % TIME_TARGET if t else "-", ("yes" if t["met"] else "**NO**") if t else "-",
            mib(a["bytes_copied"]), mib(a["bytes_free"]), a["sampled_s_on_used"], a["sampled_s_on_free"],
            dw(a), mib(b["bytes_copied"]), mib(b["bytes_free"]), dw(b)))
    L.append("")
    L.append("(\"s on copied / zeroed\": the status sampled every 0.1 s, each interval counted where "
             "bytes_free or the bytes copied grew more; \"devices wrote\": bytes the volume's "
             "throttled devices counted as written during the move, a WRITE_ZEROES included.)")
    L.append("")
    L.append("Allocated bytes of each member's file (st_blocks x 512) against its share of the bytes in "
             "use (the map's regions in use, by NBD block status, put on members by the layout):\n")
    L.append("| volume | after | %s |" % " | ".join("member %d" % i for i in range(WIDTH + 1)))
    L.append("|---|---|%s" % ("---|" * (WIDTH + 1)))
    for v in (A, B):
        for k in ("filled", "replaced", "grown", "shrunk", "regrown"):
            cells = ["%s: %s / %s (%s)" % (m["file"].replace(".img", ""), mib(m["allocated"]),
                                           mib(m["share"]), f2(m["ratio"])) for m in v[k]["members"]]
            cells += ["-"] * (WIDTH + 1 - len(cells))
            L.append("| %s | %s | %s |" % (v["name"], k, " | ".join(cells)))
    L.append("")
    L.append("| target | measured | threshold | met |")
    L.append("|---|---|---|---|")
    for t in doc["targets"]:
        L.append("| %s | %s | %.1f | %s |" % (t["target"], f2(t["measured"]), t["threshold"],
                                              "yes" if t["met"] else "**NO**"))
    for v in (A, B):
        if v.get("verify"):
            L.append("\n%s volume's data after the moves: %s (%s)." % (
                v["name"], "**FAILED**" if not v["verify"]["ok"] else "identical", v["verify"]["how"]))
    for n in doc["notes"]:
        L.append("\nNote: " + n)
    return "\n".join(L) + "\n"


def main(argv):
    return run_main("sparse-moves", SparseBench, parse_args(argv))
