#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe lost-files --member I names exactly the files a member's death
# would take, checked against an independent oracle
# (lost_files_oracle.py: debugfs's block lists and a RAID-0 model of its
# own): a real ext4 (mkfs.ext4 -d: a few hundred files, some smaller than
# a chunk, some larger than N chunks, directories 6 deep, symlinks) put
# on a served 3-member volume with a 96K chunk (not a power of two), a
# 4-member one with 64K, and 3 members of two sizes in md's original
# layout (two zones, the second rotated), read back through the server,
# then every member in turn; an inode whose entry was unlinked is
# listed in unnamed_inodes.  Before the file system is there: "cannot
# name files", exit 1.  Served degraded without one member or two, and
# asked --member about one more, it names the files of all of them
# (degraded); after a scrub found unreadable blocks, the files holding
# them (scrubbed, checked with debugfs's icheck and ncheck); status
# points to lost-files when a read can fail.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh" || exit 1
source "$(dirname "${BASH_SOURCE[0]}")/../lib/remote.sh" || exit 1
d_init jq mkfs.ext4 debugfs nbdcopy python3

ORACLE=$NBDSTRIPE_SOURCE_DIR/tests/daemon/lost_files_oracle.py
export NBDSTRIPE_CONFDIR=$D_TMP/conf NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_CONFDIR" "$NBDSTRIPE_RUNDIR"

# The tree: the same for both volumes (RANDOM seeded).
RANDOM=37
tree=$D_TMP/tree
d=$tree
for depth in 1 2 3 4 5 6; do
  d=$d/deep$depth
  mkdir -p "$d" "$tree/wide$depth"
done
n=0
for dir in "$tree" "$tree"/wide* "$tree"/deep1 "$tree"/deep1/deep2/deep3 "$d"; do
  for k in $(seq 1 30); do
    case $((RANDOM % 10)) in
    0 | 1 | 2 | 3 | 4) size=$((RANDOM % 6000)) ;;          # < a chunk
    5 | 6 | 7) size=$((20000 + RANDOM * 4)) ;;              # 20K-150K
    *) size=$((400000 + RANDOM * 8)) ;;                     # > N chunks
    esac
    head -c "$size" /dev/urandom >"$dir/f$k"
    n=$((n + 1))
  done
done
# A name that would drive a terminal: escaped in the text.
for k in 1 2 3 4 5 6; do head -c 3000 /dev/urandom >"$tree/esc$k"$'\e[31mred'; done
ln -s f1 "$tree/short-link"
ln -s "$(printf 'x%.0s' $(seq 1 80))/a/target/longer/than/sixty/bytes" \
  "$tree/long-link"
(cd "$tree" && find . -mindepth 1 -printf '%y %s %P\n') >"$D_TMP/list"
d_log "$n files, $(du -sh "$tree" | cut -f1)"
mkfs.ext4 -q -F -b 4096 -g 8192 -d "$tree" "$D_TMP/fs.img" 64M ||
  d_fail "mkfs.ext4 -d"
# An inode in use that no name reaches: its entry unlinked (debugfs's
# unlink leaves the inode and its link count): an unnamed inode.
unnamed=$(debugfs -R "imap /wide1/f1" "$D_TMP/fs.img" 2>/dev/null |
          sed -n 's/^Inode \([0-9]*\) is part.*/\1/p')
[[ -n $unnamed ]] || d_fail "debugfs imap /wide1/f1"
debugfs -w -R "unlink /wide1/f1" "$D_TMP/fs.img" 2>/dev/null ||
  d_fail "debugfs unlink"
sed -i '/ wide1\/f1$/d' "$D_TMP/list"

# volume NAME CHUNK "SIZE..." [LAYOUT]: lost-files on every member,
# against the oracle; with LAYOUT (md's number), the members' sizes
# differ and the oracle places chunks through md's zones.
volume ()
{
  local name=$1 chunk=$2 sizes=($3) layout=${4-} members=() i
  local sock=$D_TMP/$1.sock n=${#sizes[@]} chunks=()
  local bytes=$(( ${chunk%K} * 1024 ))
  for ((i = 0; i < n; i++)); do
    truncate -s "${sizes[i]}" "$D_TMP/$name.m$i"
    members+=("$D_TMP/$name.m$i")
    # Its data area (from 1 MiB) in whole chunks.
    chunks+=($((($(stat -c %s "$D_TMP/$name.m$i") - 1048576) / bytes)))
  done
  d_conf "$NBDSTRIPE_CONFDIR/$name.conf" "$name" "$chunk" \
    "socket = \"$sock\"; pidfile = \"$D_TMP/$name.pid\";" "${members[@]}"
  [[ -z $layout ]] ||
    printf 'layout = "%s";\n' "$layout" >>"$NBDSTRIPE_CONFDIR/$name.conf"
  d_run "$name.create" d_ns create "$name" || :
  [[ $D_RC -eq 0 ]] || d_fail "$name: create"
  d_serve "$name.serve" "$NBDSTRIPE_CONFDIR/$name.conf" "$D_TMP/$name.pid" ||
    d_fail "$name: serve"

  d_run "$name.nofs" d_ns lost-files --member 0 "$name"
  d_expect_fail "$name.nofs" &&
    grep -q "cannot name files on this file system" "$D_TMP/$name.nofs.err" ||
    d_bad "$name: a volume without a file system: not said"
  grep -q "member 0: every chunk" "$D_TMP/$name.nofs.out" ||
    d_bad "$name: a volume without a file system: the lost bytes not said"

  nbdcopy "$D_TMP/fs.img" "nbd+unix:///?socket=$sock" ||
    d_fail "$name: nbdcopy onto the volume"
  # The oracle reads the volume's bytes as its server gives them.
  nbdcopy "nbd+unix:///?socket=$sock" "$D_TMP/$name.back" ||
    d_fail "$name: nbdcopy from the volume"
  cmp -n "$(stat -c %s "$D_TMP/fs.img")" "$D_TMP/fs.img" "$D_TMP/$name.back" ||
    d_fail "$name: the file system did not come back"

  for ((i = 0; i < n; i++)); do
    d_run "$name.$i" d_ns lost-files --json --member "$i" "$name"
    [[ $D_RC -eq 0 ]] || d_bad "$name: lost-files --member $i: exit $D_RC"
    jq -e ".unnamed_inodes == [$unnamed]" "$D_TMP/$name.$i.out" >/dev/null ||
      d_bad "$name: --member $i: unnamed_inodes is not [$unnamed]"
  done
  d_run "$name.oracle" python3 "$ORACLE" "$D_TMP/$name.back" "$D_TMP/list" \
    "$bytes" "$n" "$D_TMP/$name" \
    ${layout:+"$(IFS=,; echo "${chunks[*]}")"} \
    ${layout:+$([[ $layout == original ]] && echo 1 || echo 2)}
  [[ $D_RC -eq 0 ]] || d_bad "$name: lost-files and the oracle disagree"

  # People's text: a line a file and the summary.
  d_run "$name.text" d_ns lost-files --member 1 "$name"
  [[ $D_RC -eq 0 ]] || d_bad "$name: lost-files --member 1: exit $D_RC"
  grep -E -q "^[0-9]+ files of [0-9]+ touch member 1, [0-9]+ bytes lost$" \
    "$D_TMP/$name.text.out" || d_bad "$name: no summary line"
  ! grep -q $'\e' "$D_TMP/$name.text.out" ||
    d_bad "$name: an escape sequence reached the terminal"
  jq -r '.files[].path' "$D_TMP/$name.1.out" | grep -q $'\e' &&
    ! grep -q -F 'esc' "$D_TMP/$name.text.out" &&
    d_bad "$name: the name with an escape sequence not in the text"
  [[ $(grep -c " bytes lost" "$D_TMP/$name.text.out") -eq \
     $(($(jq '.files | length' "$D_TMP/$name.1.out") + 1)) ]] ||
    d_bad "$name: text and --json list different files"
  # No member, no lost range: nothing lost.
  d_run "$name.none" d_ns lost-files --json "$name"
  [[ $D_RC -eq 0 && $(jq '.files | length' "$D_TMP/$name.none.out") == 0 ]] ||
    d_bad "$name: a healthy volume without lost ranges lists files"
  d_run "$name.status" d_ns status "$name"
  [[ $D_RC -eq 0 ]] && ! grep -q "Files touched" "$D_TMP/$name.status.out" ||
    d_bad "$name: status of a healthy volume: exit $D_RC, or points to lost-files"
  d_run "$name.index" d_ns lost-files --member "$n" "$name"
  [[ $D_RC -eq 2 ]] || d_bad "$name: --member $n: exit $D_RC, expected 2"
  d_stop "$D_SERVER_PID"
  d_run "$name.down" d_ns lost-files --member 0 "$name"
  d_expect_fail "$name.down" && grep -q "nbdstripe serve" "$D_TMP/$name.down.err" ||
    d_bad "$name: not served: the way out not said"
}

# The check of a list against the --member lists the oracle checked:
# deg_cmp.py DEGRADED MEMBERS FULL...: DEGRADED (lost-files --json on
# the volume served degraded) counts exactly MEMBERS ("0,2") and names
# files of their --member lists FULL... (merged: the bytes of one file
# on two members add up), with the same inode and lost bytes; each file
# of those lists is named, or its inode is unnamed (its name went with a
# directory block), or its inode went with a member; when no directory
# or inode table block went, the lists are the same.
cat >"$D_TMP/deg_cmp.py" <<'PY'
import json, sys
deg = json.load(open(sys.argv[1]))
members = [int(m) for m in sys.argv[2].split(",")]
want = {}
for path in sys.argv[3:]:
    for f in json.load(open(path))["files"]:
        w = want.setdefault(f["path"], dict(f, lost_bytes=0,
                                            metadata_lost=False))
        w["lost_bytes"] += f["lost_bytes"]
        w["metadata_lost"] |= f["metadata_lost"]
bad = []
if deg["members"] != members:
    bad.append("members is %r, not %r" % (deg["members"], members))
for f in deg["files"]:
    w = want.get(f["path"])
    # Metadata lost (the inode's block, an extent block): what the file
    # held cannot all be read back, so neither can its lost bytes.
    if w is None or w["inode"] != f["inode"] or \
       w["metadata_lost"] != f["metadata_lost"] or \
       (not f["metadata_lost"] and w["lost_bytes"] != f["lost_bytes"]):
        bad.append("degraded: %s, --member: %s" % (f, w))
if not deg["directory_blocks_lost"] and not deg["inode_tables_lost"]:
    if sorted(want) != sorted(f["path"] for f in deg["files"]):
        bad.append("no directory or inode table lost, yet the lists differ")
named = {f["path"] for f in deg["files"]}
unnamed = set(deg["unnamed_inodes"])
for p, f in want.items():
    if p not in named and f["inode"] not in unnamed and not f["metadata_lost"]:
        bad.append("%s (inode %d): neither named nor unnamed" % (p, f["inode"]))
for b in bad:
    print(b)
print("%d files named, %d unnamed inodes, --member named %d" % (
    len(deg["files"]), len(deg["unnamed_inodes"]), len(want)))
sys.exit(1 if bad else 0)
PY

# degraded NAME I [J] [--member K]: members I (and J) moved away, the
# volume served --degraded (their chunks read EIO): lost-files without
# --member names the files of I and J (deg_cmp.py); with --member K, of
# K too ("what if it died too").  Member 0 holds the primary superblock:
# the file system is then opened from its first backup (mkfs -g 8192:
# two groups, a backup superblock in group 1).
degraded ()
{
  local name=$1 gone=() ask=() want i
  shift
  while [[ $# -gt 0 && $1 != --member ]]; do gone+=("$1"); shift; done
  [[ $# -eq 0 ]] || ask=("$1" "$2")
  want=$(printf '%s\n' "${gone[@]}" ${ask[1]:+"${ask[1]}"} | sort -n | paste -sd,)
  for i in "${gone[@]}"; do mv "$D_TMP/$name.m$i" "$D_TMP/$name.m$i.away"; done
  d_serve "$name.deg" "$NBDSTRIPE_CONFDIR/$name.conf" "$D_TMP/$name.pid" \
    --degraded || d_fail "$name: serve --degraded without members ${gone[*]}"
  d_run "$name.deg.lost" d_ns lost-files --json "${ask[@]}" "$name"
  [[ $D_RC -eq 0 ]] ||
    d_bad "$name: lost-files${ask:+ ${ask[*]}} without members ${gone[*]}: exit $D_RC"
  jq -e --argjson m "[$(IFS=,; echo "${gone[*]}")]" '.missing == $m' \
    "$D_TMP/$name.deg.lost.out" >/dev/null ||
    d_bad "$name: missing is not [${gone[*]}]"
  d_run "$name.deg.cmp" python3 "$D_TMP/deg_cmp.py" "$D_TMP/$name.deg.lost.out" \
    "$want" $(for i in ${want//,/ }; do echo "$D_TMP/$name.$i.out"; done)
  [[ $D_RC -eq 0 ]] &&
    d_ok "$name: served without members ${gone[*]}, lost-files${ask:+ ${ask[*]}} names the files of $want" ||
    d_bad "$name: served without members ${gone[*]}: lost-files${ask:+ ${ask[*]}} and --member $want disagree (above)"
  d_run "$name.deg.status" d_ns status "$name"
  [[ $D_RC -eq 1 ]] && grep -q -x " *Files touched : nbdstripe lost-files $name" \
    "$D_TMP/$name.deg.status.out" ||
    d_bad "$name: status without members ${gone[*]}: exit $D_RC (expected 1), or no pointer to lost-files"
  d_stop "$D_SERVER_PID"
  for i in "${gone[@]}"; do mv "$D_TMP/$name.m$i.away" "$D_TMP/$name.m$i"; done
}

# scrubbed: a scrub's findings are a loss.  Two members, 64K chunks:
# m0 a file, m1 an NBD export of stock nbdkit.  The file system put on
# the volume, m1 is served again behind nbdkit's ddrescue filter, whose
# mapfile makes one 4K block of each of two files unreadable (a data
# block of each on m1); the volume served --read-only, a scrub finds
# them.  lost-files says the two logical ranges and names exactly the
# files debugfs's icheck and ncheck say hold those blocks; status points
# to lost-files ("Files touched"), as it does for a volume served
# degraded (degraded) and does not for a healthy one (volume).
scrubbed ()
{
  local name=scrubbed sock=$D_TMP/scrubbed.sock C=65536 M=1048576
  local size=$((33 * M)) files=() bad=() f b off ranges=() map

  truncate -s "$size" "$D_TMP/$name.m0" "$D_TMP/$name.m1.back"
  r_unix "$name.m1" file "$D_TMP/$name.m1.back"
  local m1_pid=$R_PID m1_uri=$R_URI
  d_conf "$NBDSTRIPE_CONFDIR/$name.conf" "$name" 64K \
    "socket = \"$sock\"; pidfile = \"$D_TMP/$name.pid\";" \
    "$D_TMP/$name.m0" "$m1_uri"
  d_run "$name.create" d_ns create "$name" || :
  [[ $D_RC -eq 0 ]] || d_fail "$name: create"
  d_serve "$name.serve" "$NBDSTRIPE_CONFDIR/$name.conf" "$D_TMP/$name.pid" ||
    d_fail "$name: serve"
  nbdcopy "$D_TMP/fs.img" "nbd+unix:///?socket=$sock" ||
    d_fail "$name: nbdcopy onto the volume"
  d_stop "$D_SERVER_PID"
  # Two files larger than 4 chunks: the first data block of each in a
  # chunk of m1 (odd chunks), at volume offset OFF; on m1 at 1 MiB (its
  # data offset) + OFF's stripe's chunk + OFF within the chunk.
  files=($(awk '$1 == "f" && $2 > 400000 { print "/" $3 }' "$D_TMP/list" | head -2))
  for f in "${files[@]}"; do
    b=
    for x in $(debugfs -R "blocks \"$f\"" "$D_TMP/fs.img" 2>/dev/null); do
      (( x * 4096 / C % 2 == 1 )) && { b=$x; break; }
    done
    [[ -n $b ]] || d_fail "$name: $f has no block on member 1"
    off=$((b * 4096))
    bad+=("$b")
    ranges+=("{\"offset\": $off, \"length\": 4096}")
    map+=$(printf '%d %d\n' $((M + off / C / 2 * C + off % C)) 4096)$'\n'
  done
  [[ ${#bad[@]} -eq 2 ]] || d_fail "$name: no two files of more than 400000 bytes"
  {
    echo "# Mapfile. Created by GNU ddrescue version 1.23"
    echo "0x00000000     +               1"
    local at=0 x n
    while read -r x n; do
      [[ -n $x ]] || continue
      printf '0x%08x  0x%08x  +\n0x%08x  0x%08x  -\n' "$at" $((x - at)) "$x" "$n"
      at=$((x + n))
    done < <(sort -n <<<"$map")
    printf '0x%08x  0x%08x  +\n' "$at" $((size - at))
  } >"$D_TMP/$name.map"
  d_stop "$m1_pid"
  r_unix "$name.m1" --filter=ddrescue file "$D_TMP/$name.m1.back" \
    ddrescue-mapfile="$D_TMP/$name.map"
  rm -f "$D_TMP/$name.pid"
  d_run "$name.ro" d_ns_serve --read-only "$NBDSTRIPE_CONFDIR/$name.conf"
  [[ $D_RC -eq 0 && -s $D_TMP/$name.pid ]] || d_fail "$name: serve --read-only"
  D_SERVER_PID=$(<"$D_TMP/$name.pid")
  D_PIDS+=("$D_SERVER_PID")
  d_run "$name.scrub" d_ns scrub --wait --rate 1G "$name"
  d_expect_fail "$name.scrub"

  d_run "$name.lost" d_ns lost-files --json "$name"
  [[ $D_RC -eq 0 ]] || d_bad "$name: lost-files after the scrub: exit $D_RC"
  jq -e --argjson want "[$(IFS=,; echo "${ranges[*]}")]" \
    '.scrub_ranges == ($want | sort_by(.offset)) and .members == []' \
    "$D_TMP/$name.lost.out" >/dev/null &&
    d_ok "$name: scrub_ranges are the two blocks the scrub found" ||
    d_bad "$name: scrub_ranges are not ${ranges[*]}"
  # The oracle: the inodes holding the blocks, and their names.
  local inodes names got
  inodes=$(debugfs -R "icheck ${bad[*]}" "$D_TMP/fs.img" 2>/dev/null |
           awk 'NR > 1 { print $2 }' | sort -un)
  names=$(debugfs -R "ncheck $(echo $inodes)" "$D_TMP/fs.img" 2>/dev/null |
          awk 'NR > 1 { print $2 }' | sort)
  got=$(jq -r '.files[].path' "$D_TMP/$name.lost.out" | sort)
  [[ -n $names && $got == "$names" ]] &&
    printf '%s\n' "${files[@]}" | sort | cmp -s - <(echo "$names") &&
    d_ok "$name: lost-files names $(echo $got), as debugfs says" ||
    d_bad "$name: lost-files names '$(echo $got)', debugfs '$(echo $names)', the files '${files[*]}'"
  d_run "$name.text" d_ns lost-files "$name"
  grep -q "^unreadable where the last scrub read: 8192 bytes: " \
    "$D_TMP/$name.text.out" &&
    grep -q "^2 files of [0-9]* touch the scrub's unreadable ranges, 8192 bytes lost$" \
      "$D_TMP/$name.text.out" ||
    d_bad "$name: the text does not say the scrub's findings"
  d_run "$name.status" d_ns status "$name"
  [[ $D_RC -eq 1 ]] && grep -q -x " *Files touched : nbdstripe lost-files $name" \
    "$D_TMP/$name.status.out" ||
    d_bad "$name: status after the scrub: exit $D_RC (expected 1), or no pointer to lost-files"
  d_stop "$D_SERVER_PID"
}

volume three 96K "26M 26M 26M"
degraded three 0
degraded three 0 --member 2
if nbdkit --filter=ddrescue null --dump-plugin >/dev/null 2>&1; then
  scrubbed
else
  d_log "a scrub's findings: not tested, nbdkit has no ddrescue filter"
fi
volume four 64K "20M 20M 20M 20M"
degraded four 2
degraded four 1 3

# Zone 0 ends at volume chunk 435 (3 x 145: odd), 27 MiB in: the rest of
# the file system is in zone 1 (members 1 and 2), where md's original
# layout rotates them.
volume zones 64K "10304K 30M 30M" original
d_done
