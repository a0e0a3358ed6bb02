#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Injected read errors on member 1 of 4: the member goes failing, then
# failed, requests touching it fail fast while the others go on with the
# right data, the hook runs with the right arguments, and the member comes
# back once the errors stop.
#
# Volume: 4 members of 8 MiB (nbdkit file + error filter behind nbdfuse),
# chunk 64K, metadata "none", cache "direct" (every read reaches the member
# server: see tests/lib/health.sh), health interval 1 s, window 3 s,
# error_threshold 4, probe_interval 1 s, io_timeout 5 s, slow_factor 10 (so
# that no member is called slow by the noise of a busy 2-core machine).
#
# Asserts (bounds in seconds):
# - before: 8 reads on each member succeed with the bytes of its backing
#   file; status: volume ok, every member ok.
# - errors switched on for member 1's reads (error-pread-file): one read
#   touching member 1 gets EIO (<= 1 s); hook MemberFailing hvol 1 PATH
#   (within 3 s); status at once: member 1 failing, consecutive_errors 1,
#   volume degraded; then (<= 3 s) read.errors +1, read.requests +1,
#   last_error {op read, errno 5, error EIO, offset 65536}; reads on
#   members 0, 2, 3 succeed with the right bytes (<= 1 s each).
# - 3 more reads touching member 1: EIO each (<= 1 s); hook MemberFailed
#   (within 3 s); status at once: member 1 failed, consecutive_errors 4
#   (error_threshold), volume failed, reason not empty; then (<= 3 s)
#   read.errors +4, last_error offset 262144 (slot 4).
# - fail fast: 10 reads touching member 1 get EIO within 0.5 s each, and
#   none of them reaches member 1's server (its log filter shows no read at
#   member offsets >= 64K, where only the prober reads offset 0); the
#   member's error counter grows by nothing but failed probes (if the
#   engine counts them); members 0, 2, 3 still answer right (<= 1 s).
# - errors switched off: hook MemberRecovered within 5 s (probe_interval 1
#   + margin); status member 1 ok, consecutive_errors 0, volume ok; reads on
#   member 1 return the right bytes again (<= 1 s).
# - exactly three hook runs in all, in that order, argc 4, the environment
#   (NBDSTRIPE_EVENT, _VOLUME, _MEMBER, _MEMBER_PATH, _STATE) agreeing.
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init

M=$((1024 * 1024))
N=4
CHUNK=65536
for i in 0 1 2 3; do h_member "$i" $((8 * M)) error; done
h_volume "$N" 0 'metadata = "none";
cache = "direct";'
h_serve "$H_CONF"
ORACLE=$(h_oracle)
m1=j[\"members\"][1]

d_log "healthy volume: 8 reads on every member"
for i in 0 1 2 3; do
  h_io "base.m$i" "$i" --count 8 --first-slot 1 --bound 1 --oracle "$ORACLE"
done
h_wait_json "member 1's 8 reads counted" 5 "$m1[\"ops\"][\"read\"][\"requests\"] >= 8"
h_check "volume ok, all members ok" \
  'j["volume"]["state"] == "ok" and all(m["state"] == "ok" for m in j["members"]) and j["running"] is True'
R0=$(h_json "$m1[\"ops\"][\"read\"][\"requests\"]")
E0=$(h_json "$m1[\"ops\"][\"read\"][\"errors\"]")
d_log "member 1 before the fault: $R0 reads, $E0 errors"
probe_reads_0=$(( $(h_member_reads 1 0) - $(h_member_reads 1 "$CHUNK") ))

d_log "errors on for member 1's reads: one read"
h_inject 1 read on
h_io err1 1 --count 1 --first-slot 1 --expect EIO --bound 1
h_expect_event MemberFailing 1 3
h_check "member 1 failing, 1 consecutive error, volume degraded" \
  "$m1[\"state\"] == \"failing\" and $m1[\"consecutive_errors\"] == 1 and j[\"volume\"][\"state\"] == \"degraded\""
h_check "the others ok" 'all(m["state"] == "ok" for m in j["members"] if m["index"] != 1)'
h_wait_json "member 1: read errors +1, requests +1, last_error read EIO at 65536" 3 \
  "$m1[\"ops\"][\"read\"][\"errors\"] == $E0 + 1 and $m1[\"ops\"][\"read\"][\"requests\"] == $R0 + 1 and $m1[\"last_error\"][\"op\"] == \"read\" and $m1[\"last_error\"][\"errno\"] == 5 and $m1[\"last_error\"][\"error\"] == \"EIO\" and $m1[\"last_error\"][\"offset\"] == 65536" \
  "$m1"
for i in 0 2 3; do
  h_io "failing.m$i" "$i" --count 4 --first-slot 9 --bound 1 --oracle "$ORACLE"
done

d_log "3 more reads touching member 1 (error_threshold 4)"
h_io err2 1 --count 3 --first-slot 2 --expect EIO --bound 1
h_expect_event MemberFailed 1 3
h_check "member 1 failed, 4 consecutive errors, reason given, volume failed" \
  "$m1[\"state\"] == \"failed\" and $m1[\"consecutive_errors\"] == 4 and $m1[\"reason\"] != \"\" and j[\"volume\"][\"state\"] == \"failed\""
h_check "the others ok" 'all(m["state"] == "ok" for m in j["members"] if m["index"] != 1)'
h_wait_json "member 1: read errors +4, last_error at 262144" 3 \
  "$m1[\"ops\"][\"read\"][\"errors\"] == $E0 + 4 and $m1[\"ops\"][\"read\"][\"requests\"] >= $R0 + 4 and $m1[\"last_error\"][\"offset\"] == 262144" \
  "$m1"

d_log "fail fast: 10 reads touching member 1"
before=$(h_member_reads 1 "$CHUNK")
h_io failfast 1 --count 10 --first-slot 5 --expect EIO --bound 0.5
after=$(h_member_reads 1 "$CHUNK")
if [[ $after -eq $before ]]; then
  d_ok "no fail-fast read reached member 1's server"
else
  d_bad "$((after - before)) of the fail-fast reads reached member 1's server"
fi
for i in 0 2 3; do
  h_io "failed.m$i" "$i" --count 4 --first-slot 13 --bound 1 --oracle "$ORACLE"
done
# Let one rewrite pass, then: errors = E0 + 4 (+ failed probes, at offset 0,
# if the engine counts those).
t=$(h_epoch)
h_wait_json "status rewritten" 3 "j[\"updated_unix\"] > $t"
probes=$(( $(h_member_reads 1 0) - $(h_member_reads 1 "$CHUNK") - probe_reads_0 ))
errs=$(h_json "$m1[\"ops\"][\"read\"][\"errors\"]")
if [[ $errs -eq $((E0 + 4)) || $errs -eq $((E0 + 4 + probes)) ]]; then
  d_ok "member 1: $((errs - E0)) read errors counted (4 requests, $probes probes seen by the server)"
else
  d_bad "member 1: $((errs - E0)) read errors counted; expected 4 (or 4 + $probes probes): fail-fast requests counted as member errors?"
fi

d_log "errors off: member 1 comes back"
h_inject 1 read off
h_expect_event MemberRecovered 1 5
h_check "member 1 ok, 0 consecutive errors, volume ok" \
  "$m1[\"state\"] == \"ok\" and $m1[\"consecutive_errors\"] == 0 and j[\"volume\"][\"state\"] == \"ok\""
h_io recovered 1 --count 8 --first-slot 1 --bound 1 --oracle "$ORACLE"
h_no_event "after recovery"
[[ $(wc -l <"$D_TMP/hook.log") -eq 3 ]] ||
  { d_bad "the hook ran $(wc -l <"$D_TMP/hook.log") times, expected 3"; cat "$D_TMP/hook.log" >&2; }
d_done
