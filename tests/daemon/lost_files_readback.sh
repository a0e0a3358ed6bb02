#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What `nbdstripe lost-files` says of a volume served degraded, checked
# against what the kernel can read (issue 37): a real ext4 holding 2,000
# files of mixed sizes (most smaller than a chunk, some larger than a
# stripe) in directories 8 deep and 40 wide (mkfs.ext4 -d), on a
# 3-member volume with a 96K chunk (not a power of two) and on 4
# members of two sizes in md's alternate layout (two zones, the file
# system's end in the second).  Then each member in turn moved away,
# the volume served --degraded, lost-files --json run, and the file
# system mounted read-only by the kernel (nbdfuse -> loop device ->
# ext4, ro,noload; when lost-files says the primary superblock is lost,
# from the backup it names: on the 4-member volume member 0 holds the
# primary and the first backup, so that is group 3's):
# lost_files_readback.py reads every file 4 KiB at a time with O_DIRECT
# and compares it with the tree it was made from.  A file not named
# reads back byte-identical; a named one reads its own bytes or EIO,
# never other bytes, and exactly its lost_bytes fail.  Where the root's
# inode is lost the kernel cannot mount it, and lost-files must name /
# with its metadata lost (and the other way round).  First the same
# check on the whole volume, nothing named: every file identical.
# Needs root (loop devices, mount) and FUSE; skipped (77) without them.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh" || exit 1
d_init jq mkfs.ext4 nbdcopy nbdfuse losetup mount umount python3
[[ $(id -u) -eq 0 ]] || d_skip "not root: loop devices and mounting need root"
[[ -e /dev/fuse ]] || d_skip "no /dev/fuse"

CHECK=$NBDSTRIPE_SOURCE_DIR/tests/daemon/lost_files_readback.py
export NBDSTRIPE_CONFDIR=$D_TMP/conf NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_CONFDIR" "$NBDSTRIPE_RUNDIR"

FUSE_WORKED=     # set once nbdfuse has mounted: a later failure fails
tree=$D_TMP/tree
python3 "$CHECK" tree "$tree" 2000 37 || d_fail "making the tree"
d_log "tree: $(find "$tree" -type f | wc -l) files, $(du -sh "$tree" | cut -f1)"
# 4 KiB blocks, groups of 8192 blocks: the first backup superblock is
# block 8192 (sb=32768 in mount's 1 KiB units), 32 MiB into the volume,
# on member 2 (volume chunk 341 of 96K).
mkfs.ext4 -q -F -b 4096 -g 8192 -d "$tree" "$D_TMP/fs.img" 112M ||
  d_fail "mkfs.ext4 -d"

# readback LABEL LOST.json [MOUNT-OPTION]: nbdfuse, the loop device,
# the mount, the check, and all of it taken down again.
readback ()
{
  local label=$1 lost=$2 opt=${3-} fuse=$D_TMP/fuse.$1 mnt=$D_TMP/mnt.$1
  local loop ready try
  mkdir -p "$fuse" "$mnt"
  # nbdfuse's pidfile is a FIFO it writes once the mount is ready (or,
  # through the wrapper, its exit status if it fails first).
  mkfifo "$D_TMP/fuse.$label.pid"
  setsid bash -c 'nbdfuse -r -P "$1" "$2" "$3" || echo "exit $?" >"$1"' \
    nbdfuse-wrapper "$D_TMP/fuse.$label.pid" "$fuse/volume" \
    "nbd+unix:///?socket=$sock" \
    >"$D_TMP/fuse.$label.out" 2>"$D_TMP/fuse.$label.err" </dev/null &
  D_BGPIDS+=($!)
  ready=$(timeout 60 cat "$D_TMP/fuse.$label.pid") || ready="timed out"
  [[ $ready =~ ^[0-9]+$ ]] ||
    if [[ -z $FUSE_WORKED ]]; then
      d_skip "cannot mount with nbdfuse ($ready): $(head -c 300 "$D_TMP/fuse.$label.err")"
    else
      d_fail "$label: nbdfuse failed ($ready), as it did not before: $(head -c 300 "$D_TMP/fuse.$label.err")"
    fi
  FUSE_WORKED=1
  D_MOUNTS+=("$fuse")
  loop=$(losetup --find --show --read-only "$fuse/volume") ||
    d_fail "$label: losetup"
  D_LOOPS+=("$loop")
  # The root directory's inode lost (its inode table block on the
  # missing member): the kernel cannot mount the file system, and
  # lost-files must say so; and the other way round.
  root_lost=$(jq -e '[.files[] | select(.path == "/" and .metadata_lost)] | length' "$lost") ||
    d_fail "$label: $lost has no list of files"

  if mount -t ext4 -o "ro,noload,errors=continue${opt:+,$opt}" "$loop" "$mnt" \
       2>"$D_TMP/mount.$label.err"; then
    D_MOUNTS=("$mnt" "${D_MOUNTS[@]}")
    [[ $root_lost -eq 0 ]] ||
      d_bad "$label: lost-files says the root's inode is lost, the kernel mounts it"
    d_run "$label.check" python3 "$CHECK" check "$mnt" "$tree" "$lost"
    [[ $D_RC -eq 0 ]] &&
      d_ok "$label: every file read back as lost-files says" ||
      d_bad "$label: the kernel reads what lost-files does not say (above)"
    umount "$mnt" || d_fail "$label: umount $mnt"
  elif [[ $root_lost -eq 1 ]]; then
    d_ok "$label: the root's inode lost, as lost-files says: the kernel cannot mount it ($(head -n 1 "$D_TMP/mount.$label.err"))"
  else
    d_bad "$label: mount -o ro,noload${opt:+,$opt} $loop failed, lost-files does not name the root's inode: $(cat "$D_TMP/mount.$label.err")"
  fi
  losetup -d "$loop" || d_fail "$label: losetup -d $loop"
  # The loop device lets go of the FUSE file asynchronously (later still
  # while udev probes it, on a busy machine): umount may be busy for a
  # while; that case only, for at most 60 s.
  for ((try = 1; try <= 1200; try++)); do
    umount "$fuse" 2>"$D_TMP/umount.err" && break
    grep -q -i busy "$D_TMP/umount.err" && ((try < 1200)) ||
      d_fail "$label: umount $fuse: $(cat "$D_TMP/umount.err")"
    sleep 0.05
  done
  D_MOUNTS=() D_LOOPS=()
}

# volume NAME CHUNK "SIZE..." [LAYOUT]: the file system put on a new
# volume, read back whole, then each member missing in turn.
volume ()
{
  local name=$1 chunk=$2 sizes=($3) layout=${4-} members=() i opt
  local n=${#sizes[@]}
  sock=$D_TMP/$name.sock
  for ((i = 0; i < n; i++)); do
    truncate -s "${sizes[i]}" "$D_TMP/$name.m$i"
    members+=("$D_TMP/$name.m$i")
  done
  d_conf "$NBDSTRIPE_CONFDIR/$name.conf" "$name" "$chunk" \
    "socket = \"$sock\"; pidfile = \"$D_TMP/$name.pid\";" "${members[@]}"
  [[ -z $layout ]] ||
    printf 'layout = "%s";\n' "$layout" >>"$NBDSTRIPE_CONFDIR/$name.conf"
  d_run "$name.create" d_ns create "$name"
  [[ $D_RC -eq 0 ]] || d_fail "$name: create"
  d_serve "$name.serve" "$NBDSTRIPE_CONFDIR/$name.conf" "$D_TMP/$name.pid" ||
    d_fail "$name: serve"
  nbdcopy "$D_TMP/fs.img" "nbd+unix:///?socket=$sock" ||
    d_fail "$name: nbdcopy onto the volume"

  # The whole volume: lost-files names nothing, the kernel reads it all.
  d_run "$name.whole.lost" d_ns lost-files --json "$name"
  [[ $D_RC -eq 0 && $(jq '.files | length' "$D_TMP/$name.whole.lost.out") == 0 ]] ||
    d_fail "$name: lost-files on the whole volume: exit $D_RC or files named"
  readback "$name.whole" "$D_TMP/$name.whole.lost.out"
  # A member this command cannot open, which the server reads (it holds
  # the file open): not lost, and lost-files must not say it is.
  mv "$D_TMP/$name.m1" "$D_TMP/$name.m1.away"
  d_run "$name.notlost" d_ns lost-files --json "$name"
  mv "$D_TMP/$name.m1.away" "$D_TMP/$name.m1"
  d_expect_fail "$name.notlost" &&
    grep -q "member 1 (.*) cannot be read here, but its server reads it" \
      "$D_TMP/$name.notlost.err" ||
    d_bad "$name: a member only this command cannot open called lost"
  d_stop "$D_SERVER_PID"

  for ((i = 0; i < n; i++)); do
    mv "$D_TMP/$name.m$i" "$D_TMP/$name.m$i.away"
    d_serve "$name.deg$i" "$NBDSTRIPE_CONFDIR/$name.conf" "$D_TMP/$name.pid" \
      --degraded || d_fail "$name: serve --degraded without member $i"
    # Put back while served without it: still missing to the server's
    # clients, and to lost-files, which asks the server.
    mv "$D_TMP/$name.m$i.away" "$D_TMP/$name.m$i"
    local lost=$D_TMP/$name.deg$i.lost.out
    d_run "$name.deg$i.lost" d_ns lost-files --json "$name"
    [[ $D_RC -eq 0 ]] || d_bad "$name: lost-files without member $i: exit $D_RC"
    d_log "$name: member $i missing: $(jq '.files | length' "$lost") files named, $(jq '.unnamed_inodes | length' "$lost") unnamed inodes, superblock lost: $(jq .superblock_lost "$lost"), backup $(jq .backup_superblock "$lost")"
    # The primary lost: the backup lost-files names (4 KiB blocks; mount's
    # sb= counts 1 KiB).
    opt=
    if [[ $(jq .superblock_lost "$lost") == true ]]; then
      [[ $(jq .backup_superblock "$lost") =~ ^[0-9]+$ ]] ||
        d_fail "$name: without member $i the superblock is lost, and no backup named"
      opt=sb=$(($(jq .backup_superblock "$lost") * 4))
    fi
    [[ $(jq -c .missing "$lost") == "[$i]" ]] ||
      d_bad "$name: member $i, put back, is missing to its server; lost-files says missing $(jq -c .missing "$lost")"
    readback "$name.deg$i" "$lost" $opt
    d_stop "$D_SERVER_PID"
  done
}

volume three 96K "40M 40M 40M"
# Zone 0: 4 x 21 MiB of data (84 MiB), then members 1-3 (54 MiB more):
# the file system's last 28 MiB, group 3's backup superblock among them
# (96 MiB in), lie in the second zone.  Group 1's (32 MiB in, chunk 512)
# is on member 0 with the primary.
volume four 64K "22M 40M 40M 40M" alternate
d_done
