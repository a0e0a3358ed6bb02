#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NEW failing, --cancel, and a second replace while one runs.  Member 1 of
# 3 file members (3 windows of the copy each) is replaced.  "Mid-copy" is
# made by construction, not by a slow copy: the server holds the copier
# at each phase boundary (-D stripe.replace_gate=1), and the test lets it
# go, phase by phase, up to the end of its first window (replace_ctl.py
# hold advanced: window 0 written, the watermark past it, window 1
# taken); what must happen while the copy runs happens while it is held
# there, and the test lets it go explicitly afterwards.
#
#   1. NEW is an NBD export behind nbdkit's error filter: once the copy
#      has passed its first window, every request to NEW fails (the
#      filter's error-file), and a client writes where the copy has
#      passed (a write for both members).  The replace fails with an
#      error naming NEW (`replace --wait` exits 1 saying so, the status
#      too) -- failed by that write, the copier still held; the client's
#      write succeeded and is on the old member; the config is unchanged;
#      the volume goes on with the old member (its status: member 1 the
#      old file, not failed, the volume not failed; the data read back, a
#      write after it read back).
#   1b. The same with NEW an NBD export whose server is killed (-9) once
#      the copy has passed its first window.
#   2. A replace runs (held after its first window): a second one (of the
#      same member, of another) is refused ("running already") and leaves
#      its NEW untouched; then `replace --cancel` stops it (a cancel lets
#      a held copier go, and the status no longer shows it held): state
#      cancelled, the config unchanged, NEW
#      holds no header, the volume on the old member, data intact; a
#      second --cancel is refused (none runs).
#   3. Then a replace runs to its end, let go phase by phase (the failed
#      and cancelled ones left nothing behind that refuses it).
source "$(dirname "$0")/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((12 * M))
RP_DO=$M
for f in m0 m1 m2 new1.back new2 new3 new4 new5.back; do truncate -s "$size" "$D_TMP/$f"; done
r_unix newsrv --filter=error file "$D_TMP/new1.back" error=EIO error-rate=1 \
  error-file="$D_TMP/new1.fail"
NEW1=$R_URI
r_unix newsrv5 file "$D_TMP/new5.back"
NEW5=$R_URI NEW5_PID=$R_PID
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
cp "$RP_CONF" "$D_TMP/conf.orig"
vsize=$((3 * (size - RP_DO)))
d_random "$D_TMP/pattern" "$vsize"
rp_start vol -D stripe.replace_gate=1
rp_write_pattern "$D_TMP/pattern"

# held_after_first LABEL NEW: the replace onto NEW is let go up to the end
# of its first window and held there: copying, the copy past the 128K
# the clients write into during it (member 1's first 2 chunks) and not
# at its end.
held_after_first ()
{
  local copied
  rp_hold "$1" advanced --new "$2" ||
    d_fail "$1: the copier was not held at the end of its first window"
  copied=$(rp_json "$1" .bytes_copied)
  [[ $(rp_json "$1" .state) == copying && $copied -ge $((128 * K)) &&
     $copied -lt $((size - RP_DO)) ]] ||
    d_fail "$1: held, but not copying part-way: $copied bytes copied"
  d_ok "$1: the copier is held with $copied bytes copied"
}

# failed_held LABEL HELD MO: the replace failed by the client's write at
# member offset MO on NEW, while its copier was held where hold HELD
# left it (nothing copied since); then the copier is let go (it ends: the
# replace has).
failed_held ()
{
  if [[ $(rp_json "$1" .phase) == advanced && $(rp_json "$1" .phase_held) == true &&
        $(rp_json "$1" .bytes_copied) -eq $(rp_json "$2" .bytes_copied) &&
        $(rp_json "$1" .error) == *"write at offset $3:"* ]]; then
    d_ok "$1: failed by the client's write to NEW, the copier held"
  else
    d_bad "$1: not failed by the client's write at $3 while the copier was held"
  fi
  rp_hold "$1.end" end || d_bad "$1: the copier did not end once let go"
}

# on_old LABEL: the config is as created; the status shows member 1 on
# the old file, neither it nor the volume failed.
on_old ()
{
  if cmp -s "$RP_CONF" "$D_TMP/conf.orig"; then
    d_ok "$1: the config is unchanged"
  else
    d_bad "$1: the config changed"
    diff "$D_TMP/conf.orig" "$RP_CONF" >&2
  fi
  if rp_ctl until "(s['volume']['state'] != 'failed' and
                    s['members'][1]['path'] == '$D_TMP/m1' and
                    s['members'][1]['state'] != 'failed')" 5 >"$D_TMP/$1.status"; then
    jq -c '[.volume.state, (.members[] | {path, state, reason})]' "$D_TMP/$1.status"
    d_ok "$1: the status: member 1 is $D_TMP/m1, $(jq -r '.members[1].state' "$D_TMP/$1.status"), the volume $(jq -r .volume.state "$D_TMP/$1.status")"
  else
    d_bad "$1: the status: $(jq -c '{v: .volume.state, m1: .members[1] | {path, state, reason}}' "$D_TMP/$1.status")"
  fi
}

# write_at LABEL LOGICAL: 64K of random data written to the volume at
# LOGICAL (and into the pattern); fails the check if the write fails.
write_at ()
{
  d_random "$D_TMP/$1.w" $((64 * K))
  dd if="$D_TMP/$1.w" of="$D_TMP/pattern" bs=$((64 * K)) seek=$(($2 / (64 * K))) \
    conv=notrunc status=none
  if rp_nbdsh -u "$RP_URI" -c "h.pwrite(open('$D_TMP/$1.w','rb').read(), $2); h.flush()" \
       2>"$D_TMP/$1.werr"; then
    d_ok "$1: a write at $2 succeeded"
  else
    d_bad "$1: a write at $2 failed: $(tail -1 "$D_TMP/$1.werr")"
  fi
}

# ---- 1. NEW fails mid-copy ----
d_log "1. NEW fails mid-copy"
"$NBDSTRIPE" replace --wait "$RP_CONF" 1 "$NEW1" \
  >"$D_TMP/replace1.out" 2>"$D_TMP/replace1.err" </dev/null &
rpid=$!
held_after_first first "$NEW1"
touch "$D_TMP/new1.fail"
# Where the copy has passed: member 1's first chunk (a write for both).
L1=$(rp_logical 1 "$RP_DO")
write_at during "$L1"
rp_wait failed --state failed || d_fail "the replace did not fail"
failed_held failed first "$RP_DO"
rm -f "$D_TMP/new1.fail"
rc=0
wait "$rpid" || rc=$?
sed 's/^/   | /' "$D_TMP/replace1.out" "$D_TMP/replace1.err"
[[ $rc -eq 1 ]] || d_bad "replace --wait exited $rc, expected 1"
if grep -q -F "new member ($NEW1) failed" "$D_TMP/replace1.err"; then
  d_ok "replace --wait says NEW failed, naming it"
else
  d_bad "replace --wait does not say that NEW ($NEW1) failed"
fi
[[ $(rp_json failed .error) == *"new member ($NEW1) failed"* ]] ||
  d_bad "the status's error does not name NEW: $(rp_json failed .error)"
[[ $(rp_json failed .bytes_copied) -lt $((size - RP_DO)) ]] ||
  d_bad "the copy was complete before NEW failed"
cmp -s -n $((64 * K)) -i "$RP_DO:0" "$D_TMP/m1" "$D_TMP/during.w" &&
  d_ok "the write during the copy is on the old member" ||
  d_bad "the old member does not hold the write made during the copy"
on_old failed
rp_same failed "$D_TMP/pattern"
write_at after_failed $(rp_logical 1 $((RP_DO + 100 * 64 * K)))
rp_same after_failed "$D_TMP/pattern"

# ---- 1b. NEW's server killed mid-copy ----
d_log "1b. NEW's server killed mid-copy"
"$NBDSTRIPE" replace --wait "$RP_CONF" 1 "$NEW5" \
  >"$D_TMP/replace5.out" 2>"$D_TMP/replace5.err" </dev/null &
rpid=$!
held_after_first first5 "$NEW5"
kill -KILL "$NEW5_PID"
d_wait_gone "$NEW5_PID" 30 || d_fail "NEW's server did not die"
rp_forget "$NEW5_PID"
write_at during5 $(rp_logical 1 $((RP_DO + 64 * K)))
rp_wait failed5 --state failed || d_fail "the replace did not fail"
failed_held failed5 first5 $((RP_DO + 64 * K))
rc=0
wait "$rpid" || rc=$?
sed 's/^/   | /' "$D_TMP/replace5.out" "$D_TMP/replace5.err"
[[ $rc -eq 1 ]] || d_bad "replace --wait exited $rc, expected 1"
if grep -q -F "new member ($NEW5) failed" "$D_TMP/replace5.err"; then
  d_ok "replace --wait says NEW failed, naming it"
else
  d_bad "replace --wait does not say that NEW ($NEW5) failed"
fi
on_old failed5
rp_same failed5 "$D_TMP/pattern"

# ---- 2. a second replace refused; --cancel ----
d_log "2. a second replace while one runs; --cancel"
d_run replace2 d_ns replace "$RP_CONF" 1 "$D_TMP/new2"
[[ $D_RC -eq 0 ]] || d_fail "replace 2 did not start"
held_after_first running "$D_TMP/new2"
for i in 1 0; do
  d_run "second_$i" d_ns replace "$RP_CONF" "$i" "$D_TMP/new3"
  d_expect_fail "second_$i" && d_expect_err "second_$i" "replace refused: a replace of member 1 is under way (" &&
    d_ok "a second replace (member $i) is refused: $(tail -1 "$D_TMP/second_$i.err")"
done
if cmp -s -n "$size" "$D_TMP/new3" /dev/zero; then
  d_ok "the refused replaces left their NEW untouched"
else
  d_bad "a refused replace wrote to its NEW"
fi
rp_ctl status >"$D_TMP/before_cancel.json"
[[ $(jq -r '"\(.state) \(.phase) \(.phase_held)"' "$D_TMP/before_cancel.json") == \
   "copying advanced true" ]] ||
  d_fail "replace 2 is not held copying before --cancel: $(cat "$D_TMP/before_cancel.json")"
d_run cancel d_ns replace --cancel "$RP_CONF"
[[ $D_RC -eq 0 ]] && grep -q cancelled "$D_TMP/cancel.out" ||
  d_bad "replace --cancel failed"
rp_wait cancelled --state cancelled || d_bad "the replace is not cancelled"
[[ $(rp_json cancelled .phase_held) == false ]] ||
  d_bad "the cancelled replace's copier still shows as held"
[[ $(rp_json cancelled .bytes_copied) -lt $((size - RP_DO)) ]] ||
  d_bad "cancelled after a complete copy"
rp_no_header "cancelled" "$D_TMP/new2"
on_old cancelled
rp_same cancelled "$D_TMP/pattern"
write_at after_cancel $(rp_logical 1 $((RP_DO + 150 * 64 * K)))
rp_same after_cancel "$D_TMP/pattern"
d_run cancel_again d_ns replace --cancel "$RP_CONF"
d_expect_fail cancel_again && d_expect_err cancel_again "no replace is running"

# ---- 3. a replace to its end ----
d_log "3. then a replace runs to its end"
"$NBDSTRIPE" replace --wait "$RP_CONF" 1 "$D_TMP/new4" \
  >"$D_TMP/replace4.out" 2>"$D_TMP/replace4.err" </dev/null &
rpid=$!
rp_hold ended4 end --new "$D_TMP/new4" || d_fail "replace 4 did not end"
rc=0
wait "$rpid" || rc=$?
sed 's/^/   | /' "$D_TMP/replace4.out" "$D_TMP/replace4.err"
[[ $rc -eq 0 && $(rp_json ended4 .state) == "done" ]] && d_ok "replace 4 done" ||
  d_bad "replace 4 failed: exit $rc, $(rp_json ended4 .state)"
grep -q -F "\"$D_TMP/new4\"" "$RP_CONF" || d_bad "the config does not name new4"
rp_same done "$D_TMP/pattern"
rp_stop
d_done
