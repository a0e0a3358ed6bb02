#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What `nbdstripe create` and the served volume leave on the members, read
# straight from the member files and checked against the format the man
# page documents -- without the code under test decoding anything:
#
#   header (4096 bytes at 0, little-endian): magic "NBDSTRIP", version 2,
#   header size 4096, one array UUID on every member, distinct member
#   UUIDs, the volume name NUL-padded, member index i, member count N,
#   chunk, layout 2 (md's alternate multi-zone), flags 0, data offset
#   1 MiB, every member's usable size (then zeros), events 2 at 664 (create's 1, + 1 once served),
#   reserved bytes zero, and a CRC32C of bytes 0..4091 at
#   4092 (computed here by a bit-at-a-time implementation);
#
#   data: N equal members, so logical chunk k is on member k mod N at
#   data_offset + (k div N) * chunk: every byte of every member's data area
#   is compared with what nbdcopy wrote there; the bytes between the header
#   and the data offset, and the tail past the last whole chunk, stay zero;
#
#   metadata = "none": create refuses (there is nothing to create), check
#   passes, and the volume is served with data from offset 0 (chunk k on
#   member k mod N at (k div N) * chunk), as md raid0 / dm-stripe arrays
#   without metadata.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo od cmp

[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

K=1024 M=$((1024 * 1024))
N=4 chunk=$((64 * K)) data_offset=$M
usable=$((2 * M))                       # per member: 32 chunks
msize=$((data_offset + usable + 5000))  # + a tail shorter than a chunk
name=oracle-vol.1
m=()
for ((i = 0; i < N; i++)); do
  m+=("$D_TMP/m$i")
  truncate -s "$msize" "${m[i]}"
done
sock=$D_TMP/vol.sock pidfile=$D_TMP/vol.pid
uri="nbd+unix:///?socket=$sock"
d_conf vol.conf "$name" 64K "socket = \"$sock\"; pidfile = \"$pidfile\";" "${m[@]}"

d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
d_serve serve vol.conf "$pidfile" || d_fail "serve failed"
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
[[ $size -eq $((N * usable)) ]] || d_fail "volume size $size, expected $((N * usable))"
d_random src "$size"
nbdcopy src "$uri" || d_fail "nbdcopy src -> volume"
d_stop "$D_SERVER_PID"

# field NAME ACTUAL EXPECTED
field ()
{
  if [[ $2 == "$3" ]]; then return 0; fi
  d_bad "$mi: $1 is '$2', expected '$3'"
  return 1
}

d_log "headers"
name_hex=$(printf '%s' "$name" | od -An -v -t x1 | tr -d ' \n')
name_hex=$name_hex$(printf '%0*d' $((128 - ${#name_hex})) 0)
array_uuid=
member_uuids=()
for ((i = 0; i < N; i++)); do
  mi="member $i (${m[i]})"
  f=${m[i]}
  field magic "$(head -c 8 "$f")" NBDSTRIP
  field version "$(d_u32 "$f" 8)" 2
  field header_size "$(d_u32 "$f" 12)" 4096
  u=$(d_hex "$f" 16 16)
  field array_uuid_nonzero "$([[ $u =~ ^0+$ ]] && echo zero || echo set)" set
  if [[ -z $array_uuid ]]; then array_uuid=$u; else field array_uuid "$u" "$array_uuid"; fi
  mu=$(d_hex "$f" 32 16)
  for other in "${member_uuids[@]}"; do
    [[ $mu != "$other" ]] || d_bad "$mi: member UUID $mu repeated"
  done
  member_uuids+=("$mu")
  field name "$(d_hex "$f" 48 64)" "$name_hex"
  ctime=$(d_u64 "$f" 112)
  now=$(date +%s)
  (( ctime > now - 3600 && ctime <= now )) || d_bad "$mi: creation time $ctime, now is $now"
  field member_index "$(d_u32 "$f" 120)" "$i"
  field member_count "$(d_u32 "$f" 124)" "$N"
  field chunk "$(d_u64 "$f" 128)" "$chunk"
  field layout "$(d_u32 "$f" 136)" 2
  field flags "$(d_u32 "$f" 140)" 0
  field data_offset "$(d_u64 "$f" 144)" "$data_offset"
  want=$(for ((j = 0; j < 64; j++)); do ((j < N)) && echo "$usable" || echo 0; done)
  field "member_sizes[0..63]" \
    "$(od -An -v --endian=little -t u8 -j 152 -N 512 -- "$f" | tr -s ' ' '\n' | sed '/^$/d')" \
    "$want"
  field events "$(d_u64 "$f" 664)" 2 # 1 from create, + 1 once served
  # 672..4091 zero but the roster at 1236 and the allocation map's
  # fields at 4056..4079 (header.h), checked below.
  cmp -s -n $((1236 - 672)) -i 672:0 "$f" /dev/zero &&
    cmp -s -n $((4056 - 1240)) -i 1240:0 "$f" /dev/zero &&
    cmp -s -n 4 -i 4060:0 "$f" /dev/zero &&
    cmp -s -n 12 -i 4080:0 "$f" /dev/zero ||
    d_bad "$mi: reserved bytes 672..1235, 1240..4055, 4060..4063 or 4080..4091 are not zero"
  field crc32c "$(d_u32 "$f" 4092)" "$("$DAEMON_HELPER" crc32c "$f" 0 4092)"
  d_map_check "$mi" "$f" $((N * usable)) "$usable" "$data_offset"
done
# The roster: the XOR of the CRC32C of every member UUID, the same on
# every member (the update that wrote them was written for all N).
roster=0
for ((i = 0; i < N; i++)); do
  roster=$((roster ^ $("$DAEMON_HELPER" crc32c "${m[i]}" 32 16)))
done
for ((i = 0; i < N; i++)); do
  mi="member $i (${m[i]})"
  field roster "$(d_u32 "${m[i]}" 1236)" "$roster"
done
[[ $D_FAILS -eq 0 ]] && d_ok "$N headers as documented (array UUID $array_uuid)"

# layout NAME N DATA_OFFSET USABLE MSIZE SRC MEMBER...: logical chunk k of
# SRC on member k mod N at DATA_OFFSET + (k div N) * chunk; the tail past
# USABLE stays zero.
layout ()
{
  local name=$1 n=$2 doff=$3 use=$4 msz=$5 src=$6 k mem off bad=0 i tail_off
  shift 6
  local mm=("$@")
  d_log "$name: logical chunk k on member k mod $n at $doff + (k div $n) * chunk"
  for ((k = 0; k < n * use / chunk; k++)); do
    mem=$((k % n))
    off=$((doff + (k / n) * chunk))
    if ! cmp -s -n "$chunk" -i "$((k * chunk)):$off" "$src" "${mm[mem]}"; then
      ((bad++ < 10)) && d_bad "$name: logical chunk $k is not at member $mem offset $off"
    fi
  done
  ((bad == 0)) && d_ok "$name: $((n * use / chunk)) chunks where the layout puts them"
  for ((i = 0; i < n; i++)); do
    tail_off=$((doff + use))
    cmp -s -n $((msz - tail_off)) -i "$tail_off:0" "${mm[i]}" /dev/zero ||
      d_bad "$name: member $i: the tail past the last whole chunk was written"
  done
}
layout header "$N" "$data_offset" "$usable" "$msize" src "${m[@]}"

d_log "metadata = \"none\": no header, data from offset 0"
n2=2 use2=$((2 * M)) msz2=$((2 * M + 5000))
raw=("$D_TMP/r0" "$D_TMP/r1")
for f in "${raw[@]}"; do truncate -s "$msz2" "$f"; done
d_conf raw.conf raw 64K "socket = \"$sock\"; pidfile = \"$pidfile\";" "${raw[@]}"
echo 'metadata = "none";' >>raw.conf
d_run raw.create d_ns create raw.conf
d_expect_fail raw.create
d_expect_err raw.create 'metadata = "none"'
cmp -s "${raw[0]}" /dev/zero -n "$msz2" || d_bad "raw: create wrote to a member"
d_run raw.check d_ns check raw.conf
[[ $D_RC -eq 0 ]] || d_bad "raw: check failed"
d_serve raw.serve raw.conf "$pidfile" || d_fail "raw: serve failed"
size2=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
[[ $size2 -eq $((n2 * use2)) ]] || d_bad "raw: volume size $size2, expected $((n2 * use2))"
d_random src2 "$size2"
nbdcopy src2 "$uri" || d_fail "nbdcopy src2 -> volume"
d_stop "$D_SERVER_PID"
layout raw "$n2" 0 "$use2" "$msz2" src2 "${raw[@]}"
d_done
