#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# qemu's NBD client against `nbdstripe serve` (Unix socket): qemu-img
# convert images into the volume and qemu-img compare them back.
#
# The volume: 4 members of mixed sizes with headers, chunk 12K (not a
# power of two: requests straddle chunks at odd places).
#   1. a raw image of random bytes filling the whole volume -> convert
#      (out-of-order writes, 8 coroutines) -> compare
#   2. over it, a qcow2 image with data extents, holes and unaligned
#      runs -> convert -n: qemu must zero the holes on the volume (NBD
#      write-zeroes) -> compare with the qcow2 and with its raw source
#   3. the volume -> qcow2 -> compare with the raw source
#   4. negative control: one byte flipped on a member under image data
#      -> compare must report the difference
#
# Installs qemu-utils when qemu-img is missing; skipped (77) if it cannot.
#
# To see it fail: QEMU_IMG_SABOTAGE=corrupt flips a byte on a member
# before the first comparison.

here=$(dirname "$(realpath "$0")")
source "$here/../lib/vm.sh"
v_init nbdinfo
command -v qemu-img >/dev/null || v_apt_install qemu-utils ||
  v_log "could not install qemu-utils"
command -v qemu-img >/dev/null || v_skip "qemu-img is not installed (qemu-utils)"
SABOTAGE=${QEMU_IMG_SABOTAGE:-none}

M=1048576
K=1024
sizes=($(( 24 * M )) $(( 20 * M + 5000 )) $(( 16 * M )) $(( 16 * M + 12 * K )))
members=()
for i in 0 1 2 3; do
  truncate -s "${sizes[i]}" "$V_TMP/member$i" || v_fail "truncate"
  members+=("$V_TMP/member$i")
done
sock=$V_TMP/nbd.sock
pidfile=$V_TMP/nbdkit.pid
v_conf "$V_TMP/vol.conf" imgtest 12K \
  "socket = \"$sock\"; pidfile = \"$pidfile\";" "${members[@]}"
v_run create "$NBDSTRIPE" create "$V_TMP/vol.conf" || v_fail "nbdstripe create"
v_serve "$V_TMP/vol.conf" "$pidfile" || v_fail "nbdstripe serve"
uri="nbd+unix:///?socket=$sock"
size=$(nbdinfo --size "$uri") || v_fail "nbdinfo --size $uri"
v_log "volume: $size bytes"

# compare EXPECT(0|1) NAME ARGS...: qemu-img compare's status must be
# EXPECT (0 identical, 1 different; anything else is an error).
compare ()
{
  local expect=$1 name=$2 rc=0
  shift 2
  qemu-img compare "$@" >"$V_TMP/compare.log" 2>&1 || rc=$?
  sed 's/^/   | /' "$V_TMP/compare.log"
  if [[ $rc -eq $expect ]]; then
    v_ok "$name: qemu-img compare exit $rc"
  else
    v_bad "$name: qemu-img compare $* -> exit $rc, expected $expect"
  fi
}

# flip_byte VOLUME_OFFSET: invert one byte where the volume offset lies
# on its member (zone 0: chunk k on member k mod 4 at (k div 4) x chunk,
# past the 1 MiB data offset).
flip_byte ()
{
  local off=$1 chunk=12288 k m moff b
  k=$(( off / chunk )); m=$(( k % 4 ))
  moff=$(( M + (k / 4) * chunk + off % chunk ))
  (( off < 4 * (16 * M - M) )) || v_fail "flip_byte: $off is not in zone 0"
  b=$(od -An -t u1 -j "$moff" -N 1 "${members[m]}" | tr -d ' ')
  printf "\\$(printf %o $(( 255 - b )))" |
    dd of="${members[m]}" bs=1 seek="$moff" conv=notrunc status=none
  v_log "flipped the byte at volume offset $off (member$m offset $moff)"
}

# 1. Random bytes over the whole volume.
head -c "$size" /dev/urandom >"$V_TMP/random.raw"
v_run convert1 qemu-img convert -W -m 8 -n -f raw "$V_TMP/random.raw" \
  -O raw "$uri" || v_fail "qemu-img convert random.raw -> volume"
[[ $SABOTAGE != corrupt ]] || flip_byte $(( 5 * M + 777 ))
compare 0 "random.raw = volume" -f raw -F raw "$V_TMP/random.raw" "$uri"

# 2. A sparse image: random extents of odd sizes at odd offsets, holes
# between them (which must become zeroes on the volume), as qcow2.
truncate -s "$size" "$V_TMP/src.raw"
off=0 i=0
while (( off < size )); do
  len=$(( (i * 7919 + 4099) % (3 * M) + 1 ))
  (( off + len <= size )) || len=$(( size - off ))
  head -c "$len" /dev/urandom |
    dd of="$V_TMP/src.raw" bs=64K seek="$off" oflag=seek_bytes conv=notrunc \
       iflag=fullblock status=none
  off=$(( off + len + (i * 104729) % (2 * M) + 512 * (i % 3) ))
  i=$(( i + 1 ))
done
v_run qcow2 qemu-img convert -f raw -O qcow2 "$V_TMP/src.raw" "$V_TMP/src.qcow2" ||
  v_fail "qemu-img convert src.raw -> src.qcow2"
v_run map qemu-img map -f qcow2 "$V_TMP/src.qcow2"
v_run convert2 qemu-img convert -W -m 8 -n -f qcow2 "$V_TMP/src.qcow2" \
  -O raw "$uri" || v_fail "qemu-img convert src.qcow2 -> volume"
compare 0 "src.qcow2 = volume" -f qcow2 -F raw "$V_TMP/src.qcow2" "$uri"
compare 0 "src.raw = volume" -f raw -F raw "$V_TMP/src.raw" "$uri"
compare 1 "random.raw != volume (the holes were zeroed)" -f raw -F raw \
  "$V_TMP/random.raw" "$uri"

# 3. Back out of the volume.
v_run convert3 qemu-img convert -f raw "$uri" -O qcow2 "$V_TMP/back.qcow2" ||
  v_fail "qemu-img convert volume -> back.qcow2"
compare 0 "back.qcow2 = src.raw" -f qcow2 -F raw "$V_TMP/back.qcow2" "$V_TMP/src.raw"

# 4. Negative control: the comparison reads what is on the members.
first=$(qemu-img map --output=json -f qcow2 "$V_TMP/src.qcow2" |
        grep '"data": true' | head -n 1 | grep -o '"start": [0-9]*' | grep -o '[0-9]*$')
[[ -n $first ]] || v_fail "no data extent in src.qcow2"
flip_byte $(( first + 12288 * 2 + 100 ))
compare 1 "a flipped member byte is seen" -f qcow2 -F raw "$V_TMP/src.qcow2" "$uri"

v_stop "$V_SERVER_PID"
v_done
