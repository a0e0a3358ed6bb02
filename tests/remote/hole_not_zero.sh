#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Block status tells the truth: a hole is zero only where the member says
# so.  NBD keeps "hole" (no storage allocated) and "zero" (reads as
# zeroes) apart, and a server may report a hole that is not zero (nbdkit's
# extentlist filter does, as does any server over a store whose holes
# hold data).  Copying tools trust ZERO: they skip reading what is zero.
#
# Two remote members, nbdkit file servers over random data behind the
# extentlist filter: per member, 1M data, 1M "hole" (data there), 1M
# "hole,zero" (zeroed there: true), the rest data.  The volume (ad hoc,
# chunk 64K) must report those ranges as the members do, and copies made
# by nbdcopy and qemu-img convert, which skip ZERO ranges, must equal a
# full read of the volume (nbdcopy --no-extents), byte for byte.  Against
# c876f37 (every hole reported as hole+zero) both copies lost the data
# under the "hole" ranges.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo qemu-img cmp

M=$((1024 * 1024))
for i in 0 1; do
  d_random "$D_TMP/b$i" $((8 * M))
  # [2M, 3M) reads as zeroes: "hole,zero" is true there.
  dd if=/dev/zero of="$D_TMP/b$i" bs=1M seek=2 count=1 conv=notrunc status=none
  printf '0 1M\n1M 1M hole\n2M 1M hole,zero\n3M 5M\n' >"$D_TMP/x$i"
  d_nbdkit_start "s$i" -r -U "$D_TMP/s$i.sock" --filter=extentlist \
    file "$D_TMP/b$i" "extentlist=$D_TMP/x$i" || d_fail "member server $i"
done

d_nbdkit_start vol -r -U "$D_TMP/vol.sock" "$STRIPE_PLUGIN" chunk=64K \
  "file=nbd+unix:///?socket=$D_TMP/s0.sock" \
  "file=nbd+unix:///?socket=$D_TMP/s1.sock" || d_fail "the volume's server"
uri="nbd+unix:///?socket=$D_TMP/vol.sock"

d_log "the volume's block status"
nbdinfo --map "$uri" >"$D_TMP/map" || d_fail "nbdinfo --map"
cat "$D_TMP/map"
# Member offsets [1M, 2M) of both members are logical [2M, 4M) (64K chunks
# alternate): "hole" (type 1), not "hole,zero" (3).
awk '$1 >= 2097152 && $1 < 4194304 && $3 != 1 { bad = 1 } END { exit bad }' \
  "$D_TMP/map" && d_ok "logical [2M, 4M): hole, not zero" ||
  d_bad "logical [2M, 4M) is not reported as hole-but-not-zero"
awk '$1 >= 4194304 && $1 < 6291456 && $3 != 3 { bad = 1 } END { exit bad }' \
  "$D_TMP/map" && d_ok "logical [4M, 6M): hole and zero" ||
  d_bad "logical [4M, 6M) is not reported as hole and zero"
grep -q -w 3 <(awk '{ print $3 }' "$D_TMP/map") || d_bad "no hole,zero run at all"

d_log "copies that skip zeroes equal a full read"
nbdcopy --no-extents "$uri" "$D_TMP/truth" || d_fail "nbdcopy --no-extents"
nbdcopy "$uri" "$D_TMP/copy.nbdcopy" || d_fail "nbdcopy"
qemu-img convert -f raw -O raw "$uri" "$D_TMP/copy.qemu" || d_fail "qemu-img convert"
for c in nbdcopy qemu; do
  if cmp "$D_TMP/truth" "$D_TMP/copy.$c"; then
    d_ok "$c: the copy equals the volume"
  else
    d_bad "$c: the copy differs from the volume ($(cmp -l "$D_TMP/truth" "$D_TMP/copy.$c" | wc -l) bytes)"
  fi
done
# And the volume is the members' data where the layout says: chunk k of
# 64K on member k mod 2 at (k div 2) * 64K.
python3 - "$D_TMP" <<'EOF' && d_ok "the volume is the members' data, chunk by chunk" || d_bad "the volume differs from its members"
import sys
d = sys.argv[1]
t = open(d + "/truth", "rb").read()
b = [open(d + "/b%d" % i, "rb").read() for i in (0, 1)]
C = 65536
sys.exit(0 if all(t[k * C:(k + 1) * C] == b[k % 2][(k // 2) * C:(k // 2 + 1) * C]
                  for k in range(len(t) // C)) else 1)
EOF

d_done
