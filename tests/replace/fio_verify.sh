#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A whole replace under fio: 4 jobs (4 connections, multi-conn) write
# random 16K blocks with crc32c verify headers over a 3-member volume,
# verifying as they go (verify_backlog) and at the end, with a flush every
# 32 writes, while member 1 is copied to NEW (rate-limited so that the
# copy lasts a few seconds; fio's writes are rate-limited to outlast it).
# fio must pass, and still be running when the replace is done.
#
# Then: the config names NEW; NEW's header (inspect) has the volume's
# array UUID and index 1, a member UUID of its own and flags 0; the old
# member's header has flags 0x1 (replaced); a config naming the old member
# is refused by check and serve ("was replaced").  The old member file is
# deleted, the volume served again (nbdstripe serve) with only the new
# member, and fio --verify_only (same jobs, same seeds) finds every block.
#
# --larger-new: NEW is 4 MiB larger than the old member (a file).
source "$(dirname "$0")/../lib/replace.sh" || exit 1
rp_init fio

extra=0
[[ ${1:-} == --larger-new ]] && extra=$((4 * M))

size=$((24 * M))
for i in 0 1 2; do truncate -s "$size" "$D_TMP/m$i"; done
truncate -s $((size + extra)) "$D_TMP/new"
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
rp_start vol

uuid=$(rp_header_field "$D_TMP/m1" "array UUID")
old_member=$(rp_header_field "$D_TMP/m1" "member")
[[ -n $uuid && $old_member == "1 of 3 "* ]] || d_fail "m1's header: '$uuid' '$old_member'"

# 4 jobs of 12 MiB each (volume: 3 x 23 MiB), fio's nbd engine: one
# connection a job.
cat >"$D_TMP/job.fio" <<EOF
[global]
ioengine=nbd
uri=$RP_URI
rw=randwrite
bs=16k
size=12m
offset_increment=12m
numjobs=4
verify=crc32c
verify_backlog=64
do_verify=1
verify_fatal=1
fsync=32
rate=2m
randrepeat=1
[w]
EOF

d_log "fio writing, verifying, and a replace meanwhile"
fio --output="$D_TMP/fio.out" "$D_TMP/job.fio" >"$D_TMP/fio.stdout" 2>&1 &
fio_pid=$!
# The replace starts once every job has written (4 connections busy).
rp_ctl until 'all(m["ops"]["write"]["requests"] >= 8 for m in s["members"])' 30 >/dev/null ||
  d_fail "fio did not start writing"
d_run replace d_ns replace --rate 6M "$RP_CONF" 1 "$D_TMP/new"
[[ $D_RC -eq 0 ]] || d_fail "replace did not start"
rp_wait copying --state copying --copied 1 || d_bad "the copy did not start"
rp_wait done --state done --deadline 60 || d_fail "the replace did not end well"
if kill -0 "$fio_pid" 2>/dev/null; then
  d_ok "fio was still running when the replace was done"
else
  d_bad "fio ended before the replace: its I/O did not span the copy"
fi
[[ $(rp_json done .bytes_copied) == $((size - M)) ]] ||
  d_bad "bytes_copied $(rp_json done .bytes_copied), expected $((size - M))"
[[ $(rp_json done .unreadable) == "[]" ]] || d_bad "unreadable ranges reported"
[[ $(rp_json done .config_updated) == true ]] || d_bad "config_updated is not true"
fio_rc=0
wait "$fio_pid" || fio_rc=$?
if [[ $fio_rc -eq 0 ]] && grep -q "err= 0" "$D_TMP/fio.out"; then
  d_ok "fio: writes and verify across the replace passed"
else
  d_bad "fio failed (exit $fio_rc)"
  cat "$D_TMP/fio.out" "$D_TMP/fio.stdout" >&2
fi

d_log "the config, the headers"
grep -q -F "\"$D_TMP/new\"" "$RP_CONF" && ! grep -q -F "\"$D_TMP/m1\"" "$RP_CONF" ||
  d_bad "the config does not name the new member in place of m1"
[[ $(rp_header_field "$D_TMP/new" "array UUID") == "$uuid" ]] ||
  d_bad "new: array UUID $(rp_header_field "$D_TMP/new" "array UUID"), expected $uuid"
new_member=$(rp_header_field "$D_TMP/new" "member")
[[ $new_member == "1 of 3 "* ]] || d_bad "new: member '$new_member', expected 1 of 3"
[[ ${new_member#* (UUID } != "${old_member#* (UUID }" ]] ||
  d_bad "new: the same member UUID as the old member"
[[ $(rp_header_field "$D_TMP/new" "format") == "version 2, flags 0" ]] ||
  d_bad "new: format $(rp_header_field "$D_TMP/new" "format")"
[[ $(rp_header_field "$D_TMP/m1" "format") == "version 2, flags 0x1"* ]] ||
  d_bad "old: format '$(rp_header_field "$D_TMP/m1" "format")', expected flags 0x1"
d_ok "headers: new $new_member, old $(rp_header_field "$D_TMP/m1" "format")"
rp_stop

d_log "a config naming the old member is refused"
sed "s|\"$D_TMP/new\"|\"$D_TMP/m1\"|" "$RP_CONF" >"$D_TMP/old.conf"
d_run check_old d_ns check "$D_TMP/old.conf"
d_expect_fail check_old && d_expect_err check_old "was replaced"
d_serve_refused serve_old "$D_TMP/old.conf" "$RP_PIDFILE"
d_expect_err serve_old "was replaced"

d_log "served again with only the new member: fio --verify_only"
rm -f "$D_TMP/m1"
d_run check d_ns check "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "check of the config naming the new member failed"
d_serve serve "$RP_CONF" "$RP_PIDFILE" || d_fail "serve failed"
if fio --output="$D_TMP/fio2.out" --verify_only "$D_TMP/job.fio" \
     >"$D_TMP/fio2.stdout" 2>&1 && grep -q "err= 0" "$D_TMP/fio2.out"; then
  d_ok "fio --verify_only after the restart: every block verified"
else
  d_bad "fio --verify_only failed after the restart"
  cat "$D_TMP/fio2.out" "$D_TMP/fio2.stdout" >&2
fi
d_stop "$D_SERVER_PID"
d_done
