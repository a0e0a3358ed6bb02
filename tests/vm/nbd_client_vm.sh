#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Linux kernel's NBD client against `nbdstripe serve`, in a throw-away
# qemu VM (TCG: no KVM needed), with ext4 on the volume.
#
# Host: install what is missing (qemu-system-x86, busybox-static,
# nbd-client, e2fsprogs); fetch Debian's linux-image-6.1.0-*-amd64 with
# `apt-get download` into $VM_CACHE (default /var/cache/nbdstripe-vm,
# reused) and unpack it there; build an initramfs (busybox, the modules
# with modules.dep from `busybox depmod`, nbd-client, mke2fs, e2fsck with
# their libraries, /etc/mke2fs.conf, guest-init.sh as /init).  Create a
# 4-member volume of mixed sizes with headers (chunk 64K: three zones) and
# serve it on 127.0.0.1:PORT; the guest reaches it as 10.0.2.2:PORT.
#
# Boot 1 (guest-init.sh phase 1): nbd-client -C 4, mkfs.ext4 with the
# stripe geometry from the members' headers, mount, write 304 files (4 of
# 6 MiB) and a sha256 manifest, write and delete 32 MiB of scratch files,
# umount, e2fsck -fn, disconnect.
# Host: every member's allocated blocks grew; record them.
# Boot 2 (phase 2): nbd-client, mount, verify every checksum, fstrim,
# umount, e2fsck -fn, disconnect.
# Host: every member's allocated blocks dropped (the trim reached every
# member).
# Still boot 2, the grow (issue 22; host and guest talk over the guest's
# second serial port, a pipe here, see guest-init.sh): the guest mounts
# ext4 read-write (nbd-client -C 4) and writes files, each fsynced, while
# the host runs `nbdstripe grow --rate` onto a fifth member, pauses it
# (`grow --cancel`) and waits for 3 files written on the mixed layout,
# goes on (`grow VOLUME`), waits for 3 more written while the status says
# it is moving, pauses it again and lets it finish at full speed
# (`grow --wait VOLUME`).  Told the new size, the guest: umount, e2fsck,
# nbd-client -d, attach again with -C 4 (the kernel must see the new
# size), resize2fs, e2fsck -fn clean, the block count grown to the
# device, mount -o ro, every checksum right (phase 1's files and those
# written during the grow).
# Host: nbdcopy the volume to a file: e2fsck -fn is clean, dumpe2fs
# shows the stripe geometry and the grown block count, and the files
# debugfs extracts match both manifests (checked with the host's
# sha256sum).
#
# A boot fails on a missing PASS marker, a kernel panic, a guest failure
# or the time limit: both boots together get VM_TIMEOUT seconds (default
# 200), enforced with timeout(1).  The reason and the end of the console
# log are printed.
#
# Skipped (77) in the sanitizer build (STRIPE_LD_PRELOAD set: TCG is too
# slow for the CI budget there; the other tests in this directory run in
# both), and when the VM cannot run at all: qemu missing and not
# installable, or no guest kernel cached and none to download.
#
# To see it fail: VM_SABOTAGE=notrim (the guest skips fstrim: the host's
# trim check fails), VM_SABOTAGE=corrupt (the host flips a block of a
# file's data on member 2 between the boots: the guest's verification
# fails), VM_SABOTAGE=panic (the guest's init exits: a kernel panic),
# VM_TIMEOUT=20 (the time limit), VM_SABOTAGE=noresize (the guest skips
# resize2fs: its check of the grown block count fails, and the host's),
# VM_SABOTAGE=staysize (the host tells the guest the old size: the
# reattached device's size check fails), VM_SABOTAGE=growcorrupt (the
# host flips a block of a file's data on the new member after the grow:
# the guest's verification fails).

here=$(dirname "$(realpath "$0")")
source "$here/../lib/vm.sh"

[[ -z ${STRIPE_LD_PRELOAD:-} ]] ||
  v_skip "sanitizer build (STRIPE_LD_PRELOAD set): the TCG VM runs in the plain build only"
v_init
VM_TIMEOUT=${VM_TIMEOUT:-200}
VM_SABOTAGE=${VM_SABOTAGE:-none}

# --- packages ---------------------------------------------------------------
v_apt_install qemu-system-x86 busybox-static nbd-client e2fsprogs qemu-utils ||
  v_log "could not install every package (see above)"
v_vm_require
for t in nbdcopy nbdinfo e2fsck debugfs dumpe2fs resize2fs jq mkfifo gzip ss ldd; do
  command -v "$t" >/dev/null || v_fail "$t is not installed"
done
NBD_CLIENT=$(command -v nbd-client) || v_fail "nbd-client is not installed"

# --- guest kernel and initramfs -----------------------------------------------
v_vm_kernel
v_initramfs_begin "$here/guest-init.sh"
cp /etc/mke2fs.conf "$VM_ROOT/etc/" || v_fail "no /etc/mke2fs.conf"
# Real nbd-client and e2fsprogs, with every library ldd lists.
for b in "$NBD_CLIENT" "$(command -v mke2fs)" "$(command -v e2fsck)" \
         "$(command -v resize2fs)" "$(command -v dumpe2fs)"; do
  v_initramfs_bin "$b"
done
v_initramfs_modules virtio_pci virtio_net virtio_blk nbd crc32c_generic crc16 mbcache jbd2 ext4
v_initramfs_pack

# --- the volume ---------------------------------------------------------------
# Mixed sizes, not all multiples of the chunk: zone 0 over all four,
# zone 1 over members 0 and 1, zone 2 over member 0.
chunk=64K
sizes=(96M $(( 80 * 1048576 + 12345 )) 64M $(( 64 * 1048576 + 4096 )))
members=()
for i in 0 1 2 3; do
  truncate -s "${sizes[i]}" "$V_TMP/member$i" || v_fail "truncate"
  members+=("$V_TMP/member$i")
done
pidfile=$V_TMP/nbdkit.pid
served=false
for try in 1 2 3 4 5; do
  port=$(v_free_port) || v_fail "no free TCP port"
  v_conf "$V_TMP/vm.conf" vmtest "$chunk" \
    "address = \"127.0.0.1\"; port = $port; pidfile = \"$pidfile\"; tls = \"off\";" "${members[@]}"
  if [[ $try -eq 1 ]]; then
    v_run create "$NBDSTRIPE" create "$V_TMP/vm.conf" || v_fail "nbdstripe create"
  fi
  if v_serve "$V_TMP/vm.conf" "$pidfile"; then served=true; break; fi
done
$served || v_fail "nbdstripe serve failed 5 times"
uri=nbd://127.0.0.1:$port/
size=$(nbdinfo --size "$uri") || v_fail "nbdinfo --size $uri"
read -r gchunk gcount stride width < <(v_geometry "$V_TMP/member0") ||
  v_fail "nbdstripe inspect --json member0"
[[ $gchunk -eq 65536 && $gcount -eq 4 ]] ||
  v_fail "header says chunk $gchunk, $gcount members; expected 65536, 4"
v_log "volume: $size bytes on $uri; ext4 stride=$stride stripe_width=$width"

# --- the VM ---------------------------------------------------------------------
VM_DEADLINE=$(( SECONDS + VM_TIMEOUT ))

# vm_boot PHASE [vm.KEY=VALUE...]: boot the guest on the network (the
# volume at 10.0.2.2:$port); the server must have survived it.
vm_boot ()
{
  local phase=$1
  shift
  v_vm_boot "$phase" \
    "vm.port=$port vm.size=$size vm.stride=$stride vm.width=$width $*" \
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile= "${VM_EXTRA[@]}"
  kill -0 "$V_SERVER_PID" 2>/dev/null || v_fail "the server died during boot $phase"
}

VM_EXTRA=()
blocks0=$(v_blocks "${members[@]}")
vm_boot 1 "vm.sabotage=$VM_SABOTAGE"
blocks1=$(v_blocks "${members[@]}")
read -r manifest nfiles < <(tr -d '\r' <"$V_TMP/console.1.log" |
                           sed -n 's/^vm: MANIFEST \([0-9a-f]\{64\}\) \([0-9]*\)$/\1 \2/p')
[[ -n $manifest && $nfiles -gt 300 ]] || v_fail "boot 1 printed no manifest line"
v_log "allocated blocks after create: $blocks0; after boot 1: $blocks1"
b0=($blocks0); b1=($blocks1)
for i in 0 1 2 3; do
  (( b1[i] > b0[i] + 8192 )) ||
    v_bad "member $i: allocation did not grow by 4 MiB with the guest's writes (${b0[i]} -> ${b1[i]})"
done

if [[ $VM_SABOTAGE == corrupt ]]; then
  # Flip a 4 KiB block of /data/large.1 where it lies on member 2 (in
  # zone 0, chunk k of the volume is on member k mod 4 at (k div 4) x
  # chunk past the 1 MiB data offset).
  nbdcopy "$uri" "$V_TMP/sabotage.img" || v_fail "nbdcopy"
  for fblk in $(seq 0 1535); do
    pblk=$(debugfs -R "bmap /data/large.1 $fblk" "$V_TMP/sabotage.img" 2>/dev/null)
    off=$(( pblk * 4096 )); k=$(( off / 65536 ))
    (( k % 4 == 2 && off < 4 * 63 * 1048576 )) && break
  done
  moff=$(( 1048576 + (k / 4) * 65536 + off % 65536 ))
  v_log "SABOTAGE: overwriting member2 at $moff (block $fblk of /data/large.1)"
  head -c 4096 /dev/urandom | dd of="$V_TMP/member2" bs=4096 seek=$(( moff / 4096 )) \
    conv=notrunc status=none
  rm -f "$V_TMP/sabotage.img"
fi

# --- boot 2, and the grow while it runs -----------------------------------
# The guest's second serial port is the pipe $V_TMP/host.{in,out} (qemu
# opens both read-write: nothing blocks on an open).
newm=$V_TMP/member4
truncate -s 64M "$newm" || v_fail "truncate"
mkfifo "$V_TMP/host.in" "$V_TMP/host.out" || v_fail "mkfifo"
exec 3<>"$V_TMP/host.out"
VM_EXTRA=(-chardev "pipe,id=host,path=$V_TMP/host" -serial chardev:host)
( vm_boot 2 "vm.manifest=$manifest" "vm.files=$nfiles" "vm.sabotage=$VM_SABOTAGE" ) &
boot=$!

# guest_wait REGEX: the guest's lines (fd 3) until one matches; WROTE N
# lines are counted in GUEST_WROTE.  When the boot has ended (the guest
# failed: its subshell printed why) or the time is up, the test fails.
GUEST_WROTE=0
guest_wait ()
{
  local line rc
  while (( SECONDS < VM_DEADLINE )); do
    rc=0
    IFS= read -r -t 1 line <&3 || rc=$?
    if (( rc > 128 )); then              # no line within the second
      kill -0 "$boot" 2>/dev/null && continue
      wait "$boot"
      v_fail "boot 2 ended while the host waited for '$1' from the guest"
    fi
    (( rc == 0 )) || v_fail "reading the guest's serial port failed"
    line=${line%$'\r'}
    [[ $line =~ ^WROTE\ ([0-9]+)$ ]] && GUEST_WROTE=${BASH_REMATCH[1]}
    [[ $line =~ $1 ]] && return 0
  done
  v_fail "time is up (VM_TIMEOUT=$VM_TIMEOUT) waiting for '$1' from the guest"
}
# guest_wrote N: wait until the guest has written N more files.
guest_wrote ()
{
  local want=$(( GUEST_WROTE + $1 ))
  while (( GUEST_WROTE < want )); do guest_wait '^WROTE [0-9]+$'; done
}
to_guest () { echo "$*" >"$V_TMP/host.in"; }
reshape_state ()
{
  "$NBDSTRIPE" status --json "$V_TMP/vm.conf" 2>/dev/null | jq -r '.status.reshape.state // "none"'
}

guest_wait '^TRIMMED$'
V_PGIDS+=("$(<"$V_TMP/qemu.2.pgid")")    # stopped with the rest on a failure
blocks2=$(v_blocks "${members[@]}")
v_log "allocated blocks after boot 2's fstrim: $blocks2"
v_trim_reached_every_member "$blocks1" "$blocks2" 2048 "${members[@]##*/}"
to_guest GO
guest_wait '^GROW-READY$'
# 20 MB/s: the volume's 300 MiB take over 15 s at this rate, the guest
# writes a file in well under a second (TCG): both pauses below come
# long before the end.
rate=20000000
v_run grow-start "$NBDSTRIPE" grow --rate "$rate" "$V_TMP/vm.conf" "$newm" ||
  v_fail "nbdstripe grow $V_TMP/vm.conf $newm"
v_run grow-pause "$NBDSTRIPE" grow --cancel "$V_TMP/vm.conf" || v_fail "nbdstripe grow --cancel"
[[ $(reshape_state) == paused ]] || v_fail "the grow is '$(reshape_state)', not paused"
guest_wrote 3
v_ok "the guest wrote 3 files (to $GUEST_WROTE) on the paused grow's mixed layout"
v_run grow-on "$NBDSTRIPE" grow --rate "$rate" "$V_TMP/vm.conf" || v_fail "nbdstripe grow VOLUME (go on)"
guest_wrote 3
state=$(reshape_state)
[[ $state == copying ]] ||
  v_fail "the grow is '$state' after the guest wrote 3 files: they did not overlap the move"
v_ok "the guest wrote 3 files (to $GUEST_WROTE) while the grow moved data"
v_run grow-pause2 "$NBDSTRIPE" grow --cancel "$V_TMP/vm.conf" || v_fail "nbdstripe grow --cancel"
v_run grow-end "$NBDSTRIPE" grow --wait "$V_TMP/vm.conf" || v_fail "nbdstripe grow --wait VOLUME"
newsize=$(nbdinfo --size "$uri") || v_fail "nbdinfo --size $uri"
v_log "grown: $size -> $newsize bytes; the guest had written $GUEST_WROTE files"
(( newsize > size )) || v_fail "the volume did not grow ($size -> $newsize bytes)"
grep -q "\"$newm\" \]" "$V_TMP/vm.conf" || v_bad "the config does not list $newm last among the members"
told=$newsize
if [[ $VM_SABOTAGE == staysize ]]; then
  v_log "SABOTAGE: the guest is told the old size"
  told=$size
elif [[ $VM_SABOTAGE == growcorrupt ]]; then
  # Flip a 4 KiB block of /data/large.2 where the grown layout put it on
  # the new member (zone 0, over the five members' first 63 MiB: chunk
  # k of the volume on member k mod 5 at (k div 5) x chunk past 1 MiB).
  nbdcopy "$uri" "$V_TMP/sabotage.img" || v_fail "nbdcopy"
  for fblk in $(seq 0 1535); do
    pblk=$(debugfs -R "bmap /data/large.2 $fblk" "$V_TMP/sabotage.img" 2>/dev/null)
    off=$(( pblk * 4096 )); k=$(( off / 65536 ))
    (( k % 5 == 4 && off < 5 * 63 * 1048576 )) && break
  done
  moff=$(( 1048576 + (k / 5) * 65536 + off % 65536 ))
  v_log "SABOTAGE: overwriting $newm at $moff (block $fblk of /data/large.2)"
  head -c 4096 /dev/urandom | dd of="$newm" bs=4096 seek=$(( moff / 4096 )) \
    conv=notrunc status=none
  rm -f "$V_TMP/sabotage.img"
fi
to_guest "GROWN $told"
wait "$boot" || v_fail "boot 2 failed (above)"
V_PGIDS=()
exec 3<&-
read -r during ndur < <(tr -d '\r' <"$V_TMP/console.2.log" |
                        sed -n 's/^vm: DURING \([0-9a-f]\{64\}\) \([0-9]*\)$/\1 \2/p')
[[ -n $during && $ndur -ge 6 ]] || v_fail "boot 2 printed no DURING line (of at least 6 files)"

# --- the volume on the host ---------------------------------------------------
v_run nbdcopy nbdcopy "$uri" "$V_TMP/volume.img" || v_fail "nbdcopy $uri"
v_stop "$V_SERVER_PID"
if v_run e2fsck e2fsck -fn "$V_TMP/volume.img"; then
  v_ok "the volume copied with nbdcopy passes e2fsck -fn"
else
  v_bad "e2fsck -fn of the copied volume"
fi
geo=$(dumpe2fs -h "$V_TMP/volume.img" 2>/dev/null |
      sed -n 's/^RAID stride: *\([0-9]*\)$/stride=\1/p; s/^RAID stripe width: *\([0-9]*\)$/width=\1/p' |
      tr '\n' ' ')
if [[ $geo == "stride=$stride width=$width " ]]; then
  v_ok "ext4 geometry: $geo"
else
  v_bad "ext4 geometry: '$geo', expected stride=$stride width=$width"
fi
mkdir "$V_TMP/out"
debugfs -R "rdump /data $V_TMP/out" "$V_TMP/volume.img" >/dev/null 2>&1
debugfs -R "dump /MANIFEST $V_TMP/MANIFEST" "$V_TMP/volume.img" >/dev/null 2>&1
if [[ $(sha256sum <"$V_TMP/MANIFEST" | cut -d' ' -f1) != "$manifest" ]]; then
  v_bad "the MANIFEST in the copied volume is not the one boot 1 wrote"
elif (cd "$V_TMP/out/data" && sha256sum --quiet -c "$V_TMP/MANIFEST" >&2); then
  v_ok "host: all $nfiles files in the copied volume match the manifest"
else
  v_bad "host: files in the copied volume differ from the manifest"
fi
blocks=$(dumpe2fs -h "$V_TMP/volume.img" 2>/dev/null | sed -n 's/^Block count: *//p')
if [[ -n $blocks ]] && (( newsize / 4096 - blocks < 1024 )); then
  v_ok "ext4 has $blocks blocks of 4 KiB: the grown volume's $newsize bytes"
else
  v_bad "ext4 has '$blocks' blocks of 4 KiB, the grown volume $newsize bytes"
fi
mkdir "$V_TMP/out2"
debugfs -R "rdump /during $V_TMP/out2" "$V_TMP/volume.img" >/dev/null 2>&1
debugfs -R "dump /DURING $V_TMP/DURING" "$V_TMP/volume.img" >/dev/null 2>&1
if [[ $(sha256sum <"$V_TMP/DURING" | cut -d' ' -f1) != "$during" ]]; then
  v_bad "the DURING list in the copied volume is not the one boot 2 wrote"
elif (cd "$V_TMP/out2/during" && sha256sum --quiet -c "$V_TMP/DURING" >&2); then
  v_ok "host: all $ndur files written during the grow match their checksums"
else
  v_bad "host: files written during the grow differ from their checksums"
fi
v_done
