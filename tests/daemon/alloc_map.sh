#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The allocation map as a user meets it (include/alloc.h, issue 36):
#
#   - create writes one, every region in use; status says so;
#   - a trim of the whole volume frees it, four 64K writes mark four
#     regions: status --json's allocation_map.bytes_in_use is 256 KiB,
#     block status calls the rest a hole that reads as zeros, and the
#     member files lost their blocks (holes punched);
#   - a scrub reads only what is in use (bytes_read 256K, bytes_free the
#     rest);
#   - replace --dry-run counts the bytes in use of the member only;
#   - a volume made before maps (its headers' map fields zeroed here, the
#     CRC made again: what an older nbdstripe wrote) gets one when served
#     writable: every region in use, on every member, named by inspect,
#     and the data as it was;
#   - on loop devices (block devices: no SEEK_DATA), a trimmed volume a
#     16th written, replaced onto a loop device over a file full of 0xaa:
#     the free places reach NEW as discards, not as writes (the device's
#     own counters), its file ends as sparse as the data, and every byte
#     of it, read directly, is the data the layout puts there or zero;
#   - on NBD members without a fast zero (nbdkit's file plugin), a trim
#     of everything frees every region, since block status then says
#     zeros; behind the noextents filter it frees none;
#   - an md volume has none: status says so, and a scrub skips the member
#     files' holes (bytes_free) all the same.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo jq
PY=/usr/bin/python3
$PY -c 'import nbd' 2>/dev/null || d_skip "no libnbd python module"

M=$((1024 * 1024))
K=1024
data=$((32 * M))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2")
for f in "${m[@]}"; do truncate -s $((M + data)) "$f"; done
conf=$D_TMP/vol.conf sock=$D_TMP/vol.sock pid=$D_TMP/vol.pid
uri="nbd+unix:///?socket=$sock"
d_conf "$conf" mapvol 64K "socket = \"$sock\"; pidfile = \"$pid\";" "${m[@]}"
printf 'health = { status_file = "%s"; interval = 1; };\n' \
  "$D_TMP/vol.status.json" >>"$conf"
size=$((3 * data))

d_run create d_ns create "$conf"
[[ $D_RC -eq 0 ]] || d_fail "create"
d_serve serve "$conf" "$pid" || d_fail "serve"

# in_use: the server's bytes_in_use.
in_use () { d_ns status --json "$conf" | jq -r '.status.allocation_map.bytes_in_use'; }
[[ $(in_use) == "$size" ]] && d_ok "created: every region in use" ||
  d_bad "created: bytes_in_use $(in_use), expected $size"
d_run status d_ns status "$conf"
grep -q "Allocation map : 96MiB in use, .* free (regions of 64KiB)" \
  "$D_TMP/status.out" && d_ok "status shows the map" ||
  d_bad "status: no 'Allocation map' line as expected: $(grep -i alloc "$D_TMP/status.out")"

d_log "trim everything, write 4 regions"
"$PY" - "$uri" "$D_TMP/written" <<'EOF' || d_fail "the client failed"
import nbd, os, sys
h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_uri(sys.argv[1])
size = h.get_size()
h.trim(size, 0)
offs = [0, 5 * 65536, 1234 * 65536, size - 65536]
with open(sys.argv[2], "wb") as f:
    for o in offs:
        d = os.urandom(65536)
        h.pwrite(d, o)
        f.write(d)
h.flush()
runs = []
def cb(meta, off, ents, err):
    for i in range(0, len(ents), 2):
        runs.append((ents[i], ents[i + 1]))
    return 0
pos = 0
while pos < size:
    before = len(runs)
    h.block_status(size - pos, pos, cb)
    pos += sum(l for l, _ in runs[before:])
# Every written region data, every other byte a hole reading as zeros.
at, bad = 0, 0
for length, flags in runs:
    for o in range(at, at + length, 65536):
        want = 0 if o in offs else 3
        if (flags & 3) != want:
            bad += 1
    at += length
print("block status runs", len(runs), "bad", bad)
sys.exit(1 if bad else 0)
EOF
d_ok "block status: the 4 written regions data, the rest holes reading as zeros"
[[ $(in_use) == $((4 * 64 * K)) ]] && d_ok "4 regions in use (256 KiB)" ||
  d_bad "after trim + 4 writes: bytes_in_use $(in_use), expected $((256 * K))"
for f in "${m[@]}"; do
  a=$(( $(stat -c '%b * %B' "$f") ))
  ((a <= M + 512 * K)) || d_bad "$f: $a bytes allocated after the trim: holes not punched"
done

d_log "scrub reads what is in use"
d_run scrub d_ns scrub --wait --json "$conf"
[[ $D_RC -eq 0 ]] || d_bad "scrub failed"
jq -e --argjson used $((256 * K)) --argjson total "$size" \
  '.scrub.bytes_read == $used and .scrub.bytes_free == $total - $used
   and .scrub.bytes_done == $total' "$D_TMP/scrub.out" >/dev/null &&
  d_ok "scrub: 256 KiB read, the rest free" ||
  d_bad "scrub: $(jq -c '.scrub | {bytes_read, bytes_free, bytes_done}' "$D_TMP/scrub.out")"

d_log "replace --dry-run: the bytes in use"
truncate -s $((M + data)) "$D_TMP/new"
d_run dry d_ns replace --dry-run --json "$conf" 1 "$D_TMP/new"
# Member 1 holds chunks 1, 4, 7...: region 5 (chunk 5: member 2), 1234
# (member 1, 1234 mod 3 = 1), the last one (chunk 1535: member 2), 0
# (member 0): one 64K region on member 1.
jq -e '.bytes_to_copy == 65536' "$D_TMP/dry.out" >/dev/null &&
  d_ok "replace --dry-run: 64 KiB to copy" ||
  d_bad "replace --dry-run: bytes_to_copy $(jq .bytes_to_copy "$D_TMP/dry.out"), expected 65536"
d_stop "$D_SERVER_PID"

d_log "a volume made before maps gets one when served"
for f in "${m[@]}"; do
  # The map's fields zeroed, the CRC made again (header.h).
  dd if=/dev/zero of="$f" bs=1 seek=4056 count=24 conv=notrunc status=none
  crc=$("$DAEMON_HELPER" crc32c "$f" 0 4092)
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((crc & 255)) \
    $((crc >> 8 & 255)) $((crc >> 16 & 255)) $((crc >> 24 & 255)))" |
    dd of="$f" bs=1 seek=4092 conv=notrunc status=none
  [[ $(d_u32 "$f" 4056) == 0 ]] || d_fail "$f: map fields not cleared"
done
d_run inspect.old d_ns inspect "${m[0]}"
grep -q "allocation map: none" "$D_TMP/inspect.old.out" ||
  d_bad "inspect of the old header: $(grep -i 'allocation' "$D_TMP/inspect.old.out")"
d_serve serve2 "$conf" "$pid" || d_fail "serve of the volume without a map"
[[ $(in_use) == "$size" ]] && d_ok "served: a map, every region in use" ||
  d_bad "served: bytes_in_use $(in_use), expected $size"
for f in "${m[@]}"; do
  d_map_check "$f" "$f" "$size" "$data" "$M"
done
"$PY" - "$uri" "$D_TMP/written" <<'EOF' && d_ok "the data as it was" || d_bad "the data changed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
want = open(sys.argv[2], "rb").read()
offs = [0, 5 * 65536, 1234 * 65536, size - 65536]
sys.exit(0 if all(h.pread(65536, o) == want[i * 65536:(i + 1) * 65536]
                  for i, o in enumerate(offs)) else 1)
EOF
d_stop "$D_SERVER_PID"

d_log "loop devices (no SEEK_DATA): a replace leaves NEW as sparse as the data"
if [[ $(id -u) -ne 0 ]] || ! command -v losetup >/dev/null; then
  d_log "(skipped: needs root and losetup)"
else
  lp=()
  for f in b0 b1 b2 bnew; do
    truncate -s $((M + 16 * M)) "$D_TMP/$f"
    # NEW full of bytes that are not zeros: the replace must zero it.
    [[ $f != bnew ]] ||
      head -c $((M + 16 * M)) /dev/zero | tr '\0' '\252' >"$D_TMP/$f"
    l=$(losetup --find --show "$D_TMP/$f") || d_fail "losetup $D_TMP/$f"
    D_LOOPS+=("$l")
    lp+=("$l")
  done
  lconf=$D_TMP/loop.conf
  d_conf "$lconf" loopvol 64K "socket = \"$sock\"; pidfile = \"$pid\";" \
    "${lp[0]}" "${lp[1]}" "${lp[2]}"
  printf 'health = { status_file = "%s"; interval = 1; };\n' \
    "$D_TMP/loop.status.json" >>"$lconf"
  d_run lcreate d_ns create --force "$lconf"
  [[ $D_RC -eq 0 ]] || d_fail "create on loop devices"
  d_serve lserve "$lconf" "$pid" || d_fail "serve on loop devices"
  "$PY" - "$uri" <<'EOF2' || d_bad "loop: the client failed"
import nbd, random, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
h.trim(size, 0)
r = random.Random(36)
for o in range(0, size, 16 * 65536):      # 1 region in 16
    h.pwrite(r.randbytes(65536), o)
h.flush()
EOF2
  # /sys/block/loopN/stat: sectors written (7th), discarded (14th).
  dev=$(basename "${lp[3]}")
  read -r -a st0 <"/sys/block/$dev/stat"
  d_run lreplace d_ns replace --wait "$lconf" 1 "${lp[3]}"
  [[ $D_RC -eq 0 ]] || d_bad "loop: the replace failed"
  read -r -a st1 <"/sys/block/$dev/stat"
  w=$(((st1[6] - st0[6]) * 512)) dc=$(((st1[13] - st0[13]) * 512))
  # A 16th of member 1's 16 MiB is data; the rest is free.  The header
  # and map writes are a few KiB.
  ((w <= 2 * M && dc >= 14 * M)) &&
    d_ok "loop: NEW got $w bytes written and $dc discarded" ||
    d_bad "loop: NEW got $w bytes written and $dc discarded, expected at most 2 MiB written and 14 MiB discarded"
  d_run linspect d_ns inspect --json "${lp[3]}"
  doff=$(jq '.members[0].data_offset' "$D_TMP/linspect.out")
  "$PY" - "$D_TMP/bnew" "$doff" <<'EOF2' &&
import random, sys
# The volume: 3 members, chunk 64K; member 1's chunk c is logical chunk
# 3c + 1, written (by the client above) when a multiple of 16.
import os
doff = int(sys.argv[2])
n = (os.path.getsize(sys.argv[1]) - doff) // 65536
r = random.Random(36)
data = {}
for lc in range(0, 3 * n, 16):
    data[lc] = r.randbytes(65536)
f = open(sys.argv[1], "rb")
f.seek(doff)
bad = []
for c in range(n):
    got = f.read(65536)
    want = data.get(3 * c + 1, bytes(65536))
    if got != want:
        bad.append(c)
print("chunks of NEW not as the layout says:", bad[:10], len(bad))
sys.exit(1 if bad else 0)
EOF2
    d_ok "loop: NEW's file holds the data where the layout puts it, zeros elsewhere" ||
    d_bad "loop: NEW's file, read directly, differs from the layout"
  # Member 1 holds 16 MiB of data area, a 16th of it written, through a
  # block device that cannot say where its holes are: NEW's backing
  # file allocated at most 1.2 x that + the 1 MiB metadata area.
  a=$(( $(stat -c '%b * %B' "$D_TMP/bnew") ))
  ((a <= M + 12 * M / 10)) &&
    d_ok "loop: NEW holds $a bytes (data about 1 MiB + 1 MiB metadata)" ||
    d_bad "loop: NEW's backing file has $a bytes allocated, expected at most $((M + 12 * M / 10))"
  d_stop "$D_SERVER_PID"
fi

d_log "nbd members without a fast zero: a trim frees what they call zeros"
# nbdkit's file plugin punches a hole for a trim and reports it in block
# status, but offers no fast zero: the volume's trim goes down as a
# trim, then asks.  Behind the noextents filter a member says "data"
# everywhere: nothing is freed.
for f in n0 n1; do truncate -s $((M + 8 * M)) "$D_TMP/$f"; done
d_nbdkit_start n0 -U "$D_TMP/n0.sock" file "$D_TMP/n0" || d_fail "nbdkit n0"
d_nbdkit_start n1 -U "$D_TMP/n1.sock" file "$D_TMP/n1" || d_fail "nbdkit n1"
d_nbdkit_start n1x -U "$D_TMP/n1x.sock" --filter=noextents file "$D_TMP/n1" ||
  d_fail "nbdkit n1x"
nuri () { printf 'nbd+unix:///?socket=%s' "$D_TMP/$1.sock"; }
# nbd_trim CONF MEMBER1: create on n0 and MEMBER1, serve, write it all,
# trim it all.
nbd_trim ()
{
  d_conf "$1" nbdvol 64K "socket = \"$sock\"; pidfile = \"$pid\";" \
    "$(nuri n0)" "$(nuri "$2")"
  printf 'health = { status_file = "%s"; interval = 1; };\n' \
    "$1.status.json" >>"$1"
  d_run "ncreate-$2" d_ns create --force "$1"
  [[ $D_RC -eq 0 ]] || d_fail "create on nbd members $2"
  d_serve "nserve-$2" "$1" "$pid" || d_fail "serve on nbd members $2"
  "$PY" - "$uri" <<'EOF2' || d_bad "nbd $2: the client failed"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
h.pwrite(b"\x5a" * size, 0)
h.flush()
h.trim(size, 0)
h.flush()
sys.exit(0 if h.pread(65536, 65536) == bytes(65536) else 1)
EOF2
}
nconf=$D_TMP/nbd.conf
nbd_trim "$nconf" n1
nfree=$(d_ns status --json "$nconf" | jq -r '.status.allocation_map.bytes_free')
[[ $nfree == $((16 * M)) ]] &&
  d_ok "nbd: a trim freed every region ($nfree bytes)" ||
  d_bad "nbd: bytes_free $nfree after a trim of everything, expected $((16 * M))"
d_stop "$D_SERVER_PID"
nbd_trim "$nconf" n1x
nfree=$(d_ns status --json "$nconf" | jq -r '.status.allocation_map.bytes_free')
[[ $nfree == 0 ]] &&
  d_ok "nbd: a member that cannot tell keeps every region in use" ||
  d_bad "nbd behind noextents: bytes_free $nfree after a trim, expected 0"
d_stop "$D_SERVER_PID"

d_log "md: no map; a scrub skips the members' holes"
md=("$D_TMP/d0" "$D_TMP/d1")
for f in "${md[@]}"; do truncate -s $((M + 8 * M)) "$f"; done
mconf=$D_TMP/md.conf
d_conf "$mconf" mdvol 64K "socket = \"$sock\"; pidfile = \"$pid\";" "${md[@]}"
printf 'metadata = "md";\nhealth = { status_file = "%s"; interval = 1; };\n' \
  "$D_TMP/md.status.json" >>"$mconf"
d_run mdcreate d_ns create "$mconf"
[[ $D_RC -eq 0 ]] || d_fail "md create"
d_serve mdserve "$mconf" "$pid" || d_fail "md serve"
d_run mdstatus d_ns status "$mconf"
grep -q "Allocation map : none, its metadata keeps none" "$D_TMP/mdstatus.out" &&
  d_ok "md: status says there is no map" ||
  d_bad "md status: $(grep -i alloc "$D_TMP/mdstatus.out")"
d_run mdscrub d_ns scrub --wait --json "$mconf"
jq -e '.scrub.bytes_free > 0 and .scrub.bytes_read < .scrub.bytes_free' \
  "$D_TMP/mdscrub.out" >/dev/null &&
  d_ok "md: the scrub skipped the members' holes" ||
  d_bad "md scrub: $(jq -c '.scrub | {bytes_read, bytes_free}' "$D_TMP/mdscrub.out")"
d_stop "$D_SERVER_PID"
d_done
