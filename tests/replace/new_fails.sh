#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NEW failing, --cancel, and a second replace while one runs.  Member 1 of
# 3 file members is replaced; each window of the copier is held 400 ms
# (-D stripe.replace_hold_ms) so that a copy lasts about 1.2 s.
#
#   1. NEW is an NBD export behind nbdkit's error filter: once the copy
#      has passed its first window, every request to NEW fails (the
#      filter's error-file), and a client writes where the copy has
#      passed (a write for both members).  The replace fails with an
#      error naming NEW (`replace --wait` exits 1 saying so, the status
#      too); the client's write succeeded and is on the old member; the
#      config is unchanged; the volume goes on with the old member (its
#      status: member 1 the old file, not failed, the volume not failed;
#      the data read back, a write after it read back).
#   1b. The same with NEW an NBD export whose server is killed (-9) once
#      the copy has passed its first window.
#   2. A replace runs: a second one (of the same member, of another) is
#      refused ("running already") and leaves its NEW untouched; then
#      `replace --cancel` stops it: state cancelled, the config
#      unchanged, NEW holds no header, the volume on the old member, data
#      intact; a second --cancel is refused (none runs).
#   3. Then a replace runs to its end (the failed and cancelled ones left
#      nothing behind that refuses it).
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
rp_start vol -D stripe.replace_hold_ms=400
rp_write_pattern "$D_TMP/pattern"

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
rp_wait first --state copying --copied $((4 * M)) ||
  d_fail "the copy did not pass its first window"
touch "$D_TMP/new1.fail"
# Where the copy has passed: member 1's first chunk (a write for both).
L1=$(rp_logical 1 "$RP_DO")
write_at during "$L1"
rp_wait failed --state failed || d_bad "the replace did not fail"
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
rp_wait first5 --new "$NEW5" --state copying --copied $((4 * M)) ||
  d_fail "the copy did not pass its first window"
kill -KILL "$NEW5_PID"
d_wait_gone "$NEW5_PID" 30 || d_fail "NEW's server did not die"
rp_forget "$NEW5_PID"
write_at during5 $(rp_logical 1 $((RP_DO + 64 * K)))
rp_wait failed5 --state failed || d_bad "the replace did not fail"
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
rp_wait running --state copying || d_fail "replace 2 is not copying"
for i in 1 0; do
  d_run "second_$i" d_ns replace "$RP_CONF" "$i" "$D_TMP/new3"
  d_expect_fail "second_$i" && d_expect_err "second_$i" "running already" &&
    d_ok "a second replace (member $i) is refused: $(tail -1 "$D_TMP/second_$i.err")"
done
if cmp -s -n "$size" "$D_TMP/new3" /dev/zero; then
  d_ok "the refused replaces left their NEW untouched"
else
  d_bad "a refused replace wrote to its NEW"
fi
rp_ctl status >"$D_TMP/before_cancel.json"
[[ $(jq -r .state "$D_TMP/before_cancel.json") == copying ]] ||
  d_fail "replace 2 ended before --cancel: $(cat "$D_TMP/before_cancel.json")"
d_run cancel d_ns replace --cancel "$RP_CONF"
[[ $D_RC -eq 0 ]] && grep -q cancelled "$D_TMP/cancel.out" ||
  d_bad "replace --cancel failed"
rp_wait cancelled --state cancelled || d_bad "the replace is not cancelled"
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
d_run replace4 d_ns replace --wait "$RP_CONF" 1 "$D_TMP/new4"
[[ $D_RC -eq 0 ]] && d_ok "replace 4 done" || d_bad "replace 4 failed"
grep -q -F "\"$D_TMP/new4\"" "$RP_CONF" || d_bad "the config does not name new4"
rp_same done "$D_TMP/pattern"
rp_stop
d_done
