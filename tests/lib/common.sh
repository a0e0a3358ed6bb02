# SPDX-License-Identifier: BSD-3-Clause
# What the shell test libraries share (tests/lib/daemon.sh,
# tests/lib/vm.sh; and tests/integration's shell tests): the environment
# CTest gives them and the environment a server under test runs with,
# the systemd unit's capabilities included.  Sourced; not executable on
# its own.
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
# Exports NBDSTRIPE_RUNDIR=DIR/run and, unless set, NBDSTRIPE_CONFDIR=DIR/etc.
t_server_env ()
{
  local dir=$1
  # A run directory of this test's own: the default sockets and status
  # files of its volumes, and what list and stop see, are not another
  # test's running beside it (ctest -j), nor a leftover in /run/nbdstripe.
  export NBDSTRIPE_RUNDIR=$dir/run
  # And a config directory of its own (unless the test chose one): a
  # volume the package test (tests/package) puts in /etc/nbdstripe while
  # it runs beside this test is not one of this test's volumes.
  export NBDSTRIPE_CONFDIR=${NBDSTRIPE_CONFDIR:-$dir/etc}
  T_PRE=(env "NBDSTRIPE_PLUGIN=$STRIPE_PLUGIN")
  if [[ -n ${STRIPE_LD_PRELOAD:-} ]]; then
    mkdir -p "$dir/asan"
    T_PRE+=("LD_PRELOAD=$STRIPE_LD_PRELOAD${STRIPE_ASAN_SHIM:+ $STRIPE_ASAN_SHIM}"
            "ASAN_OPTIONS=detect_leaks=0:log_path=$dir/asan/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
            "UBSAN_OPTIONS=print_stacktrace=1:log_path=$dir/asan/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
            "TSAN_OPTIONS=log_path=$dir/asan/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}")
  fi
}

# t_ours PID DIR: 0 unless PID is a live process that is not this
# test's -- neither its environment nor its command line names DIR (the
# test's directory, in NBDSTRIPE_RUNDIR of everything it starts, see
# t_server_env), and it is not a zombie child of this shell.  Pids are
# reused (pid_max is 32768, and the suite starts hundreds of thousands
# of processes): a cleanup that signals a pid, or a process group, gone
# minutes ago can kill another test's process, or ctest itself (a CI
# run's wrapper once got a SIGTERM that way).  A group whose leader has
# gone is still this test's: Linux reuses no pid that is a live group's
# id.
t_ours ()
{
  local pid=$1 dir=$2 stat
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  if [[ $stat =~ ^[0-9]+\ \(.*\)\ Z\ ([0-9]+)\  ]]; then
    [[ ${BASH_REMATCH[1]} == "$$" ]]
    return
  fi
  grep -qaF -- "$dir" "/proc/$pid/environ" "/proc/$pid/cmdline" 2>/dev/null
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

# t_unit_caps UNIT: the capability part of a systemd service's sandbox,
# read from UNIT's [Service] section, for setpriv(1), which applies it
# without systemd.  Sets T_SETPRIV, setpriv's options: --bounding-set
# from CapabilityBoundingSet= (required), --inh-caps and --ambient-caps
# from AmbientCapabilities=, --no-new-privs from NoNewPrivileges=yes; and
# T_CAPMASK, the bounding set as /proc/PID/status shows it (CapBnd:), a
# root process's permitted and effective sets after exec too, numbered as
# the kernel's linux/capability.h numbers them.  As systemd reads them,
# lines add up and an empty one empties the set; "~" (every capability
# but) is not understood here.  Returns 1, the reason on stderr, when it
# cannot say.  (The seccomp part is tests/lib/sandbox.py's; namespaces
# and the device cgroup are systemd's alone.)
t_unit_caps ()
{
  local unit=$1 line key value section= nnp=no bset= amb= have_bset= c
  local mask=0 bounding=-all ambient=-all header=/usr/include/linux/capability.h
  local -A num=()

  while IFS= read -r line; do
    case $line in
      \[*) section=$line; continue ;;
      '#'* | ';'* | '') continue ;;
    esac
    [[ $section == '[Service]' && $line == *=* ]] || continue
    key=${line%%=*} value=${line#*=}
    case $key in
      CapabilityBoundingSet | AmbientCapabilities)
        if [[ $value == '~'* ]]; then
          echo "t_unit_caps: $unit: $key=~ is not understood" >&2
          return 1
        fi
        if [[ $key == CapabilityBoundingSet ]]; then
          have_bset=1
          if [[ -n $value ]]; then bset+=" $value"; else bset=; fi
        elif [[ -n $value ]]; then
          amb+=" $value"
        else
          amb=
        fi ;;
      NoNewPrivileges) nnp=$value ;;
    esac
  done <"$unit"
  if [[ -z $have_bset ]]; then
    echo "t_unit_caps: $unit has no CapabilityBoundingSet=" >&2
    return 1
  fi
  while read -r c value; do
    num[$c]=$value
  done < <(sed -n 's/^#define[[:space:]]\+\(CAP_[A-Z_]*\)[[:space:]]\+\([0-9]\+\)[[:space:]]*$/\1 \2/p' \
             "$header" 2>/dev/null)
  if [[ -z ${num[CAP_SYS_ADMIN]:-} ]]; then
    echo "t_unit_caps: no capability numbers in $header (linux-libc-dev)" >&2
    return 1
  fi
  for c in $bset; do
    c=${c^^}
    if [[ -z ${num[$c]:-} ]]; then
      echo "t_unit_caps: $unit: unknown capability $c" >&2
      return 1
    fi
    mask=$(( mask | (1 << num[$c]) ))
    c=${c#CAP_}
    bounding+=",+${c,,}"
  done
  for c in $amb; do
    c=${c^^}
    c=${c#CAP_}
    ambient+=",+${c,,}"
  done
  T_SETPRIV=(--bounding-set="$bounding" --inh-caps="$ambient"
             --ambient-caps="$ambient")
  [[ $nnp != yes ]] || T_SETPRIV=(--no-new-privs "${T_SETPRIV[@]}")
  printf -v T_CAPMASK '%016x' "$mask"
}
