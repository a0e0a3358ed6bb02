#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""An independent model of Linux md raid0 (drivers/md/raid0.c, 6.1), for
tests/vm/md_raid0.sh: it checks member files that md (or nbdstripe in md
mode) wrote against a pattern, without md and without nbdstripe's code.

What the model says (md-research notes, sections 2.1-2.5):

* Each member contributes its data area (data_offset, data_size from its
  superblock), rounded down to whole chunks: r = floor(data_size / C) * C.
* Zones: one per distinct rounded size, ascending.  Zone 0 stripes over
  every member up to the smallest r; each further zone over the members
  (in role order) whose r exceeds where the previous zone ended on the
  members (its dev_start).
* Inside a zone of nb members starting at array chunk Z, array chunk k
  lies on row (k - Z) div nb at member chunk dev_start + row.  Which of
  the zone's members: (k - Z) mod nb for layout 2 (ALTERNATE, the zone
  relative chunk number), k mod nb for layout 1 (ORIGINAL, the absolute
  one).  Zone 0 starts at 0, so there the two agree.
* The array size is the sum over members of (r & ~(C - 1)), in sectors:
  for a chunk that is not a power of two the mask can drop the end of
  the last zone.

Usage:
  md_raid0_model.py selftest
  md_raid0_model.py size CHUNK DATA_SIZE...          (bytes) -> bytes
  md_raid0_model.py check --chunk BYTES --layout 1|2 --pattern FILE
        [--size BYTES] [--require-distinct] MEMBER...
      MEMBER = PATH:DATA_OFFSET:DATA_SIZE (bytes), in role order.
      The first SIZE bytes of FILE (the array) must be where the model
      puts them on the members; what the zones cover past the array's end
      and every member's data past its rounded size must be zero (never
      written: fresh sparse files).  When the two layouts place data
      differently for this geometry, the other layout must NOT match;
      --require-distinct fails when they would place it identically.
Exit status 0 when everything agrees, 1 otherwise, 2 on bad usage.
"""

import argparse
import os
import random
import sys

SECTOR = 512
ORIGINAL, ALTERNATE = 1, 2
NAMES = {ORIGINAL: "original", ALTERNATE: "alternate"}


def build_zones(rounded_chunks):
    """Zones from each member's rounded size in chunks, in role order.

    Returns a list of dicts: start (array chunk), chunks (length),
    dev_start (member chunk), devs (member indices, role order)."""
    zones = []
    start = 0
    below = 0                   # where the previous zone ended on the members
    for size in sorted(set(rounded_chunks)):
        if size == 0:
            continue
        devs = [i for i, r in enumerate(rounded_chunks) if r > below]
        length = (size - below) * len(devs)
        zones.append(dict(start=start, chunks=length, dev_start=below, devs=devs))
        start += length
        below = size
    return zones


def locate(zones, layout, k):
    """Member index and member chunk (past dev data start) of array chunk k."""
    for z in zones:
        if k < z["start"] + z["chunks"]:
            nb = len(z["devs"])
            rel = k - z["start"]
            pick = (k if layout == ORIGINAL else rel) % nb
            return z["devs"][pick], z["dev_start"] + rel // nb
    raise IndexError(k)


def layouts_identical(zones):
    """Whether ORIGINAL and ALTERNATE place every chunk alike."""
    return all(len(z["devs"]) < 2 or z["start"] % len(z["devs"]) == 0
               for z in zones)


def md_size_sectors(data_sizes_sectors, chunk_sectors):
    """raid0_size: the sum of each rounded member size masked by ~(C-1)."""
    total = 0
    for d in data_sizes_sectors:
        r = d // chunk_sectors * chunk_sectors
        total += r & ~(chunk_sectors - 1)
    return total


def describe(zones, chunk):
    out = []
    for i, z in enumerate(zones):
        nb = len(z["devs"])
        out.append("zone %d: array chunks %d-%d over members %s from member "
                   "chunk %d (start mod %d = %d)"
                   % (i, z["start"], z["start"] + z["chunks"] - 1,
                      ",".join(map(str, z["devs"])), z["dev_start"], nb,
                      z["start"] % nb))
    return out


# --- self test ---------------------------------------------------------------

def table(sizes, layout):
    zones = build_zones(sizes)
    total = zones[-1]["start"] + zones[-1]["chunks"]
    return " ".join("%s%d" % ("ABCDEFGH"[m], off)
                    for m, off in (locate(zones, layout, k) for k in range(total)))


def selftest():
    # The worked examples (md-research 2.5), chunk = 1 unit.
    want = {
        ((4, 4, 2), ORIGINAL): "A0 B0 C0 A1 B1 C1 A2 B2 A3 B3",
        ((4, 4, 2), ALTERNATE): "A0 B0 C0 A1 B1 C1 A2 B2 A3 B3",
        ((3, 3, 1), ALTERNATE): "A0 B0 C0 A1 B1 A2 B2",
        ((3, 3, 1), ORIGINAL): "A0 B0 C0 B1 A1 B2 A2",
        ((4, 4, 4, 2), ALTERNATE): "A0 B0 C0 D0 A1 B1 C1 D1 A2 B2 C2 A3 B3 C3",
        ((4, 4, 4, 2), ORIGINAL): "A0 B0 C0 D0 A1 B1 C1 D1 C2 A2 B2 C3 A3 B3",
    }
    for (sizes, layout), expect in want.items():
        got = table(list(sizes), layout)
        if got != expect:
            print("selftest: %s %s: %s, expected %s"
                  % (sizes, NAMES[layout], got, expect), file=sys.stderr)
            return 1
    assert layouts_identical(build_zones([4, 4, 2]))
    assert not layouts_identical(build_zones([3, 3, 1]))
    assert layouts_identical(build_zones([5, 3, 2]))
    # Every geometry: each layout is a bijection onto the rounded areas.
    rng = random.Random(14)
    for _ in range(500):
        sizes = [rng.randint(1, 12) for _ in range(rng.randint(1, 5))]
        zones = build_zones(sizes)
        total = zones[-1]["start"] + zones[-1]["chunks"]
        assert total == sum(sizes)
        for layout in (ORIGINAL, ALTERNATE):
            seen = {locate(zones, layout, k) for k in range(total)}
            assert len(seen) == total
            assert all(off < sizes[m] for m, off in seen)
    # md's size rule: a power-of-two chunk keeps the sum; chunk 24 sectors
    # with members of 48, 72, 480 sectors exports 584, not 600.
    assert md_size_sectors([2093056, 2093056], 1024) == 4186112
    assert md_size_sectors([48, 72, 480], 24) == 584
    print("selftest: worked examples, bijections, size rule: ok")
    return 0


# --- check -------------------------------------------------------------------

def pread_exact(fd, length, offset):
    buf = os.pread(fd, length, offset)
    if len(buf) < length:
        buf += b"\0" * (length - len(buf))     # past the end reads as zero
    return buf


def run_check(members, chunk, layout, pattern_fd, size, verbose):
    """Count mismatches of the members against the pattern for one layout."""
    csec = chunk // SECTOR
    rounded = [ds // SECTOR // csec for _, _, ds in members]
    zones = build_zones(rounded)
    covered = zones[-1]["start"] + zones[-1]["chunks"] if zones else 0
    fds = [os.open(p, os.O_RDONLY) for p, _, _ in members]
    bad = 0
    shown = 0
    zero = bytes(chunk)
    try:
        for k in range(covered):
            m, mchunk = locate(zones, layout, k)
            at = members[m][1] + mchunk * chunk
            got = pread_exact(fds[m], chunk, at)
            lo = k * chunk
            n = max(0, min(chunk, size - lo))          # array bytes in this chunk
            want = pread_exact(pattern_fd, n, lo) + zero[n:]
            if got != want:
                bad += 1
                if verbose and shown < 5:
                    shown += 1
                    what = "array bytes" if n == chunk else (
                        "past the array's end" if n == 0 else "the array's last chunk")
                    print("  mismatch: array chunk %d (%s, offset %d) on member %d "
                          "at %d" % (k, what, lo, m, at))
        # Each member's data past its rounded size: never written.
        for m, (path, doff, dsize) in enumerate(members):
            tail_at = doff + rounded[m] * chunk
            tail = dsize - rounded[m] * chunk
            if tail and pread_exact(fds[m], tail, tail_at) != bytes(tail):
                bad += 1
                if verbose:
                    print("  mismatch: member %d (%s): data past its rounded size "
                          "(%d bytes at %d) is not zero" % (m, path, tail, tail_at))
    finally:
        for fd in fds:
            os.close(fd)
    return bad, zones


def check(args):
    if args.chunk % SECTOR or args.chunk <= 0:
        print("check: chunk %d is not a positive multiple of 512" % args.chunk,
              file=sys.stderr)
        return 2
    members = []
    for spec in args.member:
        path, doff, dsize = spec.rsplit(":", 2)
        members.append((path, int(doff), int(dsize)))
    csec = args.chunk // SECTOR
    size = md_size_sectors([d // SECTOR for _, _, d in members], csec) * SECTOR
    rc = 0
    print("model: chunk %d, layout %d (%s), %d members, array %d bytes"
          % (args.chunk, args.layout, NAMES[args.layout], len(members), size))
    if args.size is not None and args.size != size:
        print("model: FAIL: the array has %d bytes, md's size rule says %d"
              % (args.size, size))
        rc = 1
    pattern_fd = os.open(args.pattern, os.O_RDONLY)
    if os.fstat(pattern_fd).st_size < size:
        print("model: FAIL: the pattern is shorter than the array")
        return 1
    bad, zones = run_check(members, args.chunk, args.layout, pattern_fd, size, True)
    for line in describe(zones, args.chunk):
        print("model:   " + line)
    covered = (zones[-1]["start"] + zones[-1]["chunks"]) * args.chunk if zones else 0
    if covered != size:
        print("model:   the zones cover %d bytes, md exports %d (chunk mask)"
              % (covered, size))
    if bad:
        print("model: FAIL: %d chunk(s) differ from the %s layout"
              % (bad, NAMES[args.layout]))
        rc = 1
    else:
        print("model: every member holds the pattern where the %s layout puts it"
              % NAMES[args.layout])
    other = ALTERNATE if args.layout == ORIGINAL else ORIGINAL
    if layouts_identical(zones):
        msg = "the two layouts place every chunk alike for this geometry"
        if args.require_distinct:
            print("model: FAIL: " + msg + " (the case cannot tell them apart)")
            rc = 1
        else:
            print("model: " + msg)
    else:
        obad, _ = run_check(members, args.chunk, other, pattern_fd, size, False)
        if obad == 0:
            print("model: FAIL: the %s layout matches too" % NAMES[other])
            rc = 1
        else:
            print("model: the %s layout does not match (%d chunks differ): "
                  "the case tells the layouts apart" % (NAMES[other], obad))
    os.close(pattern_fd)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("selftest")
    sp = sub.add_parser("size")
    sp.add_argument("chunk", type=int)
    sp.add_argument("data_size", type=int, nargs="+")
    cp = sub.add_parser("check")
    cp.add_argument("--chunk", type=int, required=True)
    cp.add_argument("--layout", type=int, choices=(ORIGINAL, ALTERNATE), required=True)
    cp.add_argument("--pattern", required=True)
    cp.add_argument("--size", type=int)
    cp.add_argument("--require-distinct", action="store_true")
    cp.add_argument("member", nargs="+")
    args = ap.parse_args()
    if args.cmd == "selftest":
        return selftest()
    if args.cmd == "size":
        csec = args.chunk // SECTOR
        print(md_size_sectors([d // SECTOR for d in args.data_size], csec) * SECTOR)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
