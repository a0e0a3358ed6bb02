#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# replace refuses as NEW a spare under another name and a removed member
# (issue 34, item 3), from the command and from the server alike: the
# config rewritten at the end would list one device twice, and the next
# serve refuse it.  Spare 0 is a file named in the config through a
# symlink, spare 1 an NBD export on a Unix socket, removed member 0 a
# file.  NEW: spare 1's URI with /./ in its socket path, a hard link to
# spare 0's file, removed member 0 by its path and by a hard link.  Each
# refusal names the config, NEW and what it is; every file behind the
# volume and the config stay byte for byte as they were (sha256).  A
# replace onto spare 1 named as the config names it still goes through.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init sha256sum

size=$((9 * M))
for f in m0 m1; do truncate -s "$size" "$D_TMP/$f"; done
for f in s0 s1 r0; do truncate -s "$size" "$D_TMP/$f"; done
ln -s "$D_TMP/s0" "$D_TMP/s0.link"
ln "$D_TMP/s0" "$D_TMP/s0.hard"
ln "$D_TMP/r0" "$D_TMP/r0.hard"
d_nbdkit_start s1 -U "$D_TMP/s1.sock" file "$D_TMP/s1" ||
  d_fail "nbdkit file s1"
s1_uri="nbd+unix:///?socket=$D_TMP/s1.sock"
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1"
rp_create
printf 'spares = [ "%s", "%s" ];\nremoved = [ "%s" ];\n' "$D_TMP/s0.link" \
  "$s1_uri" "$D_TMP/r0" >>"$RP_CONF"
rp_start vol
owned=("$D_TMP"/{m0,m1,s0,s1,r0} "$RP_CONF")
before=$(d_sums "${owned[@]}")

# refused LABEL WANT NEW: the command and the server's control socket
# refuse a replace of member 1 onto NEW, saying WANT; nothing written.
refused ()
{
  local label=$1 want=$2 new=$3
  d_run "$label" d_ns replace --force "$RP_CONF" 1 "$new"
  if [[ $D_RC -ne 0 ]] && grep -q -F -- "$want" "$D_TMP/$label.err"; then
    d_ok "$label: the command refuses it"
  else
    d_bad "$label: exit $D_RC, expected a refusal saying: $want"
  fi
  d_run "$label.ctl" rp_ctl send \
    "{\"op\": \"replace\", \"member\": 1, \"new\": \"$new\", \"force\": true}"
  if [[ $D_RC -ne 0 ]] && grep -q -F -- "$want" "$D_TMP/$label.ctl.out"; then
    d_ok "$label: the server refuses it"
  else
    d_bad "$label: the server: exit $D_RC, expected a refusal saying: $want"
  fi
  d_same_sums "$label" "$before" "${owned[@]}" &&
    d_ok "$label: nothing written"
}

C="$RP_CONF: NEW"
refused spare.uri_dot \
  "$C nbd+unix:///?socket=$D_TMP/./s1.sock is spare 1 ($s1_uri) under another name: the same NBD server" \
  "nbd+unix:///?socket=$D_TMP/./s1.sock"
refused spare.hardlink \
  "$C $D_TMP/s0.hard is spare 0 ($D_TMP/s0.link) under another name: the same file through another hard link" \
  "$D_TMP/s0.hard"
refused removed.same "$C $D_TMP/r0 is removed member 0 already" "$D_TMP/r0"
refused removed.hardlink \
  "$C $D_TMP/r0.hard is removed member 0 ($D_TMP/r0) under another name" \
  "$D_TMP/r0.hard"

d_run spare.as_named d_ns replace --wait "$RP_CONF" 1 "$s1_uri"
[[ $D_RC -eq 0 ]] && d_ok "a replace onto spare 1 named as the config names it" ||
  d_bad "a replace onto spare 1 as named: exit $D_RC"
rp_stop
d_done
