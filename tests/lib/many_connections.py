#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# tests/e2e: many_connections.py URI N: N connections at once, each with 16
# reads in flight spanning two members; prints the errors seen (errno ->
# count) and exits 1 if there was any.
import os
import resource
import sys

import nbd

uri, n = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 256)), hard))
hs, bad = [], {}


def done(err):
    e = err.value if hasattr(err, "value") else err
    if e:
        bad[e] = bad.get(e, 0) + 1
    return 1


for k in range(n):
    h = nbd.NBD()
    h.connect_uri(uri)
    hs.append(h)
for h in hs:
    for j in range(16):
        h.aio_pread(bytearray(131072), 131072 * j, completion=done)
for h in hs:
    while h.aio_in_flight() > 0:
        h.poll(-1)
print("connections", len(hs), "requests", 16 * len(hs), "errors",
      {os.strerror(e): c for e, c in bad.items()})
sys.exit(1 if bad else 0)
