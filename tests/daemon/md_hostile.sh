#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What an md superblock says is a disk's word, not ours: nbdstripe import,
# inspect and check must not let it write a config, drive a terminal or
# put the data area on the superblock.
#
#   names   the array's name (32 bytes from the disk) with a newline and
#           config keys after it ('x\nhealth:{status_file:"/bin/sh"}'),
#           terminal escape sequences, every control byte, backslashes and
#           quotes, UTF-8: import writes a config whose only settings are
#           its own (the name in its comment escaped), which loads; no
#           command prints a control byte (but newlines between lines)
#   sizes   data_offset, data_size and super_offset from the whole 64-bit
#           range, among them the wrap of the issue (data_offset 2^55 + 8,
#           data_size 2^64 - 2^55 + 2048: the sum is 2056 sectors, the
#           data area on the superblock) and a data area over the
#           bad-block log: check refuses each one, naming the field, and
#           never says it can be served; nothing is written
LIB=$(cd "$(dirname "$0")/../lib" && pwd) || exit 1
source "$LIB/daemon.sh" || exit 1
d_init nbdkit jq sha256sum
PY=/usr/bin/python3
[[ -x $PY ]] || d_skip "$PY is not installed"
sb () { "$PY" "$LIB/md_sb.py" "$@"; }
T=$(pwd -P)
M=$((1024 * 1024))

# fresh: an md raid0 volume of 2 members made by nbdstripe create.
fresh ()
{
  rm -f "$T"/a0 "$T"/a1 "$T"/md.conf
  truncate -s $((8 * M)) "$T/a0" "$T/a1"
  d_conf "$T/md.conf" md 64K "socket = \"$T/md.sock\";" "$T/a0" "$T/a1"
  echo 'metadata = "md";' >>"$T/md.conf"
  d_run create d_ns create "$T/md.conf"
  [[ $D_RC -eq 0 ]] || d_fail "create of the md volume failed"
}

# no_control NAME: NAME's stdout and stderr hold no control byte but
# newlines (tabs neither: nothing of ours prints one).
no_control ()
{
  if LC_ALL=C grep -q -P '[\x00-\x09\x0b-\x1f\x7f]' "$T/$1.out" "$T/$1.err"; then
    d_bad "$1: a control byte reached the terminal"
    LC_ALL=C grep -n -P '[\x00-\x09\x0b-\x1f\x7f]' "$T/$1.out" "$T/$1.err" |
      od -c | head -5 >&2
    return 1
  fi
}

names=(
  $'x\nhealth:{status_file:"/bin/sh"}'
  $'\e]0;owned\a\e[2J\e[31mred'
  $'a\rb\bc\td\x01\x02\x7f\x1f'
  'back\slash "quoted" #hash'
  'ünïcödé:name'
)
k=0
for name in "${names[@]}"; do
  k=$((k + 1))
  fresh
  sb "$T/a0" set "set_name=$name" >/dev/null || d_fail "md_sb.py set set_name ($k)"
  sb "$T/a1" set "set_name=$name" >/dev/null || d_fail "md_sb.py set set_name ($k)"
  before=$(d_sums "$T/a0" "$T/a1")
  rm -f "$T/imp.conf"
  d_run "import$k" d_ns import --out "$T/imp.conf" "$T/a0" "$T/a1"
  [[ $D_RC -eq 0 ]] || d_bad "import $k: failed"
  no_control "import$k"
  d_run "stdout$k" d_ns import "$T/a0" "$T/a1"
  no_control "stdout$k"
  # The config's settings, comments and blank lines aside: ours only.
  keys=$(grep -v -E '^\s*(#|$)' "$T/imp.conf" | grep -o -E '^[a-z_]+' | sort | tr '\n' ' ')
  if [[ $keys == "chunk members metadata name serve uuid " ]]; then
    d_ok "import $k: only its own settings (${keys% })"
  else
    d_bad "import $k: the config has settings '$keys'"
    sed 's/^/   | /' "$T/imp.conf" >&2
  fi
  if grep -v -E '^\s*#' "$T/imp.conf" | grep -q status_file; then
    d_bad "import $k: the disk's name put a status_file in the config"
  fi
  d_run "check$k" d_ns check "$T/imp.conf"
  [[ $D_RC -eq 0 ]] || d_bad "check $k: the imported config does not load and assemble"
  no_control "check$k"
  d_run "inspect$k" d_ns inspect "$T/a0"
  no_control "inspect$k"
  d_run "inspectj$k" d_ns inspect --json "$T/a0"
  jq -e . "$T/inspectj$k.out" >/dev/null || d_bad "inspect --json $k: not JSON"
  d_same_sums "names $k" "$before" "$T/a0" "$T/a1"
done

# Sizes: each case FIELD=VALUE... on member 0 (then the checksum fixed).
cases=(
  "data_offset=$((2 ** 55 + 8)) data_size=18410715276690589696"
  "data_offset=0xffffffffffffffff"
  "data_size=0xffffffffffffffff"
  "data_offset=0x8000000000000000 data_size=0x8000000000000000"
  "data_offset=0x40000000000000 data_size=16"
  "super_offset=0xfffffffffffffff8"
  "data_offset=8"
  "bblog_offset=8 bblog_size=8 data_offset=16"
  "bblog_offset=-256 bblog_size=8"
)
k=0
for c in "${cases[@]}"; do
  k=$((k + 1))
  fresh
  # shellcheck disable=SC2086 # one word per field
  sb "$T/a0" set $c >/dev/null || d_fail "md_sb.py set $c"
  before=$(d_sums "$T/a0" "$T/a1")
  d_run "size-check$k" d_ns check "$T/md.conf"
  if [[ $D_RC -ne 0 ]] && ! grep -q -i "can be served" "$T/size-check$k.out"; then
    d_ok "sizes $k ($c): refused: $(grep -m1 -o -E 'field [a-z_]+|md superblock[^:]*' "$T/size-check$k.err" | head -1)"
  else
    d_bad "sizes $k ($c): check accepted it"
  fi
  d_run "size-inspect$k" d_ns inspect --json "$T/a0"
  if jq -e '.. | objects | select(.servable == true)' "$T/size-inspect$k.out" >/dev/null 2>&1; then
    d_bad "sizes $k ($c): inspect says it can be served"
  fi
  d_same_sums "sizes $k" "$before" "$T/a0" "$T/a1"
done
d_done
