#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crash tests (issue 34): a volume of 3 members, each an NBD export of a
# file behind the power-cut filter (tests/crash/powercut.c: a drive with
# a volatile write cache), a client writing self-identifying sectors
# (crash.py) while an update runs; the volume's server killed right
# after its Kth header write (-D stripe.meta_crash=K), for every K of the
# update, and the members cut (their servers killed: with CUT power,
# every write no flush covered is gone; power50, a seeded half of them;
# kill, none).  Then served again with no accept and no --force: it must
# assemble, the update must go on or be run again to its end, and every
# write the client was told was durable must be there (crash.py verify).
#
#   crash.sh writes CUT     no update: the cut in the middle of writes
#   crash.sh writes lie     members that answer flush and FUA at once and
#                           make nothing durable: the check must find
#                           lost writes (exit 0 only if it does)
#   crash.sh serve CUT      the generation bump of a writable serve
#   crash.sh create CUT     nbdstripe create (NBDSTRIPE_DEBUG_META_CRASH):
#                           serve refuses naming create; create again, no
#                           --force, then serve
#   crash.sh grow CUT       grow 3 -> 4: every header write of its first
#                           two records, NEW cleared, and its last two
#                           updates (the end and the generation bump)
#   crash.sh shrink CUT     shrink 3 -> 2 (member 1 out): the same
#   crash.sh replace CUT    replace member 1 by NEW: every header write
#   crash.sh spare CUT      the automatic replace: member 1 fails its
#                           trims (nbdkit's error filter under the power
#                           cut), on_failing = "replace" moves it onto
#                           the spare: every header write; served again,
#                           the spare still usable (the copy left on it
#                           is nobody's), a failing trim starts it again
#
# The header writes of an update are found by a run with
# -D stripe.meta_log=1, whose log names each update and write.  grow,
# shrink, replace and spare then cut the power at each phase of the
# copier too (held there: -D stripe.replace_gate=1), the writer going
# on: published, journaled (reshapes), recorded, advanced, copied,
# quiesced, metadata, switched (replaces), config.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

scenario=$1
cut=$2
[[ -n ${POWERCUT_FILTER:-} && -f $POWERCUT_FILTER ]] ||
  d_fail "POWERCUT_FILTER=${POWERCUT_FILTER:-}: no such file"
PY=("$RP_PY" "$HERE/crash.py")

data=$((8 * M))           # data a member
size=$((M + data))        # the journal's room before it
vsize=$((3 * data))       # the volume, 3 members
case $scenario in
  shrink) wsize=$((2 * data)) ;;  # the writer stays below the new size
  *) wsize=$vsize ;;
esac
# spare: the writer trims the first 4 KiB of member 1's first chunk.
TRIM=65536
wtrim=()
[[ $scenario == spare ]] && wtrim=(--trim "$TRIM")

uri () { printf 'nbd+unix:///?socket=%s/m%s.sock' "$D_TMP" "$1"; }
# The config's members, one a line.
conf_members ()
{
  awk '/^members/ { on = 1 } on { print } on && /\]/ { exit }' "$RP_CONF" |
    grep -o '"[^"]*"' | tr -d '"'
}
declare -a MPID

# members_up HOW: the 4 member servers (m3: NEW of a grow or replace),
# each a file behind the power-cut filter; HOW: kill (every write
# through), power, power50 (seeded by $run), lie.
members_up ()
{
  local how=$1 i args
  for i in 0 1 2 3; do
    case $how in
      kill) args=(powercut-keep=100) ;;
      power) args=(powercut-keep=0) ;;
      power50) args=(powercut-keep=50 "powercut-seed=$((run * 4 + i + 1))") ;;
      lie) args=(powercut-keep=0 powercut-lie=1) ;;
    esac
    rm -f "$D_TMP/m$i.sock"
    # spare: member 1's trims fail while $D_TMP/inject exists.
    [[ $scenario == spare && $i == 1 ]] &&
      args+=(--filter=error error-trim=EIO error-trim-rate=100%
             "error-trim-file=$D_TMP/inject")
    d_nbdkit_start "msrv$i" -U "$D_TMP/m$i.sock" \
      "--filter=$POWERCUT_FILTER" file "$D_TMP/m$i.img" "${args[@]}" ||
      d_fail "member server $i did not start"
    MPID[i]=$D_NBDKIT_PID
  done
}

# cut: the power goes: every server killed at once (the volume's, if it
# still runs, and the members': what their caches held is gone).
cut ()
{
  local p pids=() all=("${MPID[@]}")
  [[ -n ${RP_PID:-} ]] && all+=("$RP_PID")
  # Only servers of this test (a pid that has gone may be another
  # process's by now: pids are reused).
  for p in "${all[@]}"; do
    tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$D_TMP/" &&
      pids+=("$p")
  done
  MPID=()
  # The volume's server first: all at once, as a power cut, it must not
  # see its members die (it would record them as dropped out, rightly).
  if [[ -n ${RP_PID:-} && " ${pids[*]} " == *" $RP_PID "* ]]; then
    kill -KILL "$RP_PID" 2>/dev/null
    d_wait_gone "$RP_PID" 30 || d_fail "server $RP_PID did not die"
  fi
  ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  for p in "${pids[@]}"; do
    d_wait_gone "$p" 30 || d_fail "server $p did not die"
  done
  for p in "${all[@]}"; do rp_forget "$p"; done
  RP_PID=
  prune_bg
}

# prune_bg: forget the background wrappers that have gone, so that the
# cleanup at exit does not signal process groups that may be others' by
# then (this test starts hundreds).
prune_bg ()
{
  local keep=() p
  for p in "${D_BGPIDS[@]}"; do
    tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$D_TMP/" &&
      keep+=("$p")
  done
  D_BGPIDS=("${keep[@]}")
}

# stop_volume: stop the volume's server (SIGTERM), forget its pid.
stop_volume ()
{
  rp_stop
  RP_PID=
}

# serve_log NAME [ARGS]: the volume's server (nbdkit, the plugin under
# test) with -D flags ARGS; 0 if it listens (RP_PID), 1 if it died first.
serve_log ()
{
  local name=$1
  shift
  rm -f "$RP_SOCK"
  RP_PID=
  d_nbdkit_start "$name" -U "$RP_SOCK" "$@" "$STRIPE_PLUGIN" \
    config="$RP_CONF" || return 1
  RP_PID=$D_NBDKIT_PID
}

# writer_start NAME: crash.py write in the background, returns after 32
# of its writes (or once it has stopped: the server died under it).
writer_start ()
{
  local name=$1 t
  rm -f "$D_TMP/stop" "$D_TMP/ready"
  "${PY[@]}" write "$RP_URI" "$D_TMP/state.json" --size "$wsize" \
    --seed "$run" --stop "$D_TMP/stop" --ready "$D_TMP/ready" "${wtrim[@]}" \
    --ready-after 32 >"$D_TMP/$name.writer" 2>&1 &
  WPID=$!
  for ((t = 0; t < 3000; t++)); do
    [[ -e $D_TMP/ready ]] && return 0
    kill -0 "$WPID" 2>/dev/null || return 0
    sleep 0.01
  done
  cat "$D_TMP/$name.writer"
  d_fail "$name: the writer did not get going"
}

writer_stop ()
{
  touch "$D_TMP/stop"
  wait "$WPID" || d_bad "the writer failed: $(cat "$D_TMP/$1.writer")"
  sed 's/^/   writer: /' "$D_TMP/$1.writer"
}

# job NAME: the scenario's update on the served volume, --wait: returns
# at its end, or when the server dies under it.
job ()
{
  local name=$1
  case $scenario in
    grow) d_run "$name.job" d_ns grow --wait "$RP_CONF" "$(uri 3)" ;;
    # --force: the members (NBD exports behind the filter) cannot tell
    # data from free space.
    shrink) d_run "$name.job" d_ns shrink --wait --force "$RP_CONF" 1 \
              --size "$wsize" ;;
    replace) d_run "$name.job" d_ns replace --wait "$RP_CONF" 1 "$(uri 3)" ;;
    # The writer's trims fail on member 1: failing, moved onto the spare.
    spare) switched "$name" ;;
  esac
}

# switched NAME: wait (30 s at most) until the config names the spare
# as member 1 or the server has gone.
switched ()
{
  local t
  D_RC=0
  for ((t = 0; t < 3000; t++)); do
    [[ $(conf_members | sed -n 2p) == "$(uri 3)" ]] && return 0
    [[ -n ${RP_PID:-} ]] && ! kill -0 "$RP_PID" 2>/dev/null && return 0
    sleep 0.01
  done
  D_RC=1
  d_bad "$1: the spare did not take member 1's place within 30 s"
}

# finish NAME: the update to its end on the volume served again: the
# same command run again (it goes on from where the members say, or
# starts again when nothing was recorded), --wait.
finish ()
{
  local name=$1
  case $scenario in
    grow|shrink)
      d_run "$name.wait" d_ns "$scenario" --wait "$RP_CONF"
      [[ $D_RC -eq 0 ]] || d_bad "$name: $scenario --wait VOLUME failed (above)"
      if grep -q "no grow or shrink is under way" "$D_TMP/$name.wait.out"; then
        if [[ $scenario == grow ]] && ! conf_members | grep -qxF "$(uri 3)"; then
          d_run "$name.again" d_ns grow --wait "$RP_CONF" "$(uri 3)"
        elif [[ $scenario == shrink ]] && conf_members | grep -qxF "$(uri 1)"; then
          d_run "$name.again" d_ns shrink --wait --force "$RP_CONF" 1 --size "$wsize"
        fi
        [[ $D_RC -eq 0 ]] || d_bad "$name: the same $scenario run again failed (above)"
      fi ;;
    replace)
      if ! conf_members | grep -qxF "$(uri 3)"; then
        d_run "$name.again" d_ns replace --wait "$RP_CONF" 1 "$(uri 3)"
        [[ $D_RC -eq 0 ]] || d_bad "$name: the same replace run again failed (above)"
      fi ;;
    spare)
      if [[ $(conf_members | sed -n 2p) != "$(uri 3)" ]]; then
        "${PY[@]}" trim "$RP_URI" "$TRIM" ||
          d_bad "$name: member 1 did not fail a trim"
        switched "$name"
      fi ;;
  esac
}

# ended NAME: the config and the served volume say the update is done.
ended ()
{
  local name=$1 want
  case $scenario in
    grow) want="$(uri 0) $(uri 1) $(uri 2) $(uri 3)" ;;
    shrink) want="$(uri 0) $(uri 2)" ;;
    replace|spare) want="$(uri 0) $(uri 3) $(uri 2)" ;;
    *) return 0 ;;
  esac
  local got
  got=$(conf_members | tr '\n' ' ' | sed 's/ $//')
  [[ $got == "$want" ]] &&
    d_ok "$name: the $scenario is done: the config's members are the new ones" ||
    d_bad "$name: the config's members are '$got', not '$want'"
}

# verify NAME: every durable write there.
verify ()
{
  local name=$1 rc=0
  "${PY[@]}" verify "$RP_URI" "$D_TMP/state.json" >"$D_TMP/$name.verify" \
    2>&1 || rc=$?
  cat "$D_TMP/$name.verify"
  VERIFY_RC=$rc
}

# setup: the files, the volume created on them, a first batch of
# durable writes; saved to start each run from.
setup ()
{
  local i
  run=0
  for i in 0 1 2 3; do rm -f "$D_TMP/m$i.img"; truncate -s "$size" "$D_TMP/m$i.img"; done
  members_up kill
  local extra=
  [[ $scenario == spare ]] &&
    extra="spares = [ \"$(uri 3)\" ]; on_failing = \"replace\";"
  rp_volume vol 64K "$extra" "$(uri 0)" "$(uri 1)" "$(uri 2)"
  if [[ $scenario == create ]]; then
    cut
    return 0
  fi
  rp_create
  serve_log setup || d_fail "setup: the volume's server did not start"
  # --trim-all: the volume trimmed first, so that its allocation map is
  # free but where these writes, and those of each run, mark it.
  "${PY[@]}" write "$RP_URI" "$D_TMP/state.json" --size "$wsize" --seed 0 \
    --count 256 --trim-all || d_fail "setup: the writer failed"
  stop_volume
  cut
  mkdir -p "$D_TMP/base"
  cp --sparse=always "$D_TMP"/m?.img "$D_TMP/state.json" "$RP_CONF" "$D_TMP/base/"
}

restore ()
{
  cp --sparse=always "$D_TMP"/base/m?.img "$D_TMP/base/state.json" "$D_TMP/"
  cp "$D_TMP/base/$(basename "$RP_CONF")" "$RP_CONF"
}

# points: the header writes to crash at, from a run with meta_log: for
# serve, those of its bump; for a job, every write of its first two and
# last two updates and every write outside an update (NEW written,
# cleared, marked).
points ()
{
  run=0
  restore
  members_up kill
  serve_log enum -D stripe.meta_log=1 || d_fail "enum: the server did not start"
  if [[ $scenario != serve ]]; then
    writer_start enum
    job enum
    [[ $D_RC -eq 0 ]] || d_fail "enum: the $scenario failed (above)"
    writer_stop enum
  fi
  stop_volume
  cut
  grep -o 'meta: \(update .*\|header write [0-9]*: .*\)' "$D_TMP/enum.log" \
    >"$D_TMP/enum.meta"
  sed 's/^/   /' "$D_TMP/enum.meta"
  POINTS=$(awk -v scen="$scenario" '
    /^meta: update.* done$/ { inupd = 0; next }
    /^meta: update/ { u++; inupd = 1; next }
    /^meta: header write/ {
      n = $4; sub(":", "", n)
      w[n] = inupd ? u : 0
      order[++k] = n
    }
    END {
      for (i = 1; i <= k; i++) {
        n = order[i]; x = w[n]
        if (scen == "serve") { if (x == 1) print n; continue }
        if (x == 1) continue            # the serve bump: crash.sh serve
        if (x == 0 || x == 2 || x == 3 || x >= u - 1) print n
      }
    }' "$D_TMP/enum.meta" | tr '\n' ' ')
  [[ -n $POINTS ]] || d_fail "no header writes found in the enumerating run"
  d_log "$scenario: crash points (header writes): $POINTS"
}

# again NAME WHAT: after the cut (WHAT), the members back, the volume
# served again with no accept and no --force, the update to its end,
# every durable write there, the config as the update leaves it.
again ()
{
  local name=$1 what=$2
  members_up kill
  if ! serve_log "$name.again"; then
    d_bad "$name: $what: the volume is not served again (above)"
    d_run "$name.inspect" d_ns inspect "$D_TMP"/m?.img
    [[ -z ${CRASH_KEEP:-} ]] || cp "$D_TMP"/m?.img "$RP_CONF" "$CRASH_KEEP/"
    cut
    return
  fi
  d_ok "$name: $what: served again, no accept, no --force"
  finish "$name"
  verify "$name"
  [[ $VERIFY_RC -eq 0 ]] &&
    d_ok "$name: every durable write there" ||
    d_bad "$name: durable writes lost or wrong (above)"
  stop_volume
  ended "$name"
  cut
}

# one K: a run crashing at header write K.
one ()
{
  local k=$1 name=k$1
  run=$k
  restore
  members_up "$cut"
  if serve_log "$name" -D "stripe.meta_crash=$k"; then
    writer_start "$name"
    job "$name"
    d_wait_gone "$RP_PID" 60 || d_fail "$name: the server did not die at header write $k"
    rp_forget "$RP_PID"
    RP_PID=
    writer_stop "$name"
  fi
  grep -o 'meta: header write [0-9]*: .*' "$D_TMP/$name.log" | tail -1 |
    sed 's/^/   last: /'
  cut
  again "$name" "crash after header write $k"
}

# start NAME: the scenario's update started, not waited for (the server
# holds its copier: -D stripe.replace_gate=1).
start ()
{
  local name=$1
  case $scenario in
    grow) d_run "$name.job" d_ns grow "$RP_CONF" "$(uri 3)" ;;
    shrink) d_run "$name.job" d_ns shrink --force "$RP_CONF" 1 --size "$wsize" ;;
    replace) d_run "$name.job" d_ns replace "$RP_CONF" 1 "$(uri 3)" ;;
    spare) D_RC=0 ;;  # the writer's first failing trim starts it
  esac
}

# phase P:N: a run cut while the update's copier is held the Nth time
# at phase P (the writer going on meanwhile): served again, the update
# to its end, every durable write there.
phase ()
{
  local p=$1 name=p${1/:/-} job=replace rc=0
  run=$((run + 1000))
  [[ $scenario == grow || $scenario == shrink ]] && job=reshape
  restore
  members_up "$cut"
  serve_log "$name" -D stripe.replace_gate=1 ||
    d_fail "$name: the volume's server did not start"
  writer_start "$name"
  start "$name"
  [[ $D_RC -eq 0 ]] || d_fail "$name: the $scenario did not start (above)"
  rp_ctl hold "$p" --job "$job" --deadline 60 >"$D_TMP/$name.hold" || rc=$?
  if [[ $rc -ne 0 ]]; then
    cat "$D_TMP/$name.hold"
    d_bad "$name: the copier was not held at $p"
  fi
  cut
  writer_stop "$name"
  again "$name" "cut at phase $p"
}

case $scenario in
  writes)
    setup
    restore
    run=1
    members_up "$cut"
    serve_log w1 || d_fail "w1: the server did not start"
    writer_start w1
    # Cut while it writes: the writer's 32 writes done, more in flight.
    cut
    writer_stop w1
    members_up kill
    serve_log w1.again || d_fail "w1: the volume is not served again"
    verify w1
    stop_volume
    cut
    if [[ $cut == lie ]]; then
      [[ $VERIFY_RC -ne 0 ]] &&
        d_ok "members that lie about flushes: the check finds lost writes" ||
        d_bad "members that lie about flushes: no write found lost; the check cannot fail"
    else
      [[ $VERIFY_RC -eq 0 ]] && d_ok "w1: every durable write there" ||
        d_bad "w1: durable writes lost or wrong (above)"
    fi ;;
  serve|grow|shrink|replace|spare)
    setup
    touch "$D_TMP/inject"
    points
    # CRASH_POINTS, CRASH_PHASES: only those (to look at one closely).
    for k in ${CRASH_POINTS-$POINTS}; do one "$k"; done
    run=0
    case $scenario in
      grow|shrink) phases="published:1 journaled:1 recorded:2 advanced:3 copied:1 quiesced:1 metadata:1 config:1" ;;
      replace|spare) phases="published:1 advanced:2 copied:1 quiesced:1 metadata:1 switched:1 config:1" ;;
      *) phases= ;;
    esac
    for p in ${CRASH_PHASES-$phases}; do phase "$p"; done ;;
  create)
    setup
    members_up kill
    d_run enum env NBDSTRIPE_DEBUG_META_LOG=1 "$NBDSTRIPE" create --force "$RP_CONF"
    [[ $D_RC -eq 0 ]] || d_fail "create failed (above)"
    total=$(grep -c 'meta: header write' "$D_TMP/enum.err")
    cut
    [[ $total -ge 6 ]] || d_fail "create made $total header writes, not 2 per member"
    for ((k = 1; k < total; k++)); do
      run=$k
      for i in 0 1 2 3; do rm -f "$D_TMP/m$i.img"; truncate -s "$size" "$D_TMP/m$i.img"; done
      members_up "$cut"
      d_run "c$k" env "NBDSTRIPE_DEBUG_META_CRASH=$k" "$NBDSTRIPE" create "$RP_CONF"
      cut
      members_up kill
      if ((k <= total / 2)); then
        # In the first pass: CREATING headers, blank members.
        if serve_log "c$k.serve"; then
          d_bad "c$k: create cut after header write $k of $total: served all the same"
          stop_volume
        elif grep -q "run 'nbdstripe create .*' again" "$D_TMP/c$k.serve.log"; then
          d_ok "c$k: create cut after header write $k of $total: serve refuses, naming create"
        else
          d_bad "c$k: serve refused without saying to run create again (above)"
        fi
        d_run "c$k.again" d_ns create "$RP_CONF"
        [[ $D_RC -eq 0 ]] &&
          d_ok "c$k: create again, without --force, succeeds" ||
          d_bad "c$k: create again refused (above)"
        serve_log "c$k.served" && d_ok "c$k: then served" ||
          d_bad "c$k: not served after create again"
      else
        # In the second: every header complete, the volume created.
        serve_log "c$k.served" &&
          d_ok "c$k: create cut after header write $k of $total (all written, some final): served" ||
          d_bad "c$k: create cut after header write $k of $total (all written, some final): not served"
      fi
      [[ -n $RP_PID ]] && stop_volume
      if ((k > total / 2)); then
        d_run "c$k.again2" d_ns create "$RP_CONF"
        d_expect_fail "c$k.again2" && d_expect_err "c$k.again2" "is already member" &&
          d_ok "c$k: served once, it is a volume: create again refused"
      fi
      cut
    done ;;
  *) d_fail "usage: crash.sh writes|serve|create|grow|shrink|replace|spare kill|power|power50|lie" ;;
esac
d_asan_reports
d_done
