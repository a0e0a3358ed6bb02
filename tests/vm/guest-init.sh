#!/bin/busybox sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the throw-away VM of nbd_client_vm.sh (busybox sh, PID 1).
#
# Parameters come on the kernel command line:
#   vm.port=PORT      the volume, served on the host's 127.0.0.1:PORT,
#                     which qemu's user networking makes 10.0.2.2:PORT
#   vm.phase=1|2      1: nbd-client -C 4, mkfs.ext4 with the stripe
#                        geometry, write files + a checksum manifest and
#                        scratch files, delete the scratch files (no
#                        discard), umount, e2fsck -fn, disconnect
#                     2: nbd-client, mount, verify, fstrim, umount,
#                        e2fsck -fn, disconnect; then the grow (below),
#                        which ends with nbd-client -C 4, mount
#                        read-only, verify
#   vm.size=BYTES     the volume size the kernel must see
#   vm.stride=N vm.width=N   ext4 stride and stripe_width (4 KiB blocks)
#   vm.manifest=SHA256 vm.files=N   (phase 2) what phase 1 wrote
#   vm.sabotage=WORD  a deliberate fault, to see the test fail
#
# The grow, in phase 2, talks with the host over the second serial port
# (/dev/ttyS1, raw; one line per message, the host's test script at the
# other end):
#   guest: TRIMMED        the host counts the members' blocks, then
#   host:  GO
#   guest: GROW-READY     nbd-client -C 4, ext4 mounted read-write; from
#                         now on the guest writes files of 512 KiB, each
#                         fsynced before it says
#   guest: WROTE N        (the host grows the volume meanwhile: paused
#                         and going on, see nbd_client_vm.sh) until
#   host:  GROWN BYTES    the grow is done, the volume has BYTES now.
# The guest then: /DURING (the checksums of the files written during
# the grow, for the host), umount, e2fsck -fn (the old size: still
# clean), nbd-client -d, nbd-client -C 4 (the kernel must see BYTES),
# e2fsck -fp, resize2fs, e2fsck -fn, the block count grown to the new
# size, mount read-only, every checksum (phase 1's and the files written
# during the grow), umount, disconnect.
#
# Every line for the host starts with "vm: ".  The last one is
# "NBDSTRIPE-VM-PASS phase=N", then the VM exits through isa-debug-exit
# (qemu's status 99); a failure prints why and exits with status 3
# (tests/lib/vm_guest.sh).

. /vm_guest.sh     # tests/lib/vm_guest.sh: mounts, P_*, log, fail, run, vm_pass
: "${P_port:?}" "${P_size:?}" "${P_stride:?}" "${P_width:?}"
log "phase $P_phase, kernel $(uname -r), volume 10.0.2.2:$P_port"
if [ "$P_sabotage" = panic ]; then
  echo "vm: SABOTAGE: init exits (a kernel panic)"
  exit 1
fi

# Modules: busybox modprobe reads modules.dep (made by busybox depmod).
# crc32c before ext4: jbd2/ext4 metadata checksums need the algorithm
# and there is no udev to load it on demand.
for m in virtio_pci virtio_net virtio_blk nbd crc32c_generic ext4; do
  modprobe "$m" || fail "modprobe $m"
done

ip link set lo up
ip link set eth0 up || fail "no eth0 (virtio_net)"
ip addr add 10.0.2.15/24 dev eth0 || fail "ip addr"
ip route add default via 10.0.2.2 || fail "ip route"

NBD=/dev/nbd0

connect ()      # connect [-C N]
{
  run /sbin/nbd-client 10.0.2.2 "$P_port" "$NBD" -b 4096 "$@" ||
    fail "nbd-client 10.0.2.2 $P_port $NBD -b 4096 $*"
  got=$(blockdev --getsize64 "$NBD")
  [ "$got" = "$P_size" ] || fail "$NBD has $got bytes, the volume $P_size"
  # One blk-mq hardware queue per connection, at most one per CPU.
  want=1
  [ "$1" = -C ] && want=$2
  [ "$want" -le "$(nproc)" ] || want=$(nproc)
  queues=$(ls /sys/block/nbd0/mq | wc -l)
  [ "$queues" = "$want" ] || fail "$NBD has $queues hardware queues, expected $want"
  log "connected $NBD ($got bytes, nbd-client $*, $queues queue(s))"
}

disconnect ()
{
  run /sbin/nbd-client -d "$NBD" || fail "nbd-client -d $NBD"
  log "disconnected"
}

fsck_clean ()
{
  run /sbin/e2fsck -fn "$NBD" || fail "e2fsck -fn $NBD is not clean"
  log "e2fsck -fn: clean"
}

verify ()       # verify WHEN
{
  sum=$(sha256sum /mnt/MANIFEST | cut -d' ' -f1)
  [ "$sum" = "$P_manifest" ] ||
    fail "$1: MANIFEST has sha256 $sum, phase 1 wrote $P_manifest"
  n=$(wc -l </mnt/MANIFEST)
  [ "$n" = "$P_files" ] || fail "$1: MANIFEST lists $n files, phase 1 wrote $P_files"
  cd /mnt/data || fail "$1: no /mnt/data"
  if ! sha256sum -c /mnt/MANIFEST >/tmp/verify.out 2>&1; then
    grep -v ': OK$' /tmp/verify.out | head -n 20 | sed 's/^/vm: | /'
    fail "$1: checksums differ"
  fi
  ok=$(grep -c ': OK$' /tmp/verify.out)
  [ "$ok" = "$P_files" ] || fail "$1: $ok of $P_files files verified"
  cd /
  log "$1: all $ok checksums verified"
}

# --- the grow (phase 2) ------------------------------------------------
to_host () { echo "$*" >&4; }

block_count () { /sbin/dumpe2fs -h "$NBD" 2>/dev/null | sed -n 's/^Block count: *//p'; }

grow_while_writing ()
{
  stty -F /dev/ttyS1 raw -echo || fail "stty /dev/ttyS1"
  exec 4<>/dev/ttyS1
  to_host TRIMMED
  read -r msg <&4 || fail "no answer from the host on /dev/ttyS1"
  [ "$msg" = GO ] || fail "the host said '$msg', not GO"
  cat <&4 >/tmp/host.msg &
  connect -C 4
  mount -t ext4 "$NBD" /mnt || fail "mount"
  mkdir /mnt/during || fail "mkdir /mnt/during"
  old_blocks=$(block_count)
  : >/tmp/during.sums
  to_host GROW-READY
  nw=0
  while ! grep -q '^GROWN ' /tmp/host.msg; do
    nw=$((nw + 1))
    [ $nw -le 120 ] || fail "wrote 120 files and the host never said GROWN"
    dd if=/dev/urandom of=/mnt/during/d.$nw bs=64k count=8 conv=fsync 2>/dev/null ||
      fail "write during/d.$nw"
    (cd /mnt/during && sha256sum d.$nw >>/tmp/during.sums) || fail "sha256sum d.$nw"
    to_host "WROTE $nw"
  done
  new_size=$(sed -n 's/^GROWN \([0-9]*\).*/\1/p' /tmp/host.msg)
  log "wrote $nw files during the grow; the volume has $new_size bytes now"
  cp /tmp/during.sums /mnt/DURING || fail "cp DURING"
  umount /mnt || fail "umount"
  fsck_clean
  disconnect
  P_size=$new_size
  connect -C 4
  run /sbin/e2fsck -fp "$NBD" || fail "e2fsck -fp $NBD (before resize2fs)"
  if [ "$P_sabotage" = noresize ]; then
    log "SABOTAGE: no resize2fs"
  else
    run /sbin/resize2fs "$NBD" || fail "resize2fs $NBD"
    log "resize2fs: $(grep -i 'now' /tmp/run.out | head -n 1)"
  fi
  fsck_clean
  new_blocks=$(block_count)
  # The file system fills the device, up to the last block group that
  # fits (resize2fs leaves out a last group too small to be worth it).
  [ "$new_blocks" -gt "$old_blocks" ] ||
    fail "resize2fs: $new_blocks blocks, as many as before ($old_blocks)"
  [ $(( new_size / 4096 - new_blocks )) -lt 1024 ] ||
    fail "resize2fs: $new_blocks blocks of 4 KiB, the device $new_size bytes"
  log "ext4 grew from $old_blocks to $new_blocks blocks"
  mount -t ext4 -o ro "$NBD" /mnt || fail "mount -o ro"
  verify "after the grow and resize2fs, read-only, 4 connections"
  cd /mnt/during || fail "no /mnt/during"
  if ! sha256sum -c /tmp/during.sums >/tmp/verify.out 2>&1; then
    grep -v ': OK$' /tmp/verify.out | head -n 20 | sed 's/^/vm: | /'
    fail "the files written during the grow: checksums differ"
  fi
  ok=$(grep -c ': OK$' /tmp/verify.out)
  [ "$ok" = "$nw" ] || fail "$ok of the $nw files written during the grow verified"
  cd /
  log "after the grow: all $ok files written during it verified; df: $(df -k /mnt | tail -n 1)"
  echo "vm: DURING $(sha256sum /tmp/during.sums | cut -d' ' -f1) $nw"
  umount /mnt || fail "umount"
  fsck_clean
  disconnect
}

case $P_phase in
1)
  connect -C 4
  # 4 KiB blocks always (mke2fs would pick 1 KiB for a "small" volume);
  # inode tables and journal written now, so that no lazy init writes
  # behind the host's block counts.
  run /sbin/mke2fs -q -t ext4 -b 4096 \
      -E "stride=$P_stride,stripe_width=$P_width,lazy_itable_init=0,lazy_journal_init=0" \
      "$NBD" || fail "mke2fs"
  log "mkfs.ext4 -b 4096 -E stride=$P_stride,stripe_width=$P_width"
  mount -t ext4 "$NBD" /mnt || fail "mount"
  mkdir /mnt/data /mnt/scratch
  # A few hundred small files of varied sizes, and some large ones.
  i=0
  while [ $i -lt 300 ]; do
    head -c $(( 1 + (i * 7919) % 49152 )) /dev/urandom >/mnt/data/small.$i ||
      fail "write small.$i"
    i=$((i + 1))
  done
  for i in 0 1 2 3; do
    dd if=/dev/urandom of=/mnt/data/large.$i bs=1M count=6 2>/dev/null ||
      fail "write large.$i"
  done
  log "wrote $(ls /mnt/data | wc -l) files, $(du -sk /mnt/data | cut -f1) KiB"
  (cd /mnt/data && sha256sum * >/mnt/MANIFEST) || fail "sha256sum"
  manifest="$(sha256sum /mnt/MANIFEST | cut -d" " -f1) $(wc -l </mnt/MANIFEST)"
  # Scratch files, deleted again: ext4 is mounted without "discard", so
  # their blocks stay allocated on the members until phase 2's fstrim.
  # (Not zeroes: nothing on the way may turn them into holes.)
  yes nbdstripe-scratch | head -c 1048576 >/tmp/pattern
  for i in 0 1 2 3; do
    cat /tmp/pattern /tmp/pattern /tmp/pattern /tmp/pattern \
        /tmp/pattern /tmp/pattern /tmp/pattern /tmp/pattern >/mnt/scratch/s.$i ||
      fail "write scratch $i"
  done
  sync
  rm -r /mnt/scratch
  sync
  log "wrote and deleted 32 MiB of scratch files"
  umount /mnt || fail "umount"
  fsck_clean
  disconnect
  echo "vm: MANIFEST $manifest"
  ;;
2)
  : "${P_manifest:?}" "${P_files:?}"
  connect
  mount -t ext4 "$NBD" /mnt || fail "mount"
  verify "after reconnecting"
  if [ "$P_sabotage" = notrim ]; then
    log "SABOTAGE: no fstrim"
  else
    fstrim -v /mnt >/tmp/fstrim.out 2>&1 || { cat /tmp/fstrim.out; fail "fstrim"; }
    log "fstrim: $(cat /tmp/fstrim.out)"
  fi
  umount /mnt || fail "umount"
  fsck_clean
  disconnect
  grow_while_writing
  ;;
*)
  fail "vm.phase=$P_phase"
  ;;
esac

vm_pass
