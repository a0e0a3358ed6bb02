#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One grammar for every command (nbdstripe(8), COMMAND LINE), on a real
# volume served from a config directory of the test's own:
#
#   options after operands, short forms (-f -j -o -t), "--"
#   every COMMAND --help prints the synopsis that nbdstripe --help and the
#     man page's SYNOPSIS print, word for word
#   usage errors exit 2 (status: 3), naming what is wrong, in the shape
#     of every error: "nbdstripe: REASON" (the engine's too)
#   a VOLUME by name: NAME is $NBDSTRIPE_CONFDIR/NAME.conf; a path when it
#     holds a '/' or ends in .conf; a missing name says where it looked
#   list shows it served (state ok, the server's pid, its socket), stop
#     stops it (the pid is gone, exit 0), list then says "not-running",
#     stop again exits 0 saying "not running: nothing to stop" (as
#     systemctl stop), 1 with --strict; stop refuses a pidfile naming another process
#     (a recycled pid) and leaves that process alone; stop by the name of
#     a volume served with a config elsewhere; serve -f stopped by stop
#   a one-member volume: create and check say "1 member", not "1 members"
#   --json of create, check, status (served and not), list, stop, accept,
#     inspect, import, replace and scrub (refused: not served): one JSON
#     value (python3's json.load), key fields
#     checked; failures print JSON too (created/can_serve false)
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init python3 jq nbdinfo

export NBDSTRIPE_CONFDIR=$D_TMP/etc NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_CONFDIR" "$NBDSTRIPE_RUNDIR" "$D_TMP/elsewhere"
M=$((1024 * 1024))
for m in m0 m1 m2 m3; do truncate -s $((8 * M)) "$D_TMP/$m"; done

# vconf FILE NAME MEMBERS...: a volume whose socket, pidfile and status
# file are in $NBDSTRIPE_RUNDIR.
vconf ()
{
  local file=$1 name=$2
  shift 2
  d_conf "$file" "$name" 64K \
    "socket = \"$NBDSTRIPE_RUNDIR/$name.sock\"; pidfile = \"$NBDSTRIPE_RUNDIR/$name.pid\";" \
    "$@"
  printf 'health = { status_file = "%s"; interval = 1; };\n' \
    "$NBDSTRIPE_RUNDIR/$name.status.json" >>"$file"
}
vconf "$NBDSTRIPE_CONFDIR/g0.conf" g0 "$D_TMP/m0" "$D_TMP/m1"

# expect NAME STATUS -- ARGS...: nbdstripe ARGS exits STATUS.
expect ()
{
  local name=$1 status=$2
  shift 3
  d_run "$name" d_ns "$@"
  [[ $D_RC -eq $status ]] || d_bad "$name: nbdstripe $*: exit $D_RC, expected $status"
}
# json NAME JQ_FILTER: NAME's stdout is one JSON value (python3) for
# which the jq filter is true.
json ()
{
  local name=$1 filter=$2
  python3 -c 'import json, sys; json.load(sys.stdin)' <"$D_TMP/$name.out" ||
    { d_bad "$name: stdout is not JSON"; return 1; }
  jq -e "$filter" "$D_TMP/$name.out" >/dev/null ||
    { d_bad "$name: not true of its JSON: $filter"; return 1; }
}

# ---- --help: one synopsis, three places --------------------------------
squeeze () { tr -s ' \n' '  ' <"$1"; }
expect top 0 -- --help
pod=$NBDSTRIPE_SOURCE_DIR/daemon/nbdstripe.pod
sed -n '/^=head1 SYNOPSIS/,/^=head1/p' "$pod" >"$D_TMP/synopsis"
for c in create serve check status list stop accept inspect import replace scrub \
         lost-files; do
  expect "$c.help" 0 -- "$c" --help
  # "Usage: nbdstripe CMD SYNOPSIS" and its continuation lines.
  syn=$(awk 'NR == 1 { sub(/^Usage: nbdstripe /, ""); print; next }
             /^ / { print; next } { exit }' "$D_TMP/$c.help.out" |
        tr -s ' \n' '  ' | sed 's/ *$//')
  [[ $syn == "$c "* ]] || d_bad "$c --help: no 'Usage: nbdstripe $c' line"
  squeeze "$D_TMP/top.out" | grep -q -F -- " $syn " ||
    d_bad "nbdstripe --help does not say '$syn' as $c --help does"
  squeeze "$D_TMP/synopsis" | grep -q -F -- " nbdstripe $syn " ||
    d_bad "nbdstripe(8) SYNOPSIS does not say 'nbdstripe $syn' as $c --help does"
done
d_ok "every command's synopsis is the same in its --help, --help and the man page"

# ---- usage errors -------------------------------------------------------
expect u.check-extra 2 -- check g0 g1
d_expect_err u.check-extra "nbdstripe: unexpected operand 'g1'"
expect u.check-none 2 -- check --json
d_expect_err u.check-none "missing VOLUME"
expect u.create-opt 2 -- create g0 --frobnicate
d_expect_err u.create-opt "nbdstripe: unrecognized option '--frobnicate'" \
  "Usage: nbdstripe create "
expect u.serve-force 2 -- serve --force g0
expect u.import-json 2 -- import --json "$D_TMP/m0"
d_expect_err u.import-json "--json needs --out"
expect u.stop-timeout 2 -- stop -t 0 g0
expect u.accept-index 2 -- accept g0 x
d_expect_err u.accept-index "nbdstripe: INDEX 'x': expected a member index" \
  "Usage: nbdstripe accept "
expect u.lost-member 2 -- lost-files --member x g0
d_expect_err u.lost-member "nbdstripe: --member: not a member index: 'x'" \
  "Usage: nbdstripe lost-files "
expect u.import-layout 2 -- import --layout sideways "$D_TMP/m0"
d_expect_err u.import-layout "nbdstripe: --layout: expected" \
  "Usage: nbdstripe import "
expect u.status 3 -- status g0 g0
expect u.replace-cancel 2 -- replace --cancel g0 1 "$D_TMP/m2"
d_expect_err u.replace-cancel "unexpected operand '1'"
expect u.replace-rate 2 -- replace g0 1 "$D_TMP/m2" --rate 1.5M
d_expect_err u.replace-rate "--rate '1.5M'"
expect u.scrub-cancel 2 -- scrub --cancel --wait g0
d_expect_err u.scrub-cancel "--cancel and --wait"
expect u.scrub-extra 2 -- scrub g0 g1
d_expect_err u.scrub-extra "unexpected operand 'g1'"
expect u.dashdash 1 -- check -- --json
d_expect_err u.dashdash "no volume named '--json'"
d_ok "usage errors exit 2 (status 3) and say what is wrong"

# ---- a VOLUME by name or by path ---------------------------------------
expect create 0 -- create g0 --json
json create '.created == true and .name == "g0" and .metadata == "header"
  and .chunk == 65536 and (.members | length) == 2 and .size > 0
  and (.uuid | test("^[0-9a-f-]{36}$"))'
[[ $(jq -r .config "$D_TMP/create.out") == "$NBDSTRIPE_CONFDIR/g0.conf" ]] ||
  d_bad "create g0 did not read $NBDSTRIPE_CONFDIR/g0.conf"
expect create.again 1 -- create -j g0
json create.again '.created == false'
d_expect_err create.again "refusing to overwrite it (use --force)"
expect create.force 0 -- create g0 -f -j
json create.force '.created == true'
expect check.name 0 -- check g0
grep -q -F "$NBDSTRIPE_CONFDIR/g0.conf: volume 'g0'" "$D_TMP/check.name.out" ||
  d_bad "check g0: not the config $NBDSTRIPE_CONFDIR/g0.conf"
cp "$NBDSTRIPE_CONFDIR/g0.conf" "$D_TMP/g0.conf"
cp "$NBDSTRIPE_CONFDIR/g0.conf" "$D_TMP/g0"
expect check.relative-conf 0 -- check g0.conf
expect check.dot-slash 0 -- check ./g0
expect check.path 0 -- check "$D_TMP/g0"
expect check.missing 1 -- check nosuch
d_expect_err check.missing "no volume named 'nosuch': no $NBDSTRIPE_CONFDIR/nosuch.conf"
mv "$NBDSTRIPE_CONFDIR/g0.conf" "$D_TMP/hidden.conf"
expect check.a-file-here 1 -- check g0
d_expect_err check.a-file-here "no volume named 'g0'" "write ./g0"
mv "$D_TMP/hidden.conf" "$NBDSTRIPE_CONFDIR/g0.conf"
expect check.json 0 -- check -j g0
json check.json '.can_serve == true and .name == "g0" and .members == 2
  and .chunk == 65536 and .mkfs.ext4 == "-b 4096 -E stride=16,stripe_width=32"
  and .mkfs.xfs == "-d su=64k,sw=2" and (.warnings | length) == 0'
expect check.json-missing 1 -- check nosuch --json
json check.json-missing '.can_serve == false and (.error | contains("nosuch"))'
d_ok "a VOLUME by name, by relative and absolute path; --json of create and check"

# ---- inspect, accept, status before serving ---------------------------
expect inspect 0 -- inspect "$D_TMP/m1" -j "$D_TMP/m0"
json inspect '.ok and .error == null and (.members | length) == 2
  and .members[0].member_index == 1 and .members[1].member_index == 0
  and .members[0].name == "g0"'
expect accept 0 -- accept g0 1 --json
json accept '.accepted == true and .member == 1 and .header_written == false
  and .generation == .generation_before'
expect status.down 3 -- status g0 --json
json status.down '.state == "not-running" and .name == "g0" and .status == null
  and (.reason | contains("does not exist"))'
expect replace.down 1 -- replace g0 1 "$D_TMP/m2" --json
json replace.down '.started == false and .replaced == null and .member == 1
  and .name == "g0" and .replace == null and (.error | contains("not served"))'
expect cancel.down 1 -- replace --cancel -j g0
json cancel.down '.cancelled == false and (.error | contains("not served"))'
expect scrub.down 1 -- scrub g0 --wait --json
json scrub.down '.started == false and .finished == null and .unreadable == []
  and .name == "g0" and .scrub == null and (.error | contains("not served"))'
d_ok "--json of inspect, accept, replace and scrub (refused) and of status with nothing served"

# ---- list, stop ---------------------------------------------------------
# gone PID: the process has exited, now (stop waits for it): no such
# process, or a zombie its parent has not reaped yet.
gone ()
{
  [[ ! -e /proc/$1 ]] || grep -q -E '^[0-9]+ \(.*\) [ZX] ' "/proc/$1/stat" 2>/dev/null
}

# wait_status NAME: until the server's first status file is there (its
# health thread writes it just after nbdkit is ready), at most 20 s.
wait_status ()
{
  local f=$NBDSTRIPE_RUNDIR/$1.status.json i
  for ((i = 0; i < 400; i++)); do
    jq -e '.running' "$f" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  d_bad "$f: no status file within 20 s"
}

pidfile=$NBDSTRIPE_RUNDIR/g0.pid
d_serve serve g0 "$pidfile" || d_fail "serve g0"
pid=$D_SERVER_PID
wait_status g0
expect list 0 -- list
grep -q -E "^g0 +ok +$pid +$NBDSTRIPE_RUNDIR/g0.sock +$NBDSTRIPE_CONFDIR/g0.conf\$" \
  "$D_TMP/list.out" || d_bad "list: no line 'g0 ok $pid SOCKET CONFIG'"
expect list.json 0 -- list --json
json list.json '.ok and .error == null
  and (.volumes[] | select(.name == "g0") | .configured == true
  and .listen == "'"$NBDSTRIPE_RUNDIR/g0.sock"'")'
jq -e --argjson pid "$pid" --arg conf "$NBDSTRIPE_CONFDIR/g0.conf" \
  '[.volumes[] | select(.name == "g0")] | length == 1 and .[0].state == "ok"
   and .[0].reason == null
   and .[0].pid == $pid and .[0].config == $conf and .[0].configured' \
  "$D_TMP/list.json.out" >/dev/null || d_bad "list --json: g0 is not ok with pid $pid"
expect status.up 0 -- status -j g0
json status.up '.state == "ok" and .reason == null and .name == "g0"
  and .source == "control_socket" and .status.running == true
  and .status.volume.name == "g0" and .status.volume.state == "ok"'
# The chunk as status prints it is a size the config takes back.
expect status.table 0 -- status g0
grep -q -E '^ +Chunk : 64KiB \(65536 bytes\)$' "$D_TMP/status.table.out" ||
  d_bad "status: no 'Chunk : 64KiB (65536 bytes)'"

expect stop 0 -- stop g0
grep -q -x "g0: stopped (server pid $pid)" "$D_TMP/stop.out" ||
  d_bad "stop: does not say 'g0: stopped (server pid $pid)'"
gone "$pid" || d_bad "stop exited 0, but the server $pid still runs"
D_PIDS=()
expect list.stopped 0 -- list --json
jq -e '.volumes[] | select(.name == "g0") | .state == "not-running" and .pid == null' \
  "$D_TMP/list.stopped.out" >/dev/null || d_bad "list: g0 is not 'not-running' after stop"
expect list.stopped-text 0 -- list
grep -q -E "^g0 +not-running +- " "$D_TMP/list.stopped-text.out" ||
  d_bad "list: no line 'g0 not-running -' after stop"
expect stop.again 0 -- stop g0
grep -q -x "g0: not running: nothing to stop" "$D_TMP/stop.again.out" ||
  d_bad "stop of a stopped volume: does not say 'g0: not running: nothing to stop'"
[[ ! -s $D_TMP/stop.again.err ]] || d_bad "stop of a stopped volume wrote to stderr"
expect stop.again-strict 1 -- stop --strict g0
d_expect_err stop.again-strict "g0: not running"
expect stop.again-json 0 -- stop --json g0
json stop.again-json '.stopped == false and .pid == null and .name == "g0"'
expect stop.again-json-strict 1 -- stop --json --strict g0
d_ok "list shows g0 served, stop stops it, list shows it not-running; stop again exits 0 (--strict: 1)"

# A pidfile naming a process that is not g0's server: never signalled.
sleep 300 &
other=$!
D_BGPIDS+=("$other")
echo "$other" >"$pidfile"
expect stop.recycled 1 -- stop g0 --json
json stop.recycled '.stopped == false'
d_expect_err stop.recycled "pid $other (from $pidfile) is not the server of"
kill -0 "$other" 2>/dev/null || d_bad "stop signalled pid $other, which is not g0's server"
expect list.recycled 0 -- list -j
jq -e '.volumes[] | select(.name == "g0") | .pid == null' "$D_TMP/list.recycled.out" \
  >/dev/null || d_bad "list: shows $other as g0's server"
kill "$other"
d_ok "a pidfile naming another process: stop refuses, the process lives"

# serve --foreground (-f), stopped by stop --json.
setsid "${D_PRE[@]}" "$NBDSTRIPE" serve g0 -f </dev/null \
  >"$D_TMP/fg.log" 2>&1 &
fg=$!
D_BGPIDS+=("$fg")
for ((i = 0; i < 300; i++)); do
  [[ -S $NBDSTRIPE_RUNDIR/g0.sock ]] && nbdinfo --size \
    "nbd+unix:///?socket=$NBDSTRIPE_RUNDIR/g0.sock" >/dev/null 2>&1 && break
  kill -0 "$fg" 2>/dev/null || break
  sleep 0.1
done
wait_status g0
expect stop.fg 0 -- stop -j -t 20 g0
json stop.fg ".stopped == true and .pid == $fg and .reason == null"
gone "$fg" || d_bad "serve -f ($fg) still runs after stop"
d_ok "serve -f (nbdstripe's own pid, exec'd nbdkit) stopped by stop"

# A volume served from a config outside the config directory: by name.
vconf "$D_TMP/elsewhere/h0.conf" h0 "$D_TMP/m2" "$D_TMP/m3"
d_run h0.create d_ns create "$D_TMP/elsewhere/h0.conf"
d_serve h0.serve "$D_TMP/elsewhere/h0.conf" "$NBDSTRIPE_RUNDIR/h0.pid" ||
  d_fail "serve h0"
h0=$D_SERVER_PID
wait_status h0
expect list.h0 0 -- list --json
jq -e --arg conf "$D_TMP/elsewhere/h0.conf" \
  '.volumes[] | select(.name == "h0") | .state == "ok" and .configured == false
   and .config == $conf' "$D_TMP/list.h0.out" >/dev/null ||
  d_bad "list: h0 (served, config elsewhere) is not listed ok"
expect stop.h0 0 -- stop h0
gone "$h0" || d_bad "stop h0 exited 0, but $h0 still runs"
D_PIDS=()
d_ok "stop by the name of a volume served with a config elsewhere"

# ---- import --json (md superblocks written by create) -------------------
d_conf "$D_TMP/md.conf" md0 64K "" "$D_TMP/m2" "$D_TMP/m3"
echo 'metadata = "md";' >>"$D_TMP/md.conf"
d_run md.create d_ns create --force "$D_TMP/md.conf"
expect import 0 -- import "$D_TMP/m3" "$D_TMP/m2" -o "$D_TMP/imported.conf" -j
json import '.written == true and .name == "md0" and .chunk == 65536
  and (.members | length) == 2 and (.members[0] | endswith("/m2"))'
[[ -s $D_TMP/imported.conf ]] || d_bad "import --out wrote no config"
expect import.exists 1 -- import -j -o "$D_TMP/imported.conf" "$D_TMP/m2" "$D_TMP/m3"
json import.exists '.written == false'
expect import.force 0 -- import -f -j -o "$D_TMP/imported.conf" "$D_TMP/m2" "$D_TMP/m3"
json import.force '.written == true'
d_ok "import --json with --out"

# ---- a volume of one member: "1 member", singular ----------------------
truncate -s $((8 * M)) "$D_TMP/one"
d_conf "$D_TMP/one.conf" one0 64K "" "$D_TMP/one"
expect one.create 0 -- create "$D_TMP/one.conf"
grep -q -F ": 1 member, chunk " "$D_TMP/one.create.out" ||
  d_bad "create of a one-member volume: no '1 member, chunk' (plural wrong?)"
expect one.check 0 -- check "$D_TMP/one.conf"
grep -q -F ": 1 member, chunk " "$D_TMP/one.check.out" ||
  d_bad "check of a one-member volume: no '1 member, chunk' (plural wrong?)"
grep -h -F "1 members" "$D_TMP"/one.*.out "$D_TMP"/one.*.err && d_bad "\"1 members\" (above)"
d_ok "a one-member volume is said to have \"1 member\""

# ---- one shape for every error ------------------------------------------
# Whatever the command and whoever says it (the command, the engine, a
# usage error, getopt): "nbdstripe: REASON", never "nbdstripe CMD: ..."
# nor "nbdstripe: error: ...".
if grep -E -H -- '^(<[0-9]>)?nbdstripe( [a-z]+: |: error: )' "$D_TMP"/*.err; then
  d_bad "errors in another shape than \"nbdstripe: REASON\" (above)"
else
  d_ok "every error reads \"nbdstripe: REASON\""
fi
d_done
