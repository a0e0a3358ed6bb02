#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A fast zero either works on every member it touches or changes nothing.
#
# NBD's fast zero (NBD_CMD_FLAG_FAST_ZERO) promises to fail at once, with
# nothing changed, when zeroing would be slow; clients (qemu-img convert,
# nbdcopy) then write zeroes themselves.  A volume can keep that promise
# only if every member it touches is KNOWN to zero fast before the first
# one is touched.
#
#   unknown  ad hoc volume over a file and a loop device, served with no
#            /sys (a mount namespace with an empty tmpfs there), so that
#            neither member's zeroing methods are known: a fast zero
#            across both is refused (ENOTSUP) and no byte of either member
#            changed.  A plain zero then works (and teaches the plugin),
#            and the same fast zero then works.  Against c876f37 the file
#            member was zeroed first and the unknown block device assumed
#            to cope.
#   header   a volume with headers over files: the methods are learnt at
#            start in the gap between header and data, so a fast zero
#            works from the first request, and zeroes.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy unshare
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
[[ $(id -u) -eq 0 ]] || d_skip "needs root (loop devices, mount namespaces)"
losetup -f >/dev/null 2>&1 || d_skip "no free loop device"

M=$((1024 * 1024))
# zero URI OFFSET LENGTH FLAGS: prints "ok" or the errno name.
zero ()
{
  "$PY" -c "
import nbd
h = nbd.NBD()
h.connect_uri('$1')
try:
    h.zero($3, $2, $4)
    print('ok')
except nbd.Error as e:
    print(e.errno)
"
}
# is_zero URI OFFSET LENGTH
is_zero ()
{
  "$PY" -c "
import nbd, sys
h = nbd.NBD()
h.connect_uri('$1')
sys.exit(0 if h.pread($3, $2) == bytes($3) else 1)
"
}
FAST=$("$PY" -c 'import nbd; print(nbd.CMD_FLAG_FAST_ZERO)')

d_log "unknown zeroing methods (no /sys): fast zero refused, nothing changed"
d_random "$D_TMP/g" $((8 * M))
d_random "$D_TMP/f" $((8 * M))
l=$(losetup -f --show "$D_TMP/f") || d_fail "losetup"
D_LOOPS+=("$l")
sock=$D_TMP/u.sock
# In the foreground, in the background of the test; its pidfile a FIFO
# that it writes once it listens.
rm -f "$D_TMP/u.pid"
mkfifo "$D_TMP/u.pid"
setsid "${D_PRE[@]}" unshare -m --propagation private sh -c '
  mount -t tmpfs none /sys || { echo "no tmpfs on /sys" >"$2"; exit 1; }
  exec nbdkit -f --exit-with-parent -U "$1" -P "$2" "$3" chunk=64K \
    file="$4" file="$5"' \
  sh "$sock" "$D_TMP/u.pid" "$STRIPE_PLUGIN" "$D_TMP/g" "$l" \
  </dev/null >"$D_TMP/u.log" 2>&1 &
D_BGPIDS+=("$!")
upid=$(timeout 30 cat "$D_TMP/u.pid")
[[ $upid =~ ^[0-9]+$ ]] || { cat "$D_TMP/u.log" >&2; d_fail "nbdkit in a namespace without /sys: $upid"; }
D_PIDS+=("$upid")
uri="nbd+unix:///?socket=$sock"
before=$(d_sums "$D_TMP/g" "$D_TMP/f")
got=$(zero "$uri" 0 $((512 * 1024)) "$FAST")
[[ $got == ENOTSUP || $got == EOPNOTSUPP ]] &&
  d_ok "fast zero across both members refused ($got)" ||
  d_bad "fast zero across both members: $got (expected ENOTSUP)"
sync
d_same_sums unknown "$before" "$D_TMP/g" "$D_TMP/f" &&
  d_ok "no byte of either member changed"
got=$(zero "$uri" 0 $((512 * 1024)) 0)
[[ $got == ok ]] && d_ok "a plain zero works" || d_bad "plain zero: $got"
is_zero "$uri" 0 $((512 * 1024)) && d_ok "... and zeroes" || d_bad "plain zero left data"
got=$(zero "$uri" $((1024 * 1024)) $((512 * 1024)) "$FAST")
[[ $got == ok ]] && d_ok "then a fast zero works (methods learnt)" ||
  d_bad "fast zero after the plain one: $got"
is_zero "$uri" $((1024 * 1024)) $((512 * 1024)) && d_ok "... and zeroes" ||
  d_bad "fast zero left data"
d_stop "$upid"

d_log "headers: methods learnt at start, fast zero works at once"
truncate -s $((9 * M)) "$D_TMP/h0" "$D_TMP/h1"
d_conf h.conf hz 64K "socket = \"$D_TMP/h.sock\"; pidfile = \"$D_TMP/h.pid\";" \
  "$D_TMP/h0" "$D_TMP/h1"
d_run create d_ns create h.conf
[[ $D_RC -eq 0 ]] || d_fail "create h.conf"
d_serve serve h.conf "$D_TMP/h.pid" || d_fail "serve h.conf"
huri="nbd+unix:///?socket=$D_TMP/h.sock"
d_random src $((16 * M))
nbdcopy src "$huri" || d_fail "nbdcopy"
got=$(zero "$huri" 0 $((2 * M)) "$FAST")
[[ $got == ok ]] && d_ok "fast zero on a fresh header volume works" ||
  d_bad "fast zero on a fresh header volume: $got"
is_zero "$huri" 0 $((2 * M)) && d_ok "... and zeroes" || d_bad "fast zero left data"
d_stop "$D_SERVER_PID"

d_done
