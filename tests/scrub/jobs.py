#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The driver of tests/scrub/jobs.sh: jobs started while others run, on a
# served volume (its copier held phase by phase: -D stripe.replace_gate=1),
# a writer checked against a model of the volume, and a scrub's findings
# checked against where the layouts put the unreadable blocks.
#
#   jobs.py CTL URI TMP PATTERN BADS
#
# BADS: "I:AT:LEN,..." the unreadable member ranges (member I, member
# offset AT), unreadable while TMP/armed exists.  The layout arithmetic
# is md raid0's for equal members, written here apart from the plugin's:
# member offset MO (rel = MO - DO) of the layout's member j of N holds
# logical byte (rel / C) * N * C + j * C + rel % C.
#
# Prints one line per check ("ok: ..." or "FAIL: ..."); exit 1 when any
# failed.

import json
import os
import random
import sys
import time

import nbd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl  # noqa: E402

K, M = 1024, 1024 * 1024
C = 64 * K
DO = M


def map_shift(size):
    """The allocation map's regions (include/alloc.h): the smallest power
    of two from 64 KiB that cuts the volume into at most 4096, at most 4
    MiB."""
    s = 16
    while s < 22 and (size - 1) >> s >= 4096:
        s += 1
    return s
DATA = 8 * M          # each member's data area
DEADLINE = 60

ctl, uri, tmp, pattern, bads_arg = sys.argv[1:6]
ARMED = os.path.join(tmp, "armed")
bads = [tuple(int(x) for x in b.split(":")) for b in bads_arg.split(",")]
problems = []


def ok(msg):
    print("ok: " + msg, flush=True)


def bad(msg):
    print("FAIL: " + msg, flush=True)
    problems.append(msg)


def ask(req):
    return ask_ctl(ctl, req)


def status():
    return ask({"op": "status"})["status"]


def until(what, pred, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        st = status()
        if pred(st):
            return st
        time.sleep(0.01)
    bad("%s: not within %d s: %s" % (what, deadline, json.dumps(st)[:800]))
    raise SystemExit(1)


def hold(key, phase, nth=1):
    """Step the job's copier (status key) until it is held at phase for
    the nth time, counted from now; its status object."""
    seen, n = None, 0
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        j = status().get(key) or {}
        if j.get("state") in ("done", "failed", "cancelled", "paused"):
            bad("%s ended (%s) before %s:%d: %s"
                % (key, j.get("state"), phase, nth, j.get("error")))
            raise SystemExit(1)
        if j.get("phase_held") and j.get("phase_seq") != seen:
            seen = j["phase_seq"]
            if j.get("phase") == phase:
                n += 1
                if n == nth:
                    return j
            ask({"op": "step", "at": j["phase"]})
            continue
        time.sleep(0.005)
    bad("%s never held at %s:%d" % (key, phase, nth))
    raise SystemExit(1)


def run_to_end(key):
    """Let the held copier go phase by phase to its end: its state."""
    seen = None
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        j = status().get(key) or {}
        if j.get("state") in ("done", "failed", "cancelled", "paused") \
                and not j.get("phase_held"):
            return j
        if j.get("phase_held") and j.get("phase_seq") != seen:
            seen = j["phase_seq"]
            try:
                ask({"op": "step", "at": j["phase"]})
            except (OSError, ValueError):
                pass
            continue
        time.sleep(0.005)
    bad("%s did not end" % key)
    raise SystemExit(1)


def expect_refused(req, words, label):
    a = ask(req)
    why = a.get("error") or ""
    if a.get("ok") is False and words in why:
        ok("%s refused, naming the job under way: %s" % (label, why))
    else:
        bad("%s: expected a refusal with %r, got %s" % (label, words, a))


class Writer:
    """Writes random blocks through the volume, every byte in a model."""

    def __init__(self, size):
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        with open(pattern, "rb") as f:
            self.model = bytearray(f.read())
        self.size = size
        self.rnd = random.Random(34)
        # The allocation map's regions written (a region the volume's
        # grow added is free until a write reaches it: a scrub skips it).
        self.shift = map_shift(size)
        self.used = set()

    def write(self, n, lim=None):
        lim = lim or self.size
        for _ in range(n):
            length = self.rnd.choice((4, 8, 64, 72, 200)) * K
            off = self.rnd.randrange(0, (lim - length) // (4 * K)) * 4 * K
            buf = bytes([self.rnd.randrange(256)]) * length
            self.h.pwrite(buf, off)
            self.model[off:off + length] = buf
            self.used.update(range(off >> self.shift,
                                   ((off + length - 1) >> self.shift) + 1))

    def in_use(self, lim):
        """Whether logical byte l is in a region in use: below lim (the
        volume as created, every region in use), or written since."""
        return lambda l: l < lim or (l >> self.shift) in self.used

    def check(self, label, lim=None):
        lim = lim or self.size
        h = nbd.NBD()
        h.connect_uri(uri)
        got = bytearray()
        for off in range(0, lim, 4 * M):
            got += h.pread(min(4 * M, lim - off), off)
        h.shutdown()
        if got == self.model[:lim]:
            ok("%s: the volume holds the model (%d bytes)" % (label, lim))
        else:
            first = next(i for i in range(lim) if got[i] != self.model[i])
            bad("%s: the volume differs from the model at %d" % (label, first))

    def reconnect(self, size):
        """The volume's new size is seen by a new connection (NBD has no
        resize notice)."""
        self.h.shutdown()
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.size = size
        # The room a grow adds reads as zeros.
        self.model += bytes(max(0, size - len(self.model)))

    def close(self):
        self.h.shutdown()


def unmap(j, n, rel):
    return (rel // C) * n * C + j * C + rel % C


def expected(views):
    """The scrub's logical ranges: each unreadable 4K block of BADS through
    the first view (map, size, covers) that has its member and takes its
    logical byte; merged, sorted."""
    out = []
    for i, at, length in bads:
        for b in range(at, at + length, 4 * K):
            rel = b - DO
            for members, size, covers in views:
                if i not in members:
                    continue
                l = unmap(members.index(i), len(members), rel)
                if l < size and covers(l):
                    out.append((l, 4 * K))
                    break
    out.sort()
    merged = []
    for l, n in out:
        if merged and merged[-1][0] + merged[-1][1] == l:
            merged[-1] = (merged[-1][0], merged[-1][1] + n)
        else:
            merged.append((l, n))
    return merged


def scrub_finds(label, views, writer, lim=None):
    """Arm the bad blocks, scrub (the writer at work as it starts), and
    check its logical ranges against the views."""
    open(ARMED, "w").close()
    a = ask({"op": "scrub", "rate": 0})
    if not a.get("ok"):
        bad("%s: scrub refused: %s" % (label, a))
        raise SystemExit(1)
    writer.write(40, lim)
    st = until(label + ": scrub ends",
               lambda s: (s.get("scrub") or {}).get("state") != "running")
    os.unlink(ARMED)
    sc = st["scrub"]
    got = [(r["offset"], r["length"]) for r in sc["unreadable"]]
    want = expected(views)
    if sc["state"] == "done" and got == want:
        ok("%s: the scrub reports exactly %s" % (label, want))
    else:
        bad("%s: scrub %s, unreadable %s, expected %s"
            % (label, sc["state"], got, want))
    return sc


def slow_scrub(label):
    a = ask({"op": "scrub", "rate": 4 * M})
    if not a.get("ok"):
        bad("%s: a slow scrub refused: %s" % (label, a))
        raise SystemExit(1)


def cancel_scrub(label):
    """The slow scrub, still running (the job beside it did not end it),
    cancelled."""
    if status()["scrub"]["state"] == "running":
        ok("%s: the scrub was running all along" % label)
    else:
        bad("%s: the scrub ended meanwhile" % label)
    ask({"op": "scrub_cancel"})
    until(label + ": the scrub cancelled",
          lambda s: s["scrub"]["state"] == "cancelled")


def start(req, label):
    a = ask(req)
    if not a.get("ok"):
        bad("%s: refused: %s" % (label, a))
        raise SystemExit(1)
    return a


def ended_done(key, label):
    st = run_to_end(key)
    if st["state"] == "done":
        ok("%s: done" % label)
    else:
        bad("%s: ended %s: %s" % (label, st["state"], st.get("error")))
        raise SystemExit(1)


def main():
    three, four = [0, 1, 2], [0, 1, 2, 3]
    vol3 = 3 * DATA
    w = Writer(vol3)

    # ---- 1. a grow 3 -> 4 started beside a slow scrub, held half-way:
    # every other job refused, naming the grow; a scrub maps through both
    # layouts.
    slow_scrub("grow")
    start({"op": "reshape", "kind": "grow", "new": [os.environ["M3"]],
           "rate": 1 << 30}, "a grow beside a scrub")
    g = hold("reshape", "advanced", 2)
    wm = g["bytes_copied"]
    ok("a grow started beside a scrub, held half-way: position %d of %d"
       % (wm, vol3))
    words = "a grow is under way (3 -> 4 members, %d%% done)" \
        % (wm * 100 // vol3)
    expect_refused({"op": "reshape", "kind": "grow",
                    "new": [os.path.join(tmp, "m4")]},
                   "grow refused: " + words, "a second grow")
    expect_refused({"op": "reshape", "kind": "shrink", "member": 0,
                    "size": 2 * DATA, "force": True},
                   "shrink refused: " + words, "a shrink")
    expect_refused({"op": "reshape", "kind": "size"},
                   "grow --size refused: " + words, "a grow --size")
    expect_refused({"op": "replace", "member": 2,
                    "new": os.path.join(tmp, "new2")},
                   "replace refused: " + words, "a replace")
    expect_refused({"op": "scrub"}, "scrub refused: a scrub is under way (",
                   "a second scrub")
    w.write(40)
    cancel_scrub("a grow beside a scrub")
    scrub_finds("scrub during a grow", [
        (four, vol3, lambda l: l < wm),
        (three, vol3, lambda l: l >= wm)], w)
    w.check("the grow held, after the scrub")
    ended_done("reshape", "the grow")
    w.write(40)
    w.check("after the grow")

    # ---- 2. a replace (onto a bigger device) and a grow --size beside
    # scrubs, a shrink 4 -> 3 started beside one and held half-way: a
    # scrub maps through both layouts, backward.
    slow_scrub("replace")
    start({"op": "replace", "member": 0, "new": os.path.join(tmp, "new0"),
           "rate": 1 << 30}, "a replace beside a scrub")
    hold("replace", "advanced", 1)
    w.write(40)
    ended_done("replace", "a replace beside a scrub")
    cancel_scrub("a replace beside a scrub")
    w.check("after a replace beside a scrub")
    start({"op": "reshape", "kind": "size", "rate": 1 << 30}, "grow --size")
    hold("reshape", "published")
    slow_scrub("grow --size")
    w.write(40)
    ended_done("reshape", "a grow --size with a scrub started beside it")
    vol_size = status()["reshape"]["size_to"]
    w.check("after a grow --size (%d bytes) beside a scrub" % vol_size)
    # The size the shrink gives the volume, from its plan.
    plan = start({"op": "reshape", "kind": "shrink", "member": 3,
                  "size": 1, "force": True, "dry_run": True},
                 "shrink --dry-run")["plan"]
    small = plan["size_to"]
    start({"op": "reshape", "kind": "shrink", "member": 3, "size": small,
           "force": True, "rate": 1 << 30}, "a shrink beside a scrub")
    g = hold("reshape", "advanced", 1)
    wm = g["bytes_copied"]
    ok("a shrink started beside a scrub, held half-way: %d of %d bytes "
       "moved from the end" % (wm, small))
    expect_refused({"op": "replace", "member": 1,
                    "new": os.path.join(tmp, "new2")},
                   "replace refused: a shrink is under way (4 -> 3 members, "
                   "%d%% done)" % (wm * 100 // small), "a replace")
    w.write(40, vol3)
    cancel_scrub("a shrink beside a scrub")
    scrub_finds("scrub during a shrink", [
        (three, small, lambda l: l >= small - wm),
        (four, small, lambda l: l < small - wm)], w, vol3)
    w.check("the shrink held, after the scrub")
    ended_done("reshape", "the shrink")
    w.check("after the shrink")

    # ---- 3. a replace held half-way: a scrub maps through the volume's
    # layout (the replace moves no byte of it).
    start({"op": "replace", "member": 2, "new": os.path.join(tmp, "new2"),
           "rate": 1 << 30}, "a replace")
    hold("replace", "advanced", 1)
    scrub_finds("scrub during a replace", [(three, small, lambda l: True)], w)
    ended_done("replace", "a replace with a scrub beside it")
    w.check("after a replace with a scrub beside it")
    w.close()


def main_spare():
    """The automatic replace onto a spare (on_failing = "replace"),
    refused during a grow, then beside scrubs."""
    two, three = [0, 1], [0, 1, 2]
    vol2, vol3 = 2 * DATA, 3 * DATA
    w = Writer(vol2)

    # ---- 1. a grow 2 -> 3 held half-way; a scrub maps through both
    # layouts and makes member 1 failing: its replace onto the spare
    # waits, refused, naming the grow.
    start({"op": "reshape", "kind": "grow", "new": [os.environ["M2"]],
           "rate": 1 << 30}, "a grow")
    g = hold("reshape", "advanced", 1)
    wm = g["bytes_copied"]
    ok("a grow held half-way: position %d of %d" % (wm, vol2))
    scrub_finds("scrub during a grow", [
        (three, vol2, lambda l: l < wm),
        (two, vol2, lambda l: l >= wm)], w)
    words = ("replace onto a spare refused: a grow is under way (2 -> 3 "
             "members, %d%% done)" % (wm * 100 // vol2))
    st = until("on_failing waits for the grow",
               lambda s: (s.get("on_failing") or {}).get("last")
               and s["on_failing"]["last"].get("state") == "waiting"
               and words in (s["on_failing"]["last"].get("reason") or ""))
    ok("member 1 failing: its replace onto the spare waits: %s"
       % st["on_failing"]["last"]["reason"])

    # ---- 2. a slow scrub; the grow ends and the replace onto the spare
    # starts beside the scrub, held half-way: the others refused naming
    # it; a scrub maps through the volume's layout meanwhile.
    slow_scrub("spare")
    ended_done("reshape", "the grow")
    w.reconnect(vol3)
    # Held before its first window (one without a rate reads the next
    # ahead, which a client write would wait for while it is held).
    r = hold("replace", "drained", 1)
    if r.get("automatic") is True and r.get("member") == 1:
        ok("the replace of member 1 onto the spare started beside a scrub")
    else:
        bad("not the replace onto the spare: %s" % json.dumps(r)[:400])
    spare = "a replace of member 1 onto a spare is under way ("
    expect_refused({"op": "replace", "member": 0,
                    "new": os.path.join(tmp, "new0")},
                   "replace refused: " + spare, "a replace")
    expect_refused({"op": "reshape", "kind": "size"},
                   "grow --size refused: " + spare, "a grow --size")
    expect_refused({"op": "scrub"}, "scrub refused: a scrub is under way (",
                   "a second scrub")
    w.write(40)
    cancel_scrub("the replace onto a spare beside a scrub")
    # The room the grow added is free (the allocation map) but where the
    # writer wrote since: the scrub does not read it.
    scrub_finds("scrub during the replace onto a spare",
                [(three, vol3, w.in_use(vol2))], w)
    ended_done("replace", "the replace onto the spare")
    w.check("after the replace onto the spare")
    w.close()


try:
    main_spare() if os.environ.get("JOBS_SPARE") else main()
except SystemExit:
    pass
sys.exit(1 if problems else 0)
