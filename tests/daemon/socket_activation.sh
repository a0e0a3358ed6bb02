#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Socket activation, as nbdstripe@.socket starts nbdstripe@.service:
# `tests/lib/socket_activate.py SOCKET nbdstripe serve --foreground CONFIG`
# (it listens, says so, and at the first connection execs serve with the
# socket as fd 3, LISTEN_FDS=1 and LISTEN_PID its own pid, as systemd and
# systemd-socket-activate(1) do).
#
# - A client that connects before any server runs is served: nbdinfo
#   waits in the socket's queue while serve checks the volume and execs
#   nbdkit, and gets the volume's size.
# - serve runs nbdkit in its own process (so LISTEN_PID is nbdkit's pid),
#   without -U: nothing is created at the config's serve.socket; serve
#   names the socket it was passed and warns that the config names
#   another.
# - Data written with nbdcopy reads back; after SIGTERM (exit 0) the same
#   config served the usual way (its own socket) holds the data.
# - Without --foreground too: socket activation implies it (nbdkit never
#   forks then), and serve still execs nbdkit.
# - LISTEN_FDS with a LISTEN_PID of another process (inherited from a
#   parent) is not for serve: it serves the config's socket itself.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo cmp setsid
[[ -x /usr/bin/python3 ]] || d_skip "/usr/bin/python3 is missing"
activate=$(dirname "$0")/../lib/socket_activate.py

M=$((1024 * 1024))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2")
for f in "${m[@]}"; do truncate -s $((4 * M)) "$f"; done
csock=$D_TMP/conf.sock asock=$D_TMP/act.sock
d_conf vol.conf sa0 64K "socket = \"$csock\"; pidfile = \"$D_TMP/vol.pid\";" "${m[@]}"
d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
d_random "$D_TMP/src" $((6 * M))

# activated NAME SOCKET ARGS...: socket_activate.py SOCKET nbdstripe
# ARGS... in the background (ACT: its pid, serve's and then nbdkit's),
# once it listens; stderr in $D_TMP/NAME.err.
activated ()
{
  local name=$1 sock=$2 line
  shift 2
  exec {AFD}< <(exec setsid /usr/bin/python3 "$activate" "$sock" \
                  "${D_PRE[@]}" "$NBDSTRIPE" "$@" 2>"$D_TMP/$name.err" </dev/null)
  ACT=$!
  D_BGPIDS+=("$ACT")
  read -r -t 10 -u "$AFD" line && [[ $line == listening ]] ||
    { cat "$D_TMP/$name.err" >&2; d_fail "nothing listens at $sock"; }
}

d_log "socket_activate.py $asock nbdstripe serve --foreground vol.conf"
activated act "$asock" serve --foreground vol.conf
act=$ACT
uri="nbd+unix:///?socket=$asock"
size=$(timeout 60 nbdinfo --size "$uri") ||
  { cat "$D_TMP/act.err" >&2; d_fail "nbdinfo through the passed socket failed"; }
[[ $size -eq $((3 * (4 * M - M))) ]] && d_ok "first client served: size $size" ||
  d_bad "size $size, expected $((3 * (4 * M - M)))"

exe=$(readlink "/proc/$act/exe")
[[ $exe == */nbdkit ]] && d_ok "the activated process ($act) is nbdkit now" ||
  d_bad "process $act runs $exe, not nbdkit (serve forked instead of exec?)"
grep -q -F "$STRIPE_PLUGIN" "/proc/$act/maps" || d_bad "server $act did not load $STRIPE_PLUGIN"
args=$(tr '\0' ' ' <"/proc/$act/cmdline")
[[ $args != *" -U "* && $args != *" -p "* && $args != *" -i "* ]] &&
  d_ok "nbdkit runs without -U, -i, -p: $args" || d_bad "nbdkit was given a listener: $args"
[[ ! -e $csock ]] && d_ok "nothing created at serve.socket" || d_bad "$csock was created"
d_expect_err act "nbdstripe: serving 'sa0' on 1 socket(s) from systemd ($asock)" \
  "serve.socket is $csock, but systemd passed $asock" &&
  d_ok "serve names the passed socket and warns about serve.socket"

nbdcopy "$D_TMP/src" "$uri" || d_bad "nbdcopy to the volume"
rm -f "$D_TMP/out"
nbdcopy "$uri" "$D_TMP/out" && cmp -s -n $((6 * M)) "$D_TMP/src" "$D_TMP/out" &&
  d_ok "data read back through the passed socket" || d_bad "data read back differs"

kill -TERM "$act"
rc=0
wait "$act" || rc=$?
D_BGPIDS=()
[[ $rc -eq 0 ]] && d_ok "exit 0 on SIGTERM" || d_bad "exit $rc on SIGTERM"
sed 's/^/   act | /' "$D_TMP/act.err"

d_log "the same volume served the usual way holds the data"
d_serve plain vol.conf "$D_TMP/vol.pid" || d_fail "serve failed"
rm -f "$D_TMP/out"
nbdcopy "nbd+unix:///?socket=$csock" "$D_TMP/out" &&
  cmp -s -n $((6 * M)) "$D_TMP/src" "$D_TMP/out" &&
  d_ok "data intact on the members" || d_bad "data differs after a restart"
d_stop "$D_SERVER_PID"

d_log "activated without --foreground: the same"
asock2=$D_TMP/act2.sock
activated act2 "$asock2" serve vol.conf
act2=$ACT
size=$(timeout 60 nbdinfo --size "nbd+unix:///?socket=$asock2") ||
  { cat "$D_TMP/act2.err" >&2; d_bad "nbdinfo through the passed socket failed"; }
exe=$(readlink "/proc/$act2/exe")
[[ $exe == */nbdkit ]] && d_ok "served by nbdkit in the activated process" ||
  d_bad "process $act2 runs $exe, not nbdkit"
kill -TERM "$act2"
wait "$act2"
D_BGPIDS=()

d_log "LISTEN_FDS for another process: not ours"
rm -f "$csock"
d_run stale env LISTEN_FDS=1 LISTEN_PID=1 "${D_PRE[@]}" "$NBDSTRIPE" serve vol.conf
if [[ $D_RC -eq 0 && -s $D_TMP/vol.pid ]]; then
  D_PIDS+=("$(<"$D_TMP/vol.pid")")
  [[ -S $csock ]] && d_ok "serve bound serve.socket itself" || d_bad "no socket at $csock"
  d_stop "$(<"$D_TMP/vol.pid")"
else
  d_bad "serve with a stale LISTEN_PID failed"
fi
d_done
