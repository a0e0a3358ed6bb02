#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A replace on a volume with md metadata (metadata = "md": md v1.2
# superblocks at 4096, #11), online, a client writing meanwhile
# (tests/replace/writer.py).  The superblocks are read with
# tests/lib/md_sb.py, which shares no code with nbdstripe:
#
#   - NEW gets an md v1.2 superblock at 4096 (md_sb.py check: magic,
#     version, super_offset, checksum) with the array's set_uuid, set
#     name, level, chunk, raid_disks, data offset and size, the same
#     dev_number and role as the old member, and a device_uuid of its own;
#     no nbdstripe header at 0;
#   - the old member no longer assembles: its role in its own superblock
#     is faulty (0xfffe), and a config naming it is refused by check;
#   - the config names NEW; NEW's data area, read straight from its file,
#     holds member 1's share of the volume's data (race.py fill writes
#     the reference into scratch members: the layout); the volume reads
#     back the reference, online and served again (only NEW, m1 deleted).
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd nbdinfo
# writes_now: the write requests the members have had, all told.
writes_now () { rp_ctl until True 5 | jq '[.members[].ops.write.requests] | add'; }
sb () { "$RP_PY" "$RP_LIB/md_sb.py" "$@"; }
sb selftest >/dev/null || d_fail "md_sb.py selftest"

size=$((16 * M))
for f in m0 m1 m2 new; do truncate -s "$size" "$D_TMP/$f"; done
rp_volume vol 64K 'metadata = "md";' "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
sb "$D_TMP/m1" check || d_fail "m1 holds no valid md superblock"
RP_DO=$(($(sb "$D_TMP/m1" get data_offset) * 512))
fields=(set_uuid set_name level layout size chunksize raid_disks data_offset
        data_size dev_number role device_uuid events dev_roles)
mapfile -t old < <(sb "$D_TMP/m1" get "${fields[@]}")
d_log "m1's superblock: data offset $RP_DO, role ${old[10]}, device ${old[11]}"

rp_start vol
vsize=$(d_nbd_size "$RP_URI") || d_fail "nbdinfo --size"
dsize=$((vsize / 3))
d_random "$D_TMP/ref" "$vsize"
rp_write_pattern "$D_TMP/ref"
rp_same start "$D_TMP/ref" || d_fail "the volume does not hold its data"

d_log "replace member 1 by NEW, a client writing"
base=$(writes_now)
"$RP_PY" "$HERE/writer.py" "$RP_URI" "$RP_CTL" "$D_TMP/ref" \
  >"$D_TMP/writer.json" 2>"$D_TMP/writer.err" &
wpid=$!
rp_ctl until "sum(m['ops']['write']['requests'] for m in s['members']) >= $((base + 8))" 30 \
  >/dev/null || d_fail "the writer did not start writing"
d_run replace d_ns replace --rate 8M "$RP_CONF" 1 "$D_TMP/new"
[[ $D_RC -eq 0 ]] || d_fail "replace did not start"
rp_wait done --state done --deadline 60 || d_bad "the replace did not end done"
wrc=0
wait "$wpid" || wrc=$?
cat "$D_TMP/writer.json" "$D_TMP/writer.err"
if [[ $wrc -ne 0 ]]; then
  sed 's/^/   | /' "$D_TMP/vol.log" >&2
  d_fail "writer.py failed (exit $wrc)"
fi
[[ $(jq .writes_copying "$D_TMP/writer.json") -ge 8 ]] ||
  d_bad "too few writes during the copy"
[[ $(rp_json done .config_updated) == true ]] || d_bad "config_updated is not true"
rp_same online "$D_TMP/ref" || d_bad "the volume lost data"

d_log "NEW's md superblock"
if sb "$D_TMP/new" check; then
  d_ok "NEW holds a valid md 1.2 superblock at 4096"
else
  d_bad "NEW holds no valid md superblock at 4096"
fi
mapfile -t new < <(sb "$D_TMP/new" get "${fields[@]}")
for k in 0 1 2 3 4 5 6 7 8 9 10; do
  [[ ${new[k]} == "${old[k]}" ]] ||
    d_bad "NEW: ${fields[k]} '${new[k]}', the old member's '${old[k]}'"
done
[[ ${new[9]} -eq 1 && ${new[10]} -eq 1 ]] ||
  d_bad "NEW: dev_number ${new[9]}, role ${new[10]}, expected 1 and 1"
[[ -n ${new[11]} && ${new[11]} != "${old[11]}" ]] ||
  d_bad "NEW: device_uuid '${new[11]}', the old member's is '${old[11]}'"
d_ok "NEW: array ${new[0]}, role ${new[10]}, device ${new[11]} (old ${old[11]}), events ${new[12]}"
rp_no_header new "$D_TMP/new"
rp_stop

d_log "the old member no longer assembles"
old_role=$(sb "$D_TMP/m1" get role)
[[ $old_role == $((0xfffe)) ]] ||
  d_bad "m1: role $old_role in its superblock, expected faulty (65534)"
sed "s|\"$D_TMP/new\"|\"$D_TMP/m1\"|" "$RP_CONF" >"$D_TMP/old.conf"
d_run check_old d_ns check "$D_TMP/old.conf"
d_expect_fail check_old

d_log "NEW's data, the config, served again with only NEW"
for k in 0 1 2; do rm -f "$D_TMP/exp$k"; truncate -s "$size" "$D_TMP/exp$k"; done
"$RP_PY" "$HERE/race.py" fill "$D_TMP/ref" "3,65536,$RP_DO" \
  "$D_TMP/exp0" "$D_TMP/exp1" "$D_TMP/exp2" || d_fail "race.py fill"
rp_member_cmp "NEW's data area" "$D_TMP/exp1" "$D_TMP/new" "$RP_DO" "$dsize" ||
  d_bad "NEW does not hold member 1's data"
grep -q -F "\"$D_TMP/new\"" "$RP_CONF" && ! grep -q -F "\"$D_TMP/m1\"" "$RP_CONF" ||
  d_bad "the config does not name NEW in place of m1"
rm -f "$D_TMP/m1"
d_run check d_ns check "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "check of the rewritten config failed"
rp_start vol2
rp_same restart "$D_TMP/ref" || d_bad "after the restart the volume lost data"
rp_stop
d_done
