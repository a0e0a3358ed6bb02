#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/reshape/phases.sh's client: client requests in flight across every
# phase boundary of a grow or a shrink, made to happen, not hoped for.
# Run with /usr/bin/python3 (Debian's python3-libnbd).
#
#   phases.py run URI CTL STATE [--kill PHASE:NTH --server-pid PID]
#       The server holds the reshape's copier at each phase
#       (-D stripe.replace_gate=1: published, drained, locked, recorded,
#       journaled, advanced, copied, quiesced, metadata, config).  At each
#       one a batch of requests is sent, each on a connection of its own:
#       writes, FUA writes, write-zeroes and trims just below, in and just
#       above where the copy is (the windows being moved, the critical
#       section at the start of a grow or the end of a shrink), and
#       elsewhere; reads of ranges no request in flight touches (checked
#       against the model when they complete); a flush.  The phase is let
#       go only once every request sent so far has completed or is held by
#       the plugin (the status's clients_held), so that each one is in
#       flight across the boundary that follows.
#
#       --kill PHASE:NTH: the NTH time the copier is held at PHASE, a batch
#       is sent and waited for (completed or held), a second one sent, and
#       the server killed (SIGKILL).  Requests not completed are uncertain:
#       each 4 KiB block holds what it held before or after them.
#
#       --cancel PHASE:NTH (with --nbdstripe BIN --config CONF): the NTH
#       time the copier is held at PHASE, a batch is sent, and
#       `nbdstripe grow --cancel` (shrink's) pauses the reshape with the
#       batch in flight across it.  Paused: the status says so and how to
#       go on, a second cancel and a replace are refused, requests all
#       over the volume are served; then `nbdstripe grow --wait CONF` goes on, held at
#       every phase as before, to its end (exit 0).
#
#       --fail PHASE:NTH FILE: no batches before it; the NTH time the
#       copier is held at PHASE, FILE is created (a member's error filter
#       fails every request from then on) and the reshape goes on: it
#       must pause (paused_by "error") naming FILE's member (--member)
#       and the way on.  Paused: requests above where the copy is are
#       served (each either fails, EIO, or holds the model: the window
#       stopped half-written, whose bytes are in the journal); FILE is
#       removed and `grow --wait` goes on as with --cancel.
#
#       --fail ... --index I --maps OLD:NEW: the member failing is member
#       I, one the volume has now (not the new one); OLD and NEW the
#       layouts' members (union indices, "0,1:0,1,2").  Paused: 16 KiB
#       requests inside one chunk, in the part already copied and in the
#       part not yet (a window away from where the copy stopped): those
#       on member I fail (EIO), nothing of them written; those on the
#       others are served and hold the model.  FILE removed, the member
#       is waited for to leave the failed state, the writes that failed
#       are written again (now served), then `grow --wait` as above.
#
#       --fail ... --replace: the same, but the member stays failing:
#       once the paused volume's checks are done the run ends there, as
#       with --restart, for the member to be replaced with the volume
#       stopped (nbdstripe replace --offline) and the volume served again.
#
#       --cancel PHASE:NTH --restart: the same, but once the paused
#       volume's checks are done, nothing goes on: the run ends there
#       (exit 0 when all held) for the server to be stopped and served
#       again (phases.py resume).
#
#       STATE.model and STATE.json (the uncertain blocks) are written.
#
#   phases.py resume URI CTL STATE --nbdstripe BIN --config CONF
#       Served again after a --restart run: every byte holds STATE.model;
#       the reshape is under way again from the position recorded at the
#       pause, and the status says so; `nbdstripe grow --wait CONF`
#       (shrink's) follows it to its end while it is held at every phase
#       with requests in flight across each, as in run.
#
#   phases.py verify URI CTL STATE OUT
#       The volume served again (the reshape goes on from where the
#       members say): waited for to its end, then every byte read holds
#       the model, every uncertain block one of its candidates; the image
#       read is written to OUT (for the member files' check).
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl  # noqa: E402

BLOCK = 4096
CHUNK = 65536
KINDS = ("write", "fua", "zero", "trim")
DEADLINE = 60


def reshape_of(ans):
    st = ans.get("status")
    if isinstance(st, dict) and "reshape" in st:
        return st["reshape"]
    return ans.get("reshape", {})


def status(ctl):
    return reshape_of(ask_ctl(ctl, {"op": "status"}))


class Request:
    def __init__(self, kind, lo, length, data, before):
        self.kind, self.lo, self.length = kind, lo, length
        self.data, self.before = data, before
        self.done = False
        self.error = None
        self.got = None


class Run:
    def __init__(self, uri, ctl, model=None):
        import nbd
        self.nbd = nbd
        self.uri, self.ctl = uri, ctl
        self.rng = random.Random(20261204)
        self.lock = threading.Lock()
        self.pending = []
        self.all = []
        self.problems = []
        self.phases = []
        # A shrink refuses what lies beyond the size it shrinks to.
        self.limit = status(ctl).get("size_to") \
            if status(ctl).get("kind") == "shrink" else None
        if model is None:
            self.model = bytearray(self.volume_read())
        else:
            with open(model, "rb") as f:
                self.model = bytearray(f.read())
            if bytes(self.volume_read()) != bytes(self.model):
                self.problems.append("served again, the volume differs "
                                     "from the model")
        self.restart = False    # --restart: paused, the run ends there
        self.pause = None       # --cancel / --fail: what and where
        self.cont = None        # the `grow --wait` going on after it
        self.paused_ops = []
        self.failed_writes = []  # paused: writes the failed member refused

    def handle(self):
        h = self.nbd.NBD()
        h.connect_uri(self.uri)
        return h

    def volume_read(self):
        h = self.handle()
        size = h.get_size()
        if self.limit is not None:
            size = min(size, self.limit)
        buf = bytearray()
        for off in range(0, size, 4 << 20):
            buf += h.pread(min(4 << 20, size - off), off)
        h.shutdown()
        return buf

    def busy(self, lo, hi):
        return any(r.lo < hi and lo < r.lo + r.length for r in self.pending)

    def pick(self, lo, hi, length):
        """A free range of length in [lo, hi) of the volume."""
        lo = max(0, lo)
        hi = min(len(self.model), hi)
        for _ in range(100):
            if hi - lo < length:
                return None
            off = lo + self.rng.randrange(0, (hi - lo - length) // BLOCK + 1) \
                * BLOCK
            if not self.busy(off, off + length):
                return off
        return None

    def start(self, kind, lo, length):
        data = os.urandom(length) if kind in ("write", "fua") else None
        r = Request(kind, lo, length, data, bytes(self.model[lo:lo + length]))
        if kind in ("write", "fua"):
            self.model[lo:lo + length] = data
        elif kind in ("zero", "trim"):
            self.model[lo:lo + length] = bytes(length)
        with self.lock:
            if kind != "flush":
                self.pending.append(r)
            self.all.append(r)
        threading.Thread(target=self.run_one, args=(r,), daemon=True).start()
        return r

    def run_one(self, r):
        nbd = self.nbd
        try:
            h = self.handle()
            if r.kind == "write":
                h.pwrite(r.data, r.lo)
            elif r.kind == "fua":
                h.pwrite(r.data, r.lo, nbd.CMD_FLAG_FUA)
            elif r.kind == "zero":
                h.zero(r.length, r.lo)
            elif r.kind == "trim":
                h.trim(r.length, r.lo)
            elif r.kind == "read":
                r.got = h.pread(r.length, r.lo)
            elif r.kind == "flush":
                h.flush()
            h.shutdown()
        except Exception as e:      # noqa: BLE001 - reported below
            r.error = str(e)
        with self.lock:
            r.done = True
            if r in self.pending:
                self.pending.remove(r)

    # ---- a batch of requests ----

    def boundary(self, st):
        """Where the copy is, in the volume's logical bytes."""
        copied = st.get("bytes_copied", 0)
        size = len(self.model)
        if st.get("direction") == "backward":
            return max(0, st.get("size_to", size) - copied)
        return min(size, copied)

    def batch(self, st):
        size = len(self.model)
        b = self.boundary(st)
        # Where the copy is (below, in and above the windows), then
        # anywhere.
        spots = [(b - (1 << 20), b), (b, b + (4 << 20)),
                 (b + (4 << 20), b + (12 << 20)), (0, size)]
        if st.get("direction") == "backward":
            spots = [(b, b + (1 << 20)), (b - (4 << 20), b),
                     (b - (12 << 20), b - (4 << 20)), (0, size)]
        if st.get("kind") == "shrink":
            lim = st.get("size_to", size)
            spots = [(lo, min(hi, lim)) for lo, hi in spots]
        sent = 0
        for lo, hi in spots:
            for kind in KINDS:
                length = self.rng.choice((1, 2, 4, 16)) * BLOCK
                off = self.pick(lo, hi, length)
                if off is not None:
                    self.start(kind, off, length)
                    sent += 1
        for lo, hi in spots:
            length = 4 * BLOCK
            off = self.pick(lo, hi, length)
            if off is not None:
                r = self.start("read", off, length)
                r.want = bytes(self.model[off:off + length])
        self.start("flush", 0, 0)
        return sent

    def settle(self, st_held):
        """Until every request sent has completed or is held."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            with self.lock:
                left = [r for r in self.all if not r.done]
            if not left:
                return True
            st = status(self.ctl)
            if st.get("clients_held", 0) >= len(left):
                return True
            time.sleep(0.01)
        self.problems.append("requests neither completed nor held after "
                             "%d s" % DEADLINE)
        return False

    def check_reads(self):
        for r in self.all:
            if r.kind == "read" and r.done and r.error is None \
                    and r.got != r.want:
                self.problems.append("read at %d+%d returned other bytes "
                                     "than the model" % (r.lo, r.length))
            if r.done and r.error is not None:
                self.problems.append("%s at %d+%d failed: %s"
                                     % (r.kind, r.lo, r.length, r.error))

    # ---- paused ----

    def wait_all(self):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            with self.lock:
                if all(r.done for r in self.all):
                    return True
            time.sleep(0.01)
        self.problems.append("requests still in flight %d s after the "
                             "pause" % DEADLINE)
        return False

    def cmd(self, *args):
        p = subprocess.run([self.pause["nbdstripe"]] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=DEADLINE)
        sys.stderr.write("$ nbdstripe %s -> %d\n%s%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def member_at(self, st, b, off):
        """The member holding volume byte off, paused with the copy at b:
        the new layout where it was copied, else the old one."""
        old, new = self.pause["maps"]
        if st.get("direction") == "forward":
            m = new if off < b else old
        else:
            m = new if off >= b else old
        return m[off // CHUNK % len(m)]

    def paused_members(self, st, b, size):
        """Member I failed: requests on it fail, those on the others are
        served (and hold the model), on both sides of the copy."""
        bad = self.pause["index"]
        margin = 4 << 20        # a window: where the copy stopped
        regions = [(0, b - margin), (b + margin, size)]
        seen = {True: 0, False: 0}
        for lo, hi in regions:
            want = {True: 2, False: 2}
            k = max(0, -(-lo // CHUNK))
            while k * CHUNK + CHUNK <= hi and (want[True] or want[False]):
                off = k * CHUNK + 4 * BLOCK
                on_bad = self.member_at(st, b, off) == bad
                k += 1
                if not want[on_bad]:
                    continue
                want[on_bad] -= 1
                seen[on_bad] += 1
                for kind in ("read", "write", "read"):
                    e = self.one_sync(kind, off, 4 * BLOCK)
                    self.paused_ops.append([kind, off, e is None])
                    if on_bad and e is None:
                        self.problems.append(
                            "paused: %s at %d (on failed member %d) was "
                            "served" % (kind, off, bad))
                    elif not on_bad and e is not None:
                        self.problems.append(
                            "paused: %s at %d (member %d, not the failed "
                            "one) failed: %s"
                            % (kind, off, self.member_at(st, b, off), e))
                    if on_bad and kind == "write" and e is not None:
                        self.failed_writes.append(off)
        if not seen[True] or not seen[False]:
            self.problems.append("paused: requests on the failed member "
                                 "(%d) and on the others (%d), not both"
                                 % (seen[True], seen[False]))

    def member_back(self, i):
        """Until member i is no longer failed (health re-probed it)."""
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            ans = ask_ctl(self.ctl, {"op": "status"})
            ms = ans.get("status", {}).get("members", [])
            if i < len(ms) and ms[i].get("state") != "failed":
                return True
            time.sleep(0.05)    # polling the status for a condition, bounded
        self.problems.append("member %d still failed %d s after it works "
                             "again" % (i, DEADLINE))
        return False

    def one_sync(self, kind, lo, length):
        """A request now; a write lands in the model only if it succeeded;
        a read must hold the model.  Returns the error or None."""
        h = self.handle()
        try:
            if kind == "write":
                data = os.urandom(length)
                h.pwrite(data, lo)
                self.model[lo:lo + length] = data
            else:
                got = h.pread(length, lo)
                if got != bytes(self.model[lo:lo + length]):
                    self.problems.append("paused: read at %d+%d returned "
                                         "other bytes than the model"
                                         % (lo, length))
            return None
        except self.nbd.Error as e:
            return str(e)
        finally:
            h.shutdown()

    def prom_paused(self, path, verb):
        """The Prometheus file says paused (1), not running (0), within
        10 s: the health thread rewrites it once the status changed."""
        want = {"nbdstripe_reshape_paused": "1",
                "nbdstripe_reshape_running": "0"}
        deadline = time.monotonic() + 10
        got = {}
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                lines = []
            got = {}
            for ln in lines:
                name, _, rest = ln.partition("{")
                if name in want and 'kind="%s"' % verb in rest:
                    got[name] = ln.rsplit(" ", 1)[1]
            if got == want:
                return
            time.sleep(0.05)    # polling a file for a condition, bounded
        self.problems.append("Prometheus file %s: %r, not %r within 10 s"
                             % (path, got, want))

    def paused(self, st):
        """The reshape has paused: check it says so, use the volume,
        then go on with `grow --wait` in the background."""
        pz = self.pause
        verb = "shrink" if st.get("kind") == "shrink" else "grow"
        self.wait_all()
        self.check_reads()
        err = st.get("error") or ""
        want = "cancel" if pz["mode"] == "cancel" else "error"
        if st.get("paused_by") != want:
            self.problems.append("paused_by %r, not %r" %
                                 (st.get("paused_by"), want))
        if "nbdstripe %s --wait %s" % (verb, pz["config"]) not in err:
            self.problems.append("the status does not say how to go on: %r"
                                 % err)
        if pz["mode"] == "fail" and pz["member"] not in err:
            self.problems.append("the status does not name the failed "
                                 "member %s: %r" % (pz["member"], err))
        if pz["mode"] == "fail" \
                and "nbdstripe replace --offline %s" % pz["config"] not in err:
            self.problems.append("the status does not name the other way "
                                 "on (replace the member offline): %r" % err)
        if pz.get("prom"):
            self.prom_paused(pz["prom"], verb)
        p = self.cmd("status", pz["config"])
        if "paused" not in p.stdout or "%s --wait" % verb not in p.stdout:
            self.problems.append("nbdstripe status does not show the pause "
                                 "and the way on")
        p = self.cmd(verb, "--cancel", pz["config"])
        if p.returncode != 1 or "paused already" not in p.stderr:
            self.problems.append("a second --cancel was not refused as "
                                 "paused already")
        new = os.path.join(os.path.dirname(pz["config"]), "replace-new")
        with open(new, "wb") as f:
            f.truncate(64 << 20)
        p = self.cmd("replace", pz["config"], "0", new)
        if p.returncode == 0 or "must end first" not in p.stderr \
                or "replace it with --offline" not in p.stderr:
            self.problems.append("a replace while paused was not refused "
                                 "naming the reshape and the way on")
        b = self.boundary(st)
        size = len(self.model)
        if self.limit is not None:
            size = min(size, self.limit)
        if pz["mode"] == "cancel":
            # Everywhere: below, in and above where the copy stopped.
            self.batch(st)
            self.wait_all()
            self.check_reads()
        elif pz.get("index") is not None:
            self.paused_members(st, b, size)
            if not pz.get("replace"):
                os.unlink(pz["file"])
                self.member_back(pz["index"])
                # The writes the failed member refused: served now.
                for off in self.failed_writes:
                    e = self.one_sync("write", off, 4 * BLOCK)
                    if e is not None:
                        self.problems.append("write at %d failed again once "
                                             "the member works: %s"
                                             % (off, e))
        else:
            # Above where the copy stopped: the old layout, off the failed
            # new member.  The first window may fail (EIO: stopped
            # half-written, its bytes in the journal); past 4 MiB not.
            assert st.get("direction") == "forward"
            for off in (b, b + 8 * BLOCK, b + (5 << 20), size - 16 * BLOCK):
                if off < b or off + 4 * BLOCK > size:
                    continue
                for kind in ("read", "write", "read"):
                    e = self.one_sync(kind, off, 4 * BLOCK)
                    if e is not None and off >= b + (4 << 20):
                        self.problems.append("paused: %s at %d (above the "
                                             "copy, off the failed member) "
                                             "failed: %s" % (kind, off, e))
                    self.paused_ops.append([kind, off, e is None])
            if not pz.get("replace"):
                os.unlink(pz["file"])
        if pz.get("restart") or pz.get("replace"):
            self.restart = True
            return
        # The way on.
        self.cont = subprocess.Popen(
            [pz["nbdstripe"], verb, "--wait", pz["config"]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)

    # ---- the run ----

    def run(self, kill, server_pid):
        seen = 0
        kills = 0
        nth = 0
        pz = self.pause
        end = time.monotonic() + 300
        while time.monotonic() < end:
            st = status(self.ctl)
            if st.get("state") == "paused" and pz and self.cont is None:
                self.paused(st)
                if self.restart:
                    self.wait_all()
                    self.check_reads()
                    return st, False
                seen = 0
                continue
            if st.get("state") == "paused" and self.cont is not None \
                    and self.cont.poll() is None:
                time.sleep(0.005)   # until the job going on is published
                continue
            if st.get("state") in ("done", "failed", "cancelled", "paused"):
                break
            if not st.get("phase_held") or st.get("phase_seq", 0) == seen:
                time.sleep(0.005)
                continue
            seen = st["phase_seq"]
            phase = st.get("phase")
            self.phases.append(phase)
            quiet = pz and pz["mode"] == "fail" and self.cont is None
            if not quiet:
                self.batch(st)
                self.settle(st)
            if kill and phase == kill[0]:
                kills += 1
                if kills == kill[1]:
                    self.batch(st)
                    os.kill(server_pid, signal.SIGKILL)
                    return st, True
            if pz and self.cont is None and phase == pz["phase"]:
                nth += 1
                if nth == pz["nth"] and pz["mode"] == "cancel":
                    p = self.cmd("shrink" if st.get("kind") == "shrink"
                                 else "grow", "--cancel", pz["config"])
                    if p.returncode != 0 or "paused" not in p.stdout:
                        self.problems.append("--cancel did not pause it")
                    continue
                if nth == pz["nth"]:
                    open(pz["file"], "w").close()
            try:
                ask_ctl(self.ctl, {"op": "step", "at": phase})
            except OSError:
                pass
        if self.cont is not None:
            out, err = self.cont.communicate(timeout=DEADLINE)
            sys.stderr.write("$ nbdstripe ... --wait -> %d\n%s%s"
                             % (self.cont.returncode, out, err))
            if self.cont.returncode != 0 or "done" not in out:
                self.problems.append("going on with --wait did not end "
                                     "done (exit %d)"
                                     % self.cont.returncode)
        elif pz and not self.restart:
            self.problems.append("the reshape never paused")
        st = status(self.ctl)
        for _ in range(DEADLINE * 100):
            with self.lock:
                if all(r.done for r in self.all):
                    break
            time.sleep(0.01)
        self.check_reads()
        return st, False

    def save(self, path):
        with open(path + ".model", "wb") as f:
            f.write(self.model)
        # In flight at the kill: not answered, or answered with the error
        # of the connection going away.
        uncertain = [{"lo": r.lo, "before": r.before.hex(),
                      "after": self.after_of(r).hex()}
                     for r in self.all
                     if (not r.done or r.error is not None)
                     and r.kind not in ("read", "flush")]
        with open(path + ".json", "w") as f:
            json.dump({"uncertain": uncertain}, f)

    @staticmethod
    def after_of(r):
        return r.data if r.data is not None else bytes(r.length)


def verify(uri, ctl, state, out):
    import nbd
    problems = []
    end = time.monotonic() + 300
    while time.monotonic() < end:
        st = status(ctl)
        if st.get("state") in ("done", "failed", "cancelled") or not st:
            break
        time.sleep(0.02)
    if st and st.get("state") != "done":
        problems.append("the reshape did not go on to its end: %s" % st)
    with open(state + ".model", "rb") as f:
        model = f.read()
    with open(state + ".json") as f:
        unc = json.load(f)["uncertain"]
    h = nbd.NBD()
    h.connect_uri(uri)
    size = h.get_size()
    got = bytearray()
    for off in range(0, size, 4 << 20):
        got += h.pread(min(4 << 20, size - off), off)
    h.shutdown()
    with open(out, "wb") as f:
        f.write(got)
    covered = {}
    for u in unc:
        before, after = bytes.fromhex(u["before"]), bytes.fromhex(u["after"])
        for k in range(0, len(before), BLOCK):
            covered[u["lo"] + k] = (before[k:k + BLOCK], after[k:k + BLOCK])
    n = min(len(model), len(got))
    bad = 0
    for off in range(0, n, BLOCK):
        g = bytes(got[off:off + BLOCK])
        if off in covered:
            if g not in covered[off]:
                bad += 1
                if bad <= 5:
                    problems.append("block at %d (in flight at the kill) "
                                    "holds neither its bytes before nor "
                                    "after" % off)
        elif g != model[off:off + BLOCK]:
            bad += 1
            if bad <= 5:
                problems.append("block at %d differs from the model" % off)
    if bad > 5:
        problems.append("%d blocks differ in all" % bad)
    return {"size": size, "state": st.get("state") if st else None,
            "uncertain_requests": len(unc)}, problems


def main(argv):
    if len(argv) >= 5 and argv[1] == "run":
        uri, ctl, state = argv[2:5]
        kill = None
        pid = None
        rest = argv[5:]
        if "--kill" in rest:
            p, nth = rest[rest.index("--kill") + 1].split(":")
            kill = (p, int(nth))
            pid = int(rest[rest.index("--server-pid") + 1])
        r = Run(uri, ctl)
        for mode in ("--cancel", "--fail"):
            if mode in rest:
                i = rest.index(mode)
                p, nth = rest[i + 1].split(":")
                r.pause = {"mode": mode[2:], "phase": p, "nth": int(nth),
                           "nbdstripe": rest[rest.index("--nbdstripe") + 1],
                           "config": rest[rest.index("--config") + 1]}
                if "--prom" in rest:
                    r.pause["prom"] = rest[rest.index("--prom") + 1]
                r.pause["restart"] = "--restart" in rest
                r.pause["replace"] = "--replace" in rest
                if mode == "--fail":
                    r.pause["file"] = rest[i + 2]
                    r.pause["member"] = rest[rest.index("--member") + 1]
                    if "--index" in rest:
                        r.pause["index"] = int(
                            rest[rest.index("--index") + 1])
                        old, new = rest[rest.index("--maps") + 1].split(":")
                        r.pause["maps"] = ([int(x) for x in old.split(",")],
                                           [int(x) for x in new.split(",")])
        st, killed = r.run(kill, pid)
        r.save(state)
        if r.restart:
            with open(state + ".paused", "w") as f:
                json.dump(st, f)
        if not killed and not r.restart and st.get("state") != "done":
            r.problems.append("the reshape ended %s: %s"
                              % (st.get("state"), st.get("error")))
        if not killed and not (r.pause and r.pause.get("replace")):
            got = r.volume_read()
            if bytes(got[:len(r.model)]) != bytes(r.model[:len(got)]):
                r.problems.append("the volume differs from the model")
        print(json.dumps({"phases": r.phases, "killed": killed,
                          "requests": len(r.all), "state": st,
                          "paused_ops": r.paused_ops}))
        for p in r.problems:
            print("phases.py: " + p, file=sys.stderr)
        return 1 if r.problems else 0
    if len(argv) == 9 and argv[1] == "resume":
        uri, ctl, state = argv[2:5]
        rest = argv[5:]
        conf = rest[rest.index("--config") + 1]
        r = Run(uri, ctl, model=state + ".model")
        with open(state + ".paused") as f:
            was = json.load(f)
        st = status(ctl)
        verb = "shrink" if st.get("kind") == "shrink" else "grow"
        # Paused in a journaled window (fenced): served again, the journal
        # is replayed and the position recorded past it.  Paused by a
        # member failing while the position was recorded: the members
        # that took the record hold the next checkpoint, which assembly
        # goes on from (both are right, reshape.c).  Either: one window on.
        pos, at = st.get("position_recorded", -1), was.get("position_recorded")
        moved_on = at < pos <= at + (4 << 20) \
            and (was.get("phase") == "journaled"
                 or "recording" in (was.get("error") or ""))
        if st.get("state") in ("paused", "done", "failed", "cancelled") \
                or st.get("kind") != was.get("kind") \
                or (pos != at and not moved_on):
            r.problems.append("served again: the %s is not under way again "
                              "from where it paused (%s at %s): %s"
                              % (verb, was.get("kind"),
                                 was.get("position_recorded"), st))
        p = subprocess.run([rest[rest.index("--nbdstripe") + 1], "status",
                            conf], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=DEADLINE)
        sys.stderr.write(p.stdout + p.stderr)
        if "Reshape : %s" % verb not in p.stdout or "paused" in p.stdout:
            r.problems.append("nbdstripe status does not show the %s "
                              "under way again" % verb)
        r.cont = subprocess.Popen(
            [rest[rest.index("--nbdstripe") + 1], verb, "--wait", conf],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)
        st, _ = r.run(None, None)
        r.save(state)
        if st.get("state") != "done":
            r.problems.append("the reshape ended %s: %s"
                              % (st.get("state"), st.get("error")))
        got = r.volume_read()
        if bytes(got[:len(r.model)]) != bytes(r.model[:len(got)]):
            r.problems.append("the volume differs from the model")
        print(json.dumps({"phases": r.phases, "requests": len(r.all),
                          "state": st}))
        for p in r.problems:
            print("phases.py: " + p, file=sys.stderr)
        return 1 if r.problems else 0
    if len(argv) == 6 and argv[1] == "verify":
        summary, problems = verify(*argv[2:6])
        print(json.dumps(summary))
        for p in problems:
            print("phases.py: " + p, file=sys.stderr)
        return 1 if problems else 0
    print(__doc__ if __doc__ else "usage: see the top of phases.py",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    rc = main(sys.argv)
    # Out without the libraries' exit-time destructors: request threads
    # may still be failing on a server the test killed, and libnbd 1.14
    # (Debian 12) loses such a thread's error once its destructor has
    # deleted the error key, then aborts in the %DEAD state on
    # "assert (nbd_get_error ())" (libnbd commit 368e3d0, fixed in
    # 1.15.12).  It aborted a passing run of this script once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
