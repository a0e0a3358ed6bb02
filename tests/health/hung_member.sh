#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member that stops answering (no error, no answer at all): requests
# touching only the other members keep completing, the hung member is
# failed within io_timeout, new requests touching it fail fast, and it
# comes back when it answers again.
#
# The hang is real: member 3's server has nbdkit's pause filter; once it is
# paused ('p' on its control socket, acknowledged), every request to it
# blocks in the kernel (FUSE, D state) until it is resumed -- a delay
# filter of many times io_timeout from an exact moment on, and it can end.
#
# Volume: 4 members of 8 MiB behind nbdfuse, chunk 64K, metadata "none",
# cache "direct"; health interval 1 s, window 3 s, error_threshold 4,
# io_timeout 2 s, probe_interval 1 s, slow_factor 10.
#
# Asserts (bounds in seconds):
# - before: 8 reads on each member succeed with the right bytes (<= 1 s).
# - a load of 2 connections reading members 0, 1, 2 runs throughout; it
#   must see no error, no wrong byte, no read over 1 s, and >= 100 reads
#   per member (it spans the >= 2 s of the hang).
# - member 3 paused, one read touching it started at T0 (it hangs): hook
#   MemberFailed hvol 3 PATH run no later than T0 + io_timeout + 3 = T0 + 5
#   (waited for up to 8 s); status: member 3 failed with a reason, members
#   0..2 ok, volume failed.
# - 10 new reads touching member 3: EIO within 0.5 s each.
# - member 3 resumed: the hung read completes (success or error) within 5
#   s; hook MemberRecovered within 6 s (probe_interval + io_timeout + 3);
#   status member 3 ok, volume ok; 8 reads on member 3 succeed with the
#   right bytes (<= 1 s).
# - exactly two hook runs.
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init

M=$((1024 * 1024))
N=4
IO_TIMEOUT=2
for i in 0 1 2; do h_member "$i" $((8 * M)) plain; done
h_member 3 $((8 * M)) pause
h_volume "$N" 0 'metadata = "none";
cache = "direct";' "io_timeout=$IO_TIMEOUT"
h_serve "$H_CONF"
ORACLE=$(h_oracle)
m3=j[\"members\"][3]

d_log "healthy volume"
for i in 0 1 2 3; do
  h_io "base.m$i" "$i" --count 8 --first-slot 1 --bound 1 --oracle "$ORACLE"
done

d_log "load on members 0, 1, 2"
hc load "$H_URI" "$H_LAYOUT" --members 0,1,2 --threads 2 --slots 128 \
  --stop "$D_TMP/stop-load" --expect-ok --bound 1 --oracle "$ORACLE" \
  --min-requests 100 >"$D_TMP/load.out" 2>"$D_TMP/load.err" </dev/null &
load_pid=$!
H_KILL+=("$load_pid")

d_log "member 3 hangs; one read touching it"
h_pause 3
t0=$(h_epoch)
hc io "$H_URI" "$H_LAYOUT" --member 3 --count 1 --first-slot 2 --expect any \
  >"$D_TMP/hung.out" 2>"$D_TMP/hung.err" </dev/null &
hung_pid=$!
H_KILL+=("$hung_pid")
if h_expect_event MemberFailed 3 8; then
  if h_le "$H_EV_TIME" "$(awk -v t="$t0" -v b=$((IO_TIMEOUT + 3)) 'BEGIN { printf "%.6f", t + b }')"; then
    d_ok "member 3 failed $(awk -v a="$H_EV_TIME" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after the hung read started (bound $((IO_TIMEOUT + 3)) s)"
  else
    d_bad "member 3 failed $(awk -v a="$H_EV_TIME" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after the hung read started: over io_timeout + 3 = $((IO_TIMEOUT + 3)) s"
  fi
fi
h_check "member 3 failed with a reason, the others ok, volume failed" \
  "$m3[\"state\"] == \"failed\" and $m3[\"reason\"] != \"\" and all(m[\"state\"] == \"ok\" for m in j[\"members\"][:3]) and j[\"volume\"][\"state\"] == \"failed\""
kill -0 "$hung_pid" 2>/dev/null && d_ok "the first read is still hanging (member 3 paused)"

d_log "new reads touching member 3 fail fast"
h_io failfast 3 --count 10 --first-slot 5 --expect EIO --bound 0.5

d_log "stop the load"
: >"$D_TMP/stop-load"
wait "$load_pid"
rc=$?
sed 's/^/   load | /' "$D_TMP/load.out" "$D_TMP/load.err"
[[ $rc -eq 0 ]] || d_bad "reads on members 0..2 failed, were wrong or waited over 1 s during the hang (above)"

d_log "member 3 answers again"
h_resume 3
if d_wait_gone "$hung_pid" 5; then
  wait "$hung_pid"
  d_ok "the hung read completed: $(cat "$D_TMP/hung.out" "$D_TMP/hung.err")"
else
  d_bad "the hung read did not complete within 5 s of resuming member 3"
fi
h_expect_event MemberRecovered 3 $((1 + IO_TIMEOUT + 3))
h_check "member 3 ok, volume ok" "$m3[\"state\"] == \"ok\" and j[\"volume\"][\"state\"] == \"ok\""
h_io recovered 3 --count 8 --first-slot 1 --bound 1 --oracle "$ORACLE"
h_no_event "after recovery"
[[ $(wc -l <"$D_TMP/hook.log") -eq 2 ]] ||
  { d_bad "the hook ran $(wc -l <"$D_TMP/hook.log") times, expected 2"; cat "$D_TMP/hook.log" >&2; }
d_done
