#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# grow --wait and shrink --wait into a pipe say how far they are as they
# go: a line at least every 5% and every 10 s (progress_lines.py: 5% and
# the 8 MiB the mover is seen to move at once, two windows), the
# new member (an NBD export behind nbdkit's delay filter) slowing the
# reshape so that it lasts some seconds; with --json, JSON Lines: one
# progress object a line, the last line the result, ok.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

for f in a0 a1 n0; do truncate -s 64M "$D_TMP/$f"; done
rp_volume v 64K "" "$D_TMP/a0" "$D_TMP/a1"
rp_create
rp_start serve
head -c $((96 * M)) /dev/urandom >"$D_TMP/data"
nbdcopy "$D_TMP/data" "$RP_URI" || d_fail "nbdcopy onto the volume"
r_unix n0 --filter=delay file "$D_TMP/n0" delay-read=150ms delay-write=150ms
new=$R_URI

# run LABEL COMMAND text|json ARGS...: nbdstripe COMMAND ARGS --wait, its
# stdout a pipe into progress_lines.py stamp; the lines checked.
run ()
{
  local label=$1 cmd=$2 mode=$3 rc
  shift 3
  "$NBDSTRIPE" "$cmd" --wait "$@" 2>"$D_TMP/$label.err" |
    "$RP_PY" "$HERE/progress_lines.py" stamp "$D_TMP/$label.out"
  rc=${PIPESTATUS[0]}
  sed 's/^/   | /' "$D_TMP/$label.out" "$D_TMP/$label.err" | cut -c1-200
  [[ $rc -eq 0 ]] || d_bad "$label: nbdstripe $cmd: exit $rc"
  if "$RP_PY" "$HERE/progress_lines.py" check "$D_TMP/$label.out" "$cmd" \
       "$mode" $(((8 * M * 100 + moved - 1) / moved)); then
    d_ok "$label: progress into a pipe every 5% and 10 s"
  else
    d_bad "$label: its progress lines (above)"
  fi
}

moved=$((126 * M)) # the volume's size: a grow moves it all, a shrink too
run grow grow text "$RP_CONF" "$new"
size=$("$NBDSTRIPE" shrink --dry-run --json "$RP_CONF" 2 | jq -r .plan.size_to)
run shrink shrink json --json "$RP_CONF" 2 --size "$size"
cmp -n $((96 * M)) "$D_TMP/data" <(nbdcopy "$RP_URI" -) ||
  d_bad "the volume does not hold its data after the grow and the shrink"
d_done
