#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Client writes that race the copier are never overwritten by older data
# (include/replace.h: a write overlapping the window being copied waits
# for it; the copier waits for writes in flight over the window it is
# about to take).  Exactly that race, made to happen on every window by
# construction, not by timing:
#
#   - the server holds the copier at each phase (-D stripe.replace_gate=1)
#     and tests/replace/race.py lets it go step by step;
#   - the old member (1 of 3) is an NBD export behind nbdkit's log filter
#     (the requests it receives) and pause filter (race.py pauses it);
#   - with the copier held at "advanced" (window k-1 written, window k
#     read and held), race.py writes zeroes and a trim where the copy has
#     passed, flushes, then writes unique bytes into window k (A), seen
#     held by the window (the status' clients_held), pauses old, writes
#     into window k+1 (B), seen in old's log (in flight, held there), and
#     lets the copier go: it must wait for B before it takes window k+1.
#     A probe write into window k+1, held once the copier has announced
#     that window, shows it has got there; the copier must still be
#     where it was (not held at "locked") until old is let go; then A
#     must still be held when it has taken window k+1.  A into window 0
#     is written while the copier holds window 0 read.
#
# After the replace: the volume (now on NEW) reads back exactly the
# pattern with those writes, and NEW's data area, read straight from its
# file, holds member 1's share of it (as does old's backing file).
#
# NEW is an NBD export too (nbdkit file), or with --new-file a local file:
# the A write into the last window is held through the switch, and lands
# on NEW after it.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((48 * M))
RP_DO=$M
for f in m0 m1.back m2 new; do truncate -s "$size" "$D_TMP/$f"; done
r_unix m1 --filter=log --filter=pause file "$D_TMP/m1.back" \
  logfile="$D_TMP/m1.log" pause-control="$D_TMP/m1.pause"
m1_uri=$R_URI
if [[ ${1:-} == --new-file ]]; then
  new=$D_TMP/new
else
  r_unix new file "$D_TMP/new"
  new=$R_URI
fi
rp_volume vol 64K "" "$D_TMP/m0" "$m1_uri" "$D_TMP/m2"
rp_create

# The volume's data, written straight into the members (the delay filter
# would make writing it through the volume slow).
vsize=$((3 * (size - M)))
d_random "$D_TMP/pattern" "$vsize"
"$RP_PY" "$HERE/race.py" fill "$D_TMP/pattern" "3,65536,$M" \
  "$D_TMP/m0" "$D_TMP/m1.back" "$D_TMP/m2" || d_fail "race.py fill"

rp_start vol -D stripe.replace_gate=1
rp_same start "$D_TMP/pattern" || d_fail "the volume does not hold its data"

d_log "replace member 1 while racing writes"
d_run replace d_ns replace "$RP_CONF" 1 "$new"
[[ $D_RC -eq 0 ]] || d_fail "replace did not start"
rc=0
"$RP_PY" "$HERE/race.py" run "$RP_URI" "$RP_CTL" "3,65536,$M" 1 \
  "$size" "$D_TMP/pattern" "$D_TMP/new" "$D_TMP/m1.back" \
  "$D_TMP/m1.pause" "$D_TMP/m1.log" >"$D_TMP/race.json" || rc=$?
cat "$D_TMP/race.json"
if [[ $rc -eq 0 ]]; then
  d_ok "every racing write, zero and trim is on NEW and on the volume"
else
  d_bad "race.py found lost or stale data (above)"
fi
# It did race, on every window: member 1's 47 MiB are 12 windows, an A
# write into each; a B write, in flight on old as the copier came to take
# its window, into each but windows 0 and 1 (the copier takes window 1
# before it is first held with window 0 read).
[[ $(jq -c '[.windows, .writes_A, .writes_B, .raced_B]' "$D_TMP/race.json") == "[12,12,10,10]" ]] ||
  d_bad "the client did not race the copier on every window"
rp_wait done --state done --deadline 30 || d_bad "the replace did not end done"
grep -q -F "\"$new\"" "$RP_CONF" || d_bad "the config does not name NEW"
rp_stop
d_done
