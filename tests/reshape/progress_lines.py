#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# progress_lines.py stamp OUT: copy stdin (a pipe) to OUT, each line with
# the seconds since the start (monotonic) and a tab before it.
# progress_lines.py check OUT COMMAND text|json STEP: the progress lines
# in OUT are at most 10 s and 5% apart -- plus STEP, the percentage the
# job is seen to move by at once (the mover's windows, counted when done);
# the first within 10 s of the start, the last at 100%, at least 5 of
# them; json: every line one
# JSON object, the progress ones before the last, the last the result
# with ok true.  Exit 0, or 1 saying why.
import json
import re
import sys
import time

SECONDS = 10.5

if sys.argv[1] == "stamp":
    t0 = time.monotonic()
    with open(sys.argv[2], "w") as out:
        for line in sys.stdin:
            out.write("%.3f\t%s" % (time.monotonic() - t0, line))
            out.flush()
    sys.exit(0)

_, _, path, cmd, mode, step = sys.argv
PERCENT = 5 + int(step)
stamped = [l.rstrip("\n").split("\t", 1) for l in open(path)]
progress = []  # (seconds, percent)
for n, (t, text) in enumerate(stamped):
    t = float(t)
    if mode == "json":
        try:
            o = json.loads(text)
        except ValueError as e:
            print("line %d is not one JSON object: %s" % (n + 1, e))
            sys.exit(1)
        if n == len(stamped) - 1:
            if o.get("ok") is not True or o.get("error") is not None:
                print("the last line is not a result with ok: %s" % text)
                sys.exit(1)
            continue
        if "ok" in o or o.get("command") != cmd:
            print("line %d is not a progress line of %s: %s" % (n + 1, cmd, text))
            sys.exit(1)
        progress.append((t, o["percent"]))
    else:
        m = re.match(r"%s: .* (\d+)%% " % cmd, text)
        if m:
            progress.append((t, int(m.group(1))))
if len(progress) < 5:
    print("%d progress lines, expected at least 5" % len(progress))
    sys.exit(1)
last = (0.0, 0)
for t, p in progress:
    if t - last[0] > SECONDS or p - last[1] > PERCENT:
        print("a progress line at %.1f s (%d%%) after one at %.1f s (%d%%)"
              % (t, p, last[0], last[1]))
        sys.exit(1)
    last = (t, p)
if progress[-1][1] != 100:
    print("the last progress line says %d%%" % progress[-1][1])
    sys.exit(1)
print("%d progress lines, at most %.1f s apart in %.1f s" % (
    len(progress),
    max(b[0] - a[0] for a, b in zip(progress, progress[1:])),
    progress[-1][0]))
