#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What nbdstripe grow and shrink refuse, and grow --size max: each refusal
# says why, exits non-zero and writes nothing (every member file and the
# config byte for byte as before, the volume still served, its data the
# same); grow --size max takes the room of bigger members, moving nothing
# when the zones stay and moving data when they change.
#
#   md volume, none volume: refused naming the metadata and the reason
#   shrink: no --size (usage), a wrong --size (the right one given), data
#     beyond the size it would have (fstrim first), --dry-run's size
#   grow: a device that is a member already, one holding an nbdstripe
#     header (without --force), one too small
#   grow --size max: with no more room (refused); equal members grown
#     (nothing moves, the size doubles); members of other sizes grown (the
#     zones change: data moved, every byte kept)
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd sha256sum

size=$((9 * M))

# snapshot NAME FILES...: their sha256 sums into $D_TMP/NAME.sums.
snapshot () { local n=$1; shift; sha256sum "$@" >"$D_TMP/$n.sums"; }
unchanged ()
{
  local n=$1
  if sha256sum --quiet -c "$D_TMP/$n.sums" >/dev/null 2>&1; then
    d_ok "$2: nothing written (members and config as before)"
  else
    d_bad "$2: something was written"
  fi
}

# refused LABEL WANT CMD...: the command fails, its stderr says WANT.
refused ()
{
  local label=$1 want=$2
  shift 2
  d_run "$label" "$@"
  if [[ $D_RC -ne 0 ]] && grep -q -F -- "$want" "$D_TMP/$label.err"; then
    d_ok "$label: refused: $want"
  else
    d_bad "$label: exit $D_RC, expected a refusal saying: $want"
  fi
}

volume_sum () { nbdcopy "$RP_URI" - | head -c "$1" | sha256sum | cut -d' ' -f1; }

# ---- md and none ----
for meta in md none; do
  rm -f "$D_TMP"/a[0-2]
  for f in a0 a1 a2; do truncate -s "$size" "$D_TMP/$f"; done
  extra="metadata = \"$meta\";"
  [[ $meta == md ]] && extra="$extra data_offset = \"1M\";"
  rp_volume "v$meta" 64K "$extra" "$D_TMP/a0" "$D_TMP/a1"
  [[ $meta == md ]] && rp_create
  rp_start "$meta"
  snapshot "$meta" "$D_TMP"/a[0-2] "$RP_CONF"
  if [[ $meta == md ]]; then
    refused "$meta.grow" "metadata \"md\": md raid0 has no reshape of its own" \
      d_ns grow "$RP_CONF" "$D_TMP/a2"
  else
    refused "$meta.grow" "metadata \"none\": nothing on the members could record" \
      d_ns grow "$RP_CONF" "$D_TMP/a2"
  fi
  refused "$meta.shrink" "metadata \"$meta\"" \
    d_ns shrink "$RP_CONF" 1 --size $((8 * M))
  unchanged "$meta" "$meta"
  rp_stop
done

# ---- a header volume: 3 members, data in the first 20 MiB of 24 ----
rm -f "$D_TMP"/m[0-3]
for f in m0 m1 m2; do truncate -s "$size" "$D_TMP/$f"; done
truncate -s $((M + 32 * K)) "$D_TMP/m3"
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2"
rp_create
rp_start vol
d_random "$D_TMP/pattern" $((20 * M))
nbdcopy "$D_TMP/pattern" "$RP_URI" || d_fail "nbdcopy"
before=$(volume_sum $((24 * M)))
snapshot vol "$D_TMP"/m[0-3] "$RP_CONF"

refused shrink.nosize "--size BYTES" d_ns shrink "$RP_CONF" 1
refused shrink.badsize "give --size $((16 * M))" \
  d_ns shrink "$RP_CONF" 1 --size $((20 * M))
d_run shrink.dry d_ns shrink --dry-run "$RP_CONF" 2
if grep -q -- "--size $((16 * M))" "$D_TMP/shrink.dry.out"; then
  d_ok "shrink --dry-run gives the size to shrink the file system to"
else
  d_bad "shrink --dry-run did not give --size $((16 * M))"
fi
refused shrink.data "holds data at $((16 * M)), beyond the size it would have" \
  d_ns shrink "$RP_CONF" 1 --size $((16 * M))
refused grow.member "NEW $D_TMP/m1 is member 1 already" \
  d_ns grow "$RP_CONF" "$D_TMP/m1"
refused grow.small "it needs the data offset" d_ns grow "$RP_CONF" "$D_TMP/m3"
# m3 grown, holding another volume's header.
truncate -s "$size" "$D_TMP/m3"
d_conf "$D_TMP/other.conf" other 64K "" "$D_TMP/m3"
d_run other.create d_ns create "$D_TMP/other.conf"
snapshot vol "$D_TMP"/m[0-3] "$RP_CONF"
refused grow.header "holds an nbdstripe header: refusing to overwrite it (--force)" \
  d_ns grow "$RP_CONF" "$D_TMP/m3"
refused grow.sizemax "have no more room than the volume uses" \
  d_ns grow --size max "$RP_CONF"
unchanged vol "every refusal"
after=$(volume_sum $((24 * M)))
[[ $before == "$after" ]] && d_ok "the volume's data as before" ||
  d_bad "the volume's data changed"

# ---- grow --size max ----
# Equal members twice as large: the zones stay, nothing moves.
rp_stop
for f in m0 m1 m2; do truncate -s $((2 * size - M)) "$D_TMP/$f"; done
rp_start sizemax
d_run grow.max d_ns grow --wait --size max "$RP_CONF"
if [[ $D_RC -eq 0 ]] && grep -q " 0 bytes to move" "$D_TMP/grow.max.out"; then
  d_ok "grow --size max over equal members: nothing to move"
else
  d_bad "grow --size max over equal members (exit $D_RC)"
fi
rp_stop
rp_start sizemax2
got=$(nbdinfo --size "$RP_URI")
[[ $got -eq $((48 * M)) ]] && d_ok "the volume is $got bytes" ||
  d_bad "the volume is $got bytes, expected $((48 * M))"
[[ $(volume_sum $((24 * M))) == "$before" ]] && d_ok "data kept" ||
  d_bad "data changed by grow --size max"
# One member larger than the others: a zone more, data moved.
rp_stop
truncate -s $((3 * size)) "$D_TMP/m1"
rp_start sizemax3
d_run grow.max2 d_ns grow --wait --size max "$RP_CONF"
[[ $D_RC -eq 0 ]] && d_ok "grow --size max into a second zone" ||
  d_bad "grow --size max into a second zone failed"
rp_stop
rp_start sizemax4
[[ $(volume_sum $((24 * M))) == "$before" ]] &&
  d_ok "data kept across the new zone and a restart" ||
  d_bad "data changed by grow --size max (a new zone)"
# The second zone (member 1 alone) shared with member 2 once it grows:
# the zone's data moves.
d_random "$D_TMP/pattern2" $((10 * M))
"$RP_PY" -c "
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
data = open(sys.argv[2], 'rb').read()
h.pwrite(data, 48 << 20); h.flush(); h.shutdown()" "$RP_URI" "$D_TMP/pattern2"
whole=$(volume_sum $((58 * M)))
rp_stop
truncate -s $((M + 20 * M)) "$D_TMP/m2"
rp_start sizemax5
d_run grow.max3 d_ns grow --wait --size max "$RP_CONF"
if [[ $D_RC -eq 0 ]] && ! grep -q " 0 bytes to move" "$D_TMP/grow.max3.out"; then
  d_ok "grow --size max changing a zone: data moved"
else
  d_bad "grow --size max changing a zone (exit $D_RC, nothing moved?)"
fi
rp_stop
rp_start sizemax6
[[ $(volume_sum $((58 * M))) == "$whole" ]] &&
  d_ok "every byte kept across the zone change and a restart" ||
  d_bad "data changed by grow --size max (a zone changed)"
rp_stop
d_done
