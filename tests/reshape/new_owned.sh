#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# grow refuses as NEW every device the volume owns, under every name
# (issue 34, item 3): its members, its spares, its removed members, each
# spelt as it is in the config or as another name for it -- an NBD URI
# with /./ in its socket path, a symlink, a hard link, a loop device over
# its file, a partition of it (root: losetup -P), the file under
# a loop device.  Each refusal names the config, NEW and what NEW is, and
# nothing is written: every member, spare, removed member and the config
# byte for byte as before (sha256), the volume still served with its
# data.  A fresh device is accepted (--dry-run, the control).
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init sha256sum

size=$((9 * M))

# refused LABEL WANT... -- CMD...: the command fails, its stderr says each
# WANT, and every file in owned is as it was before the first refusal.
refused ()
{
  local label=$1 want=() w
  shift
  while [[ $1 != -- ]]; do want+=("$1"); shift; done
  shift
  d_run "$label" "$@"
  d_same_sums "$label" "$before" "${owned[@]}" &&
    d_ok "$label: nothing written"
  if [[ $D_RC -eq 0 ]]; then
    d_bad "$label: accepted (exit 0), expected a refusal"
    return
  fi
  for w in "${want[@]}"; do
    grep -q -F -- "$w" "$D_TMP/$label.err" ||
      { d_bad "$label: stderr does not say: $w"; return; }
  done
  d_ok "$label: refused: $(tail -1 "$D_TMP/$label.err")"
}

have_loops=0
if [[ $(id -u) -eq 0 ]] && command -v losetup >/dev/null &&
   losetup -f >/dev/null 2>&1; then
  have_loops=1
fi

# mbr FILE: one partition, sectors 2048 to 18431, in a DOS partition
# table written by hand (no sfdisk needed).
mbr ()
{
  printf '\x00\x00\x02\x00\x83\x00\x00\x00\x00\x08\x00\x00\x00\x40\x00\x00' |
    dd of="$1" bs=1 seek=446 conv=notrunc status=none &&
    printf '\x55\xaa' | dd of="$1" bs=1 seek=510 conv=notrunc status=none
}

# The volume: three members with data; spare 0 a file (named in the
# config through a symlink), spare 1 an NBD export of a file on a Unix
# socket; removed member 0 a file; with root, spare 2 a loop device over
# a file and removed member 1 a loop device over a partitioned file.
for f in m0 m1 m2; do truncate -s "$size" "$D_TMP/$f"; done
for f in s0 s1 s2 r0; do d_random "$D_TMP/$f" "$size"; done
ln -s "$D_TMP/s0" "$D_TMP/s0.link"
d_nbdkit_start s1 -U "$D_TMP/s1.sock" file "$D_TMP/s1" ||
  d_fail "nbdkit file s1"
s1_uri="nbd+unix:///?socket=$D_TMP/s1.sock"
spares="\"$D_TMP/s0.link\", \"$s1_uri\""
removed="\"$D_TMP/r0\""
if ((have_loops)); then
  ls2=$(losetup -f --show "$D_TMP/s2") || d_fail "losetup s2"
  D_LOOPS+=("$ls2")
  spares="$spares, \"$ls2\""
fi
if ((have_loops)); then
  truncate -s $((16 * M)) "$D_TMP/rp"
  mbr "$D_TMP/rp" || d_fail "a partition table on rp"
  lrp=$(losetup -f --show -P "$D_TMP/rp") || d_fail "losetup -P rp"
  D_LOOPS+=("$lrp")
  # Its partition's node made here: no udev may be running to make it.
  p1=/sys/class/block/${lrp#/dev/}p1
  [[ -e $p1 ]] || partx -a "$lrp" >/dev/null 2>&1
  [[ -r $p1/dev ]] || d_fail "no partition 1 of $lrp in sysfs"
  IFS=: read -r maj min <"$p1/dev"
  mknod "$D_TMP/rp1" b "$maj" "$min" || d_fail "mknod rp1"
  removed="$removed, \"$lrp\""
fi
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
printf 'spares = [ %s ];\nremoved = [ %s ];\n' "$spares" "$removed" \
  >>"$RP_CONF"
rp_start vol
d_random "$D_TMP/pattern" $((16 * M))
nbdcopy "$D_TMP/pattern" "$RP_URI" || d_fail "nbdcopy"
# Every file behind the volume's devices, and the config.
owned=("$D_TMP"/{m0,m1,m2,s0,s1,s2,r0} "$RP_CONF")
((have_loops)) && owned+=("$D_TMP/rp")
before=$(d_sums "${owned[@]}")

C="$RP_CONF: NEW"
d_log "spares"
refused spare.uri_dot "$C nbd+unix:///?socket=$D_TMP/./s1.sock is spare 1 ($s1_uri) under another name: the same NBD server" \
  -- d_ns grow "$RP_CONF" "nbd+unix:///?socket=$D_TMP/./s1.sock"
refused spare.uri_slashes "is spare 1 ($s1_uri) under another name" \
  -- d_ns grow "$RP_CONF" "nbd+unix:///?socket=$D_TMP//s1.sock"
refused spare.uri_same "$C $s1_uri is spare 1 already" \
  -- d_ns grow "$RP_CONF" "$s1_uri"
refused spare.symlink "$C $D_TMP/s0 is spare 0 ($D_TMP/s0.link) under another name: the same file ($D_TMP/s0)" \
  -- d_ns grow "$RP_CONF" "$D_TMP/s0"
ln "$D_TMP/s0" "$D_TMP/s0.hard"
refused spare.hardlink "$C $D_TMP/s0.hard is spare 0 ($D_TMP/s0.link) under another name: the same file through another hard link" \
  -- d_ns grow "$RP_CONF" "$D_TMP/s0.hard"
if ((have_loops)); then
  l=$(losetup -f --show "$D_TMP/s0") || d_fail "losetup s0"
  D_LOOPS+=("$l")
  refused spare.loop "$C $l is spare 0 ($D_TMP/s0.link) under another name: a loop device" \
    -- d_ns grow "$RP_CONF" "$l"
  refused spare.under_loop "$C $D_TMP/s2 is spare 2 ($ls2) under another name: what it is over (loop device" \
    -- d_ns grow "$RP_CONF" "$D_TMP/s2"
fi

d_log "members"
refused member.same "$C $D_TMP/m1 is member 1 already" \
  -- d_ns grow "$RP_CONF" "$D_TMP/m1"
ln -s "$D_TMP/m1" "$D_TMP/m1.link"
# The command resolves a symlink it is given; the control socket takes
# NEW as it is.
d_run member.symlink rp_ctl send \
  "{\"op\": \"reshape\", \"kind\": \"grow\", \"new\": [\"$D_TMP/m1.link\"]}"
if [[ $D_RC -ne 0 ]] &&
   grep -q -F "$C $D_TMP/m1.link is member 1 ($D_TMP/m1) under another name: the same file ($D_TMP/m1)" \
     "$D_TMP/member.symlink.out"; then
  d_ok "member.symlink: refused"
  d_same_sums member.symlink "$before" "${owned[@]}" &&
    d_ok "member.symlink: nothing written"
else
  d_bad "member.symlink: exit $D_RC: $(cat "$D_TMP/member.symlink.out")"
fi
ln "$D_TMP/m2" "$D_TMP/m2.hard"
refused member.hardlink "$C $D_TMP/m2.hard is member 2 ($D_TMP/m2) under another name: the same file through another hard link" \
  -- d_ns grow "$RP_CONF" "$D_TMP/m2.hard"
if ((have_loops)); then
  l=$(losetup -f --show -o $((4 * M)) "$D_TMP/m0") || d_fail "losetup m0"
  D_LOOPS+=("$l")
  refused member.loop "$C $l is member 0 ($D_TMP/m0) under another name: a loop device" \
    "from offset $((4 * M))" -- d_ns grow "$RP_CONF" "$l"
fi

d_log "removed members"
refused removed.same "$C $D_TMP/r0 is removed member 0 already: a removed member is never used again" \
  -- d_ns grow "$RP_CONF" "$D_TMP/r0"
ln "$D_TMP/r0" "$D_TMP/r0.hard"
refused removed.hardlink "$C $D_TMP/r0.hard is removed member 0 ($D_TMP/r0) under another name: the same file through another hard link" \
  -- d_ns grow "$RP_CONF" "$D_TMP/r0.hard"
if ((have_loops)); then
  refused removed.partition "$C $D_TMP/rp1 is removed member 1 ($lrp) under another name: a partition" \
    "at 1048576" -- d_ns grow "$RP_CONF" "$D_TMP/rp1"
else
  d_log "(loop-device and partition cases skipped: needs root and losetup)"
fi

got=$(nbdcopy "$RP_URI" - | head -c $((16 * M)) | sha256sum)
[[ $got == "$(sha256sum <"$D_TMP/pattern")" ]] &&
  d_ok "the volume's data as before" || d_bad "the volume's data changed"

# The control: a device the volume does not own is accepted.
truncate -s "$size" "$D_TMP/n0"
d_run fresh d_ns grow --dry-run "$RP_CONF" "$D_TMP/n0"
[[ $D_RC -eq 0 ]] && d_ok "a fresh device: grow --dry-run accepts it" ||
  d_bad "a fresh device refused: $(cat "$D_TMP/fresh.err")"
rp_stop
d_done
