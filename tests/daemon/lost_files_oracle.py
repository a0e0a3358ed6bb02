#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# lost_files_oracle.py IMAGE LIST CHUNK N OUT_PREFIX [CHUNKS LAYOUT]:
# which files of the ext4 in IMAGE (the volume's bytes, read back) would
# go with each member of a RAID-0 of N members and CHUNK bytes a chunk --
# equal members: volume chunk c on member c mod N; else CHUNKS, each
# member's size in whole chunks ("145,464,464"), and md's LAYOUT (1
# original, 2 alternate) place it through tests/lib/md_raid0_model.py's
# zones -- computed without nbdstripe's code:
# debugfs gives each file's blocks (blocks: data and extent-tree blocks),
# its extents (ex: the data blocks in file order) and its inode's block
# (imap).  LIST has one "TYPE SIZE PATH" line a file (find -printf
# '%y %s %P'), "/" and "/lost+found" are added.  Then, for each member I,
# OUT_PREFIX.I.out (nbdstripe lost-files --member I --json) must name
# exactly those files, with lost_bytes (regular files) as debugfs's
# extents say, and say whether directory blocks and the superblock are
# lost.  Exit 0, or 1 printing every difference.
import json
import os
import re
import subprocess
import sys

image, listfile, chunk, n, prefix = sys.argv[1:6]
chunk, n = int(chunk), int(n)
BS = 4096
zones = None
if len(sys.argv) > 6:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
    import md_raid0_model as md
    zones = md.build_zones([int(c) for c in sys.argv[6].split(",")])
    layout = int(sys.argv[7])

files = [("d", 0, "/"), ("d", 0, "/lost+found")]
with open(listfile) as f:
    for line in f:
        t, size, path = line.rstrip("\n").split(" ", 2)
        files.append((t, int(size), "/" + path))

cmds = []
for _, _, p in files:
    q = '"%s"' % p
    cmds += ["blocks " + q, "imap " + q, "ex " + q]
out = subprocess.run(["debugfs", "-f", "-", image], input="\n".join(cmds) + "\n",
                     capture_output=True, text=True, check=True).stdout
# The answer of each command, in order ("debugfs: CMD" heads each one).
answers = re.split(r"^debugfs: .*\n", out, flags=re.M)[1:]
assert len(answers) == len(cmds), (len(answers), len(cmds))

EX = re.compile(r"^\s*(\d+)/\s*(\d+)\s+\d+/\s*\d+\s+(\d+)\s*-\s*(\d+)\s+"
                r"(\d+)\s*-\s*(\d+)\s+(\d+)")


def member(block):
    if zones:
        return md.locate(zones, layout, block * BS // chunk)[0]
    return (block * BS // chunk) % n


info = {}
for k, (t, size, p) in enumerate(files):
    blocks_a, imap_a, ex_a = answers[3 * k:3 * k + 3]
    m = re.search(r"located at block (\d+)", imap_a)
    assert m, (p, imap_a)
    ib = int(m.group(1))
    # A fast symlink holds its target in the inode: no blocks (debugfs
    # would read the target as block numbers).
    blocks = [] if t == "l" and size < 60 else [int(b) for b in blocks_a.split()]
    data = []  # (logical, physical) of the leaves
    for line in ex_a.splitlines():
        e = EX.match(line)
        if e and e.group(1) == e.group(2):
            lg, pb = int(e.group(3)), int(e.group(5))
            data += [(lg + i, pb + i) for i in range(int(e.group(7)))]
    info[p] = (t, size, ib, blocks, data)

bad = 0
for i in range(n):
    want = {}
    dir_lost = False
    for p, (t, size, ib, blocks, data) in info.items():
        on = [b for b in blocks if member(b) == i]
        if t == "d" and on:
            dir_lost = True
        if on or member(ib) == i:
            lost = sum(max(0, min(BS, size - lg * BS))
                       for lg, pb in data if member(pb) == i)
            want[p] = (lost if t == "f" else None, member(ib) == i)
    with open("%s.%d.out" % (prefix, i)) as f:
        got_doc = json.load(f)
    got = {x["path"]: x for x in got_doc["files"]}

    def say(msg):
        global bad
        bad += 1
        print("member %d: %s" % (i, msg))

    for p in sorted(set(want) - set(got)):
        say("%s touches it, not listed" % p)
    for p in sorted(set(got) - set(want)):
        say("%s listed, touches it not" % p)
    for p in sorted(set(want) & set(got)):
        lost, inode_lost = want[p]
        if lost is not None and got[p]["lost_bytes"] != lost:
            say("%s: lost_bytes %d, debugfs says %d"
                % (p, got[p]["lost_bytes"], lost))
        if inode_lost and not got[p]["metadata_lost"]:
            say("%s: its inode's block is lost, metadata_lost false" % p)
    if got_doc["directory_blocks_lost"] != dir_lost:
        say("directory_blocks_lost %s, debugfs says %s"
            % (got_doc["directory_blocks_lost"], dir_lost))
    if got_doc["superblock_lost"] != (i == 0):
        say("superblock_lost %s on member %d" % (got_doc["superblock_lost"], i))
    print("member %d: %d of %d files touch it, %d listed"
          % (i, len(want), len(info), len(got)))
sys.exit(1 if bad else 0)
