# SPDX-License-Identifier: BSD-3-Clause
"""reshape-impact: how fast `nbdstripe grow` restripes a served volume and
what a running grow costs its clients, on emulated members (the stripebench
emulation: direct-I/O loop devices throttled by cgroup block throttling).

One run, side by side:
  a. for each grow (default 2 -> 3 and 4 -> 5 members), --repeat times: a
     volume created afresh on the first N members (`nbdstripe create
     --force`: nbdstripe headers, chunk --chunk, cache "direct") and served
     by nbdkit with config=FILE; one full sequential read of it through the
     volume (fio's nbd engine, 1M QD8, every byte once); then `nbdstripe
     grow --wait --force` onto the next member with no client connected:
     its elapsed_seconds (the reshape status) against the read's time
     (issue #22: at most 1.5 x);
  b. RND4K-Q32T1 random reads on a fresh --impact-from-member volume,
     without a grow and with one running (started right before fio,
     cancelled after it if still running: it must outlast fio's window),
     the rounds alternated, --repeat times: IOPS, mean and p99 latency.

The harness reads the grow's progress from the volume's control socket
(NAME.ctl beside its status file: the "reshape" object of the status)."""

import argparse
import json
import os
import shutil
import sys
import threading
import time

from .replace import (ReplaceBench, case_summary, common_args, common_checks, run_header, run_main,
                      spread, write_outputs)
from .runner import REPO
from .util import MB, BenchError, dev_sectors, fmt_size, log, parse_size, run

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # bench/
VOLUME = "growbench"
GROW_TARGET = 1.5                       # issue #22: grow time <= 1.5 x one full read
PROFILE = ("RND4K-Q32T1", 4096, 32)
DATA_OFFSET = 1 << 20                   # nbdstripe's default data_offset

DESCRIPTION = """\
reshape-impact: how fast `nbdstripe grow` restripes a served volume onto one
more member (2 -> 3 and 4 -> 5 by default) against one full sequential read of
the volume on the same members, and what a running grow costs the clients
(RND4K-Q32T1 random read IOPS and p99 latency, with and without, rounds
alternated).  Emulated members: direct-I/O loop devices throttled by cgroup
block throttling (--mbps, --iops), as bench/stripe-bench's.  Needs root."""

EPILOG = """\
examples:
  bench/reshape-impact                       # full run: 2G members, about 10 minutes
  bench/reshape-impact --quick --out /tmp/gi  # CI size: 256M members, about 40 s
  bench/reshape-impact --grows 2:3 --repeat 5 # only 2 -> 3, five times

outputs (in --out, default bench/out/reshape-YYYYmmdd-HHMMSS): results.json,
summary.md, logs/ (nbdkit's log, the nbdstripe commands' output, the configs).
Units: MB/s = 10^6 bytes/s; latencies in microseconds; sizes accept K/M/G
(1024-based).  Exit status: 0 ran (whether or not the target was met: see
results.json), 1 error, 2 usage, 130 interrupted.
"""


def parse_grows(text):
    grows = []
    for part in text.split(","):
        try:
            f, t = (int(x) for x in part.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError("--grows: FROM:TO[,FROM:TO...], e.g. 2:3,4:5")
        if not 1 <= f < t:
            raise argparse.ArgumentTypeError("--grows: %s: need 1 <= FROM < TO" % part)
        grows.append((f, t))
    return grows


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="reshape-impact", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, "reshape")
    ap.add_argument("--quick", action="store_true",
                    help="CI size: 256M members, 1.5 s fio runs, 1 repetition of each grow, "
                         "2 impact rounds")
    ap.add_argument("--grows", type=parse_grows, default=[(2, 3), (4, 5)],
                    help="the grows timed in a., FROM:TO,... (default 2:3,4:5)")
    ap.add_argument("--impact-from", type=int, default=2,
                    help="b.'s volume has this many members and grows by one (default 2)")
    ap.add_argument("--mbps", type=int, default=80,
                    help="per-member MB/s each way (default 80: a 4 -> 5 grow then moves "
                         "640 MB/s through the machine's disk, under its ~1.1 GB/s)")
    ap.add_argument("--member-size", type=parse_size,
                    help="size of each member (default 2G: a grow of about 25 s at 80 MB/s; quick 256M)")
    ap.add_argument("--repeat", type=int,
                    help="repetitions of each timed grow and of the impact pair (default 3; quick: "
                         "1 grow, 2 pairs)")
    ap.add_argument("--impact-rate", type=int, default=0,
                    help="--rate (bytes/s) of the grow that runs during the with-grow fio runs "
                         "(default 0: none, full speed: the worst case for clients)")
    a = ap.parse_args(argv)
    if a.member_size is None:
        a.member_size = (256 << 20) if a.quick else (2 << 30)
    if a.member_size % (4 << 20) or a.member_size < (8 << 20):
        ap.error("--member-size must be a multiple of 4M, at least 8M")
    common_checks(ap, a, "reshape")
    a.grow_repeat = a.repeat if a.repeat is not None else (1 if a.quick else 3)
    a.repeat = a.repeat if a.repeat is not None else (2 if a.quick else 3)
    if a.repeat < 1 or a.impact_from < 1 or a.impact_rate < 0:
        ap.error("--repeat >= 1, --impact-from >= 1, --impact-rate >= 0")
    a.nmembers = max([t for _, t in a.grows] + [a.impact_from + 1])
    return a


class ReshapeBench(ReplaceBench):
    """ReplaceBench's emulation, control socket and fio rows; a volume of
    the first n members, created afresh for every measurement."""

    def __init__(self, a):
        super().__init__(a)
        self.cfg = os.path.join(self.sock_dir, VOLUME + ".conf")
        self.status_file = os.path.join(self.sock_dir, VOLUME + ".status.json")
        self.ctl_path = os.path.join(self.sock_dir, VOLUME + ".ctl")
        self.n = 0

    def reshape_status(self):
        ans = self.ctl({"op": "status"})
        if not ans.get("ok"):
            raise BenchError("control socket: %s" % ans.get("error"))
        return (ans.get("status") or ans).get("reshape")

    def volume_size(self):
        per = (self.a.member_size - DATA_OFFSET) // self.a.chunk * self.a.chunk
        return per * self.n

    # ------------------------------------------------------------ setup
    def write_config(self):
        a = self.a
        with open(self.cfg, "w") as f:
            f.write('# reshape-impact: the volume under test (members are throttled loop devices)\n'
                    'name = "%s";\nchunk = "%s";\nmembers = [ %s ];\n'
                    'cache = "direct";\nhealth = {\n  status_file = "%s";\n  interval = 1;\n};\n'
                    % (VOLUME, fmt_size(a.chunk),
                       ", ".join('"%s"' % self.dev(i) for i in range(self.n)), self.status_file))

    def fresh_volume(self, n, tag):
        """Stop the volume's server, create a volume on members 0..n-1 with
        nbdstripe headers (over whatever a previous round left) and serve it."""
        if "volume" in self.servers:
            self.stop_server("volume")
        self.n = n
        for p in (self.status_file, self.ctl_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.write_config()
        self.save_log("config-%s" % tag, open(self.cfg).read())
        self.nbdstripe(["create", "--force", self.cfg], "create-%s" % tag)
        self.serve_config()

    def serve_config(self):
        self.uri = self.start_server("volume", [self.a.plugin, "config=" + self.cfg], False)
        self.pid = self.servers["volume"][0].pid
        deadline = time.monotonic() + 10
        while not os.path.exists(self.ctl_path):
            if time.monotonic() > deadline:
                raise BenchError("the server made no control socket %s (see logs/nbdkit-volume.log)"
                                 % self.ctl_path)
            time.sleep(0.05)

    # ------------------------------------------------------------ a. grow vs read
    def full_read(self):
        """One sequential read of the whole volume through it (1M QD8)."""
        size = self.volume_size()
        cmd = ["fio", "--thread", "--name=fullread", "--ioengine=nbd", "--uri=" + self.uri,
               "--rw=read", "--bs=1M", "--iodepth=8", "--size=%d" % size, "--output-format=json"]
        t0 = time.monotonic()
        rc, out, err, w = self.watched(cmd, server_pid=self.pid)
        wall = time.monotonic() - t0
        if rc != 0:
            raise BenchError("fio (full read) failed: %s" % err.strip()[-500:])
        d = json.loads(out[out.index("{"):])["jobs"][0]["read"]
        if d["io_bytes"] != size:
            raise BenchError("fio read %d bytes of the %d-byte volume" % (d["io_bytes"], size))
        secs = d["runtime"] / 1000.0
        return {"bytes": size, "seconds": secs, "wall_s": wall, "mbps": size / secs / MB,
                "other_user_cores": w["other_user_cores"], "noisy": w["noisy"]}

    def grow(self, frm, to, rep):
        a = self.a
        tag = "%d-%d-%d" % (frm, to, rep + 1)
        self.fresh_volume(frm, tag)
        rd = self.full_read()
        new = [self.dev(i) for i in range(frm, to)]
        args = ["grow", "--wait", "--force", self.cfg] + new
        samples = []
        stop = threading.Event()

        def sampler():
            # the grow's progress as it went: where its time goes
            while not stop.is_set():
                try:
                    st = self.reshape_status()
                except (OSError, ValueError, BenchError):
                    st = None
                if st and st.get("kind") == "grow":
                    io = [dev_sectors(self.members[i]["tdev"]) for i in range(to)]
                    samples.append([round(time.monotonic() - t0, 3), st.get("bytes_copied", 0),
                                    st.get("state"), sum(r for r, _ in io) * 512,
                                    sum(w for _, w in io) * 512])
                stop.wait(0.1)
        t0 = time.monotonic()
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        try:
            rc, out, err, w = self.watched([a.nbdstripe] + args, server_pid=self.pid)
        finally:
            stop.set()
            th.join()
        wall = time.monotonic() - t0
        self.save_log("grow-%s" % tag, "$ nbdstripe %s\n%s%s" % (" ".join(args), out, err))
        st = self.reshape_status()
        if rc != 0 or not st or st.get("state") != "done":
            raise BenchError("nbdstripe grow %d -> %d did not complete: %s %s"
                             % (frm, to, (err or out).strip()[-500:], st))
        self.n = to
        size_to = st.get("size_to")
        # the grown volume as a new client sees it
        got = run(["nbdinfo", "--size", self.uri], check=False).stdout.strip() \
            if shutil.which("nbdinfo") else None
        secs = st["elapsed_seconds"]
        # when every byte had moved (the sampler's resolution: 0.1 s), and
        # what was written to the members after that (zeroing the new room)
        moved = next((x for x in samples if x[1] >= st["bytes_total"]), None)
        tail_written = (samples[-1][4] - moved[4]) if moved and samples else None
        r = {"from": frm, "to": to, "repeat": rep, "read": rd,
             "grow_s": secs, "command_wall_s": wall, "bytes_total": st["bytes_total"],
             "grow_mbps": st["bytes_total"] / secs / MB,
             "size_from": st.get("size_from"), "size_to": size_to,
             "size_seen_after": int(got) if got and got.isdigit() else None,
             "journaled_windows": st.get("journaled_windows"), "checkpoints": st.get("checkpoints"),
             "ratio": secs / rd["seconds"],
             "data_moved_s": moved[0] if moved else None,
             "after_data_moved_s": (wall - moved[0]) if moved else None,
             "written_after_data_moved": tail_written,
             "progress": samples,
             "progress_columns": ["seconds since the command started", "bytes_copied", "state",
                                  "bytes read from the members' devices since the volume was created",
                                  "bytes written to them"],
             "other_user_cores": w["other_user_cores"], "noisy": w["noisy"] or rd["noisy"],
             "server_cpu_s": w.get("server_cpu_s")}
        log("  %d -> %d (%d/%d): read %s in %.2f s (%.1f MB/s); grow moved %s in %.2f s "
            "(%.1f MB/s): x%.2f of the read; every byte moved at %s s, then %s written in %s s%s"
            % (frm, to, rep + 1, a.grow_repeat, fmt_size(rd["bytes"]), rd["seconds"], rd["mbps"],
               fmt_size(r["bytes_total"]), secs, r["grow_mbps"], r["ratio"],
               "%.1f" % moved[0] if moved else "?",
               fmt_size(tail_written) if tail_written is not None else "?",
               "%.1f" % r["after_data_moved_s"] if moved else "?",
               "  noisy" if r["noisy"] else ""))
        return r

    # ------------------------------------------------------------ b. impact
    def with_grow(self, rep):
        """Start a grow (no --wait), run the fio job while it moves data,
        then cancel it if it still runs (paused; the next round creates the
        volume afresh)."""
        a = self.a
        frm = a.impact_from
        args = ["grow", "--force"] + (["--rate", str(a.impact_rate)] if a.impact_rate else []) + \
            [self.cfg, self.dev(frm)]
        self.nbdstripe(args, "grow-impact-%d" % (rep + 1))
        t0, s0 = time.monotonic(), self.reshape_status()
        try:
            row = self.fio_row("with_grow", rep)
        finally:
            t1, s1 = time.monotonic(), self.reshape_status()
            if s1 and s1.get("state") == "copying":
                self.nbdstripe(["grow", "--cancel", self.cfg], "grow-cancel")
        end = self.reshape_status()
        outlasted = bool(s1) and s1.get("state") == "copying"
        moved = (s1 or {}).get("bytes_copied", 0) - (s0 or {}).get("bytes_copied", 0)
        row.update({"grow_outlasted_fio": outlasted,
                    "grow_rate_limit_bytes_per_s": a.impact_rate or None,
                    "grow_mbps_during_fio": moved / max(t1 - t0, 1e-3) / MB,
                    "grow_fraction_moved_at_end": ((s1 or {}).get("bytes_copied", 0) /
                                                   max((s1 or {}).get("bytes_total", 1), 1)),
                    "grow_end_state": (end or {}).get("state")})
        return row

    def measure(self, case, rep):
        """One row on a fresh volume, re-run while noisy, the quietest kept."""
        def once(rep):
            self.fresh_volume(self.a.impact_from, "impact-%d-%s" % (rep + 1, case))
            return self.with_grow(rep) if case == "with_grow" else self.fio_row(case, rep)
        r = self.quietest(once, rep)
        self.print_row(r, case, rep, (
            "  grow %.1f MB/s during the run%s" % (
                r["grow_mbps_during_fio"], "" if r["grow_outlasted_fio"] else ", ENDED BEFORE fio did"))
            if case == "with_grow" else "")
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
        log("== setting up %d emulated members, %s each" % (a.nmembers, fmt_size(a.member_size)))
        self.setup_emulated(a.nmembers)
        if not self.throttle:
            raise BenchError("no cgroup block throttling: %s" % self.scaling_refused)
        log("== calibration (member file 0, as stripe-bench)")
        cal = self.calibrate()

        print("\n== a. nbdstripe grow --wait with no client connected, against one full sequential "
              "read of the volume before it (fio 1M QD8 through the volume), %d x each" % a.grow_repeat)
        sys.stdout.flush()
        grows = []
        for frm, to in a.grows:
            runs = [self.grow(frm, to, rep) for rep in range(a.grow_repeat)]
            med = statistics_median([r["ratio"] for r in runs])
            g = {"from": frm, "to": to, "runs": runs,
                 "grow_s": spread([r["grow_s"] for r in runs]),
                 "read_s": spread([r["read"]["seconds"] for r in runs]),
                 "grow_mbps": spread([r["grow_mbps"] for r in runs]),
                 "read_mbps": spread([r["read"]["mbps"] for r in runs]),
                 "ratio": spread([r["ratio"] for r in runs]),
                 "data_moved_s": spread([r["data_moved_s"] for r in runs]),
                 "after_data_moved_s": spread([r["after_data_moved_s"] for r in runs]),
                 "written_after_data_moved": spread([r["written_after_data_moved"] for r in runs]),
                 "threshold": GROW_TARGET, "met": med <= GROW_TARGET,
                 "size_seen_after_ok": all(r["size_seen_after"] == r["size_to"] for r in runs),
                 "noisy_runs": sum(1 for r in runs if r["noisy"])}
            grows.append(g)
            print("  %d -> %d: grow %.2f s, read %.2f s: x%.2f (median): %s"
                  % (frm, to, g["grow_s"]["median"], g["read_s"]["median"], med,
                     "met" if g["met"] else "MISSED (target <= %.1f)" % GROW_TARGET))
            if not g["size_seen_after_ok"]:
                notes.append("%d -> %d: a new client did not see the grown size" % (frm, to))

        print("\n== b. %s random read on a %d-member volume, without and with a grow to %d running%s, "
              "%d x %g s (+%g s ramp), rounds alternated, the volume created afresh for each run"
              % (PROFILE[0], a.impact_from, a.impact_from + 1,
                 (" (--rate %d)" % a.impact_rate) if a.impact_rate else " (no --rate: full speed)",
                 a.repeat, a.runtime, a.ramp))
        sys.stdout.flush()
        runs = []
        for rep in range(a.repeat):
            runs.append(self.measure("without_grow", rep))
            runs.append(self.measure("with_grow", rep))
        if "volume" in self.servers:
            self.stop_server("volume")
        cases = {case: case_summary(runs, case) for case in ("without_grow", "with_grow")}
        wr = [r for r in runs if r["case"] == "with_grow"]
        cases["with_grow"]["grow_mbps_during_fio"] = spread([r["grow_mbps_during_fio"] for r in wr])
        cases["with_grow"]["grow_outlasted_every_run"] = all(r["grow_outlasted_fio"] for r in wr)
        wo, wi = cases["without_grow"], cases["with_grow"]
        impact = {"profile": PROFILE[0], "bs": PROFILE[1], "iodepth": PROFILE[2], "rw": "randread",
                  "members_from": a.impact_from, "members_to": a.impact_from + 1,
                  "grow_rate_limit_bytes_per_s": a.impact_rate or None,
                  "cases": cases,
                  "iops_ratio": (wi["iops"]["median"] / wo["iops"]["median"]) if wo["iops"]["median"] else None,
                  "p99_ratio": (wi["lat_p99_us"]["median"] / wo["lat_p99_us"]["median"])
                  if wo["lat_p99_us"]["median"] else None,
                  "runs": runs}
        if not wi["grow_outlasted_every_run"]:
            notes.append("a with-grow run outlasted its grow: raise --member-size or set --impact-rate")
        notes.append("the reference read and the grow are on the same members, one after the other, "
                     "on a volume created afresh; the grow's time is its status's elapsed_seconds "
                     "(from its start to the new layout in place, the config rewritten)")

        doc = {
            "tool": "nbdstripe reshape-impact",
            **run_header(t_start, load_before),
            "parameters": {"quick": a.quick, "mbps": a.mbps, "iops": a.iops, "member_size": a.member_size,
                           "chunk": a.chunk, "ramp_s": a.ramp, "runtime_s": a.runtime,
                           "repeat": a.repeat, "grow_repeat": a.grow_repeat,
                           "grows": ["%d:%d" % g for g in a.grows], "impact_from": a.impact_from,
                           "impact_rate": a.impact_rate or None,
                           "noise_threshold_cores": a.noise_threshold,
                           "plugin": a.plugin, "nbdstripe": a.nbdstripe},
            "members": {"method": "loop device (--direct-io=on) over its own file, behind a second "
                                  "direct-I/O loop device; cgroup %s block throttling" % self.throttle.kind,
                        "devices": [m["dev"] for m in self.members],
                        "volume": {"metadata": "nbdstripe", "cache": "direct", "chunk": a.chunk,
                                   "data_offset": DATA_OFFSET,
                                   "server": "nbdkit %s config=FILE" % os.path.basename(a.plugin)},
                        "calibration": cal},
            "grows": grows,
            "impact": impact,
            "targets": [
                {"target": "grow %d -> %d with idle clients <= %.1f x one full read of the volume"
                           % (g["from"], g["to"], GROW_TARGET),
                 "measured": g["ratio"]["median"], "threshold": GROW_TARGET, "met": g["met"]}
                for g in grows],
            "notes": notes,
        }
        return write_outputs(a.out, doc, summary(doc), t_start)


def statistics_median(vals):
    return spread(vals)["median"]


def summary(doc):
    p, im = doc["parameters"], doc["impact"]
    L = ["Command: `%s`  " % doc["command"],
         "Date: %s; %s, %d CPUs; load before %s, after %s; %.0f s  " % (
             doc["date"], doc["machine"]["kernel"], doc["machine"]["cpus"],
             doc["machine"]["loadavg_before"], doc["machine"]["loadavg_after"], doc["duration_s"]),
         "Members: %d emulated (%s), %d MB/s and %d IOPS each way, %s each; volumes: chunk %s, "
         "nbdstripe headers, cache direct, created afresh for every measurement  " % (
             len(doc["members"]["devices"]), doc["members"]["method"], p["mbps"], p["iops"],
             fmt_size(p["member_size"]), fmt_size(p["chunk"])),
         ""]
    L.append("`nbdstripe grow --wait` with no client connected, against one sequential read of "
             "the whole volume before it (fio 1M QD8 through the volume); medians of %d, min-max:\n"
             % p["grow_repeat"])
    L.append("| grow | volume before | read s | read MB/s | grow s | grow s min-max | moved MB/s "
             "| grow / read | target | met | every byte moved at s | then s | written then |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    f1 = lambda v: "-" if v is None else "%.1f" % v
    for g in doc["grows"]:
        r0 = g["runs"][0]
        L.append("| %d -> %d | %s | %.2f | %.1f | %.2f | %.2f-%.2f | %.1f | %.2f | <= %.1f | %s | %s | %s | %s |" % (
            g["from"], g["to"], fmt_size(r0["read"]["bytes"]), g["read_s"]["median"],
            g["read_mbps"]["median"], g["grow_s"]["median"], g["grow_s"]["min"], g["grow_s"]["max"],
            g["grow_mbps"]["median"], g["ratio"]["median"], g["threshold"],
            "yes" if g["met"] else "**NO**", f1(g["data_moved_s"]["median"]),
            f1(g["after_data_moved_s"]["median"]),
            fmt_size(int(g["written_after_data_moved"]["median"]))
            if g["written_after_data_moved"]["median"] is not None else "-"))
    L.append("")
    L.append("(\"every byte moved at\": the first status sample, every 0.1 s, whose bytes_copied is "
             "the total, seconds since the command started; \"then\": the rest of the command's time, "
             "in which the new room is zeroed and the layout switched; \"written then\": bytes the "
             "members' devices wrote meanwhile.)")
    L.append("")
    L.append("%s random read on a %d-member volume (fio nbd engine, %g s + %g s ramp, %d rounds "
             "alternated; medians, min-max)%s:\n" % (
                 im["profile"], im["members_from"], p["runtime_s"], p["ramp_s"], p["repeat"],
                 "; the grow to %d at --rate %d" % (im["members_to"], p["impact_rate"])
                 if p["impact_rate"] else "; the grow to %d at full speed (no --rate)" % im["members_to"]))
    L.append("| case | IOPS | IOPS min-max | mean us | p99 us | p99 min-max | grow MB/s meanwhile | noisy runs |")
    L.append("|---|---|---|---|---|---|---|---|")
    for case, label in (("without_grow", "no grow"), ("with_grow", "grow running")):
        c = im["cases"][case]
        gm = c.get("grow_mbps_during_fio")
        L.append("| %s | %.0f | %.0f-%.0f | %.0f | %.0f | %.0f-%.0f | %s | %d |" % (
            label, c["iops"]["median"], c["iops"]["min"], c["iops"]["max"], c["lat_mean_us"]["median"],
            c["lat_p99_us"]["median"], c["lat_p99_us"]["min"], c["lat_p99_us"]["max"],
            "%.1f" % gm["median"] if gm else "-", c["noisy_runs"]))
    L.append("")
    L.append("With a grow running: IOPS x%.2f, p99 x%.2f.%s" % (
        im["iops_ratio"] or 0, im["p99_ratio"] or 0,
        "" if im["cases"]["with_grow"]["grow_outlasted_every_run"]
        else " **A grow ended before its fio run did.**"))
    for n in doc["notes"]:
        L.append("\nNote: " + n)
    return "\n".join(L) + "\n"


def main(argv):
    return run_main("reshape-impact", ReshapeBench, parse_args(argv))
