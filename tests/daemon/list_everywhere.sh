#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe list, status NAME and stop NAME see every volume served on
# this host, wherever its config and status file live (issue 38): the
# demo keeps both in its own directory, outside the config and run
# directories.
#
#   1. "far": config and status file in $D_TMP/far/ (as conf/demo.sh),
#      served with `nbdstripe serve`: list shows it ok with its pid (found
#      by the registration its server left in the run directory),
#      `status far` and `scrub far` find it by name, `stop far` stops it;
#      then list shows nothing and the registration is gone.
#   2. The same served again, its registration removed by hand: list
#      still finds it, by its nbdkit process.
#   3. kill -9 of that server: its status file (running: true, a dead
#      pid) and a registration planted for it stay behind; list shows
#      nothing, status far and stop far say no volume of that name.
#   4. A server of another run directory is not served "here".
#   5. Two volumes named "twin" served from two configs: status twin
#      refuses to guess and asks for the config.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo jq setsid

export NBDSTRIPE_CONFDIR=$D_TMP/etc
mkdir -p "$NBDSTRIPE_CONFDIR" "$D_TMP/far" "$D_TMP/twin1" "$D_TMP/twin2"
for m in f0 f1 t0 t1 u0 u1; do truncate -s 16M "$D_TMP/$m"; done

# volume DIR NAME M0 M1: a config in DIR with its socket, pidfile and
# status file beside it; created.
volume ()
{
  local dir=$1 name=$2
  d_conf "$dir/$name.conf" "$name" 64K \
    "socket = \"$dir/$name.sock\"; pidfile = \"$dir/$name.pid\";" \
    "$3" "$4"
  printf 'health = { status_file = "%s"; interval = 1; };\n' \
    "$dir/$name.status.json" >>"$dir/$name.conf"
  d_run "$name.create" d_ns create "$dir/$name.conf"
  [[ $D_RC -eq 0 ]] || d_fail "create $dir/$name.conf"
}

# until_json NAME JQ: `list --json` into NAME until JQ holds, at most
# 20 s (the first status file comes just after the server is ready).
until_json ()
{
  local i
  for ((i = 0; i < 200; i++)); do
    d_run "$1" d_ns list --json
    jq -e "$2" "$D_TMP/$1.out" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# registered DIR PID: wait until the server PID has registered in run
# directory DIR, at most 20 s.  nbdkit writes its pidfile (where serve
# returns) before the plugin's .after_fork, which registers the server
# once the array has started.
registered ()
{
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -f $1/far.$2.served ]] && return 0
    sleep 0.1
  done
  return 1
}

volume "$D_TMP/far" far "$D_TMP/f0" "$D_TMP/f1"
conf=$D_TMP/far/far.conf

d_log "1. served from a directory of its own"
d_serve serve1 "$conf" "$D_TMP/far/far.pid" || d_fail "serve far"
pid=$D_SERVER_PID
registered "$NBDSTRIPE_RUNDIR" "$pid" || true
reg=("$NBDSTRIPE_RUNDIR"/far.*.served)
[[ ${#reg[@]} -eq 1 && -f ${reg[0]} ]] ||
  d_bad "no registration far.PID.served in $NBDSTRIPE_RUNDIR: $(ls "$NBDSTRIPE_RUNDIR" 2>&1)"
jq -e --argjson pid "$pid" --arg conf "$conf" \
  '.name == "far" and .pid == $pid and .config == $conf' "${reg[0]}" \
  >/dev/null || d_bad "the registration: $(cat "${reg[0]}")"
until_json list1 '.volumes[0].state == "ok"' || true
jq -e --argjson pid "$pid" --arg conf "$conf" --arg sock "$D_TMP/far/far.sock" \
  '(.volumes | length) == 1 and .volumes[0].name == "far"
   and .volumes[0].state == "ok" and .volumes[0].pid == $pid
   and .volumes[0].config == $conf and .volumes[0].configured == false
   and .volumes[0].listen == $sock' \
  "$D_TMP/list1.out" >/dev/null &&
  d_ok "list shows far, served from $D_TMP/far, ok with pid $pid" ||
  d_bad "list --json: $(cat "$D_TMP/list1.out")"
d_run list1.text d_ns list
grep -q -E "^far +ok +$pid +$D_TMP/far/far.sock +$conf\$" "$D_TMP/list1.text.out" ||
  d_bad "list: no line 'far ok $pid SOCKET CONFIG'"
d_run status1 d_ns status --json far
[[ $D_RC -eq 0 ]] && jq -e --arg conf "$conf" \
  '.state == "ok" and .name == "far" and .config == $conf' \
  "$D_TMP/status1.out" >/dev/null &&
  d_ok "status far finds it by name" || d_bad "status far: exit $D_RC"
d_run scrub1 d_ns scrub --wait far
[[ $D_RC -eq 0 ]] && d_ok "scrub far finds it by name" ||
  d_bad "scrub far: exit $D_RC"
d_run stop1 d_ns stop far
[[ $D_RC -eq 0 ]] && d_wait_gone "$pid" 30 &&
  d_ok "stop far stops it" || d_bad "stop far: exit $D_RC"
D_PIDS=()
d_run list1.after d_ns list --json
jq -e '.ok and (.volumes | length) == 0' "$D_TMP/list1.after.out" >/dev/null ||
  d_bad "list after stop: $(cat "$D_TMP/list1.after.out")"
ls "$NBDSTRIPE_RUNDIR"/*.served >/dev/null 2>&1 &&
  d_bad "a registration is left after a clean stop: $(ls "$NBDSTRIPE_RUNDIR")"
d_ok "after a clean stop: not listed, no registration left"

d_log "2. its registration removed by hand: found by its process"
d_serve serve2 "$conf" "$D_TMP/far/far.pid" || d_fail "serve far again"
pid=$D_SERVER_PID
registered "$NBDSTRIPE_RUNDIR" "$pid" ||
  d_fail "server $pid did not register in $NBDSTRIPE_RUNDIR"
rm -f "$NBDSTRIPE_RUNDIR"/far.*.served
until_json list2 '.volumes[0].state == "ok"' || true
jq -e --argjson pid "$pid" --arg conf "$conf" \
  '(.volumes | length) == 1 and .volumes[0].name == "far"
   and .volumes[0].pid == $pid and .volumes[0].config == $conf' "$D_TMP/list2.out" >/dev/null &&
  d_ok "list finds far by its nbdkit process" ||
  d_bad "list --json without a registration: $(cat "$D_TMP/list2.out")"

d_log "3. kill -9: what the server left names no volume"
mkdir -p "$NBDSTRIPE_RUNDIR"
cp "$D_TMP/far/far.status.json" "$NBDSTRIPE_RUNDIR/far.status.json"
printf '{"name": "far", "pid": %d, "config": "%s", "status_file": null}\n' \
  "$pid" "$conf" >"$NBDSTRIPE_RUNDIR/far.$pid.served"
kill -KILL "$pid"
d_wait_gone "$pid" 30 || d_fail "server $pid did not die"
D_PIDS=()
jq -e '.running == true' "$NBDSTRIPE_RUNDIR/far.status.json" >/dev/null ||
  d_fail "the leftover status file does not say running"
d_run list3 d_ns list --json
jq -e '.ok and (.volumes | length) == 0' "$D_TMP/list3.out" >/dev/null &&
  d_ok "a dead server's registration and status file are not listed" ||
  d_bad "list after kill -9: $(cat "$D_TMP/list3.out")"
d_run status3 d_ns status far
[[ $D_RC -eq 3 ]] || d_bad "status far after kill -9: exit $D_RC, expected 3"
d_expect_err status3 "no volume named 'far'" "none served here under that name"
d_run stop3 d_ns stop far
[[ $D_RC -ne 0 ]] || d_bad "stop far after kill -9 exited 0"
d_expect_err stop3 "no volume named 'far'"
rm -f "$NBDSTRIPE_RUNDIR"/far.*

d_log "4. a server of another run directory"
NBDSTRIPE_RUNDIR=$D_TMP/elsewhere-run d_serve serve4 "$conf" \
  "$D_TMP/far/far.pid" || d_fail "serve far with another run directory"
pid=$D_SERVER_PID
registered "$D_TMP/elsewhere-run" "$pid" ||
  d_bad "the server did not register in its own run directory"
d_run list4 d_ns list --json
jq -e '.ok and (.volumes | length) == 0' "$D_TMP/list4.out" >/dev/null &&
  d_ok "a server of another run directory is not listed here" ||
  d_bad "list: $(cat "$D_TMP/list4.out")"
NBDSTRIPE_RUNDIR=$D_TMP/elsewhere-run d_run list4.there d_ns list --json
jq -e --argjson pid "$pid" '(.volumes | length) == 1 and .volumes[0].pid == $pid' \
  "$D_TMP/list4.there.out" >/dev/null &&
  d_ok "... and is listed with its own" ||
  d_bad "list with its run directory: $(cat "$D_TMP/list4.there.out")"
d_stop "$pid"

d_log "5. two volumes of one name"
volume "$D_TMP/twin1" twin "$D_TMP/t0" "$D_TMP/t1"
volume "$D_TMP/twin2" twin "$D_TMP/u0" "$D_TMP/u1"
d_serve serve5a "$D_TMP/twin1/twin.conf" "$D_TMP/twin1/twin.pid" ||
  d_fail "serve twin1"
d_serve serve5b "$D_TMP/twin2/twin.conf" "$D_TMP/twin2/twin.pid" ||
  d_fail "serve twin2"
d_run status5 d_ns status twin
[[ $D_RC -eq 3 ]] || d_bad "status twin: exit $D_RC, expected 3"
d_expect_err status5 "twin: 2 volumes of that name are served here: name one by its config"
d_run list5 d_ns list --json
jq -e '[.volumes[] | select(.name == "twin")] | length == 2' "$D_TMP/list5.out" \
  >/dev/null && d_ok "both twins listed, status refuses to guess" ||
  d_bad "list: $(cat "$D_TMP/list5.out")"

d_asan_reports
d_done
