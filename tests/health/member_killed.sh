#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member whose server dies: the member goes failed at once, I/O touching
# it fails fast, the rest of the volume goes on; when the server is back at
# the same path the re-probe brings the member back (MemberRecovered) and
# the data written before the fault reads back intact.
#
# Volume: 4 members of 9 MiB (nbdkit file behind nbdfuse), created with
# `nbdstripe create` (headers, data_offset 1M: the re-probe checks the
# header), chunk 64K, cache "direct"; health interval 1 s, window 3 s,
# error_threshold 4, probe_interval 1 s, io_timeout 5 s, slow_factor 10.
#
# --signal=KILL (default) or --signal=TERM: how the member server dies.
# The two end differently behind nbdfuse (see tests/lib/health.sh 3.):
# after SIGTERM nbdfuse stays and every request gets ESHUTDOWN (stat still
# works); after SIGKILL nbdfuse itself dies on the next request, which gets
# ECONNABORTED, and from then on everything on the path, stat and open
# included, gets ENOTCONN (a vanished device).
#
# Asserts (bounds in seconds):
# - 16 chunks (64K) written on every member with a known pattern read back
#   the same, and the backing files hold it (oracle); the server has
#   descriptors open on member 1's mount.
# - member 1's server killed: the first read touching member 1 fails
#   (<= 1 s); hook MemberFailed hvol 1 PATH within 3 s of the kill.  TERM:
#   ESHUTDOWN is "device gone", so no MemberFailing before it.  KILL:
#   ECONNABORTED is not in the contract's list, so one MemberFailing may
#   come first; the failure is then found by the check (ENOTCONN).
#   Status at once: member 1 failed, reason not empty, volume failed;
#   last_error ESHUTDOWN (TERM) / ECONNABORTED or ENOTCONN (KILL).
# - fail fast: 10 reads and 4 writes touching member 1 get EIO within 0.5 s
#   each; reads of members 0, 2, 3 return the pattern (<= 1 s); writes to
#   member 0 succeed.
# - the server restarted and nbdfuse mounted again at the same path (see
#   tests/lib/health.sh 5.): hook MemberRecovered within 6 s
#   (probe_interval 1 + io_timeout 5); status member 1 ok, volume ok;
#   every chunk written before the fault (all members) and during it
#   (member 0) reads back intact (<= 1 s per request) and equals the
#   backing files.
# - the plugin lets go of the dead member: within 10 s of the recovery the
#   server holds no descriptor on the old (detached) mount.
# - hook runs: [MemberFailing,] MemberFailed, MemberRecovered, no other;
#   none of them inherited a member descriptor (the re-adopted member's
#   descriptors stay close-on-exec).
source "$(dirname "$0")/../lib/health.sh" || exit 1
sig=KILL
case ${1:-} in
  ""|--signal=KILL) sig=KILL ;;
  --signal=TERM) sig=TERM ;;
  *) echo "usage: $0 [--signal=KILL|--signal=TERM]" >&2; exit 2 ;;
esac
h_init

M=$((1024 * 1024))
N=4
CHUNK=65536
for i in 0 1 2 3; do h_member "$i" $((9 * M)) plain; done
h_volume "$N" "$M" 'cache = "direct";'
d_run create d_ns create "$H_CONF"
[[ $D_RC -eq 0 ]] || d_fail "nbdstripe create failed"
h_serve "$H_CONF"
ORACLE=$(h_oracle)
m1=j[\"members\"][1]

d_log "write 16 chunks on every member, read them back"
for i in 0 1 2 3; do
  h_io "write.m$i" "$i" --op write --count 16 --first-slot 0 --size "$CHUNK" \
    --seed before --bound 1
  h_io "check.m$i" "$i" --count 16 --first-slot 0 --size "$CHUNK" \
    --pattern before --oracle "$ORACLE" --bound 1
done
h_wait_json "status: volume ok" 5 'j["volume"]["state"] == "ok"'

old_mnt=$(h_mnt_id 1)
[[ $(h_fds_on_mount "$D_SERVER_PID" "$old_mnt") -gt 0 ]] ||
  d_bad "the server holds no descriptor on member 1's mount (mnt_id $old_mnt)?"

d_log "kill member 1's server (SIG$sig)"
t_kill=$(h_epoch)
h_member_kill 1 "$sig"
# After SIGTERM the server shuts its connections a moment later: read
# until the first failure (at most 2 s).
h_io first 1 --first-slot 0 --until-error 2 --expect error --bound 1
if [[ $sig == KILL ]]; then
  H_EVF=()
  h_next_event 3 || d_bad "no hook run within 3 s of the kill"
  if [[ ${H_EVF[2]-} == MemberFailing ]]; then
    h_check_event MemberFailing 1
    h_expect_event MemberFailed 1 3
  else
    h_check_event MemberFailed 1
  fi
  errs='("ECONNABORTED", "ENOTCONN")'
else
  h_expect_event MemberFailed 1 3
  errs='("ESHUTDOWN",)'
fi
if [[ -n ${H_EV_TIME:-} ]]; then
  h_le "$H_EV_TIME" "$(awk -v t="$t_kill" 'BEGIN { printf "%.6f", t + 3 }')" ||
    d_bad "MemberFailed came more than 3 s after the kill"
fi
h_check "member 1 failed with a reason, volume failed" \
  "$m1[\"state\"] == \"failed\" and $m1[\"reason\"] != \"\" and j[\"volume\"][\"state\"] == \"failed\""
h_check "the others ok" 'all(m["state"] == "ok" for m in j["members"] if m["index"] != 1)'
h_wait_json "member 1: last error one of $errs" 3 \
  "$m1[\"last_error\"] is not None and $m1[\"last_error\"][\"error\"] in $errs" \
  "$m1[\"last_error\"]"

d_log "fail fast on member 1; the others go on"
h_io failfast.read 1 --count 10 --first-slot 0 --expect EIO --bound 0.5
h_io failfast.write 1 --op write --count 4 --first-slot 40 --seed x --expect EIO --bound 0.5
for i in 0 2 3; do
  h_io "during.m$i" "$i" --count 16 --first-slot 0 --size "$CHUNK" \
    --pattern before --oracle "$ORACLE" --bound 1
done
h_io during.write.m0 0 --op write --count 4 --first-slot 16 --size "$CHUNK" \
  --seed during --bound 1

d_log "restart member 1's server, mount it again at the same path"
h_member_restart 1
h_expect_event MemberRecovered 1 6
h_check "member 1 ok, volume ok" \
  "$m1[\"state\"] == \"ok\" and j[\"volume\"][\"state\"] == \"ok\""
for i in 0 1 2 3; do
  h_io "after.m$i" "$i" --count 16 --first-slot 0 --size "$CHUNK" \
    --pattern before --oracle "$ORACLE" --bound 1
done
h_io after.during.m0 0 --count 4 --first-slot 16 --size "$CHUNK" \
  --pattern during --oracle "$ORACLE" --bound 1
end=$((SECONDS + 10))
while [[ $(h_fds_on_mount "$D_SERVER_PID" "$H_OLD_MNT_ID") -gt 0 && $SECONDS -lt $end ]]; do
  sleep 0.1     # polling /proc with a deadline: no event for a close()
done
n=$(h_fds_on_mount "$D_SERVER_PID" "$H_OLD_MNT_ID")
if [[ $n -eq 0 ]]; then
  d_ok "the server holds no descriptor on the dead mount any more"
else
  d_bad "the server still holds $n descriptor(s) on the dead mount of member 1 10 s after recovery"
fi
h_no_event "after recovery"
h_hook_inherited_no_member
n=$(wc -l <"$D_TMP/hook.log")
if [[ $n -ne 2 ]] && ! [[ $sig == KILL && $n -eq 3 ]]; then
  d_bad "the hook ran $n times"
  cat "$D_TMP/hook.log" >&2
fi
d_done
