#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A volume whose members are NBD exports (issue 7), served by stock
# `nbdkit file` over backing files in the test directory, mixed with a
# local member:
#
#   member 0  nbd+unix:///?socket=...  backing file b0
#   member 1  a local file             m1
#   member 2  nbd://127.0.0.1:PORT/    backing file b2 (TCP, a free port)
#   member 3  nbds+unix://nbdstripe@/?socket=...&tls-psk-file=...
#                                      backing file b3: TLS with a
#                                      pre-shared key (where nbdkit has
#                                      TLS), behind nbdkit's log filter
#                                      (what create sent it)
#
# create: each backing file (read directly) holds the header at offset 0
# as the format says, field by field and CRC32C (as oracle.sh), with one
# array UUID; member 3's server got exactly one write, of 4096 bytes at 0,
# then a flush; inspect of a URI (and --json) shows the header; check
# passes.  serve: data written with nbdcopy lands in the backing files
# where the layout says (chunk k on member k mod 4 at 1 MiB + (k div 4) *
# chunk) and reads back after a restart.  create again is refused naming
# the URIs.  Members 0 and 2 swapped: check and serve refuse, giving the
# right order with the URIs; no backing file changes.  create --force
# --discard trims the remote data areas (they read as zeros).
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo od cmp setsid sha256sum
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"
nbdkit --filter=log null --dump-plugin >/dev/null 2>&1 ||
  d_skip "nbdkit's log filter is not installed"

K=1024 M=$((1024 * 1024))
N=4 chunk=$((64 * K)) doff=$M
usable=$((2 * M))
msize=$((doff + usable + 5000)) # + a tail shorter than a chunk
name=remote-vol
for f in b0 m1 b2 b3; do truncate -s "$msize" "$D_TMP/$f"; done
files=("$D_TMP/b0" "$D_TMP/m1" "$D_TMP/b2" "$D_TMP/b3")

r_unix s0 file "$D_TMP/b0"
u0=$R_URI
r_tcp s2 file "$D_TMP/b2"
u2=$R_URI
# Member 3 over TLS (a pre-shared key) where nbdkit has TLS.
tls=()
if nbdkit --dump-config 2>/dev/null | grep -q -x 'tls=yes'; then
  printf 'nbdstripe:%s\n' "$(od -An -v -t x1 -N 32 /dev/urandom | tr -d ' \n')" >"$D_TMP/keys.psk"
  tls=(--tls=require "--tls-psk=$D_TMP/keys.psk")
fi
r_unix s3 "${tls[@]}" --filter=log file "$D_TMP/b3" "logfile=$D_TMP/s3.nbdlog"
u3=$R_URI
if [[ ${#tls[@]} -gt 0 ]]; then
  u3="nbds+unix://nbdstripe@/?socket=$D_TMP/s3.sock&tls-psk-file=$D_TMP/keys.psk"
else
  d_log "(member 3 without TLS: nbdkit was built without it)"
fi
members=("$u0" "$D_TMP/m1" "$u2" "$u3")
d_log "members: ${members[*]}"

sock=$D_TMP/vol.sock pidfile=$D_TMP/vol.pid
uri="nbd+unix:///?socket=$sock"
serve="socket = \"$sock\"; pidfile = \"$pidfile\";"
d_conf vol.conf "$name" 64K "$serve" "${members[@]}"

d_log "create"
d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
uuid=
for i in 0 1 2 3; do
  r_header_ok "member $i (${members[i]})" "${files[i]}" "$i" "$N" "$chunk" \
    "$doff" "$usable" "$name"
  [[ -n $uuid ]] || uuid=$R_UUID
  [[ $R_UUID == "$uuid" && ! $uuid =~ ^0+$ ]] ||
    d_bad "member $i: array UUID $R_UUID, member 0 has $uuid"
  d_map_check "member $i" "${files[i]}" $((N * usable)) "$usable" "$doff"
done
[[ $D_FAILS -eq 0 ]] && d_ok "4 headers as documented, read from the backing files"

if [[ ${#tls[@]} -gt 0 ]]; then
  grep -q ' Connect .* tls=1 ' "$D_TMP/s3.nbdlog" &&
    ! grep -q ' Connect .* tls=0 ' "$D_TMP/s3.nbdlog" ||
    d_bad "member 3's server saw a connection without TLS"
fi
# Three writes, each flushed: the allocation map (all in use), the
# header marked creating, then the final one once every member has the
# first (a create cut short is told).
writes=$(grep -c ' Write id=' "$D_TMP/s3.nbdlog")
[[ $writes -eq 3 ]] || d_bad "member 3's server got $writes writes, expected 3 (the allocation map, then the header: creating, final)"
[[ $(grep -c ' Write id=[0-9]* offset=0x0 count=0x1000 ' "$D_TMP/s3.nbdlog") -eq 2 ]] ||
  d_bad "member 3's server did not get two 4096-byte writes at offset 0"
[[ $(sed -n '/ Write id=/,$p' "$D_TMP/s3.nbdlog" | grep -c ' Flush id=') -ge 2 ]] &&
  d_ok "member 3: the header was written twice (4096 bytes at 0), each flushed" ||
  d_bad "member 3's server got fewer than 2 flushes after the first header write"

d_log "inspect a URI"
d_run inspect d_ns inspect "$u2"
[[ $D_RC -eq 0 ]] || d_bad "inspect $u2: exit $D_RC"
grep -q -F "$u2:" "$D_TMP/inspect.out" && grep -q "member: *2 of 4" "$D_TMP/inspect.out" &&
  grep -q "volume: *$name" "$D_TMP/inspect.out" ||
  d_bad "inspect $u2 does not say member 2 of 4 of $name"
d_run inspect.json d_ns inspect --json "$u0" "$D_TMP/m1"
[[ $D_RC -eq 0 ]] || d_bad "inspect --json: exit $D_RC"
if command -v jq >/dev/null; then
  [[ $(jq -r '.members as $m | $m[0].path, $m[0].member_index,
               $m[1].member_index, $m[0].array_uuid == $m[1].array_uuid' \
         "$D_TMP/inspect.json.out" | tr '\n' ' ') == "$u0 0 1 true " ]] ||
    d_bad "inspect --json: wrong path, index or UUID"
fi

d_run check d_ns check vol.conf
[[ $D_RC -eq 0 ]] && d_ok "check passes" || d_bad "check failed"
grep -q "can be served" "$D_TMP/check.out" || d_bad "check does not say the volume can be served"

d_log "serve: data lands where the layout says"
d_serve serve vol.conf "$pidfile" || d_fail "serve failed"
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
[[ $size -eq $((N * usable)) ]] || d_fail "volume size $size, expected $((N * usable))"
d_random src "$size"
nbdcopy src "$uri" || d_fail "nbdcopy src -> volume"
d_stop "$D_SERVER_PID"
r_layout_ok serve src "$N" "$doff" "$usable" "$chunk" "${files[@]}"
for i in 0 1 2 3; do
  tail_off=$((doff + usable))
  cmp -s -n $((msize - tail_off)) -i "$tail_off:0" "${files[i]}" /dev/zero ||
    d_bad "member $i: the tail past the last whole chunk was written"
done

d_serve serve.again vol.conf "$pidfile" || d_fail "serve (again) failed"
nbdcopy "$uri" back || d_fail "nbdcopy volume -> back"
d_stop "$D_SERVER_PID"
cmp -s src back && d_ok "the volume reads back as written after a restart" ||
  d_bad "the volume does not read back as written"

d_log "create again is refused"
before=$(d_sums "${files[@]}")
d_run again d_ns create vol.conf
d_expect_fail again
for i in 0 1 2 3; do
  d_expect_err again "member $i (${members[i]}): is already member $i of nbdstripe volume '$name'"
done
d_same_sums again "$before" "${files[@]}" && d_ok "again: nothing written"

d_log "members 0 and 2 swapped"
d_conf swapped.conf "$name" 64K "$serve" "$u2" "$D_TMP/m1" "$u0" "$u3"
d_run swapped.check d_ns check swapped.conf
d_expect_fail swapped.check
d_expect_err swapped.check \
  "member 0 ($u2): is member 2 of '$name' (wrong order)" \
  "member 2 ($u0): is member 0 of '$name' (wrong order)" \
  "the right order is: members = [ \"$u0\", \"$D_TMP/m1\", \"$u2\", \"$u3\" ];"
d_serve_refused swapped.serve swapped.conf "$pidfile"
d_expect_err swapped.serve "the right order is: members = [ \"$u0\","
d_same_sums swapped "$before" "${files[@]}" && d_ok "swapped: refused, nothing written"

d_log "create --force --discard: NBD trims of the data areas"
d_run discard d_ns create --force --discard vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create --force --discard failed"
for i in 0 1 2 3; do
  cmp -s -n "$usable" -i "$doff:0" "${files[i]}" /dev/zero ||
    d_bad "member $i: the data area was not discarded (nbdkit file punches holes)"
  r_header_ok "member $i after --discard" "${files[i]}" "$i" "$N" "$chunk" \
    "$doff" "$usable" "$name"
  [[ $R_UUID != "$uuid" ]] || d_bad "member $i: the array UUID did not change"
done
grep -q ' Trim id=' "$D_TMP/s3.nbdlog" && d_ok "discard: the data areas read as zeros; new headers" ||
  d_bad "member 3's server got no trim"
d_done
