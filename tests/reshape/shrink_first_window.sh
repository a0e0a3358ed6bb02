#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A shrink killed before its first checkpoint (issue 34, item 2): 3 file
# members, data only below the new size (the rest holes, as a file system
# shrunk and trimmed leaves it), `shrink VOLUME 1 --size S` with the
# copier held (-D stripe.replace_gate=1) the Nth time at phase P -- its
# first windows written, where the old layout keeps the volume beyond S
# -- and the server killed (-9) there.  Served again, the shrink must be
# found on record and go on (`shrink --wait VOLUME`), or the same
# `shrink --size S`, without --force, must be taken again: never refused
# for the copies it wrote beyond S.  Then the config names members 0 and
# 2, and the volume holds the data.
#
#   shrink_first_window.sh P:N...   one kill for each
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

data=$((8 * M))
size=$((M + data))
new=$((2 * data))

one ()
{
  local at=$1 label=k${1/:/-}
  rm -f "$D_TMP"/m[0-2]
  for f in m0 m1 m2; do truncate -s "$size" "$D_TMP/$f"; done
  rp_volume "vol" 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
  rp_create
  rp_start "$label.fill"
  d_random "$D_TMP/pattern" "$new"
  nbdcopy "$D_TMP/pattern" "$RP_URI" || d_fail "nbdcopy into the volume"
  rp_stop
  rp_start "$label" -D stripe.replace_gate=1
  d_run "$label.shrink" d_ns shrink "$RP_CONF" 1 --size "$new"
  [[ $D_RC -eq 0 ]] || d_fail "$label: the shrink did not start (above)"
  rp_hold "$label.held" "$at" --job reshape ||
    d_fail "$label: the copier was not held at $at"
  rp_kill9
  rp_start "$label.again"
  d_run "$label.wait" d_ns shrink --wait "$RP_CONF"
  if grep -q "no grow or shrink is under way" "$D_TMP/$label.wait.out"; then
    # "None under way" has two causes: the shrink was not on record, or
    # it was and, resumed when the server started, ended before the
    # command asked.  The server then refuses the same shrink because it
    # removed member 1 by a shrink itself: that refusal is the proof.
    d_run "$label.same" d_ns shrink --wait "$RP_CONF" 1 --size "$new"
    if [[ $D_RC -eq 0 ]]; then
      d_ok "$label: killed at $at, not on record: the same shrink taken again"
    elif grep -q "member 1 .* was removed by a shrink while served" \
           "$D_TMP/$label.same.err"; then
      d_ok "$label: killed at $at: on record, it went on to its end before the command asked"
    else
      d_bad "$label: killed at $at: the same shrink refused (above)"
    fi
  else
    [[ $D_RC -eq 0 ]] &&
      d_ok "$label: killed at $at: on record, served again it went on to its end" ||
      d_bad "$label: killed at $at: shrink --wait failed (above)"
  fi
  if [[ $(sed -n 's/^members = \[ \(.*\) \];/\1/p' "$RP_CONF" | tr -d ' "') == "$D_TMP/m0,$D_TMP/m2" ]]; then
    d_ok "$label: the config names members 0 and 2"
  else
    cat "$RP_CONF"
    d_bad "$label: the config does not name members 0 and 2 only"
  fi
  rp_same "$label" "$D_TMP/pattern"
  rp_stop
}

for at in "$@"; do one "$at"; done
d_done
