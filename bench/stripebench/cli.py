# SPDX-License-Identifier: BSD-3-Clause
"""The command line: options, defaults that depend on the mode, --replot,
signals and cleanup."""

import argparse
import datetime
import glob
import json
import os
import shutil
import signal

from . import charts, results
from .profiles import FSYNC_JOBS, FSYNC_PROFILE, PROFILE_NAMES, RAM_PROFILE
from .runner import Bench
from .scrub import SCRUB_DEFAULT_RATE
from .util import BenchError, log, parse_size

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # bench/
REPO = os.path.dirname(BENCH)
PUBLISHED = os.path.join(BENCH, "results")

DESCRIPTION = """\
stripe-bench: CrystalDiskMark-style profiles through fio's nbd engine
against (a) one member through the stripe plugin (N = 1), (b) the same member
through nbdkit's file plugin (remote members: nbdkit's nbd plugin), (c) the
striped volume with N = 2, 4 (8) members.  Members are emulated independent
SSDs (loop devices throttled by the kernel's block throttling), real drives
(--members) or emulated remote NBD servers (--remote: nbdkit memory servers
behind the rate and delay filters); or files in RAM (--ram), where the request
path itself is measured against the file plugin's."""

EPILOG = """\
examples:
  # emulated members (root): N = 1, 2, 4 at 150 MB/s and 2500 IOPS per member
  bench/stripe-bench --plugin build/plugin/nbdkit-stripe-plugin.so
  # also N = 8 (per-member defaults become 600/N MB/s and 10000/N IOPS)
  bench/stripe-bench --counts 1,2,4,8
  # chunk-size sweep at the largest N
  bench/stripe-bench --chunks 64K,128K,256K,512K,1M
  # CI: seconds per profile, N = 1 and 2 (~2 min quiet, 6 on a busy machine)
  bench/stripe-bench --quick --counts 1,2 --out /tmp/sb
  # remote members: nbdkit servers at 100 MB/s each way and 4 ms per request
  bench/stripe-bench --remote
  bench/stripe-bench --remote --mbps 50 --delay-ms 2 --transport tcp
  bench/stripe-bench --remote --quick --counts 1,2             # ~2 min quiet, 6 busy; no root
  # real drives: read-only unless --destroy-data is given
  bench/stripe-bench --members /dev/nvme0n1,/dev/nvme1n1
  bench/stripe-bench --members /dev/sdb,/dev/sdc --destroy-data --cache-size 20G
  # the fsync profile: 4 jobs x 4K random write + flush, member files on
  # the machine's disk, a 256M volume at N = 1, 4, 16, 64 beside the file plugin
  bench/stripe-bench --fsync --repeat 3
  # the same on independent emulated drives (files in RAM, a 1 ms cache flush)
  bench/stripe-bench --fsync --flush-us 1000 --repeat 3
  # RAM members: member files in /dev/shm, RND4K Q32 at N = 1, 4 beside the
  # file plugin on one file there (no disk: the request path's own cost)
  bench/stripe-bench --ram --repeat 3
  # the cost of a scrub at its default rate: the same run with one going
  bench/stripe-bench --profiles RND4K-Q32T1,SEQ1M-Q8T1 --repeat 3 --scrub-during
  # redraw the charts of a run from its results.json, running nothing
  bench/stripe-bench --replot bench/results/local/results.json
  bench/stripe-bench --replot            # every published run in bench/results/

outputs (in --out): results.json (schema: bench/results.schema.json, check with
bench/validate-results), results.csv, summary.md, charts/*.png, logs/.
Units: MB/s = 10^6 bytes/s; latencies in microseconds; sizes accept K/M/G (1024).
Exit status: 0 ok, 1 error, 2 usage, 3 with --strict: most result rows noisy
(outputs written, marked NOT PUBLISHABLE), 130 interrupted.
"""


def default_plugin():
    for p in (os.environ.get("NBDSTRIPE_PLUGIN"),
              os.path.join(REPO, "build", "plugin", "nbdkit-stripe-plugin.so")):
        if p and os.path.exists(p):
            return p
    return None


def default_tool(env, rel):
    for p in (os.environ.get(env), os.path.join(REPO, "build", rel)):
        if p and os.path.exists(p):
            return p
    return None


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="stripe-bench", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", default=default_plugin(),
                    help="nbdkit-stripe-plugin.so (default: $NBDSTRIPE_PLUGIN, else build/plugin/)")
    ap.add_argument("--out", help="output directory (default: bench/out/YYYYmmdd-HHMMSS)")
    ap.add_argument("--counts",
                    help="member counts N to measure, must include 1 (default 1,2,4; add 8 when wanted; "
                         "--fsync: 1,4,16,64)")
    ap.add_argument("--chunk", type=parse_size,
                    help="chunk of the main runs (default 128K; --fsync: 64K)")
    ap.add_argument("--chunks", help="chunk-size sweep at the largest N, e.g. 64K,128K,256K,512K,1M")
    ap.add_argument("--profiles",
                    help="comma list of profiles (default: all: %s; --ram: %s)"
                    % (",".join(PROFILE_NAMES), RAM_PROFILE))
    ap.add_argument("--rw", default="read,write", help="read,write (default both)")
    ap.add_argument("--ramp", type=float, help="ramp seconds, not measured (default 2; quick 0.5)")
    ap.add_argument("--runtime", type=float, help="measured seconds per run (default 10; quick 1.5)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="repeat the whole matrix; results are medians (default 1)")
    ap.add_argument("--noise-threshold", type=float, default=0.15,
                    help="a run is noisy when other processes used more than this many CPUs "
                         "of user time during it or in the --load-sample before it (default 0.15)")
    ap.add_argument("--noisy-retries", type=int, default=2,
                    help="re-run a noisy run up to this many times, keep the quietest (default 2)")
    ap.add_argument("--load-sample", type=float, default=0.25, metavar="S",
                    help="before every run, sample for S seconds the CPU other processes use "
                         "while the harness is idle (/proc/stat); above --noise-threshold the run "
                         "is noisy too (default 0.25; 0: no sample)")
    ap.add_argument("--strict", action="store_true",
                    help="exit %d when most result rows are noisy (not publishable); without it "
                         "the verdict is printed and the exit status is 0" % results.EXIT_NOT_PUBLISHABLE)
    ap.add_argument("--replot", nargs="?", const="", metavar="RESULTS.json",
                    help="run nothing: redraw the charts and summary.md of RESULTS.json beside "
                         "it (or into --out) and judge its noise again; without RESULTS.json, "
                         "of every published run (bench/results/*/results.json)")
    ap.add_argument("--quick", action="store_true",
                    help="CI mode: short runs, small members, small sustained write, no sweep unless --chunks")
    g = ap.add_argument_group("emulated members (default; needs root)")
    g.add_argument("--mbps", type=int, help="per-member MB/s each way (default 150; 600/N above 4 members; "
                                            "--remote: 100, 400/N above 4 members)")
    g.add_argument("--iops", type=int, help="per-member IOPS each way (default 2500; 10000/N above 4 members; "
                                            "not with --remote)")
    g.add_argument("--member-size", type=parse_size,
                   help="size of each member file (default 1G; quick 256M; --remote: 512M, quick 128M, in RAM)")
    g.add_argument("--workdir",
                   help="where the member files go (default /var/tmp/nbdstripe-bench-PID; "
                        "--ram: RAM-DIR/nbdstripe-bench-PID)")
    g.add_argument("--keep-files", action="store_true", help="do not delete the member files at exit")
    g.add_argument("--loop-stack", type=int, choices=(1, 2), default=2,
                   help="2 (default): member = loop over loop over file, throttled at the inner one "
                        "(so the throttle never sees split bios); 1: a single loop device")
    g = ap.add_argument_group("the fsync profile (--fsync; root not needed)")
    g.add_argument("--fsync", action="store_true",
                   help="run the fsync profile %s instead: %d fio jobs (connections), each 4K random "
                        "writes at QD1 with a flush after every write (fio --fsync=1); members are "
                        "files on the machine's disk in --workdir (not RAM, not throttled), the "
                        "volume the same size (--volume-size) whatever N; the reference is nbdkit's "
                        "file plugin on one file of that size; plugin cache=writeback unless --cache"
                        % (FSYNC_PROFILE[0], FSYNC_JOBS))
    g.add_argument("--flush-us", type=int, metavar="US",
                   help="--fsync on independent emulated drives instead of files on the one disk: "
                        "each member, and the reference's one file, is a file in RAM (--ram-dir) "
                        "served by its own nbdkit, the file plugin behind bench's flushlat filter "
                        "(build/bench/nbdkit-flushlat-filter.so): a drive whose cache flush takes US "
                        "microseconds, one at a time, requests arriving during one sharing the next "
                        "(the block layer's flush merging); the plugin reaches the members as NBD "
                        "exports over Unix sockets")
    g.add_argument("--volume-size", type=parse_size, default=256 << 20,
                   help="--fsync, --ram: the volume's size, each of N members a 1/N of it (default 256M)")
    g = ap.add_argument_group("RAM members (--ram; root not needed)")
    g.add_argument("--ram", action="store_true",
                   help="members are files in a RAM file system (--ram-dir), written once, the volume "
                        "the same size (--volume-size) whatever N; the reference is nbdkit's file plugin "
                        "on one file of that size there, at every N: no disk and no throttle, so what "
                        "is measured is the request path, the plugin's against the file plugin's; "
                        "profile %s unless --profiles, N = 1,4 unless --counts, plugin "
                        "cache=writeback (the file plugin's default) unless --cache" % RAM_PROFILE)
    g.add_argument("--ram-dir", default="/dev/shm",
                   help="--ram: a tmpfs or ramfs directory for the member files (default /dev/shm)")
    g = ap.add_argument_group("remote members (--remote; root not needed)")
    g.add_argument("--remote", action="store_true",
                   help="members are NBD servers: nbdkit memory plugin behind the rate filter "
                        "(--mbps, per server, each way) and the delay filter (--delay-ms per request); "
                        "the reference is nbdkit's nbd plugin forwarding to member 0")
    g.add_argument("--delay-ms", type=int, default=4,
                   help="remote: delay of every read and write at the member, whole ms "
                        "(the delay filter's resolution; 0 = no delay filter; default 4)")
    g.add_argument("--transport", choices=("unix", "tcp"), default="unix",
                   help="remote: members listen on a Unix socket (default) or TCP 127.0.0.1")
    g.add_argument("--burstiness", type=float, default=0.1,
                   help="remote: rate filter bucket, seconds of rate (default 0.1; nbdkit's own "
                        "default of 2 s inflates short runs)")
    g = ap.add_argument_group("real drives")
    g.add_argument("--members", help="comma list of block devices, in member order")
    g.add_argument("--destroy-data", action="store_true",
                   help="allow writes to --members (destroys their contents); without it: read-only")
    g = ap.add_argument_group("sustained write")
    g.add_argument("--no-sustained", dest="sustained", action="store_false",
                   help="skip the sustained-write run")
    g.add_argument("--cache-size", type=parse_size,
                   help="a member's write cache (emulated: full speed for this many bytes; default 256M, quick 32M)")
    g.add_argument("--slow-mbps", type=int, help="emulated write MB/s after the cache is full (default mbps/3)")
    g.add_argument("--sustained-factor", type=int, default=3,
                   help="write this many times the cache size per member (default 3)")
    g = ap.add_argument_group("background work")
    g.add_argument("--scrub-during", action="store_true",
                   help="keep a scrub (what `nbdstripe scrub` starts: its default rate, %d MiB/s in "
                        "all, yielding to clients) running on the volume through every measured run "
                        "of the stripe plugin, started again when it ends and cancelled after; the "
                        "plugin gets status= (its control socket comes with it); results.json says "
                        "so (parameters.scrub_during) and what each run's scrub read (runs[].scrub)"
                        % (SCRUB_DEFAULT_RATE >> 20))
    g = ap.add_argument_group("the volume's metadata")
    g.add_argument("--metadata", choices=("none", "nbdstripe"), default="none",
                   help="none (default): the plugin serves its members as given (file=, no header, "
                        "no allocation map); nbdstripe: a volume created afresh with nbdstripe "
                        "headers (`nbdstripe create --force`, its allocation map all in use) before "
                        "every start of the plugin, served by its config")
    g.add_argument("--nbdstripe", default=default_tool("NBDSTRIPE", "daemon/nbdstripe"),
                   help="the nbdstripe command for --metadata nbdstripe (default: $NBDSTRIPE, else "
                        "build/daemon/nbdstripe beside the plugin's build)")
    g.add_argument("--trim-first", action="store_true",
                   help="with --metadata nbdstripe: TRIM the whole volume before every write run of "
                        "the plugin, so that its writes mark free regions of the allocation map "
                        "(use --ramp 0 to measure the marking too)")
    ap.add_argument("--cache", choices=("direct", "writethrough", "writeback"),
                    help="plugin cache= mode when the plugin supports it (default direct = O_DIRECT; "
                         "--fsync: writeback, like the file plugin's default)")
    a = ap.parse_args(argv)
    if a.replot is not None:
        return a

    def fail(msg):
        ap.error(msg)
    if a.trim_first and a.metadata != "nbdstripe":
        fail("--trim-first goes with --metadata nbdstripe")
    if a.metadata == "nbdstripe":
        if a.remote or a.members:
            fail("--metadata nbdstripe writes headers on its own members: not with --remote or --members")
        if not a.nbdstripe or not os.access(a.nbdstripe, os.X_OK):
            fail("--metadata nbdstripe needs the nbdstripe command (--nbdstripe or $NBDSTRIPE)")
    if a.ram:
        if a.fsync or a.remote or a.members:
            fail("--ram makes its own members (files in RAM): not with --fsync, --remote or --members")
        a.counts = a.counts or "1,4"
        a.cache = a.cache or "writeback"
        a.profiles = a.profiles or RAM_PROFILE
        a.workdir = a.workdir or os.path.join(a.ram_dir, "nbdstripe-bench-%d" % os.getpid())
        a.sustained = False
        if a.volume_size % (4 << 10):
            fail("--volume-size must be a multiple of 4K")
    if a.fsync:
        if a.remote or a.members:
            fail("--fsync makes its own members (files on the disk): not with --remote or --members")
        a.counts = a.counts or "1,4,16,64"
        a.chunk = a.chunk or (64 << 10)
        a.cache = a.cache or "writeback"
        a.profiles = FSYNC_PROFILE[0]
        a.rw = "write"
        a.sustained = False
        if a.volume_size % (4 << 10):
            fail("--volume-size must be a multiple of 4K")
        if a.flush_us is not None:
            if a.flush_us <= 0:
                fail("--flush-us must be > 0")
            a.workdir = a.workdir or os.path.join(a.ram_dir, "nbdstripe-bench-%d" % os.getpid())
            if a.plugin:
                a.flush_filter = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.plugin))),
                                              "bench", "nbdkit-flushlat-filter.so")
                if not os.path.exists(a.flush_filter):
                    fail("--flush-us needs %s beside the plugin's build (cmake --build builds it)"
                         % a.flush_filter)
    elif a.flush_us is not None:
        fail("--flush-us goes with --fsync")
    a.counts = a.counts or "1,2,4"
    a.profiles = a.profiles or ",".join(PROFILE_NAMES)
    a.workdir = a.workdir or "/var/tmp/nbdstripe-bench-%d" % os.getpid()
    a.chunk = a.chunk or (128 << 10)
    a.cache = a.cache or "direct"
    try:
        a.counts = sorted({int(x) for x in a.counts.split(",")})
    except ValueError:
        fail("--counts: comma list of integers")
    if 1 not in a.counts or min(a.counts) < 1 or max(a.counts) > 64:
        fail("--counts must include 1 and stay within 1..64")
    a.chunks = [parse_size(x) for x in a.chunks.split(",")] if a.chunks else None
    for c in [a.chunk] + (a.chunks or []):
        if c % 4096:
            fail("chunk %d is not a multiple of 4K" % c)
    a.profiles = [p.strip() for p in a.profiles.split(",")]
    for p in a.profiles:
        if p not in PROFILE_NAMES and not (a.fsync and p == FSYNC_PROFILE[0]):
            fail("unknown profile %s" % p)
    if a.fsync or a.ram:
        for n in a.counts:
            if a.volume_size // n < a.chunk:
                fail("--%s: at N=%d a member (%d bytes) is smaller than a chunk"
                     % ("fsync" if a.fsync else "ram", n, a.volume_size // n))
    a.rw = [x.strip() for x in a.rw.split(",")]
    if any(x not in ("read", "write") for x in a.rw):
        fail("--rw: read and/or write")
    nmax = max(a.counts)
    if a.remote:
        if a.members:
            fail("--remote and --members exclude each other")
        if a.iops is not None:
            fail("--iops does not apply to --remote: a remote member's small-I/O rate follows from "
                 "--delay-ms and the requests in flight")
        if a.delay_ms < 0 or a.burstiness <= 0:
            fail("--delay-ms must be >= 0 and --burstiness > 0")
        if a.mbps is None:
            a.mbps = 100 if nmax <= 4 else max(1, 400 // nmax)
        if a.member_size is None:
            a.member_size = (128 << 20) if a.quick else (512 << 20)
        a.sustained = False          # no write cache to emulate on a remote member
    if a.ramp is None:
        a.ramp = 0.5 if a.quick else 2.0
    if a.runtime is None:
        a.runtime = 1.5 if a.quick else 10.0
    if a.mbps is None:
        a.mbps = 150 if nmax <= 4 else max(1, 600 // nmax)
    if a.iops is None:
        a.iops = 2500 if nmax <= 4 else max(1, 10000 // nmax)
    if a.member_size is None:
        a.member_size = (256 << 20) if a.quick else (1 << 30)
    if a.member_size % (4 << 20):
        fail("--member-size must be a multiple of 4M")
    if a.cache_size is None:
        a.cache_size = (32 << 20) if a.quick else (256 << 20)
    if a.slow_mbps is None:
        a.slow_mbps = max(1, a.mbps // 3)
    if a.members:
        a.members = [m.strip() for m in a.members.split(",") if m.strip()]
    elif not a.remote and a.cache_size * a.sustained_factor > a.member_size:
        fail("--cache-size x --sustained-factor exceeds --member-size")
    if not a.plugin or not os.path.exists(a.plugin):
        fail("stripe plugin not found: pass --plugin or set NBDSTRIPE_PLUGIN")
    a.plugin = os.path.abspath(a.plugin)
    if not a.out:
        a.out = os.path.join(BENCH, "out", datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    return a




def replot(path, out=None, strict=False):
    """Redraw every chart of a results.json and its summary.md; nothing is
    run.  The chart list in results.json is updated when it changes (e.g.
    charts added).  The noise verdict is judged again from the rows: with
    STRICT, a run whose rows are mostly noisy exits EXIT_NOT_PUBLISHABLE."""
    with open(path) as f:
        doc = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    out = out or base
    os.makedirs(out, exist_ok=True)
    made = charts.make_charts(doc, out)
    for c in made:
        print(os.path.join(out, c))
    if out == base and made != doc["charts"]:
        doc["charts"] = made
        results.write_json(doc, base)
    results.write_summary(doc, out)
    if not made:
        return 1
    return results.report_noise(doc, strict)


def main(argv):
    a = parse_args(argv)
    if a.replot is not None:
        paths = [a.replot] if a.replot else sorted(glob.glob(os.path.join(PUBLISHED, "*", "results.json")))
        if not paths:
            log("stripe-bench: --replot: no results.json given and none published in %s" % PUBLISHED)
            return 1
        if a.out and len(paths) > 1:
            log("stripe-bench: --replot --out takes one RESULTS.json")
            return 2
        try:
            return max(replot(p, a.out, a.strict) for p in paths)
        except (OSError, ValueError, KeyError, BenchError) as e:
            log("stripe-bench: --replot %s: %s" % (paths[0] if len(paths) == 1 else "", e))
            return 1
    for tool in ("fio", "nbdkit"):
        if not shutil.which(tool):
            log("stripe-bench: %s not found" % tool)
            return 1
    if not a.members and not a.remote and not a.fsync and not a.ram and os.geteuid() != 0:
        log("stripe-bench: emulated members need root (loop devices, cgroup throttling); "
            "cannot throttle, so scaling cannot be measured. Use --members for real drives.")
        return 1
    if a.members and a.destroy_data:
        log("stripe-bench: --destroy-data: %s will be OVERWRITTEN" % ", ".join(a.members))
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    b = Bench(a)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return b.main()
    except KeyboardInterrupt:
        log("\nstripe-bench: interrupted, cleaning up")
        return 130
    except BenchError as e:
        log("stripe-bench: %s" % e)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # no second interrupt during cleanup
        b.cleanup()
