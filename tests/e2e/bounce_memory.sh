#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cache=direct needs aligned bounce buffers; a worker thread must not keep
# one as large as the largest request it ever served.  8 clients each read
# 32 MiB at once through a cache=direct volume (their own server threads
# each bounce 32 MiB); afterwards the server's resident memory must be
# below 48 MiB (c876f37 kept the 32 MiB arenas: 70 to 267 MiB).
here=$(dirname "$(realpath "$0")")
source "$here/../lib/daemon.sh" || exit 1
d_init nbdkit
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
[[ -z ${STRIPE_LD_PRELOAD:-} ]] ||
  d_skip "resident memory means nothing under a sanitizer runtime"

M=$((1024 * 1024))
truncate -s $((128 * M)) "$D_TMP/m0" "$D_TMP/m1"
# O_DIRECT must work where the members live.
dd if=/dev/zero of="$D_TMP/m0" bs=4096 count=1 oflag=direct conv=notrunc status=none ||
  d_skip "no O_DIRECT on $D_TMP"
# A fixed mmap threshold: nbdkit's own request buffers (malloc) are then
# given back when freed, and what stays resident is what is kept.
D_PRE+=(MALLOC_MMAP_THRESHOLD_=131072)
d_nbdkit_start s -U "$D_TMP/s.sock" "$STRIPE_PLUGIN" chunk=64K \
  cache=direct file="$D_TMP/m0" file="$D_TMP/m1" || d_fail "nbdkit"
pid=$D_NBDKIT_PID
cat >"$D_TMP/reads.py" <<'PYEOF'
import nbd, sys
hs = []
for k in range(8):
    h = nbd.NBD()
    h.connect_uri(sys.argv[1])
    hs.append(h)
bufs = [bytearray(32 << 20) for h in hs]
for h, b in zip(hs, bufs):
    h.aio_pread(b, 0)
for h in hs:
    while h.aio_in_flight() > 0:
        h.poll(-1)
print("8 reads of 32 MiB done")
PYEOF
d_run reads "$PY" "$D_TMP/reads.py" "nbd+unix:///?socket=$D_TMP/s.sock"
[[ $D_RC -eq 0 ]] || d_fail "the reads failed"
rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status")
[[ -n $rss ]] || d_fail "the server ($pid) has gone"
echo "server resident memory after: $rss KiB"
(( rss < 48 * 1024 )) && d_ok "the server keeps no 32 MiB bounce buffers ($rss KiB resident)" ||
  d_bad "the server holds $rss KiB after the large reads"
d_done
