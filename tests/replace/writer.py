#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# A client writing to a served volume across a replace, for
# tests/replace/remote.sh.  Run with /usr/bin/python3 (python3-libnbd).
#
#   writer.py [--avoid OFFSET:LENGTH]... URI CTL REFERENCE [AFTER]
#       REFERENCE holds the volume's bytes (its size is the volume's).
#       Writes random blocks (4K to 64K, 512-aligned) at random offsets of
#       the volume, each one into REFERENCE too, a flush every 16 writes,
#       from one connection (writes in order: REFERENCE is the volume's
#       content when the writer is done).  Polls the control socket CTL
#       every 8 writes and goes on until the replace has ended (done,
#       failed, cancelled), then AFTER (default 32) writes more -- on the
#       new member once the switch is done.  Waits for the replace to
#       start first (a deadline of 30 s); one that has started and
#       ended between two polls counts, when none was in the status at
#       the start.  --avoid: no write touches
#       that logical range (tests/replace/spares.sh --scrub: places the
#       replace loses, whose content the test models itself).
#
# Output: a JSON summary on stdout (writes while copying, after the end,
# the replace's end state); exit status 1 if a write failed or a
# deadline passed.

import json
import os
import random
import sys
import time

import nbd

ENDS = {"done", "failed", "cancelled"}


sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask as ask_ctl, replace_of  # noqa: E402


def state(ctl):
    return (replace_of(ask_ctl(ctl, {"op": "status"})) or {}).get("state")


def main(argv):
    avoid = []
    while len(argv) >= 2 and argv[0] == "--avoid":
        a, n = (int(x) for x in argv[1].split(":"))
        avoid.append((a, a + n))
        argv = argv[2:]
    if len(argv) not in (3, 4):
        print("usage: writer.py [--avoid OFFSET:LENGTH]... URI CTL REFERENCE "
              "[AFTER]", file=sys.stderr)
        return 2
    uri, ctl, ref = argv[0], argv[1], argv[2]
    after = int(argv[3]) if len(argv) == 4 else 32
    rnd = random.Random(os.getpid())
    h = nbd.NBD()
    h.connect_uri(uri)
    size = h.get_size()
    if size != os.path.getsize(ref):
        print(f"volume {size} bytes, reference {os.path.getsize(ref)}",
              file=sys.stderr)
        return 1
    fd = os.open(ref, os.O_RDWR)
    counts = {"before": 0, "copying": 0, "after": 0}
    phase, end_state, n = "before", None, 0
    deadline = time.monotonic() + 30
    first = state(ctl)
    left = after
    while True:
        if n % 8 == 0 and phase != "after":
            s = state(ctl)
            if s in ("copying", "switching"):
                phase = "copying"
            elif s in ENDS and (phase == "copying" or
                                (phase == "before" and first is None)):
                # Ended -- or started and ended between two polls (one
                # that stops in its first window), while none was there
                # when the writer started.
                phase, end_state = "after", s
            elif phase == "before" and time.monotonic() > deadline:
                print("the replace did not start within 30 s", file=sys.stderr)
                return 1
            elif phase == "copying" and s not in ("copying", "switching"):
                print(f"unexpected replace state {s!r}", file=sys.stderr)
                return 1
        length = rnd.randrange(8, 129) * 512
        off = rnd.randrange(0, (size - length) // 512 + 1) * 512
        if any(off < b and a < off + length for a, b in avoid):
            continue
        data = rnd.randbytes(length)
        h.pwrite(data, off)
        os.pwrite(fd, data, off)
        counts[phase] += 1
        n += 1
        if n % 16 == 0:
            h.flush()
        if phase == "after":
            left -= 1
            if left == 0:
                break
    h.flush()
    os.close(fd)
    h.shutdown()
    print(json.dumps({"writes_before": counts["before"],
                      "writes_copying": counts["copying"],
                      "writes_after": counts["after"],
                      "end": end_state}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
