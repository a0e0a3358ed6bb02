#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Prometheus file: `promtool check metrics` accepts it and its figures
# are what the test did, while served, after a member failed and came
# back, and after the server stopped.
#
# Volume: 3 members of 8 MiB (nbdkit file + error filter behind nbdfuse),
# chunk 64K, metadata "none", cache "direct"; health interval 1 s, window
# 3 s, error_threshold 4, probe_interval 1 s, io_timeout 5 s.
#
# promtool comes from Debian's prometheus package.  Installing that
# package would also start a Prometheus server (its init script runs on a
# machine without systemd, its unit on one with it), so when promtool is
# not on PATH the test has apt-get download the package and takes
# promtool alone out of it, kept in $NBDSTRIPE_TEST_TOOLS for the next
# run.  No promtool to be had: skipped (77), saying why.
#
# Asserts (each a `hclient prom-check`: the file parses, agrees with the
# JSON written with it -- nbdstripe_up = running, last update =
# updated_unix, states, counters, _sum and _count --, every histogram is
# cumulative with +Inf = _count and a _sum the buckets allow, promtool
# accepts it; within 5 s):
# - served, after 10 reads, 6 writes, 4 trims, 1 zero on member 0 and 5
#   flushes of the volume: up 1; member 0 read/write/trim/zero requests
#   10/6/4/1, latency _count and +Inf bucket the same, bytes 4096 each;
#   member 0's flush requests, _count and +Inf bucket 1 (the first flush
#   syncs the member written, the others find nothing to sync), members
#   1 and 2's 0; no flush bytes counter, no quantile; the JSON's total
#   p50 <= p99 <= sum for each of those, p50 = p99 = sum for member 0's
#   one zero; `nbdstripe status` shows member 0's counts and latencies
#   (p50 <= p99);
# - member 1's reads failing (4 EIO: failing, failed): member 1
#   state="failed" 1, volume state="failed" 1, read errors 4;
# - errors off, member 1 back (MemberRecovered within 5 s): state="ok" 1;
#   a write on members 1 and 2, then 3 flushes: flush requests, _count,
#   +Inf 1 on every member;
# - stopped (SIGTERM): JSON running false; up 0, every state gauge 0,
#   the counters kept (flush requests 1), last update = updated_unix.
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init dpkg-deb tar
"$H_PY" -c 'import prometheus_client.parser' 2>/dev/null ||
  d_fail "$H_PY cannot import prometheus_client: install python3-prometheus-client"

# promtool: on PATH, kept from an earlier run, or taken out of Debian's
# package (see above).
find_promtool ()
{
  local dir=${NBDSTRIPE_TEST_TOOLS:-$D_TMP/tools} deb
  PROMTOOL=$(command -v promtool) && return 0
  PROMTOOL=$dir/promtool
  [[ -x $PROMTOOL ]] && return 0
  command -v apt-get >/dev/null || d_skip "no promtool, and no apt-get to fetch Debian's prometheus package"
  mkdir -p "$D_TMP/deb" "$dir" || d_fail "mkdir $dir"
  if ! (cd "$D_TMP/deb" && apt-get download prometheus) >"$D_TMP/apt.log" 2>&1; then
    # The package lists may be missing or stale.
    (apt-get update -qq && cd "$D_TMP/deb" && apt-get download prometheus) \
      >>"$D_TMP/apt.log" 2>&1 ||
      d_skip "no promtool: apt-get cannot download Debian's prometheus package: $(grep -E '^(E|W):' "$D_TMP/apt.log" | tail -1)"
  fi
  deb=$(ls "$D_TMP"/deb/prometheus_*.deb 2>/dev/null | head -1)
  [[ -n $deb ]] || d_skip "no promtool: apt-get download prometheus left no .deb"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$D_TMP/deb" ./usr/bin/promtool ||
    d_skip "no promtool in $deb"
  install -m 0755 "$D_TMP/deb/usr/bin/promtool" "$PROMTOOL.new" &&
    mv "$PROMTOOL.new" "$PROMTOOL" || d_fail "cannot install promtool in $dir"
  rm -rf "$D_TMP/deb"
}
find_promtool
"$PROMTOOL" --version >/dev/null 2>&1 || d_fail "$PROMTOOL does not run"
d_ok "promtool: $PROMTOOL"

M=$((1024 * 1024))
for i in 0 1 2; do h_member "$i" $((8 * M)) error; done
h_volume 3 0 'metadata = "none";
cache = "direct";'

# prom NAME EXPR...: the files agree and are sound (see above) and every
# EXPR holds, within 5 s, in a rewrite after now (or after $AFTER).
prom ()
{
  local name=$1 e args=()
  shift
  for e in "$@"; do args+=(--expect "$e"); done
  d_run "prom.$name" hc prom-check "$H_STATUS" "$H_PROM" --after "${AFTER-$(h_epoch)}" \
    --deadline 5 --promtool "$PROMTOOL" "${args[@]}"
  if [[ $D_RC -ne 0 ]]; then
    d_bad "$name: the Prometheus file (above)"
    cp "$H_PROM" "$D_TMP/$name.prom"
    return 1
  fi
  d_ok "$name: promtool accepts the file, its figures are right"
}

# A histogram's _count and +Inf bucket both equal N, and its requests.
count_is ()
{
  local op=$1 member=$2 n=$3 b="nbdstripe_member_$1_latency_seconds"
  printf '%s' "v('nbdstripe_member_${op}_requests_total', member=$member) == $n and v('${b}_count', member=$member) == $n and v('${b}_bucket', member=$member, le='+Inf') == $n"
}

d_log "served"
h_serve "$H_CONF"
h_wait_json "the status file is written" 5 'j["running"] is True'
prom fresh "v('nbdstripe_up') == 1" \
  "all(v('nbdstripe_member_state', member=i, path=j['members'][i]['path'], state='ok') == 1 for i in range(3))"

d_log "member 0: 10 reads, 6 writes, 4 trims, 1 zero; 5 flushes"
h_io reads 0 --op read --count 10
h_io writes 0 --op write --count 6 --first-slot 20
h_io trims 0 --op trim --count 4 --first-slot 40
h_io zero 0 --op zero --count 1 --first-slot 60
h_io flushes 0 --op flush --count 5
h_wait_json "the status file has them" 3 \
  'j["members"][0]["ops"]["zero"]["requests"] == 1 and j["members"][0]["ops"]["flush"]["requests"] == 1'
h_status_cmd status
[[ $D_RC -eq 0 ]] || d_bad "nbdstripe status exited $D_RC, expected 0 (ok)"
"$H_PY" - "$D_TMP/status.out" <<'PY' || d_bad "nbdstripe status: member 0's row (above)"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[:1] == ["0"]]
bad = []
if len(rows) != 1:
    bad.append("%d rows for member 0" % len(rows))
else:
    r = rows[0]
    if r[2] != "10" or r[5] != "6" or r[8] != "4/1/1":
        bad.append("reads %s, writes %s, trim/zero/flush %s: expected 10, 6, 4/1/1"
                   % (r[2], r[5], r[8]))
    lat = r[9:13]
    if any(x != "-" and not x.replace(".", "", 1).isdigit() for x in lat):
        bad.append("latencies %s" % lat)
    for p50, p99 in ((lat[0], lat[1]), (lat[2], lat[3])):
        if "-" not in (p50, p99) and float(p50) > float(p99):
            bad.append("p50 %s > p99 %s" % (p50, p99))
for b in bad:
    print("status: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
prom served "v('nbdstripe_up') == 1" \
  "$(count_is read 0 10)" "$(count_is write 0 6)" "$(count_is trim 0 4)" \
  "$(count_is zero 0 1)" \
  "$(count_is flush 0 1)" "$(count_is flush 1 0)" "$(count_is flush 2 0)" \
  "v('nbdstripe_member_read_bytes_total', member=0) == 10 * 4096" \
  "v('nbdstripe_member_write_bytes_total', member=0) == 6 * 4096" \
  "v('nbdstripe_member_trim_bytes_total', member=0) == 4 * 4096" \
  "v('nbdstripe_member_read_requests_total', member=1) == 0" \
  "v('nbdstripe_member_flush_latency_seconds_sum', member=0) > 0" \
  "all(v('nbdstripe_member_flush_latency_seconds_sum', member=i) == 0 for i in (1, 2))"
h_check "the JSON's p50 <= p99 <= sum (total latency)" \
  'all(o["total_latency_us"]["p50"] <= o["total_latency_us"]["p99"] <= o["total_latency_us"]["sum"] for m in j["members"] for o in m["ops"].values() if o["total_latency_us"]["p50"] is not None)'
h_check "one zero: its p50 and p99 are its latency (the sum)" \
  'j["members"][0]["ops"]["zero"]["total_latency_us"]["p50"] == j["members"][0]["ops"]["zero"]["total_latency_us"]["p99"] == j["members"][0]["ops"]["zero"]["total_latency_us"]["sum"] > 0'

d_log "member 1's reads fail: failing, failed"
h_inject 1 read on
h_io err1 1 --count 1 --expect EIO --bound 1
h_expect_event MemberFailing 1 3
h_io err2 1 --count 3 --first-slot 2 --expect EIO --bound 1
h_expect_event MemberFailed 1 3
prom failed "v('nbdstripe_up') == 1" \
  "v('nbdstripe_member_state', member=1, path=j['members'][1]['path'], state='failed') == 1" \
  "v('nbdstripe_volume_state', state='failed') == 1" \
  "v('nbdstripe_member_read_errors_total', member=1) == 4" \
  "v('nbdstripe_member_read_requests_total', member=1) == 4" \
  "v('nbdstripe_member_read_latency_seconds_count', member=1) == 0"

d_log "errors off: member 1 back"
h_inject 1 read off
h_expect_event MemberRecovered 1 5
h_io writes1 1 --op write --count 1 --first-slot 30
h_io writes2 2 --op write --count 1 --first-slot 30
h_io flushes2 0 --op flush --count 3
prom recovered "v('nbdstripe_up') == 1" \
  "v('nbdstripe_member_state', member=1, path=j['members'][1]['path'], state='ok') == 1" \
  "v('nbdstripe_volume_state', state='ok') == 1" \
  "$(count_is flush 0 1)" "$(count_is flush 1 1)" "$(count_is flush 2 1)"

d_log "stopped"
d_stop "$D_SERVER_PID"
h_check "the last status says running false" 'j["running"] is False'
AFTER=0 prom stopped "v('nbdstripe_up') == 0" \
  "sum(x for x in [v('nbdstripe_volume_state', state=s) for s in ('ok', 'degraded', 'failed')]) == 0" \
  "all(v('nbdstripe_member_state', member=i, path=j['members'][i]['path'], state=s) == 0 for i in range(3) for s in ('ok', 'slow', 'full', 'failing', 'failed'))" \
  "$(count_is flush 0 1)" "$(count_is read 0 10)"
d_done
