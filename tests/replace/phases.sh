#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every kind of client request (write, FUA write, write-zeroes, trim, a
# write across both members, read, flush) in flight across every phase
# boundary of a replace -- made to happen, not left to chance:
#
#   - the member replaced (0 of 2) is an NBD export behind nbdkit's log
#     filter (which says when a request has reached it) and delay filter
#     (writes, zeroes and trims take 1 s there);
#   - the server holds the copier at each phase (-D stripe.replace_gate=1:
#     published, drained, locked, advanced, copied, quiesced, metadata,
#     config, switched) until the test lets it go;
#   - tests/replace/phases.py sends requests before the replace (in flight
#     at the member when it is asked for) and at each phase, and lets the
#     phase go only once every request has got as far as it can
#     (completed, at the member, or held by the plugin).
#
# Then every byte is checked against the model: the volume, NEW's data
# area read from its file, and the volume again after a restart from the
# rewritten config (the old member's server stopped: it is no longer
# needed).
#
#   phases.sh                 the whole replace
#   phases.sh --kill P:N ...  for each: SIGKILL the server the Nth time the
#                             copier is held at phase P, a batch of that
#                             phase's requests acknowledged and another in
#                             flight; serve again from the config as it
#                             is; acknowledged requests hold, those in
#                             flight hold their bytes before or after
#   phases.sh --no-gate       requests in flight at the member when the
#                             replace starts, on a server without the gate
#                             (for the code before it): they must be on
#                             NEW after the switch
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((13 * M))         # 1 MiB header area, 3 windows of data
RP_DO=$M
delay=1

# old_server N: the old member's server (log and delay filters); sets
# OLD_LOG OLD_PID R_URI.
old_server ()
{
  OLD_LOG=$D_TMP/m0-$1.requests
  r_unix "m0-$1" --filter=log --filter=delay file "$D_TMP/m0.back" \
    logfile="$OLD_LOG" logappend=true delay-write=${delay} \
    delay-zero=${delay} delay-trim=${delay}
  OLD_PID=$R_PID
}

# setup N: members, the old member's server, a config, create; sets
# N, NEW (a file).
setup ()
{
  local n=$1
  rm -f "$D_TMP"/m0.back "$D_TMP"/m1 "$D_TMP/new"
  for f in m0.back m1 new; do truncate -s "$size" "$D_TMP/$f"; done
  N=$n
  old_server "$n"
  rp_volume "vol$n" 64K "" "$R_URI" "$D_TMP/m1"
  rp_create
  d_random "$D_TMP/pattern" $((2 * (size - M)))
  "$RP_PY" "$HERE/race.py" fill "$D_TMP/pattern" "2,65536,$M" \
    "$D_TMP/m0.back" "$D_TMP/m1" || d_fail "race.py fill"
  NEW=$D_TMP/new
}

# one LABEL PHASES_ARGS...: a replace with phases.py run, then the
# volume served again from its config and verified.
one ()
{
  local label=$1 rc=0
  shift
  local gate=(-D stripe.replace_gate=1)
  [[ ${1:-} == --no-gate ]] && gate=()
  rp_start "$label" "${gate[@]}"
  "$RP_PY" "$HERE/phases.py" run "$RP_URI" "$RP_CTL" "2,65536,$M" "$size" \
    "$NEW" "$OLD_LOG" "$D_TMP/new" "$D_TMP/$label.state" "$@" \
    --server-pid "$RP_PID" >"$D_TMP/$label.json" || rc=$?
  cat "$D_TMP/$label.json"
  if [[ $rc -eq 0 ]]; then
    d_ok "$label: every request where the model says, the copy on NEW too"
  else
    d_bad "$label: phases.py found lost, stale or failed requests (above)"
  fi
  if [[ $(jq -r .killed "$D_TMP/$label.json") == true ]]; then
    d_wait_gone "$RP_PID" 30 || d_fail "$label: the server did not die"
    rp_forget "$RP_PID"
  else
    rp_stop
  fi
  # nbdkit 1.32.5's delay filter can abort the member's server when its
  # client dies with a request in flight (connections.c:402: Assertion
  # `sock >= 0' failed): then it is started again on the same file, as
  # a member server that crashed would be.
  if ! kill -0 "$OLD_PID" 2>/dev/null; then
    grep -q "Assertion" "$D_TMP/m0-$N.log" ||
      d_bad "$label: the old member's server died: $(tail -1 "$D_TMP/m0-$N.log")"
    rp_forget "$OLD_PID"
    old_server "$N"
  fi
  rp_start "$label-again"
  rc=0
  "$RP_PY" "$HERE/phases.py" verify "$RP_URI" "$D_TMP/$label.state" ||
    rc=$?
  if [[ $rc -eq 0 ]]; then
    d_ok "$label: served again from $(grep -c -F "\"$NEW\"" "$RP_CONF" |
      sed 's/^1$/NEW/;s/^0$/the old member/'): every acknowledged byte"
  else
    d_bad "$label: served again, the volume lost or changed bytes (above)"
  fi
  rp_stop
  kill -TERM "$OLD_PID" 2>/dev/null
  d_wait_gone "$OLD_PID" 30
  rp_forget "$OLD_PID"
}

if [[ ${1:-} == --kill ]]; then
  shift
  n=0
  for k in "$@"; do
    n=$((n + 1))
    d_log "kill -9 at $k"
    setup "$n"
    one "kill$n" --kill "$k"
  done
elif [[ ${1:-} == --no-gate ]]; then
  setup 0
  one nogate --no-gate
else
  setup 0
  one whole
  jq -e '.phases | length >= 12' "$D_TMP/whole.json" >/dev/null ||
    d_bad "the copier was not held at every phase"
fi
d_done
