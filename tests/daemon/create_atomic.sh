#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe create` is all-or-nothing: when the header of the last member
# cannot be written after the others were, the others get their previous
# first 4 KiB back, and no member is left claiming to be part of an array
# that does not exist.
#
# The failing member is real I/O, not a mock: a regular file exposed by
# nbdfuse (mounted over a file, "naked" mode) from an nbdkit server whose
# reads work -- so create's checks (open, size, probe) pass -- and where:
#
#   --fault=write  every write fails with EIO (nbdkit memory 16M behind
#                  the error filter, error-pwrite-rate=100%);
#   --fault=flush  writes reach the backing file but every flush fails
#                  with EIO (nbdkit's eval plugin over a file), i.e. the
#                  header's pwrite succeeds and its fdatasync fails.
#
# Members 0..2 are files with random content.  Asserts: create exits 1
# naming member 3 and saying the volume was not created; members 0..2 are
# byte-identical to before (whole files, hence their first 4 KiB), and none
# of the four has a valid header afterwards (inspect), so check fails.
#
# Skipped (77) without nbdfuse or FUSE (/dev/fuse, permission to mount).
# Readiness without sleeping: nbdfuse's pidfile is a FIFO, which nbdfuse
# opens and writes once the mount is ready.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1

fault="write"
case ${1:-} in
  ""|--fault=write) fault="write" ;;
  --fault=flush) fault="flush" ;;
  *) echo "usage: $0 [--fault=write|--fault=flush]" >&2; exit 2 ;;
esac

d_init nbdkit nbdfuse sha256sum cmp setsid umount
[[ -c /dev/fuse ]] || d_skip "no /dev/fuse: FUSE is not available"

M=$((1024 * 1024))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2" "$D_TMP/m3")
for i in 0 1 2; do d_random "${m[i]}" $((8 * M)); done
: >"${m[3]}"                    # the mountpoint: a regular file
back=$D_TMP/m3.back             # --fault=flush: what member 3 holds

case $fault in
  write)
    nbdkit --filter=error null --dump-plugin >/dev/null 2>&1 ||
      d_skip "nbdkit's error filter is not installed"
    server=(nbdkit --exit-with-parent --filter=error memory 16M
            error-pwrite=EIO error-pwrite-rate=100%)
    what="nbdkit memory 16M, every write fails (EIO)" ;;
  flush)
    nbdkit eval --dump-plugin >/dev/null 2>&1 ||
      d_skip "nbdkit's eval plugin is not installed"
    truncate -s $((16 * M)) "$back"
    server=(nbdkit --exit-with-parent eval
            "get_size=echo $((16 * M))"
            "pread=dd if=$back skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none"
            "pwrite=dd of=$back seek=\$4 oflag=seek_bytes conv=notrunc status=none"
            "can_flush=exit 0"
            "flush=echo EIO injected flush failure >&2; exit 1")
    what="nbdkit eval over a file, every flush fails (EIO)" ;;
esac

d_log "mount member 3 with nbdfuse: $what"
mkfifo "$D_TMP/nbdfuse.pid"
# If nbdfuse fails before it is ready, the FIFO gets its status instead.
setsid bash -c '
  fifo=$1 mnt=$2
  shift 2
  nbdfuse -P "$fifo" "$mnt" [ "$@" ] || echo "nbdfuse failed: exit $?" >"$fifo"' \
  nbdfuse-wrapper "$D_TMP/nbdfuse.pid" "${m[3]}" "${server[@]}" \
  >"$D_TMP/nbdfuse.out" 2>"$D_TMP/nbdfuse.err" </dev/null &
fuse_pid=$!
D_BGPIDS+=("$fuse_pid")
D_MOUNTS+=("${m[3]}")
ready=$(timeout 60 cat "$D_TMP/nbdfuse.pid") || ready="timed out"
if [[ ! $ready =~ ^[0-9]+$ ]]; then
  cat "$D_TMP/nbdfuse.err" >&2
  d_skip "cannot mount with nbdfuse ($ready): $(head -c 300 "$D_TMP/nbdfuse.err")"
fi
[[ -f ${m[3]} && $(stat -c %s "${m[3]}") -eq $((16 * M)) ]] ||
  d_fail "member 3 is not a 16 MiB regular file through FUSE"
# The fault is in place: reads succeed, a write (+ fsync) fails.
cmp -s -n 4096 "${m[3]}" /dev/zero || d_fail "member 3 does not read as zeros"
if dd if=/dev/zero of="${m[3]}" bs=4096 count=1 conv=notrunc,nocreat,fsync \
      status=none 2>/dev/null; then
  d_fail "a write to member 3 succeeded: the fault is not in place"
fi
d_ok "member 3 reads, and its writes fail as intended"

before=$(d_sums "${m[0]}" "${m[1]}" "${m[2]}")
first4k=$(for i in 0 1 2; do head -c 4096 "${m[i]}" | sha256sum; done)
d_conf vol.conf vol0 64K "" "${m[@]}"

d_log "create: the header of member 3 cannot be written ($fault fails)"
d_run create d_ns create vol.conf
d_expect_fail create
d_expect_err create "member 3 (${m[3]})" "volume not created"
! grep -q -F "could not restore" "$D_TMP/create.err" || d_bad "create could not restore a member"

d_log "members 0..2 are as before; no member has a header"
after4k=$(for i in 0 1 2; do head -c 4096 "${m[i]}" | sha256sum; done)
[[ $after4k == "$first4k" ]] || d_bad "the first 4 KiB of members 0..2 were not restored"
d_same_sums restored "$before" "${m[0]}" "${m[1]}" "${m[2]}" &&
  d_ok "members 0..2 byte-identical to before"
for i in 0 1 2 3; do
  d_run "inspect.m$i" d_ns inspect "${m[i]}"
  [[ $D_RC -eq 1 ]] ||
    d_bad "member $i (${m[i]}) claims to be part of the array that was not created (inspect exit $D_RC)"
done
d_run check d_ns check vol.conf
[[ $D_RC -eq 1 ]] || d_bad "check of the half-created volume: exit $D_RC, expected 1"

d_log "unmount member 3"
umount "${m[3]}" || d_bad "umount ${m[3]}"
wait "$fuse_pid" || d_bad "nbdfuse exited with status $?"
D_MOUNTS=()
D_BGPIDS=()
if [[ $fault == flush ]]; then
  # What member 3 really holds, past any cache.
  d_run inspect.back d_ns inspect "$back"
  [[ $D_RC -eq 1 ]] || d_bad "member 3's storage holds a valid header after the failed create"
fi
d_done
