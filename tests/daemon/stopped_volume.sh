#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What the job commands do with a volume that is not served (#38):
#
#   grow, shrink, replace without --offline: exit 1, the error says the
#     volume is not served and names the way on, "nbdstripe CMD --offline"
#   grow --dry-run, shrink --dry-run: the plan, exit 0, read from the
#     members' headers and the config with no server; the shrink's
#     command to run ends in --offline (served, it does not)
#   replace --dry-run: which member, onto which device, the bytes to copy
#     and the checks passed, exit 0; NEW too small, or one of the members:
#     refused, exit 1
#   none of them writes: the members, NEW and the config are
#     byte-identical afterwards
#   served, replace --dry-run, grow --dry-run and shrink --dry-run work
#     the same
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init

M=$((1024 * 1024))
for f in m0 m1 n0 n1; do truncate -s $((8 * M)) "$D_TMP/$f"; done
truncate -s $((2 * M)) "$D_TMP/small"
conf=$D_TMP/v.conf
d_conf "$conf" v0 64K \
  "socket = \"$D_TMP/v0.sock\"; pidfile = \"$D_TMP/v0.pid\";" \
  "$D_TMP/m0" "$D_TMP/m1"
d_run create d_ns create "$conf"
[[ $D_RC -eq 0 ]] || d_fail "create: exit $D_RC"
files=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/n0" "$D_TMP/n1" "$D_TMP/small" "$conf")
before=$(d_sums "${files[@]}")

# expect NAME STATUS -- ARGS...: nbdstripe ARGS exits STATUS.
expect ()
{
  local name=$1 status=$2
  shift 3
  d_run "$name" d_ns "$@"
  [[ $D_RC -eq $status ]] || d_bad "$name: nbdstripe $*: exit $D_RC, expected $status"
}

expect grow 1 -- grow "$conf" "$D_TMP/n0"
d_expect_err grow "the volume is not served" "nbdstripe grow --offline"
expect shrink 1 -- shrink "$conf" 1 --size 1M
d_expect_err shrink "the volume is not served" "nbdstripe shrink --offline"
expect replace 1 -- replace "$conf" 1 "$D_TMP/n1"
d_expect_err replace "the volume is not served" "nbdstripe replace --offline"
d_ok "grow, shrink, replace of a stopped volume point at --offline"

expect grow.dry 0 -- grow --dry-run "$conf" "$D_TMP/n0"
grep -q -F "would grow 'v0': " "$D_TMP/grow.dry.out" ||
  d_bad "grow --dry-run: no 'would grow' line"
expect shrink.dry 0 -- shrink --dry-run "$conf" 1
grep -q -E "then: nbdstripe shrink .* 1 --size [0-9]+ --offline$" "$D_TMP/shrink.dry.out" ||
  d_bad "shrink --dry-run: no size to shrink to, or not the offline command"
d_ok "grow --dry-run and shrink --dry-run work on a stopped volume"

expect replace.dry 0 -- replace --dry-run "$conf" 1 "$D_TMP/n1"
out=$D_TMP/replace.dry.out
grep -q -F "would replace member 1 of volume 'v0' ($D_TMP/m1) by $D_TMP/n1: " "$out" ||
  d_bad "replace --dry-run: does not say which member onto which device"
grep -q -E " to copy \([0-9]+ bytes\)" "$out" || d_bad "replace --dry-run: no bytes to copy"
grep -q -F "checks passed: " "$out" || d_bad "replace --dry-run: no checks passed"
expect replace.dry-small 1 -- replace --dry-run "$conf" 1 "$D_TMP/small"
d_expect_err replace.dry-small "$D_TMP/small: $((2 * M)) bytes: member 1 needs"
expect replace.dry-member 1 -- replace --dry-run "$conf" 1 "$D_TMP/m0"
d_expect_err replace.dry-member "member 0"
d_ok "replace --dry-run says what it would do, and refuses what replace would"

d_same_sums "nothing written" "$before" "${files[@]}" &&
  d_ok "no member, NEW or config changed"

# Served, replace --dry-run opens the volume as check does (unclaimed):
# the same lines, and NEW still untouched.
new_sum=$(d_sums "$D_TMP/n1")
d_serve serve "$conf" "$D_TMP/v0.pid" || d_fail "serve: exit $D_RC"
expect replace.dry-served 0 -- replace --dry-run "$conf" 1 "$D_TMP/n1"
grep -q -F "would replace member 1 of volume 'v0' ($D_TMP/m1) by $D_TMP/n1: " \
  "$D_TMP/replace.dry-served.out" ||
  d_bad "replace --dry-run, served: does not say what it would do"
expect grow.dry-served 0 -- grow --dry-run "$conf" "$D_TMP/n0"
expect shrink.dry-served 0 -- shrink --dry-run "$conf" 1
grep -q -E "then: nbdstripe shrink .* 1 --size [0-9]+$" "$D_TMP/shrink.dry-served.out" ||
  d_bad "shrink --dry-run, served: not the served volume's command"
d_stop "$D_SERVER_PID"
d_same_sums "served: NEW untouched" "$new_sum" "$D_TMP/n1" &&
  d_ok "replace --dry-run and grow --dry-run on the served volume"
d_done
