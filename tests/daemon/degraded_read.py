#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# degraded_read.py URI IMAGE CHUNK MEMBERS MISSING: the volume at URI,
# served degraded without member MISSING, holds IMAGE (what was written
# to it) in every chunk that is not on MISSING, and every read touching
# a chunk on MISSING fails with EIO -- never zeros, never another
# member's bytes.  Block status never calls those chunks zero.  A write
# is refused.  Exit 0, or 1 with each difference said.
#
# The oracle is md raid0's with equal members (one zone), computed here
# and not by the project's layout code: chunk c of the volume is on
# member c mod MEMBERS.
import errno
import sys

import nbd

uri, image = sys.argv[1], sys.argv[2]
chunk, members, missing = map(int, sys.argv[3:6])
want = open(image, "rb").read()
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(uri)
size = h.get_size()
bad = lost = intact = 0


def say(msg):
    global bad
    print(msg)
    bad += 1


def read_fails(off, n):
    try:
        got = h.pread(n, off)
    except nbd.Error as e:
        return e.errnum == errno.EIO, e
    return False, got


if size != len(want):
    say("volume size %d, %d bytes were written" % (size, len(want)))
for c in range(size // chunk):
    off = c * chunk
    if c % members == missing:
        # The whole chunk, and a piece straddling into it from the chunk
        # before: both fail with EIO.
        for at, n in ((off, chunk), (off + chunk // 2, 4096),
                      (max(off - 4096, 0), 8192)):
            ok, what = read_fails(at, n)
            if not ok:
                say("chunk %d (member %d) at %d+%d: %s instead of EIO" %
                    (c, missing, at, n,
                     "zeros" if isinstance(what, bytes) and not any(what)
                     else "data" if isinstance(what, bytes) else what))
        lost += 1
    else:
        try:
            got = h.pread(chunk, off)
        except nbd.Error as e:
            say("chunk %d (member %d): %s" % (c, c % members, e))
            continue
        if got != want[off:off + chunk]:
            say("chunk %d (member %d): differs from what was written" %
                (c, c % members))
        intact += 1

# Block status: no byte of a lost chunk reported as reading zeros.
zeroed = []


def extent(meta, offset, entries, err):
    at = offset
    for i in range(0, len(entries), 2):
        n, flags = entries[i], entries[i + 1]
        if flags & nbd.STATE_ZERO:
            for c in range(at // chunk, (at + n + chunk - 1) // chunk):
                if c % members == missing:
                    zeroed.append(c)
        at += n
    return 0


pos = 0
while pos < size:
    before = len(zeroed)
    last = [pos]

    def cb(meta, offset, entries, err):
        extent(meta, offset, entries, err)
        last[0] = offset + sum(entries[0::2])
        return 0
    h.block_status(min(size - pos, 1 << 30), pos, cb)
    if last[0] <= pos:
        say("block status made no progress at %d" % pos)
        break
    pos = last[0]
if zeroed:
    say("block status calls lost chunks zero: %s" % sorted(set(zeroed))[:10])

try:
    h.pwrite(b"x" * 4096, 0)
    say("a write to the degraded volume succeeded")
except nbd.Error as e:
    pass
print("%d chunks lost (EIO), %d intact, %d problems" % (lost, intact, bad))
sys.exit(1 if bad else 0)
