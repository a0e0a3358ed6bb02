#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill -9 of the server at three points of a replace of member 1 (of 3
# file members, 2 windows of the copier each), the volume written with a
# random pattern first (kept as the copy to compare with):
#   A. mid-copy: the first window written to NEW, the second one not --
#      the copier held there (-D stripe.replace_gate=1, let go phase by
#      phase to the end of its first window: replace_ctl.py hold
#      advanced), so the kill lands mid-copy by construction, not because
#      it came before a timed hold ran out -- kill -9 from here;
#   B. -D stripe.replace_crash=1: NEW's header written, the config not
#      yet rewritten;
#   C. -D stripe.replace_crash=2: the config rewritten, the server not yet
#      switched.
# After each: the config names the member it should (old after A and B,
# NEW after C), `nbdstripe check` assembles the volume from it, and the
# volume served again reads back the pattern.  After A, NEW holds the
# first window (half-copied) and no header (it started as a clone of
# member 1's header), and a config naming it is refused by check.  After B, NEW holds a header (the copy was complete)
# and the old member is not marked replaced.  After B and C the volume
# goes on (part of the pattern rewritten).
#
# --stale: also check that the member the volume did not go on with (NEW
# after B, the old one after C), which holds a valid header of the same
# generation, is refused by check once the volume has moved on without
# it.  Fails today: nothing tells it is stale (see CMakeLists.txt).
stale=0
[[ ${1:-} == --stale ]] && stale=1
source "$(dirname "$0")/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((8 * M))
RP_DO=$M
for f in m0 m1 m2 new_a new_b new_c; do truncate -s "$size" "$D_TMP/$f"; done
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
vsize=$((3 * (size - RP_DO)))
d_random "$D_TMP/pattern" "$vsize"
rp_start vol
rp_write_pattern "$D_TMP/pattern"
rp_stop

# names MEMBER: the config names MEMBER (a file in $D_TMP) as member 1.
names ()
{
  grep -q -F "\"$D_TMP/$1\"" "$RP_CONF"
}

# assembles LABEL: check passes on the config, and the volume served again
# reads back the pattern.
assembles ()
{
  d_run "check_$1" d_ns check "$RP_CONF"
  if [[ $D_RC -eq 0 ]]; then
    d_ok "$1: check assembles the volume"
  else
    d_bad "$1: check of the config failed"
  fi
  rp_start "$1"
  rp_same "$1" "$D_TMP/pattern"
}

# refused LABEL FROM TO: a config naming TO in place of FROM (member 1) is
# refused by check.
refused ()
{
  sed "s|\"$D_TMP/$2\"|\"$D_TMP/$3\"|" "$RP_CONF" >"$D_TMP/$1.conf"
  grep -q -F "\"$D_TMP/$3\"" "$D_TMP/$1.conf" || d_fail "$1: $1.conf"
  d_run "$1" d_ns check "$D_TMP/$1.conf"
  if [[ $D_RC -ne 0 ]]; then
    d_ok "$1: a config naming $3 is refused: $(tail -1 "$D_TMP/$1.err")"
  else
    d_bad "$1: a config naming $3 is accepted by check"
  fi
}

# moves_on LABEL OFFSET: the served volume gets 512K of new data at
# OFFSET (the pattern too), then is stopped.
moves_on ()
{
  d_random "$D_TMP/$1.w" $((512 * K))
  dd if="$D_TMP/$1.w" of="$D_TMP/pattern" bs=$((512 * K)) seek=$(($2 / (512 * K))) \
    conv=notrunc status=none
  rp_nbdsh -u "$RP_URI" -c "h.pwrite(open('$D_TMP/$1.w','rb').read(), $2); h.flush()" ||
    d_bad "$1: a write to the volume failed"
  rp_same "$1" "$D_TMP/pattern"
  rp_stop
}

# ---- A: kill -9 mid-copy ----
d_log "A. kill -9 mid-copy (second window held)"
# NEW_A starts as a clone of member 1's header (a stale copy, say: hence
# --force): a copy cut short must not leave it looking like member 1.
dd if="$D_TMP/m1" of="$D_TMP/new_a" bs=$RP_DO count=1 conv=notrunc status=none
rp_start a -D stripe.replace_gate=1
d_run replace_a d_ns replace --force "$RP_CONF" 1 "$D_TMP/new_a"
[[ $D_RC -eq 0 ]] || d_fail "replace A did not start"
rp_ctl hold advanced --new "$D_TMP/new_a" >"$D_TMP/a.json" ||
  d_fail "the copier was not held at the end of its first window: $(cat "$D_TMP/a.json")"
printf -- '-- a: held: %s\n' "$(cut -c1-600 "$D_TMP/a.json")"
[[ $(rp_json a '"\(.state) \(.phase) \(.phase_held)"') == "copying advanced true" &&
   $(rp_json a .bytes_copied) -eq $((4 * M)) ]] ||
  d_fail "A: not held copying after the first window"
rp_kill9
names m1 && ! grep -q new_a "$RP_CONF" || d_bad "A: the config changed"
rp_no_header "A" "$D_TMP/new_a"
# Half-copied indeed: NEW holds the first window.
rp_member_cmp "A: the first window on NEW" "$D_TMP/new_a" "$D_TMP/m1" \
  "$RP_DO" $((4 * M))
refused refused_a m1 new_a
assembles after_a

# ---- B: crash=1: NEW's header written, config not rewritten ----
d_log "B. killed with NEW's header written, before the config"
rp_stop
rp_start b -D stripe.replace_crash=1
pid=$RP_PID
d_run replace_b d_ns replace --wait "$RP_CONF" 1 "$D_TMP/new_b"
d_wait_gone "$pid" 30 || d_fail "B: the server did not die at crash point 1"
rp_forget "$pid"
d_expect_fail replace_b
d_expect_err replace_b "went away"
names m1 && ! grep -q new_b "$RP_CONF" || d_bad "B: the config changed"
[[ -n $(rp_header_field "$D_TMP/new_b" "array UUID") ]] ||
  d_bad "B: NEW holds no header (crash point 1 is after NEW's metadata)"
[[ $(rp_header_field "$D_TMP/m1" "format") == "version 2, flags 0" ]] ||
  d_bad "B: the old member is marked: $(rp_header_field "$D_TMP/m1" "format")"
assembles after_b
# The volume moves on with the old member: NEW_B is stale from here.
moves_on moved_b 0
[[ $stale -eq 0 ]] || refused refused_b m1 new_b

# ---- C: crash=2: the config rewritten, not switched ----
d_log "C. killed with the config rewritten, before the switch"
rp_start c -D stripe.replace_crash=2
pid=$RP_PID
d_run replace_c d_ns replace --wait "$RP_CONF" 1 "$D_TMP/new_c"
d_wait_gone "$pid" 30 || d_fail "C: the server did not die at crash point 2"
rp_forget "$pid"
d_expect_fail replace_c
d_expect_err replace_c "went away"
names new_c && ! names m1 || d_bad "C: the config does not name new_c in place of m1"
assembles after_c
moves_on moved_c $((2 * M))
[[ $stale -eq 0 ]] || refused refused_c new_c m1
d_done
