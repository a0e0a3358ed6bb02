#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# End-to-end data integrity with fio's nbd engine.
#
# A 4-member volume with members of mixed sizes (so md raid0 zones: 4, 3
# and 2 members wide) is served by nbdkit.  For each of three I/O patterns
# (4K-256K blocks; 512-byte-granular blocks with flushes; 12K-2M blocks):
#   1. fio writes the whole volume with random offsets and random block
#      sizes, 2 jobs on disjoint halves, iodepth 32, crc32c + header
#      verification (do_verify=1, verify_fatal=1);
#   2. the server is stopped; a fresh, read-only server is started and fio
#      replays the same workload with verify_only=1: every block must come
#      back as written;
# then the member files are compared with an independent model of the md
# raid0 layout (fio sees only that data comes back, not where it lies);
# and, as a negative control, step 2 against a server given a different
# chunk size must FAIL (proves that the verification can see a wrong
# mapping).
#
# Usage: fio_verify.sh [--no-uring] [--cache=MODE]
#   --no-uring     serve with -D stripe.io_uring=0 (the portable I/O path)
#   --cache=MODE   serve with cache=MODE (writeback, writethrough, direct)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib/e2e.sh"

e2e_parse_args "$@"

e2e_init
command -v fio >/dev/null || e2e_skip "fio is not installed"
fio --enghelp=nbd >/dev/null 2>&1 || e2e_skip "this fio has no nbd ioengine"
command -v nbdinfo >/dev/null || e2e_skip "nbdinfo (libnbd-bin) is not installed"

chunk=64K
chunk_bytes=$(e2e_size "$chunk")
member_sizes=(64M 48M+12K 64M 40M+4K)

params=("chunk=$chunk")
sizes=()
for i in "${!member_sizes[@]}"; do
  f=$E2E_TMP/member$i
  sizes+=("$(e2e_size "${member_sizes[i]}")")
  truncate -s "${sizes[i]}" "$f"
  params+=("file=$f")
done
expect_size=$(e2e_layout "$chunk_bytes" "${sizes[@]}" | awk '$1 == "size" { print $2 }')

e2e_log "volume: chunk $chunk, members ${member_sizes[*]}, expected size $expect_size"
e2e_serve size 'nbdinfo --size "$uri"' -- "${params[@]}" ||
  e2e_fail "nbdinfo --size failed"
size=$(tail -n 1 "$E2E_TMP/size.out")
[[ $size -eq $expect_size ]] ||
  e2e_fail "volume size $size, expected $expect_size (sum of members rounded to chunks)"

half=$(( size / 2 ))
(( half % 4096 == 0 )) || e2e_fail "test setup: half the volume is not 4K-aligned"

# Options common to writing and verifying: the workload must be the same
# for verify_only to replay it (fio seeds its generators from the job, so
# randrepeat=1 makes offsets and sizes reproducible).  Each job writes its
# own half of the volume (offset_increment), so no two writes overlap and
# the random map gives every block exactly one write.
fio_common="--name=stripe --ioengine=nbd --uri=\"\$uri\" --rw=randwrite \
 --numjobs=2 --size=$half --offset_increment=$half --iodepth=32 \
 --randrepeat=1 --verify=crc32c --verify_fatal=1 --group_reporting \
 --verify_state_save=0 --output-format=normal,terse --terse-version=3"

patterns=(
  "--bsrange=4k-256k"
  # Sub-4K blocks at 512-byte granularity, and flushes now and then.
  "--bsrange=512-64k --fsync=32"
  # Large requests spanning many chunks, members and zone boundaries.
  "--bsrange=12k-2m --randseed=20240601"
)

# fio_result NAME: "ERROR READ_KB WRITE_KB" from the terse line of a run.
fio_result ()
{
  awk -F';' '$1 == "3" && $2 ~ /^fio-/ { print $5, $6, $47; found = 1 }
             END { if (!found) print "none 0 0" }' "$E2E_TMP/$1.out"
}

# fio_check NAME STATUS: fail unless fio succeeded and verified cleanly.
fio_check ()
{
  local name=$1 status=$2
  [[ $status -eq 0 ]] || e2e_fail "$name: fio (or the server) failed with status $status"
  if grep -q '^verify: ' "$E2E_TMP/$name.out" "$E2E_TMP/$name.err"; then
    e2e_fail "$name: fio reported verification errors"
  fi
}

for p in "${!patterns[@]}"; do
  pat=${patterns[p]}

  e2e_log "pattern $p ($pat): write + verify"
  rc=0
  e2e_serve "write$p" "fio $fio_common $pat --do_verify=1" -- "${params[@]}" || rc=$?
  fio_check "write$p" "$rc"
  read -r err rkb wkb < <(fio_result "write$p")
  [[ $err == 0 ]] || e2e_fail "write$p: no clean fio result (error field: $err)"
  # The random map gives up on the last few odd-sized holes; most of the
  # volume must have been written all the same.
  (( wkb * 1024 >= size * 9 / 10 )) ||
    e2e_fail "write$p: fio wrote only ${wkb} KiB of $(( size / 1024 )) KiB"
  (( rkb == wkb )) ||
    e2e_fail "write$p: fio verified $rkb KiB but wrote $wkb KiB"

  e2e_log "pattern $p: verify only, fresh read-only server"
  rc=0
  e2e_serve "verify$p" "fio $fio_common $pat --verify_only=1" -r -- "${params[@]}" || rc=$?
  fio_check "verify$p" "$rc"
  read -r err vkb _ < <(fio_result "verify$p")
  [[ $err == 0 ]] || e2e_fail "verify$p: no clean fio result (error field: $err)"
  (( vkb == wkb )) ||
    e2e_fail "verify$p: fio verified $vkb KiB, but $wkb KiB were written"
  echo "pattern $p: wrote and verified $wkb KiB, verified again after restart"
done

# The members against an independent model of the md raid0 layout (fio
# checks only that what it reads is what it wrote; this checks where it is).
e2e_log "oracle: the member files against the layout model"
e2e_serve copyout "nbdcopy \"\$uri\" $(printf %q "$E2E_TMP/volume")" -r -- "${params[@]}" ||
  e2e_fail "nbdcopy out of the volume failed"
specs=()
for i in "${!sizes[@]}"; do specs+=("member$i:${sizes[i]}:$E2E_TMP/member$i"); done
e2e_oracle_check "$E2E_TMP/volume" "$chunk_bytes" "${specs[@]}" ||
  e2e_fail "the members do not hold what the md raid0 layout says"
rm -f "$E2E_TMP/volume"

# Negative control: the same data read through a different chunk size
# must not verify.  The last pattern's data is on the members.
e2e_log "negative control: verify only with chunk=128K must fail"
wrong=("chunk=128K" "${params[@]:1}")
rc=0
e2e_serve "control" "fio $fio_common ${patterns[-1]} --verify_only=1" -r -- "${wrong[@]}" \
  >/dev/null 2>&1 || rc=$?
if [[ $rc -eq 0 ]] || ! grep -q '^verify: ' "$E2E_TMP/control.out" "$E2E_TMP/control.err"; then
  e2e_fail "control: verification passed through a wrong layout; the check is blind"
fi
echo "control: fio detected the wrong layout (status $rc), as it should"

e2e_log "PASS"
