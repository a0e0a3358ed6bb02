#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe scrub: a patrol read of a served volume finds the unreadable
# places where they are, says them as the volume's logical byte ranges
# and per member, and makes those members failing.
#
# Three members of 8 MiB (64K chunks, data from 1 MiB): m0 a file, m1 and
# m2 NBD exports of stock nbdkit (file plugin).  The volume is created
# and a random pattern written through it; then m1 and m2 are served
# again behind nbdkit's ddrescue filter (read-only: the volume is served
# with -r), whose mapfiles make reads fail at exact member offsets:
#   B1  20K of m1 across a chunk boundary: two logical ranges;
#   B2  4K of m2, in the middle of a chunk;
# and m2 also behind the pause filter.  The expected logical ranges come
# from rp_logical (tests/lib/replace.sh: md raid0's arithmetic for equal
# members, written independently of the plugin's layout code).
#
#   1. m2 paused: a scrub started reads m0 and m1's first pieces and
#      waits on m2; meanwhile a client reads chunks on m0 and m1 and gets
#      the pattern, and the scrub is still running (by construction: it
#      cannot pass m2).  m2 resumed: it ends.
#   2. scrub --wait --json: exit 1; "unreadable" is exactly B1's two and
#      B2's one logical range, sorted; per member, m1's and m2's member
#      offsets; every byte of the three data areas read; members 1 and 2
#      failing with "scrub: N unreadable bytes ...", member 0 ok, the
#      volume degraded; the hook got MemberFailing for both; Prometheus
#      nbdstripe_scrub_unreadable_bytes per member; `nbdstripe status`
#      names the reasons and the Scrub line; at --rate 64M the scrub took
#      at least what the rate allows.
#   3. m1's server killed and started again without the filter (its bad
#      blocks rewritten): member 1 re-probed and adopted, failing still
#      for the finding; a scrub reads all of m1, member 1 is ok again; m2
#      still failing.
#   4. --cancel with no scrub running: refused; a scrub held on paused
#      m2, cancelled: state cancelled, exit 1 from --wait's caller;
#      member 2 keeps the earlier finding.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd
nbdkit --dump-config >/dev/null 2>&1 || d_skip "nbdkit does not run"
nbdkit --filter=ddrescue null --dump-plugin >/dev/null 2>&1 ||
  d_skip "nbdkit has no ddrescue filter"

size=$((8 * M))
RP_DO=$M
C=$((64 * K))
for f in m0 m1.back m2.back; do truncate -s "$size" "$D_TMP/$f"; done
B1_at=$((RP_DO + 25 * C - 8 * K)) B1_len=$((20 * K))
B2_at=$((RP_DO + 70 * C + 12 * K)) B2_len=$((4 * K))

r_unix m1 file "$D_TMP/m1.back"
M1_PID=$R_PID M1_URI=$R_URI
r_unix m2 file "$D_TMP/m2.back"
M2_PID=$R_PID M2_URI=$R_URI
HOOK=$D_TMP/hook.sh
printf '#!/bin/sh\necho "$1 $3 $NBDSTRIPE_REASON" >>%s/hook.log\n' "$D_TMP" >"$HOOK"
chmod 755 "$HOOK"
rp_volume vol 64K "" "$D_TMP/m0" "$M1_URI" "$M2_URI"
PROM=$D_TMP/vol.prom
sed -i "s|^health = { status_file = \"\\(.*\\)\"; };|health = { status_file = \"\\1\"; interval = 1; prometheus_file = \"$PROM\"; on_change = \"$HOOK\"; };|" "$RP_CONF"
grep -q prometheus_file "$RP_CONF" || d_fail "could not set the health group"
rp_create
vsize=$((3 * (size - M)))
d_random "$D_TMP/pattern" "$vsize"
rp_start write
rp_write_pattern "$D_TMP/pattern"
rp_stop
d_stop "$M1_PID"
d_stop "$M2_PID"

# mapfile FILE BAD_AT BAD_LEN: a GNU ddrescue mapfile of a member whose
# bytes [BAD_AT, BAD_AT + BAD_LEN) are bad, the rest rescued.
mapfile ()
{
  {
    echo "# Mapfile. Created by GNU ddrescue version 1.23"
    echo "# current_pos  current_status  current_pass"
    printf '0x%08x     +               1\n' 0
    echo "#      pos        size  status"
    printf '0x%08x  0x%08x  +\n' 0 "$2"
    printf '0x%08x  0x%08x  -\n' "$2" "$3"
    printf '0x%08x  0x%08x  +\n' "$(($2 + $3))" "$((size - $2 - $3))"
  } >"$1"
}
mapfile "$D_TMP/m1.map" "$B1_at" "$B1_len"
mapfile "$D_TMP/m2.map" "$B2_at" "$B2_len"
r_unix m1 --filter=ddrescue file "$D_TMP/m1.back" ddrescue-mapfile="$D_TMP/m1.map"
M1_PID=$R_PID
r_unix m2 --filter=pause --filter=ddrescue file "$D_TMP/m2.back" \
  ddrescue-mapfile="$D_TMP/m2.map" pause-control="$D_TMP/m2.pause"
M2_PID=$R_PID
rp_start serve -r

# expected I AT LEN: member I's bytes [AT, AT+LEN) as the volume's logical
# ranges, "OFFSET LENGTH" a line (each piece within one chunk).
expected ()
{
  local i=$1 at=$2 end=$(($2 + $3)) n
  while [[ $at -lt $end ]]; do
    n=$(( C - (at - RP_DO) % C ))
    [[ $n -le $((end - at)) ]] || n=$((end - at))
    echo "$(rp_logical "$i" "$at") $n"
    at=$((at + n))
  done
}
want=$( { expected 1 "$B1_at" "$B1_len"; expected 2 "$B2_at" "$B2_len"; } | sort -n)
[[ $(wc -l <<<"$want") -eq 3 ]] || d_fail "B1 should span two chunks"
m2ctl () { "$RP_PY" "$RP_LIB/hclient.py" pause "$D_TMP/m2.pause" "$1" ||
             d_fail "m2's pause filter: $1"; }
until_status () { rp_ctl until "$1" "${2:-20}" >"$D_TMP/until.json"; }

d_log "1. a scrub held on a paused member; clients go on meanwhile"
m2ctl p
d_run scrub1 d_ns scrub --rate 1G "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_fail "scrub (no --wait): exit $D_RC"
until_status 's["scrub"]["state"] == "running" and s["scrub"]["members"][1]["bytes_read"] > 0' ||
  d_fail "the scrub did not start reading"
# Logical chunks on m0 and m1 (k % 3 != 2) of the first 20 stripes (B1
# is in stripes 24 and 25), read by a client while the scrub waits on m2.
"$RP_PY" - "$RP_URI" "$D_TMP/pattern" "$C" <<'EOF' || d_bad "a client read during the scrub failed or read wrong data"
import nbd, sys
uri, pattern, C = sys.argv[1], sys.argv[2], int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
data = open(pattern, "rb").read()
for k in range(60):
    if k % 3 == 2:
        continue
    if h.pread(C, k * C) != data[k * C:(k + 1) * C]:
        sys.exit("logical chunk %d differs" % k)
h.shutdown()
EOF
until_status 's["scrub"]["state"] == "running" and s["scrub"]["bytes_read"] < s["scrub"]["bytes_total"]' 2 &&
  d_ok "clients read the pattern from m0 and m1 while the scrub waited on m2" ||
  d_bad "the scrub was not running any more while m2 was paused"
m2ctl r
until_status 's["scrub"]["state"] == "done"' ||
  d_fail "the scrub did not end once m2 was resumed"

d_log "2. scrub --wait --json: the unreadable places, where they are"
t0=$EPOCHREALTIME
d_run scrub2 d_ns scrub --wait --json --rate 64M "$RP_CONF"
elapsed_ms=$(r_elapsed_ms "$t0")
d_expect_fail scrub2
J=$D_TMP/scrub2.last # JSON Lines: the progress, then the result
tail -n 1 "$D_TMP/scrub2.out" >"$J"
got=$(jq -r '.unreadable[] | "\(.offset) \(.length)"' "$J")
if [[ $got == "$want" ]]; then
  d_ok "unreadable: exactly the logical ranges of B1 and B2: $(echo $want)"
else
  d_bad "unreadable: '$(echo $got)', expected '$(echo $want)'"
fi
jq -e '.scrub.unreadable == .unreadable and .finished == true
       and .started == true and .scrub.state == "done"' "$J" >/dev/null ||
  d_bad "scrub2: the JSON's state, started, finished"
jq -e --argjson b1 "$B1_at" --argjson b2 "$B2_at" --argjson t "$((size - M))" '
  .scrub.members[0].unreadable == []
  and .scrub.members[1].unreadable == [{"member_offset": $b1, "length": 20480}]
  and .scrub.members[2].unreadable == [{"member_offset": $b2, "length": 4096}]
  and .scrub.unreadable_bytes == 24576
  and ([.scrub.members[].bytes_read] == [$t, $t, $t])
  and .scrub.bytes_read == 3 * $t and .scrub.bytes_total == 3 * $t
  and ([.scrub.members[].skipped] == [null, null, null])' "$J" >/dev/null &&
  d_ok "per member: m1's and m2's member offsets, every byte read" ||
  { d_bad "per member: not as expected"; jq -c .scrub "$J" >&2; }
d_expect_err scrub2 "3 unreadable ranges"
# At 64 MiB/s, 21 MiB take at least 0.31 s (the rate is a ceiling).
min_ms=$(( 3 * (size - M) * 1000 / (64 * M) ))
((elapsed_ms >= min_ms)) &&
  d_ok "the rate held: $elapsed_ms ms >= $min_ms ms for 3 x 7 MiB at 64 MiB/s" ||
  d_bad "the scrub took $elapsed_ms ms, less than $min_ms ms at 64 MiB/s"

until_status '[m["state"] for m in s["members"]] == ["ok", "failing", "failing"]' ||
  d_fail "members 1 and 2 are not failing"
jq -e --argjson b1 "$B1_at" --argjson b2 "$B2_at" '
  .members[1].reason == "scrub: 20480 unreadable bytes in 1 place, the first at member offset \($b1)"
  and .members[2].reason == "scrub: 4096 unreadable bytes in 1 place, the first at member offset \($b2)"
  and .volume.state == "degraded"' "$D_TMP/until.json" >/dev/null &&
  d_ok "members 1 and 2 failing with the reason, the volume degraded" ||
  { d_bad "the members' reasons"; jq -c '[.members[] | {state, reason}]' "$D_TMP/until.json" >&2; }
for i in 1 2; do
  grep -q "^MemberFailing $i scrub: " "$D_TMP/hook.log" 2>/dev/null &&
    d_ok "hook: MemberFailing for member $i, the reason the scrub's" ||
    d_bad "hook: no MemberFailing for member $i with a scrub reason"
done
d_run status2 d_ns status "$RP_CONF"
[[ $D_RC -eq 1 ]] || d_bad "status2: exit $D_RC, expected 1 (degraded)"
grep -q -E '^ +Scrub : done, 100% \(21MiB of 21MiB\), .*, 3 unreadable ranges$' \
  "$D_TMP/status2.out" && grep -q "member 2 failing for .*: scrub: 4096" "$D_TMP/status2.out" &&
  d_ok "nbdstripe status: the Scrub line, member 2's reason" ||
  d_bad "nbdstripe status: no Scrub line or reason as expected"
deadline=$((SECONDS + 10))
until grep -q -x "nbdstripe_scrub_unreadable_bytes{volume=\"vol\",member=\"1\"} 20480" "$PROM" 2>/dev/null &&
      grep -q -x "nbdstripe_scrub_unreadable_bytes{volume=\"vol\",member=\"0\"} 0" "$PROM" &&
      grep -q -x "nbdstripe_scrub_running{volume=\"vol\"} 0" "$PROM"; do
  ((SECONDS < deadline)) || { d_bad "Prometheus: no scrub gauges as expected"; break; }
  sleep 0.2
done
((SECONDS < deadline)) && d_ok "Prometheus: nbdstripe_scrub_unreadable_bytes per member"

d_log "3. m1's bad blocks gone: a scrub that reads all of m1 lifts its finding"
# Killed (a TERM would wait for the volume's connections): the volume
# fails m1, re-probes it, and adopts the server started again -- failing
# still, for the scrub's finding.
kill -KILL "$M1_PID"
d_wait_gone "$M1_PID" 30 || d_fail "m1's server did not die"
rp_forget "$M1_PID"
r_unix m1 file "$D_TMP/m1.back"
M1_PID=$R_PID
until_status 's["members"][1]["state"] == "failed"' 30 ||
  d_fail "member 1 not failed once its server was killed"
until_status 's["members"][1]["state"] == "failing" and s["members"][1]["reason"].startswith("scrub: ")' 30 ||
  d_fail "member 1 not back (failing, for the scrub's finding): $(jq -c '.members[1] | {state, reason}' "$D_TMP/until.json")"
d_ok "member 1 re-probed: failing still, for the scrub's finding"
d_run scrub3 d_ns scrub --wait --json --rate 1G "$RP_CONF"
d_expect_fail scrub3
got=$(tail -n 1 "$D_TMP/scrub3.out" | jq -r '.unreadable[] | "\(.offset) \(.length)"')
[[ $got == "$(expected 2 "$B2_at" "$B2_len")" ]] ||
  d_bad "scrub3: unreadable '$got', expected B2's range alone"
until_status '[m["state"] for m in s["members"]] == ["ok", "ok", "failing"]' &&
  d_ok "member 1 ok again, member 2 still failing" ||
  d_bad "after scrub3: $(jq -c '[.members[] | .state]' "$D_TMP/until.json")"

d_log "4. --cancel"
d_run cancel0 d_ns scrub --cancel "$RP_CONF"
d_expect_fail cancel0
d_expect_err cancel0 "no scrub is running"
m2ctl p
d_run scrub4 d_ns scrub --json --rate 1G "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_fail "scrub4: exit $D_RC"
until_status 's["scrub"]["state"] == "running" and s["scrub"]["members"][1]["bytes_read"] > 0' ||
  d_fail "scrub4 did not start reading"
d_run scrub4b d_ns scrub --rate 1G "$RP_CONF"
d_expect_fail scrub4b
d_expect_err scrub4b "scrub refused: a scrub is under way ("
d_run cancel1 d_ns scrub --cancel "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "cancel1: exit $D_RC"
m2ctl r
until_status 's["scrub"]["state"] == "cancelled" and s["members"][2]["state"] == "failing"' &&
  d_ok "cancelled; member 2 keeps the earlier finding" ||
  d_bad "after the cancel: $(jq -c '{scrub: .scrub.state, m2: .members[2].state}' "$D_TMP/until.json")"
d_done
