#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# lost_read.py URI IMAGE RANGES: the volume at URI holds IMAGE but in
# RANGES ("OFFSET LENGTH" lines: the volume's lost ranges), where every
# 4 KiB read fails with EIO -- lost stays lost, never zeros.  Exit 0, or
# 1 (each difference said).
import errno, sys, nbd
uri, pattern, ranges = sys.argv[1], sys.argv[2], sys.argv[3]
want = open(pattern, "rb").read()
lost = [tuple(map(int, l.split())) for l in ranges.splitlines() if l.strip()]
h = nbd.NBD()
h.connect_uri(uri)
bad = 0
for off, ln in lost:
    for at in range(off, off + ln, 4096):
        try:
            h.pread(4096, at)
            print("read at %d of a lost range succeeded" % at)
            bad += 1
        except nbd.Error as e:
            if e.errnum != errno.EIO:
                print("read at %d: %s, not EIO" % (at, e))
                bad += 1
# Everything else, in pieces between the lost ranges.
edges = sorted(lost) + [(len(want), 0)]
pos = 0
for off, ln in edges:
    while pos < off:
        n = min(1 << 20, off - pos)
        if h.pread(n, pos) != want[pos:pos + n]:
            print("bytes at %d differ from the data written" % pos)
            bad += 1
        pos += n
    pos = max(pos, off + ln)
sys.exit(1 if bad else 0)
