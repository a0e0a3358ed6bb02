#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A sparse volume stays sparse through a replace, a grow and a shrink,
# and every byte stays where it was (the allocation map, include/alloc.h:
# a move copies only the regions in use and makes its destination read
# zeros elsewhere, holes punched in a file).
#
#   - 4 members on sparse files (40 MiB of data each), chunk 64K (the
#     map's regions are 64K too): the whole volume trimmed through NBD,
#     then random bytes written to about 10% of it, 64K at scattered
#     64K-aligned offsets (tests/replace/sparse.py keeps the model);
#   - member 1 replaced by a new sparse file (--rate: it copies slowly,
#     the free regions skipped at once) while two connections write and
#     trim (whole regions, and ranges that cut regions) across the volume,
#     below and above the copy's watermark on member 1;
#   - a grow 4 -> 5 (a new sparse file), then a shrink 5 -> 4 (member 2
#     out), each with the same client racing it;
#   - the server killed (-9) and the volume served again.
#
# After each: every byte read through NBD is the model's (zeros where
# never written or trimmed); every member file, read directly, holds the
# model where the layout (tests/lib/replace.sh's header) puts it; and
# every member's allocated bytes (st_blocks) are at most 1.2 x the bytes
# of its chunks holding data + 1 MiB (the metadata area) -- a bound a
# member written in full (40 MiB: a copy of every byte, as moves did
# before the map) would exceed, which sparse.py checks as well.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

data=$((40 * M))
size=$((M + data))
for f in m0 m1 m2 m3 m4 new; do truncate -s "$size" "$D_TMP/$f"; done
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2" "$D_TMP/m3"
rp_create
RP_DO=$(rp_header_field "$D_TMP/m0" "data offset" | cut -d' ' -f1)
[[ $RP_DO == "$M" ]] || d_fail "data offset '$RP_DO', expected 1 MiB"
rp_header_field "$D_TMP/m0" "allocation map" | grep -q "regions of 65536 bytes" ||
  d_fail "no allocation map of 64K regions: $(rp_header_field "$D_TMP/m0" "allocation map")"
model=$D_TMP/model

# members: the config's members, in role order, one a line.
members ()
{
  tr '\n' ' ' <"$RP_CONF" |
    grep -oE '(^|;)[[:space:]]*members[[:space:]]*=[[:space:]]*\[[^]]*\]' |
    head -1 | sed 's/.*\[//; s/\]//' | tr ',' '\n' | tr -d ' "' |
    grep -v '^$'
}

# check LABEL: the volume, the member files, their allocation.
check ()
{
  local label=$1 files=() rc=0 out=$D_TMP/$1.json fails=$D_FAILS
  mapfile -t files < <(members)
  "$RP_PY" "$HERE/sparse.py" check "$RP_URI" "$model" \
    "${#files[@]},$RP_CHUNK,$RP_DO" "${files[@]}" >"$out" || rc=$?
  # [file, bytes of data, allocated, bound] a member
  jq -c '.members[] |= [.file, .data, .allocated, .bound]' "$out"
  if jq -e '.bad_blocks == 0 and all(.members[]; .bad_blocks == 0)' \
       "$out" >/dev/null 2>&1; then
    d_ok "$label: every byte where the model says, through NBD and in the ${#files[@]} member files"
  else
    d_bad "$label: lost, stale or misplaced bytes (above)"
  fi
  if jq -e 'all(.members[]; .sparse)' "$out" >/dev/null 2>&1; then
    d_ok "$label: every member sparse: allocated <= 1.2 x its data + 1 MiB"
  else
    d_bad "$label: members not sparse: $(jq -r '[.members[] | select(.sparse | not) | .file] | join(" ")' "$out" 2>/dev/null) (above)"
  fi
  [[ $rc -eq 0 || $D_FAILS -ne $fails ]] ||
    d_bad "$label: sparse.py check failed (above)"
}

# race LABEL KEY [INDEX]: sparse.py race, while the job under KEY runs.
race ()
{
  local label=$1 rc=0
  shift
  "$RP_PY" "$HERE/sparse.py" race "$RP_URI" "$RP_CTL" "$model" "$@" \
    >"$D_TMP/$label.race.json" || rc=$?
  cat "$D_TMP/$label.race.json"
  [[ $rc -eq 0 ]] || d_bad "$label: the racing client failed (above)"
}

rp_start vol
"$RP_PY" "$HERE/sparse.py" fill "$RP_URI" "$model" ||
  d_fail "sparse.py fill"
check filled

d_log "replace member 1 onto a sparse file, two connections racing it"
d_run replace d_ns replace --rate 1M "$RP_CONF" 1 "$D_TMP/new"
[[ $D_RC -eq 0 ]] || d_fail "replace did not start"
race replace replace 1 "4,$RP_CHUNK,$RP_DO"
# It raced: requests into member 1's chunks both where the copy had been
# and where it had yet to go.
jq -e '.requests_while_moving >= 100 and .member_chunks_below_watermark > 0
       and .member_chunks_above_watermark > 0' "$D_TMP/replace.race.json" \
  >/dev/null && d_ok "replace: requests raced the copy on both sides of it" ||
  d_bad "replace: the client did not race the copy on both sides"
rp_wait replaced --state done --deadline 30 || d_bad "the replace did not end done"
[[ $(members | sed -n 2p) == "$D_TMP/new" ]] ||
  d_fail "the config does not name NEW as member 1"
check replaced

d_log "grow 4 -> 5 onto a sparse file, racing it"
d_run grow d_ns grow "$RP_CONF" "$D_TMP/m4"
[[ $D_RC -eq 0 ]] || d_fail "grow did not start"
race grow reshape
[[ $(members | wc -l) -eq 5 ]] || d_fail "the config does not name 5 members"
check grown

d_log "shrink 5 -> 4 (member 2 out), racing it"
d_run shrink d_ns shrink "$RP_CONF" 2 --size $((4 * data))
[[ $D_RC -eq 0 ]] || d_fail "shrink did not start"
race shrink reshape
[[ $(members | wc -l) -eq 4 ]] || d_fail "the config does not name 4 members"
! members | grep -qxF "$D_TMP/m2" || d_fail "the config still names m2"
check shrunk

d_log "kill -9, served again"
rp_kill9
rp_start vol-again
check again
rp_stop
d_done
