# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the end-to-end tests.  Sourced by bash scripts; not
# executable on its own.
#
# Environment (set by CTest, see tests/e2e/CMakeLists.txt):
#   STRIPE_PLUGIN      path of nbdkit-stripe-plugin.so (required)
#   STRIPE_LD_PRELOAD  sanitizer runtime to preload into nbdkit only (the
#                      plugin is instrumented, nbdkit is not); may be empty
#   TEST_IO            tests/integration/test_io, if it was built
#
# Exit codes: 0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE).

E2E_TMP=
E2E_PGIDS=()                    # process groups of servers we started
E2E_LOOPS=()                    # loop devices we attached
E2E_NBDKIT_OPTS=()              # nbdkit options for every server
E2E_PLUGIN_PARAMS=()            # plugin parameters for every server
E2E_NO_URING=false
E2E_MODE=default                # for messages

e2e_log ()  { printf '== [%3ds] %s\n' "$SECONDS" "$*"; }
e2e_skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
e2e_fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

e2e_cleanup ()
{
  local rc=$? pg dev
  trap - EXIT INT TERM
  for pg in "${E2E_PGIDS[@]}"; do
    kill -TERM -- "-$pg" 2>/dev/null || :
  done
  for pg in "${E2E_PGIDS[@]}"; do
    # Wait (briefly) until the whole group has gone, so that no server
    # holds a loop device open while we detach it.
    for _ in $(seq 50); do
      kill -0 -- "-$pg" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pg" 2>/dev/null || :
  done
  for dev in "${E2E_LOOPS[@]}"; do
    losetup -d "$dev" 2>/dev/null || :
  done
  cd /
  if [[ -n $E2E_TMP && -d $E2E_TMP ]]; then
    rm -rf -- "$E2E_TMP"
  fi
  exit "$rc"
}

# e2e_parse_args "$@": the options every script takes.
#   --no-uring     serve with -D stripe.io_uring=0 (the portable I/O path)
#   --cache=MODE   serve with cache=MODE (writeback, writethrough, direct)
e2e_parse_args ()
{
  local a modes=()
  for a in "$@"; do
    case $a in
      --no-uring)
        E2E_NO_URING=true
        E2E_NBDKIT_OPTS+=(-D stripe.io_uring=0)
        modes+=(no-uring) ;;
      --cache=*)
        E2E_PLUGIN_PARAMS+=("cache=${a#--cache=}")
        modes+=("cache=${a#--cache=}") ;;
      *)
        echo "usage: $0 [--no-uring] [--cache=writeback|writethrough|direct]" >&2
        exit 2 ;;
    esac
  done
  [[ ${#modes[@]} -eq 0 ]] || E2E_MODE=${modes[*]}
}

# Common preconditions; creates $E2E_TMP, installs the cleanup trap and
# makes it the working directory (fio leaves state files in its cwd).
e2e_init ()
{
  [[ -n ${STRIPE_PLUGIN:-} ]] ||
    e2e_skip "STRIPE_PLUGIN is not set (run through ctest, or export it)"
  [[ -f $STRIPE_PLUGIN ]] || e2e_fail "STRIPE_PLUGIN=$STRIPE_PLUGIN: no such file"
  STRIPE_PLUGIN=$(realpath "$STRIPE_PLUGIN")
  command -v nbdkit >/dev/null || e2e_skip "nbdkit is not installed"
  command -v setsid >/dev/null || e2e_skip "setsid (util-linux) is not installed"
  if [[ -n ${STRIPE_LD_PRELOAD:-} && ! -f $STRIPE_LD_PRELOAD ]]; then
    e2e_fail "STRIPE_LD_PRELOAD=$STRIPE_LD_PRELOAD: no such file"
  fi
  E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-e2e.XXXXXX")
  trap e2e_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$E2E_TMP"
  export NBDSTRIPE_RUNDIR=$E2E_TMP/run  # this run's own, as t_server_env
  if [[ " ${E2E_PLUGIN_PARAMS[*]} " == *" cache=direct "* ]] &&
     ! dd if=/dev/zero of="$E2E_TMP/odirect" bs=4096 count=1 oflag=direct \
          status=none 2>/dev/null; then
    e2e_skip "cache=direct: the file system of $E2E_TMP has no O_DIRECT"
  fi
  rm -f "$E2E_TMP/odirect"
  e2e_log "mode: $E2E_MODE"
}

# e2e_serve NAME CLIENT [NBDKIT_OPTION...] -- [PLUGIN_PARAM...]
#
# Serve the plugin on a private Unix socket (nbdkit -U - --run) and run
# the bash command CLIENT once the server listens; in CLIENT, $uri is the
# server's NBD URI.  Only nbdkit gets $STRIPE_LD_PRELOAD, not CLIENT.
# nbdkit exits when CLIENT does; the status is CLIENT's (or nbdkit's own
# failure).  CLIENT's stdout is saved in $E2E_TMP/NAME.out, the stderr of
# both in $E2E_TMP/NAME.err; both are printed.  Returns non-zero also when
# the server logged an error or a sanitizer report.
e2e_serve ()
{
  local name=$1 client=$2 opts=() pre=() shown pid rc=0
  shift 2
  while [[ $# -gt 0 && $1 != -- ]]; do opts+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  if [[ -n ${STRIPE_LD_PRELOAD:-} ]]; then
    pre=(env "LD_PRELOAD=$STRIPE_LD_PRELOAD"
         "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
  fi
  shown=("${E2E_NBDKIT_OPTS[@]}" "${opts[@]}" "$@" "${E2E_PLUGIN_PARAMS[@]}")
  printf -- "-- %s: nbdkit %s\n" "$name" "${shown[*]}"
  # setsid: a process group of our own, so that cleanup can end the server
  # and its --run child without touching anything else.  Running it in the
  # background (and waiting) lets the INT/TERM traps fire at once.
  E2E_CLIENT=$client setsid "${pre[@]}" nbdkit -U - "${E2E_NBDKIT_OPTS[@]}" "${opts[@]}" \
    --run 'exec env -u LD_PRELOAD -u ASAN_OPTIONS uri="$uri" bash -c "$E2E_CLIENT"' \
    "$STRIPE_PLUGIN" "$@" "${E2E_PLUGIN_PARAMS[@]}" \
    >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" </dev/null &
  pid=$!
  E2E_PGIDS+=("$pid")
  wait "$pid" || rc=$?
  # The group is empty now unless something leaked from it.
  kill -TERM -- "-$pid" 2>/dev/null || :
  E2E_PGIDS=()                  # servers run one at a time
  cat "$E2E_TMP/$name.out"
  cat "$E2E_TMP/$name.err" >&2
  # A latency verdict (a member slow, then in line again) is logged at
  # error level for the operator, but is not an I/O error: on this
  # machine an fsync on one member can make it slow for a while.
  if grep -E -v 'health: member [0-9]+ \(.*\): (ok|slow) -> (slow|ok)' \
       "$E2E_TMP/$name.err" |
     grep -E -q '^nbdkit: .*error:|AddressSanitizer|LeakSanitizer|runtime error:'; then
    printf -- '-- %s: the server reported an error (see above)\n' "$name" >&2
    [[ $rc -ne 0 ]] || rc=1
  fi
  printf -- '-- %s: exit status %d\n' "$name" "$rc"
  return "$rc"
}

# e2e_loop_attach VAR FILE [LOSETUP_OPTION...]
# Attach FILE to a free loop device, remember it for cleanup, and store the
# device name in VAR.  Returns non-zero (quietly) if losetup refuses.
e2e_loop_attach ()
{
  local _e2e_var=$1 _e2e_file=$2 _e2e_dev
  shift 2
  _e2e_dev=$(losetup --find --show "$@" "$_e2e_file" 2>"$E2E_TMP/losetup.err") ||
    return 1
  E2E_LOOPS+=("$_e2e_dev")
  printf -v "$_e2e_var" "%s" "$_e2e_dev"
}

# e2e_loop_detach DEV: detach one of our loop devices now.
e2e_loop_detach ()
{
  local dev=$1 keep=() d
  losetup -d "$dev" || e2e_fail "losetup -d $dev"
  for d in "${E2E_LOOPS[@]}"; do [[ $d == "$dev" ]] || keep+=("$d"); done
  E2E_LOOPS=("${keep[@]}")
}

# e2e_size BYTES-EXPRESSION: e.g. "48M+12K" -> 50343936 (K, M, G binary).
e2e_size ()
{
  local e=$1
  e=${e//K/*1024}; e=${e//M/*1048576}; e=${e//G/*1073741824}
  echo $(( e ))
}

# e2e_layout CHUNK SIZE...
# An independent model of the md raid0 layout (RAID0_ALT_MULTIZONE_LAYOUT):
# print one line "MEMBER LOGICAL_OFFSET MEMBER_OFFSET LENGTH" per run that
# is contiguous both logically and on its member, in logical order, then
# "size VOLUME_SIZE".  Members are used up to their size rounded down to
# whole chunks.  Zone z stripes, in member order, over the members whose
# usable size exceeds the previous zone's end on the members (dev_start);
# inside a zone, zone-relative chunk c is on the zone's member c mod n at
# dev_start + (c div n) * chunk.  With equal members this is simply chunk k
# on member k mod N at (k div N) * chunk.
e2e_layout ()
{
  local chunk=$1
  shift
  awk -v chunk="$chunk" -v sizes="$*" '
    function emit(m, lo, mo, len) {
      if (pm == m && plo + plen == lo && pmo + plen == mo) { plen += len; return }
      if (pm >= 0) printf "%d %d %d %d\n", pm, plo, pmo, plen
      pm = m; plo = lo; pmo = mo; plen = len
    }
    BEGIN {
      pm = -1
      n = split(sizes, s, " ")
      for (i = 0; i < n; i++) u[i] = int(s[i + 1] / chunk) * chunk
      logical = 0; start = 0
      for (;;) {
        end = -1                # next zone ends on the members at end
        for (i = 0; i < n; i++)
          if (u[i] > start && (end < 0 || u[i] < end)) end = u[i]
        if (end < 0) break
        nd = 0
        for (i = 0; i < n; i++) if (u[i] >= end) devs[nd++] = i
        nchunks = (end - start) / chunk * nd
        for (c = 0; c < nchunks; c++)
          emit(devs[c % nd], logical + c * chunk,
               start + int(c / nd) * chunk, chunk)
        logical += nchunks * chunk
        start = end
      }
      if (pm >= 0) printf "%d %d %d %d\n", pm, plo, pmo, plen
      printf "size %d\n", logical
    }'
}

# e2e_oracle_check SOURCE CHUNK NAME:SIZE:PATH...
# Compare what the members hold with SOURCE (an image of the whole volume)
# by the layout model above: SOURCE is cut into chunks, and for each member
# the chunks the model puts on it, in member offset order, must be exactly
# the member's first usable bytes; the bytes past the usable size must
# still be zero (fresh sparse files).  SIZE is the member's size as the
# plugin saw it; PATH is what to read.
e2e_oracle_check ()
{
  local src=$1 chunk=$2 spec sizes=() paths=() names=() i usable bad=0
  local dir=$E2E_TMP/oracle
  shift 2
  for spec in "$@"; do
    names+=("${spec%%:*}"); spec=${spec#*:}
    sizes+=("${spec%%:*}"); paths+=("${spec#*:}")
  done
  rm -rf "$dir"
  mkdir "$dir"
  split -b "$chunk" -a 7 -d "$src" "$dir/c" || e2e_fail "oracle: split"
  # Per member, the list of chunk files in member offset order; the runs
  # of each member must tile it from offset 0 without gaps.
  e2e_layout "$chunk" "${sizes[@]}" |
    awk -v chunk="$chunk" -v dir="$dir" '
      $1 == "size" { next }
      {
        m = $1; lo = $2; mo = $3; len = $4
        if (mo != next_mo[m] + 0) {
          printf "oracle: model gap on member %d at %d\n", m, mo > "/dev/stderr"
          exit 1
        }
        for (j = 0; j < len / chunk; j++)
          printf "%s/c%07d\n", dir, lo / chunk + j > (dir "/list." m)
        next_mo[m] = mo + len
      }' || e2e_fail "oracle: layout model"
  for i in "${!sizes[@]}"; do
    usable=$(( sizes[i] / chunk * chunk ))
    touch "$dir/list.$i"
    if [[ $(( $(wc -l <"$dir/list.$i") * chunk )) -ne $usable ]]; then
      echo "oracle: member $i: the model covers $(wc -l <"$dir/list.$i") chunks, usable is $usable bytes" >&2
      bad=1
    elif ! xargs -a "$dir/list.$i" cat | cmp -n "$usable" - "${paths[i]}"; then
      echo "oracle: member $i (${names[i]}): content differs from the md raid0 model" >&2
      bad=1
    elif (( sizes[i] > usable )) &&
         ! cmp -n $(( sizes[i] - usable )) -i "$usable:0" "${paths[i]}" /dev/zero; then
      echo "oracle: member $i (${names[i]}): bytes past the usable size were written" >&2
      bad=1
    else
      echo "oracle: member $i (${names[i]}): $usable bytes as modelled, tail untouched"
    fi
  done
  rm -rf "$dir"
  return "$bad"
}
