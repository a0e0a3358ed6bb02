#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe create` refuses a member that already holds something
# recognisable, unless --force:
#
#   - an ext4 filesystem (mkfs.ext4 on member 1): exit 1, the message names
#     the member and says ext4, and no member file changes at all; with
#     --force it succeeds and `nbdstripe check` passes;
#   - a member of an nbdstripe volume (this one, again; and one member of
#     it in a new volume's config), and a damaged nbdstripe header;
#   - a DOS partition table (written by sfdisk when it is installed, else
#     a minimal MBR written here: one partition entry and 0x55AA);
#   - the same file twice under two names (a symlink), even with --force;
#   - a mounted block device (a loop device with ext4, mounted), even with
#     --force: block devices are opened exclusively.  Only as root with
#     loop devices; otherwise that part is left out (and said so).
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init mkfs.ext4 sha256sum

M=$((1024 * 1024))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2" "$D_TMP/m3")
for f in "${m[@]}"; do truncate -s $((8 * M)) "$f"; done
d_conf vol.conf vol0 64K "" "${m[@]}"

# err_line NAME SUBSTRING...: one line of NAME.err contains all of them.
err_line ()
{
  local name=$1 lines
  shift
  lines=$(cat "$D_TMP/$name.err")
  for s in "$@"; do lines=$(grep -F -- "$s" <<<"$lines"); done
  [[ -n $lines ]] || d_bad "$name: no line of stderr contains all of: $*"
}

# refused NAME CONFIG FILES...: create (no --force) exits 1, no file changes.
refused ()
{
  local name=$1 conf=$2 before
  shift 2
  before=$(d_sums "$@")
  d_run "$name" d_ns create "$conf"
  d_expect_fail "$name"
  d_same_sums "$name" "$before" "$@" && d_ok "$name: nothing written"
}

d_log "member 1 holds ext4"
mkfs.ext4 -F -q "${m[1]}" || d_fail "mkfs.ext4"
refused ext4 vol.conf "${m[@]}"
err_line ext4 "member 1 (${m[1]})" ext4 "--force"
for i in 0 2 3; do
  ! grep -q -F "member $i (" "$D_TMP/ext4.err" || d_bad "ext4: member $i (blank) was complained about"
done
d_run ext4.check d_ns check vol.conf
[[ $D_RC -eq 1 ]] || d_bad "check passed (or failed oddly: $D_RC) after a refused create"

d_log "--force overwrites it"
d_run ext4.force d_ns create --force vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create --force failed"
d_run ext4.force.check d_ns check vol.conf
[[ $D_RC -eq 0 ]] && d_ok "check passes after create --force" || d_bad "check failed after create --force"
if command -v blkid >/dev/null; then
  ! blkid -p "${m[1]}" 2>/dev/null | grep -q 'TYPE="ext4"' ||
    d_bad "member 1 still looks like ext4 after create --force"
fi

d_log "the members already form a volume"
refused again vol.conf "${m[@]}"
for i in 0 1 2 3; do
  err_line again "member $i (${m[i]})" "is already member $i of nbdstripe volume 'vol0'"
done

d_log "one member of that volume in a new volume"
truncate -s $((8 * M)) "$D_TMP/n0" "$D_TMP/n1"
d_conf new.conf vol1 64K "" "$D_TMP/n0" "${m[2]}" "$D_TMP/n1"
refused steal new.conf "$D_TMP/n0" "${m[@]}" "$D_TMP/n1"
err_line steal "member 1 (${m[2]})" "is already member 2 of nbdstripe volume 'vol0'"

d_log "a damaged nbdstripe header"
printf '\x01' | dd of="${m[3]}" bs=1 seek=300 conv=notrunc status=none
d_conf damaged.conf vol2 64K "" "$D_TMP/n0" "${m[3]}"
refused damaged damaged.conf "$D_TMP/n0" "${m[3]}"
err_line damaged "member 1 (${m[3]})" "nbdstripe header"

d_log "a DOS partition table"
p=$D_TMP/p0
truncate -s $((8 * M)) "$p"
if command -v sfdisk >/dev/null; then
  echo 'label: dos
start=2048, size=8192, type=83' | sfdisk -q "$p" >/dev/null || d_fail "sfdisk"
  how=sfdisk
else
  # Partition 1: type 0x83, LBA 2048, 8192 sectors; boot signature.
  printf '\x00\x00\x02\x00\x83\x00\x00\x00\x00\x08\x00\x00\x00\x20\x00\x00' |
    dd of="$p" bs=1 seek=446 conv=notrunc status=none
  printf '\x55\xaa' | dd of="$p" bs=1 seek=510 conv=notrunc status=none
  how="a hand-written MBR (sfdisk is not installed)"
fi
d_log "  (written with $how)"
d_conf part.conf vol3 64K "" "$D_TMP/n0" "$D_TMP/n1" "$p"
refused part part.conf "$D_TMP/n0" "$D_TMP/n1" "$p"
err_line part "member 2 ($p)" "dos partition table"
d_run part.force d_ns create --force part.conf
[[ $D_RC -eq 0 ]] || d_bad "create --force over a partition table failed"
d_run part.force.check d_ns check part.conf
[[ $D_RC -eq 0 ]] || d_bad "check failed after create --force over a partition table"

d_log "the same file twice (a symlink), even with --force"
truncate -s $((8 * M)) "$D_TMP/s0" "$D_TMP/s1"
ln -s s0 "$D_TMP/s0.link"
d_conf same.conf vol4 64K "" "$D_TMP/s0" "$D_TMP/s1" "$D_TMP/s0.link"
before=$(d_sums "$D_TMP/s0" "$D_TMP/s1")
d_run same d_ns create --force same.conf
d_expect_fail same
err_line same "member 0 ($D_TMP/s0)" "member 2 ($D_TMP/s0.link)" "same file"
d_same_sums same "$before" "$D_TMP/s0" "$D_TMP/s1" && d_ok "same: nothing written"

d_log "a mounted block device, even with --force"
if [[ $(id -u) -eq 0 ]] && command -v losetup >/dev/null && command -v mount >/dev/null; then
  truncate -s $((16 * M)) "$D_TMP/b0" "$D_TMP/b1"
  mkfs.ext4 -F -q "$D_TMP/b0" || d_fail "mkfs.ext4 b0"
  if loop=$(losetup --find --show "$D_TMP/b0" 2>"$D_TMP/losetup.err"); then
    D_LOOPS+=("$loop")
    mkdir "$D_TMP/mnt"
    if mount "$loop" "$D_TMP/mnt" 2>"$D_TMP/mount.err"; then
      D_MOUNTS+=("$D_TMP/mnt")
      echo "a file in the mounted file system" >"$D_TMP/mnt/hello"
      sync -f "$D_TMP/mnt/hello"
      d_conf mounted.conf vol5 64K "" "$loop" "$D_TMP/b1"
      # The mounted file system may write its own superblock (at 1024) at
      # any time; a header would land on bytes 0..1023 too.
      first1k () { head -c 1024 "$loop" | sha256sum; }
      before=$(first1k; d_sums "$D_TMP/b1")
      d_run mounted d_ns create --force mounted.conf
      d_expect_fail mounted
      err_line mounted "member 0 ($loop)" "in use by a file system mounted on $D_TMP/mnt"
      [[ $(first1k; d_sums "$D_TMP/b1") == "$before" ]] && d_ok "mounted: nothing written" ||
        d_bad "mounted: a member changed"
      umount "$D_TMP/mnt" || d_bad "umount $D_TMP/mnt"
      D_MOUNTS=()
    else
      d_log "  (left out: cannot mount $loop: $(head -c 200 "$D_TMP/mount.err"))"
    fi
    losetup -d "$loop" || d_bad "losetup -d $loop"
    D_LOOPS=()
  else
    d_log "  (left out: no loop device: $(head -c 200 "$D_TMP/losetup.err"))"
  fi
else
  d_log "  (left out: needs root, losetup and mount)"
fi
d_done
