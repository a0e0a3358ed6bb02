#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The status file is valid JSON at every instant while it is rewritten
# (every interval and on every state change), under load; the Prometheus
# file parses with prometheus_client's parser at every instant and its
# figures agree with the JSON.
#
# Volume: 3 members of 8 MiB (nbdkit file + error filter behind nbdfuse),
# chunk 64K, metadata "none", cache "direct"; health interval 1 s, window
# 3 s, error_threshold 4, probe_interval 1 s, io_timeout 5 s, slow_factor
# 10.
#
# A reader loop (hclient reader: open, read, parse both files, as fast as
# it can) runs the whole time, while 2 connections read all members and
# member 0's reads fail for a while: member 0 failing -> failed -> back to
# ok, so the files are rewritten on transitions as well as every second.
#
# Asserts (bounds in seconds):
# - the status file, once it exists, is never missing and never anything
#   but a complete JSON document of format 1 with volume and members
#   (>= 200 reads), the Prometheus file never fails to parse (>= 200
#   reads); >= 4 distinct updated_unix values seen; the reader saw member 0
#   failed and ok;
# - hooks: MemberFailing 0 (3 s), MemberFailed 0 (5 s), MemberRecovered 0
#   (5 s after the errors stop);
# - the JSON holds what the contract lists: format 1, running true, pid of
#   the server, interval 1, volume name/size/chunk/members/uuid null/
#   config, the health parameters as configured, for every member index,
#   path, state, state_since_unix, reason, consecutive_errors, last_error
#   and for each of read/write/trim/zero/flush requests, bytes, errors,
#   latency_us {p50, p99, samples}, total_latency_us {p50, p99, sum};
#   members 1 and 2 (4 KiB reads only, no error): read bytes = 4096 x
#   requests;
# - once the load has stopped, within 5 s a rewrite of both files agrees:
#   up 1, last update = updated_unix, volume state/size/start time/info,
#   each member's state gauges, every requests/bytes/errors counter (no
#   flush bytes), latency histograms (_sum = total_latency_us.sum, _count
#   = +Inf bucket = requests or successful requests, cumulative buckets,
#   _sum within what they allow), no quantile.
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init
"$H_PY" -c 'import prometheus_client.parser' 2>/dev/null ||
  d_fail "$H_PY cannot import prometheus_client: install python3-prometheus-client"

M=$((1024 * 1024))
N=3
CHUNK=65536
for i in 0 1 2; do h_member "$i" $((8 * M)) error; done
h_volume "$N" 0 'metadata = "none";
cache = "direct";'

hc reader "$H_STATUS" "$H_PROM" --stop "$D_TMP/stop-reader" \
  >"$D_TMP/reader.out" 2>"$D_TMP/reader.err" </dev/null &
reader_pid=$!
H_KILL+=("$reader_pid")
h_serve "$H_CONF"
ORACLE=$(h_oracle)
h_wait_json "the status file is written" 5 'j["running"] is True'

hc load "$H_URI" "$H_LAYOUT" --members 0,1,2 --threads 2 --slots 128 \
  --stop "$D_TMP/stop-load" >"$D_TMP/load.out" 2>"$D_TMP/load.err" </dev/null &
load_pid=$!
H_KILL+=("$load_pid")

t=$(h_epoch)
h_wait_json "two rewrites under load" 5 "j[\"updated_unix\"] > $t + 1"
d_log "member 0's reads fail"
h_inject 0 read on
h_expect_event MemberFailing 0 3
h_expect_event MemberFailed 0 5
t=$(h_epoch)
h_wait_json "two rewrites while member 0 is failed" 5 "j[\"updated_unix\"] > $t + 1"
d_log "member 0's reads work again"
h_inject 0 read off
h_expect_event MemberRecovered 0 5
t=$(h_epoch)
h_wait_json "two rewrites after recovery" 5 "j[\"updated_unix\"] > $t + 1"

: >"$D_TMP/stop-load"
wait "$load_pid"
sed 's/^/   load | /' "$D_TMP/load.out" "$D_TMP/load.err"
quiet=$(h_epoch)

d_log "the JSON holds what the contract lists"
h_check "top level" \
  "j[\"format\"] == 1 and j[\"running\"] is True and j[\"pid\"] == $D_SERVER_PID and j[\"interval\"] == 1 and isinstance(j[\"updated_unix\"], float)"
h_check "volume" \
  "j[\"volume\"][\"name\"] == \"hvol\" and j[\"volume\"][\"uuid\"] is None and j[\"volume\"][\"config\"] == \"$H_CONF\" and j[\"volume\"][\"chunk\"] == $CHUNK and j[\"volume\"][\"members\"] == 3 and j[\"volume\"][\"size\"] == 3 * 8 * 1048576 and j[\"volume\"][\"state\"] == \"ok\" and j[\"volume\"][\"started_unix\"] <= j[\"updated_unix\"] and isinstance(j[\"volume\"][\"uptime_seconds\"], (int, float))"
h_check "health parameters as configured" \
  'j["health"] == {"window": 3, "slow_factor": 10.0, "slow_floor_us": 1000, "error_threshold": 4, "min_samples": 20, "io_timeout": 5, "probe_interval": 1, "drive_interval": 600}'
h_check "drives: regular files (nbdfuse mounts) have none, and say so" \
  'all(m["drive"]["available"] is False and "regular file" in m["drive"]["reason"] for m in j["members"])'
h_check "members" \
  "[m[\"index\"] for m in j[\"members\"]] == [0, 1, 2] and [m[\"path\"] for m in j[\"members\"]] == [\"$D_TMP/m0\", \"$D_TMP/m1\", \"$D_TMP/m2\"] and all(set(m) >= {\"state\", \"state_since_unix\", \"reason\", \"consecutive_errors\", \"ops\", \"last_error\"} for m in j[\"members\"])"
h_check "ops" \
  'all(set(m["ops"]) == {"read", "write", "trim", "zero", "flush"} and all(set(o) >= {"requests", "bytes", "errors", "latency_us", "total_latency_us"} and set(o["latency_us"]) >= {"p50", "p99", "samples"} and set(o["total_latency_us"]) >= {"p50", "p99", "sum"} for o in m["ops"].values()) for m in j["members"])'
h_check "members 1, 2: read bytes = 4096 x requests, no error" \
  'all(m["ops"]["read"]["bytes"] == 4096 * m["ops"]["read"]["requests"] and m["ops"]["read"]["errors"] == 0 and m["ops"]["read"]["requests"] > 0 for m in j["members"][1:])'
h_check "member 0: errors counted, last error a read EIO" \
  'j["members"][0]["ops"]["read"]["errors"] >= 4 and j["members"][0]["last_error"]["op"] == "read" and j["members"][0]["last_error"]["errno"] == 5'

d_log "the Prometheus file agrees with the JSON once the load has stopped"
d_run prom hc prom-check "$H_STATUS" "$H_PROM" --after "$quiet" --deadline 5
[[ $D_RC -eq 0 ]] || { d_bad "the Prometheus file disagrees with the JSON (above)"; cat "$H_PROM" >&2; }

: >"$D_TMP/stop-reader"
wait "$reader_pid"
rc=$?
sed 's/^/   reader | /' "$D_TMP/reader.out" "$D_TMP/reader.err"
[[ $rc -eq 0 ]] || d_bad "the reader saw a missing, partial or invalid file (above)"
"$H_PY" - "$D_TMP/reader.out" <<'EOF' || d_bad "the reader did not see enough (above)"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
bad = []
if r["json_reads"] < 200: bad.append("only %d JSON reads" % r["json_reads"])
if r["prom_reads"] < 200: bad.append("only %d Prometheus reads" % r["prom_reads"])
if r["distinct_updates"] < 4: bad.append("only %d rewrites seen" % r["distinct_updates"])
for s in ("0:failed", "0:ok"):
    if s not in r["member_states"]: bad.append("never saw member " + s)
for b in bad: print("reader: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
d_done
