#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe serve` end to end: create a 3-member volume, then
#
#   Unix socket (serve.socket, an export name): serve, write random data
#   with nbdcopy, read it back; `serve` again while it runs is refused
#   ("already listening") and the running server is unharmed; stop, serve
#   again (nbdkit leaves its socket file behind: it is cleared), data
#   intact; kill -9 the server (a stale socket), serve again, data intact.
#
#   --foreground: serve execs nbdkit in its own process (the pid systemd
#   sees is the server's), which stays in the foreground and exits 0 on
#   SIGTERM; the pidfile (a FIFO here) tells when it listens.
#
#   TCP on 127.0.0.1 (serve.address + serve.port, a free port, tls = "off"
#   said explicitly, which serve warns about): write new data, read it
#   back; a second serve on the same port fails; stop; serve again with
#   the address left out (it must default to 127.0.0.1, and listen on
#   nothing else), data intact.  (TLS over TCP: tcp_tls.sh.)
#
#   TLS required with a PSK file (serve.tls, serve.tls_psk) over a Unix
#   socket: a TLS client with the key reads the data, a plain one is
#   refused.
#
#   cache = "direct": the server holds every member open with O_DIRECT
#   (and with the default, writeback, it does not), read from
#   /proc/PID/fdinfo.
#
# Each server is checked to run the plugin under test.  Servers start with
# `nbdstripe serve` (no --foreground), which returns once nbdkit listens.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo cmp setsid

[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

M=$((1024 * 1024))
sizes=($((4 * M)) $((6 * M + 1234)) $((5 * M)))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2")
for i in 0 1 2; do truncate -s "${sizes[i]}" "${m[i]}"; done
usock=$D_TMP/vol.sock upid=$D_TMP/unix.pid
uuri="nbd+unix:///vol?socket=$usock"
d_conf unix.conf vol0 128K \
  "socket = \"$usock\"; pidfile = \"$upid\"; export_name = \"vol\"; threads = 4;" "${m[@]}"

d_run create d_ns create unix.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"

# roundtrip NAME URI SRC: write SRC to the volume and read it back.
roundtrip ()
{
  nbdcopy "$3" "$2" || { d_bad "$1: nbdcopy $3 -> $2"; return 1; }
  verify "$1" "$2" "$3"
}
# verify NAME URI SRC: the volume holds SRC.
verify ()
{
  rm -f "$D_TMP/out"
  nbdcopy "$2" "$D_TMP/out" || { d_bad "$1: nbdcopy $2 -> out"; return 1; }
  if cmp -s "$3" "$D_TMP/out"; then d_ok "$1: data intact"
  else d_bad "$1: the data read back differs"; return 1; fi
}

# o_direct PID FILE: "yes" if a descriptor of PID open on FILE has
# O_DIRECT (040000), "no" if none has, "none" if none is open on it.  (With
# cache = direct the plugin keeps a buffered descriptor too, for what is
# not aligned.)
o_direct ()
{
  local fd flags r=none
  for fd in /proc/"$1"/fd/*; do
    [[ $(readlink "$fd") == "$2" ]] || continue
    flags=$(awk '$1 == "flags:" { print $2 }' "/proc/$1/fdinfo/${fd##*/}")
    if (( 8#$flags & 8#40000 )); then r=yes; elif [[ $r != yes ]]; then r=no; fi
  done
  echo "$r"
}

d_log "Unix socket"
d_serve unix.1 unix.conf "$upid" || d_fail "serve failed"
pid1=$D_SERVER_PID
[[ $(readlink "/proc/$pid1/exe") == */nbdkit ]] || d_bad "the pidfile names $(readlink "/proc/$pid1/exe"), not nbdkit"
size=$(d_nbd_size "$uuri") || d_fail "nbdinfo --size $uuri"
expect=0
for s in "${sizes[@]}"; do expect=$((expect + (s - M) / (128 * 1024) * (128 * 1024))); done
[[ $size -eq $expect ]] || d_bad "volume size $size, expected $expect"
d_random src1 "$size"
roundtrip unix.1 "$uuri" src1
for f in "${m[@]}"; do
  [[ $(o_direct "$pid1" "$f") == no ]] || d_bad "unix.1: $f: not open, or open with O_DIRECT (cache is writeback)"
done

d_log "serve again while it runs: refused, naming the server that holds the members"
d_run unix.live d_ns_serve unix.conf
d_expect_fail unix.live
d_expect_err unix.live "member 0 (${m[0]}): in use by nbdkit (pid $pid1) serving volume 'vol0'"
[[ $(<"$upid") == "$pid1" ]] || d_bad "the refused serve rewrote the pidfile"
kill -0 "$pid1" 2>/dev/null || d_bad "the running server has gone"
verify unix.live "$uuri" src1

d_log "stop, serve again"
d_stop "$pid1"
[[ -S $usock ]] && d_log "  (nbdkit left its socket file behind)"
d_serve unix.2 unix.conf "$upid" || d_fail "serve after a clean stop failed"
verify unix.2 "$uuri" src1

d_log "kill -9 the server (stale socket), serve again"
kill -KILL "$D_SERVER_PID"
d_wait_gone "$D_SERVER_PID" || d_fail "server $D_SERVER_PID survived SIGKILL"
D_PIDS=()
[[ -S $usock ]] || d_bad "no stale socket file after SIGKILL (the test needs one)"
d_serve unix.3 unix.conf "$upid" || d_fail "serve over a stale socket failed"
d_expect_err unix.3 "serving 'vol0' on $usock"
verify unix.3 "$uuri" src1
d_stop "$D_SERVER_PID"

d_log "--foreground: the same process, in the foreground"
fgpid=$D_TMP/fg.pid fgsock=$D_TMP/fg.sock
mkfifo "$fgpid"
d_conf fg.conf vol0 128K "socket = \"$fgsock\"; pidfile = \"$fgpid\";" "${m[@]}"
setsid "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground fg.conf \
  >"$D_TMP/fg.out" 2>"$D_TMP/fg.err" </dev/null &
fg=$!
D_BGPIDS+=("$fg")
said=$(timeout 60 cat "$fgpid") || { cat "$D_TMP/fg.err" >&2; d_fail "serve --foreground never wrote its pidfile"; }
[[ $said == "$fg" ]] || d_bad "--foreground: the pidfile says $said, serve ran as $fg (no exec?)"
grep -q -F "$STRIPE_PLUGIN" "/proc/$fg/maps" || d_bad "--foreground: $STRIPE_PLUGIN not loaded"
verify foreground "nbd+unix:///?socket=$fgsock" src1
kill -TERM "$fg"
rc=0
wait "$fg" || rc=$?
D_BGPIDS=()
[[ $rc -eq 0 ]] && d_ok "--foreground: exit 0 on SIGTERM" || d_bad "--foreground: exit $rc on SIGTERM"
sed 's/^/   | /' "$D_TMP/fg.err"

# tcp_serve NAME CONFIG_TEMPLATE PIDFILE: pick a free port (PORT in the
# template), serve; retry with another port when it was taken meanwhile.
tcp_serve ()
{
  local name=$1 tmpl=$2 pidfile=$3 _
  for _ in 1 2 3 4 5; do
    port=$("$DAEMON_HELPER" free-port) || d_fail "no free TCP port"
    sed "s/PORT/$port/" "$tmpl" >"$D_TMP/$name.conf"
    d_serve "$name" "$D_TMP/$name.conf" "$pidfile" && return 0
    grep -q -i 'address already in use' "$D_TMP/$name.err" || return 1
  done
  return 1
}

# listening PORT: the addresses a server listens on at PORT ("" without ss).
listening ()
{
  command -v ss >/dev/null || return 0
  ss -H -t -l -n "sport = :$1" | awk '{print $4}' | sort -u | tr '\n' ' '
}

d_log "TCP on 127.0.0.1 (address given)"
tpid=$D_TMP/tcp.pid
d_conf tcp.tmpl vol0 128K \
  "address = \"127.0.0.1\"; port = PORT; pidfile = \"$tpid\"; export_name = \"vol\"; tls = \"off\";" "${m[@]}"
tcp_serve tcp.1 tcp.tmpl "$tpid" || d_fail "serve over TCP failed"
turi="nbd://127.0.0.1:$port/vol"
d_expect_err tcp.1 "serving 'vol0' on 127.0.0.1:$port" \
  "WARNING: $D_TMP/tcp.1.conf:7: serve.tls: \"off\" on TCP 127.0.0.1:$port"
on=$(listening "$port")
d_log "  listening on: ${on:-(ss is not installed)}"
[[ -z $on || $on == "127.0.0.1:$port " ]] || d_bad "listening on: $on"
d_random src2 "$size"
roundtrip tcp.1 "$turi" src2

d_log "a second serve on the same port fails"
cp "$D_TMP/tcp.1.conf" "$D_TMP/tcp.dup.conf"
sed -i "s|$tpid|$D_TMP/tcp.dup.pid|" "$D_TMP/tcp.dup.conf"
d_serve_refused tcp.dup "$D_TMP/tcp.dup.conf" "$D_TMP/tcp.dup.pid"
verify tcp.dup "$turi" src2
d_stop "$D_SERVER_PID"

d_log "TCP again, address left out: 127.0.0.1 by default"
d_conf tcp2.tmpl vol0 128K "port = PORT; pidfile = \"$tpid\"; tls = \"off\";" "${m[@]}"
tcp_serve tcp.2 tcp2.tmpl "$tpid" || d_fail "serve over TCP (default address) failed"
d_expect_err tcp.2 "serving 'vol0' on 127.0.0.1:$port"
on=$(listening "$port")
d_log "  listening on: ${on:-(ss is not installed)}"
[[ -z $on || $on == "127.0.0.1:$port " ]] ||
  d_bad "with no address configured the server listens on: $on (expected 127.0.0.1:$port only)"
verify tcp.2 "nbd://127.0.0.1:$port" src2
d_stop "$D_SERVER_PID"

d_log "TLS required, with a pre-shared key, over a Unix socket"
psk=$D_TMP/tls.psk tsock=$D_TMP/tls.sock
printf 'client:%s\n' 00112233445566778899aabbccddeeff >"$psk"
chmod 0600 "$psk"
d_conf tls.conf vol0 128K \
  "socket = \"$tsock\"; pidfile = \"$tpid\"; tls = \"require\"; tls_psk = \"$psk\";" "${m[@]}"
d_serve tls tls.conf "$tpid" || d_fail "serve with TLS failed"
verify tls "nbds+unix://client@/?socket=$tsock&tls-psk-file=$psk" src2
if nbdinfo --size "nbd+unix:///?socket=$tsock" >/dev/null 2>&1; then
  d_bad "tls: a client without TLS was served"
else
  d_ok "tls: a client without TLS is refused"
fi
d_stop "$D_SERVER_PID"

d_log "cache = \"direct\": the server opens the members with O_DIRECT"
if dd if=/dev/zero of="$D_TMP/odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
  d_conf direct.conf vol0 128K "socket = \"$usock\"; pidfile = \"$upid\";" "${m[@]}"
  echo 'cache = "direct";' >>direct.conf
  d_serve direct direct.conf "$upid" || d_fail "serve with cache = direct failed"
  for f in "${m[@]}"; do
    [[ $(o_direct "$D_SERVER_PID" "$f") == yes ]] || d_bad "direct: $f has no O_DIRECT descriptor"
  done
  verify direct "nbd+unix:///?socket=$usock" src2
  d_stop "$D_SERVER_PID"
else
  d_log "  (left out: the file system of $D_TMP has no O_DIRECT)"
fi
d_done
