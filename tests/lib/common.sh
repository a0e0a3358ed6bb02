# SPDX-License-Identifier: BSD-3-Clause
# What the shell test libraries share (tests/lib/daemon.sh,
# tests/lib/vm.sh; and tests/integration's shell tests): the environment
# CTest gives them and the environment a server under test runs with.  Sourced; not executable on its own.
#
# Environment (set by CTest):
#   NBDSTRIPE          the nbdstripe binary under test (required)
#   STRIPE_PLUGIN      nbdkit-stripe-plugin.so under test (required)
#   STRIPE_LD_PRELOAD  sanitizer runtime to preload into nbdkit; may be empty
#   STRIPE_ASAN_SHIM   tests/lib/asan_exit_shim.c, preloaded after it

# t_check_env SKIP FAIL [TOOL...]: NBDSTRIPE and STRIPE_PLUGIN are set and
# exist (made absolute), every TOOL is installed, STRIPE_LD_PRELOAD exists
# when set.  SKIP and FAIL are the calling library's functions (exit 77, 1).
t_check_env ()
{
  local skip=$1 fail=$2 t
  shift 2
  [[ -n ${NBDSTRIPE:-} ]] ||
    "$skip" "NBDSTRIPE is not set (run through ctest, or export it)"
  [[ -x $NBDSTRIPE ]] || "$fail" "NBDSTRIPE=$NBDSTRIPE: not an executable"
  NBDSTRIPE=$(realpath "$NBDSTRIPE")
  [[ -n ${STRIPE_PLUGIN:-} && -f $STRIPE_PLUGIN ]] ||
    "$fail" "STRIPE_PLUGIN=${STRIPE_PLUGIN:-}: no such file"
  STRIPE_PLUGIN=$(realpath "$STRIPE_PLUGIN")
  for t in "$@"; do
    command -v "$t" >/dev/null || "$skip" "$t is not installed"
  done
  if [[ -n ${STRIPE_LD_PRELOAD:-} && ! -f $STRIPE_LD_PRELOAD ]]; then
    "$fail" "STRIPE_LD_PRELOAD=$STRIPE_LD_PRELOAD: no such file"
  fi
}

# t_server_env DIR: sets T_PRE, the `env ...` prefix for nbdkit and for
# `nbdstripe serve` (which execs nbdkit): the plugin under test, and in a
# sanitizer build the runtime preloaded first (nbdkit is not instrumented)
# with reports written under DIR/asan (a daemon's stderr is /dev/null).
t_server_env ()
{
  local dir=$1
  T_PRE=(env "NBDSTRIPE_PLUGIN=$STRIPE_PLUGIN")
  if [[ -n ${STRIPE_LD_PRELOAD:-} ]]; then
    mkdir -p "$dir/asan"
    T_PRE+=("LD_PRELOAD=$STRIPE_LD_PRELOAD${STRIPE_ASAN_SHIM:+ $STRIPE_ASAN_SHIM}"
            "ASAN_OPTIONS=detect_leaks=0:log_path=$dir/asan/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
            "UBSAN_OPTIONS=print_stacktrace=1:log_path=$dir/asan/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
            "TSAN_OPTIONS=log_path=$dir/asan/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}")
  fi
}

# t_asan_reports DIR: show and remove the sanitizer reports t_server_env
# sent to DIR/asan; sets T_REPORTS to how many there were.
t_asan_reports ()
{
  local dir=$1 f
  T_REPORTS=0
  [[ -n $dir && -d $dir/asan ]] || return 0
  for f in "$dir"/asan/*; do
    [[ -e $f ]] || continue
    printf -- '-- sanitizer report %s:\n' "$f" >&2
    cat "$f" >&2
    T_REPORTS=$((T_REPORTS + 1))
    rm -f "$f"
  done
}
