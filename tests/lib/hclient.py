#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The health tests' client and checkers (tests/health, and
# tests/daemon/owner_identity.sh).  Run with
# /usr/bin/python3: it needs Debian's python3-libnbd (module nbd) and, for
# prom-check and reader, python3-prometheus-client.
#
#   io URI LAYOUT --member M --op read|write|trim|zero|flush --count K [...]
#       K requests, one after the other, each inside one chunk of member M
#       only (see "Layout" below; a flush is of the whole volume); checks
#       every outcome and latency.
#   load URI LAYOUT --members 0,2,3 --threads T (--duration S | --stop FILE)
#       reads touching the given members from T connections at once.
#   json FILE EXPR / wait-json FILE EXPR --deadline S
#       evaluate a Python expression over the status file (j = the JSON).
#   reader JSON PROM --stop FILE
#       read and parse both files in a tight loop until FILE exists.
#   prom-check JSON PROM [--after T] [--deadline S] [--promtool PATH]
#              [--expect EXPR]...
#       the Prometheus file parses, agrees with the JSON, its histograms
#       are sound, `promtool check metrics` accepts it and each EXPR is
#       true (Python; v(METRIC, **labels) is a sample's value, the
#       volume label filled in, j the JSON).
#   pause SOCKET p|r
#       nbdkit's pause filter: pause ('p') or resume ('r') a member server;
#       returns once the server acknowledged ('P' once in-flight requests
#       have drained, 'R').
#
# Layout (md raid0, members of equal size): logical chunk k lives on member
# k % N at member offset (k // N) * chunk + data_offset.  So "slot" i of
# member m is logical chunk i * N + m.  LAYOUT is N,CHUNK,DATA_OFFSET.
#
# Data checks: a read that succeeds must return what the member's backing
# file holds at that place (--oracle: the backing files of the member
# servers, read directly), and/or the deterministic pattern a previous
# `io --op write --seed S` wrote there (--pattern S).
#
# Output: one JSON line (summary); problems go to stderr, exit status 1.

import argparse
import errno as E
import json
import os
import random
import socket
import sys
import threading
import time


def die(msg):
    print("hclient: " + msg, file=sys.stderr)
    sys.exit(2)


def nbd_mod():
    try:
        import nbd
    except ImportError:
        die("python3-libnbd (module nbd) is not installed")
    return nbd


class Layout:
    def __init__(self, text):
        try:
            n, chunk, doff = (int(x) for x in text.split(","))
        except ValueError:
            die("LAYOUT must be N,CHUNK,DATA_OFFSET: " + text)
        self.n, self.chunk, self.doff = n, chunk, doff

    def logical(self, member, slot, off=0):
        return (slot * self.n + member) * self.chunk + off

    def member_offset(self, slot, off=0):
        return slot * self.chunk + off + self.doff


def pattern(seed, logical_offset, size):
    return random.Random("%s:%d" % (seed, logical_offset)).randbytes(size)


def oracle_read(path, offset, size):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def errname(e):
    n = getattr(e, "errnum", None) or getattr(e, "errno", None)
    if n:
        return E.errorcode.get(n, str(n))
    return "ERR(%s)" % e


def connect(uri):
    nbd = nbd_mod()
    h = nbd.NBD()
    h.connect_uri(uri)
    return h


def one_request(h, nbd, op, lay, member, slot, off, size, seed):
    """Returns (outcome, latency_s, data): outcome "ok" or an errno name."""
    lo = lay.logical(member, slot, off)
    t = time.monotonic()
    data = None
    try:
        if op == "read":
            data = h.pread(size, lo)
        elif op == "write":
            h.pwrite(pattern(seed, lo, size), lo)
        elif op == "trim":
            h.trim(size, lo)
        elif op == "zero":
            h.zero(size, lo)
        else:
            h.flush()
        res = "ok"
    except nbd.Error as e:
        res = errname(e)
    return res, time.monotonic() - t, data


def check_data(args, lay, member, slot, off, size, data, problems, where):
    lo = lay.logical(member, slot, off)
    if args.oracle:
        paths = args.oracle.split(",")
        want = oracle_read(paths[member], lay.member_offset(slot, off), size)
        if data != want:
            problems.append("%s: member %d slot %d (logical %d): data differs "
                            "from member %d's backing file at %d"
                            % (where, member, slot, lo, member,
                               lay.member_offset(slot, off)))
    if args.pattern is not None:
        if data != pattern(args.pattern, lo, size):
            problems.append("%s: member %d slot %d (logical %d): data is not "
                            "what was written (pattern %s)"
                            % (where, member, slot, lo, args.pattern))


def cmd_io(args):
    nbd = nbd_mod()
    lay = Layout(args.layout)
    h = connect(args.uri)
    if args.started:
        print(json.dumps({"started_unix": time.time()}), flush=True)
    outcomes, lats, problems = {}, [], []
    t_until = time.monotonic() + (args.until_error or 0)
    r = -1
    while True:
        r += 1
        if args.until_error is None:
            if r >= args.count:
                break
        elif outcomes and (set(outcomes) != {"ok"} or
                           time.monotonic() >= t_until):
            break
        slot = args.first_slot + (r % args.slots)
        res, lat, data = one_request(h, nbd, args.op, lay, args.member, slot,
                                     args.offset, args.size, args.seed)
        outcomes[res] = outcomes.get(res, 0) + 1
        lats.append(lat)
        where = "request %d (%s)" % (r, args.op)
        if args.until_error is not None and res == "ok" and \
                time.monotonic() < t_until:
            pass                # the fault is not there yet: go on
        elif args.expect == "ok" and res != "ok":
            problems.append("%s: member %d slot %d: %s, expected success"
                            % (where, args.member, slot, res))
        elif args.expect == "error" and res == "ok":
            problems.append("%s: member %d slot %d: succeeded, expected an "
                            "error" % (where, args.member, slot))
        elif args.expect not in ("ok", "error", "any") and res != args.expect:
            problems.append("%s: member %d slot %d: %s, expected %s"
                            % (where, args.member, slot, res, args.expect))
        if args.bound is not None and lat > args.bound:
            problems.append("%s: member %d slot %d took %.3f s > bound %.3f s"
                            % (where, args.member, slot, lat, args.bound))
        if res == "ok" and args.op == "read":
            check_data(args, lay, args.member, slot, args.offset, args.size,
                       data, problems, where)
    summary = {"member": args.member, "op": args.op, "requests": r,
               "outcomes": outcomes,
               "max_latency_s": round(max(lats), 6) if lats else None,
               "finished_unix": time.time()}
    print(json.dumps(summary), flush=True)
    for p in problems:
        print("hclient io: " + p, file=sys.stderr)
    return 1 if problems else 0


def cmd_load(args):
    nbd = nbd_mod()
    lay = Layout(args.layout)
    members = [int(x) for x in args.members.split(",")]
    stats = {m: {"ok": 0, "errors": {}, "max_latency_s": 0.0, "lat": []}
             for m in members}
    problems = []
    lock = threading.Lock()
    t_end = time.monotonic() + args.duration if args.duration else None
    t_cap = time.monotonic() + args.max_duration    # never run away
    stop = threading.Event()

    def done():
        if stop.is_set():
            return True
        if t_end is not None and time.monotonic() >= t_end:
            return True
        if args.stop and (os.path.exists(args.stop) or
                          not os.path.isdir(os.path.dirname(args.stop) or ".")):
            return True
        return time.monotonic() >= t_cap

    def worker(w):
        rnd = random.Random(w)
        try:
            h = connect(args.uri)
        except Exception as e:          # noqa: BLE001
            with lock:
                problems.append("worker %d: connect: %s" % (w, e))
            return
        i = w
        while not done():
            m = members[i % len(members)]
            i += 1
            slot = rnd.randrange(args.slots)
            res, lat, data = one_request(h, nbd, "read", lay, m, slot, 0,
                                         args.size, None)
            with lock:
                s = stats[m]
                if res == "ok":
                    s["ok"] += 1
                else:
                    s["errors"][res] = s["errors"].get(res, 0) + 1
                    if args.expect_ok:
                        problems.append("member %d slot %d: %s"
                                        % (m, slot, res))
                s["max_latency_s"] = max(s["max_latency_s"], lat)
                s["lat"].append(lat)
                if args.bound is not None and lat > args.bound:
                    problems.append("member %d slot %d: a read took %.3f s > "
                                    "bound %.3f s" % (m, slot, lat, args.bound))
            if res == "ok" and args.oracle:
                p = []
                check_data(args, lay, m, slot, 0, args.size, data, p, "load")
                if p:
                    with lock:
                        problems.extend(p)
        h.shutdown()

    threads = [threading.Thread(target=worker, args=(w,))
               for w in range(args.threads)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {"started_unix": t0, "finished_unix": time.time(), "members": {}}
    for m, s in stats.items():
        lat = sorted(s.pop("lat"))
        s["p50_latency_s"] = round(lat[len(lat) // 2], 6) if lat else None
        s["max_latency_s"] = round(s["max_latency_s"], 6)
        out["members"][str(m)] = s
    print(json.dumps(out), flush=True)
    for p in problems[:20]:
        print("hclient load: " + p, file=sys.stderr)
    if len(problems) > 20:
        print("hclient load: ... %d problems in all" % len(problems),
              file=sys.stderr)
    for m in members:
        if stats[m]["ok"] + sum(stats[m]["errors"].values()) < args.min_requests:
            print("hclient load: member %d: fewer than %d requests"
                  % (m, args.min_requests), file=sys.stderr)
            problems.append("few")
    return 1 if problems else 0


def load_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read())


def cmd_json(args):
    j = load_json(args.file)
    v = eval(args.expr, {"j": j})        # noqa: S307 (test-only)
    print(v if isinstance(v, str) else json.dumps(v))
    return 0


def cmd_wait_json(args):
    deadline = time.monotonic() + args.deadline
    last = "status file never read"
    while True:
        try:
            j = load_json(args.file)
            v = eval(args.expr, {"j": j})    # noqa: S307
            if v:
                return 0
            last = "false"
            if args.show:
                last = "false; " + json.dumps(eval(args.show, {"j": j}))
        except FileNotFoundError:
            last = "no status file"
        except (KeyError, IndexError, TypeError) as e:
            last = "%s: %s" % (type(e).__name__, e)
        except ValueError as e:
            # The file is replaced atomically: it must never be partial.
            print("hclient wait-json: %s is not valid JSON: %s"
                  % (args.file, e), file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            print("hclient wait-json: %s not true within %.1f s (%s)"
                  % (args.expr, args.deadline, last), file=sys.stderr)
            return 1
        time.sleep(0.05)


# --- Prometheus -------------------------------------------------------------

def prom_samples(text):
    from prometheus_client.parser import text_string_to_metric_families
    fams = {}
    samples = {}
    for fam in text_string_to_metric_families(text):
        fams[fam.name] = fam.type
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in samples:
                raise ValueError("duplicate sample %s %s" % key)
            samples[key] = s.value
    return fams, samples


OPS = ("read", "write", "trim", "zero", "flush")
MSTATES = ("ok", "slow", "full", "failing", "failed")
VSTATES = ("ok", "degraded", "failed")


def prom_compare(j, fams, samples):
    """Differences between the JSON and the Prometheus samples."""
    diffs = []
    vol = j["volume"]
    name = vol["name"]

    def get(metric, **labels):
        key = (metric, tuple(sorted((k, str(v)) for k, v in labels.items())))
        if key not in samples:
            diffs.append("missing sample %s%s" % (metric, dict(key[1])))
            return None
        return samples[key]

    def eq(what, got, want, tol=0.0):
        if got is None:
            return
        if want is None or abs(got - want) > tol:
            diffs.append("%s: prometheus %r, json %r" % (what, got, want))

    running = j["running"]
    eq("up", get("nbdstripe_up", volume=name), 1.0 if running else 0.0)
    eq("last_update_timestamp_seconds (= updated_unix: the same write)",
       get("nbdstripe_last_update_timestamp_seconds", volume=name),
       j["updated_unix"], 0.0005)
    for st in VSTATES:
        eq("volume_state{%s}" % st, get("nbdstripe_volume_state", volume=name,
                                        state=st),
           1.0 if running and vol["state"] == st else 0.0)
    eq("volume_size_bytes", get("nbdstripe_volume_size_bytes", volume=name),
       float(vol["size"]))
    eq("volume_start_time_seconds",
       get("nbdstripe_volume_start_time_seconds", volume=name),
       float(vol["started_unix"]), 0.01)
    info = [k for k in samples if k[0] == "nbdstripe_volume_info"]
    if len(info) != 1:
        diffs.append("nbdstripe_volume_info: %d samples, expected 1" % len(info))
    else:
        labels = dict(info[0][1])
        if labels.get("volume") != name:
            diffs.append("nbdstripe_volume_info: volume=%r" % labels.get("volume"))
        if (vol.get("uuid") or "") != labels.get("uuid", ""):
            diffs.append("nbdstripe_volume_info: uuid=%r, json %r"
                         % (labels.get("uuid"), vol.get("uuid")))
    for m in j["members"]:
        idx = str(m["index"])
        for st in MSTATES:
            eq("member %s state{%s}" % (idx, st),
               get("nbdstripe_member_state", volume=name, member=idx,
                   path=m["path"], state=st),
               1.0 if running and m["state"] == st else 0.0)
        for op in OPS:
            o = m["ops"][op]
            # A flush moves no bytes: no counter for them.
            for c in ("requests", "errors") if op == "flush" else \
                    ("requests", "bytes", "errors"):
                eq("member %s %s %s" % (idx, op, c),
                   get("nbdstripe_member_%s_%s_total" % (op, c), volume=name,
                       member=idx),
                   float(o[c]))
            base = "nbdstripe_member_%s_latency_seconds" % op
            tot = o["total_latency_us"]
            ssum = get(base + "_sum", volume=name, member=idx)
            if tot.get("sum") is not None:
                eq("member %s %s latency _sum (s)" % (idx, op), ssum,
                   tot["sum"] / 1e6, max(1e-6, tot["sum"] / 1e6 * 1e-6))
            cnt = get(base + "_count", volume=name, member=idx)
            if cnt is not None and cnt not in (float(o["requests"]),
                                               float(o["requests"] - o["errors"])):
                diffs.append("member %s %s latency _count %r: neither the "
                             "requests (%d) nor the successful requests (%d)"
                             % (idx, op, cnt, o["requests"],
                                o["requests"] - o["errors"]))
            eq("member %s %s latency +Inf bucket (= _count)" % (idx, op),
               get(base + "_bucket", volume=name, member=idx, le="+Inf"), cnt)
            if fams.get(base) != "histogram":
                diffs.append("%s: type %s, expected histogram"
                             % (base, fams.get(base)))
    if any(k[0] == "nbdstripe_member_flush_bytes_total" for k in samples):
        diffs.append("nbdstripe_member_flush_bytes_total is exposed")
    if any("quantile" in dict(k[1]) for k in samples):
        diffs.append("quantile samples are exposed")
    diffs += prom_histogram_problems(samples)
    return diffs


def prom_histogram_problems(samples):
    """What is wrong with the histograms among the samples: buckets not
    cumulative, +Inf not _count, _sum not within what the buckets allow
    (each sample at least its bucket's lower le, at most its upper)."""
    problems = []
    series = {}
    for (name, labels), v in samples.items():
        if not name.endswith("_bucket"):
            continue
        d = dict(labels)
        le = float(d.pop("le"))
        key = (name[:-len("_bucket")], tuple(sorted(d.items())))
        series.setdefault(key, []).append((le, v))
    for (base, labels), buckets in sorted(series.items()):
        what = "%s%s" % (base, dict(labels))
        buckets.sort()
        counts = [v for _, v in buckets]
        if any(b < a for a, b in zip(counts, counts[1:])):
            problems.append("%s: buckets not cumulative: %s" % (what, counts))
        if buckets[-1][0] != float("inf"):
            problems.append("%s: no +Inf bucket" % what)
        cnt = samples.get((base + "_count", labels))
        ssum = samples.get((base + "_sum", labels))
        if cnt is None or ssum is None:
            problems.append("%s: no _count or _sum" % what)
            continue
        if counts[-1] != cnt:
            problems.append("%s: +Inf bucket %r, _count %r" % (what, counts[-1], cnt))
        lo = hi = 0.0
        prev_le, prev_c = 0.0, 0.0
        for le, c in buckets:
            lo += (c - prev_c) * prev_le
            hi += (c - prev_c) * le if c > prev_c else 0.0
            prev_le, prev_c = le, c
        if not (lo * (1 - 1e-9) - 1e-9 <= ssum <= hi * (1 + 1e-9) + 1e-9):
            problems.append("%s: _sum %r outside what the buckets allow "
                            "[%r, %r]" % (what, ssum, lo, hi))
        if cnt > 0 and not ssum > 0:
            problems.append("%s: _count %r but _sum %r" % (what, cnt, ssum))
    return problems


def prom_expect(j, samples, exprs):
    """The expressions among exprs that are not true."""
    name = j["volume"]["name"]

    def v(metric, **labels):
        labels.setdefault("volume", name)
        return samples.get((metric, tuple(sorted((k, str(x)) for k, x
                                                 in labels.items()))))
    bad = []
    for e in exprs:
        try:
            ok = eval(e, {"v": v, "j": j})
        except Exception as x:          # a missing sample: None + 1
            ok = "%s: %s" % (type(x).__name__, x)
        if ok is not True:
            bad.append("not true: %s (%s)" % (e, ok))
    return bad


def promtool_problems(promtool, text):
    import subprocess
    r = subprocess.run([promtool, "check", "metrics"], input=text,
                       capture_output=True, text=True)
    if r.returncode == 0:
        return []
    return ["promtool check metrics exit %d: %s"
            % (r.returncode, (r.stdout + r.stderr).strip()[:2000])]


def cmd_prom_check(args):
    deadline = time.monotonic() + args.deadline
    while True:
        diffs = []
        try:
            j = load_json(args.json)
            with open(args.prom, encoding="utf-8") as f:
                text = f.read()
            fams, samples = prom_samples(text)
            if j["updated_unix"] < args.after:
                diffs = ["status file not rewritten since %.3f" % args.after]
            else:
                diffs = prom_compare(j, fams, samples)
                diffs += prom_expect(j, samples, args.expect or [])
                if args.promtool:
                    diffs += promtool_problems(args.promtool, text)
        except FileNotFoundError as e:
            diffs = ["%s" % e]
        except (ValueError, KeyError, TypeError) as e:
            print("hclient prom-check: cannot parse: %s: %s"
                  % (type(e).__name__, e), file=sys.stderr)
            return 1
        if not diffs:
            print(json.dumps({"samples": len(samples), "families": len(fams)}))
            return 0
        if time.monotonic() >= deadline:
            for d in diffs[:40]:
                print("hclient prom-check: " + d, file=sys.stderr)
            return 1
        time.sleep(0.1)


def cmd_reader(args):
    """Read and parse the status (and Prometheus) file in a loop."""
    have_prom = args.prom is not None
    if have_prom:
        from prometheus_client.parser import text_string_to_metric_families
    n_json = n_prom = 0
    seen_updates, member_states, volume_states = set(), set(), set()
    problems = []
    appeared = False
    while not os.path.exists(args.stop):
        try:
            with open(args.json, "rb") as f:
                raw = f.read()
            appeared = True
            try:
                j = json.loads(raw)
                if j.get("format") != 1 or "volume" not in j or "members" not in j:
                    problems.append("status JSON without format/volume/members")
                seen_updates.add(j["updated_unix"])
                volume_states.add(j["volume"]["state"])
                for m in j["members"]:
                    member_states.add((m["index"], m["state"]))
                n_json += 1
            except (ValueError, KeyError, TypeError) as e:
                problems.append("invalid status JSON (%d bytes): %s: %s"
                                % (len(raw), type(e).__name__, e))
        except FileNotFoundError:
            if appeared:
                problems.append("the status file vanished for a moment")
        if have_prom:
            try:
                with open(args.prom, encoding="utf-8") as f:
                    text = f.read()
                try:
                    fams = list(text_string_to_metric_families(text))
                    if not fams:
                        problems.append("empty Prometheus file")
                    n_prom += 1
                except ValueError as e:
                    problems.append("Prometheus file does not parse: %s" % e)
            except FileNotFoundError:
                if n_prom:
                    problems.append("the Prometheus file vanished for a moment")
    out = {"json_reads": n_json, "prom_reads": n_prom,
           "distinct_updates": len(seen_updates),
           "volume_states": sorted(volume_states),
           "member_states": sorted("%d:%s" % x for x in member_states),
           "problems": len(problems)}
    print(json.dumps(out), flush=True)
    for p in problems[:20]:
        print("hclient reader: " + p, file=sys.stderr)
    return 1 if problems else 0


def cmd_pause(args):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(args.timeout)
    s.connect(args.socket)
    s.sendall(args.cmd.encode())
    got = s.recv(1).decode()
    s.close()
    if got != args.cmd.upper():
        print("hclient pause: %r answered %r" % (args.cmd, got), file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("io")
    p.add_argument("uri")
    p.add_argument("layout")
    p.add_argument("--member", type=int, required=True)
    p.add_argument("--op", choices=("read", "write", "trim", "zero", "flush"),
                   default="read", help="flush: the whole volume")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--offset", type=int, default=0, help="within the chunk")
    p.add_argument("--first-slot", type=int, default=1)
    p.add_argument("--slots", type=int, default=1 << 30,
                   help="wrap around after this many slots")
    p.add_argument("--expect", default="ok",
                   help="ok | error | any | an errno name (EIO)")
    p.add_argument("--bound", type=float, help="max seconds per request")
    p.add_argument("--oracle", help="backing files, comma-separated")
    p.add_argument("--pattern", help="reads must return this seed's pattern")
    p.add_argument("--seed", default="0", help="pattern seed for writes")
    p.add_argument("--until-error", type=float, metavar="SECONDS",
                   help="repeat until a request fails (at most SECONDS): "
                   "for a fault whose moment is not known exactly")
    p.add_argument("--started", action="store_true",
                   help="print a line once connected")
    p.set_defaults(func=cmd_io)

    p = sub.add_parser("load")
    p.add_argument("uri")
    p.add_argument("layout")
    p.add_argument("--members", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--duration", type=float)
    p.add_argument("--stop")
    p.add_argument("--max-duration", type=float, default=60)
    p.add_argument("--expect-ok", action="store_true")
    p.add_argument("--bound", type=float)
    p.add_argument("--oracle")
    p.add_argument("--min-requests", type=int, default=1)
    p.set_defaults(func=cmd_load, pattern=None)

    p = sub.add_parser("json")
    p.add_argument("file")
    p.add_argument("expr")
    p.set_defaults(func=cmd_json)

    p = sub.add_parser("wait-json")
    p.add_argument("file")
    p.add_argument("expr")
    p.add_argument("--deadline", type=float, default=10)
    p.add_argument("--show", help="expression shown when it times out")
    p.set_defaults(func=cmd_wait_json)

    p = sub.add_parser("reader")
    p.add_argument("json")
    p.add_argument("prom", nargs="?")
    p.add_argument("--stop", required=True)
    p.set_defaults(func=cmd_reader)

    p = sub.add_parser("prom-check")
    p.add_argument("json")
    p.add_argument("prom")
    p.add_argument("--after", type=float, default=0.0)
    p.add_argument("--deadline", type=float, default=5)
    p.add_argument("--promtool")
    p.add_argument("--expect", action="append")
    p.set_defaults(func=cmd_prom_check)

    p = sub.add_parser("pause")
    p.add_argument("socket")
    p.add_argument("cmd", choices=("p", "r"))
    p.add_argument("--timeout", type=float, default=30)
    p.set_defaults(func=cmd_pause)

    args = ap.parse_args()
    if args.cmd == "load" and not args.duration and not args.stop:
        die("load needs --duration or --stop")
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
