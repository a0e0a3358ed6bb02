#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# A client of a served volume's control socket (include/control.h), for
# the tests of nbdstripe replace (tests/replace).  Plain python3, no
# libnbd: one request a connection, one JSON line each way.
#
#   replace_ctl.py SOCKET send JSON
#       send one request; print the answer; exit 0 if it says "ok": true,
#       1 if it is a refusal.
#   replace_ctl.py SOCKET status
#       print the replace object of the status ({} when there is none).
#   replace_ctl.py SOCKET wait [--new PATH] [--state S[,S...]] [--copied N]
#                              [--deadline SECONDS]
#       poll the status (every 10 ms) until the replace (with --new: the
#       one onto PATH, for the status shows the last replace until the
#       next has started) is in one of the states and/or has copied at
#       least N bytes; print the replace
#       object; exit 0, or 3 (with the last object) at the deadline, 4 if
#       the replace ended in a state not asked for (with --state), 5 if
#       the server went away.
#   replace_ctl.py SOCKET hold PHASE[:N]|end [--new PATH]
#                              [--deadline SECONDS] [--job reshape]
#       with the server's gate (-D stripe.replace_gate=1): let the copier
#       of the replace (with --new: the one onto PATH) go, phase by phase
#       (the "step" request), until it is held the Nth time (1 unless
#       given), counted from now, at PHASE; print the replace object; exit
#       0, or 3 at the deadline, 4 if the replace ended first, 5 if the
#       server went away.  --job reshape: the grow's or shrink's copier
#       (the status's reshape object).  With end: until the replace has ended and its
#       copier is held nowhere (a copier held when a client's failure or a
#       cancel ended the replace is let go too); exit 0 whatever the end.
#   replace_ctl.py SOCKET until EXPR [DEADLINE_SECONDS]
#       poll the status until the Python expression EXPR holds, with s
#       the status object (the status file's, live); print it; exit 0, or
#       3 at the deadline.
#
# Exit status 2: usage, or no answer.

import json
import socket
import sys
import time


def ask(path, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        s.sendall((json.dumps(req) + "\n").encode())
        buf = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    finally:
        s.close()
    return json.loads(buf.decode())


def replace_of(ans, key="replace"):
    st = ans.get("status")
    if isinstance(st, dict) and key in st:
        return st[key]
    return ans.get(key, {})


ENDS = {"done", "failed", "cancelled"}


def options(cmd, rest, names):
    """The --NAME VALUE pairs of rest, each NAME one of names, as a dict;
    None (said) at a bad one."""
    got = {}
    while rest:
        name = rest[0][2:] if rest[0].startswith("--") else None
        if name not in names or len(rest) < 2:
            print("replace_ctl: %s: bad argument %s" % (cmd, rest[0]),
                  file=sys.stderr)
            return None
        got[name] = rest[1]
        rest = rest[2:]
    return got


def hold(path, args):
    target = args[0]
    phase, _, nth = target.partition(":")
    nth = int(nth) if nth else 1
    o = options("hold", args[1:], ("new", "deadline", "job"))
    if o is None:
        return 2
    new, deadline = o.get("new"), float(o.get("deadline", 30.0))
    key = o.get("job", "replace")
    end = time.monotonic() + deadline
    seen, last_seq, r = 0, None, {}
    while True:
        try:
            r = replace_of(ask(path, {"op": "status"}), key)
        except (OSError, ValueError) as e:
            print(json.dumps(r))
            print("replace_ctl: the server went away: %s" % e,
                  file=sys.stderr)
            return 5
        mine = r.get("state") is not None and (new is None
                                               or r.get("new") == new)
        ended = r.get("state") in ENDS
        held = mine and r.get("phase_held") is True
        if mine and "phase_held" not in r:
            print(json.dumps(r))
            print("replace_ctl: hold: the server has no gate "
                  "(-D stripe.replace_gate=1)", file=sys.stderr)
            return 2
        if held and r.get("phase_seq") != last_seq:
            last_seq = r.get("phase_seq")
            if not ended and r.get("phase") == phase:
                seen += 1
                if seen == nth:
                    print(json.dumps(r))
                    return 0
        if mine and ended and not held:
            print(json.dumps(r))
            if phase == "end":
                return 0
            print("replace_ctl: the replace ended %s before its copier was "
                  "held at %s" % (r.get("state"), target), file=sys.stderr)
            return 4
        if time.monotonic() > end:
            print(json.dumps(r))
            print("replace_ctl: deadline (%.0f s) passed, the copier not "
                  "held at %s" % (deadline, target), file=sys.stderr)
            return 3
        if not held:
            time.sleep(0.01)
            continue
        try:
            ans = ask(path, {"op": "step", "at": r.get("phase")})
        except (OSError, ValueError) as e:
            print(json.dumps(r))
            print("replace_ctl: the server went away: %s" % e,
                  file=sys.stderr)
            return 5
        if ans.get("ok") is not True:
            print(json.dumps(r))
            print("replace_ctl: hold: step refused: %s" % ans.get("error"),
                  file=sys.stderr)
            return 2


def main(argv):
    if len(argv) < 2:
        print(__doc__ if __doc__ else "usage", file=sys.stderr)
        return 2
    path, cmd = argv[0], argv[1]
    if cmd == "send" and len(argv) == 3:
        ans = ask(path, json.loads(argv[2]))
        print(json.dumps(ans))
        return 0 if ans.get("ok") is True else 1
    if cmd == "status" and len(argv) == 2:
        print(json.dumps(replace_of(ask(path, {"op": "status"}))))
        return 0
    if cmd == "wait":
        o = options("wait", argv[2:], ("new", "state", "copied", "deadline"))
        if o is None:
            return 2
        new = o.get("new")
        states = set(o["state"].split(",")) if "state" in o else None
        copied = int(o["copied"]) if "copied" in o else None
        deadline = float(o.get("deadline", 30.0))
        end = time.monotonic() + deadline
        r = {}
        while True:
            try:
                r = replace_of(ask(path, {"op": "status"}))
            except (OSError, ValueError) as e:
                print(json.dumps(r))
                print("replace_ctl: the server went away: %s" % e,
                      file=sys.stderr)
                return 5
            st = r.get("state")
            if new is not None and r.get("new") != new:
                st = None   # an earlier replace: this one has not started
            ok = st is not None or new is None
            if states is not None and st not in states:
                ok = False
            if copied is not None and r.get("bytes_copied", 0) < copied:
                ok = False
            if ok:
                print(json.dumps(r))
                return 0
            if states is not None and st in ENDS:
                print(json.dumps(r))
                print("replace_ctl: the replace ended %s, not %s"
                      % (st, ",".join(sorted(states))), file=sys.stderr)
                return 4
            if copied is not None and st in ENDS and states is None:
                print(json.dumps(r))
                print("replace_ctl: the replace ended %s before %d bytes "
                      "were copied" % (st, copied), file=sys.stderr)
                return 4
            if time.monotonic() > end:
                print(json.dumps(r))
                print("replace_ctl: deadline (%.0f s) passed" % deadline,
                      file=sys.stderr)
                return 3
            time.sleep(0.01)
    if cmd == "hold" and len(argv) >= 3:
        return hold(path, argv[2:])
    if cmd == "until" and len(argv) in (3, 4):
        deadline = float(argv[3]) if len(argv) == 4 else 30.0
        end = time.monotonic() + deadline
        while True:
            s = ask(path, {"op": "status"}).get("status", {})
            if eval(argv[2], {}, {"s": s}):
                print(json.dumps(s))
                return 0
            if time.monotonic() > end:
                print(json.dumps(s))
                print("replace_ctl: deadline (%.0f s) passed" % deadline,
                      file=sys.stderr)
                return 3
            time.sleep(0.01)
    print("replace_ctl: usage: SOCKET send JSON | status | wait ...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
