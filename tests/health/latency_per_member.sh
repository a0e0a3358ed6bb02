#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Each member's latency is its own: of two members whose every request
# is one and the same volume request, the one behind a delay shows that
# delay in its latency sum and the other does not (issue 34: two
# members' sums in the Prometheus file were equal to the nanosecond).
#
# Volume: 2 members of 8 MiB (nbdkit file behind nbdfuse; member 1 also
# behind the delay filter, 5 ms a read), chunk 64K, metadata "none",
# cache "direct" (every read reaches the member's server); the health
# settings of health.sh with slow_factor 1000 (figures, no verdict).
#
# Load: 40 reads of 128 KiB at the start of a stripe, one at a time: each
# is a chunk of member 0 and a chunk of member 1, in flight together
# (the executor's ring).
#
# Asserts (hclient prom-check: the Prometheus file and the JSON agree and
# are sound, within 5 s):
# - each member: 40 read requests, latency _count 40;
# - member 1's read latency _sum exceeds member 0's by at least
#   40 x 2.5 ms, half of what the delay filter added to member 1's reads
#   alone;
# - no hook ran (no state changed).
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init
"$H_PY" -c 'import prometheus_client.parser' 2>/dev/null ||
  d_fail "$H_PY cannot import prometheus_client: install python3-prometheus-client"

M=$((1024 * 1024))
READS=40
h_member 0 $((8 * M)) plain
h_member 1 $((8 * M)) delay=5ms
h_volume 2 0 'metadata = "none";
cache = "direct";' slow_factor=1000.0
h_serve "$H_CONF"
h_wait_json "the status file is written" 5 'j["running"] is True'

d_log "$READS reads of 128 KiB, each on both members"
h_io reads 0 --op read --size 131072 --count "$READS"

sum () { printf "v('nbdstripe_member_read_latency_seconds_sum', member=%s)" "$1"; }
d_run prom hc prom-check "$H_STATUS" "$H_PROM" --deadline 5 \
  --expect "all(v('nbdstripe_member_read_requests_total', member=i) == $READS and v('nbdstripe_member_read_latency_seconds_count', member=i) == $READS for i in (0, 1))" \
  --expect "$(sum 1) - $(sum 0) >= $READS * 0.0025"
if [[ $D_RC -eq 0 ]]; then
  d_ok "member 1's read latency sum exceeds member 0's by >= $READS x 2.5 ms"
else
  d_bad "the members' read latency sums (above)"
fi
hc json "$H_STATUS" '[(m["index"], m["ops"]["read"]["total_latency_us"]) for m in j["members"]]'
h_no_event "after the reads"
d_done
