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
#               NEW_FILE OLD_FILE
#       The replace of member INDEX (MEMBER_BYTES: its size, data offset
#       included) is running, the server holding each 4 MiB window of the
#       copy for a while (-D stripe.replace_hold_ms) between reading the
#       old member and writing NEW, and the old member slow to write (the
#       delay filter).  Each time the copy moves to another window (its
#       bytes_copied, polled on the control socket CTL), from two
#       connections at once:
#         A  4K of new bytes into the window being copied (the copier
#            holds it: the write must wait for it, else the copier writes
#            the older bytes it read over the new ones on NEW);
#         B  4K of new bytes into the next window (the write is in flight
#            on the slow old member when the copier is done with this
#            window: the copier must wait for it before it reads the next
#            one, else it copies what old held before);
#       and from a third connection, where the copy has passed: 8K of
#       write-zeroes in the window before, a trim of 8K in the one before
#       that, a flush.  Then, the replace done: the whole volume must read
#       as PATTERN with those changes (the model), and NEW's data area
#       (read directly from NEW_FILE), as well as OLD_FILE's (but for an A
#       write into the last window, which lands after the switch), must
#       hold member INDEX's part of the model.  Mismatches are reported by
#       byte range of the member and what the test did there.
#
# Output: a JSON summary on stdout; problems on stderr; exit status 1 if
# any.

import json
import os
import sys
import threading
import time

WINDOW = 4 * 1024 * 1024


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


def run(argv):
    import nbd

    uri, ctl, lay = argv[0], argv[1], Layout(argv[2])
    index, member_bytes = int(argv[3]), int(argv[4])
    pattern, new_file, old_file = argv[5], argv[6], argv[7]
    model = bytearray(open(pattern, "rb").read())
    data_bytes = member_bytes - lay.doff
    handles = []
    for _ in range(3):
        h = nbd.NBD()
        h.connect_uri(uri)
        handles.append(h)
    ha, hb, hc = handles
    done = []          # (kind, member offset, length, window)
    problems = []
    seq = [0]

    def fresh(n):
        seq[0] += 1
        b = os.urandom(n)
        return b

    def write(h, mo, data, kind, w, lat):
        lo = lay.logical(index, mo)
        t = time.monotonic()
        h.pwrite(data, lo)
        lat[kind] = time.monotonic() - t
        model[lo:lo + len(data)] = data
        done.append((kind, mo, len(data), w))

    last = None
    windows = 0
    a_after = 0        # A writes that returned with the copy past them
    lat_a = []
    deadline = time.monotonic() + 90
    while True:
        if time.monotonic() > deadline:
            print("race: the replace did not end within 90 s",
                  file=sys.stderr)
            return 1
        r = ask(ctl, {"op": "status"})
        st = r.get("state")
        if st in ("done", "failed", "cancelled"):
            break
        c = r.get("bytes_copied", 0)
        if st != "copying" or c == last:
            time.sleep(0.005)
            continue
        last = c
        w = c // WINDOW
        start = lay.doff + c
        wlen = min(WINDOW, member_bytes - start)
        if wlen < 16384:
            continue
        windows += 1
        lat = {}
        off_a = ((w * 5 + 1) * 700 * 1024) % (wlen - 8192) // 4096 * 4096
        ta = threading.Thread(target=write,
                              args=(ha, start + off_a, fresh(4096), "A", w,
                                    lat))
        tb = None
        nstart = start + wlen
        if nstart + 16384 <= member_bytes:
            nlen = min(WINDOW, member_bytes - nstart)
            off_b = ((w * 3 + 2) * 900 * 1024) % (nlen - 8192) // 4096 * 4096
            tb = threading.Thread(target=write,
                                  args=(hb, nstart + off_b, fresh(4096), "B",
                                        w, lat))
        ta.start()
        if tb:
            tb.start()
        # Where the copy has passed: zeroes and a trim, then a flush.
        if w >= 1:
            mo = lay.doff + (w - 1) * WINDOW + (w * 64 + 20) * 1024
            lo = lay.logical(index, mo)
            hc.zero(8192, lo)
            model[lo:lo + 8192] = bytes(8192)
            done.append(("zero", mo, 8192, w))
        if w >= 2:
            mo = lay.doff + (w - 2) * WINDOW + (w * 64 + 36) * 1024
            lo = lay.logical(index, mo)
            hc.trim(8192, lo)
            model[lo:lo + 8192] = bytes(8192)
            done.append(("trim", mo, 8192, w))
        hc.flush()
        ta.join()
        if tb:
            tb.join()
        lat_a.append(round(lat.get("A", 0), 3))
        r2 = ask(ctl, {"op": "status"})
        if r2.get("bytes_copied", 0) > c or r2.get("state") != "copying":
            a_after += 1
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
        return any(((d[0] in ("A", "B") and d[1] + d[2] > last_a)
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
        "windows": windows,
        "writes_A": sum(1 for d in done if d[0] == "A"),
        "writes_B": sum(1 for d in done if d[0] == "B"),
        "zeroes": sum(1 for d in done if d[0] == "zero"),
        "trims": sum(1 for d in done if d[0] == "trim"),
        "A_returned_after_window": a_after,
        "A_latency_s": lat_a,
        "state": st,
    }
    print(json.dumps(summary))
    for p in problems:
        print("race: " + p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if argv and argv[0] == "fill" and len(argv) >= 4:
        return fill(argv[1:])
    if argv and argv[0] == "run" and len(argv) == 9:
        return run(argv[1:])
    print("usage: race.py fill ... | race.py run ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
