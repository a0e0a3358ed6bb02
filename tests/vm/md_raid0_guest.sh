#!/bin/busybox sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the throw-away VM of md_raid0.sh (busybox sh, PID 1): the real
# md raid0 driver and mdadm (Debian's 4.2, from its package) on virtio
# disks that are raw files on the host.
#
# The host puts /jobs in the initramfs: one line per array, run in order,
#   job NAME create "MDADM_OPTIONS" SERIAL...
#   job NAME build "MDADM_OPTIONS" SERIAL...
#   job NAME assemble "" SERIAL...
# SERIALs name the member disks (virtio-blk serial numbers), in role
# order; the disk with serial "pattern" holds the bytes to write.
#
# create:   mdadm --create /dev/mdN --run --metadata=1.2 --level=0
#           --raid-devices=COUNT MDADM_OPTIONS DISKS...; write the first
#           SIZE bytes of the pattern disk over all of /dev/mdN (SIZE =
#           the array's size), fsync.
# build:    mdadm --build /dev/mdN --level=0 --raid-devices=COUNT
#           MDADM_OPTIONS DISKS... (no superblock: data from byte 0 of
#           every member), then the pattern as for create.
# assemble: mdadm --assemble /dev/mdN DISKS...
# Then, for all: drop the page cache, sha256 of all of /dev/mdN (read
# back through md), mdadm --detail, mdadm --stop, mdadm --examine of every
# member (after the stop: what is on the disks; after build, that there
# is no superblock), and one line
#   vm: RESULT case=NAME size=BYTES layout=SYSFS_LAYOUT chunk=BYTES
#       default_layout=N sha256=HEX
# (printed as one line; layout and chunk from /sys/block/mdN/md/,
# default_layout from /sys/module/raid0/parameters/: the layout md gives
# a multi-zone array whose layout nobody told it, as mdadm --build's).
# mdadm's and --detail's and --examine's lines go to the console as
# "vmx: NAME mdadm|detail|INDEX | ...".
# An array mdadm or md refuses gives "vm: RESULT case=NAME refused" (the
# host decides whether that is allowed) and the guest goes on.
#
# Parameters (kernel command line): vm.phase=create|assemble (a name for
# the logs and the PASS marker); md's own raid0.default_layout=N when the
# host gives it (busybox modprobe passes it to raid0).
# tests/lib/vm_guest.sh does the rest.

. /vm_guest.sh
hostname mdtest
log "phase $P_phase, kernel $(uname -r)"

for m in virtio_pci virtio_blk raid0; do
  modprobe "$m" || fail "modprobe $m"
done
DEFAULT_LAYOUT=$(cat /sys/module/raid0/parameters/default_layout)
log "raid0.default_layout=$DEFAULT_LAYOUT" "$(/sbin/mdadm --version 2>&1)"

# dev_of SERIAL: the disk with that virtio serial number.
dev_of ()
{
  for d in /sys/block/vd*; do
    [ "$(cat "$d/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${d##*/}"; return 0; }
  done
  return 1
}

PATTERN=$(dev_of pattern) || fail "no disk with serial 'pattern'"
PATTERN_SIZE=$(blockdev --getsize64 "$PATTERN")

n=0
job ()
{
  name=$1 op=$2 opts=$3
  shift 3
  devs=
  for s in "$@"; do
    d=$(dev_of "$s") || fail "$name: no disk with serial $s"
    devs="$devs $d"
  done
  md=/dev/md$n
  sys=/sys/block/md$n/md
  n=$((n + 1))
  log "$name: mdadm --$op $md$devs ($opts)"
  if [ "$op" = create ]; then
    # shellcheck disable=SC2086  # $opts and $devs are word lists
    /sbin/mdadm --create "$md" --run --metadata=1.2 --level=0 \
        --raid-devices=$# $opts $devs >/tmp/md.out 2>&1
  elif [ "$op" = build ]; then
    # shellcheck disable=SC2086
    /sbin/mdadm --build "$md" --level=0 --raid-devices=$# $opts $devs \
        >/tmp/md.out 2>&1
  else
    # shellcheck disable=SC2086
    /sbin/mdadm --assemble "$md" $devs >/tmp/md.out 2>&1
  fi
  rc=$?
  sed "s/^/vmx: $name mdadm | /" /tmp/md.out
  if [ $rc -ne 0 ] || [ ! -b "$md" ]; then
    sed 's/^/vm: | /' /tmp/md.out
    dmesg | grep -E 'md[0-9]|md/|md:' | tail -n 5 | sed 's/^/vm: | /'
    echo "vm: RESULT case=$name refused"
    /sbin/mdadm --stop "$md" >/dev/null 2>&1
    return 0
  fi
  size=$(blockdev --getsize64 "$md")
  if [ "$op" != assemble ]; then
    [ "$size" -le "$PATTERN_SIZE" ] ||
      fail "$name: $md has $size bytes, the pattern disk only $PATTERN_SIZE"
    bs=65536
    [ $((size % bs)) -eq 0 ] || bs=512
    dd if="$PATTERN" of="$md" bs=$bs count=$((size / bs)) conv=fsync 2>/tmp/dd.out ||
      { cat /tmp/dd.out; fail "$name: dd onto $md"; }
    log "$name: wrote $size bytes of the pattern"
  fi
  sync
  echo 3 >/proc/sys/vm/drop_caches
  sha=$(sha256sum "$md" | cut -d' ' -f1)
  layout=$(cat "$sys/layout") chunk=$(cat "$sys/chunk_size")
  /sbin/mdadm --detail "$md" 2>&1 | sed "s/^/vmx: $name detail | /"
  run /sbin/mdadm --stop "$md" || fail "$name: mdadm --stop $md"
  i=0
  for d in $devs; do
    /sbin/mdadm --examine "$d" 2>&1 | sed "s/^/vmx: $name $i | /"
    i=$((i + 1))
  done
  echo "vm: RESULT case=$name size=$size layout=$layout chunk=$chunk" \
       "default_layout=$DEFAULT_LAYOUT sha256=$sha"
  log "$name: done"
}

[ -f /jobs ] || fail "no /jobs in the initramfs"
. /jobs
vm_pass
