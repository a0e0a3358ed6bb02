#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe status CONFIG [--json]` exit codes: 0 ok, 1 degraded, 2 failed,
# 3 not running (no status file, server stopped, server killed); --json's
# "state" the same verdict by name.
#
# Volume: 3 members of 8 MiB (nbdkit file + error filter behind nbdfuse),
# chunk 64K, metadata "none", cache "direct"; health interval 1 s, window
# 3 s, error_threshold 4, probe_interval 1 s, io_timeout 5 s, slow_factor
# 10.
#
# Asserts (bounds in seconds):
# - before the server ever ran (no status file): exit 3, --json says
#   "not-running";
# - served, status file written (<= 5 s): exit 0, and with --json exit 0
#   and a JSON document on stdout whose state is "ok";
# - one injected read error on member 1 (hook MemberFailing within 3 s):
#   exit 1; --json says "degraded";
# - 3 more (hook MemberFailed within 3 s): exit 2; --json says "failed";
# - errors off (hook MemberRecovered within 5 s): exit 0;
# - server stopped (SIGTERM, waited for): the status file says running
#   false (its volume state the last one, ok), exit 3, --json says
#   "not-running" (#34: it used to be read as "ok");
# - served again: exit 0 once the new server's status is written (<= 5 s);
#   server killed (SIGKILL: its last status still says running): exit 3
#   within 8 s (the pid is gone; a status older than a few intervals is
#   stale).
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init
h_has_status_cmd || d_fail "$NBDSTRIPE has no status sub-command"

M=$((1024 * 1024))
N=3
CHUNK=65536
for i in 0 1 2; do h_member "$i" $((8 * M)) error; done
h_volume "$N" 0 'metadata = "none";
cache = "direct";'

# expect_status NAME CODE [STATE]: exit CODE; with STATE, --json too.
expect_status ()
{
  local name=$1 code=$2 state=${3:-} got
  h_status_cmd "$name"
  if [[ $D_RC -ne $code ]]; then
    d_bad "$name: nbdstripe status exited $D_RC, expected $code"
    return
  fi
  d_ok "$name: exit $code"
  [[ -n $state ]] || return
  h_status_cmd "$name.json" --json
  [[ $D_RC -eq $code ]] || d_bad "$name: nbdstripe status --json exited $D_RC, expected $code"
  got=$("$H_PY" -c 'import json, sys; print(json.load(sys.stdin)["state"])' \
        <"$D_TMP/$name.json.out" 2>&1)
  [[ $got == "$state" ]] ||
    d_bad "$name: --json: state '$got', expected '$state'"
}

# wait_status NAME CODE SECONDS: poll until the exit status is CODE.
wait_status ()
{
  local name=$1 code=$2 secs=$3 end rc
  end=$((SECONDS + secs + 1))
  while :; do
    rc=0
    d_ns status "$H_CONF" >/dev/null 2>&1 || rc=$?
    [[ $rc -eq $code ]] && { d_ok "$name: exit $code"; return 0; }
    if [[ $SECONDS -ge $end ]]; then
      h_status_cmd "$name"
      d_bad "$name: nbdstripe status still exits $rc after $secs s, expected $code"
      return 1
    fi
    sleep 0.1   # polling a file with a deadline: no event to wait for
  done
}

d_log "never served"
expect_status never 3 not-running

d_log "served, healthy"
h_serve "$H_CONF"
pid1=$D_SERVER_PID
h_wait_json "the status file is written" 5 'j["running"] is True'
expect_status ok 0 ok

d_log "one read error on member 1: degraded"
h_inject 1 read on
h_io err1 1 --count 1 --expect EIO --bound 1
h_expect_event MemberFailing 1 3
expect_status degraded 1 degraded

d_log "error_threshold reached: failed"
h_io err2 1 --count 3 --first-slot 2 --expect EIO --bound 1
h_expect_event MemberFailed 1 3
expect_status failed 2 failed

d_log "errors off: ok again"
h_inject 1 read off
h_expect_event MemberRecovered 1 5
expect_status recovered 0 ok

d_log "server stopped"
d_stop "$pid1"
h_check "the last status says running false, the volume ok" \
  'j["running"] is False and j["volume"]["state"] == "ok"'
expect_status stopped 3 not-running

d_log "served again, then killed"
h_serve "$H_CONF"
pid2=$D_SERVER_PID
h_wait_json "the new server's status is written" 5 "j[\"running\"] is True and j[\"pid\"] == $pid2"
expect_status again 0 ok
kill -KILL "$pid2"
d_wait_gone "$pid2" 10 || d_fail "server $pid2 survived SIGKILL"
D_PIDS=()
wait_status killed 3 8
d_done
