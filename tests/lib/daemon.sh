# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the tests of the nbdstripe command (tests/daemon), and
# for the tests elsewhere that drive it (tests/health through health.sh,
# tests/e2e, tests/remote).
# Sourced by bash scripts; not executable on its own.
#
# Environment (set by CTest, see tests/daemon/CMakeLists.txt):
#   NBDSTRIPE          the nbdstripe binary under test (required)
#   STRIPE_PLUGIN      nbdkit-stripe-plugin.so under test (required); given
#                      to `nbdstripe serve` as NBDSTRIPE_PLUGIN so that an
#                      installed plugin is never picked up by mistake
#   DAEMON_HELPER      tests/lib/daemon_helper (free-port, crc32c, wait-gone)
#   NBDSTRIPE_SOURCE_DIR  the source tree (for tests/config)
#   STRIPE_LD_PRELOAD  sanitizer runtime to preload into nbdkit (and into
#                      `nbdstripe serve`, which execs nbdkit); may be empty
#   STRIPE_ASAN_SHIM   tests/lib/asan_exit_shim.c, preloaded after
#                      it (sanitizer builds only)
#
# Exit codes: 0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE).
#
# No sleeps: `nbdstripe serve` (without --foreground) returns only once
# nbdkit listens and has written the pidfile; servers are stopped with
# kill and waited for with `tail --pid` (a blocking wait).

set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1

D_TMP=
D_PIDS=()                       # servers (nbdkit pids) we started
D_MOUNTS=()                     # mounts we made (FUSE or not)
D_LOOPS=()                      # loop devices we attached
D_BGPIDS=()                     # background children (nbdfuse, ...)
D_PRE=()                        # env prefix for nbdkit and `serve`
D_FAILS=0

d_log ()  { printf '== [%3ds] %s\n' "$SECONDS" "$*"; }
d_skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
d_fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
# A failed check that lets the test go on (the script ends with d_done).
d_bad ()  { printf 'FAIL: %s\n' "$*" >&2; D_FAILS=$((D_FAILS + 1)); }
d_ok ()   { printf 'ok: %s\n' "$*"; }
d_done ()
{
  d_asan_reports
  if [[ $D_FAILS -ne 0 ]]; then
    printf 'FAILED: %d check(s) failed\n' "$D_FAILS" >&2
    exit 1
  fi
  d_log "PASS"
  exit 0
}

# d_wait_gone PID [SECONDS]: wait until process PID has gone (it need not
# be our child): a pidfd (daemon_helper), else `tail --pid`.
d_wait_gone ()
{
  local pid=$1 secs=${2:-30} r=2
  if [[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]]; then
    "$DAEMON_HELPER" wait-gone "$pid" "$secs" && return 0
    r=$?
  fi
  [[ $r -eq 2 ]] || return 1
  timeout "$secs" tail --pid="$pid" -f /dev/null 2>/dev/null
}

d_cleanup ()
{
  local rc=$? pid m
  trap - EXIT INT TERM
  # Only our own (t_ours): a pid that has gone may be another's by now.
  for pid in "${D_PIDS[@]}"; do
    t_ours "$pid" "$D_TMP" && kill -TERM "$pid" 2>/dev/null || :
  done
  for pid in "${D_PIDS[@]}"; do
    d_wait_gone "$pid" 10 ||
      { t_ours "$pid" "$D_TMP" && kill -KILL "$pid" 2>/dev/null; } || :
  done
  # FUSE daemons first: a mount whose daemon is alive but not serving
  # (e.g. blocked before its loop) would hang umount's stat; once the
  # daemon has gone, the connection is aborted and umount works.
  for pid in "${D_BGPIDS[@]}"; do
    # Our background children run in process groups of their own.
    t_ours "$pid" "$D_TMP" && kill -TERM -- "-$pid" 2>/dev/null || :
  done
  for pid in "${D_BGPIDS[@]}"; do
    d_wait_gone "$pid" 10 ||
      { t_ours "$pid" "$D_TMP" && kill -KILL -- "-$pid" 2>/dev/null; } || :
  done
  for m in "${D_MOUNTS[@]}"; do
    if grep -q -F " $m " /proc/mounts 2>/dev/null; then
      timeout 10 umount "$m" 2>/dev/null || timeout 10 umount -l "$m" 2>/dev/null || :
    fi
  done
  for m in "${D_LOOPS[@]}"; do
    losetup -d "$m" 2>/dev/null || :
  done
  cd /
  if [[ -n $D_TMP && -d $D_TMP ]]; then
    rm -rf -- "$D_TMP"
  fi
  exit "$rc"
}

# d_init [TOOL...]: preconditions, $D_TMP, the cleanup trap.
d_init ()
{
  t_check_env d_skip d_fail "$@"
  D_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-daemon.XXXXXX")
  trap d_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$D_TMP" || d_fail "cd $D_TMP"
  t_server_env "$D_TMP"
  D_PRE=("${T_PRE[@]}")
  # libconfig 1.5 leaks on some syntax errors (see tests/lib/lsan.supp):
  # the nbdstripe binary is instrumented and checks its own leaks.
  if [[ -n ${NBDSTRIPE_SOURCE_DIR:-} &&
        -f $NBDSTRIPE_SOURCE_DIR/tests/lib/lsan.supp ]]; then
    export LSAN_OPTIONS="suppressions=$NBDSTRIPE_SOURCE_DIR/tests/lib/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  fi
}

# Fail if a sanitizer wrote a report (sanitizer builds).
d_asan_reports ()
{
  t_asan_reports "$D_TMP"
  D_FAILS=$((D_FAILS + T_REPORTS))
}

# d_run NAME CMD...: run a command, stdout to $D_TMP/NAME.out and stderr to
# $D_TMP/NAME.err (both shown); sets D_RC.
d_run ()
{
  local name=$1
  shift
  D_RC=0
  "$@" >"$D_TMP/$name.out" 2>"$D_TMP/$name.err" </dev/null || D_RC=$?
  printf -- '-- %s: %s -> exit %d\n' "$name" "$*" "$D_RC"
  sed 's/^/   | /' "$D_TMP/$name.out" "$D_TMP/$name.err"
  # The nbdstripe binary is instrumented in a sanitizer build: a report
  # (a leak, say) must fail the test even when a failure was expected.
  if grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/$name.err"; then
    d_bad "$name: sanitizer report (above)"
  fi
}

# The nbdstripe sub-commands.  check/create/inspect run as they are (the
# binary is instrumented in a sanitizer build, leak checks included);
# serve runs with the nbdkit environment, since it execs nbdkit.
d_ns ()       { "$NBDSTRIPE" "$@"; }
d_ns_serve () { "${D_PRE[@]}" "$NBDSTRIPE" serve "$@"; }
# Plain nbdkit with the plugin under test.
d_nbdkit ()   { "${D_PRE[@]}" nbdkit "$@"; }

# d_nbdkit_start NAME NBDKIT_ARGS...: nbdkit -f NBDKIT_ARGS (with the
# server environment: the plugin under test, the sanitizer runtime) in the
# background of the test, --exit-with-parent, with its pidfile a FIFO that
# it writes once it listens -- no race with a pidfile written after the
# first process exits.  Returns 0 once it listens (D_NBDKIT_PID its pid),
# 1 if it failed (its log in $D_TMP/NAME.log).
d_nbdkit_start ()
{
  local name=$1 fifo=$D_TMP/$1.pid ready
  shift
  rm -f "$fifo"
  mkfifo "$fifo" || d_fail "mkfifo $fifo"
  setsid bash -c 'fifo=$1; shift
    "$@" || echo "nbdkit failed: exit $?" >"$fifo"' \
    nbdkit-wrapper "$fifo" "${D_PRE[@]}" nbdkit -f --exit-with-parent \
    -P "$fifo" "$@" </dev/null >>"$D_TMP/$name.log" 2>&1 &
  D_BGPIDS+=("$!")
  ready=$(timeout 30 cat "$fifo") || ready="no pidfile within 30 s"
  # A later failure message must not block on a FIFO nobody reads.
  rm -f "$fifo"
  if [[ ! $ready =~ ^[0-9]+$ ]]; then
    printf '%s: %s\n' "$name" "$ready" >&2
    sed 's/^/   | /' "$D_TMP/$name.log" >&2
    return 1
  fi
  D_NBDKIT_PID=$ready
  D_PIDS+=("$ready")
  return 0
}

# d_expect_err NAME SUBSTRING...: each must occur in $D_TMP/NAME.err.
d_expect_err ()
{
  local name=$1 s r=0
  shift
  for s in "$@"; do
    if ! grep -q -F -- "$s" "$D_TMP/$name.err"; then
      d_bad "$name: stderr does not contain: $s"
      r=1
    fi
  done
  return "$r"
}

# d_expect_fail NAME: D_RC (of the d_run NAME just done) must be non-zero,
# and the exit status 1 (the man page: 2 is for usage errors only).
d_expect_fail ()
{
  local name=$1
  if [[ $D_RC -eq 0 ]]; then
    d_bad "$name: exit status 0, expected a refusal"
    return 1
  elif [[ $D_RC -ne 1 ]]; then
    d_bad "$name: exit status $D_RC, expected 1"
    return 1
  fi
  return 0
}

# d_serve NAME CONFIG PIDFILE [OPTION...]: start `nbdstripe serve
# [OPTION...] CONFIG` (daemonizing; --degraded, --read-only); it returns
# once nbdkit listens.  Remembers the server's pid (from PIDFILE) for
# d_stop and cleanup; sets D_SERVER_PID.  Returns non-zero if serve
# failed (D_RC is its status).
d_serve ()
{
  local name=$1 conf=$2 pidfile=$3
  rm -f "$pidfile"
  d_run "$name" d_ns_serve "${@:4}" "$conf"
  if [[ $D_RC -ne 0 ]]; then
    return 1
  fi
  [[ -s $pidfile ]] || d_fail "$name: serve exited 0 but wrote no pidfile $pidfile"
  D_SERVER_PID=$(<"$pidfile")
  D_PIDS+=("$D_SERVER_PID")
  kill -0 "$D_SERVER_PID" 2>/dev/null ||
    d_fail "$name: the server ($D_SERVER_PID) is not running"
  # The server runs the plugin under test (not an installed one).
  grep -q -F "$STRIPE_PLUGIN" "/proc/$D_SERVER_PID/maps" ||
    d_bad "$name: server $D_SERVER_PID did not load $STRIPE_PLUGIN"
  if [[ -n ${STRIPE_LD_PRELOAD:-} ]]; then
    grep -q -F "$(realpath "$STRIPE_LD_PRELOAD")" "/proc/$D_SERVER_PID/maps" ||
      d_bad "$name: server $D_SERVER_PID runs without $STRIPE_LD_PRELOAD"
  fi
  return 0
}

# d_stop PID: stop a server we started and wait until it has gone.
d_stop ()
{
  local pid=$1 keep=() p
  kill -TERM "$pid" 2>/dev/null || d_bad "server $pid was not running"
  d_wait_gone "$pid" 30 || d_fail "server $pid did not exit within 30 s"
  for p in "${D_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
  D_PIDS=("${keep[@]}")
}

# d_serve_refused NAME CONFIG PIDFILE: `nbdstripe serve` must refuse; if it
# started a server anyway, stop it (and count a failure).
d_serve_refused ()
{
  local name=$1 conf=$2 pidfile=$3 pid
  rm -f "$pidfile"
  d_run "$name" d_ns_serve "$conf"
  if [[ -s $pidfile ]]; then
    pid=$(<"$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      d_bad "$name: a server ($pid) was started"
      D_PIDS+=("$pid")
      d_stop "$pid"
    fi
  fi
  d_expect_fail "$name"
}

# d_sums FILE...: "sha256  name" lines, to compare before and after.
d_sums () { sha256sum -- "$@"; }

# d_same_sums NAME BEFORE_TEXT FILE...: the files' checksums equal BEFORE.
d_same_sums ()
{
  local name=$1 before=$2 after
  shift 2
  after=$(d_sums "$@")
  if [[ $after != "$before" ]]; then
    d_bad "$name: member files changed:"
    diff <(echo "$before") <(echo "$after") >&2
    return 1
  fi
  return 0
}

# d_u32 FILE OFFSET / d_u64 FILE OFFSET: a little-endian integer.
d_u32 () { od -An -v --endian=little -t u4 -j "$2" -N 4 -- "$1" | tr -d ' '; }
d_u64 () { od -An -v --endian=little -t u8 -j "$2" -N 8 -- "$1" | tr -d ' '; }
# d_hex FILE OFFSET LEN: bytes as one hex string.
d_hex () { od -An -v -t x1 -j "$2" -N "$3" -- "$1" | tr -d ' \n'; }

# d_map_check LABEL FILE SIZE LARGEST DATA_OFFSET: the allocation map a
# header of a volume of SIZE bytes whose largest member holds LARGEST
# bytes of data must describe (include/alloc.h, computed here on its
# own): regions of the smallest power of two from 64 KiB that cuts the
# volume into at most 4096, at most 4 MiB; at 8 KiB, whole 4 KiB blocks
# for 64 x LARGEST.  The 4 KiB between header and map zero, every bit
# of the map set (create: all in use; nothing here trims), and zeros
# from its end to DATA_OFFSET.
d_map_check ()
{
  local label=$1 f=$2 size=$3 largest=$4 doff=$5 shift=16 bytes
  while ((shift < 22 && (size - 1) >> shift >= 4096)); do ((shift++)); done
  bytes=$(( ((64 * largest - 1) >> shift) / 32768 * 4096 + 4096 ))
  [[ $(d_u32 "$f" 4056) == "$shift" && $(d_u64 "$f" 4064) == 8192 &&
     $(d_u64 "$f" 4072) == "$bytes" ]] ||
    d_bad "$label: allocation map is shift $(d_u32 "$f" 4056), $(d_u64 "$f" 4072) bytes at $(d_u64 "$f" 4064); expected shift $shift, $bytes bytes at 8192"
  cmp -s -n 4096 -i 4096:0 "$f" /dev/zero ||
    d_bad "$label: bytes between the header and the allocation map are not zero"
  [[ $(od -An -v -t x1 -j 8192 -N "$bytes" -- "$f" | tr -d ' \n' | tr -d f) == "" ]] ||
    d_bad "$label: the allocation map is not all in use"
  cmp -s -n $((doff - 8192 - bytes)) -i $((8192 + bytes)):0 "$f" /dev/zero ||
    d_bad "$label: bytes between the allocation map and the data offset are not zero"
}

# d_random FILE BYTES
d_random () { head -c "$2" /dev/urandom >"$1"; }

# d_nbd_size URI: the export size.
d_nbd_size () { nbdinfo --size "$1"; }

# d_conf FILE NAME CHUNK SERVE_GROUP_BODY MEMBER...: write a config.
d_conf ()
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
