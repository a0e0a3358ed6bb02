#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Members an unprivileged user can read but not write, and members it
# cannot read (issue 38), with nbdstripe run as nobody (setpriv):
#   1. serve: refused before anything is served, naming each member that
#      cannot be opened for writing and `serve --read-only VOLUME`; no
#      pidfile, no socket, every member byte-identical.
#   2. serve --read-only: served; the export is read-only, reads return
#      what was written, a write is refused; members byte-identical
#      after the stop (no header written).
#   3. one member unreadable: check and serve name it with "Permission
#      denied"; all unreadable: "no member could be read", never "no
#      member has a valid header".
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo nbdcopy setpriv cmp sha256sum
[[ $(id -u) -eq 0 ]] || d_skip "not root: cannot run as another user"

# A directory nobody can work in: its run directory and the socket.
chmod 0711 "$D_TMP"
W=$D_TMP/w
mkdir -p "$W/run"
chmod 0777 "$W" "$W/run"
export NBDSTRIPE_RUNDIR=$W/run
as_nobody () { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

for i in 0 1 2; do truncate -s 8M "$W/m$i"; done
d_conf "$W/ro.conf" ro 64K "socket = \"$W/ro.sock\"; pidfile = \"$W/ro.pid\";" \
  "$W/m0" "$W/m1" "$W/m2"
chmod 0644 "$W/ro.conf"
d_run create d_ns create "$W/ro.conf"
[[ $D_RC -eq 0 ]] || d_fail "create"
# Data to read back, written while root.
d_random "$D_TMP/data" $((1024 * 1024))
d_serve serve.rw "$W/ro.conf" "$W/ro.pid" || d_fail "serve as root"
nbdcopy "$D_TMP/data" "nbd+unix:///?socket=$W/ro.sock" ||
  d_fail "nbdcopy into the volume"
d_stop "$D_SERVER_PID"
rm -f "$W/ro.pid" "$W/ro.sock"
chmod 0644 "$W"/m?
before=$(d_sums "$W"/m?)

d_log "1. serve as nobody, members not writable"
d_run serve.nobody as_nobody "${D_PRE[@]}" "$NBDSTRIPE" serve "$W/ro.conf"
[[ $D_RC -eq 1 ]] || d_bad "serve of read-only members: exit $D_RC, expected 1"
for i in 0 1 2; do
  d_expect_err serve.nobody \
    "member $i ($W/m$i): cannot be opened for writing: Permission denied; the volume can be served read-only: nbdstripe serve --read-only $W/ro.conf"
done
[[ ! -e $W/ro.pid && ! -e $W/ro.sock ]] ||
  d_bad "a server was started: $(ls "$W")"
d_same_sums "refused serve" "$before" "$W"/m?
d_ok "serve refuses members it cannot write, naming --read-only"

d_log "2. serve --read-only as nobody"
d_run serve.ro as_nobody "${D_PRE[@]}" "$NBDSTRIPE" serve --read-only "$W/ro.conf"
[[ $D_RC -eq 0 ]] || d_fail "serve --read-only: exit $D_RC"
d_expect_err serve.ro "serving 'ro' read-only on $W/ro.sock"
pid=$(<"$W/ro.pid")
D_PIDS+=("$pid")
uri="nbd+unix:///?socket=$W/ro.sock"
[[ $(nbdinfo --json "$uri" | jq '.exports[0]."is_read_only"') == true ]] ||
  d_bad "the export is not read-only"
nbdcopy "$uri" "$D_TMP/got" && cmp -s -n $((1024 * 1024)) "$D_TMP/data" "$D_TMP/got" &&
  d_ok "reads return what was written" || d_bad "reads do not return the data"
if nbdcopy "$D_TMP/data" "$uri" 2>"$D_TMP/write.err"; then
  d_bad "a write to a read-only volume succeeded"
else
  d_ok "a write is refused: $(head -1 "$D_TMP/write.err")"
fi
d_stop "$pid"
d_same_sums "read-only serve" "$before" "$W"/m?

d_log "3. members nobody can read"
chmod 0600 "$W/m1"
d_run check.m1 as_nobody "$NBDSTRIPE" check "$W/ro.conf"
[[ $D_RC -eq 1 ]] || d_bad "check with member 1 unreadable: exit $D_RC"
d_expect_err check.m1 "member 1 ($W/m1): " "Permission denied"
grep -q 'valid header' "$D_TMP/check.m1.err" &&
  d_bad "check speaks of headers it could not read"
d_run serve.m1 as_nobody "$NBDSTRIPE" serve --read-only "$W/ro.conf"
[[ $D_RC -eq 1 ]] || d_bad "serve with member 1 unreadable: exit $D_RC"
d_expect_err serve.m1 "member 1 ($W/m1): " "Permission denied"
chmod 0600 "$W"/m?
d_run check.all as_nobody "$NBDSTRIPE" check "$W/ro.conf"
[[ $D_RC -eq 1 ]] || d_bad "check with no member readable: exit $D_RC"
d_expect_err check.all "no member could be read: nothing to assemble" \
  "member 0 ($W/m0): " "Permission denied"
grep -q 'valid header' "$D_TMP/check.all.err" &&
  d_bad "check speaks of headers it could not read"
d_same_sums "unreadable members" "$before" "$W"/m?
d_ok "unreadable members are named with their permission error"

d_asan_reports
d_done
