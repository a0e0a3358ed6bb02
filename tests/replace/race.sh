#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Client writes that race the copier are never overwritten by older data
# (include/replace.h: a write overlapping the window being copied waits
# for it; the copier waits for writes in flight over the window it is
# about to take).  Exactly that race, made to happen on every window:
#
#   - the server holds each 4 MiB window 300 ms between reading the old
#     member and writing NEW (-D stripe.replace_hold_ms=300);
#   - the old member (1 of 3) is an NBD export behind nbdkit's delay
#     filter, its writes 600 ms slow: a write into the next window is
#     still in flight on it when the copier is done with the window;
#   - tests/replace/race.py polls the control socket for bytes_copied,
#     and on each window writes unique bytes into the window being copied
#     (A) and into the next one (B) from two connections at once, zeroes
#     and trims where the copy has passed, flushes; records all of it.
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
r_unix m1 --filter=delay file "$D_TMP/m1.back" delay-write=600ms
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

rp_start vol -D stripe.replace_hold_ms=300
rp_same start "$D_TMP/pattern" || d_fail "the volume does not hold its data"

d_log "replace member 1 while racing writes"
d_run replace d_ns replace "$RP_CONF" 1 "$new"
[[ $D_RC -eq 0 ]] || d_fail "replace did not start"
rc=0
"$RP_PY" "$HERE/race.py" run "$RP_URI" "$RP_CTL" "3,65536,$M" 1 \
  "$size" "$D_TMP/pattern" "$D_TMP/new" "$D_TMP/m1.back" \
  >"$D_TMP/race.json" || rc=$?
cat "$D_TMP/race.json"
if [[ $rc -eq 0 ]]; then
  d_ok "every racing write, zero and trim is on NEW and on the volume"
else
  d_bad "race.py found lost or stale data (above)"
fi
# It did race: A and B on at least 3 windows.
[[ $(jq .writes_A "$D_TMP/race.json") -ge 3 && $(jq .writes_B "$D_TMP/race.json") -ge 2 ]] ||
  d_bad "the client did not write into enough windows to race the copier"
rp_wait done --state done --deadline 30 || d_bad "the replace did not end done"
grep -q -F "\"$new\"" "$RP_CONF" || d_bad "the config does not name NEW"
rp_stop
d_done
