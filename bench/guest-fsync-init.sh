#!/bin/busybox sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of bench/guest-fsync's VM (busybox sh, PID 1): the Linux kernel's
# NBD client under fsync-heavy fio, against each of the host's servers.
#
# Parameters (kernel command line, tests/lib/vm_guest.sh reads them):
#   vm.targets=NAME:PORT,...  the servers, on the host's 127.0.0.1:PORT
#                     (10.0.2.2:PORT here), measured in this order
#   vm.repeat=R       rounds; each measures every target in turn
#   vm.runtime=S vm.ramp=S    fio's measured and unmeasured seconds
#   vm.jobs=J         fio jobs (4); nbd-client -C J connections
#   vm.size=BYTES     the region fio writes on the device; the file size
#                     per job on ext4
#
# For each round and target: nbd-client -C J, then
#   raw   fio --ioengine=libaio --direct=1 --rw=randwrite --bs=4k
#         --iodepth=1 --numjobs=J --fsync=1 on /dev/nbd0
#   ext4  mkfs.ext4, mount, the same on a file per job (buffered I/O,
#         fsync after every write: ext4's journal commits as flushes and
#         FUA writes)
# each printed as "vm: RESULT ROUND TARGET raw|ext4 IOPS LAT_US SYNC_US"
# (writes per second, each followed by an fsync; mean write and fsync
# latency), then the PASS marker.

. /vm_guest.sh
: "${P_targets:?}" "${P_repeat:=1}" "${P_runtime:=10}" "${P_ramp:=2}" "${P_jobs:=4}"
: "${P_size:=268435456}"
log "kernel $(uname -r), $(nproc) CPUs, targets $P_targets"
for m in virtio_pci virtio_net nbd crc32c_generic ext4; do
  modprobe "$m" || fail "modprobe $m"
done
ip link set lo up
ip link set eth0 up || fail "no eth0 (virtio_net)"
ip addr add 10.0.2.15/24 dev eth0 || fail "ip addr"
ip route add default via 10.0.2.2 || fail "ip route"
NBD=/dev/nbd0

# fio_json FILE: "IOPS LAT_US SYNC_US" of the group report in FILE.
fio_json ()
{
  # The group report is the only job: its write section, then "sync".
  awk '
    /"write" : \{/ { w = 1 }
    w && /"iops" :/ && iops == "" { gsub(/[^0-9.]/, "", $3); iops = $3 }
    w && /"lat_ns" : \{/ { l = 1 }
    l && /"mean" :/ && lat == "" { gsub(/[^0-9.]/, "", $3); lat = $3 / 1000; l = 0; w = 0 }
    /"sync" : \{/ { s = 1 }
    s && /"mean" :/ && sync == "" { gsub(/[^0-9.]/, "", $3); sync = $3 / 1000; s = 0 }
    END { printf "%s %.1f %.1f\n", iops, lat, sync }
  ' "$1"
}

# measure ROUND NAME KIND FIO_ARGS...
measure ()
{
  r=$1 name=$2 kind=$3
  shift 3
  /sbin/fio --name="$kind" --ioengine=libaio --rw=randwrite --bs=4k \
      --iodepth=1 --numjobs="$P_jobs" --fsync=1 --group_reporting \
      --time_based --runtime="$P_runtime" --ramp_time="$P_ramp" \
      --output-format=json --output=/tmp/fio.json "$@" >/tmp/fio.out 2>&1 ||
    { sed 's/^/vm: | /' /tmp/fio.out; fail "fio $kind on $name"; }
  echo "vm: RESULT $r $name $kind $(fio_json /tmp/fio.json)"
}

r=0
while [ "$r" -lt "$P_repeat" ]; do
  for t in $(echo "$P_targets" | tr , ' '); do
    name=${t%%:*} port=${t#*:}
    run /sbin/nbd-client 10.0.2.2 "$port" "$NBD" -b 4096 -C "$P_jobs" ||
      fail "nbd-client 10.0.2.2 $port"
    measure "$r" "$name" raw --filename="$NBD" --direct=1 --size="$P_size"
    run /sbin/mke2fs -q -F -t ext4 -b 4096 \
        -E lazy_itable_init=0,lazy_journal_init=0 "$NBD" || fail "mke2fs on $name"
    mount -t ext4 "$NBD" /mnt || fail "mount $name"
    measure "$r" "$name" ext4 --directory=/mnt --size=$((P_size / P_jobs))
    umount /mnt || fail "umount $name"
    run /sbin/nbd-client -d "$NBD" || fail "nbd-client -d"
  done
  r=$((r + 1))
done
vm_pass
