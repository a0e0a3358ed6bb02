#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# lost_files_readback.py: the tree, and the check through the kernel, of
# tests/daemon/lost_files_readback.sh.
#
#   lost_files_readback.py tree DIR FILES SEED
#       DIR gets FILES regular files of mixed sizes (most smaller than a
#       chunk, some of a few chunks, a few larger than every member's
#       share of a stripe), in directories deep and wide, and symlinks;
#       the bytes are random (seeded).
#   lost_files_readback.py check MOUNT DIR LOST.json
#       MOUNT is DIR's file system as the kernel's ext4 reads it from a
#       volume served degraded (read-only); LOST.json is what
#       `nbdstripe lost-files --json` says is lost.  Every file, symlink
#       and directory of DIR is looked up and read under MOUNT, data
#       files 4 KiB at a time with O_DIRECT (no page cache, no
#       read-ahead: each block is read alone):
#         - a file lost-files does not name, under no directory it
#           names, reads back byte-identical, every block of it;
#         - a named file reads, block by block, either its own bytes or
#           EIO -- never other bytes (zeros, another member's) -- and
#           the bytes that fail are exactly its lost_bytes (at least,
#           when its metadata is lost: an extent block takes the blocks
#           under it); one named with nothing lost is an error;
#         - a path under a directory lost-files names may fail to be
#           looked up (its name went with the directory's block); if it
#           is found, the rules above hold for it.
#       The kernel is the oracle for what can be read: it shares no code
#       with nbdstripe or libext2fs.  Exit 0, or 1 printing every
#       difference.
import errno
import json
import mmap
import os
import random
import stat
import sys

BS = 4096


def make_tree(top, count, seed):
    rnd = random.Random(seed)
    dirs = [top]
    d = top
    for depth in range(1, 9):                       # 8 deep
        d = os.path.join(d, "deep%d" % depth)
        dirs.append(d)
    for w in range(40):                              # 40 wide
        dirs.append(os.path.join(top, "wide%02d" % w))
    for w in range(12):                              # wide under deep
        dirs.append(os.path.join(top, "deep1", "deep2", "w%02d" % w))
    for x in dirs:
        os.makedirs(x, exist_ok=True)
    for k in range(count):
        r = rnd.random()
        if r < 0.78:
            size = rnd.randrange(0, 12000)           # within a chunk
        elif r < 0.98:
            size = rnd.randrange(16000, 160000)      # a chunk or two
        else:
            size = rnd.randrange(400000, 800000)     # more than N chunks
        path = os.path.join(rnd.choice(dirs), "f%04d" % k)
        with open(path, "wb") as f:
            f.write(rnd.randbytes(size))
    for k in range(20):
        os.symlink("f%04d" % k, os.path.join(rnd.choice(dirs), "l%02d" % k))
    os.symlink("x" * 90 + "/a/target/longer/than/sixty/bytes",
               os.path.join(top, "long-link"))


def read_blocks(path, size):
    """(bytes read per block or None for EIO, error) of path, O_DIRECT."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, BS)
        out = []
        for off in range(0, size, BS):
            try:
                n = os.preadv(fd, [buf], off)
                out.append(bytes(buf[:n]))
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                out.append(None)
        return out
    finally:
        os.close(fd)


def check(mnt, top, lostfile):
    with open(lostfile) as f:
        doc = json.load(f)
    named = {x["path"]: x for x in doc["files"]}
    bad = []
    seen = {"identical": 0, "named": 0, "behind": 0, "eio_bytes": 0}

    def say(msg):
        bad.append(msg)

    def behind(p):
        """p lies under a directory lost-files names."""
        q = os.path.dirname(p)
        while True:
            if q in named:
                return True
            if q == "/":
                return False
            q = os.path.dirname(q)

    entries = []
    for root, dnames, fnames in os.walk(top):
        for name in dnames + fnames:
            full = os.path.join(root, name)
            entries.append("/" + os.path.relpath(full, top))
    entries.append("/")
    for p in sorted(entries):
        src = top + p if p != "/" else top
        there = mnt + p if p != "/" else mnt
        st = os.lstat(src)
        n = named.get(p)
        hidden = behind(p)
        try:
            mst = os.lstat(there)
        except OSError as e:
            if n is not None and (n["metadata_lost"] or hidden):
                seen["named"] += 1
            elif hidden:
                seen["behind"] += 1
            else:
                say("%s: not named, yet it cannot be looked up: %s" % (p, e))
            continue
        if stat.S_IFMT(mst.st_mode) != stat.S_IFMT(st.st_mode):
            say("%s: another kind of file under the mount" % p)
            continue
        if stat.S_ISLNK(st.st_mode):
            try:
                ok = os.readlink(there) == os.readlink(src)
            except OSError as e:
                ok = False
                if n is None and not hidden:
                    say("%s: not named, its target unreadable: %s" % (p, e))
                continue
            if not ok:
                say("%s: the link's target differs" % p)
            elif n is None:
                seen["identical"] += 1
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                got = sorted(os.listdir(there))
            except OSError as e:
                if n is None and not hidden:
                    say("%s: a directory not named cannot be listed: %s"
                        % (p, e))
                continue
            want = sorted(os.listdir(src))
            if p == "/":
                got = [x for x in got if x != "lost+found"]
            if n is None and not hidden and got != want:
                say("%s: not named, yet its entries differ" % p)
            elif n is None:
                seen["identical"] += 1
            continue
        # A regular file.
        with open(src, "rb") as f:
            data = f.read()
        if mst.st_size != len(data):
            say("%s: %d bytes under the mount, %d written"
                % (p, mst.st_size, len(data)))
            continue
        try:
            blocks = read_blocks(there, len(data))
        except OSError as e:
            if n is None and not hidden:
                say("%s: not named, cannot be read: %s" % (p, e))
            continue
        eio = 0
        for k, b in enumerate(blocks):
            want = data[k * BS:(k + 1) * BS]
            if b is None:
                eio += len(want)
            elif b != want:
                say("%s: block %d: other bytes than were written (%s)"
                    % (p, k, "zeros" if b == bytes(len(b)) else "not zeros"))
        seen["eio_bytes"] += eio
        if n is None:
            if eio:
                say("%s: not named, yet %d of its bytes read EIO" % (p, eio))
            else:
                seen["identical"] += 1
            continue
        seen["named"] += 1
        if n["lost_bytes"] == 0 and not n["metadata_lost"]:
            say("%s: named with nothing lost" % p)
        if n["metadata_lost"]:
            if eio < n["lost_bytes"]:
                say("%s: %d bytes read EIO, lost-files says %d lost"
                    % (p, eio, n["lost_bytes"]))
        elif eio != n["lost_bytes"]:
            say("%s: %d bytes read EIO, lost-files says %d lost"
                % (p, eio, n["lost_bytes"]))
    # Named, yet not in the tree (lost+found is the file system's own).
    for p in named:
        if p not in entries and not p.startswith("/lost+found"):
            say("%s: named, not a file of the tree" % p)
    for b in bad:
        print(b)
    print("%d entries: %d read back identical, %d named by lost-files "
          "(%d bytes read EIO), %d behind a named directory; %d differences"
          % (len(entries), seen["identical"], seen["named"],
             seen["eio_bytes"], seen["behind"], len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["tree"]:
        make_tree(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        sys.exit(0)
    if sys.argv[1:2] == ["check"]:
        sys.exit(check(*sys.argv[2:5]))
    sys.exit("usage: lost_files_readback.py tree DIR FILES SEED | "
             "check MOUNT DIR LOST.json")
