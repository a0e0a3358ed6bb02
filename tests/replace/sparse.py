#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/replace/sparse.sh's client: a sparse volume (the allocation map,
# include/alloc.h), a model of its bytes, and the checks.  Run with
# /usr/bin/python3 (Debian's python3-libnbd).
#
# The model is two files: MODEL, the volume's bytes as the client wrote
# them (zeros where never written or trimmed), and MODEL.maybe, the 4K
# blocks a trim covered only in part of a region (the plugin trims those
# as a member does, and NBD leaves what a trim reads back to the server):
# each of them reads either as MODEL says or as zeros.  A trim's whole
# 64K regions are in MODEL as zeros: a free region reads zeros, the
# feature's promise.
#
#   sparse.py fill URI MODEL
#       trim the whole volume, write random bytes to about 10% of it (64K
#       writes at scattered 64K-aligned offsets), flush; MODEL written.
#
#   sparse.py race URI CTL MODEL KEY [INDEX N,CHUNK,DATA_OFFSET]
#       the job under KEY of the control socket's status ("replace", or
#       "reshape": a grow's or a shrink's) has been started: two
#       connections write and trim (whole regions, and ranges that cut
#       regions) in groups of 4 regions each owns (no two requests in
#       flight overlap; half the volume's groups, the others left as they
#       are), the volume's data kept near 10%, until the job has ended; a
#       flush on each; MODEL updated.  The job must end
#       "done".  INDEX (a replace): the requests' chunks on member INDEX
#       are counted below and above the copy's watermark when sent.
#
#   sparse.py check URI MODEL N,CHUNK,DATA_OFFSET MEMBER_FILE...
#       every byte of the volume read through NBD is the model's (beyond
#       MODEL's size: zeros); every member file (in role order) holds the
#       model where the layout (tests/lib/equal_layout.py) puts it, read
#       straight from the files; each member's allocated bytes (st_blocks)
#       are at most 1.2 x the bytes of its chunks that hold data in the
#       model + 1 MiB (the metadata area), a bound that a member written
#       in full would exceed.
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import random
import sys
import threading
import time

K = 1024
M = K * K
REGION = 64 * K
BLOCK = 4 * K
GROUP = 4 * REGION              # a connection's unit of ownership
PIECE = 4 * M                   # reads through NBD
ENDS = ("done", "failed", "cancelled")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl, replace_of  # noqa: E402
from equal_layout import Layout  # noqa: E402

ZERO_REGION = bytes(REGION)


def connect(uri):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    return h


def load(path):
    model = bytearray(open(path, "rb").read())
    with open(path + ".maybe") as f:
        maybe = set(json.load(f))
    return model, maybe


def save(path, model, maybe):
    with open(path, "wb") as f:
        f.write(model)
    with open(path + ".maybe", "w") as f:
        json.dump(sorted(maybe), f)


def fill(uri, path):
    h = connect(uri)
    size = h.get_size()
    h.trim(size, 0)
    h.flush()
    rnd = random.Random(os.getpid())
    regions = size // REGION
    model = bytearray(size)
    for r in rnd.sample(range(regions), regions // 10):
        data = os.urandom(REGION)
        h.pwrite(data, r * REGION)
        model[r * REGION:(r + 1) * REGION] = data
    h.flush()
    h.shutdown()
    save(path, model, set())
    print(json.dumps({"size": size, "regions_written": regions // 10}))
    return 0


def job_of(ctl, key):
    return replace_of(ask_ctl(ctl, {"op": "status"}), key) or {}


class Racer:
    """One connection writing and trimming in the groups it owns."""

    def __init__(self, uri, shared, groups, seed):
        self.h = connect(uri)
        self.shared = shared    # model, maybe, lock, used (bytes of data)
        self.model, self.maybe = shared["model"], shared["maybe"]
        self.lock = shared["lock"]
        self.groups = groups
        self.rnd = random.Random(seed)
        self.counts = {"write": 0, "trim_whole": 0, "trim_partial": 0}
        self.error = None

    def holds_data(self, g):
        with self.lock:
            return any(self.model[g * GROUP:(g + 1) * GROUP])

    def one(self):
        rnd = self.rnd
        kind = rnd.random()
        # Near 10% of the volume holding data: write while below it.
        write = kind < 0.5 and self.used_fraction() < 0.11
        # Trims where there is data, as a file system trims what it
        # freed: the regions never written are never trimmed again, so
        # that a copy of them (a move that ignored the map) shows.
        for _ in range(64):
            g = rnd.choice(self.groups)
            if write or self.holds_data(g):
                break
        else:
            write = True        # none of its groups found holding data
        base = g * GROUP
        if write:
            first = rnd.randrange(4)
            n = rnd.randint(1, 4 - first)
            off, length = base + first * REGION, n * REGION
            data = os.urandom(length)
            self.h.pwrite(data, off)
            self.apply(off, length, data)
            self.counts["write"] += 1
        elif kind < 0.75:
            first = rnd.randrange(4)
            n = rnd.randint(1, 4 - first)
            off, length = base + first * REGION, n * REGION
            self.h.trim(length, off)
            self.apply(off, length, None)
            self.counts["trim_whole"] += 1
        else:
            # 4K-aligned, cutting a region at one end at least: a part of
            # a region, or whole regions with ragged ends.
            while True:
                a = rnd.randrange(GROUP // BLOCK)
                b = rnd.randrange(a + 1, GROUP // BLOCK + 1)
                off, length = base + a * BLOCK, (b - a) * BLOCK
                if off % REGION or length % REGION:
                    break
            self.h.trim(length, off)
            self.apply(off, length, None)
            self.counts["trim_partial"] += 1
        return base, off, length

    def used_fraction(self):
        with self.lock:
            return self.shared["used"] / len(self.model)

    def apply(self, off, length, data):
        """The model after a request that has returned: a write's bytes; a
        trim's whole regions zeros, its parts of regions maybe zeros."""
        end = off + length
        with self.lock:
            before = region_bytes(self.model, off, end)
            if data is not None:
                self.model[off:end] = data
                self.maybe.difference_update(range(off // BLOCK,
                                                   end // BLOCK))
            else:
                a = (off + REGION - 1) // REGION * REGION
                b = end // REGION * REGION
                if a < b:
                    self.model[a:b] = bytes(b - a)
                    self.maybe.difference_update(range(a // BLOCK,
                                                       b // BLOCK))
                else:
                    a = b = off
                self.maybe.update(range(off // BLOCK, a // BLOCK))
                self.maybe.update(range(b // BLOCK, end // BLOCK))
            self.shared["used"] += region_bytes(self.model, off, end) - before


def region_bytes(model, off, end):
    """Bytes of the regions touching [off, end) that hold data."""
    n = 0
    for r in range(off // REGION, (end + REGION - 1) // REGION):
        if model[r * REGION:(r + 1) * REGION] != ZERO_REGION:
            n += REGION
    return n


def race(uri, ctl, path, key, index, lay):
    model, maybe = load(path)
    lock = threading.Lock()
    shared = {"model": model, "maybe": maybe, "lock": lock,
              "used": region_bytes(model, 0, len(model))}
    groups = len(model) // GROUP
    # Half the volume raced (groups 0 and 1 modulo 4, one connection
    # each), the rest left as fill wrote it: what a move that ignored the
    # map would have allocated there shows in the members' st_blocks.
    racers = [Racer(uri, shared, [g for g in range(groups) if g % 4 == t],
                    os.getpid() + t)
              for t in range(2)]
    state = {"copying": 0, "below": 0, "above": 0, "polls": 0}
    seen = {"state": None, "copied": 0}
    stop = threading.Event()
    deadline = time.monotonic() + 120

    def poll():
        j = job_of(ctl, key)
        with lock:
            state["polls"] += 1
            seen["state"] = j.get("state")
            seen["copied"] = j.get("bytes_copied", 0)
        return j

    def loop(rc):
        try:
            k = 0
            while not stop.is_set():
                if k % 8 == 0:
                    j = poll()
                    if j.get("state") in ENDS:
                        stop.set()
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("the %s did not end within 120 s: "
                                           "%s" % (key, json.dumps(j)))
                with lock:
                    copying = seen["state"] not in ENDS
                    copied = seen["copied"]
                base, off, length = rc.one()
                k += 1
                if not copying:
                    continue
                with lock:
                    state["copying"] += 1
                    if index is None:
                        continue
                    # The member's chunks this request touched: below or
                    # above the watermark when it was sent.
                    for c in range(off // lay.chunk,
                                   (off + length - 1) // lay.chunk + 1):
                        if c % lay.n != index:
                            continue
                        rel = (c // lay.n) * lay.chunk
                        state["below" if rel < copied else "above"] += 1
            rc.h.flush()
        except Exception as e:          # reported, and the others stop
            rc.error = "%s: %s" % (type(e).__name__, e)
            stop.set()

    first = poll()
    if first.get("state") is None:
        print("race: no %s in the status" % key, file=sys.stderr)
        return 1
    threads = [threading.Thread(target=loop, args=(rc,)) for rc in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = poll()
    save(path, model, maybe)
    counts = {k: sum(rc.counts[k] for rc in racers) for k in racers[0].counts}
    summary = dict(counts, state=end.get("state"),
                   requests_while_moving=state["copying"],
                   data_bytes=shared["used"], maybe_blocks=len(maybe),
                   bytes_copied=end.get("bytes_copied"),
                   bytes_total=end.get("bytes_total"))
    if index is not None:
        summary["member_chunks_below_watermark"] = state["below"]
        summary["member_chunks_above_watermark"] = state["above"]
    print(json.dumps(summary))
    problems = [rc.error for rc in racers if rc.error]
    if end.get("state") != "done":
        problems.append("the %s ended %s: %s" % (key, end.get("state"),
                                                  end.get("error")))
    for p in problems:
        print("race: " + p, file=sys.stderr)
    return 1 if problems else 0


def explain_block(lo, got, model, maybe):
    """Whether 4K block lo (a logical offset) of got is allowed."""
    want = model[lo:lo + BLOCK] if lo < len(model) else bytes(BLOCK)
    if got == want:
        return True
    return lo // BLOCK in maybe and got == bytes(BLOCK)


def describe(got, want):
    if got == bytes(len(got)):
        return "zeros, the model holds data"
    if want == bytes(len(want)):
        return "data, the model holds zeros"
    return "data other than the model's"


def check(uri, path, lay, files):
    model, maybe = load(path)
    problems = []
    shown = {}                  # what: the blocks found wrong
    h = connect(uri)
    size = h.get_size()

    def want_at(lo, n):
        w = bytes(model[lo:lo + n])
        return w + bytes(n - len(w))

    def compare(what, got, lo, where):
        """got: logical bytes [lo, lo + len(got)); where(k) names got[k]."""
        want = want_at(lo, len(got))
        if got == want:
            return 0
        bad = 0
        for o in range(0, len(got), BLOCK):
            g = got[o:o + BLOCK]
            if not explain_block(lo + o, g, model, maybe):
                bad += 1
                shown[what] = shown.get(what, 0) + 1
                if shown[what] <= 5:
                    problems.append("%s: %s: %s" % (
                        what, where(o),
                        describe(g, want[o:o + BLOCK])))
        return bad

    bad_volume = 0
    for lo in range(0, size, PIECE):
        n = min(PIECE, size - lo)
        bad_volume += compare("the volume", h.pread(n, lo), lo,
                              lambda k, lo=lo: "logical bytes %d+4096"
                              % (lo + k))
    h.shutdown()
    if len(model) > size and any(model[size:]):
        problems.append("the model holds data beyond the volume's %d bytes"
                        % size)

    members = []
    for i, f in enumerate(files):
        st = os.stat(f)
        data_bytes = (st.st_size - lay.doff) // lay.chunk * lay.chunk
        bad = 0
        share = 0
        with open(f, "rb") as fp:
            fp.seek(lay.doff)
            buf = fp.read(data_bytes)
        for rel in range(0, data_bytes, lay.chunk):
            lo = lay.logical(i, lay.doff + rel)
            got = buf[rel:rel + lay.chunk]
            if want_at(lo, lay.chunk) != bytes(lay.chunk):
                share += lay.chunk
            bad += compare(os.path.basename(f), got, lo,
                           lambda k, rel=rel, lo=lo:
                           "member offset %d+4096 (logical %d)"
                           % (lay.doff + rel + k, lo + k))
        allocated = st.st_blocks * 512
        bound = int(1.2 * share) + M
        ok = allocated <= bound
        if not ok:
            problems.append("%s: %d bytes allocated, more than 1.2 x its "
                            "%d bytes of data + 1 MiB (%d)"
                            % (os.path.basename(f), allocated, share, bound))
        if bound >= data_bytes:
            problems.append("%s: the bound %d is no test: a member written "
                            "in full (%d bytes) would pass it"
                            % (os.path.basename(f), bound, data_bytes))
        members.append({"file": os.path.basename(f), "data": share,
                        "allocated": allocated, "bound": bound,
                        "full": data_bytes, "bad_blocks": bad,
                        "sparse": ok and bound < data_bytes})
    for what, n in shown.items():
        if n > 5:
            problems.append("%s: %d blocks of 4K wrong in all" % (what, n))
    print(json.dumps({"size": size, "bad_blocks": bad_volume,
                      "maybe_blocks": len(maybe), "members": members}))
    for p in problems:
        print("check: " + p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if len(argv) == 3 and argv[0] == "fill":
        return fill(argv[1], argv[2])
    if len(argv) in (5, 7) and argv[0] == "race":
        index = lay = None
        if len(argv) == 7:
            index, lay = int(argv[5]), Layout(argv[6])
        return race(argv[1], argv[2], argv[3], argv[4], index, lay)
    if len(argv) >= 5 and argv[0] == "check":
        return check(argv[1], argv[2], Layout(argv[3]), argv[4:])
    print("usage: sparse.py fill URI MODEL | race URI CTL MODEL KEY "
          "[INDEX N,CHUNK,DATA_OFFSET] | check URI MODEL N,CHUNK,DATA_OFFSET "
          "MEMBER_FILE...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    # Out without the libraries' exit-time destructors (race.py says why).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
