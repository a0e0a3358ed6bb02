#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# No two members of a volume are the same bytes, however they are spelled.
#
#   file + loop     metadata = "none": a file and a loop device over that
#                   same file: check, serve and the plugin refuse, naming
#                   both and saying they overlap (root, losetup)
#   loop offset     headers: member 1 is `losetup -o 16M` over member 0's
#                   file: create, check, serve refuse; nothing written
#   disjoint loops  two loop devices over disjoint halves of one file are
#                   NOT aliases: create and serve accept them (control)
#   NBD spellings   one nbdkit export reached as socket=DIR/s.sock and as
#                   socket=DIR/./s.sock: create and check refuse (the same
#                   NBD server); nothing written.  Over TCP as
#                   nbd://localhost:P/ and nbd://127.0.0.1:P/: check,
#                   serve and the plugin refuse
#   two servers     two nbdkit servers exporting the same file: nothing in
#                   the URIs says so; create finds out by reading every
#                   header back, refuses, and restores what it wrote
#
# Every refusal leaves every member file byte-identical (sha256).
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo

K=1024 M=$((1024 * 1024))
sock=$D_TMP/vol.sock pidfile=$D_TMP/vol.pid
serve="socket = \"$sock\"; pidfile = \"$pidfile\";"

# refused_all NAME CONF SUBSTRING FILES...: check, serve and plain nbdkit
# refuse CONF with SUBSTRING; FILES unchanged.
refused_all ()
{
  local name=$1 conf=$2 want=$3 before
  shift 3
  before=$(d_sums "$@")
  d_run "$name.check" d_ns check "$conf"
  d_expect_fail "$name.check"
  d_expect_err "$name.check" "$want"
  d_serve_refused "$name.serve" "$conf" "$pidfile"
  d_expect_err "$name.serve" "$want"
  d_run "$name.plugin" d_nbdkit -U - "$STRIPE_PLUGIN" "config=$D_TMP/$conf" --run true
  d_expect_fail "$name.plugin"
  d_expect_err "$name.plugin" "$want"
  d_same_sums "$name" "$before" "$@" && d_ok "$name: nothing written"
}

have_loops=0
if [[ $(id -u) -eq 0 ]] && command -v losetup >/dev/null &&
   losetup -f >/dev/null 2>&1; then
  have_loops=1
fi

if ((have_loops)); then
  d_log "file + loop device over it (metadata = \"none\")"
  truncate -s $((8 * M)) "$D_TMP/f"
  d_random "$D_TMP/g" $((8 * M))
  lf=$(losetup -f --show "$D_TMP/f") || d_fail "losetup f"
  D_LOOPS+=("$lf")
  d_conf fl.conf fl 64K "$serve" "$D_TMP/f" "$lf" "$D_TMP/g"
  echo 'metadata = "none";' >>fl.conf
  refused_all fileloop fl.conf \
    "member 0 ($D_TMP/f) and member 1 ($lf) are overlapping" "$D_TMP/f" "$D_TMP/g"
  d_run fileloop.adhoc d_nbdkit -U - "$STRIPE_PLUGIN" file="$D_TMP/f" \
    file="$lf" --run true
  d_expect_fail fileloop.adhoc
  d_expect_err fileloop.adhoc "member 0 ($D_TMP/f) and member 1 ($lf) are overlapping"

  d_log "member 1 = losetup -o 16M over member 0's file (headers)"
  truncate -s $((32 * M)) "$D_TMP/h0"
  truncate -s $((16 * M)) "$D_TMP/h2" "$D_TMP/h3"
  lo=$(losetup -f --show -o $((16 * M)) "$D_TMP/h0") || d_fail "losetup -o"
  D_LOOPS+=("$lo")
  d_conf ho.conf ho 64K "$serve" "$D_TMP/h0" "$lo" "$D_TMP/h2" "$D_TMP/h3"
  before=$(d_sums "$D_TMP"/h{0,2,3})
  d_run ho.create d_ns create ho.conf
  d_expect_fail ho.create
  d_expect_err ho.create "member 0 ($D_TMP/h0) and member 1 ($lo) are overlapping"
  d_same_sums ho.create "$before" "$D_TMP"/h{0,2,3} && d_ok "ho.create: nothing written"
  refused_all ho ho.conf "member 0 ($D_TMP/h0) and member 1 ($lo) are overlapping" \
    "$D_TMP"/h{0,2,3}

  d_log "two loop devices over disjoint halves of one file: accepted"
  truncate -s $((32 * M)) "$D_TMP/d0"
  la=$(losetup -f --show --sizelimit $((16 * M)) "$D_TMP/d0") || d_fail "losetup a"
  D_LOOPS+=("$la")
  lb=$(losetup -f --show -o $((16 * M)) "$D_TMP/d0") || d_fail "losetup b"
  D_LOOPS+=("$lb")
  d_conf dj.conf dj 64K "$serve" "$la" "$lb"
  d_run dj.create d_ns create dj.conf
  [[ $D_RC -eq 0 ]] && d_ok "disjoint loops: create accepts them" ||
    d_bad "disjoint loops: create refused"
  if d_serve dj.serve dj.conf "$pidfile"; then
    d_ok "disjoint loops: served"
    d_stop "$D_SERVER_PID"
  else
    d_bad "disjoint loops: serve refused"
  fi
else
  d_log "(loop-device cases skipped: needs root and free loop devices)"
fi

d_log "one NBD export under two spellings"
truncate -s $((8 * M)) "$D_TMP/x" "$D_TMP/y"
d_nbdkit_start s -U "$D_TMP/s.sock" file "$D_TMP/x" || d_fail "nbdkit file x"
d_conf nb.conf nb 64K "$serve" "nbd+unix:///?socket=$D_TMP/s.sock" \
  "nbd+unix:///?socket=$D_TMP/./s.sock" "$D_TMP/y"
before=$(d_sums "$D_TMP/x" "$D_TMP/y")
d_run nb.create d_ns create nb.conf
d_expect_fail nb.create
d_expect_err nb.create "are the same NBD server"
d_same_sums nb.create "$before" "$D_TMP/x" "$D_TMP/y" && d_ok "nb.create: nothing written"
echo 'metadata = "none";' >>nb.conf
d_run nb.check d_ns check nb.conf
d_expect_fail nb.check
d_expect_err nb.check "member 0 (nbd+unix:///?socket=$D_TMP/s.sock) and member 1 (nbd+unix:///?socket=$D_TMP/./s.sock) are the same NBD server"

d_log "one NBD export over TCP as localhost and as 127.0.0.1"
port=$("$DAEMON_HELPER" free-port) || d_fail "free-port"
truncate -s $((8 * M)) "$D_TMP/w" "$D_TMP/z"
d_nbdkit_start w -i 127.0.0.1 -p "$port" file "$D_TMP/w" ||
  d_fail "nbdkit file w on TCP"
d_conf tcp.conf tcp 64K "$serve" "nbd://localhost:$port/" \
  "nbd://127.0.0.1:$port/" "$D_TMP/z"
echo 'metadata = "none";' >>tcp.conf
before=$(d_sums "$D_TMP/w" "$D_TMP/z")
refused_all tcp tcp.conf \
  "member 0 (nbd://localhost:$port/) and member 1 (nbd://127.0.0.1:$port/) are the same NBD server (tcp:local:$port)" \
  "$D_TMP/w" "$D_TMP/z"

d_log "two NBD servers exporting one file"
truncate -s $((8 * M)) "$D_TMP/x2" "$D_TMP/y2"
for s in t u; do
  d_nbdkit_start "$s" -U "$D_TMP/$s.sock" file "$D_TMP/x2" ||
    d_fail "nbdkit file x2 ($s)"
done
d_conf two.conf two 64K "$serve" "nbd+unix:///?socket=$D_TMP/t.sock" \
  "nbd+unix:///?socket=$D_TMP/u.sock" "$D_TMP/y2"
before=$(d_sums "$D_TMP/x2" "$D_TMP/y2")
d_run two.create d_ns create two.conf
d_expect_fail two.create
d_expect_err two.create "are the same device: read back"
d_same_sums two.create "$before" "$D_TMP/x2" "$D_TMP/y2" &&
  d_ok "two.create: every member restored"

d_done
