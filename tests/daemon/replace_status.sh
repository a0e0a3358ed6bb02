#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe status shows a replace (#15): live from the volume's control
# socket while the server answers there, else from the status file.
#
#   mid-copy (the copier held at the end of its first 4 MiB window of 4:
#   the server runs with -D stripe.replace_gate=1, the test lets the
#   copier go phase by phase with tests/lib/replace_ctl.py hold, so
#   "mid-copy" is made, not hoped for): status prints "Replace : member
#   1 -> NEW: copying, P% (X of Y), R/s, ETA S s" with 0 < P < 100 and
#   says the status came from the control socket; status --json's
#   status is the live status (source control_socket), its "replace"
#   object copying, 0 < bytes_copied < bytes_total, a rate and an ETA.  The status file is written once an
#   hour here, so only the live answer can show the copy.
#   the socket moved away: status and status --json are the status file's
#   (--json's status is the file itself), no control socket line
#   after the copy: "done, 100% (Y of Y), R/s, in D", bytes_copied ==
#   bytes_total, no ETA; the config names NEW
#   replace --wait (no terminal): progress lines on stdout (a copying
#   one while the copier is held at the end of its first window), the
#   last one "done, 100%"; its exit status 0
#   a control socket that refuses (stale) or never answers (hung): status
#   falls back to the file, within the client's timeout
#   the server stopped: the file's last word, the replace included;
#   --json's state not-running
#   replace --offline --json: JSON Lines, the last replaced true, the replace
#   done; the progress lines before it
#   replace --json with nothing served: started false, the reason
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit jq python3 setsid

M=$((1024 * 1024))
export NBDSTRIPE_CONFDIR=$D_TMP/etc
mkdir -p "$NBDSTRIPE_CONFDIR"
for m in m0 m1 n0 n1 n2; do truncate -s $((17 * M)) "$D_TMP/$m"; done
conf=$NBDSTRIPE_CONFDIR/r0.conf
status=$D_TMP/r0.status.json
ctl=$D_TMP/r0.ctl
sock=$D_TMP/r0.sock
d_conf "$conf" r0 64K "socket = \"$sock\";" "$D_TMP/m0" "$D_TMP/m1"
printf 'data_offset = "1M";\n' >>"$conf"
printf 'health = { status_file = "%s"; interval = 3600; };\n' "$status" >>"$conf"

# expect NAME STATUS -- ARGS...: nbdstripe ARGS exits STATUS.
expect ()
{
  local name=$1 want=$2
  shift 3
  d_run "$name" d_ns "$@"
  [[ $D_RC -eq $want ]] || d_bad "$name: nbdstripe $*: exit $D_RC, expected $want"
}
# json NAME JQ: NAME's stdout is one JSON value for which JQ is true.
json ()
{
  python3 -c 'import json, sys; json.load(sys.stdin)' <"$D_TMP/$1.out" ||
    { d_bad "$1: stdout is not JSON"; return 1; }
  jq -e "$2" "$D_TMP/$1.out" >/dev/null ||
    { d_bad "$1: not true of its JSON: $2"; return 1; }
}
# line NAME ERE: NAME's stdout has a line matching ERE.
line ()
{
  grep -q -E -- "$2" "$D_TMP/$1.out" || d_bad "$1: no line matching: $2"
}
# until_json SECONDS JQ: poll status --json (no sleep: each run is the
# pause) until JQ is true of it; 1 if the deadline passed.
until_json ()
{
  local end=$((SECONDS + $1))
  while ((SECONDS < end)); do
    "$NBDSTRIPE" status --json r0 >"$D_TMP/poll.json" 2>/dev/null
    jq -e "$2" "$D_TMP/poll.json" >/dev/null 2>&1 && return 0
  done
  printf 'until_json: not within %s s: %s; last:\n' "$1" "$2" >&2
  cat "$D_TMP/poll.json" >&2
  return 1
}
# hold NAME ARGS...: tests/lib/replace_ctl.py hold ARGS on the volume's
# control socket (the gated copier let go phase by phase up to a phase,
# or to its end), the replace object saved in $D_TMP/NAME.json (and
# shown); returns replace_ctl's status.
hold ()
{
  local name=$1 rc=0
  shift
  python3 "$(dirname "$0")/../lib/replace_ctl.py" "$ctl" hold "$@" \
    >"$D_TMP/$name.json" || rc=$?
  printf -- '-- %s: hold %s -> %d: %s\n' "$name" "$*" "$rc" \
    "$(cut -c1-600 "$D_TMP/$name.json")"
  return "$rc"
}
num='[0-9][0-9.]*'
size="$num(KiB|MiB| bytes)"

expect replace.unserved 1 -- replace --json r0 1 "$D_TMP/n1"
json replace.unserved '.started == false and .replaced == null
  and (.error | contains("not served"))'

expect create 0 -- create r0
d_nbdkit_start r0 -U "$sock" -D stripe.replace_gate=1 \
  "$STRIPE_PLUGIN" config="$conf" || d_fail "the volume's nbdkit did not start"
pid=$D_NBDKIT_PID
# The health thread writes the first status file just after nbdkit is
# ready, and the control socket may come after the pidfile too: wait for
# both (at most 20 s, no sleep).
for ((end = SECONDS + 20; SECONDS < end; )); do
  [[ -s $status && -S $ctl ]] && break
done
[[ -s $status ]] || d_fail "no status file $status"
[[ -S $ctl ]] || d_fail "no control socket $ctl"
expect status.before 0 -- status r0
if grep -q -E '^ +Replace :' "$D_TMP/status.before.out"; then
  d_bad "status.before: a Replace line with no replace"
fi
line status.before "^ +Control socket : $ctl "
d_ok "status before any replace: no replace line, live from $ctl"

# ---- mid-copy -----------------------------------------------------------
expect replace 0 -- replace r0 1 "$D_TMP/n1" --json
json replace '.started == true and .replaced == null and .member == 1
  and .new == "'"$D_TMP/n1"'" and .replace.state == "copying"'
hold mid.held advanced --new "$D_TMP/n1" ||
  d_fail "the copier was not held at the end of its first window"
jq -e '.state == "copying" and .phase == "advanced" and .phase_held
  and .bytes_copied == 4194304 and .bytes_total == 16777216' \
  "$D_TMP/mid.held.json" >/dev/null ||
  d_fail "the copier is not held copying after its first window"
until_json 20 '.status.replace.state == "copying" and .status.replace.bytes_copied > 0' ||
  d_fail "the copy made no progress"
expect mid 0 -- status r0
line mid "^ +Replace : member 1 -> $D_TMP/n1: copying, [1-9][0-9]?% \($size of $size\), $size/s, ETA [0-9]+ s$"
line mid "^ +Control socket : $ctl "
expect mid.json 0 -- status --json r0
json mid.json '.state == "ok" and .source == "control_socket"
  and (.status | .replace.state == "copying" and .replace.member == 1
  and .replace.new == "'"$D_TMP/n1"'" and .replace.old == "'"$D_TMP/m1"'"
  and .replace.bytes_copied > 0
  and .replace.bytes_copied < .replace.bytes_total
  and .replace.rate > 0 and .replace.eta_seconds > 0
  and .replace.elapsed_seconds > 0 and .replace.unreadable == []
  and .running == true and .volume.name == "r0")'
# The file, written once an hour, knows nothing of the copy yet.
jq -e '.replace == null' "$status" >/dev/null ||
  d_bad "the status file shows the replace already (the test would not tell the socket from the file)"
d_ok "mid-copy: status's Replace line and --json's replace object, live"

# The socket gone: the file, as it is.
mv "$ctl" "$ctl.away"
expect mid.file 0 -- status r0
if grep -q -E '^ +(Replace|Control socket) :' "$D_TMP/mid.file.out"; then
  d_bad "mid.file: a Replace or Control socket line without the socket"
fi
expect mid.file.json 0 -- status -j r0
[[ $(jq -S .status "$D_TMP/mid.file.json.out") == "$(jq -S . "$status")" ]] &&
  jq -e '.source == "status_file"' "$D_TMP/mid.file.json.out" >/dev/null ||
  d_bad "mid.file.json: status --json without the socket is not the status file"
mv "$ctl.away" "$ctl"
d_ok "without the control socket: the status file"

# ---- the end ------------------------------------------------------------
hold n1.end end --new "$D_TMP/n1" || d_fail "the copier did not end once let go"
until_json 60 '.status.replace.state == "done"' || d_fail "the replace did not end"
expect done 0 -- status r0
line done "^ +Replace : member 1 -> $D_TMP/n1: done, 100% \(($size) of \1\), $size/s, in $num s$"
expect done.json 0 -- status --json r0
json done.json '.status.replace | .state == "done"
  and .bytes_copied == .bytes_total
  and (has("eta_seconds") | not) and .error == null
  and .config_updated == true'
grep -q -F "\"$D_TMP/n1\"" "$conf" || d_bad "the config does not name $D_TMP/n1"
d_ok "after the copy: done, 100%, the config names the new member"

# ---- replace --wait, followed to its end (stdout is not a terminal) ----
# Its copier held at the end of its first window (25%) until --wait,
# polling every 200 ms, has printed a copying line; then let go.
"$NBDSTRIPE" replace --wait r0 0 "$D_TMP/n0" >"$D_TMP/wait.out" \
  2>"$D_TMP/wait.err" </dev/null &
wpid=$!
D_BGPIDS+=("$wpid")
hold wait.held advanced --new "$D_TMP/n0" ||
  d_fail "wait: the copier was not held at the end of its first window"
for ((end = SECONDS + 20; SECONDS < end; )); do
  grep -q -E "^replace: member 0 -> $D_TMP/n0: copying, " "$D_TMP/wait.out" && break
done
hold wait.end end --new "$D_TMP/n0" || d_fail "wait: the copier did not end once let go"
rc=0
wait "$wpid" || rc=$?
printf -- '-- wait: replace --wait r0 0 %s -> exit %d\n' "$D_TMP/n0" "$rc"
sed 's/^/   | /' "$D_TMP/wait.out" "$D_TMP/wait.err"
[[ $rc -eq 0 ]] || d_bad "wait: nbdstripe replace --wait: exit $rc, expected 0"
if grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/wait.err"; then
  d_bad "wait: sanitizer report (above)"
fi
line wait "^replace: member 0 -> $D_TMP/n0: copying, [0-9]+% "
tail -n 3 "$D_TMP/wait.out" | grep -q -E "^replace: member 0 -> $D_TMP/n0: done, 100% " ||
  d_bad "wait: no last progress line saying done, 100%"
line wait "^member 0 replaced by $D_TMP/n0$"
d_ok "replace --wait: progress lines in status's words, to done"

# ---- control sockets that do not answer ---------------------------------
d_stop "$pid"
mv "$ctl" "$ctl.real" 2>/dev/null || :
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$ctl" ||
  d_fail "cannot make a stale socket"
expect stopped 3 -- status r0
if grep -q -E '^ +Control socket :' "$D_TMP/stopped.out"; then
  d_bad "stopped: a Control socket line from a stale socket"
fi
line stopped "^ +Replace : member 0 -> $D_TMP/n0: done, 100% "
expect stopped.json 3 -- status --json r0
[[ $(jq -S .status "$D_TMP/stopped.json.out") == "$(jq -S . "$status")" ]] ||
  d_bad "stopped.json: not the status file"
json stopped.json '.state == "not-running" and .source == "status_file"
  and .status.running == false and .status.replace.state == "done"'
rm -f "$ctl"
# A server that accepts and never answers: the file, within the timeout.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
c, _ = s.accept(); time.sleep(120)' "$ctl" </dev/null &
hung=$!
D_BGPIDS+=("$hung")
for ((i = 0; i < 1000; i++)); do [[ -S $ctl ]] && break; done
start=$SECONDS
expect hung.json 3 -- status --json r0
((SECONDS - start <= 10)) || d_bad "hung: status took $((SECONDS - start)) s"
[[ $(jq -S .status "$D_TMP/hung.json.out") == "$(jq -S . "$status")" ]] ||
  d_bad "hung.json: not the status file"
kill "$hung" 2>/dev/null
rm -f "$ctl"
d_ok "stale or hung control socket: the status file, the replace in it"

# ---- offline ------------------------------------------------------------
expect offline 0 -- replace --offline r0 1 "$D_TMP/n2" --json
# JSON Lines: the progress, then the result.
tail -n 1 "$D_TMP/offline.out" >"$D_TMP/offline.last.out"
json offline.last '.started == true and .replaced == true and .offline == true
  and .replace.state == "done" and .replace.new == "'"$D_TMP/n2"'"
  and .error == null'
grep -q -F "\"progress\": \"member 1 -> $D_TMP/n2: done, 100% " \
  "$D_TMP/offline.out" || d_bad "offline: no progress line (JSON Lines)"
grep -q -F "\"$D_TMP/n2\"" "$conf" || d_bad "the config does not name $D_TMP/n2"
expect check 0 -- check r0
d_ok "replace --offline --json"

d_asan_reports
d_done
