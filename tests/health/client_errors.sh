#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One client's bad requests, or a full disk, fail no member for the
# others: only errors that say something about the drive count.
#
#   misaligned  member 0 is an NBD export whose server demands 4096-byte
#               blocks (nbdkit's blocksize-policy filter, errors on
#               misaligned requests).  The volume advertises 4096 as its
#               minimum; a client that ignores it sends 12 misaligned
#               writes and gets EINVAL for each, refused before they reach
#               the member; right after, a second client's 300 aligned reads
#               of member 0 all succeed with the right data, and member 0
#               stays "ok".  Against c876f37 the member was "failed"
#               after 8 such writes and the other client's reads failed.
#   full        member 0 is a file on a 4 MiB tmpfs (root).  A client
#               writes until the member is full and then 12 times more:
#               each such write fails with ENOSPC (not EIO); member 0 is
#               "full" (the volume "degraded"), never "failed"; a second
#               client's reads of what was written succeed; a trim frees
#               space and a write then fits again.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
HC=$(dirname "$0")/../lib/hclient.py
M=$((1024 * 1024))
status=$D_TMP/status.json

# wait_status WHAT EXPR: the status file satisfies EXPR within 15 s.
wait_status ()
{
  if "$PY" "$HC" wait-json "$status" "$2" --deadline 15; then
    d_ok "$1"
  else
    d_bad "$1"
    cat "$status" >&2
  fi
}

# serve_adhoc NAME MEMBER...: the plugin ad hoc (chunk 64K) with a status
# file; sets uri.
serve_adhoc ()
{
  local name=$1 m args=()
  shift
  for m in "$@"; do args+=("file=$m"); done
  rm -f "$status"
  d_nbdkit_start "$name" -U "$D_TMP/$name.sock" "$STRIPE_PLUGIN" \
    chunk=64K "status=$status" "${args[@]}" || d_fail "serve $name"
  uri="nbd+unix:///?socket=$D_TMP/$name.sock"
}

d_log "misaligned requests to a member that demands 4096-byte blocks"
for i in 0 1; do d_random "$D_TMP/b$i" $((8 * M)); done
d_nbdkit_start s0 -U "$D_TMP/s0.sock" --filter=blocksize-policy \
  file "$D_TMP/b0" blocksize-minimum=4096 blocksize-preferred=4096 \
  blocksize-error-policy=error || d_fail "member server 0"
d_nbdkit_start s1 -U "$D_TMP/s1.sock" file "$D_TMP/b1" ||
  d_fail "member server 1"
serve_adhoc a "nbd+unix:///?socket=$D_TMP/s0.sock" "nbd+unix:///?socket=$D_TMP/s1.sock"
a_pid=$D_NBDKIT_PID
wait_status "misaligned: served, all ok" \
  'j["running"] and all(m["state"] == "ok" for m in j["members"])'
out=$("$PY" - "$uri" "$D_TMP/b0" <<'EOF'
import nbd, sys
uri, back = sys.argv[1], sys.argv[2]
C = 65536
b0 = open(back, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
print("minimum", h.get_block_size(nbd.SIZE_MINIMUM))
res = {"einval": 0, "other": [], "reads": 0, "bad": []}

def good():
    g = nbd.NBD()
    g.connect_uri(uri)
    for k in range(300):
        slot = k % 32          # chunk slot of member 0: logical chunk 2*slot
        try:
            d = g.pread(C, 2 * slot * C)
            if d == b0[slot * C:(slot + 1) * C]:
                res["reads"] += 1
            else:
                res["bad"].append("wrong data")
        except nbd.Error as e:
            res["bad"].append(e.errno)

h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
for k in range(12):
    try:
        h.pwrite(b"x" * 1000, 100 + 2 * k * C)
        res["other"].append("write succeeded")
    except nbd.Error as e:
        if e.errno == "EINVAL":
            res["einval"] += 1
        else:
            res["other"].append(e.errno)
# The other client, right after: the member must still serve it.
good()
print("einval", res["einval"], "other", res["other"])
print("reads", res["reads"], "bad", res["bad"][:5])
EOF
)
printf '%s\n' "$out"
grep -q '^minimum 4096$' <<<"$out" && d_ok "misaligned: the volume advertises 4096 as its minimum" ||
  d_bad "misaligned: the volume's minimum block size is not the member's 4096"
grep -q '^einval 12 other \[\]$' <<<"$out" && d_ok "misaligned: 12 misaligned writes, 12 EINVAL" ||
  d_bad "misaligned: the misaligned writes did not all fail with EINVAL"
grep -q '^reads 300 bad \[\]$' <<<"$out" && d_ok "misaligned: the other client's 300 reads all succeeded" ||
  d_bad "misaligned: the other client's reads failed"
[[ $("$PY" "$HC" json "$status" 'bool(j["members"][0]["state"] == "ok")') == true ]] &&
  d_ok "misaligned: member 0 is still ok" || { d_bad "misaligned: member 0 is no longer ok"; cat "$status"; }
d_stop "$a_pid"

d_log "a full member"
if [[ $(id -u) -ne 0 ]]; then
  d_log "  (skipped: needs root to mount a small tmpfs)"
else
  mkdir -p "$D_TMP/small"
  mount -t tmpfs -o size=4m tmpfs "$D_TMP/small" || d_fail "mount tmpfs"
  D_MOUNTS+=("$D_TMP/small")
  truncate -s $((8 * M)) "$D_TMP/small/m0" "$D_TMP/m1"
  serve_adhoc f "$D_TMP/small/m0" "$D_TMP/m1"
  f_pid=$D_NBDKIT_PID
  out=$("$PY" - "$uri" <<'EOF'
import nbd, sys
uri = sys.argv[1]
C = 65536
h = nbd.NBD()
h.connect_uri(uri)
g = nbd.NBD()
g.connect_uri(uri)
written, errs, fill = [], [], None
k = 0
while len(errs) < 12 and k < 256:
    # Chunk k of member 0 is logical chunk 2k.
    data = bytes([k % 251 + 1]) * C
    try:
        h.pwrite(data, 2 * k * C)
        written.append(k)
    except nbd.Error as e:
        errs.append(e.errno)
    k += 1
print("written", len(written), "errors", sorted(set(errs)), len(errs))
bad = 0
for k in written:
    try:
        if g.pread(C, 2 * k * C) != bytes([k % 251 + 1]) * C:
            bad += 1
    except nbd.Error:
        bad += 1
print("reread-bad", bad)
# A trim of the first half of what was written frees space on member 0.
h.trim(2 * C * (len(written) // 2), 0)
try:
    h.pwrite(b"y" * C, 0)
    print("after-trim write ok")
except nbd.Error as e:
    print("after-trim write", e.errno)
EOF
  )
  printf '%s\n' "$out"
  grep -q "^written [1-9][0-9]* errors \['ENOSPC'\] 12$" <<<"$out" &&
    d_ok "full: writes past the space failed with ENOSPC, 12 times" ||
    d_bad "full: the writes that did not fit did not all fail with ENOSPC"
  grep -q '^reread-bad 0$' <<<"$out" && d_ok "full: every chunk written reads back, from another client" ||
    d_bad "full: reads of a full member failed"
  grep -q '^after-trim write ok$' <<<"$out" && d_ok "full: after a trim a write fits again" ||
    d_bad "full: a write after the trim failed"
  wait_status "full: member 0 reported full (a warning), the volume degraded, nothing failed" \
    'j["members"][0]["state"] == "full" and "no space left" in j["members"][0]["reason"] and j["volume"]["state"] == "degraded" and j["members"][1]["state"] == "ok"'
  d_stop "$f_pid"
fi

d_done
