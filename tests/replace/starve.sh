#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The copier and the clients never starve each other
# (tests/replace/starve.py):
#
#   starve.sh hot   a hot spot in member 0's second window written back to
#                   back from 8 connections (the old member an NBD export
#                   whose writes take 100 ms: several always in flight
#                   there) while member 0 is replaced: the copy passes it
#                   and ends within 60 s, the writers going on, and the
#                   volume holds each writer's last write
#   starve.sh trim  the copier held at the end of its first window
#                   (-D stripe.replace_gate=1): a trim of the whole volume
#                   waits for the window taken before it, then ends while
#                   the copier is held at the next phase -- not once the
#                   copy has passed its whole span; the volume reads zeroes
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

mode=${1:-hot}
size=$((17 * M))         # 1 MiB header area, 4 windows of data
for f in m0.back m1 new; do truncate -s "$size" "$D_TMP/$f"; done
if [[ $mode == hot ]]; then
  r_unix m0 --filter=delay file "$D_TMP/m0.back" delay-write=100ms
  gate=()
else
  r_unix m0 file "$D_TMP/m0.back"
  gate=(-D stripe.replace_gate=1)
fi
rp_volume vol 64K "" "$R_URI" "$D_TMP/m1"
rp_create
rp_start vol "${gate[@]}"
rc=0
if [[ $mode == hot ]]; then
  "$RP_PY" "$HERE/starve.py" hot "$RP_URI" "$RP_CTL" "2,65536,$M" "$size" \
    "$D_TMP/new" 8 >"$D_TMP/out.json" || rc=$?
else
  "$RP_PY" "$HERE/starve.py" trim "$RP_URI" "$RP_CTL" "2,65536,$M" "$size" \
    "$D_TMP/new" >"$D_TMP/out.json" || rc=$?
fi
cat "$D_TMP/out.json"
if [[ $rc -eq 0 ]]; then
  d_ok "$mode: neither the copier nor the client starved"
else
  d_bad "$mode: starved (above)"
fi
rp_stop
d_done
