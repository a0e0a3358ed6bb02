#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NEW must serve what the volume's clients were promised, or be refused
# before anything is written to it:
#
#   min-block  NEW an NBD export whose minimum block size is 4096
#              (nbdkit's blocksize-policy filter, errors for smaller
#              requests), the volume's members local files (clients were
#              promised 1 byte): the replace is refused naming NEW's
#              minimum block size; NEW's bytes are untouched; a 512-byte
#              write to the volume still works
#   no-zero    NEW an NBD export that cannot write zeroes (nbdkit's
#              nozero filter): a client's write-zeroes where the copy has
#              passed (it reaches NEW too) does not abort the replace --
#              the zeroes are written -- and NEW's file holds them.
#              "Where the copy has passed" by construction: the server
#              holds the copier at each phase (-D stripe.replace_gate=1)
#              and the test lets it go (replace_ctl.py hold) to the end
#              of its first window, writes the zeroes into that window
#              while it is held there, then lets it go to its end
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((13 * M))
RP_DO=$M
for f in m0 m1 new1 new2; do truncate -s "$size" "$D_TMP/$f"; done
d_random "$D_TMP/new1" "$size"
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1"
rp_create
rp_start vol -D stripe.replace_gate=1
d_random "$D_TMP/pattern" $((2 * (size - M)))
rp_write_pattern "$D_TMP/pattern"

# -- NEW with a 4 KiB minimum block
r_unix new1 --filter=blocksize-policy file "$D_TMP/new1" \
  blocksize-minimum=4096 blocksize-error-policy=error
before=$(d_sums "$D_TMP/new1")
d_run min-block d_ns replace --force "$RP_CONF" 0 "$R_URI"
if [[ $D_RC -ne 0 ]] && d_expect_err min-block "minimum block size" "4096"; then
  d_ok "min-block: NEW refused: $(head -1 "$D_TMP/min-block.err")"
else
  d_bad "min-block: a NEW taking 4096-byte blocks at least was accepted"
  rp_ctl hold end --deadline 60 >/dev/null
fi
d_same_sums min-block "$before" "$D_TMP/new1" &&
  d_ok "min-block: nothing written to NEW"
printf 'abc%.0s' {1..170} | head -c 512 >"$D_TMP/small"
if rp_nbdsh -u "$RP_URI" -c "h.pwrite(open('$D_TMP/small','rb').read(), 4096 * 7 + 512)"; then
  d_ok "min-block: a 512-byte write to the volume works"
else
  d_bad "min-block: a 512-byte write to the volume fails"
fi
dd if="$D_TMP/small" of="$D_TMP/pattern" bs=512 seek=$(((4096 * 7 + 512) / 512)) \
  conv=notrunc status=none

# -- NEW that cannot write zeroes
r_unix new2 --filter=nozero file "$D_TMP/new2"
rp_ctl send "{\"op\": \"replace\", \"member\": 0, \"new\": \"$R_URI\", \"force\": true}" \
  >/dev/null || d_fail "no-zero: the replace did not start"
rp_ctl hold advanced --new "$R_URI" --deadline 60 >"$D_TMP/past0.json" ||
  d_fail "no-zero: the copier was not held at the end of its first window: $(cat "$D_TMP/past0.json")"
[[ $(rp_json past0 '"\(.state) \(.phase) \(.phase_held) \(.bytes_copied)"') == \
   "copying advanced true $((4 * M))" ]] ||
  d_fail "no-zero: not held copying past the first window: $(cat "$D_TMP/past0.json")"
# 64 KiB of member 0 in window 0 (below the watermark): logical chunk 2.
zlo=$(rp_logical 0 $((M + 64 * K)))
if rp_nbdsh -u "$RP_URI" -c "h.zero(65536, $zlo)"; then
  d_ok "no-zero: the client's write-zeroes succeeded"
else
  d_bad "no-zero: the client's write-zeroes failed"
fi
dd if=/dev/zero of="$D_TMP/pattern" bs=65536 seek=$((zlo / 65536)) count=1 \
  conv=notrunc status=none
# The zeroes went in while the copier was held where it was (the copy
# running, nothing copied since): below the watermark, for both members.
rp_ctl status >"$D_TMP/zeroed.json"
[[ $(rp_json zeroed '"\(.state) \(.phase_held) \(.phase_seq) \(.bytes_copied)"') == \
   "copying true $(rp_json past0 .phase_seq) $((4 * M))" ]] &&
  d_ok "no-zero: the zeroes were written mid-copy, the copier held" ||
  d_bad "no-zero: after the zeroes, not copying with the copier held where it was: $(cat "$D_TMP/zeroed.json")"
rp_ctl hold end --deadline 60 >/dev/null || d_bad "no-zero: the copier did not end once let go"
rp_wait no-zero --state done,failed --deadline 60
if [[ $(rp_json no-zero .state) == done ]]; then
  d_ok "no-zero: the replace ended done"
else
  d_bad "no-zero: the replace ended $(rp_json no-zero .state): $(rp_json no-zero .error)"
fi
if cmp -s -n 65536 -i $((M + 64 * K)):0 "$D_TMP/new2" /dev/zero; then
  d_ok "no-zero: NEW's file holds the zeroes"
else
  d_bad "no-zero: NEW's file does not hold the zeroes"
fi
rp_same after "$D_TMP/pattern" || d_bad "no-zero: the volume lost data"
rp_stop
d_done
