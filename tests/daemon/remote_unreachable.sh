#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A remote member whose server is not there is an error naming the member,
# its URI and the reason, after a bounded time, and nothing is written to
# any member -- the others being a local file and an export served by
# `nbdkit file`, both holding random data (checksums before and after):
#
#   - not running: a Unix socket whose nbdkit has been stopped, and a TCP
#     port on 127.0.0.1 where nothing listens.  create (and inspect of the
#     URI) fail within 5 s: a refused connection is immediate.  Then a
#     volume is created with every server up and member 2's server is
#     stopped: check and serve fail within 5 s naming member 2 alone, and
#     serve starts no server;
#   - hung: a Unix socket that accepts connections but never says a word
#     (no NBD greeting).  create --force, check and inspect, run at once,
#     each fail within 45 s: the connect timeout (30 s,
#     REMOTE_CONNECT_TIMEOUT in include/remote.h) and a margin for a
#     loaded machine.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1
d_init nbdkit setsid sha256sum timeout
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

M=$((1024 * 1024))
REFUSED_BOUND_MS=5000
CONNECT_TIMEOUT=30
HUNG_BOUND_MS=$(((CONNECT_TIMEOUT + 15) * 1000))

d_random "$D_TMP/m0" $((8 * M))
d_random "$D_TMP/b1" $((8 * M))
truncate -s $((8 * M)) "$D_TMP/b2"
r_unix s1 file "$D_TMP/b1"
u1=$R_URI
r_unix s2 file "$D_TMP/b2"
u2=$R_URI
d_stop "$R_PID"                 # member 2's server is not running any more
port=$("$DAEMON_HELPER" free-port) || d_fail "daemon_helper free-port"
u3="nbd://127.0.0.1:$port/"     # nothing listens there
others=("$D_TMP/m0" "$D_TMP/b1" "$D_TMP/b2")

sock=$D_TMP/vol.sock pidfile=$D_TMP/vol.pid
serve="socket = \"$sock\"; pidfile = \"$pidfile\";"

# bounded NAME BOUND_MS CMD...: d_run NAME CMD, which must fail (exit 1)
# within BOUND_MS milliseconds.
bounded ()
{
  local name=$1 bound=$2 t0 ms
  shift 2
  t0=$EPOCHREALTIME
  d_run "$name" timeout -k 5 120 "$@"
  ms=$(r_elapsed_ms "$t0")
  d_expect_fail "$name"
  ((ms <= bound)) && d_ok "$name: failed after $ms ms (bound $bound ms)" ||
    d_bad "$name: took $ms ms, more than $bound ms"
}

d_log "create: the servers of members 2 and 3 are not running"
d_conf new.conf vol0 64K "$serve" "$D_TMP/m0" "$u1" "$u2" "$u3"
before=$(d_sums "${others[@]}")
bounded create "$REFUSED_BOUND_MS" "$NBDSTRIPE" create new.conf
d_expect_err create "member 2 ($u2): " "Connection refused" "member 3 ($u3): " \
  "Connection refused"
d_same_sums create "$before" "${others[@]}" && d_ok "create: no member written"
bounded inspect "$REFUSED_BOUND_MS" "$NBDSTRIPE" inspect "$u3"
d_expect_err inspect "$u3: " "Connection refused"

d_log "check, serve: a volume whose member 2's server has stopped"
r_unix s2 file "$D_TMP/b2"
d_conf vol.conf vol0 64K "$serve" "$D_TMP/m0" "$u1" "$u2"
d_run made d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create (all servers running) failed"
d_run made.check d_ns check vol.conf
[[ $D_RC -eq 0 ]] || d_fail "check (all servers running) failed"
d_stop "$R_PID"
before=$(d_sums "${others[@]}")
bounded check "$REFUSED_BOUND_MS" "$NBDSTRIPE" check vol.conf
d_expect_err check "member 2 ($u2): " "Connection refused"
! grep -q -F "member 0 (" "$D_TMP/check.err" && ! grep -q -F "member 1 (" "$D_TMP/check.err" ||
  d_bad "check complained about members 0 or 1, which are fine"
rm -f "$pidfile"
bounded serve "$REFUSED_BOUND_MS" "${D_PRE[@]}" "$NBDSTRIPE" serve vol.conf
d_expect_err serve "member 2 ($u2): " "Connection refused"
[[ ! -s $pidfile ]] || d_bad "serve: a server was started (pidfile $pidfile)"
d_same_sums not-running "$before" "${others[@]}" &&
  d_ok "check, serve: no member written"

d_log "a server that accepts but never answers"
[[ -x /usr/bin/python3 ]] || d_skip "no /usr/bin/python3 for a silent listener"
hung=$D_TMP/hung.sock
mkfifo "$D_TMP/hung.ready"
setsid /usr/bin/python3 -c '
import os, signal, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(16)
with open(sys.argv[2], "w") as f:
    f.write(str(os.getpid()))
signal.pause()' "$hung" "$D_TMP/hung.ready" </dev/null >"$D_TMP/hung.log" 2>&1 &
D_BGPIDS+=("$!")
ready=$(timeout 30 cat "$D_TMP/hung.ready") || ready=
[[ $ready =~ ^[0-9]+$ ]] || d_fail "the silent listener did not start: $(cat "$D_TMP/hung.log")"
u4="nbd+unix:///?socket=$hung"
# create --force: only the hung member can stop it.  check: members 0
# and 1 hold vol0's headers, member 2 does not answer.
d_conf hung-new.conf vol1 64K "$serve" "$D_TMP/m0" "$u1" "$u4"
d_conf hung.conf vol0 64K "$serve" "$D_TMP/m0" "$u1" "$u4"

# All three at once: the test waits for the timeout once, not three times.
t0=$EPOCHREALTIME
waits=()
for cmd in create check inspect; do
  case $cmd in
    create) args=(create --force hung-new.conf) ;;
    check) args=(check hung.conf) ;;
    inspect) args=(inspect "$u4") ;;
  esac
  (
    rc=0
    timeout -k 5 120 "$NBDSTRIPE" "${args[@]}" >"$D_TMP/hung.$cmd.out" \
      2>"$D_TMP/hung.$cmd.err" </dev/null || rc=$?
    echo "$rc $(r_elapsed_ms "$t0")" >"$D_TMP/hung.$cmd.rc"
  ) &
  waits+=("$!")
done
wait "${waits[@]}"
for cmd in create check inspect; do
  read -r rc ms <"$D_TMP/hung.$cmd.rc"
  printf -- '-- hung.%s -> exit %d after %d ms\n' "$cmd" "$rc" "$ms"
  sed 's/^/   | /' "$D_TMP/hung.$cmd.out" "$D_TMP/hung.$cmd.err"
  [[ $rc -eq 1 ]] || d_bad "hung.$cmd: exit $rc, expected 1"
  ((ms <= HUNG_BOUND_MS)) && d_ok "hung.$cmd: failed after $ms ms (bound $HUNG_BOUND_MS ms)" ||
    d_bad "hung.$cmd: took $ms ms, more than $HUNG_BOUND_MS ms"
  if grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/hung.$cmd.err"; then
    d_bad "hung.$cmd: sanitizer report (above)"
  fi
done
d_expect_err hung.create "member 2 ($u4): no answer within $CONNECT_TIMEOUT s"
d_expect_err hung.check "member 2 ($u4): no answer within $CONNECT_TIMEOUT s"
d_expect_err hung.inspect "$u4: no answer within $CONNECT_TIMEOUT s"
d_same_sums hung "$before" "${others[@]}" && d_ok "hung: no member written"
d_done
