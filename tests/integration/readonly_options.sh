#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The plugin sees nbdkit's -r wherever nbdkit does.  nbdkit tells a plugin
# whether it is read-only only per connection, so the plugin reads its
# own command line (plugin/cmdline.c) to know, before it opens the
# members, whether a member that cannot be opened for writing is fine
# (-r) or an error.
#
# Member 1 of 2 cannot be opened for writing, even by root (chattr +i,
# else a read-only bind mount; skipped if neither works).  For each set of
# nbdkit options below, nbdkit runs the plugin ad hoc (file= file=
# chunk=64K) in captive mode (--run, which waits until the server is
# ready) and nbdinfo connects:
#
# - with -r after an option that takes an argument, in each of its
#   spellings (--pid-file X, --pidfile X, -P X, --pid-file=X, --ip-addr,
#   --ipaddr, -i with -p/--port, --export, --export-name, --exportname,
#   -e, --threads, -t, --unix, -U, --debug, -D, --log, --mask-handshake,
#   --filter, --user, --group, -u, -g, --tls, --tls-psk,
#   --tls-certificates, and abbreviations --pid, --export-n), after
#   options that take none (--tls-verify-peer, --vsock, --swap, --no-sr,
#   --exit-with-parent), in a cluster (-fr, -rP X) and after the plugin
#   and its parameters (getopt moves options there to the front): nbdkit
#   starts, the export is read-only (nbdinfo: is_read_only), and the
#   members are unchanged;
# - with "-r" only as the argument of an option (-P -r, --export-name -r,
#   --run '... -r', --pid-file=-r), or after "--": nbdkit is not
#   read-only, so the plugin must refuse the read-only member, naming it.
#   ("--" is left to the unit tests: after it "-r" is a plugin parameter,
#   file=-r.)
#
# --vsock runs with --run true: no vsock client here; starting at all
# means the plugin accepted the read-only member.
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh" || exit 1

fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
FAILS=0
bad () { printf 'FAIL: %s\n' "$*" >&2; FAILS=$((FAILS + 1)); }

[[ -n ${STRIPE_PLUGIN:-} && -f $STRIPE_PLUGIN ]] ||
  skip "STRIPE_PLUGIN is not set (run through ctest)"
STRIPE_PLUGIN=$(realpath "$STRIPE_PLUGIN")
for t in nbdkit nbdinfo jq python3; do
  command -v "$t" >/dev/null || skip "$t is not installed"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-ro.XXXXXX")
RO_MNT= IMMUTABLE=
cleanup ()
{
  local rc=$?
  [[ -z $IMMUTABLE ]] || chattr -i "$IMMUTABLE" 2>/dev/null
  [[ -z $RO_MNT ]] || umount -l "$RO_MNT" 2>/dev/null
  rm -rf -- "$TMP"
  exit "$rc"
}
trap cleanup EXIT
cd "$TMP" || fail "cd $TMP"
t_server_env "$TMP"

M=$((1024 * 1024))
head -c $((2 * M)) /dev/urandom >m0
head -c $((2 * M)) /dev/urandom >m1
ro=$TMP/m1
if chattr +i m1 2>/dev/null; then
  IMMUTABLE=$TMP/m1
  how="chattr +i"
else
  mkdir ro && mv m1 ro/m1 && ro=$TMP/ro/m1
  mount --bind ro ro 2>/dev/null && RO_MNT=$TMP/ro &&
    mount -o remount,bind,ro ro 2>/dev/null ||
    skip "cannot make a member read-only for root (chattr +i, bind mount)"
  how="read-only bind mount"
fi
if (: >>"$ro") 2>/dev/null; then
  skip "$ro still opens for writing ($how)"
fi
printf '== member 1 made read-only by %s\n' "$how"
sums=$(sha256sum m0 "$ro")
params=("file=$TMP/m0" "file=$ro" chunk=64K)
printf 'a:%s\n' 00112233445566778899aabbccddeeff >psk
mkdir certs
nbdkit --filter=nozero null --dump-plugin >/dev/null 2>&1 ||
  fail "nbdkit's nozero filter is not installed"

# free_port: a TCP port on 127.0.0.1 that was free a moment ago.
free_port ()
{
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

N=0
# run RUNCMD OPTIONS... [@ TRAILING...]: nbdkit --run RUNCMD OPTIONS
# PLUGIN PARAMS TRAILING; sets RC, output in $TMP/N.err.
run ()
{
  local runcmd=$1 opts=() trailing=()
  shift
  while [[ $# -gt 0 && $1 != @ ]]; do opts+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift && trailing=("$@")
  N=$((N + 1))
  rm -f out.json
  RC=0
  CMD="nbdkit ${opts[*]}${opts[*]:+ }PLUGIN ${params[*]}${trailing[*]:+ }${trailing[*]}"
  CMD=${CMD//$TMP/\$TMP}
  timeout 60 "${T_PRE[@]}" nbdkit --run "$runcmd" "${opts[@]}" \
    "$STRIPE_PLUGIN" "${params[@]}" "${trailing[@]}" \
    </dev/null >"$N.err" 2>&1 || RC=$?
}

# served_ro OPTIONS... [@ TRAILING...]: nbdkit starts, the export is
# read-only, the members are unchanged.
served_ro ()
{
  run 'nbdinfo --json "$uri" >out.json' "$@"
  if [[ $RC -ne 0 ]]; then
    bad "$CMD: exit $RC, expected a read-only export:"
    sed 's/^/   | /' "$N.err" >&2
  elif ! jq -e '.exports[0].is_read_only == true' out.json >/dev/null; then
    bad "$CMD: the export is not read-only: $(cat out.json)"
  else
    printf 'ok: %s: read-only\n' "$CMD"
  fi
  [[ $(sha256sum m0 "$ro") == "$sums" ]] || fail "$CMD: a member changed"
}

# started OPTIONS...: nbdkit starts (--run true) without the plugin
# refusing the read-only member.
started ()
{
  run true "$@"
  if [[ $RC -ne 0 ]]; then
    bad "$CMD: exit $RC, expected the server to start:"
    sed 's/^/   | /' "$N.err" >&2
  else
    printf 'ok: %s: started\n' "$CMD"
  fi
}

# refused OPTIONS... [@ TRAILING...]: nbdkit is not read-only: the plugin
# refuses the member that cannot be opened for writing, naming it.
refused ()
{
  run true "$@"
  if [[ $RC -eq 0 ]]; then
    bad "$CMD: started, but nbdkit is not read-only: the read-only member must be refused"
  elif ! grep -q -F "$ro" "$N.err"; then
    bad "$CMD: exit $RC, but the message does not name $ro:"
    sed 's/^/   | /' "$N.err" >&2
  else
    printf 'ok: %s: refused (%s)\n' "$CMD" "$(grep -m1 -F "$ro" "$N.err")"
  fi
  [[ $(sha256sum m0 "$ro") == "$sums" ]] || fail "$CMD: a member changed"
}

pid=$TMP/nbdkit.pid
served_ro -r
served_ro --pid-file "$pid" -r
served_ro --pidfile "$pid" -r
served_ro -P "$pid" -r
served_ro --pid-file="$pid" -r
served_ro --pid "$pid" -r
port=$(free_port) || fail "no free port"
served_ro --ip-addr 127.0.0.1 -p "$port" -r
port=$(free_port) || fail "no free port"
served_ro --ipaddr 127.0.0.1 --port "$port" -r
port=$(free_port) || fail "no free port"
served_ro -i 127.0.0.1 -p "$port" --read-only
served_ro --export vol -r
served_ro --export-name vol -r
served_ro --exportname vol -r
served_ro --export-n vol -r
served_ro -e vol -r
served_ro --threads 4 -r
served_ro -t 4 -r
served_ro --unix "$TMP/s1.sock" -r
served_ro -U "$TMP/s2.sock" --readonly
served_ro --debug stripe.io_uring=1 -r
served_ro -D stripe.io_uring=1 -r
served_ro --log stderr -r
served_ro --mask-handshake 3 -r
served_ro --filter nozero -r
served_ro --user root --group root -r
served_ro -u root -g root -r
served_ro --tls off -r
served_ro --tls off --tls-psk "$TMP/psk" -r
served_ro --tls off --tls-certificates "$TMP/certs" -r
served_ro --tls-verify-peer -r
served_ro --swap -r
served_ro --no-sr -r
served_ro --exit-with-parent -r
served_ro -fr
served_ro -rP "$pid"
served_ro --pid-file "$pid" @ -r
served_ro -e vol @ --read-only
started --vsock -r

refused
refused -P -r
refused --pid-file -r
refused --pid-file=-r
refused --export-name -r
refused -e -r
refused -vP -r

if [[ $FAILS -ne 0 ]]; then
  printf 'FAILED: %d case(s)\n' "$FAILS" >&2
  exit 1
fi
t_asan_reports "$TMP"
[[ $T_REPORTS -eq 0 ]] || fail "sanitizer reports (above)"
echo PASS
