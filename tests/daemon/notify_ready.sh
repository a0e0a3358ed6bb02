#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Readiness, as nbdstripe@.service (Type=notify) sees it: `nbdstripe serve
# --foreground` with $NOTIFY_SOCKET set (a test listener in place of
# systemd's, tests/lib/notify_recv.py).
#
# - READY=1 comes once, from serve's own pid (serve execs nbdkit: the
#   unit's main process, as NotifyAccess=main wants), with a STATUS
#   naming the volume; at that moment a client connects at once.
# - SIGTERM: STOPPING=1 from the same pid, exit 0.
# - Every line of serve's and of the plugin's starts with its priority,
#   stderr standing for the journal: the start and stop info, the reason
#   a start fails an error.
# - A start that fails sends no READY=1: a second serve of a volume whose
#   socket is served already, serve's check refusing (a missing
#   member), nbdkit failing after serve's check passed (its TCP port is
#   taken), a config that cannot be loaded -- all exit non-zero, which systemd reports as a failed
#   start.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo setsid
[[ -x /usr/bin/python3 ]] || d_skip "/usr/bin/python3 is missing"
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

M=$((1024 * 1024))
m=("$D_TMP/m0" "$D_TMP/m1")
for f in "${m[@]}"; do truncate -s $((4 * M)) "$f"; done
sock=$D_TMP/vol.sock
d_conf vol.conf nt0 64K "socket = \"$sock\";" "${m[@]}"
d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"

notify=$D_TMP/notify.sock
# setsid: a process group of its own, for the cleanup to end.
exec {NFD}< <(exec setsid /usr/bin/python3 "$(dirname "$0")/../lib/notify_recv.py" "$notify")
D_BGPIDS+=("$!")
read -r -t 10 -u "$NFD" line && [[ $line == bound ]] || d_fail "notify_recv.py did not start"

# next_message SECONDS: the next message (MSG_PID, MSG), or return 1.
next_message ()
{
  local line
  read -r -t "$1" -u "$NFD" line || return 1
  MSG_PID=${line%%$'\t'*}
  MSG=${line#*$'\t'}
  return 0
}

# serve_fg NAME CONFIG: serve --foreground in the background (SERVER),
# its stderr $D_TMP/NAME.err standing for the journal (JOURNAL_STREAM
# names it, as systemd does for StandardError=journal: lines start with
# their priority, "<N>").
serve_fg ()
{
  : >"$D_TMP/$1.err"
  NOTIFY_SOCKET=$notify JOURNAL_STREAM=$(stat -c '%d:%i' "$D_TMP/$1.err") \
    setsid "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground "$2" \
    >"$D_TMP/$1.out" 2>>"$D_TMP/$1.err" </dev/null &
  SERVER=$!
  D_BGPIDS+=("$SERVER")
}

d_log "a volume that starts"
serve_fg good vol.conf
next_message 60 || { cat "$D_TMP/good.err" >&2; d_fail "no message within 60 s"; }
size=$(timeout 5 nbdinfo --size "nbd+unix:///?socket=$sock" 2>&1)
[[ $size =~ ^[0-9]+$ ]] && d_ok "a client connects as soon as READY=1 came: size $size" ||
  d_bad "a client could not connect when READY=1 came: $size"
[[ $MSG == READY=1\|STATUS=*nt0* ]] && d_ok "message: $MSG" ||
  d_bad "the first message is '$MSG', expected READY=1 and a STATUS naming nt0"
[[ $MSG_PID == "$SERVER" ]] && d_ok "sent by serve's own pid $SERVER (nbdkit)" ||
  d_bad "sent by pid $MSG_PID, serve ran as $SERVER"
next_message 0.5 && d_bad "an unexpected message: $MSG"
good=$SERVER

# no_ready NAME: the server SERVER must exit non-zero with no message.
no_ready ()
{
  local rc=0
  wait "$SERVER" || rc=$?
  [[ $rc -ne 0 ]] && d_ok "$1: exit $rc" || d_bad "$1: exit 0"
  next_message 0.5 && d_bad "$1: a message came: $MSG" || d_ok "$1: no READY=1"
  sed "s/^/   $1 | /" "$D_TMP/$1.err"
}

# has_line NAME WHAT REGEX: a line of NAME.err matches (grep -E, whole).
has_line ()
{
  grep -E -q -x -- "$3" "$D_TMP/$1.err" && d_ok "$1: $2" ||
    d_bad "$1: $2: no line matches $3"
}

d_log "a second serve of the same volume: its socket is served already"
serve_fg again vol.conf
no_ready again
has_line again "why, at error" "<3>nbdstripe: member 0 .*in use by nbdkit .*"

SERVER=$good
kill -TERM "$SERVER"
rc=0
wait "$SERVER" || rc=$?
[[ $rc -eq 0 ]] && d_ok "exit 0 on SIGTERM" || d_bad "exit $rc on SIGTERM"
next_message 5 && [[ $MSG == STOPPING=1 && $MSG_PID == "$SERVER" ]] &&
  d_ok "STOPPING=1 on the way out" || d_bad "no STOPPING=1 from $SERVER (got '${MSG-}')"
sed 's/^/   good | /' "$D_TMP/good.err"
has_line good "serve's own line, at info" "<6>nbdstripe: serving 'nt0' on .*"
has_line good "the plugin's start, at info" "<6>nbdkit: stripe: info: volume 'nt0': serving .*"
has_line good "the plugin's stop, at info" "<6>nbdkit: stripe: info: volume 'nt0': stopping"

d_log "serve's check refuses: a member is missing"
d_conf missing.conf nt0 64K "socket = \"$sock\";" "${m[0]}" "$D_TMP/nowhere"
serve_fg missing missing.conf
no_ready missing
has_line missing "why, at error" "<3>nbdstripe: member 1 \\(.*nowhere\\): .*"

d_log "nbdkit fails after serve's check: its TCP port is taken"
port=$("$DAEMON_HELPER" free-port) || d_fail "no free TCP port"
d_nbdkit_start busy -i 127.0.0.1 -p "$port" memory 1M || d_fail "cannot hold port $port"
d_conf tcp.conf nt0 64K "address = \"127.0.0.1\"; port = $port; tls = \"off\";" "${m[@]}"
serve_fg tcp tcp.conf
no_ready tcp
has_line tcp "the config's warning, at warning" '<4>nbdstripe: WARNING: .*serve\.tls: "off" on TCP .*'

d_log "a config that cannot be loaded"
printf 'volume = {\n' >"$D_TMP/broken.conf"
serve_fg broken "$D_TMP/broken.conf"
no_ready broken
has_line broken "why, at error" "<3>nbdstripe: .*broken\.conf.*"
d_expect_err tcp "$port"
d_done
