#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe stop` run at once after `nbdstripe serve` has returned finds
# the server it was asked to stop (#34, item 7: it once said "v: not
# running" and left the server serving).
#
# The volume has no serve.pidfile, and when serve returns its status file
# is the previous run's: one written here at first, naming a dead pid and
# "running": false, then the one each stopped server left.  The new server
# writes its own only once its health thread runs, after nbdkit went to
# the background, so stop must not lean on the status file.  Each round,
# serve then stop at once:
#   - serve exits 0; stop exits 0 saying "s0: stopped (server pid P)";
#   - P has gone when stop returns;
#   - no process serving this config (config=CONFIG on its command line)
#     is left.
# Rounds:
#   - N rounds as they come (the new server may or may not have written
#     its status file before stop reads it: the race as users meet it);
#   - as root, N rounds with the window held open: the previous run's
#     status file bind-mounted over the status file, which the servers
#     then cannot replace (rename: EBUSY), so that stop always reads a
#     status file naming a dead server;
#   - stop --json: stopped true, the server's pid.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init

ROUNDS=${ROUNDS:-6}
M=$((1024 * 1024))
truncate -s $((4 * M)) m0 m1
CONF=$D_TMP/s0.conf
STATUS=$D_TMP/s0.status.json
d_conf "$CONF" s0 64K "socket = \"$D_TMP/s0.sock\";" "$D_TMP/m0" "$D_TMP/m1"
printf 'metadata = "none";\nhealth = { status_file = "%s"; interval = 1; };\n' \
  "$STATUS" >>"$CONF"

# servers: the pids of the processes whose command line serves CONF (the
# test's own servers: CONF is in this test's directory).
servers ()
{
  local f
  for f in /proc/[0-9]*/cmdline; do
    tr '\0' '\n' 2>/dev/null <"$f" | grep -q -x -F "config=$CONF" &&
      { f=${f#/proc/}; printf '%s\n' "${f%/cmdline}"; }
  done
}

# A pid that is certainly not running: a child that has exited and been
# reaped.
( exit 0 ) &
dead=$!
wait "$dead"
kill -0 "$dead" 2>/dev/null && d_skip "pid $dead was reused at once"
# The last words of a server that ran before: stopped, its pid gone.
cat >"$STATUS" <<EOF
{ "format": 1, "running": false, "pid": $dead,
  "updated_unix": $(date +%s), "interval": 1,
  "volume": { "name": "s0", "config": "$CONF", "state": "ok" },
  "members": [] }
EOF

# round NAME [--json]: serve, then stop at once; the checks above.
round ()
{
  local name=$1 json=${2-} pid left
  d_run "$name.serve" d_ns_serve "$CONF"
  [[ $D_RC -eq 0 ]] || d_fail "$name.serve: exit $D_RC"
  d_run "$name.stop" d_ns stop $json "$CONF"
  if [[ -n $json ]]; then
    pid=$(jq -r 'select(.stopped == true) | .pid' "$D_TMP/$name.stop.out")
  else
    pid=$(sed -n 's/^s0: stopped (server pid \([0-9]*\))$/\1/p' \
      "$D_TMP/$name.stop.out")
  fi
  if [[ $D_RC -ne 0 || -z $pid ]]; then
    d_bad "$name: stop right after serve: exit $D_RC, no server stopped"
  elif [[ -e /proc/$pid ]] &&
       ! grep -q -E '^[0-9]+ \(.*\) [ZX] ' "/proc/$pid/stat" 2>/dev/null; then
    d_bad "$name: stop exited 0, but the server $pid still runs"
  fi
  # Whatever stop did, no server of ours outlives the round.
  left=$(servers)
  if [[ -n $left ]]; then
    d_bad "$name: still served after stop, by pid(s) $(echo $left)"
    for pid in $left; do
      kill -TERM "$pid" 2>/dev/null
      d_wait_gone "$pid" 30 || d_fail "server $pid did not exit"
    done
  fi
}

before=$D_FAILS
for ((i = 1; i <= ROUNDS; i++)); do round "r$i"; done
[[ $D_FAILS -eq $before ]] &&
  d_ok "$ROUNDS rounds: stop right after serve stopped the server"

if [[ $(id -u) -eq 0 ]]; then
  cp "$STATUS" "$D_TMP/last-words.json"
  mount --bind "$D_TMP/last-words.json" "$STATUS" ||
    d_fail "cannot bind-mount over $STATUS"
  D_MOUNTS+=("$STATUS")
  before=$D_FAILS
  for ((i = 1; i <= ROUNDS; i++)); do round "held$i"; done
  [[ $D_FAILS -eq $before ]] &&
    d_ok "$ROUNDS rounds, the status file the previous run's: stop stopped the server"
  umount "$STATUS" && D_MOUNTS=()
else
  printf 'SKIP (part): not root, the status file cannot be held\n'
fi

before=$D_FAILS
for ((i = 1; i <= 2; i++)); do round "j$i" --json; done
[[ $D_FAILS -eq $before ]] &&
  d_ok "stop --json right after serve: stopped true, the server's pid"
d_done
