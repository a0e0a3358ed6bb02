#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/replace/starve.sh's client: the copier of a replace is never
# starved, and never starves a client.  Run with /usr/bin/python3
# (Debian's python3-libnbd).
#
#   starve.py hot URI CTL N,CHUNK,DATA_OFFSET MEMBER_BYTES NEW QD
#       A hot spot: QD connections write, back to back, 4 KiB at a time
#       into the same 64 KiB of member 0's second window (the old member
#       takes 100 ms a write, and the writers start staggered over it, so
#       that several writes are always in flight there).  Member 0 is replaced onto NEW meanwhile; the copy must
#       pass the hot spot and end within 60 s while the writers go on
#       (their writes wait for the window, the window waits only for
#       the writes in flight when it was taken).  Then the volume holds the
#       last write of each writer.
#
#   starve.py trim URI CTL N,CHUNK,DATA_OFFSET MEMBER_BYTES NEW
#       The server holds the copier at each phase (-D
#       stripe.replace_gate=1).  Held at the first "advanced" (window 0
#       written, window 1 taken): a trim of the whole volume (member 0's
#       whole data area) is sent; it waits for window 1, announced before
#       it.  The copier is let go once, held again at the next phase; then
#       the trim must complete while the copier is held there (within
#       30 s): it must not wait for the copy to pass its whole span.
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask, replace_of  # noqa: E402
from equal_layout import Layout  # noqa: E402

WINDOW = 4 * 1024 * 1024


def status(ctl):
    return replace_of(ask(ctl, {"op": "status"}))


def connect(uri):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    return h


def hot(uri, ctl, lay, member_bytes, new, qd):
    problems = []
    stop = threading.Event()
    last = {}
    counts = [0] * qd
    # The hot spot: one chunk of member 0 in its second window.
    mo0 = lay.doff + WINDOW + 3 * lay.chunk
    lo0 = lay.logical(0, mo0)

    def writer(k):
        h = connect(uri)
        slot = lo0 + (k % 16) * 4096
        # Staggered over one write's latency at the member, so that the
        # writes in flight there are never all done at once.
        time.sleep(k * 0.1 / qd)
        try:
            while not stop.is_set():
                data = os.urandom(4096)
                h.pwrite(data, slot)
                last[slot] = data
                counts[k] += 1
        except Exception as e:  # noqa: BLE001
            problems.append("writer %d: %s" % (k, e))
        h.shutdown()

    threads = [threading.Thread(target=writer, args=(k,), daemon=True)
               for k in range(qd)]
    for t in threads:
        t.start()
    # The writers are at it before the replace starts.
    while sum(counts) < qd:
        time.sleep(0.01)
    t0 = time.monotonic()
    ans = ask(ctl, {"op": "replace", "member": 0, "new": new, "force": True})
    if not ans.get("ok"):
        problems.append("replace refused: %s" % ans.get("error"))
    st = {}
    before = sum(counts)
    while ans.get("ok"):
        st = status(ctl)
        if st.get("state") in ("done", "failed", "cancelled"):
            break
        if time.monotonic() - t0 > 60:
            problems.append("the replace did not end within 60 s with a hot "
                            "spot written at queue depth %d: %d of %d bytes "
                            "copied (starved)"
                            % (qd, st.get("bytes_copied", 0),
                               st.get("bytes_total", 0)))
            break
        time.sleep(0.02)
    during = sum(counts) - before
    stop.set()
    for t in threads:
        t.join(20)
    stuck = sum(1 for t in threads if t.is_alive())
    if stuck:
        problems.append("%d writer(s) still blocked in a write 20 s after they "
                        "were told to stop" % stuck)
        return {"queue_depth": qd, "stuck_writers": stuck}, problems
    if st.get("state") not in (None, "done") and not problems:
        problems.append("the replace ended %s: %s"
                        % (st.get("state"), st.get("error")))
    h = connect(uri)
    for slot, data in sorted(last.items()):
        if h.pread(4096, slot) != data:
            problems.append("logical %d: not the last write there" % slot)
    h.shutdown()
    out = {"queue_depth": qd, "writes_during_copy": during,
           "copy_seconds": round(time.monotonic() - t0, 2),
           "state": st.get("state"),
           "longest_client_wait_seconds":
               st.get("longest_client_wait_seconds")}
    return out, problems


def wait_phase(ctl, name, nth, seen, deadline=60):
    """Step the copier through phases until it is held at the nth name;
    seen counts the phases met so far."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        st = status(ctl)
        if st.get("state") in ("done", "failed", "cancelled"):
            return st
        if st.get("phase_held"):
            ph = st.get("phase")
            key = (ph, seen.get(ph, 0) + 1)
            if key == (name, nth):
                seen[ph] = nth
                return st
            seen[ph] = key[1]
            ask(ctl, {"op": "step", "at": ph})
        time.sleep(0.005)
    return None


def trim(uri, ctl, lay, member_bytes, new):
    problems = []
    seen = {}
    ans = ask(ctl, {"op": "replace", "member": 0, "new": new, "force": True})
    if not ans.get("ok"):
        return {}, ["replace refused: %s" % ans.get("error")]
    st = wait_phase(ctl, "advanced", 1, seen)
    if st is None or st.get("phase") != "advanced":
        return {}, ["the copier was never held at its first window's end"]
    h = connect(uri)
    size = h.get_size()
    done = threading.Event()
    result = {}

    def do_trim():
        t = time.monotonic()
        try:
            h.trim(size, 0)
        except Exception as e:  # noqa: BLE001
            result["error"] = str(e)
        result["seconds"] = time.monotonic() - t
        done.set()

    t = threading.Thread(target=do_trim, daemon=True)
    t.start()
    # The trim is held by window 1 (announced before it).
    end = time.monotonic() + 30
    while status(ctl).get("clients_held", 0) < 1 and not done.is_set():
        if time.monotonic() > end:
            problems.append("the trim was neither held nor done")
            break
        time.sleep(0.005)
    held_at = status(ctl)
    ask(ctl, {"op": "step", "at": "advanced"})
    # Held at the next phase: the trim must end meanwhile.
    end = time.monotonic() + 60
    nxt = None
    while time.monotonic() < end:
        st = status(ctl)
        if st.get("phase_held") and \
                st.get("phase_seq", 0) > held_at.get("phase_seq", 0):
            nxt = st
            break
        time.sleep(0.005)
    if not done.wait(30):
        problems.append("the trim of the whole volume did not end while the "
                        "copier was held at %s with %d of %d bytes copied: "
                        "it waits for the copy to pass its whole span (or "
                        "for a window the copier holds while it waits for "
                        "the trim)"
                        % (nxt and nxt.get("phase"),
                           (nxt or {}).get("bytes_copied", 0),
                           (nxt or {}).get("bytes_total", 0)))
        return {"trim_done": False}, problems
    # Let the copy end.
    end = time.monotonic() + 60
    st = {}
    while time.monotonic() < end:
        st = status(ctl)
        if st.get("state") in ("done", "failed", "cancelled"):
            break
        if st.get("phase_held"):
            ask(ctl, {"op": "step"})
        time.sleep(0.005)
    t.join(60)
    if result.get("error"):
        problems.append("the trim failed: %s" % result["error"])
    if st.get("state") != "done":
        problems.append("the replace ended %s" % st.get("state"))
    # Trimmed: the whole volume reads as zeroes (files punch holes).
    zero = bytes(1 << 20)
    for off in range(0, size, 1 << 20):
        if h.pread(min(1 << 20, size - off), off) != zero[:min(1 << 20,
                                                              size - off)]:
            problems.append("logical %d: not zero after the trim" % off)
            break
    h.shutdown()
    out = {"trim_seconds": round(result.get("seconds", -1), 3),
           "held_at_copied": held_at.get("bytes_copied"),
           "next_phase": nxt and nxt.get("phase"),
           "state": st.get("state")}
    return out, problems


def main(argv):
    if len(argv) == 7 and argv[0] == "hot":
        out, problems = hot(argv[1], argv[2], Layout(argv[3]), int(argv[4]),
                            argv[5], int(argv[6]))
    elif len(argv) == 6 and argv[0] == "trim":
        out, problems = trim(argv[1], argv[2], Layout(argv[3]), int(argv[4]),
                             argv[5])
    else:
        print("usage: starve.py hot ... | starve.py trim ...",
              file=sys.stderr)
        return 2
    print(json.dumps(out))
    for p in problems:
        print("starve: " + p, file=sys.stderr)
    return 1 if problems else 0


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
