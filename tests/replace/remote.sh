#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Replace onto and from a remote member (an NBD export of a stock
# `nbdkit file` on a Unix socket), a client writing all the while
# (tests/replace/writer.py: random blocks from one connection, each also
# written into a reference file, until the replace is done and a few
# more after the switch).
#
# A 3-member volume: m0 a local file, m1 remote (m1.back behind nbdkit),
# m2 a local file.
#   1. member 1 (remote) -> a local file new1;
#   2. member 0 (local)  -> a remote member (new0.back behind nbdkit).
# After each: the volume reads back as the reference; NEW's data area,
# read straight from its file, holds the member's share of the reference
# (race.py fill writes the reference into scratch members: the layout,
# independent of the code under test; spot checks with rp_member); NEW's
# header (array UUID, index, its own member UUID), old's header marked
# replaced (flags 0x1), the config names NEW in old's place.  Then the
# server is stopped, m1's nbdkit stopped, m0 and m1.back deleted: the
# volume served again from the config reads back as the reference.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd
# writes_now: the write requests the members have had, all told.
writes_now () { rp_ctl until True 5 | jq '[.members[].ops.write.requests] | add'; }

size=$((16 * M))
RP_DO=$M
for f in m0 m1.back m2 new1 new0.back; do truncate -s "$size" "$D_TMP/$f"; done
r_unix m1 file "$D_TMP/m1.back"
m1_uri=$R_URI
m1_pid=$R_PID
r_unix new0 file "$D_TMP/new0.back"
new0_uri=$R_URI
rp_volume vol 64K "" "$D_TMP/m0" "$m1_uri" "$D_TMP/m2"
rp_create
uuid=$(rp_header_field "$D_TMP/m0" "array UUID")
[[ -n $uuid ]] || d_fail "m0 holds no header"

vsize=$((3 * (size - M)))
d_random "$D_TMP/ref" "$vsize"
rp_start vol
rp_write_pattern "$D_TMP/ref"
rp_same start "$D_TMP/ref" || d_fail "the volume does not hold its data"

# replace_with_writer LABEL INDEX NEW OLD_FILE NEW_FILE: replace member
# INDEX by NEW (OLD_FILE, NEW_FILE: the backing files, read directly)
# with writer.py writing across the copy, the switch and after it, then
# check everything.
replace_with_writer ()
{
  local label=$1 i=$2 new=$3 old_file=$4 new_file=$5 wrc=0 old_member base
  local new_member k l im

  d_log "$label: replace member $i by $new, a client writing"
  old_member=$(rp_header_field "$old_file" "member")
  base=$(writes_now)
  "$RP_PY" "$HERE/writer.py" "$RP_URI" "$RP_CTL" "$D_TMP/ref" \
    >"$D_TMP/$label.writer.json" 2>"$D_TMP/$label.writer.err" &
  local wpid=$!
  # The writer has written before the replace starts.
  rp_ctl until "sum(m['ops']['write']['requests'] for m in s['members']) >= $((base + 8))" 30 \
    >/dev/null || d_fail "$label: the writer did not start writing"
  d_run "$label.replace" d_ns replace --rate 6M "$RP_CONF" "$i" "$new"
  [[ $D_RC -eq 0 ]] || d_fail "$label: replace did not start"
  rp_wait "$label.done" --state done --deadline 60 ||
    d_bad "$label: the replace did not end done"
  wait "$wpid" || wrc=$?
  cat "$D_TMP/$label.writer.json" "$D_TMP/$label.writer.err"
  if [[ $wrc -ne 0 ]]; then
    sed 's/^/   | /' "$D_TMP/vol.log" >&2
    d_fail "$label: writer.py failed (exit $wrc)"
  fi
  [[ $(jq .writes_copying "$D_TMP/$label.writer.json") -ge 8 ]] ||
    d_bad "$label: too few writes during the copy"
  [[ $(jq .writes_after "$D_TMP/$label.writer.json") -ge 8 ]] ||
    d_bad "$label: too few writes after the switch"
  d_ok "$label: writer: $(cat "$D_TMP/$label.writer.json")"
  [[ $(rp_json "$label.done" .bytes_copied) == $((size - M)) ]] ||
    d_bad "$label: bytes_copied $(rp_json "$label.done" .bytes_copied), expected $((size - M))"
  [[ $(rp_json "$label.done" .config_updated) == true ]] ||
    d_bad "$label: config_updated is not true"

  rp_same "$label" "$D_TMP/ref" || d_bad "$label: the volume lost data"

  # NEW's data area: member i's share of the reference.
  for k in 0 1 2; do rm -f "$D_TMP/exp$k"; truncate -s "$size" "$D_TMP/exp$k"; done
  "$RP_PY" "$HERE/race.py" fill "$D_TMP/ref" "3,65536,$M" \
    "$D_TMP/exp0" "$D_TMP/exp1" "$D_TMP/exp2" || d_fail "race.py fill"
  rp_member_cmp "$label: NEW's data area" "$D_TMP/exp$i" "$new_file" \
    "$M" $((size - M)) || d_bad "$label: NEW does not hold member $i's data"
  # Spot checks by the shell's own layout arithmetic: the first and last
  # logical bytes of each of member i's chunks at a few offsets.
  for l in 0 $((RP_CHUNK * i)) $((RP_CHUNK * (3 + i) + 4095)) $((vsize - 1)); do
    read -r im mo <<<"$(rp_member "$l")"
    [[ $im -eq $i ]] || continue
    [[ $(d_hex "$new_file" "$mo" 1) == $(d_hex "$D_TMP/ref" "$l" 1) ]] ||
      d_bad "$label: logical byte $l is not at NEW's offset $mo"
  done

  grep -q -F "\"$new\"" "$RP_CONF" ||
    d_bad "$label: the config does not name $new"
  [[ $(rp_header_field "$new_file" "array UUID") == "$uuid" ]] ||
    d_bad "$label: NEW's array UUID is not the volume's"
  new_member=$(rp_header_field "$new_file" "member")
  [[ $new_member == "$i of 3 "* ]] || d_bad "$label: NEW: member '$new_member'"
  [[ ${new_member#* (UUID } != "${old_member#* (UUID }" ]] ||
    d_bad "$label: NEW has old's member UUID"
  [[ $(rp_header_field "$old_file" "format") == "version 2, flags 0x1"* ]] ||
    d_bad "$label: old: format '$(rp_header_field "$old_file" "format")', expected flags 0x1"
  d_ok "$label: NEW $new_member; old $(rp_header_field "$old_file" "format")"
}

replace_with_writer from_remote 1 "$D_TMP/new1" "$D_TMP/m1.back" "$D_TMP/new1"
grep -q -F "$m1_uri" "$RP_CONF" && d_bad "the config still names $m1_uri"
replace_with_writer onto_remote 0 "$new0_uri" "$D_TMP/m0" "$D_TMP/new0.back"
grep -q -F "\"$D_TMP/m0\"" "$RP_CONF" && d_bad "the config still names m0"
rp_stop

d_log "restart: served from the new members only"
d_stop "$m1_pid"
rm -f "$D_TMP/m0" "$D_TMP/m1.back"
d_run check d_ns check "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "check of the rewritten config failed"
rp_start vol2
rp_same restart "$D_TMP/ref" || d_bad "after the restart the volume lost data"
rp_stop
d_done
