#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""flush.py URI CTL LAYOUT OLD_DIR NEW NEW_DIR: tests/replace/flush.sh's
client.

The volume at URI (control socket CTL, served with -D
stripe.replace_gate=1; LAYOUT "N,CHUNK,DATA_OFFSET", tests/lib/
equal_layout.py) has member 0 behind tests/lib/flush_member.sh (its
directory OLD_DIR); member 0 is replaced by NEW (an NBD URI, also behind
flush_member.sh, directory NEW_DIR).  The members' logs say which of them
each flush synced.  Exit 0 when every check passed."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))
sys.dont_write_bytecode = True          # no __pycache__ in the source tree
from replace_ctl import ask, replace_of  # noqa: E402
from equal_layout import Layout  # noqa: E402

import nbd  # noqa: E402

URI, CTL, LAY, OLD, NEW, NEWDIR = sys.argv[1:7]
lay = Layout(LAY)
BS = 4096
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)


def log(d):
    with open(os.path.join(d, "log")) as f:
        return [line.split() for line in f]


def syncs(d, before):
    """Syncs of the member in directory d since before (its log then)."""
    return sum(1 for l in log(d)[len(before):] if l[0] == "flush-start")


def status():
    return replace_of(ask(CTL, {"op": "status"}))


def hold_at(phase, deadline=60):
    """Let the copier go, phase by phase, until it is held at phase (or
    has ended); returns the replace's status."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        st = status()
        if st.get("state") in ("done", "failed", "cancelled"):
            return st
        if st.get("phase_held"):
            if st.get("phase") == phase:
                return st
            ans = ask(CTL, {"op": "step", "at": st["phase"]})
            if not ans.get("ok"):
                raise RuntimeError("step refused: %s" % ans)
            continue
        time.sleep(0.005)
    raise RuntimeError("the copier did not reach %s within %d s" % (phase, deadline))


h = nbd.NBD()
h.connect_uri(URI)
h.flush()

ans = ask(CTL, {"op": "replace", "member": 0, "new": NEW, "force": True})
check(ans.get("ok") is True, "the replace of member 0 started (%s)" % ans.get("error"))
st = hold_at("advanced")
copied = st.get("bytes_copied", 0)
check(st.get("phase") == "advanced" and copied > 0,
      "the copier is held with %d bytes copied" % copied)

# Below the watermark a write reaches both members.
mo = lay.doff + lay.chunk                 # member 0's second chunk
check(mo + BS <= lay.doff + copied, "(member offset %d is below the watermark)" % mo)
h.flush()
b_old, b_new = log(OLD), log(NEWDIR)
h.pwrite(b"m" * BS, lay.logical(0, mo))
check(any(l[:2] == ["write", str(mo)] for l in log(NEWDIR)[len(b_new):]),
      "a write below the watermark is mirrored onto NEW")
b_old, b_new = log(OLD), log(NEWDIR)
h.flush()
check(syncs(OLD, b_old) == 1 and syncs(NEWDIR, b_new) == 1,
      "the flush after it syncs the member and NEW (%d, %d syncs)"
      % (syncs(OLD, b_old), syncs(NEWDIR, b_new)))
b_old, b_new = log(OLD), log(NEWDIR)
h.flush()
check(syncs(OLD, b_old) == 0 and syncs(NEWDIR, b_new) == 0,
      "the next flush syncs neither")
h.pwrite(b"o" * BS, lay.logical(1, lay.doff))     # member 1 only
b_old, b_new = log(OLD), log(NEWDIR)
h.flush()
check(syncs(OLD, b_old) == 0 and syncs(NEWDIR, b_new) == 0,
      "a flush after a write on the other member syncs neither")

# To the end: the switch.
st = hold_at("none-such", deadline=120)
check(st.get("state") == "done", "the replace is done (%s)" % st.get("error"))
# NEW was synced at the switch with nothing in flight, and is marked all
# the same: the first flush syncs it once, the old member no more.
b_old, b_new = log(OLD), log(NEWDIR)
h.flush()
check(syncs(NEWDIR, b_new) == 1 and syncs(OLD, b_old) == 0,
      "after the switch, the first flush syncs NEW (now member 0) once, the "
      "old member not (%d, %d syncs)" % (syncs(NEWDIR, b_new), syncs(OLD, b_old)))
b_new = log(NEWDIR)
h.flush()
check(syncs(NEWDIR, b_new) == 0, "the next flush does not")
h.pwrite(b"n" * BS, lay.logical(0, mo))
b_old, b_new = log(OLD), log(NEWDIR)
h.flush()
check(syncs(NEWDIR, b_new) == 1 and syncs(OLD, b_old) == 0,
      "a write on member 0 is synced on NEW")
h.shutdown()
sys.exit(1 if fails else 0)
