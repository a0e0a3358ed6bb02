# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the tests of nbdstripe replace (tests/replace).  Sourced by
# bash scripts; builds on daemon.sh (d_*) and remote.sh (r_*: stock nbdkit
# member servers), same environment, same exit codes (0 pass, 1 fail, 77
# skip).
#
# The volume under test is served by nbdkit run directly with the plugin
# under test and config=CONFIG (so that a test can give it -D flags:
# stripe.replace_gate, stripe.replace_crash), in the foreground in the
# background of the test, its pidfile a FIFO (daemon.sh d_nbdkit_start):
# it serves when rp_start returns (a first client answered).  Its status file, and so its control
# socket, are in $D_TMP.  A replace is followed through the control socket
# (tests/lib/replace_ctl.py), polled with a deadline: no sleeps.
#
# Layout: members of equal size (md raid0, both layouts alike), chunk C,
# N members, data offset DO.  Member offset MO of member I (MO >= DO,
# rel = MO - DO) holds logical byte
#     (rel / C) * N * C + I * C + rel % C
# and logical byte L lives on member (L / C) % N at DO + (L / C / N) * C +
# L % C.  rp_logical / rp_member compute them; the Python clients have
# their own copy.

source "$(dirname "${BASH_SOURCE[0]}")/daemon.sh" || exit 1
source "$(dirname "${BASH_SOURCE[0]}")/remote.sh" || exit 1

RP_LIB=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
RP_PY=/usr/bin/python3
M=$((1024 * 1024))
K=1024

# rp_init [TOOL...]: d_init, and /usr/bin/python3 (with python3-libnbd
# when "libnbd" is among the tools).
rp_init ()
{
  local t tools=() nbd=0
  for t in "$@"; do
    if [[ $t == libnbd ]]; then nbd=1; else tools+=("$t"); fi
  done
  d_init nbdkit nbdcopy nbdinfo cmp setsid jq "${tools[@]}"
  [[ -x $RP_PY ]] || d_skip "$RP_PY is not installed"
  if [[ $nbd -eq 1 ]]; then
    "$RP_PY" -c 'import nbd' 2>/dev/null ||
      d_skip "python3-libnbd is not installed for $RP_PY"
  fi
  [[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] ||
    d_fail "DAEMON_HELPER is not set"
}

# rp_volume NAME CHUNK EXTRA MEMBER...: write the config $D_TMP/NAME.conf
# (EXTRA: more top-level keys, e.g. 'metadata = "md";', may be empty), its
# socket, pidfile and status file in $D_TMP; sets RP_NAME RP_CONF
# RP_SOCK RP_URI RP_CTL RP_STATUS RP_PIDFILE RP_N RP_CHUNK.
rp_volume ()
{
  local name=$1 chunk=$2 extra=$3
  shift 3
  RP_NAME=$name
  RP_CONF=$D_TMP/$name.conf
  RP_SOCK=$D_TMP/$name.sock
  RP_URI="nbd+unix:///?socket=$RP_SOCK"
  RP_STATUS=$D_TMP/$name.status.json
  RP_CTL=$D_TMP/$name.ctl
  RP_PIDFILE=$D_TMP/$name.pid
  RP_N=$#
  RP_CHUNK=$(numfmt --from=iec "$chunk")
  d_conf "$RP_CONF" "$name" "$chunk" \
    "socket = \"$RP_SOCK\"; pidfile = \"$RP_PIDFILE\"; threads = 8;" "$@"
  printf 'health = { status_file = "%s"; };\n' "$RP_STATUS" >>"$RP_CONF"
  [[ -z $extra ]] || printf '%s\n' "$extra" >>"$RP_CONF"
}

# rp_create: nbdstripe create on the config (must succeed).
rp_create ()
{
  d_run create d_ns create "$RP_CONF"
  [[ $D_RC -eq 0 ]] || d_fail "create $RP_CONF failed"
}

# rp_start LOGNAME [NBDKIT_ARGS...]: serve the volume with nbdkit (the
# plugin under test, config=RP_CONF, the args after it: -D flags go
# before the plugin, so give them as "-D" "stripe.x=1" pairs -- they are
# all put before the plugin).  Sets RP_PID.  Fails the test if nbdkit does
# not start.
rp_start ()
{
  local log=$1
  shift
  rm -f "$RP_SOCK"
  d_nbdkit_start "$log" -U "$RP_SOCK" "$@" "$STRIPE_PLUGIN" \
    config="$RP_CONF" || d_fail "$log: the volume's nbdkit did not start"
  RP_PID=$D_NBDKIT_PID
  # nbdkit listens before the plugin's after_fork has run (where the
  # volume takes its new generation, writing every header): a client is
  # accepted only once it has, so one answer says the start is over.
  nbdinfo --size "$RP_URI" >/dev/null ||
    d_fail "$log: the volume's nbdkit does not answer"
}

# rp_forget PID: no longer one of our servers (it has gone).
rp_forget ()
{
  local keep=() p
  for p in "${D_PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  D_PIDS=("${keep[@]}")
}

# rp_stop: stop the volume's server (SIGTERM) and wait until it has gone.
rp_stop () { d_stop "$RP_PID"; }

# rp_kill9: SIGKILL the volume's server and wait until it has gone.
rp_kill9 ()
{
  kill -KILL "$RP_PID" 2>/dev/null || d_bad "server $RP_PID was not running"
  d_wait_gone "$RP_PID" 30 || d_fail "server $RP_PID did not die"
  rp_forget "$RP_PID"
}

# rp_ctl ARGS...: tests/lib/replace_ctl.py on the volume's control socket.
rp_ctl () { "$RP_PY" "$RP_LIB/replace_ctl.py" "$RP_CTL" "$@"; }

# rp_wait NAME ARGS...: rp_ctl wait ARGS, the replace object saved in
# $D_TMP/NAME.json (and shown); returns replace_ctl's status.
rp_wait () { rp_ctl_saved wait "$@"; }

# rp_hold NAME TARGET ARGS...: rp_ctl hold TARGET ARGS (a gated copier let
# go phase by phase up to TARGET, or to its end), the replace object saved
# in $D_TMP/NAME.json (and shown); returns replace_ctl's status.
rp_hold () { rp_ctl_saved hold "$@"; }

# rp_ctl_saved VERB NAME ARGS...: rp_ctl VERB ARGS into $D_TMP/NAME.json.
rp_ctl_saved ()
{
  local verb=$1 name=$2 rc=0
  shift 2
  rp_ctl "$verb" "$@" >"$D_TMP/$name.json" || rc=$?
  printf -- '-- %s: %s %s -> %d: %s\n' "$name" "$verb" "$*" "$rc" \
    "$(cut -c1-600 "$D_TMP/$name.json")"
  return "$rc"
}

# rp_json NAME JQ: a field of the object rp_wait NAME saved.
rp_json () { jq -r "$2" "$D_TMP/$1.json"; }

# rp_logical I MO: the logical offset of member I's byte at member offset
# MO (RP_N, RP_CHUNK, data offset RP_DO).
rp_logical ()
{
  local rel=$(($2 - RP_DO))
  echo $(( (rel / RP_CHUNK) * RP_N * RP_CHUNK + $1 * RP_CHUNK + rel % RP_CHUNK ))
}

# rp_member L: "I MO", where logical byte L lives.
rp_member ()
{
  local c=$(($1 / RP_CHUNK))
  echo "$((c % RP_N)) $((RP_DO + (c / RP_N) * RP_CHUNK + $1 % RP_CHUNK))"
}

# rp_write_pattern FILE: the volume (served) gets FILE's bytes (its size).
rp_write_pattern ()
{
  nbdcopy "$1" "$RP_URI" || d_fail "nbdcopy $1 -> the volume"
}

# rp_same NAME FILE: the served volume holds FILE's bytes.
rp_same ()
{
  rm -f "$D_TMP/$1.read"
  if ! nbdcopy "$RP_URI" "$D_TMP/$1.read"; then
    d_bad "$1: reading the volume failed"
    return 1
  fi
  if cmp "$2" "$D_TMP/$1.read"; then
    d_ok "$1: the volume holds the data written"
    rm -f "$D_TMP/$1.read"
  else
    d_bad "$1: the volume does not hold the data written"
    return 1
  fi
}

# rp_header_field FILE-OR-URI FIELD: a line of `nbdstripe inspect` (FIELD
# as printed before the colon: "array UUID", "member", "generation",
# "format"), its value.
rp_header_field ()
{
  "$NBDSTRIPE" inspect "$1" 2>/dev/null |
    sed -n "s/^  $2: *//p" | head -1
}

# rp_no_header LABEL FILE: FILE holds no header at 0 (its first 8 bytes
# are not the magic) -- read directly.
rp_no_header ()
{
  if [[ $(head -c 8 "$2" | od -An -c | tr -d ' \n') == NBDSTRIP ]]; then
    d_bad "$1: $2 holds an nbdstripe header"
    return 1
  fi
  d_ok "$1: $2 holds no header"
}

# rp_member_cmp LABEL A B OFFSET LEN: bytes [OFFSET, OFFSET+LEN) of files A
# and B are equal.
rp_member_cmp ()
{
  if cmp -s -n "$5" -i "$4:$4" "$2" "$3"; then
    d_ok "$1: $(basename "$2") and $(basename "$3") agree at $4+$5"
  else
    d_bad "$1: $(basename "$2") and $(basename "$3") differ in [$4, $4+$5)"
    cmp -n "$5" -i "$4:$4" "$2" "$3" | head -3 >&2
    return 1
  fi
}

# rp_nbdsh ARGS...: nbdsh (python3-libnbd's shell) with /usr/bin/python3.
rp_nbdsh () { "$RP_PY" -m nbd "$@"; }

# rp_read_at URI OFFSET LENGTH OUT: LENGTH bytes of the export at OFFSET
# into file OUT; non-zero (the error on stderr) if the read fails.
rp_read_at ()
{
  rp_nbdsh -u "$1" -c "open('$4', 'wb').write(h.pread($3, $2))"
}
