#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# End-to-end with block devices as members: loop devices over sparse files,
# one of them (when the kernel and losetup allow) with O_DIRECT and 4096-byte
# logical sectors.  Needs root; skips (77) otherwise.
#
# Mixed-size members (zones 3, 2 and 1 members wide), chunk 64K:
#   (a) nbdcopy random data into the volume; read it back through a fresh
#       read-only server; cmp.  The loop devices' contents are then checked
#       against an independent model of the md raid0 layout (oracle).
#       Then the same with a source that has holes, which nbdcopy writes
#       as NBD zero requests (the zero path on block devices).
#   (c) trim (fio --rw=trim) a large chunk-aligned range and a small one
#       that is not (only 4K-aligned: a 4K-sector member forbids less):
#       the backing files' allocation must drop, the large range must
#       read back as zeroes, everything outside both ranges must be intact.
#   (d) tests/integration/test_io with the loop devices as members, if CTest
#       passed its path in TEST_IO (not with --cache=: test_io has no such
#       option, the other variants run it).
# Equal-size members, default chunk (128K):
#   (b) nbdcopy random data in, stop the server, detach the loop devices,
#       and compare each backing file with the layout model and with the
#       plain "chunk k on member k mod N at (k div N) * chunk" arithmetic.
#
# Usage: blockdev_members.sh [--no-uring] [--cache=MODE]
#   --no-uring     serve with -D stripe.io_uring=0, and run test_io --no-uring
#   --cache=MODE   serve with cache=MODE (writeback, writethrough, direct)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib/e2e.sh"

e2e_parse_args "$@"

[[ $(id -u) -eq 0 ]] || e2e_skip "loop devices need root"
command -v losetup >/dev/null || e2e_skip "losetup (util-linux) is not installed"
command -v blockdev >/dev/null || e2e_skip "blockdev (util-linux) is not installed"
e2e_init
command -v nbdcopy >/dev/null || e2e_skip "nbdcopy (libnbd-bin) is not installed"
command -v nbdinfo >/dev/null || e2e_skip "nbdinfo (libnbd-bin) is not installed"
have_fio=false
if command -v fio >/dev/null && fio --enghelp=nbd >/dev/null 2>&1; then
  have_fio=true
fi

truncate -s 1M "$E2E_TMP/probe"
e2e_loop_attach probe "$E2E_TMP/probe" ||
  e2e_skip "losetup does not work here: $(cat "$E2E_TMP/losetup.err")"
e2e_loop_detach "$probe"

MiB=1048576
q () { printf '%q' "$1"; }     # quote a path for a client command

# make_members PREFIX SIZE...: sparse backing files PREFIX0.. and loop
# devices over them; member 1 gets O_DIRECT + 4K sectors if possible.
# Sets devs[], files[], devsizes[], params[] (file=DEV ...).
make_members ()
{
  local prefix=$1 i f dev
  shift
  devs=() files=() devsizes=() params=()
  for i in $(seq 0 $(( $# - 1 ))); do
    f=$prefix$i
    truncate -s "$(e2e_size "${@:i+1:1}")" "$f"
    dev=
    if [[ $i -eq 1 ]]; then
      e2e_loop_attach dev "$f" --direct-io=on --sector-size 4096 ||
        e2e_loop_attach dev "$f" --sector-size 4096 ||
        echo "note: no 4K-sector loop device here: $(cat "$E2E_TMP/losetup.err")"
    fi
    if [[ -z $dev ]]; then
      e2e_loop_attach dev "$f" ||
        e2e_fail "losetup $f: $(cat "$E2E_TMP/losetup.err")"
    fi
    files+=("$f"); devs+=("$dev"); params+=("file=$dev")
    devsizes+=("$(blockdev --getsize64 "$dev")")
  done
  for dev in "${devs[@]}"; do      # (losetup -l takes one device at a time)
    losetup -l -n -O NAME,SIZELIMIT,DIO,LOG-SEC,BACK-FILE "$dev"
  done
}

# expect_size CHUNK: the volume size by the layout model.
expect_size ()
{
  e2e_layout "$1" "${devsizes[@]}" | awk '$1 == "size" { print $2 }'
}

check_info ()                   # check_info NAME CHUNK: size, block size
{
  local name=$1 chunk=$2 want size minblk
  e2e_serve "$name" 'nbdinfo "$uri"' -r -- "${params[@]}" ||
    e2e_fail "$name: nbdinfo failed"
  want=$(expect_size "$chunk")
  size=$(awk '$1 == "export-size:" { print $2 }' "$E2E_TMP/$name.out")
  [[ $size == "$want" ]] || e2e_fail "$name: volume size $size, expected $want"
  # Local members take any offset (buffered I/O; with cache=direct an
  # unaligned request goes through the page cache): byte granularity, even
  # with a 4K-sector member.  (a) checks that it holds.
  minblk=$(awk '$1 == "block_size_minimum:" { print $2 }' "$E2E_TMP/$name.out")
  [[ $minblk == 1 ]] ||
    e2e_fail "$name: block_size_minimum $minblk, expected 1 (local members)"
  vol_size=$size
}

# copy_in NAME SRC, copy_out NAME DST
copy_in ()
{
  e2e_serve "$1" "nbdcopy --flush $(q "$2") \"\$uri\"" -- "${chunk_param[@]}" "${params[@]}" ||
    e2e_fail "$1: nbdcopy into the volume failed"
}
copy_out ()
{
  e2e_serve "$1" "nbdcopy \"\$uri\" $(q "$2")" -r -- "${chunk_param[@]}" "${params[@]}" ||
    e2e_fail "$1: nbdcopy out of the volume failed"
}

alloc_blocks ()                 # 512-byte blocks allocated to files[]
{
  sync -f "${files[0]}"         # let delayed allocation settle
  stat -c %b "${files[@]}" | awk '{ s += $1 } END { print s }'
}

# ---------------------------------------------------------------------------
e2e_log "mixed-size loop devices, chunk 64K"
chunk=$(( 64 * 1024 ))
chunk_param=(chunk=64K)
make_members "$E2E_TMP/mixed" 24M+4K 16M+8K 20M+1536
check_info info-mixed "$chunk"
echo "volume size $vol_size"

e2e_log "(a) nbdcopy random data in and out"
head -c "$vol_size" /dev/urandom >"$E2E_TMP/src"
copy_in copyin "$E2E_TMP/src"
copy_out copyout "$E2E_TMP/out"
cmp "$E2E_TMP/src" "$E2E_TMP/out" || e2e_fail "(a) data read back differs"
echo "(a) $vol_size bytes read back as written"

e2e_log "(a) byte granularity: unaligned reads and writes, 4K-sector member included"
e2e_serve unaligned "/usr/bin/python3 $(q "$(dirname "$(realpath "$0")")/../lib/unaligned_io.py") \"\$uri\" $(q "$E2E_TMP/src") $chunk" \
  -- "${chunk_param[@]}" "${params[@]}" ||
  e2e_fail "(a) unaligned reads and writes failed"

e2e_log "(a) oracle: the loop devices against the layout model"
specs=()
for i in "${!devs[@]}"; do specs+=("${devs[i]}:${devsizes[i]}:${devs[i]}"); done
e2e_oracle_check "$E2E_TMP/src" "$chunk" "${specs[@]}" ||
  e2e_fail "(a) members do not hold what the md raid0 layout says"

e2e_log "(a) a source with holes: zero requests"
cp "$E2E_TMP/src" "$E2E_TMP/src2"
hole ()                         # hole OFFSET LENGTH (4K-aligned) in src2
{
  dd if=/dev/zero of="$E2E_TMP/src2" bs=4096 seek=$(( $1 / 4096 )) \
     count=$(( $2 / 4096 )) conv=notrunc status=none
  # A real hole, so that nbdcopy sends a zero request rather than data.
  fallocate --punch-hole --offset "$1" --length "$2" "$E2E_TMP/src2" 2>/dev/null ||
    echo "note: cannot punch holes here; zeroes go as data"
}
# Chunk-aligned; not chunk-aligned; across the zone 0/1 (48M) and zone 1/2
# (56M) borders.
hole $(( 4 * MiB )) $(( 8 * MiB ))
hole $(( 13 * MiB + 20480 )) $(( 300 * 1024 ))
hole $(( 46 * MiB + 4096 )) $(( 3 * MiB ))
hole $(( 54 * MiB )) $(( 4 * MiB ))
copy_in copyin-holes "$E2E_TMP/src2"
copy_out copyout-holes "$E2E_TMP/out"
cmp "$E2E_TMP/src2" "$E2E_TMP/out" || e2e_fail "(a) data with holes read back differs"
echo "(a) holes read back as zeroes, data intact"

# ---------------------------------------------------------------------------
if $have_fio; then
  e2e_log "(c) trim"
  big_off=$(( 24 * MiB )) big_len=$(( 32 * MiB ))
  # (4K-aligned: with a 4K-sector member, libnbd refuses anything less.)
  un_off=$(( 1 * MiB + 3 * chunk + 8192 )) un_len=$(( 3 * chunk + 12288 ))
  before=$(alloc_blocks)
  trim_cmd="fio --name=trim-big --ioengine=nbd --uri=\"\$uri\" --rw=trim \
    --bs=1M --offset=$big_off --size=$big_len --output-format=terse \
    && fio --name=trim-unaligned --ioengine=nbd --uri=\"\$uri\" --rw=trim \
    --bs=$un_len --offset=$un_off --size=$un_len --output-format=terse"
  e2e_serve trim "$trim_cmd" -- "${chunk_param[@]}" "${params[@]}" ||
    e2e_fail "(c) fio trim failed"
  after=$(alloc_blocks)
  echo "(c) backing files: $before blocks allocated before, $after after"
  (( before - after >= big_len / 512 / 2 )) ||
    e2e_fail "(c) trimming $big_len bytes freed only $(( (before - after) * 512 )) bytes"

  copy_out copyout-trim "$E2E_TMP/out"
  # What it should read: src2, the big range zero; the unaligned range may
  # read as anything (NBD trim), so take it from what was read.
  cp "$E2E_TMP/src2" "$E2E_TMP/expect"
  dd if=/dev/zero of="$E2E_TMP/expect" bs=1M seek=$(( big_off / MiB )) \
     count=$(( big_len / MiB )) conv=notrunc status=none
  dd if="$E2E_TMP/out" of="$E2E_TMP/expect" bs=512 skip=$(( un_off / 512 )) \
     seek=$(( un_off / 512 )) count=$(( un_len / 512 )) conv=notrunc status=none
  cmp "$E2E_TMP/expect" "$E2E_TMP/out" ||
    e2e_fail "(c) after trim: the trimmed range is not zero, or data outside it changed"
  echo "(c) trimmed range reads as zeroes, data around both ranges intact"
else
  echo "(c) SKIPPED: fio with the nbd ioengine is not available"
fi

# ---------------------------------------------------------------------------
e2e_log "(d) test_io with loop device members"
if [[ " ${E2E_PLUGIN_PARAMS[*]} " == *" cache="* ]]; then
  echo "(d) SKIPPED: test_io has no cache mode; the other variants run it"
elif [[ -z ${TEST_IO:-} ]]; then
  echo "(d) SKIPPED: TEST_IO is not set (test_io was not built)"
elif [[ ! -x $TEST_IO ]]; then
  echo "(d) SKIPPED: TEST_IO=$TEST_IO is missing or not executable"
else
  args=()
  for dev in "${devs[@]}"; do args+=(--member "$dev"); done
  args+=(--chunk "$chunk")
  $E2E_NO_URING && args+=(--no-uring)
  echo "-- $TEST_IO ${args[*]}"
  rc=0
  "$TEST_IO" "${args[@]}" || rc=$?
  case $rc in
    0) echo "(d) test_io passed" ;;
    77) echo "(d) SKIPPED: test_io skipped itself (status 77)" ;;
    *) e2e_fail "(d) test_io failed with status $rc" ;;
  esac
fi

for dev in "${devs[@]}"; do e2e_loop_detach "$dev"; done

# ---------------------------------------------------------------------------
e2e_log "(b) equal-size loop devices, default chunk: oracle on the backing files"
chunk=$(( 128 * 1024 ))
chunk_param=()                  # the default, 128K
make_members "$E2E_TMP/equal" 16M 16M 16M
check_info info-equal "$chunk"
head -c "$vol_size" /dev/urandom >"$E2E_TMP/src"
copy_in copyin-equal "$E2E_TMP/src"
for dev in "${devs[@]}"; do e2e_loop_detach "$dev"; done

specs=()
for i in "${!files[@]}"; do specs+=("${files[i]##*/}:${devsizes[i]}:${files[i]}"); done
e2e_oracle_check "$E2E_TMP/src" "$chunk" "${specs[@]}" ||
  e2e_fail "(b) backing files do not hold what the md raid0 layout says"

# The same with nothing but the textbook formula, on a few chunks.
n=${#files[@]}
last=$(( vol_size / chunk - 1 ))
for k in 0 1 2 3 4 5 7 $(( last / 2 )) $(( last - 1 )) "$last"; do
  m=$(( k % n )) moff=$(( k / n * chunk ))
  cmp -n "$chunk" -i "$(( k * chunk )):$moff" "$E2E_TMP/src" "${files[m]}" ||
    e2e_fail "(b) chunk $k is not at member $m offset $moff"
done
echo "(b) chunks 0..5, 7, $(( last / 2 )), $(( last - 1 )), $last at member k mod $n, offset (k div $n) * chunk"

e2e_log "PASS"
