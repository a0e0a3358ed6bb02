#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The writer and the checker of the crash tests (tests/crash/crash.sh).
#
#   crash.py write URI STATE --size BYTES [--seed N] [--stop FILE]
#                            [--count N] [--ready FILE] [--ready-after N]
#       write 4 KiB blocks at random places below BYTES through libnbd,
#       each 512-byte sector saying which write it is (a magic, the
#       sector's number, the write's id); a flush after every 8 writes,
#       one write in 8 with FUA.  It stops at the first failure (the
#       server died), or when FILE exists or after N writes (then with a
#       last flush), and then saves STATE (JSON):
#       for each sector written, the id known durable -- written before
#       a flush that completed, or by a FUA write that completed -- and
#       the ids written since (acknowledged or not: any of them may
#       have reached the members).  STATE is extended if it exists
#       already (a writer of an earlier run).  --ready FILE: created
#       after N writes (--ready-after, default 64), for the test to go on.
#       --trim OFFSET: a trim of the 4 KiB there after every
#       --trim-every N writes (16); one that fails changes nothing.
#       --trim-all: the whole volume trimmed (and flushed) before the
#       first write: every region of its allocation map free.
#   crash.py trim URI OFFSET
#       one trim of 4 KiB there, which must fail (a member failing its
#       trims); exit 0 if it failed.
#   crash.py verify URI STATE
#       read every sector STATE names: it must hold its durable write or
#       one written after it; never an older one, zeros where a write
#       was durable, or another sector's data.  Prints a JSON summary
#       (sectors checked, durable, lost, wrong); exit 1 if any is lost
#       or wrong.
#
# The checker is the oracle: it knows nothing of the layout, only which
# writes a client was told were durable.

import json
import os
import random
import struct
import sys

import nbd

SECTOR = 512
BLOCK = 4096
MAGIC = 0x4e42534352415348  # "NBSCRASH"


def sector_data(sector, wid):
    head = struct.pack("<QQQ", MAGIC, sector, wid)
    return head + bytes((wid + sector + i) & 0xff
                        for i in range(SECTOR - len(head)))


def block_data(block, wid):
    first = block * (BLOCK // SECTOR)
    return b"".join(sector_data(first + s, wid)
                    for s in range(BLOCK // SECTOR))


def load(path):
    if not os.path.exists(path):
        return {"next": 1, "sectors": {}}
    with open(path) as f:
        return json.load(f)


def save(path, st):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.replace(tmp, path)


def opt(argv, name, default=None):
    if name in argv:
        return argv[argv.index(name) + 1]
    return default


def write(uri, path, argv):
    size = int(opt(argv, "--size"))
    seed = int(opt(argv, "--seed", "1"))
    stop = opt(argv, "--stop")
    ready = opt(argv, "--ready")
    ready_after = int(opt(argv, "--ready-after", "64"))
    count = int(opt(argv, "--count", "0"))
    trim = opt(argv, "--trim")
    trim_all = "--trim-all" in argv
    trim_every = int(opt(argv, "--trim-every", "16"))
    st = load(path)
    sectors = st["sectors"]  # str(sector) -> [durable id, [ids since]]
    rng = random.Random(seed * 1000003 + st["next"])
    blocks = size // BLOCK
    pending = set()  # sectors written since the last completed flush
    h = nbd.NBD()
    n = 0
    why = "stopped"
    try:
        h.connect_uri(uri)
        if trim_all:
            # Everything free in the allocation map, then the writes
            # mark their regions: a mark a flush or FUA acknowledged
            # must survive the cut, or the write reads back as zeros.
            h.trim(size, 0)
            h.flush()
            for e in sectors.values():
                e[0] = 0
                e[1] = []
        while ((stop is None or not os.path.exists(stop))
               and (count == 0 or n < count)):
            b = rng.randrange(blocks)
            wid = st["next"]
            st["next"] += 1
            fua = n % 8 == 7
            first = b * (BLOCK // SECTOR)
            # In flight from here: it may land whatever the answer.
            for s in range(first, first + BLOCK // SECTOR):
                e = sectors.setdefault(str(s), [0, []])
                e[1].append(wid)
            h.pwrite(block_data(b, wid), b * BLOCK,
                     nbd.CMD_FLAG_FUA if fua else 0)
            if fua:
                for s in range(first, first + BLOCK // SECTOR):
                    e = sectors[str(s)]
                    # Durable now: this id or a later one (a later
                    # write to the sector may be in the list already
                    # only if it was issued before, which a single
                    # connection does not do).
                    e[0] = wid
                    e[1] = [i for i in e[1] if i > wid]
                    pending.discard(s)
            else:
                pending.update(range(first, first + BLOCK // SECTOR))
            n += 1
            if trim is not None and n % trim_every == 0:
                # A trim that fails (its member fails trims) changes
                # nothing; one that succeeds reaches the member at once
                # (the filter's trim), leaving zeros.
                t = int(trim)
                try:
                    h.trim(BLOCK, t)
                    for s in range(t // SECTOR, (t + BLOCK) // SECTOR):
                        sectors.setdefault(str(s), [0, []])[1].append(0)
                        pending.add(s)
                except nbd.Error:
                    if h.aio_is_dead() or h.aio_is_closed():
                        raise
            if n % 8 == 0:
                h.flush()
                for s in pending:
                    e = sectors[str(s)]
                    e[0] = e[1][-1]
                    e[1] = []
                pending = set()
            if ready and n == ready_after:
                open(ready, "w").close()
        # Stopped, not failed: everything written made durable.
        h.flush()
        for s in pending:
            e = sectors[str(s)]
            e[0] = e[1][-1]
            e[1] = []
    except nbd.Error as e:
        why = "failed: %s" % e
    save(path, st)
    print(json.dumps({"writes": n, "end": why}))
    return 0


def trim_fails(uri, off):
    h = nbd.NBD()
    h.connect_uri(uri)
    try:
        h.trim(BLOCK, off)
    except nbd.Error as e:
        print("trim failed, as it should: %s" % e)
        return 0
    print("trim at %d succeeded" % off, file=sys.stderr)
    return 1


def verify(uri, path):
    st = load(path)
    h = nbd.NBD()
    h.connect_uri(uri)
    checked = durable = lost = wrong = 0
    shown = 0
    by_block = {}
    for k, e in st["sectors"].items():
        s = int(k)
        by_block.setdefault(s // (BLOCK // SECTOR), []).append((s, e))
    for b in sorted(by_block):
        buf = h.pread(BLOCK, b * BLOCK)
        for s, (dur, since) in by_block[b]:
            off = (s % (BLOCK // SECTOR)) * SECTOR
            got = buf[off:off + SECTOR]
            checked += 1
            durable += dur != 0
            allowed = set([dur] + since)
            if got == bytes(SECTOR):
                gid = 0
            else:
                magic, sec, gid = struct.unpack("<QQQ", got[:24])
                if magic != MAGIC or sec != s or got != sector_data(s, gid):
                    wrong += 1
                    if shown < 10:
                        print("sector %d: not a whole sector of this "
                              "writer's (magic %x, sector %d)"
                              % (s, magic, sec), file=sys.stderr)
                        shown += 1
                    continue
            if gid not in allowed:
                if gid < dur:
                    lost += 1
                    what = "an older write"
                else:
                    wrong += 1
                    what = "a write it was never sent"
                if shown < 10:
                    print("sector %d: holds write %d (%s); durable was %d, "
                          "written since %s"
                          % (s, gid, what, dur, since[:5]), file=sys.stderr)
                    shown += 1
    print(json.dumps({"sectors": checked, "durable": durable, "lost": lost,
                      "wrong": wrong}))
    return 1 if lost or wrong else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "write":
        return write(argv[2], argv[3], argv[4:])
    if len(argv) == 4 and argv[1] == "trim":
        return trim_fails(argv[2], int(argv[3]))
    if len(argv) == 4 and argv[1] == "verify":
        return verify(argv[2], argv[3])
    print(__doc__ if __doc__ else "usage: crash.py write|verify URI STATE",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
