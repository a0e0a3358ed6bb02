# Shared helpers for the real-client tests (tests/vm).  Sourced by bash
# scripts; not executable on its own.
#
# Environment (set by CTest, see tests/vm/CMakeLists.txt):
#   NBDSTRIPE          the nbdstripe binary under test (required)
#   STRIPE_PLUGIN      nbdkit-stripe-plugin.so under test (required); given
#                      to `nbdstripe serve` as NBDSTRIPE_PLUGIN so that an
#                      installed plugin is never picked up by mistake
#   STRIPE_LD_PRELOAD  sanitizer runtime to preload into nbdkit (through
#                      `nbdstripe serve`, which execs it); may be empty
#   STRIPE_ASAN_SHIM   tests/lib/asan_exit_shim.c, preloaded after
#                      it (sanitizer builds only)
#
# Exit codes: 0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE).
#
# No sleeps as synchronisation: `nbdstripe serve` returns once nbdkit
# listens and has written its pidfile; a server is stopped with kill and a
# blocking `tail --pid` wait.

set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1

V_TMP=
V_PIDS=()                       # servers (nbdkit pids) we started
V_PGIDS=()                      # background process groups (qemu, nbdfuse)
V_MOUNTS=()                     # mount points, unmounted in reverse order
V_LOOPS=()                      # loop devices we attached
V_RM=()                         # more paths to remove at the end
V_PRE=()                        # env prefix for `nbdstripe serve`
V_FAILS=0

v_log ()  { printf '== [%3ds] %s\n' "$SECONDS" "$*"; }
v_skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
v_fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
v_ok ()   { printf 'ok: %s\n' "$*"; }
# A failed check that lets the test go on (the script ends with v_done).
v_bad ()  { printf 'FAIL: %s\n' "$*" >&2; V_FAILS=$((V_FAILS + 1)); }
v_done ()
{
  v_asan_reports
  if [[ $V_FAILS -ne 0 ]]; then
    printf 'FAILED: %d check(s) failed\n' "$V_FAILS" >&2
    exit 1
  fi
  v_log "PASS"
  exit 0
}

# v_wait_gone PID [SECONDS]: block until PID (not necessarily our child)
# has gone.
v_wait_gone ()
{
  timeout "${2:-30}" tail --pid="$1" -f /dev/null 2>/dev/null
}

v_cleanup ()
{
  local rc=$? i pid
  trap - EXIT INT TERM
  for pid in "${V_PGIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || :
  done
  for pid in "${V_PGIDS[@]}"; do
    v_wait_gone "$pid" 10 || kill -KILL -- "-$pid" 2>/dev/null || :
  done
  for (( i = ${#V_MOUNTS[@]} - 1; i >= 0; i-- )); do
    umount "${V_MOUNTS[i]}" 2>/dev/null || umount -l "${V_MOUNTS[i]}" 2>/dev/null || :
  done
  for i in "${V_LOOPS[@]}"; do
    losetup -d "$i" 2>/dev/null || :
  done
  for pid in "${V_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || :
  done
  for pid in "${V_PIDS[@]}"; do
    v_wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || :
  done
  cd /
  for i in "${V_RM[@]}"; do
    rm -rf -- "$i"
  done
  if [[ -n $V_TMP && -d $V_TMP ]]; then
    # A FUSE mount point that could not be unmounted must not be recursed
    # into (rm would try to delete the volume's backing file).
    if ! grep -q -F " $V_TMP/" /proc/self/mounts; then
      rm -rf -- "$V_TMP"
    else
      echo "warning: something is still mounted under $V_TMP; left in place" >&2
    fi
  fi
  exit "$rc"
}

# v_init [TOOL...]: preconditions, $V_TMP (the working directory), the
# cleanup trap, the environment for `nbdstripe serve`.
v_init ()
{
  t_check_env v_skip v_fail "$@"
  V_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-vm.XXXXXX")
  trap v_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$V_TMP" || v_fail "cd $V_TMP"
  t_server_env "$V_TMP"
  V_PRE=("${T_PRE[@]}")
}

# Count a failure for every sanitizer report (sanitizer builds).
v_asan_reports ()
{
  t_asan_reports "$V_TMP"
  V_FAILS=$((V_FAILS + T_REPORTS))
}

# v_run NAME CMD...: run a command with its output in $V_TMP/NAME.log,
# shown indented; returns its status.
v_run ()
{
  local name=$1 rc=0
  shift
  "$@" >"$V_TMP/$name.log" 2>&1 </dev/null || rc=$?
  printf -- '-- %s: %s -> exit %d\n' "$name" "$*" "$rc"
  sed 's/^/   | /' "$V_TMP/$name.log"
  return "$rc"
}

# v_apt_install PACKAGE...: install what is missing (Debian).  apt-get
# update only when a first attempt fails (an old package list).
v_apt_install ()
{
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      missing+=("$p")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  command -v apt-get >/dev/null || return 1
  [[ $(id -u) -eq 0 ]] || return 1
  v_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another test may be installing at the same time: wait for the lock.
  local apt=(apt-get -q -o DPkg::Lock::Timeout=120)
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" \
      >"$V_TMP/apt.log" 2>&1 && return 0
  "${apt[@]}" update >>"$V_TMP/apt.log" 2>&1
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" \
      >>"$V_TMP/apt.log" 2>&1 && return 0
  tail -n 5 "$V_TMP/apt.log" >&2
  return 1
}

# v_conf FILE NAME CHUNK SERVE_GROUP_BODY MEMBER...: write a config.
v_conf ()
{
  local file=$1 name=$2 chunk=$3 serve=$4 m sep=""
  shift 4
  {
    printf 'name = "%s";\nchunk = "%s";\nmembers = [' "$name" "$chunk"
    for m in "$@"; do printf '%s\n  "%s"' "$sep" "$m"; sep=","; done
    printf ' ];\n'
    [[ -z $serve ]] || printf 'serve = { %s };\n' "$serve"
  } >"$file"
}

# v_serve CONFIG PIDFILE: `nbdstripe serve CONFIG` (daemonizing; returns
# once nbdkit listens).  Sets V_SERVER_PID and remembers it for cleanup.
# Returns non-zero (output in $V_TMP/serve.log) if serve failed.
v_serve ()
{
  local conf=$1 pidfile=$2
  rm -f "$pidfile"
  v_run serve "${V_PRE[@]}" "$NBDSTRIPE" serve "$conf" || return 1
  [[ -s $pidfile ]] || v_fail "serve exited 0 but wrote no pidfile $pidfile"
  V_SERVER_PID=$(<"$pidfile")
  V_PIDS+=("$V_SERVER_PID")
  kill -0 "$V_SERVER_PID" 2>/dev/null ||
    v_fail "the server ($V_SERVER_PID) is not running"
  grep -q -F "$STRIPE_PLUGIN" "/proc/$V_SERVER_PID/maps" ||
    v_fail "server $V_SERVER_PID did not load $STRIPE_PLUGIN"
}

# v_stop PID: stop a server we started and wait until it has gone.
v_stop ()
{
  local pid=$1 keep=() p
  kill -TERM "$pid" 2>/dev/null || v_bad "server $pid was not running"
  v_wait_gone "$pid" 30 || v_fail "server $pid did not exit within 30 s"
  for p in "${V_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
  V_PIDS=("${keep[@]}")
}

# v_geometry MEMBER: "CHUNK COUNT STRIDE STRIPE_WIDTH" from the member's
# header (nbdstripe inspect --json): the ext4 geometry for 4 KiB blocks,
# stride = chunk / 4K, stripe_width = stride x members.
v_geometry ()
{
  local json chunk count
  json=$("$NBDSTRIPE" inspect --json "$1") || return 1
  chunk=$(grep -o '"chunk": *[0-9]*' <<<"$json" | grep -o '[0-9]*$')
  count=$(grep -o '"member_count": *[0-9]*' <<<"$json" | grep -o '[0-9]*$')
  [[ -n $chunk && -n $count ]] || return 1
  echo "$chunk $count $(( chunk / 4096 )) $(( chunk / 4096 * count ))"
}

# v_blocks FILE...: allocated 512-byte blocks of each (stat %b), one line.
v_blocks () { stat -c %b -- "$@" | tr '\n' ' ' | sed 's/ $//'; }

# v_trim_reached_every_member BEFORE AFTER MIN_DROP_KIB NAMES...
# BEFORE and AFTER are v_blocks lines; every member's allocation must have
# dropped by at least MIN_DROP_KIB.
v_trim_reached_every_member ()
{
  local -a b=($1) a=($2)
  local min=$3 i drop
  shift 3
  local -a names=("$@")
  for i in "${!b[@]}"; do
    drop=$(( (b[i] - a[i]) / 2 ))
    if (( drop >= min )); then
      v_ok "trim reached member $i (${names[i]:-?}): ${b[i]} -> ${a[i]} blocks (-$drop KiB)"
    else
      v_bad "trim did not reach member $i: allocated blocks ${b[i]} -> ${a[i]} (dropped $drop KiB, expected at least $min KiB)"
    fi
  done
}

# v_free_port: a TCP port that nothing listens on right now (the caller
# retries if someone takes it first).
v_free_port ()
{
  local p used
  used=$(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
  for _ in $(seq 100); do
    p=$(( 20000 + RANDOM % 40000 ))
    grep -qx "$p" <<<"$used" || { echo "$p"; return 0; }
  done
  return 1
}
