# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the member-health tests (tests/health).  Sourced by
# bash scripts; builds on daemon.sh (d_* helpers, same
# environment variables, same exit codes: 0 pass, 1 fail, 77 skip).
#
# Members that fail on demand, from real parts (no mocks): every member is
# a regular file in $D_TMP over which nbdfuse mounts ("naked" mode) the
# export of an nbdkit server of its own (file plugin over a backing file
# m<I>.back), with, as a test asks, the error filter (errors switched on
# and off at an exact moment by creating / removing a file), the delay
# filter (a slow member), the pause filter (a member that hangs) and
# always the log filter (what reached the member server).
#
# What nbdfuse does here (libnbd 1.14.2, nbdkit 1.32.5, Linux 6.18; found
# out by hand, with a Python reader on the FUSE file, before these tests
# were written):
#
# 1. Page cache.  nbdfuse sets neither direct_io nor keep_cache: a
#    buffered pread of a page that is already in the FUSE file's page cache
#    does NOT reach the server (it succeeds even with errors injected, and
#    even after the server was killed); an uncached page does.  An open()
#    drops the file's cached pages (no FOPEN_KEEP_CACHE), but the plugin
#    keeps its descriptors open.  With O_DIRECT (the plugin's
#    cache = "direct") every read and write reaches the server.  Buffered
#    writes are write-through (no -o writeback_cache): they reach the
#    server at once.  So these tests use cache = "direct": every request
#    through the volume reaches the member server, and the member servers'
#    backing files are the oracle for the data (read directly).
# 2. Injected errors.  With --filter=error error-pread=EIO (and the
#    error-file present) the reader of the FUSE file gets EIO; likewise
#    for writes and fsync.  Removing the file stops the injection for the
#    next request.
# 3. Server killed (SIGTERM or SIGKILL) behind `nbdfuse --unix SOCKET`:
#    nbdfuse does NOT exit and the mount stays; stat() and fstat() still
#    succeed (same size: nbdfuse answers getattr itself), open() works,
#    every new pread/pwrite/fsync fails with ESHUTDOWN; a request that was
#    in flight when the server died fails with ENOTCONN.  nbdfuse never
#    reconnects: restarting the server on the same socket does not help the
#    existing mount (still ESHUTDOWN).
#    That is with the server stopped by SIGTERM (nbdkit shuts the
#    connections at once, but its process stays until nbdfuse closes them,
#    i.e. until the mount goes).  With SIGKILL, nbdfuse
#    1.14.2 itself dies on the next request (assertion "completion->thread
#    ->in_flight >= 1" in completion_callback): that request fails with
#    ECONNABORTED, and from then on everything on the path -- pread,
#    pwrite, fstat, stat, open -- fails with ENOTCONN (a dead FUSE mount,
#    still in /proc/mounts), like a device that has vanished.
# 4. nbdfuse itself killed (SIGTERM): it unmounts on its way out; open
#    descriptors then get ENOTCONN and the path shows the regular file
#    underneath (size 0): a member "truncated".
# 5. Restarting: a plain umount fails (EBUSY) while the plugin holds the
#    file open; `umount -l` detaches it (the path is the empty file
#    underneath again; the old nbdfuse lives on, serving ESHUTDOWN to the
#    old descriptors, and exits once the last of them is closed; a dead
#    mount, after SIGKILL, is detached the same way).  Then
#    start the server again and mount a new nbdfuse at the same path: a
#    fresh open() of the path reaches the new server.  That is what a
#    member "coming back" is here (h_member_restart).
# 6. A hung member: with the pause filter paused ('p' on its control
#    socket) a read through FUSE blocks (process in D state, in
#    fuse_direct_IO) until resumed ('r'), then completes normally; if the
#    server is killed meanwhile it fails with ENOTCONN.  FUSE has no
#    request timeout of its own here.
# 7. Mode: `nbdfuse MOUNTPOINT --unix SOCKET` to a separately started
#    `nbdkit -U SOCKET` (what this file does) lets a test kill or pause the
#    server alone while the mount stays; `nbdfuse MOUNTPOINT [ CMD ]` ties
#    the server's life to nbdfuse's (killing it ends the mount), which
#    cannot model a device that comes back at the same path.
#
# Readiness without sleeping: nbdkit runs in the foreground (-f) in the
# background of the test with its pidfile a FIFO (it writes it once it
# listens); nbdfuse's pidfile is a FIFO too (written once the mount is
# ready).  Events are awaited on a FIFO fed by the on_change hook; the
# status file is polled (with a deadline) only for figures that have no
# event (counters, the first write).
#
# Environment: as daemon.sh.  Also needs /usr/bin/python3 with
# Debian's python3-libnbd (and python3-prometheus-client for the
# Prometheus checks): the python3 on PATH may be another one.

H_HERE=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
source "$H_HERE/daemon.sh" || exit 1

H_PY=/usr/bin/python3
H_CLIENT=$H_HERE/hclient.py
H_MEMBER_PIDS=()        # member nbdkit servers (index -> pid)
H_FUSE_PIDS=()          # current nbdfuse of each member
H_NMEMBERS=0
H_EVFD=
H_EVENTS=()             # every hook line read so far
H_EV=                   # the last one read by h_next_event
H_MOUNTED_ONCE=0

# hc ARGS...: the Python client (hclient.py).
hc () { "$H_PY" "$H_CLIENT" "$@"; }

H_KILL=()               # background clients to kill at the end

h_cleanup ()
{
  local rc=$? pid
  for pid in "${H_KILL[@]}"; do
    kill -KILL "$pid" 2>/dev/null
  done
  # Member servers first: a request of the volume's server hanging on a
  # paused or half-dead member is released when its server goes.
  for pid in "${H_MEMBER_PIDS[@]}"; do
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
  done
  for pid in "${H_MEMBER_PIDS[@]}"; do
    [[ -n $pid ]] && d_wait_gone "$pid" 10
  done
  (exit "$rc")
  d_cleanup
}

# h_init [TOOL...]: d_init plus FUSE, python3-libnbd, the hook and its FIFO.
h_init ()
{
  d_init nbdkit nbdfuse setsid umount "$@"
  trap h_cleanup EXIT
  [[ -c /dev/fuse ]] || d_skip "no /dev/fuse: FUSE is not available"
  [[ -x $H_PY ]] || d_fail "$H_PY is missing"
  "$H_PY" -c 'import nbd' 2>/dev/null ||
    d_fail "$H_PY cannot import nbd: install python3-libnbd"
  local f
  for f in error delay pause log; do
    nbdkit --filter="$f" null --dump-plugin >/dev/null 2>&1 ||
      d_fail "nbdkit's $f filter is not installed"
  done
  # The on_change hook: one tab-separated line per run, to hook.log and to
  # the FIFO the test blocks on.  The test holds the FIFO open read-write
  # (fd H_EVFD), so the hook's open and write never block.
  mkfifo "$D_TMP/events" || d_fail "mkfifo"
  exec {H_EVFD}<>"$D_TMP/events"
  cat >"$D_TMP/hook.sh" <<EOF
#!/usr/bin/env -S -u LD_PRELOAD bash
# time argc event volume index path  env: EVENT VOLUME MEMBER MEMBER_PATH STATE REASON
line=\$(printf '%s\t' "\$EPOCHREALTIME" "\$#" "\${1-}" "\${2-}" "\${3-}" "\${4-}" \\
  "\${NBDSTRIPE_EVENT-}" "\${NBDSTRIPE_VOLUME-}" "\${NBDSTRIPE_MEMBER-}" \\
  "\${NBDSTRIPE_MEMBER_PATH-}" "\${NBDSTRIPE_STATE-}" "\${NBDSTRIPE_REASON-}")
printf '%s\n' "\$line" >>"$D_TMP/hook.log"
# What the hook inherited from the server (h_hook_inherited_no_member).
for f in /proc/\$\$/fd/*; do readlink "\$f"; done >>"$D_TMP/hook.fds" 2>/dev/null
printf '%s\n' "\$line" >"$D_TMP/events"
EOF
  chmod +x "$D_TMP/hook.sh"
  : >"$D_TMP/hook.log"
  H_STATUS=$D_TMP/status.json
  H_PROM=$D_TMP/metrics.prom
}

# --- members -----------------------------------------------------------------

# h_member I SIZE MODES: member I: backing file m<I>.back of SIZE bytes of
# random data (kept if it exists), its nbdkit server, mounted at $D_TMP/m<I>.
# MODES, comma-separated, any of:
#   plain        nothing else
#   error        reads fail with EIO while m<I>.inject-read exists, writes
#                while m<I>.inject-write exists (h_inject)
#   delay=NNms   every read and write delayed (the delay filter)
#   pause        pause filter, control socket m<I>.pause (h_pause/h_resume)
h_member ()
{
  local i=$1 size=$2 modes=$3 mode args=()
  [[ -f $D_TMP/m$i.back ]] || d_random "$D_TMP/m$i.back" "$size"
  args=(--filter=log)
  for mode in ${modes//,/ }; do
    case $mode in
      plain) ;;
      error) args+=(--filter=error) ;;
      delay=*) args+=(--filter=delay) ;;
      pause) args+=(--filter=pause) ;;
      *) d_fail "h_member: unknown mode $mode" ;;
    esac
  done
  args+=(file "$D_TMP/m$i.back" "logfile=$D_TMP/m$i.log" logappend=true)
  for mode in ${modes//,/ }; do
    case $mode in
      error) args+=(error-pread=EIO error-pread-rate=100%
                    "error-pread-file=$D_TMP/m$i.inject-read"
                    error-pwrite=EIO error-pwrite-rate=100%
                    "error-pwrite-file=$D_TMP/m$i.inject-write") ;;
      delay=*) args+=("delay-read=${mode#delay=}" "delay-write=${mode#delay=}") ;;
      pause) args+=("pause-control=$D_TMP/m$i.pause") ;;
    esac
  done
  declare -g -a "H_MARGS_$i"
  local -n ref="H_MARGS_$i"
  ref=("${args[@]}")
  : >"$D_TMP/m$i"
  h_member_start "$i"
  h_member_mount "$i"
  [[ $i -lt $H_NMEMBERS ]] || H_NMEMBERS=$((i + 1))
}

# h_member_start I: start member I's nbdkit (its saved arguments); returns
# once it listens.
h_member_start ()
{
  local i=$1 pid
  local -n ref="H_MARGS_$i"
  rm -f "$D_TMP/m$i.sock" "$D_TMP/m$i.nbdkit.pid"
  mkfifo "$D_TMP/m$i.nbdkit.pid"
  nbdkit -f --exit-with-parent -U "$D_TMP/m$i.sock" -P "$D_TMP/m$i.nbdkit.pid" \
    "${ref[@]}" </dev/null >>"$D_TMP/m$i.nbdkit.err" 2>&1 &
  H_MEMBER_PIDS[i]=$!
  disown "$!"                   # no "Killed" job notices when we kill it
  pid=$(timeout 20 cat "$D_TMP/m$i.nbdkit.pid") || pid=
  if [[ $pid != "${H_MEMBER_PIDS[i]}" ]]; then
    cat "$D_TMP/m$i.nbdkit.err" >&2
    d_fail "member $i: nbdkit did not start (pidfile: '$pid')"
  fi
}

# h_member_mount I: nbdfuse over $D_TMP/m<I> to member I's server.
h_member_mount ()
{
  local i=$1 ready
  rm -f "$D_TMP/m$i.fuse.pid"
  mkfifo "$D_TMP/m$i.fuse.pid"
  # If nbdfuse fails before it is ready, the FIFO gets its status instead.
  setsid bash -c 'nbdfuse -P "$1" "$2" --unix "$3" || echo "nbdfuse failed: exit $?" >"$1"' \
    nbdfuse-wrapper "$D_TMP/m$i.fuse.pid" "$D_TMP/m$i" "$D_TMP/m$i.sock" \
    >>"$D_TMP/m$i.fuse.err" 2>&1 </dev/null &
  H_FUSE_PIDS[i]=$!
  D_BGPIDS+=("$!")
  D_MOUNTS+=("$D_TMP/m$i")
  ready=$(timeout 30 cat "$D_TMP/m$i.fuse.pid") || ready="timed out"
  if [[ ! $ready =~ ^[0-9]+$ ]]; then
    cat "$D_TMP/m$i.fuse.err" >&2
    [[ $H_MOUNTED_ONCE -eq 1 ]] ||
      d_skip "cannot mount with nbdfuse ($ready): $(head -c 300 "$D_TMP/m$i.fuse.err")"
    d_fail "member $i: nbdfuse failed ($ready)"
  fi
  # nbdfuse's wrapper writes its failure to the FIFO if nbdfuse ever exits
  # with an error: with the FIFO gone it writes a regular file instead of
  # blocking forever (or, worse, into the next mount's FIFO).
  rm -f "$D_TMP/m$i.fuse.pid"
  H_MOUNTED_ONCE=1
  [[ $(stat -c %s "$D_TMP/m$i") -eq $(stat -c %s "$D_TMP/m$i.back") ]] ||
    d_fail "member $i: $D_TMP/m$i is not the size of its backing file through FUSE"
}

# h_mnt_id I: the mount ID of member I's current FUSE mount.
h_mnt_id ()
{
  awk -v m="$D_TMP/m$1" '$5 == m { id = $1 } END { print id }' /proc/self/mountinfo
}

# h_fds_on_mount PID MNT_ID: how many descriptors of PID are on that mount.
h_fds_on_mount ()
{
  grep -l -x "mnt_id:[[:space:]]*$2" /proc/"$1"/fdinfo/* 2>/dev/null | wc -l
}

# h_member_kill I [SIGNAL]: kill member I's server (default KILL) and, for
# KILL, wait until it has gone.  After TERM nbdkit shuts its connections
# at once (nbdfuse then answers ESHUTDOWN) but the process stays until
# nbdfuse closes them, which it never does: it is left to the cleanup.
# The mount stays (see 3. above).
h_member_kill ()
{
  local i=$1 sig=${2:-KILL} pid=${H_MEMBER_PIDS[$1]}
  kill -"$sig" "$pid" || d_fail "member $i: server $pid not running"
  if [[ $sig == KILL ]]; then
    d_wait_gone "$pid" 10 || d_fail "member $i: server $pid did not exit"
  else
    H_KILL+=("$pid")
  fi
  H_MEMBER_PIDS[i]=
}

# h_member_restart I: bring member I back at the same path: lazy unmount
# of the dead mount (its nbdfuse, if alive, lives on until the plugin
# closes its old descriptors), the server started again, a new nbdfuse
# mounted.  Sets H_OLD_MNT_ID to the old mount's ID (see h_fds_on_mount).
h_member_restart ()
{
  local i=$1
  H_OLD_MNT_ID=$(h_mnt_id "$i")
  umount -l "$D_TMP/m$i" || d_fail "member $i: umount -l"
  h_member_start "$i"
  h_member_mount "$i"
}

# h_inject I read|write on|off: switch error injection of member I.
h_inject ()
{
  case $3 in
    on) : >"$D_TMP/m$1.inject-$2" ;;
    off) rm -f "$D_TMP/m$1.inject-$2" ;;
  esac
}

# h_pause I / h_resume I: the pause filter of member I (returns once
# acknowledged).
h_pause ()  { hc pause "$D_TMP/m$1.pause" p || d_fail "member $1: pause"; }
h_resume () { hc pause "$D_TMP/m$1.pause" r || d_fail "member $1: resume"; }

# h_member_reads I [MIN]: how many reads member I's server received at member
# offsets >= MIN (log filter), i.e. not the prober's first 4 KiB.
h_member_reads ()
{
  local i=$1 min=${2:-0} off n=0
  while read -r off; do
    (( off >= min )) && n=$((n + 1))
  done < <(grep -o ' Read id=[0-9]* offset=0x[0-9a-fA-F]*' "$D_TMP/m$i.log" |
           sed 's/.*offset=//')
  printf '%d\n' "$n"
}

# --- the volume ---------------------------------------------------------------

# h_conf FILE NAME CHUNK TOP HEALTH MEMBER...: a volume config served on
# $D_TMP/vol.sock (pidfile $D_TMP/vol.pid).  TOP: more top-level settings
# (metadata, cache); HEALTH: the body of the health group.
h_conf ()
{
  local file=$1 name=$2 chunk=$3 top=$4 health=$5 m sep=""
  shift 5
  {
    printf 'name = "%s";\nchunk = "%s";\nmembers = [' "$name" "$chunk"
    for m in "$@"; do printf '%s\n  "%s"' "$sep" "$m"; sep=","; done
    printf ' ];\n%s\n' "$top"
    printf 'serve = { socket = "%s"; pidfile = "%s"; };\n' \
      "$D_TMP/vol.sock" "$D_TMP/vol.pid"
    printf 'health = {\n%s\n};\n' "$health"
  } >"$file"
}

# h_health SETTING...: the body of a health group: status_file
# ($H_STATUS), prometheus_file ($H_PROM), on_change (the test's hook), then
# each SETTING ("key = value;") on a line of its own.  Used in $(...), so
# it sets nothing (H_STATUS and H_PROM come from h_init).
h_health ()
{
  printf '  status_file = "%s";\n  prometheus_file = "%s";\n  on_change = "%s";\n' \
    "$H_STATUS" "$H_PROM" "$D_TMP/hook.sh"
  printf '  %s\n' "$@"
}

# h_volume N DATA_OFFSET TOP [KEY=VALUE...]: write $H_CONF for volume
# "hvol" over $D_TMP/m0 .. m(N-1), chunk 64K, TOP as top-level settings,
# and the tests' health settings -- interval 1, window 3, min_samples 20,
# slow_factor 10.0 (a latency verdict only where a test wants one: this
# 2-core machine is noisy), error_threshold 4, io_timeout 5,
# probe_interval 1, on_change_timeout 5 -- KEY=VALUE replacing any of
# them.  Sets H_VOLUME, H_LAYOUT (N,CHUNK,DATA_OFFSET for hclient), H_CONF.
h_volume ()
{
  local n=$1 offset=$2 top=$3 kv k i items=() members=()
  local -A hs=([interval]=1 [window]=3 [min_samples]=20 [slow_factor]=10.0
               [error_threshold]=4 [io_timeout]=5 [probe_interval]=1
               [on_change_timeout]=5)
  shift 3
  for kv in "$@"; do
    [[ -n ${hs[${kv%%=*}]+set} ]] || d_fail "h_volume: unknown key in $kv"
    hs[${kv%%=*}]=${kv#*=}
  done
  for k in interval window min_samples slow_factor error_threshold \
           io_timeout probe_interval on_change_timeout; do
    items+=("$k = ${hs[$k]};")
  done
  for ((i = 0; i < n; i++)); do members+=("$D_TMP/m$i"); done
  H_VOLUME=hvol
  H_LAYOUT="$n,65536,$offset"
  H_CONF=$D_TMP/vol.conf
  h_conf "$H_CONF" "$H_VOLUME" 64K "$top" "$(h_health "${items[@]}")" \
    "${members[@]}"
}

# h_serve CONFIG: `nbdstripe serve CONFIG`; sets H_URI.  Fails the test if
# serve fails.
h_serve ()
{
  d_serve serve "$1" "$D_TMP/vol.pid" || d_fail "nbdstripe serve $1 failed"
  H_URI="nbd+unix:///?socket=$D_TMP/vol.sock"
}

# h_oracle: the members' backing files, for hclient --oracle.
h_oracle ()
{
  local i out=""
  for ((i = 0; i < H_NMEMBERS; i++)); do out+="${out:+,}$D_TMP/m$i.back"; done
  printf '%s' "$out"
}

# h_io NAME MEMBER ARGS...: hclient io on the volume (layout $H_LAYOUT)
# touching MEMBER only; output shown; a broken expectation is a d_bad.
h_io ()
{
  local name=$1 member=$2
  shift 2
  d_run "$name" hc io "$H_URI" "$H_LAYOUT" --member "$member" "$@"
  [[ $D_RC -eq 0 ]] || d_bad "$name: see above"
  return "$D_RC"
}

# h_json EXPR: a value from the status file (j = the JSON).
h_json () { hc json "$H_STATUS" "$1"; }

# h_wait_json WHAT SECONDS EXPR [SHOW]: poll the status file until EXPR is
# true (a deadline, for figures that have no event).
h_wait_json ()
{
  local what=$1 secs=$2 expr=$3 show=${4:-}
  if hc wait-json "$H_STATUS" "$expr" --deadline "$secs" ${show:+--show "$show"}; then
    d_ok "$what"
    return 0
  fi
  d_bad "$what (within $secs s)"
  return 1
}

# h_check WHAT EXPR: the status file, now, satisfies EXPR.
h_check ()
{
  local what=$1 expr=$2 v
  v=$(hc json "$H_STATUS" "bool($expr)" 2>&1)
  if [[ $v == true ]]; then
    d_ok "$what"
    return 0
  fi
  d_bad "$what: status file says otherwise ($expr: $v)"
  printf -- '-- status file (updated_unix %s; last hook run at %s; now %s):\n' \
    "$(hc json "$H_STATUS" 'j["updated_unix"]' 2>&1)" "${H_EVF[0]-none}" \
    "$(h_epoch)" >&2
  cat "$H_STATUS" >&2
  return 1
}

# --- hook events --------------------------------------------------------------

# h_next_event SECONDS: the next line the hook wrote (H_EV; fields in
# H_EVF: 0 time, 1 argc, 2 event, 3 volume, 4 index, 5 path, 6..11 env
# EVENT VOLUME MEMBER MEMBER_PATH STATE REASON).  Returns 1 on timeout.
h_next_event ()
{
  local secs=$1
  H_EV=
  if ! IFS= read -r -t "$secs" -u "$H_EVFD" H_EV; then
    return 1
  fi
  H_EVENTS+=("$H_EV")
  IFS=$'\t' read -r -a H_EVF <<<"$H_EV"
  return 0
}

# h_expect_event EVENT MEMBER SECONDS: the next hook run must be EVENT for
# MEMBER, within SECONDS; checked as h_check_event does.  Sets H_EV_TIME
# (the hook's clock, epoch seconds).
h_expect_event ()
{
  H_EV_TIME=
  if ! h_next_event "$3"; then
    d_bad "no hook event within $3 s (expected $1 for member $2)"
    return 1
  fi
  h_check_event "$1" "$2"
}

# h_check_event EVENT MEMBER: the hook run just read (H_EVF) is EVENT for
# MEMBER: argc 4, volume $H_VOLUME, the member's path, the environment
# agreeing, NBDSTRIPE_STATE the new state.  Sets H_EV_TIME.
h_check_event ()
{
  local ev=$1 m=$2 state want got
  case $ev in
    MemberSlow) state=slow ;;
    MemberFailing) state=failing ;;
    MemberFailed) state=failed ;;
    MemberRecovered) state=ok ;;
  esac
  H_EV_TIME=${H_EVF[0]}
  want=$(printf '%s|' 4 "$ev" "$H_VOLUME" "$m" "$D_TMP/m$m" "$ev" "$H_VOLUME" "$m" "$D_TMP/m$m" "$state")
  got=$(printf '%s|' "${H_EVF[@]:1:10}")
  if [[ $got != "$want" ]]; then
    d_bad "hook run: expected argc|event|volume|index|path|env EVENT|VOLUME|MEMBER|MEMBER_PATH|STATE = $want, got $got (reason: ${H_EVF[11]-})"
    return 1
  fi
  d_ok "hook: $ev $H_VOLUME $m $D_TMP/m$m (state $state, reason: ${H_EVF[11]-})"
  return 0
}

# h_no_event WHAT: no hook run is pending now.
h_no_event ()
{
  if h_next_event 0.2; then
    d_bad "$1: unexpected hook run: $H_EV"
    return 1
  fi
  return 0
}

# h_status_cmd NAME: `nbdstripe status CONFIG`, D_RC its exit status.
h_status_cmd ()
{
  d_run "$1" d_ns status "$H_CONF" "${@:2}"
}

# h_has_status_cmd: whether this nbdstripe has the status sub-command.
h_has_status_cmd ()
{
  "$NBDSTRIPE" --help 2>&1 | grep -q -w status
}

# h_hook_inherited_no_member: no hook run so far had a member open (the
# server's descriptors are close-on-exec, re-adopted ones too).
h_hook_inherited_no_member ()
{
  local bad
  bad=$(grep -E "^$D_TMP/m[0-9]+( \(deleted\))?$" "$D_TMP/hook.fds" 2>/dev/null | sort -u)
  if [[ -n $bad ]]; then
    d_bad "the on_change program inherited member descriptors: $(tr '\n' ' ' <<<"$bad")"
    return 1
  fi
  d_ok "the on_change program inherited no member descriptor"
}

# h_epoch: now, epoch seconds with microseconds.
h_epoch () { printf '%s' "$EPOCHREALTIME"; }

# h_le A B: A <= B (decimal numbers).
h_le () { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
