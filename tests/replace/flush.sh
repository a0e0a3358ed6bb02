#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A FLUSH during and after a replace syncs what holds the writes
# (include/dirty.h, include/replace.h): the member replaced (0 of 2) and
# NEW are NBD exports behind tests/lib/flush_member.sh, which logs every
# write landed and every sync; the copier is held at each phase
# (-D stripe.replace_gate=1).  tests/replace/flush.py:
#
#   - with the copier held after its first window, a write below the
#     watermark lands on both, and the flush after it syncs both; the
#     next flush neither; nor a flush after a write on the other member;
#   - after the switch, the first flush syncs NEW (now member 0) once --
#     synced under the hold already, it is marked at the switch all the
#     same -- and not the old member; the next flush does not; a write
#     on member 0 is synced on NEW.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd dd

size=$((9 * M))          # 1 MiB header area, 2 windows of data
for d in old new; do
  mkdir "$D_TMP/$d"
  truncate -s "$size" "$D_TMP/$d/data"
  : >"$D_TMP/$d/log"
  r_unix "$d" sh "$RP_LIB/flush_member.sh" dir="$D_TMP/$d"
  eval "${d}_uri=\$R_URI"
done
truncate -s "$size" "$D_TMP/m1"
# shellcheck disable=SC2154 # old_uri, new_uri: set by the eval above
rp_volume vol 64K "" "$old_uri" "$D_TMP/m1"
rp_create
rp_start vol -D stripe.replace_gate=1

if "$RP_PY" "$HERE/flush.py" "$RP_URI" "$RP_CTL" "2,65536,$M" \
     "$D_TMP/old" "$new_uri" "$D_TMP/new"; then
  d_ok "flush.py: every check passed"
else
  d_bad "flush.py (above)"
  for d in old new; do printf -- '-- %s log (tail):\n' "$d"; tail -20 "$D_TMP/$d/log"; done
fi
rp_stop
d_done
