#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A volume that is assembled wrongly is refused, and nothing is written.
#
# A 4-member volume of mixed sizes (chunk 64K) is created, served, filled
# with random data through nbdcopy, and stopped.  Then, one fault at a time:
#
#   swapped      members 1 and 2 swapped in the config
#   missing      member 2 left out of the config (3 listed)
#   twice        member 1 listed again (through a symlink) instead of 2:
#                named as the same file
#   chunk, name  the config's chunk or name differs from the headers'
#   offset       the config gives a data_offset the headers do not have
#   deleted      member 2's file deleted
#   foreign      member 2 replaced in the config by a member of a second
#                volume created separately -- with the same name, and with
#                another name
#   corrupt      one byte of member 2's header flipped (offset 200)
#   truncated    member 2 truncated to half its size
#   blank        member 2 replaced by a blank file of the same size
#
# `nbdstripe check`, `nbdstripe serve` and plain `nbdkit PLUGIN config=`
# must each refuse (exit status 1, no server left running) with a message
# that names the member and what is wrong (for the swap: the right order),
# and every file involved is byte-identical before and after (sha256).
# After each fault is undone the members are exactly as before; finally
# the right config serves again and the data reads back intact.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo sha256sum cmp

K=1024 M=$((1024 * 1024))
sizes=($((4 * M)) $((5 * M + 5000)) $((6 * M + 10000)) $((3 * M + 12345)))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2" "$D_TMP/m3")
for i in 0 1 2 3; do truncate -s "${sizes[i]}" "${m[i]}"; done
sock=$D_TMP/vol.sock
pidfile=$D_TMP/vol.pid
uri="nbd+unix:///?socket=$sock"
serve="socket = \"$sock\"; pidfile = \"$pidfile\";"
d_conf good.conf vol0 64K "$serve" "${m[@]}"

d_log "create and fill the volume"
d_run create d_ns create good.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
d_run check.good d_ns check good.conf
[[ $D_RC -eq 0 ]] || d_fail "check of a fresh volume failed"
d_serve serve.good good.conf "$pidfile" || d_fail "serve failed"
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
# usable data per member: (size - 1M) rounded down to 64K
expect=0
for s in "${sizes[@]}"; do expect=$((expect + (s - M) / (64 * K) * (64 * K))); done
[[ $size -eq $expect ]] || d_bad "volume size $size, expected $expect"
d_random src "$size"
nbdcopy src "$uri" || d_fail "nbdcopy src -> volume"
d_stop "$D_SERVER_PID"
pristine=$(d_sums "${m[@]}")

# Two more volumes, created separately, for the foreign members.
for v in same other; do
  for i in 0 1 2 3; do truncate -s "${sizes[i]}" "$D_TMP/$v$i"; done
done
d_conf same.conf vol0 64K "" "$D_TMP"/same{0,1,2,3}
d_conf other.conf other 64K "" "$D_TMP"/other{0,1,2,3}
d_run create.same d_ns create same.conf
[[ $D_RC -eq 0 ]] || d_fail "create same.conf"
d_run create.other d_ns create other.conf
[[ $D_RC -eq 0 ]] || d_fail "create other.conf"
uuid=$(d_ns inspect --json "${m[0]}" | sed -n 's/.*"array_uuid": "\([^"]*\)".*/\1/p')
[[ -n $uuid ]] || d_fail "no array UUID from inspect --json"

# refuse NAME CONFIG SUBSTRING...: check, serve and the plugin all refuse
# with every SUBSTRING in their messages; no file in $files changes.
refuse ()
{
  local name=$1 conf=$2 before
  shift 2
  before=$(d_sums "${files[@]}")

  d_run "$name.check" d_ns check "$conf"
  d_expect_fail "$name.check"
  d_expect_err "$name.check" "$@"

  d_serve_refused "$name.serve" "$conf" "$pidfile"
  d_expect_err "$name.serve" "$@"
  # (nbdkit leaves its socket file behind when it stops: no check here.)
  ! nbdinfo --size "$uri" >/dev/null 2>&1 || d_bad "$name.serve: something serves $uri"

  d_run "$name.plugin" timeout -k 5 60 "${D_PRE[@]}" nbdkit -U - "$STRIPE_PLUGIN" \
    "config=$D_TMP/$conf" --run true
  [[ $D_RC -ne 0 ]] || d_bad "$name.plugin: nbdkit served it"
  [[ $D_RC -ne 124 && $D_RC -ne 137 ]] || d_bad "$name.plugin: nbdkit hung"
  d_expect_err "$name.plugin" "$@"

  d_same_sums "$name" "$before" "${files[@]}" && d_ok "$name: refused, nothing written"
}

# restored NAME: the members are exactly as after the fill.
restored ()
{
  d_same_sums "$1.restored" "$pristine" "${m[@]}" || d_fail "$1: could not restore the members"
}

files=("${m[@]}")

d_log "fault: members 1 and 2 swapped in the config"
d_conf swapped.conf vol0 64K "$serve" "${m[0]}" "${m[2]}" "${m[1]}" "${m[3]}"
refuse swapped swapped.conf \
  "member 1 (${m[2]}): is member 2 of 'vol0' (wrong order)" \
  "member 2 (${m[1]}): is member 1 of 'vol0' (wrong order)" \
  "the right order is: members = [ \"${m[0]}\", \"${m[1]}\", \"${m[2]}\", \"${m[3]}\" ];"

d_log "fault: member 2 missing from the config (3 listed)"
d_conf missing.conf vol0 64K "$serve" "${m[0]}" "${m[1]}" "${m[3]}"
refuse missing missing.conf \
  "has 4 members, the config lists 3" \
  "no member listed has index 2 of volume 'vol0'"

d_log "fault: member 1 listed twice (as itself and through a symlink), member 2 left out"
ln -s m1 "$D_TMP/m1.link"
d_conf twice.conf vol0 64K "$serve" "${m[0]}" "${m[1]}" "$D_TMP/m1.link" "${m[3]}"
refuse twice twice.conf \
  "member 1 (${m[1]}) and member 2 ($D_TMP/m1.link) are the same file"

d_log "fault: the config's chunk differs from the headers'"
d_conf chunk.conf vol0 128K "$serve" "${m[@]}"
refuse chunk chunk.conf "chunk: the config says 131072, the headers say 65536"

d_log "fault: the config's data_offset differs from the headers'"
d_conf offset.conf vol0 64K "$serve" "${m[@]}"
echo 'data_offset = "2M";' >>offset.conf
refuse offset offset.conf "data_offset: the config says 2097152, the headers say 1048576"

d_log "fault: the config names another volume"
d_conf name.conf vol9 64K "$serve" "${m[@]}"
refuse name name.conf "the members belong to volume 'vol0', the config is for 'vol9'"

d_log "fault: member 2's file deleted"
mv "${m[2]}" "$D_TMP/m2.aside"
files=("${m[0]}" "${m[1]}" "${m[3]}" "$D_TMP/m2.aside")
refuse deleted good.conf "member 2 (${m[2]}): open: No such file or directory"
mv "$D_TMP/m2.aside" "${m[2]}"
files=("${m[@]}")
restored deleted

d_log "fault: member 2 from another volume of the same name"
files=("${m[@]}" "$D_TMP"/same{0,1,2,3})
d_conf foreign-same.conf vol0 64K "$serve" "${m[0]}" "${m[1]}" "$D_TMP/same2" "${m[3]}"
refuse foreign-same foreign-same.conf \
  "member 2 ($D_TMP/same2): belongs to another array ('vol0'," "not to 'vol0' ($uuid)"

d_log "fault: member 2 from another volume with another name"
files=("${m[@]}" "$D_TMP"/other{0,1,2,3})
d_conf foreign-other.conf vol0 64K "$serve" "${m[0]}" "${m[1]}" "$D_TMP/other2" "${m[3]}"
refuse foreign-other foreign-other.conf \
  "member 2 ($D_TMP/other2): belongs to another array ('other'," "not to 'vol0' ($uuid)"
files=("${m[@]}")

d_log "fault: one byte of member 2's header flipped (offset 200)"
orig=$(d_hex "${m[2]}" 200 1)
printf "\\x$(printf %02x $((0x$orig ^ 0xff)))" |
  dd of="${m[2]}" bs=1 seek=200 conv=notrunc status=none
[[ $(d_hex "${m[2]}" 200 1) != "$orig" ]] || d_fail "the byte did not flip"
refuse corrupt good.conf "member 2 (${m[2]}): header checksum mismatch"
printf "\\x$orig" | dd of="${m[2]}" bs=1 seek=200 conv=notrunc status=none
restored corrupt

d_log "fault: member 2 truncated to half its size"
cp --sparse=always "${m[2]}" "$D_TMP/m2.copy"
truncate -s $((sizes[2] / 2)) "${m[2]}"
refuse truncated good.conf "member 2 (${m[2]}): $((sizes[2] / 2)) bytes, smaller than its header says"
cp --sparse=always "$D_TMP/m2.copy" "${m[2]}"
rm -f "$D_TMP/m2.copy"
restored truncated

d_log "fault: member 2 replaced by a blank file of the same size"
mv "${m[2]}" "$D_TMP/m2.aside"
truncate -s "${sizes[2]}" "${m[2]}"
files=("${m[@]}" "$D_TMP/m2.aside")
refuse blank good.conf "member 2 (${m[2]}): not an nbdstripe member (no header magic)"
mv -f "$D_TMP/m2.aside" "${m[2]}"
files=("${m[@]}")
restored blank

d_log "the right config serves, and the data is intact"
d_run check.again d_ns check good.conf
[[ $D_RC -eq 0 ]] || d_bad "check of the restored volume failed"
d_serve serve.again good.conf "$pidfile" || d_fail "serve of the restored volume failed"
nbdcopy "$uri" out || d_fail "nbdcopy volume -> out"
d_stop "$D_SERVER_PID"
if cmp src out; then d_ok "data intact"; else d_bad "the data read back differs"; fi
d_done
