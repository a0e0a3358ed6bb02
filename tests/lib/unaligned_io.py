#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/e2e: byte granularity.  unaligned_io.py URI SRC CHUNK: the volume
# at URI (holding SRC) advertises a minimum block size of 1 and serves
# reads and writes at any offset -- inside the first chunk (member 0),
# the second (member 1) and across a chunk border -- writing back what
# was there.
import sys

import nbd

uri, src, C = sys.argv[1], open(sys.argv[2], "rb").read(), int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
assert h.get_block_size(nbd.SIZE_MINIMUM) == 1
for off, n in ((100, 16), (4095, 3), (C + 100, 16), (C + 4095, 3),
               (2 * C - 7, 20)):
    assert h.pread(n, off) == src[off:off + n], (off, n)
    h.pwrite(b"xyz", off + 1)
    assert h.pread(3, off + 1) == b"xyz", off
    h.pwrite(src[off + 1:off + 4], off + 1)
    assert h.pread(n, off) == src[off:off + n], (off, n)
print("unaligned reads and writes ok")
