#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two members' reads that complete together -- page-cache hits, done
# within the submission of the executor's ring and found by one reap --
# are still timed each on its own: their latency sums differ (issue 34:
# one clock read ended every op of a reap, and two members' sums in the
# Prometheus file were equal to the nanosecond).
#
# Volume: 2 members of 8 MiB, plain files just written (their pages in
# the page cache; no FUSE, no member server), chunk 64K, metadata "none",
# cache "writeback"; the health settings of health.sh with slow_factor
# 1000 (figures, no verdict).
#
# Load: 40 reads of 128 KiB at the start of a stripe, one at a time: each
# is a chunk of member 0 and a chunk of member 1, in the ring together.
#
# Asserts (hclient prom-check: the Prometheus file and the JSON agree and
# are sound, within 5 s):
# - each member: 40 read requests, latency _count 40;
# - the two members' read latency _sum (seconds to the ns) differ;
# - no hook ran (no state changed).
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init
"$H_PY" -c 'import prometheus_client.parser' 2>/dev/null ||
  d_fail "$H_PY cannot import prometheus_client: install python3-prometheus-client"

M=$((1024 * 1024))
READS=40
for i in 0 1; do d_random "$D_TMP/m$i" $((8 * M)); done
h_volume 2 0 'metadata = "none";
cache = "writeback";' slow_factor=1000.0
h_serve "$H_CONF"
h_wait_json "the status file is written" 5 'j["running"] is True'

d_log "$READS reads of 128 KiB, each on both members"
h_io reads 0 --op read --size 131072 --count "$READS"

sum () { printf "v('nbdstripe_member_read_latency_seconds_sum', member=%s)" "$1"; }
d_run prom hc prom-check "$H_STATUS" "$H_PROM" --deadline 5 \
  --expect "all(v('nbdstripe_member_read_requests_total', member=i) == $READS and v('nbdstripe_member_read_latency_seconds_count', member=i) == $READS for i in (0, 1))" \
  --expect "$(sum 0) != $(sum 1)"
if [[ $D_RC -eq 0 ]]; then
  d_ok "the members' read latency sums differ"
else
  d_bad "the members' read latency sums (above)"
fi
grep '^nbdstripe_member_read_latency_seconds_sum' "$H_PROM"
h_no_event "after the reads"
d_done
