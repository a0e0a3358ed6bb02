#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member is adopted again only when it proves to be the same member, and
# a write never extends a member file.  Plain files as members, served by
# `nbdstripe serve` with a status file; each case is done as a clumsy
# administrator would, with cp, mv and truncate on the member files while
# the volume is served:
#
#   replaced   metadata = "none": member 1's path is replaced (mv) by
#              another file of the same size.  The member fails ("now
#              names another file") and is never taken back: the re-probe
#              says "another file"; a read of its chunks fails with EIO and
#              never returns the other file's bytes.
#   stale      headers: member 1 is copied (cp), then written through the
#              volume with FUA, then the copy is moved over it (mv).  The
#              member fails, the generation is bumped (2 -> 3: serving
#              made it 2) on every
#              member (the old member 1 too, through the descriptor still
#              open), the re-probe refuses the copy ("older generation
#              2 < 3"), reads of its chunks fail, and after a stop
#              `nbdstripe check`, `serve` and the plugin refuse the copy
#              as stale; the headers on disk say 3, 3, 3 and 2.
#              `nbdstripe accept` takes the member back when the operator
#              says so: then the volume serves again.
#   truncated  headers: member 2 is truncated under the running server and
#              at once written through the volume at its end, past its new
#              end (one Python process, microseconds apart).  The write
#              fails, the file is NOT re-extended, and the member is failed
#              with a reason that says truncated.
#   cut        headers: member 2 is truncated, then written through the
#              volume past the cut but short of its end (a write that is
#              not checked: the write may land).  The prober fails the
#              member within seconds, naming the size; the file stays
#              shorter than the volume needs; a write at its end then
#              fails with EIO and does not bring it back to its size.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo cmp truncate
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
HC=$NBDSTRIPE_SOURCE_DIR/tests/lib/hclient.py

K=1024 M=$((1024 * 1024))
chunk=$((64 * K))
msize=$((5 * M))
sock=$D_TMP/vol.sock
pidfile=$D_TMP/vol.pid
status=$D_TMP/status.json
uri="nbd+unix:///?socket=$sock"

# conf FILE TOP MEMBER...: volume "idv", chunk 64K, health checked every
# second, TOP extra top-level settings (metadata).
conf ()
{
  local file=$1 top=$2
  shift 2
  d_conf "$file" idv 64K "socket = \"$sock\"; pidfile = \"$pidfile\";" "$@"
  printf '%s\nhealth = { status_file = "%s"; interval = 1; probe_interval = 1; io_timeout = 5; };\n' \
    "$top" "$status" >>"$file"
}

# wait_status WHAT EXPR: the status file satisfies EXPR within 15 s.
wait_status ()
{
  if /usr/bin/python3 "$HC" wait-json "$status" "$2" --deadline 15; then
    d_ok "$1"
  else
    d_bad "$1"
    cat "$status" >&2
  fi
}

# py CODE...: python with libnbd connected to the volume as h.
py ()
{
  "$PY" -c "import nbd, os, sys
h = nbd.NBD()
h.connect_uri('$uri')
$1"
}

# read_fails LABEL OFFSET: a read of one chunk at OFFSET must fail (EIO).
read_fails ()
{
  local out
  out=$(py "
try:
    h.pread($chunk, $2)
    print('read succeeded')
except nbd.Error as e:
    print('read failed:', e.errno)
" 2>&1)
  if [[ $out == "read failed: EIO" ]]; then
    d_ok "$1: a read of member $3's chunk fails with EIO"
  else
    d_bad "$1: a read of member $3's chunk: $out (expected EIO)"
  fi
}

# --- replaced, metadata = "none" ---------------------------------------------
d_log "replaced: metadata = \"none\", member 1's path replaced by another file"
for i in 0 1 2 3; do d_random "$D_TMP/r$i" "$msize"; done
d_random "$D_TMP/other" "$msize"
conf r.conf 'metadata = "none";' "$D_TMP"/r{0,1,2,3}
d_serve r.serve r.conf "$pidfile" || d_fail "serve r.conf"
wait_status "replaced: served, all ok" \
  'j["running"] and all(m["state"] == "ok" for m in j["members"])'
mv "$D_TMP/other" "$D_TMP/r1"
wait_status "replaced: member 1 failed, and its re-probe finds another file" \
  'j["members"][1]["state"] == "failed" and "re-probe: another file" in j["members"][1]["reason"]'
# Chunk 1 lives on member 1 (4 equal members, data at 0).
read_fails replaced "$chunk" 1
# Two more re-probes: still refused.
wait_status "replaced: still failed after later re-probes" \
  'j["members"][1]["state"] == "failed" and j["updated_unix"] > '"$(date +%s)"' + 2'
read_fails replaced.later "$chunk" 1
d_stop "$D_SERVER_PID"

# --- stale, headers ----------------------------------------------------------
d_log "stale: member 1 swapped for an older copy of itself"
for i in 0 1 2 3; do truncate -s "$msize" "$D_TMP/s$i"; done
conf s.conf "" "$D_TMP"/s{0,1,2,3}
d_run s.create d_ns create s.conf
[[ $D_RC -eq 0 ]] || d_fail "create s.conf"
d_serve s.serve s.conf "$pidfile" || d_fail "serve s.conf"
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
d_random s.src "$size"
nbdcopy s.src "$uri" || d_fail "nbdcopy s.src -> volume"
wait_status "stale: served, all ok" \
  'j["running"] and all(m["state"] == "ok" for m in j["members"])'
cp "$D_TMP/s1" "$D_TMP/s1.copy"
# Chunk 1 (member 1, first slot): new bytes, durable (FUA).
head -c "$chunk" /dev/urandom >"$D_TMP/newer"
py "h.pwrite(open('$D_TMP/newer', 'rb').read(), $chunk, nbd.CMD_FLAG_FUA)" ||
  d_fail "FUA write to member 1"
mv "$D_TMP/s1.copy" "$D_TMP/s1"
wait_status "stale: member 1 failed, its re-probe refuses the copy (older generation)" \
  'j["members"][1]["state"] == "failed" and "older generation 2 < 3" in j["members"][1]["reason"]'
read_fails stale "$chunk" 1
d_stop "$D_SERVER_PID"
for i in 0 1 2 3; do
  want=3
  [[ $i -eq 1 ]] && want=2
  got=$(d_u64 "$D_TMP/s$i" 664)
  [[ $got == "$want" ]] && d_ok "stale: member $i's header is at generation $got" ||
    d_bad "stale: member $i's header is at generation $got, expected $want"
done
before=$(d_sums "$D_TMP"/s{0,1,2,3})
d_run s.check d_ns check s.conf
d_expect_fail s.check
d_expect_err s.check "member 1 ($D_TMP/s1): stale: its header is at generation 2, the volume is at 3"
d_serve_refused s.serve2 s.conf "$pidfile"
d_expect_err s.serve2 "member 1 ($D_TMP/s1): stale"
d_run s.plugin d_nbdkit -U - "$STRIPE_PLUGIN" "config=$D_TMP/s.conf" --run true
d_expect_fail s.plugin
d_expect_err s.plugin "member 1 ($D_TMP/s1): stale"
d_same_sums stale.refusals "$before" "$D_TMP"/s{0,1,2,3} &&
  d_ok "stale: the refusals wrote nothing"

d_log "stale: the operator takes the copy back (nbdstripe accept)"
d_run s.accept d_ns accept s.conf 1
[[ $D_RC -eq 0 ]] || d_bad "accept s.conf 1: exit $D_RC"
[[ $(d_u64 "$D_TMP/s1" 664) == 3 ]] || d_bad "accept: member 1 not at generation 3"
d_run s.check2 d_ns check s.conf
[[ $D_RC -eq 0 ]] || d_bad "check after accept: exit $D_RC"
d_serve s.serve3 s.conf "$pidfile" || d_fail "serve after accept"
# The copy's chunk 1 is the old one; every other chunk is as written.
py "
src = open('$D_TMP/s.src', 'rb').read()
got = h.pread($size, 0)
bad = [k for k in range($size // $chunk)
       if got[k * $chunk:(k + 1) * $chunk] != src[k * $chunk:(k + 1) * $chunk]]
sys.exit(0 if bad == [] else 1)
" && d_ok "accept: the volume serves the data (the copy held the old chunk 1, as before the FUA write)" ||
  d_bad "accept: the volume's data differs from what was written before the copy"
d_stop "$D_SERVER_PID"

# --- truncated ---------------------------------------------------------------
d_log "truncated: member 2 cut short, then written past its new end"
for i in 0 1 2 3; do truncate -s "$msize" "$D_TMP/t$i"; done
conf t.conf "" "$D_TMP"/t{0,1,2,3}
d_run t.create d_ns create t.conf
[[ $D_RC -eq 0 ]] || d_fail "create t.conf"
d_serve t.serve t.conf "$pidfile" || d_fail "serve t.conf"
wait_status "truncated: served, all ok" \
  'j["running"] and all(m["state"] == "ok" for m in j["members"])'
cut=$((2 * M))
# Member 2's last chunk: member offset 1M + 63 * 64K, logical chunk 63*4+2.
last=$(( (msize - M) / chunk - 1 ))
off=$(( (last * 4 + 2) * chunk ))
out=$(py "
os.truncate('$D_TMP/t2', $cut)
try:
    h.pwrite(b'x' * $chunk, $off, nbd.CMD_FLAG_FUA)
    print('write succeeded')
except nbd.Error as e:
    print('write failed:', e.errno)
" 2>&1)
[[ $out == "write failed: EIO" ]] && d_ok "truncated: the write fails with EIO" ||
  d_bad "truncated: the write past the cut: $out (expected EIO)"
got=$(stat -c %s "$D_TMP/t2")
[[ $got -eq $cut ]] && d_ok "truncated: the file was not re-extended ($got bytes)" ||
  d_bad "truncated: member 2 is $got bytes after the write, it was cut to $cut"
wait_status "truncated: member 2 failed, the reason says truncated" \
  'j["members"][2]["state"] == "failed" and "truncated to '"$cut"' bytes" in j["members"][2]["reason"]'
d_stop "$D_SERVER_PID"

# --- cut, then written short of its end --------------------------------------
d_log "cut: member 2 cut short, then written past the cut, short of its end"
for i in 0 1 2 3; do truncate -s "$msize" "$D_TMP/c$i"; done
conf c.conf "" "$D_TMP"/c{0,1,2,3}
d_run c.create d_ns create c.conf
[[ $D_RC -eq 0 ]] || d_fail "create c.conf"
d_serve c.serve c.conf "$pidfile" || d_fail "serve c.conf"
wait_status "cut: served, all ok" \
  'j["running"] and all(m["state"] == "ok" for m in j["members"])'
# Member 2's chunk 40 (member offset 1M + 40 * 64K), logical chunk 40*4+2:
# after the write the file ends there, short of msize.
mid=$(( (40 * 4 + 2) * chunk ))
grown=$(( M + 41 * chunk ))
out=$(py "
os.truncate('$D_TMP/c2', $cut)
try:
    h.pwrite(b'y' * $chunk, $mid)
    print('write succeeded')
except nbd.Error as e:
    print('write failed:', e.errno)
" 2>&1)
d_log "cut: the write past the cut: $out"
wait_status "cut: member 2 failed by the prober, the reason names its size" \
  'j["members"][2]["state"] == "failed" and "truncated to " in j["members"][2]["reason"] and "the volume needs '"$msize"'" in j["members"][2]["reason"]'
out=$(py "
try:
    h.pwrite(b'x' * $chunk, $off, nbd.CMD_FLAG_FUA)
    print('write succeeded')
except nbd.Error as e:
    print('write failed:', e.errno)
" 2>&1)
[[ $out == "write failed: EIO" ]] && d_ok "cut: a write at its end fails with EIO" ||
  d_bad "cut: a write at member 2's end: $out (expected EIO)"
got=$(stat -c %s "$D_TMP/c2")
[[ $got -le $grown ]] && d_ok "cut: the file stays short ($got bytes, the volume needs $msize)" ||
  d_bad "cut: member 2 is $got bytes, more than the write past the cut made it ($grown)"
d_stop "$D_SERVER_PID"

d_done
