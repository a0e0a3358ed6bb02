#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The control socket (include/control.h) neither trusts nor blocks:
#
#   forged     with the server down, another user (nobody) plants a socket
#              at NAME.ctl in a shared (sticky) directory that answers
#              every request "ok" and a replace "done" with the config not
#              updated: nbdstripe replace --wait refuses to ask it (owned
#              by uid 65534) and leaves the config as it was; status does
#              not show its answer.  The same with a root-owned socket of
#              mode 0666, and with a root-owned socket of mode 0600 served
#              by a process that dropped root (the peer's uid checked).
#   planted    a regular file, then a FIFO, at NAME.ctl: the server starts
#              and serves anyway, saying why it has no control socket
#   slow       a client that sends a byte every 2 s: another client (status)
#              is answered live meanwhile; the slow one is cut off within
#              the request deadline (5 s for the whole request); a server
#              stopped with a slow client connected exits at once
#   typed      replace requests with "member": 2^32, "force": "false",
#              "rate": -5 or "fast", an unknown field, an empty "new":
#              each refused, naming the field; no replace starts
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit jq python3 setpriv
PY=/usr/bin/python3

M=$((1024 * 1024))
run=$D_TMP/run
mkdir -p "$run"
chmod 1777 "$run"
for f in m0 m1 n1; do truncate -s $((9 * M)) "$D_TMP/$f"; done
conf=$D_TMP/v.conf
d_conf "$conf" v 64K "socket = \"$D_TMP/v.sock\"; pidfile = \"$D_TMP/v.pid\";" \
  "$D_TMP/m0" "$D_TMP/m1"
printf 'health = { status_file = "%s/v.status.json"; interval = 3600; };\n' "$run" >>"$conf"
ctl=$run/v.ctl
d_run create d_ns create "$conf"
[[ $D_RC -eq 0 ]] || d_fail "create failed"
cp "$conf" "$D_TMP/conf.before"

# forger OWNER MODE: a server at $ctl answering everything "ok" and a
# status whose replace is done, config not updated.
forger ()
{
  local who=$1 mode=$2
  rm -f "$ctl" "$run/forger.ready"
  cat >"$D_TMP/forger.py" <<EOF
import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.bind("$ctl")
os.chmod("$ctl", 0o$mode)
if "$who" == "dropped":
    # A socket root made, served by a process that is root no more
    # (SO_PEERCRED gives who called listen).
    os.setgid(65534)
    os.setuid(65534)
s.listen(8)
open("$run/forger.ready", "w").close()
while True:
    c, _ = s.accept()
    try:
        c.recv(65536)
    except OSError:
        c.close()
        continue
    st = {"name": "v", "running": True, "pid": os.getpid(),
          "state": "ok", "forged": "FORGED", "members": [],
          "replace": {"state": "done", "member": 1, "old": "$D_TMP/m1",
                      "new": "$D_TMP/n1", "bytes_copied": 1, "bytes_total": 1,
                      "config_updated": False}}
    try:
        c.sendall((json.dumps({"ok": True, "status": st}) + "\n").encode())
    except OSError:
        pass
    c.close()
EOF
  chmod 0644 "$D_TMP/forger.py"
  chmod 0755 "$D_TMP"
  if [[ $who == nobody ]]; then
    setsid setpriv --reuid=65534 --regid=65534 --clear-groups \
      "$PY" "$D_TMP/forger.py" </dev/null >/dev/null 2>>"$run/forger.err" &
  else
    setsid "$PY" "$D_TMP/forger.py" </dev/null >/dev/null 2>>"$run/forger.err" &
  fi
  D_BGPIDS+=("$!")
  FORGER=$!
  local end=$((SECONDS + 10))
  until [[ -e $run/forger.ready ]] || ((SECONDS > end)); do sleep 0.02; done
  [[ -S $ctl ]] || d_fail "the forged socket is not there"
}

for who in nobody:0600 root:0666 dropped:0600; do
  forger "${who%%:*}" "${who##*:}"
  d_run "forged-replace-${who%%:*}" d_ns replace --wait "$conf" 1 "$D_TMP/n1"
  if [[ $D_RC -ne 0 ]] && grep -q "not a server's control socket" \
       "$D_TMP/forged-replace-${who%%:*}.err"; then
    d_ok "forged ($who): replace refused to ask the socket"
  else
    d_bad "forged ($who): replace asked a socket it must not trust"
  fi
  cmp -s "$conf" "$D_TMP/conf.before" ||
    d_bad "forged ($who): the config was rewritten on a forged answer"
  d_run "forged-status-${who%%:*}" d_ns status "$conf"
  if grep -q FORGED "$D_TMP/forged-status-${who%%:*}.out" ||
     grep -q "came from here" "$D_TMP/forged-status-${who%%:*}.out"; then
    d_bad "forged ($who): status showed the forged socket's answer"
  else
    d_ok "forged ($who): status did not show the forged answer"
  fi
  kill -KILL "$FORGER" 2>/dev/null
  d_wait_gone "$FORGER" 10
  [[ ! -s $run/forger.err ]] || { d_bad "the forger failed:"; cat "$run/forger.err" >&2; }
  cp "$D_TMP/conf.before" "$conf"
done
rm -f "$ctl"

# -- something else planted at NAME.ctl
for kind in file fifo; do
  rm -f "$ctl"
  if [[ $kind == file ]]; then echo planted >"$ctl"; else mkfifo "$ctl"; fi
  rm -f "$D_TMP/v.sock"
  if ! d_nbdkit_start "planted-$kind" -U "$D_TMP/v.sock" "$STRIPE_PLUGIN" \
         config="$conf"; then
    d_bad "planted $kind: the server did not start"
    continue
  fi
  pid=$D_NBDKIT_PID
  if nbdinfo --size "nbd+unix:///?socket=$D_TMP/v.sock" >/dev/null &&
     grep -q "not a socket" "$D_TMP/planted-$kind.log"; then
    d_ok "planted $kind: served anyway, saying why there is no control socket"
  else
    d_bad "planted $kind: not served, or nothing said"
  fi
  d_stop "$pid"
done
rm -f "$ctl"

# -- a slow client
rm -f "$D_TMP/v.sock"
d_nbdkit_start slow -U "$D_TMP/v.sock" "$STRIPE_PLUGIN" config="$conf" ||
  d_fail "the server did not start"
pid=$D_NBDKIT_PID
cat >"$D_TMP/slow.py" <<EOF
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect("$ctl")
t = time.monotonic()
try:
    for b in b'{"op": "status"'[:10]:
        s.send(bytes([b]))
        open(sys.argv[1], "a").close()   # connected, a byte sent
        time.sleep(2)
        s.settimeout(0.01)
        try:
            if s.recv(1) == b"":
                break
        except socket.timeout:
            pass
        s.settimeout(None)
except OSError:
    pass
print("%.1f" % (time.monotonic() - t))
EOF
"$PY" "$D_TMP/slow.py" "$D_TMP/slow1.on" >"$D_TMP/slow.out" &
slowpid=$!
# The slow client is connected (its first byte sent): another is served.
until [[ -e $D_TMP/slow1.on ]] || ! kill -0 $slowpid 2>/dev/null; do sleep 0.05; done
start=$EPOCHREALTIME
d_run slow-status timeout 10 "$NBDSTRIPE" status "$conf"
if grep -q "came from here" "$D_TMP/slow-status.out"; then
  d_ok "slow: status answered live while a slow client is connected"
else
  d_bad "slow: status was not answered live with a slow client connected"
fi
wait "$slowpid"
cut=$(<"$D_TMP/slow.out")
if [[ -n $cut ]] && (( ${cut%.*} <= 8 )); then
  d_ok "slow: the slow client was cut off after $cut s"
else
  d_bad "slow: the slow client was held ${cut:-?} s (deadline 5 s)"
fi
# A slow client connected when the server stops: it exits at once.
"$PY" "$D_TMP/slow.py" "$D_TMP/slow2.on" >/dev/null &
slowpid=$!
until [[ -e $D_TMP/slow2.on ]] || ! kill -0 $slowpid 2>/dev/null; do sleep 0.05; done
kill -TERM "$pid"
if d_wait_gone "$pid" 4; then
  d_ok "slow: the server stopped at once with a slow client connected"
else
  d_bad "slow: the server waited for a slow client to stop"
fi
rp_keep=()
for p in "${D_PIDS[@]}"; do [[ $p == "$pid" ]] || rp_keep+=("$p"); done
D_PIDS=("${rp_keep[@]}")
wait "$slowpid" 2>/dev/null

# -- typed fields
rm -f "$D_TMP/v.sock"
d_nbdkit_start typed -U "$D_TMP/v.sock" "$STRIPE_PLUGIN" config="$conf" ||
  d_fail "the server did not start"
pid=$D_NBDKIT_PID
ask () { "$PY" "$NBDSTRIPE_SOURCE_DIR/tests/lib/replace_ctl.py" "$ctl" send "$1"; }
n1=$D_TMP/n1
for req in \
  "{\"op\": \"replace\", \"member\": 4294967296, \"new\": \"$n1\"}|member" \
  "{\"op\": \"replace\", \"member\": -1, \"new\": \"$n1\"}|member" \
  "{\"op\": \"replace\", \"member\": 1.0, \"new\": \"$n1\"}|member" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"$n1\", \"force\": \"false\"}|force" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"$n1\", \"skip_unreadable\": 1}|skip_unreadable" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"$n1\", \"rate\": -5}|rate" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"$n1\", \"rate\": \"fast\"}|rate" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"$n1\", \"froce\": true}|froce" \
  "{\"op\": \"replace\", \"member\": 1, \"new\": \"\"}|new"; do
  body=${req%|*} want=${req##*|}
  if out=$(ask "$body") ; then
    d_bad "typed: accepted: $body"
  elif grep -q -F "\"$want\"" <<<"$out" || grep -q -F "$want" <<<"$out"; then
    d_ok "typed: refused naming $want: $(jq -r .error <<<"$out")"
  else
    d_bad "typed: refused without naming $want: $out"
  fi
done
st=$("$PY" "$NBDSTRIPE_SOURCE_DIR/tests/lib/replace_ctl.py" "$ctl" status)
[[ $st == "{}" ]] || d_bad "typed: a replace was started: $st"
cmp -s "$D_TMP/n1" <(head -c $((9 * M)) /dev/zero) ||
  d_bad "typed: NEW was written"
d_stop "$pid"
d_done
