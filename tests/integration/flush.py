#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""flush.py URI CHUNK DIR...: tests/integration/flush.sh's client.

The volume at URI stripes chunk CHUNK over the members whose
tests/lib/flush_member.sh directories are DIR... (in member order; data
from member offset 0, equal members): logical chunk c lives on member
c % N at member offset (c // N) * CHUNK.  Each member's log says what it
did, in order: writes landed, syncs started and ended.  Several
connections to the volume write and flush; after each step the members'
logs are read to see which members a flush synced.  Exit 0 when every
check passed, 1 otherwise (each failure printed)."""

import os
import random
import sys
import threading
import time

import nbd

URI, CHUNK, DIRS = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
N = len(DIRS)
BS = 4096
DEADLINE = 60          # s: for a member's log to show a flush starting

fails = 0


def ok(what):
    print("ok: %s" % what, flush=True)


def bad(what):
    global fails
    fails += 1
    print("FAIL: %s" % what, flush=True)


def check(cond, what):
    ok(what) if cond else bad(what)


def connect():
    h = nbd.NBD()
    h.connect_uri(URI)
    return h


def offset(k, i):
    """The volume offset of member k's chunk i."""
    return (i * N + k) * CHUNK


def log(k):
    with open(os.path.join(DIRS[k], "log")) as f:
        return [line.split() for line in f]


def logs():
    return [log(k) for k in range(N)]


def since(before):
    """Each member's log lines after the snapshot before."""
    return [log(k)[len(before[k]):] for k in range(N)]


def flushed(lines):
    """Members whose lines hold a flush that started."""
    return {k for k in range(N) if any(l[0] == "flush-start" for l in lines[k])}


def touch(k, name):
    open(os.path.join(DIRS[k], name), "w").close()


def remove(k, name):
    os.unlink(os.path.join(DIRS[k], name))


def write_line(lines, off):
    """Index of the (last) write line at member offset off."""
    idx = [i for i, l in enumerate(lines) if l[0] == "write" and int(l[1]) == off]
    return idx[-1] if idx else None


def synced_after(lines, i):
    """Whether a sync started after line i and ended (successfully)."""
    started = {l[1] for l in lines[i + 1:] if l[0] == "flush-start"}
    return any(l[0] == "flush-end" and l[1] in started for l in lines[i + 1:])


def ended(lines, what="flush-end"):
    return any(l[0] == what for l in lines)


def wait_flush_started(k, count):
    """Member k's log holds count flush-start lines (within DEADLINE)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if sum(1 for l in log(k) if l[0] == "flush-start") >= count:
            return True
        time.sleep(0.01)
    return False


def wait_done(h, cookie):
    """Run h until its command cookie completes; True if it succeeded,
    else the nbd.Error."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        try:
            if h.aio_command_completed(cookie):
                return True
        except nbd.Error as e:
            return e
        h.poll(100)
    raise RuntimeError("command %d did not complete in %d s" % (cookie, DEADLINE))


def still_pending(h, cookie, secs=0.3):
    """Whether h's command cookie has not completed after secs (it must
    not: what it waits for is held).  A bounded look, not a wait for an
    event: correct code passes it whatever the timing."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        h.poll(10)
        try:
            if h.aio_command_completed(cookie):
                return False
        except nbd.Error:
            return False
    return True


def starts(k):
    return sum(1 for l in log(k) if l[0] == "flush-start")


def data(tag):
    return (tag.encode() * BS)[:BS]


A, B, C, D = (connect() for _ in range(4))
assert A.can_multi_conn(), "the volume must advertise multi-conn"

# Nothing is synced before anything is written (serving, connecting).
b = logs()
A.flush()
check(flushed(since(b)) == set(), "a flush with nothing written syncs no member")

# (a) Written on one connection, flushed on another: the one member.
A.pwrite(data("a"), offset(1, 0))
b = logs()
B.flush()
s = since(b)
check(flushed(s) == {1},
      "a flush after a write on member 1 (another connection) syncs member 1 "
      "only (synced: %s)" % sorted(flushed(s)))
check(ended(s[1]), "member 1's sync ended before the flush returned")

# (b) Nothing written since: no member.
b = logs()
C.flush()
D.flush()
check(flushed(since(b)) == set(), "a flush after a flush syncs no member")

# FUA writes are durable by themselves: no sync for them.
A.pwrite(data("f"), offset(2, 0), nbd.CMD_FLAG_FUA)
check(log(2)[-1][:2] == ["write", str(0)] and log(2)[-1][3] == "fua",
      "a FUA write reaches member 2 with FUA")
b = logs()
B.flush()
check(flushed(since(b)) == set(), "a flush after a FUA write syncs no member")

# Zeroes and trims mark their members too.
A.zero(BS, offset(3, 0))
B.trim(BS, offset(0, 1))
b = logs()
C.flush()
check(flushed(since(b)) == {0, 3},
      "a flush after a zero on member 3 and a trim on member 0 syncs those "
      "(synced: %s)" % sorted(flushed(since(b))))

# A write spanning members marks each member it touched.
A.pwrite(data("s") * (CHUNK // BS) * 2, offset(1, 2))      # members 1 and 2
b = logs()
D.flush()
check(flushed(since(b)) == {1, 2},
      "a flush after a write across members 1 and 2 syncs those "
      "(synced: %s)" % sorted(flushed(since(b))))

# (c) A write completing while member 1's sync is held: a flush started
# after it must not rely on that sync, but start one of its own (or rely
# on one started after the write landed); it cannot end before that one
# has.
touch(1, "hold")
A.pwrite(data("1"), offset(1, 3))
n0 = starts(1)
f1 = B.aio_flush()
check(wait_flush_started(1, n0 + 1), "the first flush's sync of member 1 has started (held)")
w2 = offset(1, 4)
C.pwrite(data("2"), w2)                 # lands while the sync is held
f2 = D.aio_flush()
check(still_pending(B, f1) and still_pending(D, f2),
      "neither flush returns while member 1's sync is held")
remove(1, "hold")
check(wait_done(B, f1) is True, "the first flush succeeds once released")
r = wait_done(D, f2)
lines = log(1)
i = write_line(lines, 4 * CHUNK)
check(r is True and i is not None and synced_after(lines, i),
      "a flush started after a write that landed during a sync returns only "
      "after a sync of member 1 that started after that write ended")
check(i is not None and sum(1 for l in lines[:i] if l[0] == "flush-start") == n0 + 1,
      "(the write did land while the first sync was held)")

# ... and, with no flush racing, the next flush syncs the member again:
# the write's mark outlived the sync it raced (clear before the sync).
touch(2, "hold")
A.pwrite(data("3"), offset(2, 3))
n0 = starts(2)
f3 = B.aio_flush()
check(wait_flush_started(2, n0 + 1), "a flush's sync of member 2 has started (held)")
C.pwrite(data("4"), offset(2, 4))       # lands while the sync is held
remove(2, "hold")
check(wait_done(B, f3) is True, "that flush succeeds once released")
b = logs()
D.flush()
lines = log(2)
i = write_line(lines, 4 * CHUNK)
check(flushed(since(b)) == {2} and i is not None and synced_after(lines, i),
      "the next flush syncs member 2 again: a write that landed during a sync "
      "keeps its member dirty")

# A write still in flight on the member when a flush syncs it is not
# that flush's to cover, but it is marked once it lands: the next flush
# syncs the member again (the mark is set after the write completes).
D.flush()
touch(3, "hold-write")
w = A.aio_pwrite(data("h"), offset(3, 2))
end = time.monotonic() + DEADLINE
while time.monotonic() < end and not any(l[0] == "write-held" for l in log(3)):
    time.sleep(0.01)
check(any(l[0] == "write-held" for l in log(3)), "a write is held at member 3")
B.flush()                               # syncs member 3 or not: not its write
remove(3, "hold-write")
check(wait_done(A, w) is True, "the held write succeeds once released")
b = logs()
C.flush()
lines = log(3)
i = write_line(lines, 2 * CHUNK)
check(flushed(since(b)) == {3} and i is not None and synced_after(lines, i),
      "a flush after a write that landed after the previous flush's sync "
      "syncs its member")

# A flush started while a sync runs with no write since relies on it.
A.pwrite(data("5"), offset(3, 3))
touch(3, "hold")
n0 = starts(3)
f5 = B.aio_flush()
check(wait_flush_started(3, n0 + 1), "a flush's sync of member 3 has started (held)")
f6 = C.aio_flush()
check(still_pending(C, f6),
      "a flush relying on a held sync does not return before it")
remove(3, "hold")
check(wait_done(B, f5) is True and wait_done(C, f6) is True,
      "both flushes succeed")
check(starts(3) == n0 + 1,
      "a flush started during a sync, with nothing written since, relies on "
      "it (%d sync(s) of member 3, expected 1)" % (starts(3) - n0))

# (d) A sync that fails fails the flush and leaves the member dirty: the
# next flush syncs it again.  A flush relying on that sync fails too.
touch(0, "fail")
A.pwrite(data("6"), offset(0, 5))
b = logs()
try:
    B.flush()
    bad("a flush whose sync of member 0 fails succeeded")
except nbd.Error as e:
    check(e.errno == "EIO", "a flush whose sync of member 0 fails fails (%s)" % e.errno)
check(flushed(since(b)) == {0} and ended(since(b)[0], "flush-fail"),
      "only member 0 was synced, and its sync failed")
b = logs()
try:
    C.flush()
    bad("the flush after a failed sync succeeded while member 0 still fails")
except nbd.Error as e:
    check(e.errno == "EIO" and flushed(since(b)) == {0},
          "the next flush syncs member 0 again (and fails again)")
remove(0, "fail")
b = logs()
D.flush()
check(flushed(since(b)) == {0} and ended(since(b)[0]),
      "once member 0 syncs again, the next flush syncs it and succeeds")
b = logs()
A.flush()
check(flushed(since(b)) == set(), "then a flush syncs no member")

A.pwrite(data("7"), offset(0, 6))
touch(0, "hold")
touch(0, "fail")
n0 = starts(0)
f7 = B.aio_flush()
check(wait_flush_started(0, n0 + 1), "a flush's sync of member 0 has started (held)")
f8 = C.aio_flush()
remove(0, "hold")
r7, r8 = wait_done(B, f7), wait_done(C, f8)
check(r7 is not True and r8 is not True,
      "a flush relying on another's sync that fails fails too (%s, %s)" % (r7, r8))
remove(0, "fail")
b = logs()
D.flush()
check(flushed(since(b)) == {0} and ended(since(b)[0]),
      "member 0 is still dirty, and synced by the next flush")

# Racing: 4 connections, each writing to members at random and flushing.
# After each flush: every write answered (on any connection) before the
# flush started has a sync of its member that started after the write
# landed and ended.
answered = []               # (member, member offset), once answered
lock = threading.Lock()
errors = []


def racer(t, h, rounds):
    rng = random.Random(t)
    for j in range(rounds):
        k = rng.randrange(N)
        i = 8 + t + 4 * j                  # a chunk no other write uses
        h.pwrite(data("r"), offset(k, i))
        with lock:
            answered.append((k, i * CHUNK))
        if rng.random() < 0.5:
            continue
        with lock:
            must = list(answered)
        h.flush()
        ls = logs()
        for k2, off in must:
            li = write_line(ls[k2], off)
            if li is None or not synced_after(ls[k2], li):
                errors.append("connection %d, flush %d: the write at member %d "
                              "offset %d is not covered" % (t, j, k2, off))


ths = [threading.Thread(target=racer, args=(t, h, 24))
       for t, h in enumerate((A, B, C, D))]
for th in ths:
    th.start()
for th in ths:
    th.join()
check(not errors, "racing writes and flushes from 4 connections: every flush "
      "covers every write answered before it%s" % (
          "" if not errors else ": " + "; ".join(errors[:5])))
b = logs()
A.flush()
check(all(synced_after(log(k), write_line(log(k), off)) for k, off in answered),
      "after the race, one more flush: every write is covered")

for h in (A, B, C, D):
    h.shutdown()
print("%d check(s) failed" % fails if fails else "all checks passed")
sys.exit(1 if fails else 0)
