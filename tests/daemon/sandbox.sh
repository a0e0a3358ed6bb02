#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe@.service's sandbox does not get in the way of serving: the
# parts of it that can be set up without systemd, taken from the unit as
# built (build/conf/nbdstripe@.service), around `nbdstripe serve
# --foreground`:
#
#   CapabilityBoundingSet=, AmbientCapabilities=, NoNewPrivileges=yes
#   -- setpriv, as the unit says them (t_unit_caps, tests/lib/common.sh)
#   SystemCallFilter= (@system-service less @privileged @resources),
#   SystemCallErrorNumber=, RestrictAddressFamilies=,
#   MemoryDenyWriteExecute= -- seccomp, as systemd 252 builds it
#   (tests/lib/sandbox.py)
#
# (the namespaces -- ProtectSystem=, PrivateTmp=, ... -- and the device
# cgroup are systemd's alone: not here).  The volume: a file, a loop
# device (where losetup works) and a remote member over TCP (nbdkit
# memory); an on_change program.
#
# - the server runs with the unit's capabilities and no other (those
#   drive health needs: permitted, effective and bounding sets),
#   no_new_privs and a seccomp filter (/proc/PID/status);
# - data written with nbdcopy (zeroes included) reads back;
# - the I/O path is io_uring's (the server holds io_uring rings: the
#   filter lets io_uring_setup through, not EPERM and the portable path);
# - the loop device is held exclusively (a second O_EXCL open: EBUSY);
# - nbdstripe replace of member 0 (copy, NEW's header, the config
#   rewritten, the switch) works, data intact;
# - the remote member's server killed: the member fails and the on_change
#   program runs (spawned under the filter);
# - SIGTERM: exit 0.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo cmp setsid setpriv systemd-analyze
[[ -x /usr/bin/python3 ]] || d_skip "/usr/bin/python3 is missing"
/usr/bin/python3 -c 'import seccomp' 2>/dev/null ||
  d_skip "python3-seccomp is not installed"
[[ -z ${STRIPE_LD_PRELOAD:-} ]] ||
  d_skip "a sanitizer runtime makes system calls of its own: not under the unit's filter"
[[ -n ${NBDSTRIPE_UNIT_DIR:-} && -f $NBDSTRIPE_UNIT_DIR/nbdstripe@.service ]] ||
  d_fail "NBDSTRIPE_UNIT_DIR must hold the built nbdstripe@.service"
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"
unit=$NBDSTRIPE_UNIT_DIR/nbdstripe@.service
grep -q -x 'NoNewPrivileges=yes' "$unit" || d_fail "the unit has no NoNewPrivileges=yes"
t_unit_caps "$unit" || d_fail "cannot read the unit's capabilities"
d_log "the unit's capabilities: CapBnd $T_CAPMASK, setpriv ${T_SETPRIV[*]}"

M=$((1024 * 1024))
truncate -s $((8 * M)) "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/b2"
members=("$D_TMP/m0")
loop=
if loop=$(losetup -f --show "$D_TMP/m1" 2>/dev/null); then
  D_LOOPS+=("$loop")
  members+=("$loop")
else
  loop=
  d_log "(no loop device: member 1 is a file)"
  members+=("$D_TMP/m1")
fi
r_tcp s2 file "$D_TMP/b2" || d_fail "cannot start the remote member's server"
members+=("$R_URI")
remote_pid=$R_PID
# The hook's lines go to a log and to a FIFO the test waits on.
mkfifo "$D_TMP/hook.fifo"
cat >"$D_TMP/hook.sh" <<HOOK
#!/bin/sh
echo "\$@" >>"$D_TMP/hook.log"
echo "\$@" >"$D_TMP/hook.fifo"
HOOK
chmod +x "$D_TMP/hook.sh"
sock=$D_TMP/vol.sock
d_conf vol.conf sb0 64K "socket = \"$sock\"; pidfile = \"$D_TMP/vol.pid\";" "${members[@]}"
cat >>vol.conf <<CONF
health = { status_file = "$D_TMP/status.json"; on_change = "$D_TMP/hook.sh";
           io_timeout = 5; probe_interval = 1; };
CONF
d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
mkfifo "$D_TMP/vol.pid"

d_log "serve --foreground in the unit's sandbox"
setsid setpriv "${T_SETPRIV[@]}" -- \
  /usr/bin/python3 "$(dirname "$0")/../lib/sandbox.py" "$unit" -- \
  "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground vol.conf \
  >"$D_TMP/serve.out" 2>"$D_TMP/serve.err" </dev/null &
server=$!
D_BGPIDS+=("$server")
said=$(timeout 60 cat "$D_TMP/vol.pid") ||
  { cat "$D_TMP/serve.err" >&2; d_fail "the sandboxed server did not start"; }
[[ $said == "$server" ]] || d_bad "the pidfile says $said, the server is $server"

status=$(grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs|Seccomp):' "/proc/$server/status" | tr -s '\t' ' ')
want="CapPrm: $T_CAPMASK"$'\n'"CapEff: $T_CAPMASK"$'\n'"CapBnd: $T_CAPMASK"$'\nNoNewPrivs: 1\nSeccomp: 2'
[[ $status == "$want" ]] &&
  d_ok "the unit's capabilities ($T_CAPMASK) and no other, no_new_privs, a seccomp filter" ||
  d_bad "the server's credentials: $status"

uri="nbd+unix:///?socket=$sock"
d_random "$D_TMP/src" $((3 * M))
truncate -s $((6 * M)) "$D_TMP/src"          # 3 MiB of zeroes after the data
nbdcopy "$D_TMP/src" "$uri" || d_bad "nbdcopy to the volume"
rm -f "$D_TMP/out"
nbdcopy "$uri" "$D_TMP/out" && cmp -s -n $((6 * M)) "$D_TMP/src" "$D_TMP/out" &&
  d_ok "data (and zeroes) read back" || d_bad "the data read back differs"

# Rings belong to nbdkit's worker threads, which live as long as their
# connection: count them while a client is connected and has read.
rings=$(/usr/bin/python3 -c 'import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(1 << 20, 0)
fd = "/proc/%s/fd" % sys.argv[2]
print(sum(1 for f in os.listdir(fd)
          if os.readlink(os.path.join(fd, f)) == "anon_inode:[io_uring]"))
h.shutdown()' "$uri" "$server")
[[ $rings =~ ^[0-9]+$ && $rings -gt 0 ]] && d_ok "the server holds $rings io_uring ring(s)" ||
  d_bad "no io_uring ring in the server ($rings): the filter refused io_uring?"

if [[ -n $loop ]]; then
  r=$(/usr/bin/python3 -c 'import os, sys
try:
    os.open(sys.argv[1], os.O_RDWR | os.O_EXCL)
    print("opened")
except OSError as e:
    print(e.errno)' "$loop")
  [[ $r == 16 ]] && d_ok "the loop device is held exclusively (EBUSY)" ||
    d_bad "a second O_EXCL open of $loop: $r, expected EBUSY (16)"
fi

d_log "nbdstripe replace of member 0 while served, in the sandbox"
# The server copies, writes NEW's header, rewrites the config (mkstemp,
# fchmod, fsync, rename) and marks the old member, all under the filter.
truncate -s $((8 * M)) "$D_TMP/n0"
d_run replace "${D_PRE[@]}" "$NBDSTRIPE" replace --wait vol.conf 0 "$D_TMP/n0"
[[ $D_RC -eq 0 ]] && d_ok "replace: exit 0" || d_bad "replace: exit $D_RC (above)"
grep -q -F "\"$D_TMP/n0\"" vol.conf && d_ok "the config names the new member" ||
  d_bad "the config does not name $D_TMP/n0"
rm -f "$D_TMP/out"
nbdcopy "$uri" "$D_TMP/out" && cmp -s -n $((6 * M)) "$D_TMP/src" "$D_TMP/out" &&
  d_ok "data read back after the switch" || d_bad "the data differs after the switch"

d_log "the remote member's server killed: the member fails, on_change runs"
kill -KILL "$remote_pid"
# Held open read-write: the hook's open never blocks, nor do its lines
# get lost between two reads.
exec {HFD}<>"$D_TMP/hook.fifo"
for ((i = 0; i < 30; i++)); do
  # A read of the whole volume meets the dead server (member 2); each
  # request is answered within io_timeout, then the hook's event is waited
  # for (the read returns as soon as a line comes).
  nbdcopy "$uri" - 2>/dev/null | cat >/dev/null
  got=
  while read -r -t 2 -u "$HFD" line; do
    [[ $line == MemberFailed* ]] && { got=1; break; }
  done
  [[ -n $got ]] && break
done
grep -q "MemberFailed sb0 2 " "$D_TMP/hook.log" 2>/dev/null &&
  d_ok "on_change ran: $(head -1 "$D_TMP/hook.log")" ||
  d_bad "on_change did not run for member 2 (hook.log: $(cat "$D_TMP/hook.log" 2>/dev/null))"

kill -TERM "$server"
rc=0
wait "$server" || rc=$?
D_BGPIDS=()
[[ $rc -eq 0 ]] && d_ok "exit 0 on SIGTERM" || d_bad "exit $rc on SIGTERM"
sed 's/^/   serve | /' "$D_TMP/serve.err"
d_done
