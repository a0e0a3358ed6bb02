#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/replace/race.sh's client: writes that race the replace's copier.
# Run with /usr/bin/python3 (Debian's python3-libnbd).
#
#   race.py fill PATTERN N,CHUNK,DATA_OFFSET MEMBER_FILE...
#       write PATTERN (the volume's bytes) straight into the member files
#       (members of equal size, md raid0 layout): the data the volume
#       starts with, without going through the code under test.
#
#   race.py run URI CTL N,CHUNK,DATA_OFFSET INDEX MEMBER_BYTES PATTERN
#               NEW_FILE OLD_FILE PAUSE_CTL OLD_LOG
#       The replace of member INDEX (MEMBER_BYTES: its size, data offset
#       included) has started, the server holding its copier at each
#       phase (-D stripe.replace_gate=1); the old member is an NBD export
#       behind nbdkit's log filter (OLD_LOG: each request as it arrives)
#       and pause filter (PAUSE_CTL).  race.py lets the copier go step by
#       step (the control socket CTL's "step") and, with it held at
#       "advanced" (window k-1 written, window k read and held):
#         zeroes (8K) in window k-1, a trim (8K) in window k-2, a flush,
#            where the copy has passed;
#         A  4K of new bytes into window k: it must wait for the copier
#            (else the copier writes the older bytes it read over them on
#            NEW): race.py waits until the status counts it held
#            (clients_held);
#         B  4K of new bytes into window k+1, old paused: race.py waits
#            until old's log shows it arrived (it is in flight, held
#            there), then lets the copier go: it must wait for B before
#            it takes window k+1 (else it copies what old held before).
#            A probe write into window k+1 shows the copier has announced
#            it (the probe held by it; a probe that got in first is in
#            flight on old like B, and another is sent); then the copier
#            must not have got to its next phase ("locked"); old is let
#            go, B returns, the copier takes window k+1 and is held at
#            "locked", A still held.
#       A into window 0 is written with the copier held at its second
#       "locked" (window 0 read, window 1 taken).  Then the copier is let
#       go to its end.  The whole volume must read as PATTERN with those
#       changes (the model), and NEW's data area (read directly from
#       NEW_FILE), as well as OLD_FILE's (but for the writes into the
#       last window, which may land after the switch), must hold member
#       INDEX's part of the model.  Mismatches are reported by byte range
#       of the member and what the test did there.
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import socket
import sys
import threading
import time

WINDOW = 4 * 1024 * 1024
# Where in a window (member bytes from its start) the racing writes go:
# A (+ 8K * window), B (+ 8K * window before), the probes (+ 8K * probe);
# zeroes and trims below 1M; no two overlap, the last window is 3M.
M_A = 1024 * 1024
M_B = 1536 * 1024
M_P = 2048 * 1024


sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl, replace_of  # noqa: E402
from equal_layout import Layout  # noqa: E402


def ask(path, req):
    return replace_of(ask_ctl(path, req))


def fill(argv):
    pattern, lay, files = argv[0], Layout(argv[1]), argv[2:]
    buf = open(pattern, "rb").read()
    assert len(files) == lay.n
    data_bytes = len(buf) // lay.n
    for i, f in enumerate(files):
        with open(f, "r+b") as fp:
            fp.seek(lay.doff)
            fp.write(lay.member_bytes(buf, i, data_bytes))
            fp.flush()
            os.fsync(fp.fileno())
    return 0


class Race:
    """The gated copier, m1's pause control and log, the client's writes."""

    def __init__(self, uri, ctl, pause, log):
        self.uri, self.ctl, self.pause_path, self.log = uri, ctl, pause, log
        self.free = []
        self.lock = threading.Lock()
        self.pause_sock = None

    def handle(self):
        import nbd
        with self.lock:
            if self.free:
                return self.free.pop()
        h = nbd.NBD()
        h.connect_uri(self.uri)
        return h

    def give_back(self, h):
        with self.lock:
            self.free.append(h)

    def status(self):
        return ask(self.ctl, {"op": "status"})

    def until(self, cond, what, deadline=60):
        """Poll until cond() is true (a state, not a time, is waited
        for); the deadline only keeps a broken server from hanging us."""
        end = time.monotonic() + deadline
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                raise Stuck("%s: not within %d s (status %s)"
                            % (what, deadline, json.dumps(self.status())))
            time.sleep(0.002)

    def held(self, after_seq):
        """The copier held at a phase after phase_seq after_seq."""
        def check():
            r = self.status()
            if r.get("state") in ENDS and not r.get("phase_held"):
                raise Stuck("the replace ended %s: %s"
                            % (r.get("state"), r.get("error")))
            if r.get("phase_held") and r.get("phase_seq", 0) > after_seq:
                return r
            return None
        return self.until(check, "the copier held at its next phase")

    def step(self, r):
        ans = ask_ctl(self.ctl, {"op": "step", "at": r.get("phase")})
        if ans.get("ok") is not True:
            raise Stuck("step at %s refused: %s" % (r.get("phase"),
                                                    ans.get("error")))

    def pause(self, c):
        """m1's pause filter: 'p' answered once m1 is idle, 'r'."""
        if self.pause_sock is None:
            self.pause_sock = socket.socket(socket.AF_UNIX,
                                            socket.SOCK_STREAM)
            self.pause_sock.settimeout(60)
            self.pause_sock.connect(self.pause_path)
        self.pause_sock.sendall(c.encode())
        got = self.pause_sock.recv(1)
        if got != c.upper().encode():
            raise Stuck("m1's pause filter answered %r to %r" % (got, c))

    def at_old(self, mo):
        """m1's log shows a write at member offset mo: it is in flight on
        old (the log filter is outside the pause filter)."""
        needle = " offset=%s count=" % hex(mo)
        with open(self.log) as f:
            return any(" Write id=" in ln and needle in ln for ln in f)


class Stuck(Exception):
    pass


ENDS = ("done", "failed", "cancelled")


def run(argv):
    uri, ctl, lay = argv[0], argv[1], Layout(argv[2])
    index, member_bytes = int(argv[3]), int(argv[4])
    pattern, new_file, old_file = argv[5], argv[6], argv[7]
    pause, m1_log = argv[8], argv[9]
    model = bytearray(open(pattern, "rb").read())
    data_bytes = member_bytes - lay.doff
    nwin = (data_bytes + WINDOW - 1) // WINDOW
    rc = Race(uri, ctl, pause, m1_log)
    hc = rc.handle()
    done = []          # (kind, member offset, length, window)
    problems = []
    threads = []

    def write(mo, kind, w):
        data = os.urandom(4096)
        lo = lay.logical(index, mo)
        h = rc.handle()
        h.pwrite(data, lo)
        rc.give_back(h)
        model[lo:lo + len(data)] = data
        done.append((kind, mo, len(data), w))

    def send(mo, kind, w):
        t = threading.Thread(target=write, args=(mo, kind, w), daemon=True)
        t.start()
        threads.append((t, kind, mo))
        return t

    def join(t, what):
        t.join(60)
        if t.is_alive():
            raise Stuck("%s did not return" % what)

    def wstart(k):
        return lay.doff + k * WINDOW

    def held_clients():
        return rc.status().get("clients_held", 0)

    raced_b = 0
    probes = 0
    probe_in = {}      # window: the probe writes into it
    r = None
    try:
        # To the copier's second "locked": window 0 read, window 1 taken.
        seq = 0
        locks = 0
        while True:
            r = rc.held(seq)
            seq = r["phase_seq"]
            if r.get("phase") == "locked":
                locks += 1
                if locks == 2:
                    break
            rc.step(r)
        # A into window 0, whose old bytes the copier holds: it waits.
        base = r.get("clients_held", 0)
        a_prev = [send(wstart(0) + M_A, "A", 0)]
        rc.until(lambda: held_clients() == base + 1,
                 "A into window 0 held by the copier")
        rc.step(r)
        for k in range(1, nwin):
            # Held at "advanced": window k-1 written, window k read.
            r = rc.held(seq)
            seq = r["phase_seq"]
            if (r.get("phase") != "advanced"
                    or r.get("bytes_copied") != k * WINDOW):
                raise Stuck("window %d: held at %s with %s bytes copied"
                            % (k, r.get("phase"), r.get("bytes_copied")))
            # Released with window k-1: A into it, the probes into it.
            for t in a_prev + probe_in.pop(k - 1, []):
                join(t, "a write into window %d" % (k - 1))
            # Where the copy has passed: zeroes, a trim, a flush.
            mo = wstart(k - 1) + (k * 64 + 20) * 1024
            lo = lay.logical(index, mo)
            hc.zero(8192, lo)
            model[lo:lo + 8192] = bytes(8192)
            done.append(("zero", mo, 8192, k))
            if k >= 2:
                mo = wstart(k - 2) + (k * 64 + 36) * 1024
                lo = lay.logical(index, mo)
                hc.trim(8192, lo)
                model[lo:lo + 8192] = bytes(8192)
                done.append(("trim", mo, 8192, k))
            hc.flush()
            base = held_clients()
            # A into window k, which the copier holds read: it waits.
            a_prev = [send(wstart(k) + M_A + 8192 * k, "A", k)]
            rc.until(lambda: held_clients() == base + 1,
                     "A into window %d held by the copier" % k)
            if k + 1 == nwin:
                rc.step(r)
                continue
            rc.pause("p")
            # B into window k+1: in flight on old (held by m1's pause).
            b_mo = wstart(k + 1) + M_B + 8192 * k
            tb = send(b_mo, "B", k)
            rc.until(lambda: rc.at_old(b_mo),
                     "B into window %d in flight on old" % (k + 1))
            rc.step(r)
            # The copier now announces window k+1 and must wait for B.
            # A probe write into window k+1 shows when it has: held by
            # the window (clients_held), or else, in flight on old like
            # B (it got in first), the next probe.
            while True:
                p_mo = wstart(k + 1) + M_P + 8192 * probes
                probes += 1
                if probes > 60:
                    raise Stuck("window %d never announced" % (k + 1))
                probe_in.setdefault(k + 1, []).append(
                    send(p_mo, "probe", k))

                def settled():
                    if held_clients() == base + 2:
                        return "held"
                    if rc.at_old(p_mo):
                        return "flight"
                    return None
                if rc.until(settled, "a probe into window %d settled"
                            % (k + 1)) == "held":
                    break
            r2 = rc.status()
            if r2.get("phase_seq") != seq or not tb.is_alive():
                problems.append("window %d: the copier went on (phase %s, "
                                "%s) with B in flight on old"
                                % (k + 1, r2.get("phase"),
                                   r2.get("phase_seq")))
            else:
                raced_b += 1
            rc.pause("r")
            join(tb, "B into window %d" % (k + 1))
            r = rc.held(seq)
            seq = r["phase_seq"]
            if r.get("phase") != "locked" or not a_prev[0].is_alive():
                problems.append("window %d: after B, the copier at %s, A "
                                "%s" % (k + 1, r.get("phase"),
                                        "held" if a_prev[0].is_alive()
                                        else "returned"))
            rc.step(r)
        # Let the copier go to the end.
        while True:
            r = rc.status()
            if r.get("state") in ENDS and not r.get("phase_held"):
                break
            if r.get("phase_held"):
                rc.step(r)
            else:
                time.sleep(0.002)
        for t, kind, mo in threads:
            join(t, "%s at %d" % (kind, mo))
    except Stuck as e:
        print("race: " + str(e), file=sys.stderr)
        print(json.dumps({"stuck": str(e)}))
        try:
            rc.pause("r")
        except (OSError, Stuck):
            pass
        sys.stdout.flush()
        os._exit(1)
    st = r.get("state")
    handles = [hc] + rc.free
    for h in handles:
        h.flush()

    if st != "done":
        problems.append("the replace ended %s: %s" % (st, r.get("error")))
    # The volume, now on NEW.
    h = handles[0]
    size = h.get_size()
    got = bytearray()
    for off in range(0, size, 4 << 20):
        got += h.pread(min(4 << 20, size - off), off)
    for h in handles:
        h.shutdown()

    def explain(mo, n):
        hits = [d for d in done if d[1] < mo + n and mo < d[1] + d[2]]
        return ", ".join("%s of window %d at %d+%d" % (k, w, m, l)
                         for k, m, l, w in hits) or "no write of the test"

    # The copier's last window: a write into it (A into it, or B into it
    # from the window before) waits for it, then for the switch, and
    # may land on NEW alone.  So may anything sent while the copy was in
    # its last window (the zeroes and the trim too): the switch holds it
    # and lets it go to NEW alone.  Everything sent before that has ended
    # before the copier is done with the last window.
    last_a = lay.doff + (data_bytes - 1) // WINDOW * WINDOW
    last_w = (data_bytes - 1) // WINDOW

    def after_switch(mo, n):
        return any(((d[0] in ("A", "B", "probe") and d[1] + d[2] > last_a)
                    or d[3] == last_w)
                   and d[1] < mo + n and mo < d[1] + d[2] for d in done)

    def compare(what, buf, want, skip=None):
        bad = 0
        pos = 0
        while pos < len(want):
            n = min(4096, len(want) - pos)
            if skip and skip(lay.doff + pos, n):
                pass
            elif buf[pos:pos + n] != want[pos:pos + n]:
                bad += 1
                if bad <= 10:
                    problems.append("%s: member %d bytes %d+%d differ (%s)"
                                    % (what, index, lay.doff + pos, n,
                                       explain(lay.doff + pos, n)))
            pos += n
        return bad

    if got != model:
        for lo in range(0, size, 4096):
            if got[lo:lo + 4096] != model[lo:lo + 4096]:
                problems.append("the volume: logical bytes %d+4096 differ"
                                % lo)
                break
    want = lay.member_bytes(model, index, data_bytes)
    with open(new_file, "rb") as f:
        f.seek(lay.doff)
        compare("NEW", f.read(data_bytes), want)
    with open(old_file, "rb") as f:
        f.seek(lay.doff)
        compare("old", f.read(data_bytes), want, after_switch)

    summary = {
        "windows": nwin,
        "writes_A": sum(1 for d in done if d[0] == "A"),
        "writes_B": sum(1 for d in done if d[0] == "B"),
        "raced_B": raced_b,
        "probes": probes,
        "zeroes": sum(1 for d in done if d[0] == "zero"),
        "trims": sum(1 for d in done if d[0] == "trim"),
        "state": st,
    }
    print(json.dumps(summary))
    for p in problems:
        print("race: " + p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if argv and argv[0] == "fill" and len(argv) >= 4:
        return fill(argv[1:])
    if argv and argv[0] == "run" and len(argv) == 11:
        return run(argv[1:])
    print("usage: race.py fill ... | race.py run ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    # Out without the libraries' exit-time destructors: request threads
    # may still be failing on a server the test killed, and libnbd 1.14
    # (Debian 12) loses such a thread's error once its destructor has
    # deleted the error key, then aborts in the %DEAD state on
    # "assert (nbd_get_error ())" (libnbd commit 368e3d0, fixed in
    # 1.15.12).  It aborted a passing run of this script once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
