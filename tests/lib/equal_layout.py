#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layout of a volume of equal members (md raid0, one zone: both of
md's layouts alike), for the Python clients of tests/replace: written
from the layout's definition, not from nbdstripe's code.

Layout("N,CHUNK,DATA_OFFSET"): member offset MO of member I (MO >= the
data offset, rel = MO - DATA_OFFSET) holds logical byte
    (rel // CHUNK) * N * CHUNK + I * CHUNK + rel % CHUNK
(tests/lib/replace.sh's rp_logical computes the same in bash).
"""


class Layout:
    def __init__(self, text):
        self.n, self.chunk, self.doff = (int(x) for x in text.split(","))

    def logical(self, index, mo):
        """The logical offset of member index's byte at member offset mo."""
        rel = mo - self.doff
        return ((rel // self.chunk) * self.n * self.chunk
                + index * self.chunk + rel % self.chunk)

    def member_bytes(self, buf, index, data_bytes):
        """Member index's data area (data_bytes long) out of the volume's
        bytes buf."""
        out = bytearray(data_bytes)
        for rel in range(0, data_bytes, self.chunk):
            lo = self.logical(index, self.doff + rel)
            n = min(self.chunk, data_bytes - rel)
            out[rel:rel + n] = buf[lo:lo + n]
        return out
