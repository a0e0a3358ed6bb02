#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One member 5x slower than its peers under load: it is judged slow, the
# volume degraded, the others stay ok, and no request fails.
#
# Volume: 4 members of 8 MiB (nbdkit file + delay filter behind nbdfuse):
# members 0, 1, 3 delay every read and write by 2 ms, member 2 by 12 ms
# (with ~0.5 ms of FUSE and nbdkit per request under this load, ~2.5 vs
# ~12.5 ms at the member: measured 4.8x);
# chunk 64K, metadata "none", cache "direct" (every read reaches the
# delay filter); health interval 1 s, window 3 s, min_samples 20,
# slow_factor 4.0, the default,
# error_threshold 4, io_timeout 5 s.
#
# Load: 4 connections, each reading 4 KiB at random places of members 0, 1,
# 2, 3 in turn (so all of one size class, same count per member).
#
# Asserts (bounds in seconds):
# - hook MemberSlow hvol 2 PATH within 12 s of the load's start (a window
#   of 3 s with >= 20 samples each side, plus the interval, plus margin);
# - status at once: member 2 slow with a reason, members 0, 1, 3 ok, volume
#   degraded; member 2's windowed read p50 more than 3 times each other
#   member's; `nbdstripe status` exits 1 (when it exists);
# - the load: every read succeeded with the bytes of the backing file,
#   none took longer than 1 s, each member served >= 50 reads;
# - no other hook run (no member but 2 changed state).
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init

M=$((1024 * 1024))
N=4
CHUNK=65536
for i in 0 1 2 3; do
  if [[ $i -eq 2 ]]; then d=12ms; else d=2ms; fi
  h_member "$i" $((8 * M)) "delay=$d"
done
h_volume "$N" 0 'metadata = "none";
cache = "direct";' slow_factor=4.0
h_serve "$H_CONF"
ORACLE=$(h_oracle)

d_log "load on all members"
hc load "$H_URI" "$H_LAYOUT" --members 0,1,2,3 --threads 4 --slots 128 \
  --stop "$D_TMP/stop-load" --expect-ok --bound 1 --oracle "$ORACLE" \
  --min-requests 50 >"$D_TMP/load.out" 2>"$D_TMP/load.err" </dev/null &
load_pid=$!
H_KILL+=("$load_pid")
h_expect_event MemberSlow 2 12
h_check "member 2 slow with a reason, the others ok, volume degraded" \
  'j["members"][2]["state"] == "slow" and j["members"][2]["reason"] != "" and all(m["state"] == "ok" for m in j["members"] if m["index"] != 2) and j["volume"]["state"] == "degraded"'
h_check "member 2's read p50 over the window > 3x each peer's" \
  'all(j["members"][2]["ops"]["read"]["latency_us"]["p50"] > 3 * m["ops"]["read"]["latency_us"]["p50"] for m in j["members"] if m["index"] != 2)'
hc json "$H_STATUS" '[(m["index"], m["state"], m["ops"]["read"]["latency_us"]) for m in j["members"]]'
if h_has_status_cmd; then
  h_status_cmd status.degraded
  [[ $D_RC -eq 1 ]] || d_bad "nbdstripe status: exit $D_RC, expected 1 (degraded)"
else
  d_log "(nbdstripe has no status sub-command yet: not checked)"
fi
: >"$D_TMP/stop-load"
wait "$load_pid"
rc=$?
sed 's/^/   load | /' "$D_TMP/load.out" "$D_TMP/load.err"
[[ $rc -eq 0 ]] || d_bad "the load saw failed, wrong or slow (> 1 s) reads (above)"
h_no_event "under load"
[[ $(wc -l <"$D_TMP/hook.log") -eq 1 ]] ||
  { d_bad "the hook ran $(wc -l <"$D_TMP/hook.log") times, expected 1"; cat "$D_TMP/hook.log" >&2; }
d_done
