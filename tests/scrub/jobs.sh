#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Jobs that may run together do, and the others are refused naming the
# job under way (include/jobs.h's table), on a served volume with a
# writer checked against a model (tests/scrub/jobs.py drives it).
#
# Three members of 8 MiB (64K chunks, data from 1 MiB): m0 and m2 files,
# m1 an NBD export of tests/replace/badrange.c (nbdkit cc); a fourth, m3,
# to grow onto, the same.  Their reads fail in given member ranges while
# $D_TMP/armed exists: blocks that go bad after the copy has read them.
#   m1: B1 in the part a grow held half-way has moved (read from the new
#       layout), B2 in the part it has not reached (the old layout), B3
#       in a place it has moved away from (no read reaches it), B6
#       where a shrink held half-way has moved data to;
#   m3: B4 in the part moved, B5 in the part not reached (nothing there).
#
#   1. a slow scrub; a grow 3 -> 4 started beside it and held half-way
#      (the gate): a second grow, a shrink, a grow --size, a replace and
#      a second scrub refused, naming the job under way and how far it
#      is; the slow scrub cancelled, a scrub reports exactly B1 and B4
#      through the new layout and B2 through the old (computed here from
#      md raid0's arithmetic), not B3 nor B5; the grow goes on to its end.
#   2. a replace of member 0 (onto a bigger file) beside a slow scrub; a
#      grow --size held, a slow scrub started beside it, both go on; a
#      shrink 4 -> 3 (m3 leaves) started beside the scrub and held
#      half-way: a replace refused naming it, a scrub maps through both
#      layouts (backward: the new one from the end down to the position).
#   3. a replace of member 2 held half-way: a scrub maps through the
#      volume's layout.
# A writer's every byte checked against a model after each.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd gcc
nbdkit --dump-config >/dev/null 2>&1 || d_skip "nbdkit does not run"
nbdkit cc --dump-plugin >/dev/null 2>&1 || d_skip "nbdkit has no cc plugin"

RP_DO=$M
C=$((64 * K))
data=$((8 * M))
size=$((M + data))
for f in m0 m1.back m2 m3.back m4 new2; do
  truncate -s "$size" "$D_TMP/$f"
done
truncate -s $((size + M)) "$D_TMP/new0" # room for a grow --size
B1=1:$((M + 2 * C + 8 * K)):$((8 * K))
B2=1:$((M + 100 * C + 16 * K)):$((8 * K))
B3=1:$((M + 22 * C)):$((8 * K))
B6=1:$((M + 115 * C + 24 * K)):$((8 * K))
B4=3:$((M + 5 * C + 4 * K)):$((8 * K))
B5=3:$((M + 80 * C)):$((8 * K))
bad () { local IFS=:; set -- $1; echo "bad=$2:$3"; }
r_unix m1 cc "$HERE/../replace/badrange.c" EXTRA_CFLAGS="-Wall -Werror" \
  file="$D_TMP/m1.back" armed="$D_TMP/armed" \
  "$(bad "$B1")" "$(bad "$B2")" "$(bad "$B3")" "$(bad "$B6")"
M1=$R_URI
r_unix m3 cc "$HERE/../replace/badrange.c" EXTRA_CFLAGS="-Wall -Werror" \
  file="$D_TMP/m3.back" armed="$D_TMP/armed" "$(bad "$B4")" "$(bad "$B5")"
export M3=$R_URI
rp_volume vol 64K "" "$D_TMP/m0" "$M1" "$D_TMP/m2"
rp_create
d_random "$D_TMP/pattern" $((3 * data))
rp_start fill
rp_write_pattern "$D_TMP/pattern"
rp_stop
rp_start serve -D stripe.replace_gate=1

if "$RP_PY" "$HERE/jobs.py" "$RP_CTL" "$RP_URI" "$D_TMP" "$D_TMP/pattern" \
     "$B1,$B2,$B3,$B4,$B5,$B6"; then
  d_ok "every pair as the table says, the writer's model held"
else
  d_bad "jobs.py found problems (above)"
fi
d_done
