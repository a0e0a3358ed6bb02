#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe create` stays all-or-nothing with remote members: when the
# header of the last member -- an NBD export -- cannot be written after
# the others were, every member gets its previous first 4 KiB back.
#
#   member 0  nbd+unix, `nbdkit file` over b0      random data, behind
#             nbdkit's log filter: it got the header, then its old 4 KiB
#   member 1  a local file m1                      random data
#   member 2  nbd://127.0.0.1:PORT, `nbdkit file`  random data (b2)
#   member 3  nbd+unix over b3 (random data), whose reads work (so that
#             create's checks pass) and where:
#     --fault=write  every write fails with EIO (nbdkit's error filter);
#     --fault=flush  writes reach b3 but every flush fails with EIO
#                    (nbdkit's eval plugin over b3): the header lands and
#                    making it durable fails.
#
# Asserts: create exits 1 naming member 3 and its URI and saying the
# volume was not created, never "could not restore"; every backing file
# (read directly) and the local member are byte-identical to before; no
# member has a header (inspect of each URI), and check fails.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1

fault="write"
case ${1:-} in
  ""|--fault=write) fault="write" ;;
  --fault=flush) fault="flush" ;;
  *) echo "usage: $0 [--fault=write|--fault=flush]" >&2; exit 2 ;;
esac

d_init nbdkit setsid sha256sum
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

M=$((1024 * 1024))
size=$((8 * M))
for f in b0 m1 b2 b3; do d_random "$D_TMP/$f" "$size"; done
files=("$D_TMP/b0" "$D_TMP/m1" "$D_TMP/b2" "$D_TMP/b3")

nbdkit --filter=log null --dump-plugin >/dev/null 2>&1 ||
  d_skip "nbdkit's log filter is not installed"
r_unix s0 --filter=log file "$D_TMP/b0" "logfile=$D_TMP/s0.nbdlog"
u0=$R_URI
r_tcp s2 file "$D_TMP/b2"
u2=$R_URI
case $fault in
  write)
    nbdkit --filter=error null --dump-plugin >/dev/null 2>&1 ||
      d_skip "nbdkit's error filter is not installed"
    r_unix s3 --filter=error file "$D_TMP/b3" error-pwrite=EIO error-pwrite-rate=100%
    what="every write fails (EIO)" ;;
  flush)
    nbdkit eval --dump-plugin >/dev/null 2>&1 ||
      d_skip "nbdkit's eval plugin is not installed"
    b3=$D_TMP/b3
    r_unix s3 eval \
      "get_size=echo $size" \
      "pread=dd if=$b3 skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none" \
      "pwrite=dd of=$b3 seek=\$4 oflag=seek_bytes conv=notrunc status=none" \
      "can_flush=exit 0" \
      "flush=echo EIO injected flush failure >&2; exit 1"
    what="writes land, every flush fails (EIO)" ;;
esac
u3=$R_URI
members=("$u0" "$D_TMP/m1" "$u2" "$u3")
d_conf vol.conf vol0 64K "" "${members[@]}"

before=$(d_sums "${files[@]}")
d_log "create: member 3 ($u3): $what"
d_run create d_ns create vol.conf
d_expect_fail create
# Its allocation map is the first thing written to it (tests/lib/daemon.sh).
d_expect_err create "member 3 ($u3): writing the allocation map" "volume not created"
! grep -q -F "could not restore" "$D_TMP/create.err" || d_bad "create could not restore a member"

d_log "every member as before; no member has a header"
# Member 0 did get its header, and then its old first 4 KiB back.
writes=$(grep -c ' Write id=[0-9]* offset=0x0 count=0x1000 ' "$D_TMP/s0.nbdlog")
flushes=$(grep -c ' Flush id=' "$D_TMP/s0.nbdlog")
[[ $writes -eq 2 && $flushes -ge 2 ]] &&
  d_ok "member 0 got the header and then its old 4 KiB back, each flushed" ||
  d_bad "member 0's server got $writes writes of 4 KiB at 0 and $flushes flushes, expected 2 and 2"
d_same_sums restored "$before" "${files[@]}" &&
  d_ok "all four members byte-identical to before (backing files read directly)"
for i in 0 1 2 3; do
  d_run "inspect.m$i" d_ns inspect "${members[i]}"
  [[ $D_RC -eq 1 ]] ||
    d_bad "member $i (${members[i]}) claims to be part of the array that was not created (inspect exit $D_RC)"
done
d_run check d_ns check vol.conf
[[ $D_RC -eq 1 ]] || d_bad "check of the half-created volume: exit $D_RC, expected 1"
d_done
