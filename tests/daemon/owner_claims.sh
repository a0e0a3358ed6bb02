#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A served volume owns its members: nothing else writes them.
#
# Volume "own0" (4 file members, headers) is served and filled; then, while
# it runs:
#   - `nbdstripe serve` of a second config over the same members (another
#     socket) is refused, naming the member, the server's pid and volume;
#   - an ad hoc `nbdkit stripe file=...` over the same files is refused;
#   - `nbdstripe create --force` on its config is refused;
# and none of them changed a byte of any member, the first server still
# serves exactly the data written, and once it stops the second config
# serves.  As root with loop devices: a volume over two loop devices is
# served, and mkfs.ext4 and mount on one of them are refused (the device
# is held exclusively, as md holds its members), leaving it unchanged.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo cmp

K=1024 M=$((1024 * 1024))
msize=$((5 * M))
for i in 0 1 2 3; do truncate -s "$msize" "$D_TMP/m$i"; done
m=("$D_TMP"/m{0,1,2,3})
sock=$D_TMP/a.sock pidfile=$D_TMP/a.pid
uri="nbd+unix:///?socket=$sock"
d_conf a.conf own0 64K "socket = \"$sock\"; pidfile = \"$pidfile\";" "${m[@]}"
d_conf b.conf own0 64K "socket = \"$D_TMP/b.sock\"; pidfile = \"$D_TMP/b.pid\";" "${m[@]}"

d_run create d_ns create a.conf
[[ $D_RC -eq 0 ]] || d_fail "create a.conf"
d_serve a.serve a.conf "$pidfile" || d_fail "serve a.conf"
pid=$D_SERVER_PID
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
d_random src "$size"
nbdcopy src "$uri" || d_fail "nbdcopy src -> volume"
before=$(d_sums "${m[@]}")
held="member 0 (${m[0]}): in use by nbdkit (pid $pid) serving volume 'own0' (config $D_TMP/a.conf)"

d_log "a second server of the same members: refused"
d_serve_refused b.serve b.conf "$D_TMP/b.pid"
d_expect_err b.serve "$held"

d_log "an ad hoc plugin over the same files: refused"
d_run adhoc d_nbdkit -U - "$STRIPE_PLUGIN" file="${m[0]}" file="${m[1]}" \
  file="${m[2]}" file="${m[3]}" --run 'nbdinfo --size "$uri"'
d_expect_fail adhoc
d_expect_err adhoc "$held"

d_log "create --force on the members of the running volume: refused"
d_run force d_ns create --force a.conf
d_expect_fail force
d_expect_err force "$held"

d_same_sums refusals "$before" "${m[@]}" && d_ok "the refusals changed no member"
nbdcopy "$uri" back || d_fail "nbdcopy volume -> back"
cmp -s src back && d_ok "the first server still serves what was written" ||
  d_bad "the first server's data changed"
kill -0 "$pid" 2>/dev/null || d_bad "the first server has gone"

d_log "the first server stops: the members are free"
d_stop "$pid"
d_serve b.serve2 b.conf "$D_TMP/b.pid" || d_bad "b.conf once a.conf stopped"
[[ -n ${D_SERVER_PID:-} ]] && d_stop "$D_SERVER_PID"

d_log "loop-device members: mkfs and mount refused while served"
if [[ $(id -u) -ne 0 ]] || ! command -v losetup >/dev/null ||
   ! command -v mkfs.ext4 >/dev/null; then
  d_log "  (skipped: needs root, losetup and mkfs.ext4)"
else
  truncate -s $((8 * M)) "$D_TMP/f0" "$D_TMP/f1"
  l0=$(losetup -f --show "$D_TMP/f0") || d_fail "losetup f0"
  D_LOOPS+=("$l0")
  l1=$(losetup -f --show "$D_TMP/f1") || d_fail "losetup f1"
  D_LOOPS+=("$l1")
  d_conf l.conf lvol 64K "socket = \"$D_TMP/l.sock\"; pidfile = \"$D_TMP/l.pid\";" "$l0" "$l1"
  d_run l.create d_ns create l.conf
  [[ $D_RC -eq 0 ]] || d_fail "create l.conf"
  d_serve l.serve l.conf "$D_TMP/l.pid" || d_fail "serve l.conf"
  lpid=$D_SERVER_PID
  lbefore=$(d_sums "$D_TMP/f0" "$D_TMP/f1")
  d_run mkfs mkfs.ext4 -q -F "$l1"
  [[ $D_RC -ne 0 ]] && d_ok "mkfs.ext4 on a served member refused (exit $D_RC)" ||
    d_bad "mkfs.ext4 on a served member succeeded"
  # The kernel claims a device exclusively before it reads a superblock:
  # refused as busy, not for want of a file system.
  mkdir -p "$D_TMP/mnt"
  d_run mount mount -t ext4 "$l0" "$D_TMP/mnt"
  if [[ $D_RC -eq 0 ]]; then
    D_MOUNTS+=("$D_TMP/mnt")
    d_bad "mount of a served member succeeded"
  elif grep -q -i busy "$D_TMP/mount.err"; then
    d_ok "mount of a served member refused as busy (exit $D_RC)"
  else
    d_bad "mount of a served member failed, but not because it is busy"
  fi
  d_run l.again d_ns create --force l.conf
  d_expect_fail l.again
  d_expect_err l.again "member 0 ($l0): in use by nbdkit (pid $lpid) serving volume 'lvol'"
  d_stop "$lpid"
  d_same_sums loops "$lbefore" "$D_TMP/f0" "$D_TMP/f1" &&
    d_ok "the loop-device members are unchanged"
fi

d_done
