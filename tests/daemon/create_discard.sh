#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe create --discard` trims each member's data area first, as mkfs
# does -- and only the data area.  Members are files full of random data
# (every block allocated); afterwards:
#
#   - each member's allocated blocks (stat %b) drop to about the header
#     area (the data offset, 1 MiB), and its data area reads as zeros;
#   - the bytes between the header and the data offset are untouched
#     but for the allocation map;
#   - the headers are valid: check passes, inspect shows each index.
#
# A control run without --discard on the same kind of members keeps them
# fully allocated and their data in place, so the drop is --discard's.
# Without a terminal there is no progress bar: stderr stays empty.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init sha256sum cmp stat

M=$((1024 * 1024))
msize=$((5 * M)) data_offset=$M
N=3

# members PREFIX: N files of random data, fully allocated.
members ()
{
  local i
  for ((i = 0; i < N; i++)); do
    d_random "$D_TMP/$1$i" "$msize"
  done
}
alloc () { echo $(( $(stat -c '%b * %B' "$1") )); }

members c
members d
[[ $(alloc "$D_TMP/d0") -ge $msize ]] ||
  d_skip "the file system of $D_TMP does not allocate written blocks (sparse already?)"
d_conf control.conf control 64K "" "$D_TMP"/c{0,1,2}
d_conf discard.conf discard 64K "" "$D_TMP"/d{0,1,2}
for ((i = 0; i < N; i++)); do
  head -c "$data_offset" "$D_TMP/d$i" | tail -c +4097 >"$D_TMP/gap$i"
  tail -c +$((data_offset + 1)) "$D_TMP/c$i" >"$D_TMP/cdata$i"
done

d_log "control: create without --discard"
d_run control d_ns create control.conf
[[ $D_RC -eq 0 ]] || d_fail "create control.conf failed"
for ((i = 0; i < N; i++)); do
  a=$(alloc "$D_TMP/c$i")
  [[ $a -ge $msize ]] || d_bad "control member $i: $a bytes allocated after a create without --discard"
  cmp -s -i "$data_offset:0" "$D_TMP/c$i" "$D_TMP/cdata$i" ||
    d_bad "control member $i: data area changed by a create without --discard"
done

d_log "create --discard"
d_run discard d_ns create --discard discard.conf
[[ $D_RC -eq 0 ]] || d_fail "create --discard failed"
[[ ! -s $D_TMP/discard.err ]] || d_bad "create --discard wrote to stderr without a terminal"
for ((i = 0; i < N; i++)); do
  f=$D_TMP/d$i
  a=$(alloc "$f")
  # The header area (1 MiB of random data here) stays; a little slack for
  # file system metadata blocks.
  if [[ $a -le $((data_offset + 64 * 1024)) ]]; then
    d_ok "member $i: $a bytes allocated (was $msize)"
  else
    d_bad "member $i: $a bytes allocated after --discard, expected at most about $data_offset"
  fi
  cmp -s -n $((msize - data_offset)) -i "$data_offset:0" "$f" /dev/zero ||
    d_bad "member $i: the data area does not read as zeros"
  # But for the allocation map, at 8 KiB (the header says how long).
  map=$(d_u64 "$f" 4072)
  cmp -s -n 4096 -i 4096:0 "$f" "$D_TMP/gap$i" &&
    cmp -s -n $((data_offset - 8192 - map)) -i $((8192 + map)):$((4096 + map)) \
      "$f" "$D_TMP/gap$i" ||
    d_bad "member $i: bytes between the header and the data offset changed"
  d_run "inspect.d$i" d_ns inspect --json "$f"
  grep -q "\"member_index\": $i," "$D_TMP/inspect.d$i.out" ||
    d_bad "member $i: inspect does not show member_index $i"
done
d_run check d_ns check discard.conf
[[ $D_RC -eq 0 ]] && d_ok "the volume checks" || d_bad "check failed after create --discard"
d_done
