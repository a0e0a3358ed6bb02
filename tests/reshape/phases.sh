#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A grow (2 -> 3 members) and a shrink (3 -> 2, member 1 out) of a served
# volume, every kind of client request in flight across every phase
# boundary -- made to happen, not left to chance: the server holds the
# reshape's copier at each phase (-D stripe.replace_gate=1) and
# tests/reshape/phases.py sends requests at each one (below, in and above
# where the copy is: the critical section through the journal, windows in
# place, the switch) and lets it go only once every request has completed
# or is held by the plugin.  Then every byte is checked against the model
# (the volume, and again served afresh from the config as it now is), and
# the member files against an independent model of the layout
# (tests/lib/md_raid0_model.py): every byte where the new layout puts it.
#
#   phases.sh grow|shrink          the whole reshape
#   phases.sh grow|shrink --kill P:N ...
#                                  for each: SIGKILL the server the Nth
#                                  time the copier is held at phase P, a
#                                  batch of requests acknowledged and one in
#                                  flight; served again, the reshape goes on
#                                  from where the members say (the journal
#                                  replayed); acknowledged requests hold,
#                                  those in flight hold their bytes before or
#                                  after
#   phases.sh grow|shrink --cancel P:N
#                                  `nbdstripe grow --cancel` (shrink's) the
#                                  Nth time the copier is held at phase P,
#                                  a batch of requests in flight across it;
#                                  paused, the status says how to go on and
#                                  requests all over the volume are served;
#                                  `grow --wait VOLUME` goes on to the end
#   phases.sh grow|shrink --cancel P:N --restart
#                                  the same up to the pause; then the
#                                  server stopped (SIGTERM) and the volume
#                                  served again from its config: every
#                                  byte there, the reshape under way again
#                                  from the position recorded at the pause
#                                  (serve goes on with it) and the status
#                                  says so; `grow --wait VOLUME` follows it
#                                  to the end, requests in flight across
#                                  every phase as before
#   phases.sh grow --fail P:N      the new member an NBD export behind
#                                  nbdkit's error filter, failing from the
#                                  Nth time the copier is held at phase P:
#                                  the grow pauses naming it, the volume is
#                                  served off it; unfailed, `grow --wait
#                                  VOLUME` goes on to the end
#   phases.sh grow|shrink --fail P:N I
#                                  the same with member I, one the volume
#                                  has (a shrink: one that stays), behind
#                                  the error filter from the start:
#                                  paused naming it, requests on it fail
#                                  and those on the others are served
#                                  (both layouts); unfailed, health takes
#                                  it back, the writes it refused are
#                                  written again, `grow --wait` (shrink's)
#                                  goes on to the end
#   phases.sh grow|shrink --fail P:N [I] --replace
#                                  the same pause (new member, or member
#                                  I), but the member stays failing: the
#                                  server stopped, the member's reads
#                                  working again (its writes still fail),
#                                  `nbdstripe replace --offline VOLUME I
#                                  NEW` moves it onto a new file (the
#                                  config names NEW where it named it, in
#                                  members or joining; NEW's journal area
#                                  is the member's), served again the
#                                  reshape goes on from the position
#                                  recorded at the pause (its journal
#                                  window replayed from NEW) to the end
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

kind=$1
shift
# --replace (anywhere): the failing member replaced offline (above).
replace=
args=()
for a in "$@"; do
  if [[ $a == --replace ]]; then replace=1; else args+=("$a"); fi
done
set -- "${args[@]}"
# The member to replace: its index, URI and the file that fails its reads
# (a symlink to the file that fails everything: removing it lets reads
# through, writes still failing).
rep_index= rep_uri= rep_rfail=
data=$((12 * M))         # 3 windows of data a member
size=$((M + data))       # the default 1 MiB data offset: the journal's room

# fail_index: the member behind the error filter from the start (--fail
# P:N I), its URI fail_uri.
fail_index=
fail_uri=
declare -A backing # a member's URI -> the file behind it

setup ()
{
  local n=$1 members=()
  rm -f "$D_TMP"/m[0-2]
  for f in m0 m1 m2; do truncate -s "$size" "$D_TMP/$f"; done
  members=("$D_TMP/m0" "$D_TMP/m1")
  [[ $kind == grow ]] || members+=("$D_TMP/m2")
  if [[ -n $fail_index ]]; then
    ln -sf "$D_TMP/m.fail" "$D_TMP/m.rfail"
    r_unix "m${fail_index}srv" --filter=error file "$D_TMP/m$fail_index" \
      error=EIO error-rate=1 error-file="$D_TMP/m.fail" \
      error-pread-file="$D_TMP/m.rfail"
    fail_uri=$R_URI
    rep_index=$fail_index rep_uri=$R_URI rep_rfail=$D_TMP/m.rfail
    backing[$R_URI]=$D_TMP/m$fail_index
    members[fail_index]=$R_URI
  fi
  rp_volume "vol$n" 64K "" "${members[@]}"
  # The health section gets a Prometheus file, rewritten within a
  # second of a change (the pause is checked there too); a failed
  # member is re-probed every second.
  sed -i "s|^health = { status_file = \"\(.*\)\"; };|health = { status_file = \"\\1\"; prometheus_file = \"$D_TMP/vol.prom\"; interval = 1; probe_interval = 1; };|" "$RP_CONF"
  grep -q prometheus_file "$RP_CONF" || d_fail "no prometheus_file in $RP_CONF"
  rp_create
  rp_start "fill$n"
  # A shrink keeps two members' worth: the rest of the volume never
  # written (holes), as a file system shrunk and trimmed leaves it.
  d_random "$D_TMP/pattern" $((2 * data))
  nbdcopy "$D_TMP/pattern" "$RP_URI" || d_fail "nbdcopy into the volume"
  rp_stop
}

# members_check LABEL IMAGE: the member files hold the image where the
# new layout puts it, member by member in the config's order.
new_member=$D_TMP/m2

members_check ()
{
  local label=$1 image=$2 args=() m
  while read -r m; do
    args+=("${backing[$m]:-$m}:$M:$data")
  done < <(sed -n 's/^members = \[ \(.*\) \];/\1/p' "$RP_CONF" |
             tr ',' '\n' | tr -d ' "')
  if "$RP_PY" "$RP_LIB/md_raid0_model.py" check --chunk 65536 --layout 2 \
       --pattern "$image" --size "$(stat -c %s "$image")" "${args[@]}" \
       >"$D_TMP/$label.model.out" 2>&1; then
    d_ok "$label: the member files (${#args[@]}) hold every byte where the new layout puts it"
  else
    cat "$D_TMP/$label.model.out"
    d_bad "$label: the member files do not hold the volume where the layout says"
  fi
}

# released LABEL: the shrink has ended and the server still runs: the
# member removed (m1) is no longer claimed -- another volume is created
# on it at once -- the status says it is removed, the volume ok, and the
# volume still holds the model.
released ()
{
  local label=$1 rc=0
  d_run "$label.st" d_ns status --json "$RP_CONF"
  # The others ok, but for the member failed a moment ago (--fail P:N I:
  # failing for health's window) and any judged slow (latency against
  # its peers: a matter of the machine's load, not of this test).
  jq -e --arg fi "$fail_index" '.status | .members[1].state == "removed" and
      ([.members[] | select(.state != "ok" and .state != "removed"
                            and .state != "slow")
        | .index] - [$fi | tonumber? // -1] == [])' \
    "$D_TMP/$label.st.out" >/dev/null &&
    d_ok "$label: member 1 removed in the status, the others ok (or slow)" ||
    d_bad "$label: the status does not show member 1 removed, the others ok: $(jq -c '[.status.members[] | {index, state}]' "$D_TMP/$label.st.out")"
  truncate -s "$size" "$D_TMP/other1"
  d_conf "$D_TMP/other.conf" other 64K "" "$D_TMP/m1" "$D_TMP/other1"
  d_run "$label.other" d_ns create --force "$D_TMP/other.conf"
  [[ $D_RC -eq 0 ]] &&
    d_ok "$label: the removed member released while served: another volume created on it" ||
    d_bad "$label: the removed member is still claimed by the server (above)"
  "$RP_PY" "$HERE/phases.py" verify "$RP_URI" "$RP_CTL" \
    "$D_TMP/$label.state" "$D_TMP/$label.released.image" || rc=$?
  [[ $rc -eq 0 ]] &&
    d_ok "$label: still served, every byte holds the model" ||
    d_bad "$label: the volume served lost or changed bytes (above)"
}

# resized LABEL: the reshape has ended and the server still runs: its
# status (and Prometheus file) give the new size and member count, not
# those it started with; after a shrink, which renumbered the members, a
# replace is refused until the volume is served again (an index would
# name one member in the config and another in the server) and writes
# nothing to NEW.
resized ()
{
  local label=$1 want_size want_n
  if [[ $kind == grow ]]; then
    want_size=$((3 * data)) want_n=3
  else
    want_size=$((2 * data)) want_n=2
  fi
  d_run "$label.sz" d_ns status --json "$RP_CONF"
  jq -e --argjson s "$want_size" --argjson n "$want_n" \
    '.status.volume.size == $s and .status.volume.members == $n' "$D_TMP/$label.sz.out" >/dev/null &&
    d_ok "$label: the status says $want_size bytes on $want_n members" ||
    d_bad "$label: the status says $(jq -c '[.status.volume.size, .status.volume.members]' "$D_TMP/$label.sz.out"), not [$want_size,$want_n]"
  # The file is rewritten by the health thread once told (a condition
  # waited for, 10 s at most).
  local t
  for ((t = 0; t < 100; t++)); do
    grep -q "^nbdstripe_volume_size_bytes{.*} $want_size\$" "$D_TMP/vol.prom" && break
    sleep 0.1
  done
  grep -q "^nbdstripe_volume_size_bytes{.*} $want_size\$" "$D_TMP/vol.prom" &&
    d_ok "$label: the Prometheus file says $want_size bytes" ||
    d_bad "$label: the Prometheus file says $(grep '^nbdstripe_volume_size_bytes' "$D_TMP/vol.prom")"
  [[ $kind == shrink ]] || return 0
  truncate -s "$size" "$D_TMP/spare1"
  # Without --wait: a replace that started would stay held at the
  # copier's first phase (replace_gate), not return.
  d_run "$label.replace" d_ns replace "$RP_CONF" 0 "$D_TMP/spare1"
  [[ $D_RC -ne 0 ]] && grep -q "serve the volume again first" "$D_TMP/$label.replace.err" &&
    d_ok "$label: a replace after the shrink refused: serve the volume again first" ||
    d_bad "$label: a replace after the shrink was not refused as it should (above)"
  [[ $(tr -d '\0' <"$D_TMP/spare1" | wc -c) -eq 0 ]] ||
    d_bad "$label: the refused replace wrote to NEW"
}

# offline_replace LABEL: the volume stopped mid-reshape, its failing
# member (reads served again, writes still failing) replaced with
# `replace --offline` by a new file: exit 0, the config names the new file
# where it named the member, the new file's journal area (from the end of
# the header to the data) holds the member's.
offline_replace ()
{
  local label=$1 new=$D_TMP/n$rep_index
  rm -f "$rep_rfail"
  truncate -s "$size" "$new"
  # Lost blocks cannot be told in the volume's terms mid-reshape: no
  # --skip-unreadable, refused before anything is written.
  d_run "$label.skip" d_ns replace --offline --accept-stale --skip-unreadable \
    "$RP_CONF" "$rep_index" "$new"
  [[ $D_RC -ne 0 ]] && grep -q -e "--skip-unreadable cannot say" "$D_TMP/$label.skip.err" &&
    [[ $(tr -d '\0' <"$new" | wc -c) -eq 0 ]] &&
    d_ok "$label: --skip-unreadable mid-reshape refused, nothing written" ||
    d_bad "$label: --skip-unreadable mid-reshape not refused as it should (above)"
  d_run "$label.offline" d_ns replace --offline "$RP_CONF" "$rep_index" "$new"
  if [[ $D_RC -ne 0 ]]; then
    # It dropped out while served (its generation behind the others', and
    # `nbdstripe accept` cannot write its header): refused, saying how,
    # nothing written; copied as it is on the operator's word.
    grep -q -e "--accept-stale" "$D_TMP/$label.offline.err" &&
      d_ok "$label: the member dropped out: refused, naming --accept-stale" ||
      d_bad "$label: replace --offline refused without naming --accept-stale"
    [[ $(tr -d '\0' <"$new" | wc -c) -eq 0 ]] ||
      d_bad "$label: the refused replace wrote to the new file"
    d_run "$label.offline2" d_ns replace --offline --accept-stale "$RP_CONF" \
      "$rep_index" "$new"
  fi
  [[ $D_RC -eq 0 ]] || d_fail "$label: replace --offline of member $rep_index refused or failed (above)"
  local where=members
  [[ $rep_index -lt 2 || $kind == shrink ]] || where=joining
  if sed -n "s/^$where = \[ \(.*\) \];/\1/p" "$RP_CONF" | tr ',' '\n' |
       tr -d ' "' | grep -qxF "$new" && ! grep -qF "$rep_uri" "$RP_CONF"; then
    d_ok "$label: replaced offline; the config's $where names $new, not $rep_uri"
  else
    cat "$RP_CONF"
    d_bad "$label: the config does not name $new in $where in place of $rep_uri"
  fi
  if cmp -s -i 8192:8192 -n $((M - 8192)) "${backing[$rep_uri]}" "$new"; then
    d_ok "$label: the new member's journal area is the old one's"
  else
    d_bad "$label: the new member's journal area differs from the old one's"
  fi
}

# one LABEL [--kill P:N]: the reshape with phases.py run, then served
# again and verified.
one ()
{
  local label=$1 rc=0
  shift
  rp_start "$label" -D stripe.replace_gate=1
  if [[ $kind == grow ]]; then
    d_run "$label.grow" d_ns grow "$RP_CONF" "$new_member"
  else
    d_run "$label.shrink" d_ns shrink "$RP_CONF" 1 --size $((2 * data))
  fi
  [[ $D_RC -eq 0 ]] || d_fail "$label: nbdstripe $kind refused (above)"
  "$RP_PY" "$HERE/phases.py" run "$RP_URI" "$RP_CTL" "$D_TMP/$label.state" \
    "$@" --server-pid "$RP_PID" >"$D_TMP/$label.json" || rc=$?
  cat "$D_TMP/$label.json"
  if [[ $rc -eq 0 ]]; then
    d_ok "$label: every request where the model says"
  else
    d_bad "$label: phases.py found lost, stale or failed requests (above)"
  fi
  if [[ " $* " == *" --restart "* || " $* " == *" --replace "* ]]; then
    # Paused: the server stopped (SIGTERM, as nbdstripe stop) and the
    # volume served again from its config, the copier held again.
    rp_stop
    [[ -z $replace ]] || offline_replace "$label"
    rp_start "$label-resumed" -D stripe.replace_gate=1
    rc=0
    "$RP_PY" "$HERE/phases.py" resume "$RP_URI" "$RP_CTL" \
      "$D_TMP/$label.state" --nbdstripe "$NBDSTRIPE" --config "$RP_CONF" \
      >"$D_TMP/$label.resumed.json" || rc=$?
    cat "$D_TMP/$label.resumed.json"
    if [[ $rc -eq 0 ]]; then
      d_ok "$label: paused, stopped, served again: under way from where it paused, $kind --wait to the end, every byte"
    else
      d_bad "$label: paused, stopped and served again: lost bytes or did not go on (above)"
    fi
  fi
  if [[ $(jq -r .killed "$D_TMP/$label.json") == true ]]; then
    d_wait_gone "$RP_PID" 30 || d_fail "$label: the server did not die"
    rp_forget "$RP_PID"
  else
    [[ $kind == shrink ]] && released "$label"
    resized "$label"
    rp_stop
  fi
  rp_start "$label-again"
  rc=0
  "$RP_PY" "$HERE/phases.py" verify "$RP_URI" "$RP_CTL" \
    "$D_TMP/$label.state" "$D_TMP/$label.image" || rc=$?
  if [[ $rc -eq 0 ]]; then
    d_ok "$label: served again, the reshape at its end: every acknowledged byte"
  else
    d_bad "$label: served again, the volume lost or changed bytes (above)"
  fi
  if [[ $label == cancel ]]; then
    # Nothing under way now: --wait has nothing to wait for, and VOLUME
    # alone without it has nothing to go on with.
    d_run none.wait d_ns "$kind" --wait "$RP_CONF"
    [[ $D_RC -eq 0 ]] && grep -q "no grow or shrink is under way" \
      "$D_TMP/none.wait.out" &&
      d_ok "$kind --wait VOLUME with none under way: says so, exit 0" ||
      d_bad "$kind --wait VOLUME with none under way: exit $D_RC"
    d_run none.go d_ns "$kind" "$RP_CONF"
    d_expect_fail none.go && d_expect_err none.go "nothing to continue" &&
      d_ok "$kind VOLUME with none under way: refused, nothing to continue"
  fi
  rp_stop
  members_check "$label" "$D_TMP/$label.image"
}

if [[ ${1:-} == --cancel ]]; then
  setup 0
  one cancel --cancel "$2" ${3:+"$3"} --nbdstripe "$NBDSTRIPE" \
    --config "$RP_CONF" --prom "$D_TMP/vol.prom"
elif [[ ${1:-} == --fail && -n ${3:-} ]]; then
  # A member the volume has failing (not the new one).
  nbdkit --filter=error null --dump-plugin >/dev/null 2>&1 ||
    d_skip "nbdkit's error filter is not installed"
  fail_index=$3
  if [[ $kind == grow ]]; then maps=0,1:0,1,2; else maps=0,1,2:0,2; fi
  [[ $kind == grow || $fail_index != 1 ]] ||
    d_fail "--fail P:N 1: member 1 is the one a shrink removes"
  setup 0
  one fail --fail "$2" "$D_TMP/m.fail" --member "$fail_uri" \
    --index "$fail_index" --maps "$maps" ${replace:+--replace} \
    --nbdstripe "$NBDSTRIPE" --config "$RP_CONF" --prom "$D_TMP/vol.prom"
elif [[ ${1:-} == --fail ]]; then
  [[ $kind == grow ]] || d_fail "--fail is for a grow (a new member failing)"
  nbdkit --filter=error null --dump-plugin >/dev/null 2>&1 ||
    d_skip "nbdkit's error filter is not installed"
  setup 0
  ln -sf "$D_TMP/m2.fail" "$D_TMP/m2.rfail"
  r_unix m2srv --filter=error file "$D_TMP/m2" error=EIO error-rate=1 \
    error-file="$D_TMP/m2.fail" error-pread-file="$D_TMP/m2.rfail"
  new_member=$R_URI
  rep_index=2 rep_uri=$R_URI rep_rfail=$D_TMP/m2.rfail
  backing[$R_URI]=$D_TMP/m2
  one fail --fail "$2" "$D_TMP/m2.fail" --member "$R_URI" ${replace:+--replace} \
    --nbdstripe "$NBDSTRIPE" --config "$RP_CONF" --prom "$D_TMP/vol.prom"
elif [[ ${1:-} == --kill ]]; then
  shift
  n=0
  for k in "$@"; do
    n=$((n + 1))
    d_log "$kind: kill -9 at $k"
    setup "$n"
    one "kill$n" --kill "$k"
  done
else
  setup 0
  one whole
  jq -e '.phases | length >= 10' "$D_TMP/whole.json" >/dev/null ||
    d_bad "the copier was not held at every phase"
  for p in journaled recorded quiesced metadata config; do
    jq -e --arg p "$p" '.phases | index($p)' "$D_TMP/whole.json" >/dev/null ||
      d_bad "the copier was never held at $p"
  done
fi
d_done
