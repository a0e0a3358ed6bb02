#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe replace --offline: the same copy and end state as a replace
# through the server, with the volume stopped.
#
#   1. While the volume is served, --offline is refused (exit non-zero,
#      a message saying it may be served): nothing written to any member
#      or NEW, the config unchanged, the volume still serving its data.
#   2. The volume stopped: replace --offline --wait of member 1 onto NEW
#      ends 0; the config names NEW in m1's place; NEW's header has the
#      volume's array UUID, index 1 of 3, a member UUID of its own, flags
#      0 and the generation of the other members; m1's header is marked
#      replaced (flags 0x1) and a config naming m1 is refused by check
#      ("was replaced"); NEW's data area, read straight from its file,
#      holds member 1's share of the volume's data (race.py fill writes
#      the data into scratch members: the layout, independent of the code
#      under test), the other members unchanged; served again, the volume
#      reads back its data.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((8 * M))
RP_DO=$M
for f in m0 m1 m2 new exp0 exp1 exp2; do truncate -s "$size" "$D_TMP/$f"; done
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
vsize=$((3 * (size - M)))
d_random "$D_TMP/ref" "$vsize"
"$RP_PY" "$HERE/race.py" fill "$D_TMP/ref" "3,65536,$M" \
  "$D_TMP/exp0" "$D_TMP/exp1" "$D_TMP/exp2" || d_fail "race.py fill"
uuid=$(rp_header_field "$D_TMP/m1" "array UUID")
old_member=$(rp_header_field "$D_TMP/m1" "member")
[[ -n $uuid && $old_member == "1 of 3 "* ]] || d_fail "m1's header: '$uuid' '$old_member'"

rp_start vol
rp_write_pattern "$D_TMP/ref"
rp_same start "$D_TMP/ref" || d_fail "the volume does not hold its data"

d_log "--offline while the volume is served: refused"
files=("$D_TMP"/m0 "$D_TMP"/m1 "$D_TMP"/m2 "$D_TMP"/new "$RP_CONF")
before=$(d_sums "${files[@]}")
d_run served d_ns replace --offline --wait "$RP_CONF" 1 "$D_TMP/new"
[[ $D_RC -ne 0 ]] || d_bad "served: replace --offline of a served volume exited 0"
d_expect_err served "served already?"
d_same_sums served "$before" "${files[@]}" ||
  d_bad "served: the refused --offline wrote to a member, NEW or the config"
[[ $(jq -r '.state // "none"' <<<"$(rp_ctl status)") == none ]] ||
  d_bad "served: the server has a replace: $(rp_ctl status)"
rp_same served "$D_TMP/ref" || d_bad "served: the volume no longer serves its data"
rp_stop

d_log "--offline with the volume stopped"
gen=$(rp_header_field "$D_TMP/m0" "generation")
d_run offline d_ns replace --offline --wait "$RP_CONF" 1 "$D_TMP/new"
[[ $D_RC -eq 0 ]] || d_fail "replace --offline failed"
grep -q -F "member 1 replaced by $D_TMP/new" "$D_TMP/offline.out" ||
  d_bad "offline: no 'member 1 replaced by' line"
grep -q -F "100%" "$D_TMP/offline.out" || d_bad "offline: --wait printed no 100% line"

grep -q -F "\"$D_TMP/new\"" "$RP_CONF" && ! grep -q -F "\"$D_TMP/m1\"" "$RP_CONF" ||
  d_bad "the config does not name NEW in place of m1"
[[ $(rp_header_field "$D_TMP/new" "array UUID") == "$uuid" ]] ||
  d_bad "new: array UUID '$(rp_header_field "$D_TMP/new" "array UUID")', expected $uuid"
new_member=$(rp_header_field "$D_TMP/new" "member")
[[ $new_member == "1 of 3 "* ]] || d_bad "new: member '$new_member', expected 1 of 3"
[[ ${new_member#* (UUID } != "${old_member#* (UUID }" ]] ||
  d_bad "new: the same member UUID as the old member"
[[ $(rp_header_field "$D_TMP/new" "format") == "version 2, flags 0" ]] ||
  d_bad "new: format '$(rp_header_field "$D_TMP/new" "format")'"
[[ $(rp_header_field "$D_TMP/new" "generation") == "$(rp_header_field "$D_TMP/m0" "generation")" ]] ||
  d_bad "new: generation '$(rp_header_field "$D_TMP/new" "generation")', m0's '$(rp_header_field "$D_TMP/m0" "generation")'"
[[ $(rp_header_field "$D_TMP/m1" "format") == "version 2, flags 0x1"* ]] ||
  d_bad "old: format '$(rp_header_field "$D_TMP/m1" "format")', expected flags 0x1"
d_ok "headers: new $new_member, generation $gen -> $(rp_header_field "$D_TMP/new" "generation"); old $(rp_header_field "$D_TMP/m1" "format")"

for i in 0 2; do
  rp_member_cmp "member $i" "$D_TMP/exp$i" "$D_TMP/m$i" "$M" $((size - M)) ||
    d_bad "member $i's data changed"
done
rp_member_cmp "NEW's data area" "$D_TMP/exp1" "$D_TMP/new" "$M" $((size - M)) ||
  d_bad "NEW does not hold member 1's data"
for l in $RP_CHUNK $((RP_CHUNK * 4 + 777)) $((vsize - 2 * RP_CHUNK - 1)); do
  read -r im mo <<<"$(rp_member "$l")"
  [[ $im -eq 1 ]] || continue
  [[ $(d_hex "$D_TMP/new" "$mo" 1) == $(d_hex "$D_TMP/ref" "$l" 1) ]] ||
    d_bad "logical byte $l is not at NEW's offset $mo"
done

d_log "a config naming the old member is refused"
sed "s|\"$D_TMP/new\"|\"$D_TMP/m1\"|" "$RP_CONF" >"$D_TMP/old.conf"
d_run check_old d_ns check "$D_TMP/old.conf"
d_expect_fail check_old && d_expect_err check_old "was replaced"

d_log "served again from the config: NEW"
d_run check d_ns check "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "check of the rewritten config failed"
rp_start vol2
rp_same restart "$D_TMP/ref" || d_bad "after the restart the volume lost data"
rp_stop
d_done
