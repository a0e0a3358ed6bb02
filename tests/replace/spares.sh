#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hot spares and on_failing (#23): a member that becomes failing is
# replaced onto a spare by the server itself, or (alert) only reported.
#
# Volume: 2 members of 16 MiB, chunk 64K, headers: m0 a file, m1 a stock
# nbdkit file server behind the error filter, whose trims fail with EIO
# while $D_TMP/inject exists -- so that one client trim makes member 1
# failing at a known moment (health: one I/O error, below the threshold)
# while its reads, which the copy needs, and its writes, which mark it
# replaced, still work.  Spares, in this order: small (8 MiB: too small
# for a member) and big (16 MiB).  A client writes a random pattern over
# the whole volume first.
#
# --policy replace (on_failing = "replace"); the server gates its
# copiers (-D stripe.replace_gate=1): a replace is held before its first
# window until the test lets it go, so that a client (tests/replace/
# writer.py: random blocks, each into a reference file too) writes
# before the replace, while it is copying (at least 24 requests, by
# construction), across the copy and the switch once it is let go, and
# after it:
# - before: status --json lists both spares claimed, small not usable
#   ("too small"), big usable; Prometheus nbdstripe_spares 2,
#   nbdstripe_spares_usable 1; `nbdstripe status` shows them.
# - the trim fails (EIO); hook events, in order: MemberFailing 1,
#   MemberReplacing 1 (NBDSTRIPE_OLD_PATH m1's URI, NBDSTRIPE_NEW_PATH
#   big), MemberRecovered 1 (now big), MemberReplaced 1 (old, new).
# - the log says small was skipped and why; the replace object says
#   done, spare, automatic, config_updated; on_failing.last replaced;
#   status member 1 is big, ok; spares [small].
# - the writer wrote during the copy and after the switch, every write
#   answered; the volume reads back its reference; big's data area is
#   member 1's share of it (the layout, tests/replace/race.py fill); the
#   config is exactly the old one
#   with big as member 1, big out of spares, m1 under removed; m1's
#   header is marked replaced (flags 0x1), big's says member 1 of 2.
# - stopped, m1's server killed, served again from the rewritten config:
#   the reference again.
#
# --policy replace --busy: the same, but a replace of member 0 (by the
# command, rate-limited) is running when member 1 becomes failing: the
# status's on_failing says "waiting" (that replace runs) and no replace
# starts; once that one is cancelled, member 1 is replaced onto big as
# above (no writer: the pattern is the reference).
#
# --policy replace --scrub: member 1 is a file served by nbdkit cc with
# tests/replace/badrange.c (reads fail in two ranges of its first copy
# window, B1 20K across a chunk boundary and B2 4K; writes work: the
# error filter fails whole request kinds, the ddrescue filter serves
# read-only) and the trigger is `nbdstripe scrub VOLUME --wait`, a writer
# running throughout (it keeps off the unreadable logical ranges, whose
# content the test models):
# - the scrub reports exactly B1's and B2's logical ranges
#   (rp_logical), exit 1; hook MemberFailing 1 with the scrub's reason.
# - the automatic replace starts (MemberReplacing 1, old -> big) and, as
#   documented (no --skip-unreadable for a replace the server starts),
#   stops at the unreadable blocks: MemberNotReplaced 1 (old -> big),
#   the replace failed, automatic, its unreadable ranges the scrub's;
#   member 1 still m1 and failing, big a usable spare again, the config
#   unchanged; the unreadable ranges still fail to read (no zeros).
# - `nbdstripe replace --skip-unreadable VOL 1 big`, a second writer
#   across it: done, lost ranges the scrub's; then as for --policy
#   replace: the config (big member 1, m1 removed), headers, big's data,
#   served again -- the reference with zeros in the lost ranges.
#
# --policy alert (the default, said explicitly): the same trim; hook
# MemberFailing only; two status rewrites later: member 1 still m1 and
# failing, no replace, on_failing.last null, both spares listed, the
# config unchanged; the volume reads back the pattern.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1

policy=${2:-replace}
busy=0 scrub=0
[[ ${3:-} == --busy && $policy == replace ]] && busy=1
[[ ${3:-} == --scrub && $policy == replace ]] && scrub=1
[[ ${1:-} == --policy && ( $policy == replace || $policy == alert ) &&
   ( -z ${3:-} || $busy -eq 1 || $scrub -eq 1 ) ]] ||
  d_fail "usage: spares.sh --policy replace [--busy | --scrub] | --policy alert"
if [[ $scrub -eq 1 ]]; then rp_init libnbd gcc; else rp_init libnbd; fi

size=$((16 * M))
truncate -s "$size" "$D_TMP/m0" "$D_TMP/m1.back" "$D_TMP/big" "$D_TMP/new0"
truncate -s $((8 * M)) "$D_TMP/small"
RP_DO=$M
C=$((64 * K))
if [[ $scrub -eq 1 ]]; then
  B1_at=$((RP_DO + 25 * C - 8 * K)) B1_len=$((20 * K))
  B2_at=$((RP_DO + 40 * C + 12 * K)) B2_len=$((4 * K))
  r_unix m1 cc "$HERE/badrange.c" EXTRA_CFLAGS="-Wall -Werror" \
    file="$D_TMP/m1.back" bad=$B1_at:$B1_len bad=$B2_at:$B2_len
else
  r_unix m1 --filter=error file "$D_TMP/m1.back" error-trim=EIO \
    error-trim-rate=100% "error-trim-file=$D_TMP/inject"
fi
M1=$R_URI
M1_PID=$R_PID

# The hook: one '|'-separated line a run, to hook.log and to a FIFO the
# test holds open read-write (so the hook never blocks on it).
mkfifo "$D_TMP/events"
exec {EVFD}<>"$D_TMP/events"
cat >"$D_TMP/hook.sh" <<EOF
#!/usr/bin/env -S -u LD_PRELOAD bash
line=\$(printf '%s|' "\$1" "\$2" "\$3" "\$4" "\${NBDSTRIPE_OLD_PATH-}" \\
  "\${NBDSTRIPE_NEW_PATH-}" "\${NBDSTRIPE_REASON-}")
printf '%s\n' "\$line" >>"$D_TMP/hook.log"
printf '%s\n' "\$line" >"$D_TMP/events"
EOF
chmod +x "$D_TMP/hook.sh"

rp_volume vol 64K "spares = [ \"$D_TMP/small\", \"$D_TMP/big\" ];
on_failing = \"$policy\";" "$D_TMP/m0" "$M1"
# window = 600: member 1, once failing, stays failing (no recovery after
# a window without errors) however long a loaded machine takes from here
# to the automatic replace's end.
sed -i "s|^health = { status_file = \"\\(.*\\)\"; };|health = { status_file = \"\\1\"; prometheus_file = \"$D_TMP/vol.prom\"; on_change = \"$D_TMP/hook.sh\"; interval = 1; window = 600; probe_interval = 1; };|" "$RP_CONF"
grep -q on_change "$RP_CONF" || d_fail "the config has no on_change: $(cat "$RP_CONF")"
rp_create
cp "$RP_CONF" "$D_TMP/vol.conf.before"
if [[ $policy == replace ]]; then
  rp_start vol -D stripe.replace_gate=1
else
  rp_start vol
fi
# The size from the server itself: the status file is written by the
# health thread after the socket is up, so right after the start it may
# not be there yet (this once gave an empty pattern).
vsize=$(d_nbd_size "$RP_URI") || d_fail "nbdinfo --size"
[[ $vsize -gt 0 ]] || d_fail "volume size: '$vsize'"
head -c "$vsize" /dev/urandom >"$D_TMP/pattern"
rp_write_pattern "$D_TMP/pattern"
cp "$D_TMP/pattern" "$D_TMP/ref"

# next_event NAME MEMBER PATH [OLD NEW]: the next hook run, within 10 s,
# is NAME for MEMBER whose device is PATH (and with OLD and NEW as its
# NBDSTRIPE_OLD_PATH and _NEW_PATH).
next_event ()
{
  local line f
  if ! IFS= read -r -t 10 -u "$EVFD" line; then
    d_bad "no hook run within 10 s (expected $1 $2)"
    return 1
  fi
  IFS='|' read -r -a f <<<"$line"
  if [[ ${f[0]} != "$1" || ${f[1]} != vol || ${f[2]} != "$2" ||
        ${f[3]} != "$3" ||
        ( $# -gt 3 && ( ${f[4]} != "$4" || ${f[5]} != "$5" ) ) ]]; then
    d_bad "hook run: expected $* (event volume index path old new), got: $line"
    return 1
  fi
  NE_REASON=${f[6]}
  d_ok "hook: $1 member $2 ($3)${4:+ $4 -> $5}: ${f[6]}"
}

d_log "before: the spares, claimed, the small one not usable"
rp_ctl until 'len(s.get("spares", [])) == 2' 5 >"$D_TMP/st0.json" ||
  d_fail "the status lists no spares: $(cat "$D_TMP/st0.json")"
jq -e --arg small "$D_TMP/small" --arg big "$D_TMP/big" --arg p "$policy" '
  .spares[0].path == $small and .spares[0].claimed and
  (.spares[0].usable | not) and (.spares[0].reason | test("too small")) and
  .spares[0].size == 8388608 and
  .spares[1].path == $big and .spares[1].claimed and .spares[1].usable and
  .spares[1].reason == "" and .on_failing.policy == $p and
  .on_failing.last == null' "$D_TMP/st0.json" >/dev/null ||
  d_bad "the spares in the status: $(jq -c '.spares, .on_failing' "$D_TMP/st0.json")"
grep -q "^nbdstripe_spares{volume=\"vol\"} 2$" "$D_TMP/vol.prom" &&
  grep -q "^nbdstripe_spares_usable{volume=\"vol\"} 1$" "$D_TMP/vol.prom" &&
  grep -q -F "nbdstripe_spare_usable{volume=\"vol\",spare=\"0\",path=\"$D_TMP/small\"} 0" "$D_TMP/vol.prom" ||
  d_bad "Prometheus: $(grep spare "$D_TMP/vol.prom")"
d_run status d_ns status "$RP_CONF"
grep -q -E "^ +0 no +yes .*  $D_TMP/small: too small" "$D_TMP/status.out" &&
  grep -q -E "^ +1 yes +yes .*  $D_TMP/big$" "$D_TMP/status.out" &&
  grep -q -E "On failing : $policy$" "$D_TMP/status.out" ||
  d_bad "nbdstripe status does not show the spares as they are"

# member_writes: the write requests the members have had, in all.
# member_writes_reach N: wait (30 s at most) until they are N or more.
member_writes () { rp_ctl until True 5 | jq '[.members[].ops.write.requests] | add'; }
member_writes_reach ()
{
  rp_ctl until "sum(m['ops']['write']['requests'] for m in s['members']) >= $1" 30 \
    >/dev/null
}

if [[ $busy -eq 1 ]]; then
  d_log "a replace of member 0 runs"
  d_run manual d_ns replace --rate 1M "$RP_CONF" 0 "$D_TMP/new0"
  [[ $D_RC -eq 0 ]] || d_fail "the replace of member 0 did not start"
  rp_wait manual --new "$D_TMP/new0" --state copying --deadline 10 ||
    d_fail "the replace of member 0 is not copying"
elif [[ $policy == replace ]]; then
  d_log "a client writing"
  avoid=()
  if [[ $scrub -eq 1 ]]; then
    # expected I AT LEN: member I's bytes [AT, AT+LEN) as the volume's
    # logical ranges, "OFFSET LENGTH" a line (each within one chunk).
    expected ()
    {
      local i=$1 at=$2 end=$(($2 + $3)) n
      while [[ $at -lt $end ]]; do
        n=$(( C - (at - RP_DO) % C ))
        [[ $n -le $((end - at)) ]] || n=$((end - at))
        echo "$(rp_logical "$i" "$at") $n"
        at=$((at + n))
      done
    }
    RP_N=2 RP_CHUNK=$C
    want=$( { expected 1 "$B1_at" "$B1_len"; expected 1 "$B2_at" "$B2_len"; } | sort -n)
    [[ $(wc -l <<<"$want") -eq 3 ]] || d_fail "B1 should span two chunks"
    while read -r off len; do avoid+=(--avoid "$off:$len"); done <<<"$want"
  fi
  base=$(member_writes)
  "$RP_PY" "$HERE/writer.py" "${avoid[@]}" "$RP_URI" "$RP_CTL" "$D_TMP/ref" \
    >"$D_TMP/writer.json" 2>"$D_TMP/writer.err" &
  wpid=$!
  member_writes_reach $((base + 8)) || d_fail "the writer did not start writing"
fi

# copying_writes NAME: the replace onto big is copying (its copier held
# by the gate before its first window); a client writes at least 24
# requests (48 member writes: none spans more than 2 members) before the
# copier is let go to its end.
copying_writes ()
{
  local base
  rp_wait "$1" --new "$D_TMP/big" --state copying --deadline 10 ||
    d_fail "$1: the replace onto big is not copying"
  base=$(member_writes)
  member_writes_reach $((base + 48)) ||
    d_fail "$1: the client did not write while the replace was copying"
  rp_hold "$1-end" end --new "$D_TMP/big" || d_fail "$1: the replace onto big did not end"
}

# writer_done NAME PID [BEFORE COPYING]: the writer PID wrote at least
# BEFORE (0) writes before a replace, COPYING (8) across it and 8 after
# it, every write answered (its summary in $D_TMP/NAME.json).
writer_done ()
{
  local wrc=0
  wait "$2" || wrc=$?
  cat "$D_TMP/$1.json" "$D_TMP/$1.err"
  [[ $wrc -eq 0 ]] || d_fail "$1: writer.py failed (exit $wrc)"
  [[ $(jq .writes_before "$D_TMP/$1.json") -ge ${3:-0} &&
     $(jq .writes_copying "$D_TMP/$1.json") -ge ${4:-8} &&
     $(jq .writes_after "$D_TMP/$1.json") -ge 8 ]] ||
    d_bad "$1: the writer did not write before (${3:-0}), across (${4:-8}) and after the copy (8)"
}

if [[ $scrub -eq 1 ]]; then
  d_log "the scrub finds member 1's unreadable places"
  d_run scrub d_ns scrub --wait "$RP_CONF"
  d_expect_fail scrub
  got=$(sed -n 's/^  bytes \([0-9]*\)-[0-9]* (\([0-9]*\))$/\1 \2/p' "$D_TMP/scrub.err")
  [[ $got == "$want" ]] && d_ok "scrub: the logical ranges of B1 and B2: $(echo $want)" ||
    d_bad "scrub reports '$(echo $got)', expected '$(echo $want)'"
  # Failing at the first block found (the reason says what is found so
  # far: the replace starts while the scrub goes on), the status's reason
  # the whole finding once the scrub has ended.
  next_event MemberFailing 1 "$M1"
  [[ $NE_REASON == "scrub: 4096 unreadable bytes in 1 place, the first at member offset $B1_at" ]] ||
    d_bad "MemberFailing's reason is not the scrub's first finding: $NE_REASON"
  reason="scrub: 24576 unreadable bytes in 2 places, the first at member offset $B1_at"
  rp_ctl until "s['members'][1]['reason'] == '$reason'" 10 >/dev/null &&
    d_ok "member 1's reason: $reason" ||
    d_bad "member 1's reason is not the scrub's: $(rp_ctl until True 5 | jq -c '.members[1]')"
  d_log "the automatic replace starts, and stops at the unreadable blocks"
  next_event MemberReplacing 1 "$M1" "$M1" "$D_TMP/big"
  rp_hold auto end --new "$D_TMP/big" || d_fail "the automatic replace did not end"
  next_event MemberNotReplaced 1 "$M1" "$M1" "$D_TMP/big"
  [[ $NE_REASON == *"has unreadable blocks"* ]] ||
    d_bad "MemberNotReplaced does not say why: $NE_REASON"
  rp_ctl until 's["on_failing"]["last"]["state"] == "not_replaced" and len(s["spares"]) == 2 and s["spares"][1]["usable"]' 10 \
    >"$D_TMP/st-auto.json" || d_bad "on_failing.last is not not_replaced, or big not a usable spare"
  jq -e --arg big "$D_TMP/big" --arg m1 "$M1" '
    .replace.state == "failed" and .replace.member == 1 and .replace.new == $big
    and .replace.automatic and .members[1].path == $m1 and
    .members[1].state == "failing" and .on_failing.last.member == 1' \
    "$D_TMP/st-auto.json" >/dev/null ||
    d_bad "after the automatic replace: $(jq -c '.replace, .on_failing, .members[1]' "$D_TMP/st-auto.json")"
  got=$(jq -r '.replace.unreadable[] | "\(.offset) \(.length)"' "$D_TMP/st-auto.json")
  [[ $got == "$want" ]] && d_ok "the replace reports the scrub's ranges" ||
    d_bad "the replace reports '$(echo $got)', expected '$(echo $want)'"
  cmp -s "$RP_CONF" "$D_TMP/vol.conf.before" && d_ok "the config unchanged" ||
    d_bad "the config changed"
  # Across the scrub; the replace stops in its first window (ms).
  writer_done writer "$wpid" 8 0
  [[ $(jq -r .end "$D_TMP/writer.json") == failed ]] ||
    d_bad "the writer saw the replace end as $(jq -r .end "$D_TMP/writer.json")"
  nok=0
  while read -r off len; do
    if rp_read_at "$RP_URI" "$off" "$len" "$D_TMP/bad.read" 2>/dev/null; then
      d_bad "a read of the unreadable range $off+$len succeeded"
    else
      nok=$((nok + 1))
    fi
  done <<<"$want"
  [[ $nok -ne 3 ]] || d_ok "the unreadable ranges still fail to read"

  d_log "replace --skip-unreadable onto big, a client writing"
  d_run manual d_ns replace --skip-unreadable "$RP_CONF" 1 "$D_TMP/big"
  [[ $D_RC -eq 0 ]] || d_fail "replace --skip-unreadable did not start"
  "$RP_PY" "$HERE/writer.py" "${avoid[@]}" "$RP_URI" "$RP_CTL" "$D_TMP/ref" \
    >"$D_TMP/writer2.json" 2>"$D_TMP/writer2.err" &
  copying_writes skip-copying
  rp_wait skip --new "$D_TMP/big" --state done --deadline 30 ||
    d_fail "the replace onto big did not complete"
  writer_done writer2 $!
  got=$(jq -r '.unreadable[] | "\(.offset) \(.length)"' "$D_TMP/skip.json")
  [[ $got == "$want" ]] && d_ok "the replace lists the scrub's ranges as lost" ||
    d_bad "lost: '$(echo $got)', expected '$(echo $want)'"
  while read -r off len; do
    dd if=/dev/zero of="$D_TMP/ref" bs=4096 seek=$((off / 4096)) \
      count=$((len / 4096)) conv=notrunc status=none
  done <<<"$want"
  rp_ctl until "s['members'][1]['path'] == '$D_TMP/big'" 10 >"$D_TMP/st2.json" ||
    d_bad "member 1 is not big"
  jq -e '.replace.spare and (.replace.automatic | not) and
    .replace.config_updated and .members[1].state == "ok" and
    (.spares | length) == 1' "$D_TMP/st2.json" >/dev/null ||
    d_bad "after the replace: $(jq -c '.replace, .members[1], .spares' "$D_TMP/st2.json")"
  grep -q -F "on_failing: member 1: spare $D_TMP/small skipped: too small" \
    "$D_TMP/vol.log" || d_bad "the log does not say why small was skipped"
fi

if [[ $scrub -eq 0 ]]; then
  d_log "member 1 failing: a trim of it fails"
  : >"$D_TMP/inject"
  rp_nbdsh -u "$RP_URI" -c '
import sys
try:
    h.trim(65536, 65536)
    print("the trim succeeded")
    sys.exit(1)
except nbd.Error as e:
    assert "EIO" in str (e), e
' || d_bad "a trim of member 1 did not fail with EIO"
  next_event MemberFailing 1 "$M1"

  if [[ $policy == alert ]]; then
    t=$(jq -r .updated_unix "$RP_STATUS")
    rp_ctl until "s['updated_unix'] > $t + 1.5" 10 >"$D_TMP/st1.json" ||
      d_bad "the status was not rewritten"
    if IFS= read -r -t 0.5 -u "$EVFD" line; then
      d_bad "a hook run after MemberFailing: $line"
    fi
    jq -e --arg m1 "$M1" '.members[1].path == $m1 and
      .members[1].state == "failing" and (has("replace") | not) and
      .on_failing.last == null and (.spares | length) == 2 and
      .spares[1].usable' "$D_TMP/st1.json" >/dev/null ||
      d_bad "on_failing = alert: $(jq -c '.members[1].state, .members[1].path, .replace, .on_failing, .spares' "$D_TMP/st1.json")"
    cmp -s "$RP_CONF" "$D_TMP/vol.conf.before" || d_bad "the config changed"
    rp_same alert "$D_TMP/pattern"
    rp_stop
    d_done
  fi

  if [[ $busy -eq 1 ]]; then
    rp_ctl until 's["on_failing"]["last"] is not None and s["on_failing"]["last"]["state"] == "waiting"' 10 \
      >"$D_TMP/st-wait.json" || d_bad "on_failing does not say it waits"
    jq -e '.on_failing.last.member == 1 and
      (.on_failing.last.reason | contains("replace onto a spare refused: a replace of member 0 is under way ("))
      and .replace.member == 0 and .replace.state == "copying"' \
      "$D_TMP/st-wait.json" >/dev/null ||
      d_bad "waiting: $(jq -c '.on_failing, .replace.state' "$D_TMP/st-wait.json")"
    if IFS= read -r -t 0.3 -u "$EVFD" line; then
      d_bad "a hook run while the other replace runs: $line"
    fi
    d_run cancel d_ns replace --cancel "$RP_CONF"
    # The cancel is asked, not awaited: the automatic replace may start
    # (and the status show it) before a poll sees the first one cancelled.
    rp_ctl until "(s.get('replace', {}).get('new') == '$D_TMP/new0' and s['replace'].get('state') == 'cancelled') or s.get('replace', {}).get('new') == '$D_TMP/big'" 10 \
      >"$D_TMP/cancelled.json" || d_bad "the replace of member 0 was not cancelled"
    rp_no_header "cancelled replace" "$D_TMP/new0"
    grep -q -F "$D_TMP/new0" "$RP_CONF" && d_bad "the config names new0"
  fi
  next_event MemberReplacing 1 "$M1" "$M1" "$D_TMP/big"
  if [[ $busy -eq 0 ]]; then
    copying_writes auto
  else
    rp_hold auto end --new "$D_TMP/big" || d_fail "the automatic replace did not end"
  fi
  next_event MemberRecovered 1 "$D_TMP/big"
  next_event MemberReplaced 1 "$M1" "$M1" "$D_TMP/big"
  rp_ctl until 's["on_failing"]["last"]["state"] == "replaced"' 10 \
    >"$D_TMP/st2.json" || d_bad "on_failing.last is not replaced"
  jq -e --arg big "$D_TMP/big" --arg m1 "$M1" --arg conf "$RP_CONF" '
    .replace.state == "done" and .replace.member == 1 and .replace.old == $m1
    and .replace.new == $big and .replace.spare and .replace.automatic and
    .replace.config_updated and .replace.unreadable == [] and
    .on_failing.last.member == 1 and .on_failing.last.spare == $big and
    .members[1].path == $big and .members[1].state == "ok" and
    (.spares | length) == 1 and (.spares[0].reason | test("too small"))' \
    "$D_TMP/st2.json" >/dev/null ||
    d_bad "after the replace: $(jq -c '.replace, .on_failing, .members[1].path, .members[1].state, .spares' "$D_TMP/st2.json")"
  grep -q -F "on_failing: member 1: spare $D_TMP/small skipped: too small" \
    "$D_TMP/vol.log" || d_bad "the log does not say why small was skipped"
fi

d_log "the data, the config, the old member's header"
if [[ $busy -eq 0 && $scrub -eq 0 ]]; then
  writer_done writer "$wpid"
  [[ $(jq -r .end "$D_TMP/writer.json") == done ]] ||
    d_bad "the writer saw the replace end as $(jq -r .end "$D_TMP/writer.json")"
fi
# The scrub's ranges are lost (replace --skip-unreadable): their reads
# fail with EIO, here and served again; the rest holds the data.
same_as_ref ()
{
  local label=$1 rc=0
  if [[ $scrub -eq 0 ]]; then
    rp_same "$label" "$D_TMP/ref"
    return
  fi
  "$RP_PY" "$RP_LIB/lost_read.py" "$RP_URI" "$D_TMP/ref" "$want" || rc=$?
  [[ $rc -eq 0 ]] &&
    d_ok "$label: the volume holds the data written, the lost ranges fail with EIO" ||
    d_bad "$label: the volume does not read as it should (above)"
}
same_as_ref replaced
truncate -s "$size" "$D_TMP/exp0" "$D_TMP/exp1"
"$RP_PY" "$HERE/race.py" fill "$D_TMP/ref" "2,65536,$M" \
  "$D_TMP/exp0" "$D_TMP/exp1" || d_fail "race.py fill"
rp_member_cmp "member 1's share of the reference on big" "$D_TMP/exp1" \
  "$D_TMP/big" "$M" $((size - M))
cat >"$D_TMP/vol.conf.want" <<EOF
name = "vol";
chunk = "64K";
members = [
  "$D_TMP/m0",
  "$D_TMP/big" ];
removed = [ "$M1" ];
serve = { socket = "$RP_SOCK"; pidfile = "$RP_PIDFILE"; threads = 8; };
$(grep '^health = ' "$D_TMP/vol.conf.before")
spares = [ "$D_TMP/small" ];
on_failing = "replace";
EOF
if diff -u "$D_TMP/vol.conf.want" "$RP_CONF"; then
  d_ok "the config: big is member 1, small the only spare, m1 removed"
else
  d_bad "the config is not as expected (above)"
fi
[[ $(rp_header_field "$D_TMP/m1.back" "format") == "version 2, flags 0x1"* ]] ||
  d_bad "m1: format '$(rp_header_field "$D_TMP/m1.back" "format")', expected flags 0x1 (replaced)"
[[ $(rp_header_field "$D_TMP/big" "member") == "1 of 2 "* ]] ||
  d_bad "big: member '$(rp_header_field "$D_TMP/big" "member")'"
rp_stop

d_log "served again from the rewritten config, m1's server gone"
kill -KILL "$M1_PID" && d_wait_gone "$M1_PID" 10 && rp_forget "$M1_PID"
rp_start vol2
same_as_ref again
rp_stop
d_done
