#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What `nbdstripe replace` must refuse, with the volume served: each
# refusal exits non-zero with a message naming what is wrong, writes
# nothing to any member or to NEW (cksum of every file before and after,
# sha256 of the config), starts no replace (the control socket's status
# has none running), and the volume goes on serving its data:
#
#   - INDEX out of range (3 of 3 members), negative, not a number, empty,
#     trailing garbage: exit 2 (a usage error), "expected a member index"
#     (out of range: "0 to 2");
#   - NEW smaller than the member's data (data offset + data);
#   - NEW equal to another member: its path, a hard link to it, a symlink
#     to it, a loop device on it (root, losetup), the URI of a remote
#     member (m2, a stock nbdkit file server) and a URI naming a symlink
#     to its socket; NEW the member itself: its path, a symlink to it.
#     Without --force they hold this volume's header (refused as "member
#     I of volume 'vol'"); with --force the server refuses them as the
#     same file or NBD export, or the member itself;
#   - NEW holding data, without --force: a member of another nbdstripe
#     volume (its header), a member of an md array (metadata = "md": an md
#     v1.2 superblock), an ext4 filesystem (mkfs.ext4, when installed).
#
# Then --force onto the file holding another volume's header is accepted:
# the replace ends done, NEW gets this volume's header, the volume reads
# back its data.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((8 * M))
for f in m0 m1 m2.back ok small h0 h1 md0 md1 fs; do truncate -s "$size" "$D_TMP/$f"; done
# One 64K chunk short of member 1's data offset + data.
truncate -s $((size - 64 * K)) "$D_TMP/small"
r_unix m2 file "$D_TMP/m2.back"
m2_uri=$R_URI
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$m2_uri"
rp_create

# Files holding data: members of other volumes, a filesystem.
d_conf "$D_TMP/h.conf" hvol 64K "" "$D_TMP/h0" "$D_TMP/h1"
d_run hcreate d_ns create "$D_TMP/h.conf"
[[ $D_RC -eq 0 ]] || d_fail "create of the other volume failed"
d_conf "$D_TMP/md.conf" mdvol 64K "" "$D_TMP/md0" "$D_TMP/md1"
printf 'metadata = "md";\n' >>"$D_TMP/md.conf"
d_run mdcreate d_ns create "$D_TMP/md.conf"
[[ $D_RC -eq 0 ]] || d_fail "create of the md volume failed"
[[ $("$RP_PY" "$RP_LIB/md_sb.py" "$D_TMP/md0" get magic) == $((0xa92b4efc)) ]] ||
  d_fail "md0 holds no md superblock"
have_fs=0
if command -v mkfs.ext4 >/dev/null 2>&1; then
  mkfs.ext4 -q -F "$D_TMP/fs" >/dev/null 2>&1 && have_fs=1
fi

vsize=$((3 * (size - M)))
d_random "$D_TMP/ref" "$vsize"
rp_start vol
rp_write_pattern "$D_TMP/ref"
rp_same start "$D_TMP/ref" || d_fail "the volume does not hold its data"

files=("$D_TMP"/m0 "$D_TMP"/m1 "$D_TMP"/m2.back "$D_TMP"/ok "$D_TMP"/small
       "$D_TMP"/h0 "$D_TMP"/h1 "$D_TMP"/md0 "$D_TMP"/md1 "$D_TMP"/fs)
conf_sum=$(sha256sum <"$RP_CONF")
# sums: CRC and size of every file (cksum: fast, enough to see a write).
sums () { cksum -- "${files[@]}"; }

# refused LABEL EXPECT_RC SUBSTRING ARGS...: `nbdstripe replace ARGS` must
# exit EXPECT_RC (any non-zero when "nz") with SUBSTRING in its message;
# nothing written, no replace running, the volume still serving.
nrefused=0
refused ()
{
  local label=$1 want=$2 msg=$3 before st
  shift 3
  before=$(sums)
  d_run "$label" d_ns replace "$@"
  if [[ $want == nz ]]; then
    [[ $D_RC -ne 0 ]] || d_bad "$label: exit status 0, expected a refusal"
  elif [[ $D_RC -ne $want ]]; then
    d_bad "$label: exit status $D_RC, expected $want"
  fi
  d_expect_err "$label" "$msg"
  if [[ $(sums) != "$before" ]]; then
    d_bad "$label: a refused replace wrote to a member or NEW:"
    diff <(echo "$before") <(sums) >&2
  fi
  [[ $(sha256sum <"$RP_CONF") == "$conf_sum" ]] ||
    d_bad "$label: the config changed"
  st=$(rp_ctl status) || d_fail "$label: no answer on the control socket"
  [[ $(jq -r '.state // "none"' <<<"$st") != copying ]] ||
    d_bad "$label: a replace is running: $st"
  rp_read_at "$RP_URI" $((vsize - 64 * K)) $((64 * K)) "$D_TMP/tail" ||
    d_bad "$label: the volume no longer serves"
  cmp -s "$D_TMP/tail" <(tail -c $((64 * K)) "$D_TMP/ref") ||
    d_bad "$label: the volume's last 64K changed"
  nrefused=$((nrefused + 1))
}

d_log "bad INDEX"
refused index_3 2 "0 to 2" "$RP_CONF" 3 "$D_TMP/ok"
refused index_big 2 "expected a member index" "$RP_CONF" 4294967297 "$D_TMP/ok"
refused index_neg 2 "expected a member index" -- "$RP_CONF" -1 "$D_TMP/ok"
refused index_word 2 "expected a member index" "$RP_CONF" one "$D_TMP/ok"
refused index_trailing 2 "expected a member index" "$RP_CONF" 1x "$D_TMP/ok"
refused index_empty 2 "expected a member index" "$RP_CONF" "" "$D_TMP/ok"

d_log "NEW too small"
refused too_small nz "member 1 needs $size" "$RP_CONF" 1 "$D_TMP/small"

d_log "NEW is another member, or the member itself"
# Without --force, NEW holds this volume's header: refused as a member of
# 'vol'; with --force the server must still refuse it, for what it is.
ln "$D_TMP/m0" "$D_TMP/m0.hard"
ln -s "$D_TMP/m0" "$D_TMP/m0.sym"
ln -s "$D_TMP/m2.sock" "$D_TMP/m2.sock.link"
m2_alias="nbd+unix:///?socket=$D_TMP/m2.sock.link"
ln -s "$D_TMP/m1" "$D_TMP/m1.sym"
loop=""
if [[ $(id -u) -eq 0 ]] && command -v losetup >/dev/null 2>&1; then
  loop=$(losetup --show -f "$D_TMP/m0" 2>/dev/null) || loop=""
fi
[[ -n $loop ]] && D_LOOPS+=("$loop")
for force in "" --force; do
  f=${force:+_force}
  refused "other_member$f" nz "member 0" $force -- "$RP_CONF" 1 "$D_TMP/m0"
  refused "other_hardlink$f" nz "member 0" $force -- "$RP_CONF" 1 "$D_TMP/m0.hard"
  refused "other_symlink$f" nz "member 0" $force -- "$RP_CONF" 1 "$D_TMP/m0.sym"
  refused "other_remote$f" nz "member 2" $force -- "$RP_CONF" 1 "$m2_uri"
  refused "other_remote_alias$f" nz "member 2" $force -- "$RP_CONF" 1 "$m2_alias"
  refused "itself$f" nz "member 1" $force -- "$RP_CONF" 1 "$D_TMP/m1"
  refused "itself_symlink$f" nz "member 1" $force -- "$RP_CONF" 1 "$D_TMP/m1.sym"
  if [[ -n $loop ]]; then
    refused "other_loop$f" nz "member 0" $force -- "$RP_CONF" 2 "$loop"
  fi
done
for l in other_member other_hardlink other_symlink; do
  d_expect_err "${l}_force" "and member 0 ($D_TMP/m0) are the same file"
done
for l in other_remote other_remote_alias; do
  d_expect_err "${l}_force" "and member 2 ($m2_uri) are the same NBD server"
done
d_expect_err itself_force "is member 1 itself"
d_expect_err itself_symlink_force "is member 1 itself"
if [[ -n $loop ]]; then
  d_expect_err other_loop_force "and member 0 ($D_TMP/m0)"
  # Detached here, and so not by the cleanup (the number may be reused).
  losetup -d "$loop" && D_LOOPS=()
else
  d_log "not root or no loop device: NEW a loop device on a member not tried"
fi

d_log "NEW holds data, no --force"
refused holds_header nz "--force" "$RP_CONF" 1 "$D_TMP/h0"
d_expect_err holds_header "member 0 of nbdstripe volume 'hvol'"
refused holds_md nz "--force" "$RP_CONF" 1 "$D_TMP/md0"
d_expect_err holds_md "linux_raid_member"
if [[ $have_fs -eq 1 ]]; then
  refused holds_ext4 nz "--force" "$RP_CONF" 1 "$D_TMP/fs"
  d_expect_err holds_ext4 "ext4"
else
  d_log "mkfs.ext4 is not installed: NEW holding a filesystem not tried"
fi
d_ok "$nrefused refusals: nothing written, the volume served on"

d_log "--force: NEW holding another volume's header is accepted"
uuid=$(rp_header_field "$D_TMP/m1" "array UUID")
d_run force d_ns replace --force "$RP_CONF" 1 "$D_TMP/h0"
[[ $D_RC -eq 0 ]] || d_fail "replace --force onto h0 did not start"
rp_wait force --state done --deadline 30 || d_bad "replace --force did not end done"
[[ $(rp_header_field "$D_TMP/h0" "array UUID") == "$uuid" ]] ||
  d_bad "h0's array UUID is not the volume's"
[[ $(rp_header_field "$D_TMP/h0" "member") == "1 of 3 "* ]] ||
  d_bad "h0: member '$(rp_header_field "$D_TMP/h0" "member")', expected 1 of 3"
grep -q -F "\"$D_TMP/h0\"" "$RP_CONF" || d_bad "the config does not name h0"
rp_same force "$D_TMP/ref" || d_bad "the volume lost data in the --force replace"
rp_stop
d_done
