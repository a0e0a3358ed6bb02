#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The host's fast path to a file system on the volume, without a VM:
# `nbdstripe serve` on a Unix socket, nbdfuse (4 connections) exposing
# the volume as a file, a loop device over that file, ext4 on the loop
# device with the stripe geometry from the members' headers.
#
# mkfs.ext4, mount, write 204 files (2 of 8 MiB) and a sha256 manifest,
# write and delete 32 MiB of scratch files, verify, fstrim; every
# member's allocated blocks must drop (the discard travels ext4 -> loop ->
# FUSE fallocate(PUNCH_HOLE) -> NBD trim -> the plugin -> each member);
# umount, drop the loop device's buffers, e2fsck -fn clean, mount again,
# verify every checksum (read from the server: the loop device uses direct
# I/O on the FUSE file where it can), umount.
# Then the loop device and the FUSE mount go away, nbdfuse exits and the
# server is stopped: nothing of ours is left.
#
# Skipped (77) without FUSE (/dev/fuse, permission to mount) or loop
# devices (needs root).
#
# To see it fail: NBDFUSE_SABOTAGE=notrim (no fstrim: the trim check
# fails), NBDFUSE_SABOTAGE=corrupt (a member block under a file is
# overwritten while unmounted: the second verification fails).

here=$(dirname "$(realpath "$0")")
source "$here/../lib/vm.sh"
v_init nbdfuse losetup mkfs.ext4 e2fsck debugfs fstrim mount umount setsid \
       sha256sum nbdinfo
SABOTAGE=${NBDFUSE_SABOTAGE:-none}

[[ $(id -u) -eq 0 ]] || v_skip "not root: loop devices and mounting need root"
[[ -c /dev/fuse ]] || v_skip "no /dev/fuse: FUSE is not available"
[[ -e /dev/loop-control ]] || modprobe loop 2>/dev/null
[[ -e /dev/loop-control ]] || v_skip "no loop devices (/dev/loop-control)"

# --- the volume: 4 members of mixed sizes, chunk 128K (the default) -----------
M=1048576
sizes=($(( 48 * M )) $(( 40 * M + 12345 )) $(( 32 * M )) $(( 32 * M + 4096 )))
members=()
for i in 0 1 2 3; do
  truncate -s "${sizes[i]}" "$V_TMP/member$i" || v_fail "truncate"
  members+=("$V_TMP/member$i")
done
sock=$V_TMP/nbd.sock
pidfile=$V_TMP/nbdkit.pid
v_conf "$V_TMP/vol.conf" fusetest 128K \
  "socket = \"$sock\"; pidfile = \"$pidfile\";" "${members[@]}"
v_run create "$NBDSTRIPE" create "$V_TMP/vol.conf" || v_fail "nbdstripe create"
v_serve "$V_TMP/vol.conf" "$pidfile" || v_fail "nbdstripe serve"
uri="nbd+unix:///?socket=$sock"
size=$(nbdinfo --size "$uri") || v_fail "nbdinfo --size $uri"
read -r chunk count stride width < <(v_geometry "${members[0]}") ||
  v_fail "nbdstripe inspect --json member0"
[[ $chunk -eq 131072 && $count -eq 4 ]] ||
  v_fail "header says chunk $chunk, $count members; expected 131072, 4"
v_log "volume: $size bytes; ext4 stride=$stride stripe_width=$width"

# --- nbdfuse: the volume as the file $fusedir/volume ---------------------------
fusedir=$V_TMP/fuse
mkdir "$fusedir" "$V_TMP/mnt"
# Readiness without sleeping: nbdfuse's pidfile is a FIFO, which nbdfuse
# opens and writes once the mount is ready; if nbdfuse fails first, the
# FIFO gets its status instead.
mkfifo "$V_TMP/nbdfuse.pid"
setsid bash -c 'nbdfuse -C 4 -P "$1" "$2" "$3" || echo "exit $?" >"$1"' \
  nbdfuse-wrapper "$V_TMP/nbdfuse.pid" "$fusedir/volume" "$uri" \
  >"$V_TMP/nbdfuse.out" 2>"$V_TMP/nbdfuse.err" </dev/null &
fuse_pid=$!
V_PGIDS+=("$fuse_pid")
ready=$(timeout 60 cat "$V_TMP/nbdfuse.pid") || ready="timed out"
if [[ ! $ready =~ ^[0-9]+$ ]]; then
  cat "$V_TMP/nbdfuse.err" >&2
  v_skip "cannot mount with nbdfuse ($ready): $(head -c 300 "$V_TMP/nbdfuse.err")"
fi
V_MOUNTS+=("$fusedir")
[[ $(stat -c %s "$fusedir/volume") -eq $size ]] ||
  v_fail "$fusedir/volume is not $size bytes"

# --direct-io=on: the loop device reads and writes the FUSE file with
# O_DIRECT, so no page cache of the FUSE file stands between the file
# system and the server.
dio=on
loop=$(losetup --find --show --direct-io=on "$fusedir/volume" 2>"$V_TMP/losetup.err") ||
  { dio=off; loop=$(losetup --find --show "$fusedir/volume" 2>"$V_TMP/losetup.err"); } ||
  v_skip "losetup refuses: $(cat "$V_TMP/losetup.err")"
V_LOOPS+=("$loop")
[[ $(cat "/sys/block/${loop#/dev/}/loop/dio" 2>/dev/null) == 1 ]] || dio=off
v_log "nbdfuse: $fusedir/volume on $loop (direct I/O $dio)"

# --- ext4 ----------------------------------------------------------------------------
v_run mkfs mkfs.ext4 -q -F -b 4096 \
  -E "stride=$stride,stripe_width=$width,lazy_itable_init=0,lazy_journal_init=0" \
  "$loop" || v_fail "mkfs.ext4"
mnt=$V_TMP/mnt
mount -t ext4 "$loop" "$mnt" || v_fail "mount $loop"
V_MOUNTS+=("$mnt")
mkdir "$mnt/data" "$mnt/scratch"
for i in $(seq 0 199); do
  head -c $(( 1 + (i * 7919) % 98304 )) /dev/urandom >"$mnt/data/small.$i"
done
for i in 0 1 2 3; do
  head -c $(( 8 * M )) /dev/urandom >"$mnt/data/large.$i"
done
(cd "$mnt/data" && sha256sum -- * >"$V_TMP/MANIFEST") || v_fail "sha256sum"
nfiles=$(wc -l <"$V_TMP/MANIFEST")
head -c $(( 32 * M )) < <(yes nbdstripe-scratch) >"$mnt/scratch/s" || v_fail "scratch"
sync -f "$mnt" && sync
rm -r "$mnt/scratch"
sync -f "$mnt" && sync
blocks1=$(v_blocks "${members[@]}")
v_log "wrote $nfiles files + 32 MiB scratch (deleted); member blocks: $blocks1"

verify ()       # verify WHEN
{
  if (cd "$mnt/data" && sha256sum --quiet -c "$V_TMP/MANIFEST" >&2) &&
     [[ $(ls "$mnt/data" | wc -l) -eq $nfiles ]]; then
    v_ok "$1: all $nfiles checksums verified"
  else
    v_bad "$1: the files differ from the manifest"
  fi
}
verify "written"

if [[ $SABOTAGE == notrim ]]; then
  v_log "SABOTAGE: no fstrim"
else
  v_run fstrim fstrim -v "$mnt" || v_bad "fstrim $mnt"
fi
blocks2=$(v_blocks "${members[@]}")
v_trim_reached_every_member "$blocks1" "$blocks2" 2048 "${members[@]##*/}"

umount "$mnt" || v_fail "umount $mnt"
V_MOUNTS=("$fusedir")
# Drop the loop device's buffer cache: what follows reads the server.
blockdev --flushbufs "$loop" || v_bad "blockdev --flushbufs $loop"
if v_run e2fsck e2fsck -fn "$loop"; then
  v_ok "e2fsck -fn: clean"
else
  v_bad "e2fsck -fn $loop"
fi

if [[ $SABOTAGE == corrupt ]]; then
  # Overwrite the member block that holds block 100 of /data/large.1
  # (chunk k of the volume is on member k mod 4 at (k div 4) x chunk
  # past the 1 MiB data offset, in zone 0).
  pblk=$(debugfs -R "bmap /data/large.1 100" "$loop" 2>/dev/null)
  off=$(( pblk * 4096 )); k=$(( off / chunk ))
  moff=$(( M + (k / 4) * chunk + off % chunk ))
  v_log "SABOTAGE: overwriting member$(( k % 4 )) at $moff"
  head -c 4096 /dev/urandom |
    dd of="${members[k % 4]}" bs=4096 seek=$(( moff / 4096 )) conv=notrunc status=none
  blockdev --flushbufs "$loop"
fi

mount -t ext4 "$loop" "$mnt" || v_fail "mount $loop again"
V_MOUNTS+=("$mnt")
verify "remounted"
umount "$mnt" || v_fail "umount $mnt"
V_MOUNTS=("$fusedir")

# --- tear down: loop device, FUSE mount (nbdfuse exits), server -------------
losetup -d "$loop" || v_bad "losetup -d $loop"
V_LOOPS=()
# Right after losetup -d the kernel may still hold the FUSE file for a
# moment (the loop device is released asynchronously): unmounting then
# fails with EBUSY.  Retry that case only, a bounded number of times.
for try in $(seq 100); do
  if umount "$fusedir" 2>"$V_TMP/umount.err"; then break; fi
  grep -q -i 'busy' "$V_TMP/umount.err" && (( try < 100 )) ||
    v_fail "umount $fusedir: $(cat "$V_TMP/umount.err")"
  sleep 0.05
done
(( try == 1 )) || v_log "the FUSE mount was busy $(( try - 1 )) time(s) after losetup -d"
V_MOUNTS=()
if timeout 30 tail --pid="$fuse_pid" -f /dev/null; then
  wait "$fuse_pid" || v_bad "nbdfuse exited with status $?"
else
  v_bad "nbdfuse did not exit within 30 s of the unmount"
fi
V_PGIDS=()
v_stop "$V_SERVER_PID"
v_done
