#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/replace/phases.sh's client: every kind of client request in flight
# across every phase boundary of a replace, made to happen, not hoped for.
# Run with /usr/bin/python3 (Debian's python3-libnbd).
#
#   phases.py run URI CTL N,CHUNK,DATA_OFFSET MEMBER_BYTES NEW OLD_LOG
#                 NEW_FILE STATE [--kill PHASE:NTH --server-pid PID]
#                 [--no-gate]
#       Member 0 (MEMBER_BYTES, data offset included) is an NBD export
#       behind nbdkit's log filter (OLD_LOG) and delay filter (writes,
#       zeroes and trims take a second); the volume's server holds the
#       copier at each phase (-D stripe.replace_gate=1).
#
#       Before the replace: writes, zeroes and trims into each window of
#       member 0, each in flight at the member (its line in OLD_LOG) when
#       the replace of member 0 onto NEW is asked for.
#
#       Then at each phase the copier is held at (the status's "phase"):
#       a write, a write-zeroes and a trim where the copy has passed,
#       in the window(s) being copied and beyond them; a FUA write; a write
#       across both members; reads (checked against the model); a flush.
#       The phase is let go only once every request sent so far has got as
#       far as it can: completed, or in flight at the member (OLD_LOG), or
#       held by the plugin (the status's "clients_held") -- so each one is
#       in flight across the boundary that follows.  Requests left in
#       flight carry over into later phases; none overlaps another.
#
#       The replace done: the volume must read back the model (every
#       request applied), and NEW's data area, read straight from
#       NEW_FILE, member 0's share of it.
#
#       --kill PHASE:NTH: the copier goes through the phases before (the
#       requests before the replace in flight); the NTH time it is held at
#       PHASE, a first batch of requests is sent and waited for (but those
#       the plugin holds), a second one sent, and the server PID killed
#       (SIGKILL).  Requests that had not completed are uncertain: each of
#       their 4 KiB blocks may hold what it held before or after.
#
#       --no-gate: the server has no gate (the code before it): only the
#       requests before the replace, then wait for the end.
#
#       STATE.model and STATE.json (the uncertain blocks) are written for
#       verify.
#
#   phases.py verify URI STATE
#       The volume (served again, from the config as it now is) holds the
#       model, every uncertain block one of its candidates.
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import random
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl, replace_of  # noqa: E402
from equal_layout import Layout  # noqa: E402

WINDOW = 4 * 1024 * 1024
BLOCK = 4096
KINDS = ("write", "zero", "trim")
LOG_KIND = {"write": "Write", "fua": "Write", "cross": "Write",
            "zero": "Zero", "trim": "Trim"}
LOG_LINE = re.compile(r" (Write|Zero|Trim) id=\d+ offset=0x([0-9a-f]+) ")


def status(ctl):
    return replace_of(ask_ctl(ctl, {"op": "status"}))


class Request:
    """One client request of the test, run on a connection of its own."""

    def __init__(self, t, kind, mo, length, lo, llen, data, log_pos):
        self.t, self.kind, self.mo, self.length = t, kind, mo, length
        self.lo, self.llen = lo, llen       # logical range it changes
        self.data = data                    # bytes written (None: zeroes)
        self.log_pos = log_pos
        self.done = False
        self.error = None
        self.read = None
        self.thread = None


class Run:
    def __init__(self, a):
        import nbd
        self.nbd = nbd
        self.uri, self.ctl = a["uri"], a["ctl"]
        self.lay = a["layout"]
        self.member_bytes = a["member_bytes"]
        self.new, self.old_log = a["new"], a["old_log"]
        self.new_file, self.state = a["new_file"], a["state"]
        self.kill = a.get("kill")
        self.server_pid = a.get("server_pid")
        self.gate = not a.get("no_gate")
        self.data_bytes = self.member_bytes - self.lay.doff
        self.model = bytearray(self.volume_read())
        self.lock = threading.Lock()
        self.pending = []
        self.all = []
        self.problems = []
        self.rng = random.Random(20261203)
        self.phases = []
        self.at_member_checks = 0

    def handle(self):
        h = self.nbd.NBD()
        h.connect_uri(self.uri)
        return h

    def volume_read(self):
        h = self.handle()
        size = h.get_size()
        buf = bytearray()
        for off in range(0, size, 4 << 20):
            buf += h.pread(min(4 << 20, size - off), off)
        h.shutdown()
        return buf

    def log_size(self):
        try:
            return os.path.getsize(self.old_log)
        except OSError:
            return 0

    # ---- requests ----

    def busy(self, lo, hi):
        """Whether member 0's [lo, hi) overlaps a request in flight."""
        return any(r.mo < hi and lo < r.mo + r.length
                   for r in self.pending if r.kind != "flush")

    def pick(self, lo, hi, length, align, used):
        """A free member-0 range of length in [lo, hi), inside one chunk."""
        lo = max(lo, self.lay.doff)
        hi = min(hi, self.member_bytes)
        for _ in range(200):
            if hi - lo < length:
                return None
            mo = lo + self.rng.randrange(0, (hi - lo - length) // align + 1) \
                * align
            rel = mo - self.lay.doff
            if rel // self.lay.chunk != (rel + length - 1) // self.lay.chunk:
                continue
            if self.busy(mo, mo + length) or any(
                    u[0] < mo + length and mo < u[1] for u in used):
                continue
            used.append((mo, mo + length))
            return mo
        return None

    def start(self, kind, mo, length, used=None):
        lay = self.lay
        data = None
        if kind == "cross":
            # A whole stripe: member 0's chunk and member 1's beside it.
            rel = mo - lay.doff
            c = rel // lay.chunk
            lo, llen = c * lay.n * lay.chunk, lay.n * lay.chunk
            mo, length = lay.doff + c * lay.chunk, lay.chunk
            data = os.urandom(llen)
        elif kind == "flush":
            lo, llen = 0, 0
        else:
            lo, llen = lay.logical(0, mo), length
            if kind in ("write", "fua"):
                data = os.urandom(length)
        r = Request(self.phases[-1] if self.phases else "before", kind, mo,
                    length, lo, llen, data, self.log_size())
        if kind == "read":
            r.want = bytes(self.model[lo:lo + llen])
        r.before = bytes(self.model[lo:lo + llen])
        with self.lock:
            self.pending.append(r)
            self.all.append(r)
        r.thread = threading.Thread(target=self.run_one, args=(r,),
                                    daemon=True)
        r.thread.start()
        return r

    def run_one(self, r):
        nbd = self.nbd
        try:
            h = self.handle()
            if r.kind in ("write", "cross"):
                h.pwrite(r.data, r.lo)
            elif r.kind == "fua":
                h.pwrite(r.data, r.lo, nbd.CMD_FLAG_FUA)
            elif r.kind == "zero":
                h.zero(r.llen, r.lo)
            elif r.kind == "trim":
                h.trim(r.llen, r.lo)
            elif r.kind == "flush":
                h.flush()
            elif r.kind == "read":
                r.read = h.pread(r.llen, r.lo)
            try:
                h.shutdown()
            except nbd.Error:
                pass
        except Exception as e:      # noqa: BLE001 -- reported below
            r.error = str(e)
        with self.lock:
            if r.error is None:
                if r.kind in ("write", "fua", "cross"):
                    self.model[r.lo:r.lo + r.llen] = r.data
                elif r.kind in ("zero", "trim"):
                    self.model[r.lo:r.lo + r.llen] = bytes(r.llen)
                elif r.kind == "read" and r.read != r.want:
                    self.problems.append(
                        "%s: read of logical %d+%d returned other bytes than "
                        "the model's" % (r.t, r.lo, r.llen))
            r.done = True
            self.pending.remove(r)

    def at_member(self):
        """The pending requests whose member-0 op has reached the member."""
        with open(self.old_log, "rb") as f:
            text = f.read().decode(errors="replace")
        seen = set()
        for r in list(self.pending):
            if r.kind not in LOG_KIND:
                continue
            part = text[r.log_pos:]
            for m in LOG_LINE.finditer(part):
                if m.group(1) == LOG_KIND[r.kind] and \
                        int(m.group(2), 16) == r.mo:
                    seen.add(id(r))
                    break
        return seen

    def settle(self, deadline=60):
        """Wait until every pending request is completed, at the member,
        or held in the plugin -- as far as it can get while the copier is
        held.  Returns how many are held."""
        end = time.monotonic() + deadline
        while True:
            held = status(self.ctl).get("clients_held", 0) if self.gate \
                else 0
            with self.lock:
                pend = list(self.pending)
            at = self.at_member()
            rest = [r for r in pend if id(r) not in at and not r.done]
            if len(rest) == held:
                self.at_member_checks += 1
                return held, len(pend) - len(rest)
            if time.monotonic() > end:
                self.problems.append(
                    "phase %s: %d request(s) neither done, at the member "
                    "nor held (%d held): %s"
                    % (self.phases[-1] if self.phases else "before",
                       len(rest), held,
                       ", ".join("%s@%d" % (r.kind, r.mo) for r in rest)))
                return held, 0
            time.sleep(0.005)

    def wait_all_but_held(self, deadline=60):
        """Wait until every pending request that is not held by the
        plugin has completed."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            held = status(self.ctl).get("clients_held", 0)
            with self.lock:
                left = sum(1 for r in self.pending if not r.done)
            if left == held:
                return
            time.sleep(0.005)
        self.problems.append("requests neither held nor done within %d s"
                             % deadline)

    def phase_requests(self, st):
        """What is sent while the copier is held at a phase."""
        lay = self.lay
        w = lay.doff + st.get("bytes_copied", 0)
        end = self.member_bytes
        regions = [("below", lay.doff, w),
                   ("window", w, min(w + 2 * WINDOW, end)),
                   ("above", min(w + 2 * WINDOW, end), end)]
        used = []
        for name, lo, hi in regions:
            for kind in KINDS:
                length = 4096 if kind == "write" else 8192
                mo = self.pick(lo, hi, length, 4096, used)
                if mo is not None:
                    self.start(kind, mo, length)
        mo = self.pick(w, min(w + 2 * WINDOW, end), 4096, 4096, used)
        if mo is not None:
            self.start("fua", mo, 4096)
        # A write over a whole stripe: member 0's chunk and member 1's.
        for _ in range(50):
            mo = self.pick(lay.doff, end, lay.chunk, lay.chunk, used)
            if mo is not None:
                self.start("cross", mo, lay.chunk)
                break
        for _ in range(2):
            mo = self.pick(lay.doff, end, 8192, 4096, used)
            if mo is not None:
                self.start("read", mo, 8192)
        self.start("flush", 0, 0)

    def before_replace(self):
        """Requests in flight at the member when the replace is asked for:
        the copier must not read old before they have landed."""
        used = []
        lay = self.lay
        for k in range(0, self.data_bytes, WINDOW):
            lo = lay.doff + k
            hi = min(lo + WINDOW, self.member_bytes)
            for kind in KINDS:
                mo = self.pick(lo, hi, 8192, 4096, used)
                self.start(kind, mo, 8192)
        # Wait until every one of them is at the member (nothing holds
        # them: there is no replace yet).
        end = time.monotonic() + 30
        while True:
            with self.lock:
                pend = [r for r in self.pending if not r.done]
            if len(self.at_member()) == len(pend):
                break
            if time.monotonic() > end:
                self.problems.append("the requests before the replace did "
                                     "not reach the member within 30 s")
                break
            time.sleep(0.005)
        return len(pend)

    def kill_now(self):
        os.kill(self.server_pid, signal.SIGKILL)
        for r in list(self.all):
            r.thread.join(30)

    def write_state(self, uncertain):
        with open(self.state + ".model", "wb") as f:
            f.write(self.model)
        with open(self.state + ".json", "w") as f:
            json.dump({"uncertain": uncertain}, f)

    def run(self):
        nbd_ok = self.before_replace()
        in_flight_before = nbd_ok
        ans = ask_ctl(self.ctl, {"op": "replace", "member": 0,
                                 "new": self.new, "force": True})
        if not ans.get("ok"):
            self.problems.append("replace refused: %s" % ans.get("error"))
            return self.finish(None)
        with self.lock:
            still = sum(1 for r in self.pending if not r.done)
        counts = {}
        deadline = time.monotonic() + 120
        st = {}
        while True:
            st = status(self.ctl)
            if st.get("state") in ("done", "failed", "cancelled"):
                break
            if time.monotonic() > deadline:
                self.problems.append("the replace did not end within 120 s")
                break
            if not self.gate or not st.get("phase_held"):
                time.sleep(0.005)
                continue
            ph = st.get("phase")
            counts[ph] = counts.get(ph, 0) + 1
            self.phases.append("%s#%d" % (ph, counts[ph]))
            here = self.kill == (ph, counts[ph])
            if self.kill and not here:
                pass   # on to the phase of the kill, the copy as it goes
            elif here:
                # A batch that completes while held here (acknowledged:
                # it must be there after the restart), then one in flight
                # when the server is killed.
                self.phase_requests(st)
                self.settle()
                self.wait_all_but_held()
                st = status(self.ctl)
                self.phase_requests(st)
                self.settle()
                self.kill_now()
                return self.finish(st, killed=True)
            else:
                self.phase_requests(st)
                self.settle()
            ans = ask_ctl(self.ctl, {"op": "step", "at": ph})
            if not ans.get("ok"):
                self.problems.append("step at %s refused: %s"
                                     % (ph, ans.get("error")))
                break
        for r in list(self.all):
            r.thread.join(60)
        return self.finish(st, in_flight_before=in_flight_before,
                           still_at_publish=still)

    def finish(self, st, killed=False, **extra):
        uncertain = []
        for r in self.all:
            if r.error is None and r.done:
                continue
            if not killed:
                self.problems.append("%s: %s of member offset %d failed: %s"
                                     % (r.t, r.kind, r.mo, r.error))
                continue
            if r.kind in ("flush", "read"):
                continue
            after = r.data if r.data is not None else bytes(r.llen)
            for b in range(0, r.llen, BLOCK):
                uncertain.append([r.lo + b, r.before[b:b + BLOCK].hex(),
                                  after[b:b + BLOCK].hex()])
        if not killed:
            if st is None or st.get("state") != "done":
                self.problems.append("the replace ended %s: %s"
                                     % (st and st.get("state"),
                                        st and st.get("error")))
            got = self.volume_read()
            self.compare("the volume", got, self.model, [])
            want = self.lay.member_bytes(self.model, 0, self.data_bytes)
            with open(self.new_file, "rb") as f:
                f.seek(self.lay.doff)
                have = f.read(self.data_bytes)
            for pos in range(0, self.data_bytes, BLOCK):
                if have[pos:pos + BLOCK] != want[pos:pos + BLOCK]:
                    self.problems.append(
                        "NEW's file: member 0 bytes %d+%d are not the "
                        "model's" % (self.lay.doff + pos, BLOCK))
                    break
        self.write_state(uncertain)
        summary = {
            "phases": self.phases,
            "requests": len(self.all),
            "acknowledged": sum(1 for r in self.all
                                if r.done and r.error is None),
            "uncertain_blocks": len(uncertain),
            "killed": killed,
            "state": st and st.get("state"),
            "switch_hold_seconds": st and st.get("switch_hold_seconds"),
        }
        summary.update(extra)
        print(json.dumps(summary))
        for p in self.problems:
            print("phases: " + p, file=sys.stderr)
        return 1 if self.problems else 0

    def compare(self, what, got, model, uncertain):
        comp = {u[0]: (bytes.fromhex(u[1]), bytes.fromhex(u[2]))
                for u in uncertain}
        bad = 0
        for lo in range(0, len(model), BLOCK):
            g = bytes(got[lo:lo + BLOCK])
            if lo in comp:
                if g not in comp[lo]:
                    bad += 1
                    if bad <= 5:
                        self.problems.append(
                            "%s: logical %d+4096 (in flight at the kill) "
                            "holds neither what it held before nor after"
                            % (what, lo))
            elif g != model[lo:lo + BLOCK]:
                bad += 1
                if bad <= 5:
                    self.problems.append(
                        "%s: logical %d+4096 differs from the model (%s)"
                        % (what, lo, self.explain(lo)))
        return bad

    def explain(self, lo):
        hits = [r for r in self.all
                if r.llen and r.lo < lo + BLOCK and lo < r.lo + r.llen]
        return ", ".join("%s at %s, member offset %d" % (r.kind, r.t, r.mo)
                         for r in hits) or "no request of the test"


def verify(argv):
    import nbd
    uri, state = argv
    model = open(state + ".model", "rb").read()
    uncertain = json.load(open(state + ".json"))["uncertain"]
    h = nbd.NBD()
    h.connect_uri(uri)
    size = h.get_size()
    got = bytearray()
    for off in range(0, size, 4 << 20):
        got += h.pread(min(4 << 20, size - off), off)
    h.shutdown()
    v = Run.__new__(Run)
    v.problems, v.all = [], []
    bad = v.compare("after the restart", got, model, uncertain)
    print(json.dumps({"blocks": len(model) // BLOCK, "bad": bad,
                      "uncertain": len(uncertain)}))
    for p in v.problems:
        print("phases: " + p, file=sys.stderr)
    return 1 if v.problems else 0


def main(argv):
    if len(argv) >= 9 and argv[0] == "run":
        a = {"uri": argv[1], "ctl": argv[2], "layout": Layout(argv[3]),
             "member_bytes": int(argv[4]), "new": argv[5],
             "old_log": argv[6], "new_file": argv[7], "state": argv[8]}
        rest = argv[9:]
        while rest:
            if rest[0] == "--kill":
                ph, nth = rest[1].split(":")
                a["kill"] = (ph, int(nth))
                rest = rest[2:]
            elif rest[0] == "--server-pid":
                a["server_pid"] = int(rest[1])
                rest = rest[2:]
            elif rest[0] == "--no-gate":
                a["no_gate"] = True
                rest = rest[1:]
            else:
                print("phases.py: bad argument " + rest[0], file=sys.stderr)
                return 2
        return Run(a).run()
    if len(argv) == 3 and argv[0] == "verify":
        return verify(argv[1:])
    print("usage: phases.py run ... | phases.py verify URI STATE",
          file=sys.stderr)
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
