#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Read errors on the member being replaced.
#
# Member 1 of 3 is an NBD export served by nbdkit's cc plugin running
# tests/replace/badrange.c (a file whose reads fail in given ranges:
# nbdkit's error filter fails every request, its ddrescue filter serves
# read-only), behind nbdkit's error filter (all reads fail while a file
# exists).  Its ranges, as member offsets:
#   F   8K in the copy's first window, failing the first 4 reads only:
#       the whole window is read twice, then block by block, each block
#       up to 3 times -- F must be read back, never reported;
#   B1  20K across a chunk boundary in the second window: two logical
#       ranges of the volume;
#   B2  4K in the third window.
#
#   1. replace: stops at B1's window and reports exactly B1's two logical
#      ranges (the command's stderr and the status); the config still
#      names the old member, NEW holds no header, the volume goes on with
#      the old member (its data intact, writes work).
#   2. replace --skip-unreadable (rate-limited), served again with the
#      copier's gate: while the copier is held after the first window,
#      the error filter fails every read of the old member: a read of an already copied range is served from
#      NEW, one beyond the copy fails (the filter is on).  Then the
#      replace completes, lists the three lost logical ranges; NEW (read
#      directly) holds zeros there and the old member's bytes everywhere
#      else; the volume reads back the data written but in the lost
#      ranges, whose reads fail with EIO (lost stays lost), listed in
#      the status; a write over one makes it good and drops it from the
#      list, the others still fail when served afresh (the headers keep
#      them), a trim over the next drops it too.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd gcc

size=$((12 * M))
RP_DO=$M
C=$((64 * K))
for f in m0 m1.back m2 new1; do truncate -s "$size" "$D_TMP/$f"; done
d_random "$D_TMP/new2" "$size"   # NEW holding old garbage: zeros must be written

F_at=$((RP_DO + 2 * C + 8 * K)) F_len=$((8 * K))
B1_at=$((RP_DO + 75 * C - 8 * K)) B1_len=$((20 * K))
B2_at=$((RP_DO + 140 * C + 20 * K)) B2_len=$((4 * K))
r_unix m1 --filter=error cc "$HERE/badrange.c" EXTRA_CFLAGS="-Wall -Werror" \
  file="$D_TMP/m1.back" flaky=$F_at:$F_len:4 bad=$B1_at:$B1_len \
  bad=$B2_at:$B2_len error-pread=EIO error-pread-rate=1 \
  error-pread-file="$D_TMP/m1.fail"
rp_volume vol 64K "" "$D_TMP/m0" "$R_URI" "$D_TMP/m2"
# A Prometheus file, rewritten within a second of a change.
sed -i "s|^health = { status_file = \"\(.*\)\"; };|health = { status_file = \"\\1\"; prometheus_file = \"$D_TMP/vol.prom\"; interval = 1; };|" "$RP_CONF"
grep -q prometheus_file "$RP_CONF" || d_fail "no prometheus_file in $RP_CONF"
rp_create

# expected I AT LEN: member I's bytes [AT, AT+LEN) as the volume's logical
# ranges, "OFFSET LENGTH" a line (each piece within one chunk).
expected ()
{
  local i=$1 at=$2 end=$(($2 + $3)) n
  while [[ $at -lt $end ]]; do
    n=$(( C - (at - RP_DO) % C ))
    [[ $n -le $((end - at)) ]] || n=$((end - at))
    echo "$(rp_logical "$i" "$at") $n"
    at=$((at + n))
  done
}
# as_lines: the command's "  bytes A-B (L)" lines as "A L".
as_lines () { sed -n 's/^  bytes \([0-9]*\)-[0-9]* (\([0-9]*\))$/\1 \2/p' "$1"; }
json_lines () { jq -r '.unreadable[] | "\(.offset) \(.length)"' "$1"; }

exp1=$(expected 1 "$B1_at" "$B1_len")
exp2=$(expected 1 "$B1_at" "$B1_len"; expected 1 "$B2_at" "$B2_len")
[[ $(wc -l <<<"$exp1") -eq 2 ]] || d_fail "B1 should span two chunks"

vsize=$((3 * (size - M)))
d_random "$D_TMP/pattern" "$vsize"
rp_start vol
rp_write_pattern "$D_TMP/pattern"

d_log "1. replace stops at the unreadable blocks and reports them"
d_run replace1 d_ns replace --wait "$RP_CONF" 1 "$D_TMP/new1"
d_expect_fail replace1
d_expect_err replace1 "unreadable" "--skip-unreadable"
if [[ $(as_lines "$D_TMP/replace1.err") == "$exp1" ]]; then
  d_ok "the command reports B1's logical ranges: $(echo $exp1)"
else
  d_bad "the command reports: $(as_lines "$D_TMP/replace1.err" | tr '\n' ' '), expected $(echo $exp1)"
fi
rp_wait failed --state failed || d_bad "the replace is not failed"
if [[ $(json_lines "$D_TMP/failed.json") == "$exp1" ]]; then
  d_ok "the status lists B1's logical ranges"
else
  d_bad "the status lists: $(json_lines "$D_TMP/failed.json" | tr '\n' ' ')"
fi
grep -q -F "\"$R_URI\"" "$RP_CONF" && ! grep -q -F new1 "$RP_CONF" ||
  d_bad "the config changed"
rp_no_header "failed replace" "$D_TMP/new1"
# The volume goes on with the old member: its data (but for what it
# cannot read), and a write read back.
head -c $((4 * M)) "$D_TMP/pattern" >"$D_TMP/head.want"
rp_read_at "$RP_URI" 0 $((4 * M)) "$D_TMP/head.got" && cmp -s "$D_TMP/head.got" "$D_TMP/head.want" ||
  d_bad "the volume's first 4 MiB (all members) do not read back"
d_random "$D_TMP/w" $((256 * K))
dd if="$D_TMP/w" of="$D_TMP/pattern" bs=$((256 * K)) seek=$((4 * M / (256 * K))) conv=notrunc status=none
rp_nbdsh -u "$RP_URI" -c "h.pwrite(open('$D_TMP/w','rb').read(), $((4 * M)))" ||
  d_bad "a write to the volume failed after the failed replace"
rp_read_at "$RP_URI" $((4 * M)) $((256 * K)) "$D_TMP/w.got" && cmp -s "$D_TMP/w" "$D_TMP/w.got" &&
  d_ok "the volume goes on with the old member: data read back, writes work" ||
  d_bad "a write to the volume after the failed replace does not read back"

d_log "2. replace --skip-unreadable; reads of copied ranges served from NEW"
# The copier held at the end of its first window while the old member
# fails every read: however slow the clients below, the copy stays there.
rp_stop
rp_start vol.gated -D stripe.replace_gate=1
"$NBDSTRIPE" replace --wait --skip-unreadable --rate 2M "$RP_CONF" 1 \
  "$D_TMP/new2" >"$D_TMP/replace2.out" 2>"$D_TMP/replace2.err" </dev/null &
rpid=$!
rp_hold first advanced --new "$D_TMP/new2" || d_fail "the copier was not held after its first window"
[[ $(jq .bytes_copied "$D_TMP/first.json") -eq $((4 * M)) ]] ||
  d_fail "held after the first window with $(jq .bytes_copied "$D_TMP/first.json") bytes copied"
# An already copied range of member 1 (not F) and one beyond the copy.
L_below=$(rp_logical 1 $((RP_DO + 30 * C)))
L_above=$(rp_logical 1 $((RP_DO + 160 * C)))
touch "$D_TMP/m1.fail"
below=0 above=0
rp_read_at "$RP_URI" "$L_below" 4096 "$D_TMP/below" 2>"$D_TMP/below.err" || below=$?
rp_read_at "$RP_URI" "$L_above" 4096 "$D_TMP/above" 2>"$D_TMP/above.err" || above=$?
rm -f "$D_TMP/m1.fail"
rp_ctl status >"$D_TMP/mid.json"
[[ $(jq -r .state "$D_TMP/mid.json") == copying && $(jq .bytes_copied "$D_TMP/mid.json") -eq $((4 * M)) &&
   $(jq '.unreadable | length' "$D_TMP/mid.json") -eq 0 ]] ||
  d_bad "the copy moved on while the old member failed every read: $(cat "$D_TMP/mid.json")"
rp_hold rest end --new "$D_TMP/new2" || d_bad "the copier did not run to its end"
if [[ $below -eq 0 ]] && cmp -s "$D_TMP/below" <(tail -c +$((L_below + 1)) "$D_TMP/pattern" | head -c 4096); then
  d_ok "a read the old member failed, of a copied range, was served from NEW"
else
  d_bad "a read of a copied range failed on the old member and NEW did not serve it: $(cat "$D_TMP/below.err")"
fi
if [[ $above -ne 0 ]]; then
  d_ok "a read beyond the copy failed (the error filter was on): $(tail -1 "$D_TMP/above.err")"
else
  d_bad "a read beyond the copy succeeded: the error filter did not fail the old member's reads"
fi
rc=0
wait "$rpid" || rc=$?
sed 's/^/   | /' "$D_TMP/replace2.out" "$D_TMP/replace2.err"
[[ $rc -eq 0 ]] && d_ok "replace --skip-unreadable completed" ||
  d_bad "replace --skip-unreadable exited $rc"
grep -q "lost" "$D_TMP/replace2.err" || d_bad "the command does not say the data is lost"
if [[ $(as_lines "$D_TMP/replace2.err") == "$exp2" ]]; then
  d_ok "the command lists the lost logical ranges: $(echo $exp2)"
else
  d_bad "the command lists: $(as_lines "$D_TMP/replace2.err" | tr '\n' ' '), expected $(echo $exp2)"
fi
rp_wait done --state done || d_bad "the replace is not done"
[[ $(json_lines "$D_TMP/done.json") == "$exp2" ]] ||
  d_bad "the status lists: $(json_lines "$D_TMP/done.json" | tr '\n' ' ')"
grep -q -F "\"$D_TMP/new2\"" "$RP_CONF" || d_bad "the config does not name new2"

# NEW: the old member's bytes, zeros in B1 and B2.
cp "$D_TMP/m1.back" "$D_TMP/m1.want"
for r in "$B1_at $B1_len" "$B2_at $B2_len"; do
  set -- $r
  dd if=/dev/zero of="$D_TMP/m1.want" bs=4096 seek=$(($1 / 4096)) count=$(($2 / 4096)) conv=notrunc status=none
done
rp_member_cmp "NEW's data" "$D_TMP/new2" "$D_TMP/m1.want" "$RP_DO" $((size - RP_DO))
# The volume: the data written everywhere but in the lost ranges, which
# fail with EIO (never zeros); kept in the headers, coalesced in the
# status; a write over one, or a trim, makes it good again; served
# afresh the others still fail.
# lost_check LABEL RANGES: every byte outside RANGES ("OFF LEN" lines)
# reads as the pattern, a read of any 4 KiB of each range fails with
# EIO, and the status's lost list is RANGES.
lost_check ()
{
  local label=$1 ranges=$2 rc=0
  "$RP_PY" "$RP_LIB/lost_read.py" "$RP_URI" "$D_TMP/pattern" "$ranges" || rc=$?
  [[ $rc -eq 0 ]] &&
    d_ok "$label: lost ranges fail with EIO, everything else reads back" ||
    d_bad "$label: the volume does not read as it should (above)"
  "$NBDSTRIPE" status --json "$RP_CONF" >"$D_TMP/$label.st.json"
  local got
  got=$(jq -r '.status.lost.ranges[]? | "\(.offset) \(.length)"' "$D_TMP/$label.st.json")
  [[ $got == "$ranges" ]] &&
    d_ok "$label: the status lists the lost ranges: $(echo $ranges)" ||
    d_bad "$label: the status lists lost: $(echo $got), not $(echo $ranges)"
}
exp_sorted=$(sort -n <<<"$exp2")
lost_check lost "$exp_sorted"
# prom_lost LABEL BYTES RANGES: the Prometheus file says so (10 s at
# most: it is rewritten by the health thread).
prom_lost ()
{
  local t
  for ((t = 0; t < 100; t++)); do
    grep -q "^nbdstripe_lost_bytes{.*} $2\$" "$D_TMP/vol.prom" 2>/dev/null &&
      grep -q "^nbdstripe_lost_ranges{.*} $3\$" "$D_TMP/vol.prom" && break
    sleep 0.1
  done
  grep -q "^nbdstripe_lost_bytes{.*} $2\$" "$D_TMP/vol.prom" &&
    grep -q "^nbdstripe_lost_ranges{.*} $3\$" "$D_TMP/vol.prom" &&
    d_ok "$1: Prometheus: nbdstripe_lost_bytes $2, nbdstripe_lost_ranges $3" ||
    d_bad "$1: Prometheus says: $(grep '^nbdstripe_lost' "$D_TMP/vol.prom" | tr '\n' ' ')"
}
prom_lost lost 24576 3
# The status table says it too: how many ranges, each one.
"$NBDSTRIPE" status "$RP_CONF" >"$D_TMP/lost.table" 2>&1
if grep -q "Lost : 3 ranges, 24KiB, whose data is gone" "$D_TMP/lost.table" &&
   [[ $(grep -c '^ *bytes [0-9]*-[0-9]* ([0-9]*)$' "$D_TMP/lost.table") -eq 3 ]]; then
  d_ok "nbdstripe status shows the 3 lost ranges"
else
  cat "$D_TMP/lost.table"
  d_bad "nbdstripe status does not show the lost ranges (above)"
fi
# It points to lost-files, and the command it prints is the one run
# below: the volume as status names it must be found.
target=$(sed -n 's/^ *Files touched : nbdstripe lost-files \(.*\)$/\1/p' \
  "$D_TMP/lost.table")
[[ -n $target ]] || d_bad "nbdstripe status does not point to lost-files"
# lost-files: no file system here (a pattern), so the lost byte ranges,
# the headers' (exit 1); --json's lost_ranges are the same ranges.
d_run lost-files "$NBDSTRIPE" lost-files "${target:-$RP_CONF}"
d_expect_fail lost-files
grep -q "cannot name files on this file system" "$D_TMP/lost-files.err" ||
  d_bad "lost-files: 'cannot name files' not said"
grep -q "^lost ranges of the volume (24576 bytes): $(
  sed 's/ /+/' <<<"$exp_sorted" | paste -sd, | sed 's/,/, /g')\$" \
  "$D_TMP/lost-files.out" || d_bad "lost-files: not the 3 lost ranges"
d_run lost-files.json "$NBDSTRIPE" lost-files --json "$RP_CONF"
[[ $(jq -r '.lost_ranges[] | "\(.offset) \(.length)"' \
       "$D_TMP/lost-files.json.out") == "$exp_sorted" ]] ||
  d_bad "lost-files --json: lost_ranges are not the 3 lost ranges"
# Then an ext4 written around the lost ranges (everywhere else: they stay
# lost): lost-files names exactly the files debugfs says own blocks there
# (icheck, ncheck).
mkdir -p "$D_TMP/tree"
for k in $(seq 1 50); do d_random "$D_TMP/tree/f$k" $((300000 + k * 5000)); done
truncate -s "$vsize" "$D_TMP/fs.img"
mkfs.ext4 -q -F -b 4096 -O ^has_journal -d "$D_TMP/tree" "$D_TMP/fs.img" ||
  d_fail "mkfs.ext4 -d"
"$RP_PY" - "$RP_URI" "$D_TMP/fs.img" "$exp_sorted" <<'PY' || d_fail "writing the ext4"
import nbd, sys
uri, img, ranges = sys.argv[1:4]
lost = sorted(tuple(map(int, l.split())) for l in ranges.splitlines())
data = open(img, "rb").read()
h = nbd.NBD()
h.connect_uri(uri)
pos = 0
for off, ln in lost + [(len(data), 0)]:
    while pos < off:
        n = min(1 << 20, off - pos)
        h.pwrite(data[pos:pos + n], pos)
        pos += n
    pos = max(pos, off + ln)
h.flush()
PY
cp "$D_TMP/fs.img" "$D_TMP/pattern"
lost_check ext4 "$exp_sorted"
blocks=$(while read -r off len; do
           seq $((off / 4096)) $(((off + len - 1) / 4096))
         done <<<"$exp_sorted")
inodes=$(debugfs -R "icheck $(echo $blocks)" "$D_TMP/fs.img" 2>/dev/null |
         awk 'NR > 1 && $2 ~ /^[0-9]+$/ { print $2 }' | sort -u)
want=$(debugfs -R "ncheck $(echo $inodes)" "$D_TMP/fs.img" 2>/dev/null |
       awk 'NR > 1 { print $2 }' | sed 's|^//|/|' | sort)
d_run lost-files.ext4 "$NBDSTRIPE" lost-files --json "$RP_CONF"
[[ $D_RC -eq 0 ]] || d_bad "lost-files on the ext4: exit $D_RC"
got=$(jq -r '.files[].path' "$D_TMP/lost-files.ext4.out" | sort)
if [[ -n $want && $got == "$want" ]] &&
   jq -e '[.files[].lost_bytes] | add > 0 and add <= 24576' \
     "$D_TMP/lost-files.ext4.out" >/dev/null; then
  d_ok "lost-files names the files of the lost ranges: $(echo $got)"
else
  d_bad "lost-files names [$(echo $got)], debugfs says [$(echo $want)]"
fi
# A write over the first range: good again, and no longer lost.
read -r off1 len1 <<<"$(head -1 <<<"$exp_sorted")"
d_random "$D_TMP/w1" "$len1"
dd if="$D_TMP/w1" of="$D_TMP/pattern" bs=4096 seek=$((off1 / 4096)) conv=notrunc status=none
rp_nbdsh -u "$RP_URI" -c "h.pwrite(open('$D_TMP/w1','rb').read(), $off1)" ||
  d_bad "a write over a lost range failed"
rest=$(tail -n +2 <<<"$exp_sorted")
lost_check written "$rest"
prom_lost written $((24576 - len1)) 2
# Served afresh: the rest still lost (the headers keep them).
rp_stop
rp_start vol2
lost_check restarted "$rest"
# A trim over the next one: zeros, no longer lost.
read -r off2 len2 <<<"$(head -1 <<<"$rest")"
rp_nbdsh -u "$RP_URI" -c "h.trim($len2, $off2)" || d_bad "a trim over a lost range failed"
dd if=/dev/zero of="$D_TMP/pattern" bs=4096 seek=$((off2 / 4096)) count=$((len2 / 4096)) conv=notrunc status=none
lost_check trimmed "$(tail -n +2 <<<"$rest")"
rp_stop
d_done
