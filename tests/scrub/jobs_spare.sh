#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The automatic replace onto a spare (on_failing = "replace") among the
# other jobs (include/jobs.h's table), driven by tests/scrub/jobs.py
# (JOBS_SPARE=1), a writer checked against a model throughout.
#
# Two members of 8 MiB (64K chunks, data from 1 MiB): m0 a file, m1 an
# NBD export of tests/replace/badrange.c whose reads fail in B1 and B2
# while $D_TMP/armed exists; m2 a file to grow onto; one spare.
#   1. grow 2 -> 3 held half-way: a scrub reports B1 through the new
#      layout and B2 through the old, and makes member 1 failing; its
#      replace onto the spare waits, refused, naming the grow.
#   2. a slow scrub; the grow ends, the replace onto the spare starts
#      beside the scrub and is held half-way: a replace, a grow --size
#      and a second scrub refused naming the job under way; the slow
#      scrub cancelled, a scrub maps through the volume's layout; the
#      replace ends done.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd gcc
nbdkit --dump-config >/dev/null 2>&1 || d_skip "nbdkit does not run"
nbdkit cc --dump-plugin >/dev/null 2>&1 || d_skip "nbdkit has no cc plugin"

RP_DO=$M
C=$((64 * K))
data=$((8 * M))
size=$((M + data))
for f in m0 m1.back m2 spare new0; do truncate -s "$size" "$D_TMP/$f"; done
B1=1:$((M + 2 * C + 8 * K)):$((8 * K))
B2=1:$((M + 100 * C + 16 * K)):$((8 * K))
bad () { local IFS=:; set -- $1; echo "bad=$2:$3"; }
r_unix m1 cc "$HERE/../replace/badrange.c" EXTRA_CFLAGS="-Wall -Werror" \
  file="$D_TMP/m1.back" armed="$D_TMP/armed" "$(bad "$B1")" "$(bad "$B2")"
M1=$R_URI
export M2=$D_TMP/m2
rp_volume vol 64K "spares = [ \"$D_TMP/spare\" ];
on_failing = \"replace\";" "$D_TMP/m0" "$M1"
sed -i "s|^health = { status_file = \"\\(.*\\)\"; };|health = { status_file = \"\\1\"; interval = 1; probe_interval = 1; };|" "$RP_CONF"
grep -q probe_interval "$RP_CONF" || d_fail "could not set the health group"
rp_create
d_random "$D_TMP/pattern" $((2 * data))
rp_start fill
rp_write_pattern "$D_TMP/pattern"
rp_stop
rp_start serve -D stripe.replace_gate=1

if JOBS_SPARE=1 "$RP_PY" "$HERE/jobs.py" "$RP_CTL" "$RP_URI" "$D_TMP" \
     "$D_TMP/pattern" "$B1,$B2"; then
  d_ok "the replace onto a spare as the table says, the writer's model held"
else
  d_bad "jobs.py found problems (above)"
fi
d_done
