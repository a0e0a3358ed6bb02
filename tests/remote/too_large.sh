#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A volume larger than NBD can say is refused at start, naming the limit.
# NBD sizes and offsets are signed 64-bit in nbdkit and most clients:
# members adding up to 2^63 bytes or more (two 6 EiB NBD exports from
# nbdkit's null plugin) must not start a server that then fails every
# connection (c876f37 did), but be refused before anything is served.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdinfo

for i in 0 1; do
  d_nbdkit_start "s$i" -U "$D_TMP/s$i.sock" null size=6E ||
    d_fail "member server $i"
done
d_run huge d_nbdkit -U - "$STRIPE_PLUGIN" \
  "file=nbd+unix:///?socket=$D_TMP/s0.sock" \
  "file=nbd+unix:///?socket=$D_TMP/s1.sock" --run 'nbdinfo --size "$uri"'
d_expect_fail huge
d_expect_err huge "the members add up to 13835058055282163712 bytes: a volume can be at most 9223372036854775807 bytes"

# One such member alone is fine (6 EiB < 2^63).
d_run one d_nbdkit -U - "$STRIPE_PLUGIN" \
  "file=nbd+unix:///?socket=$D_TMP/s0.sock" --run 'nbdinfo --size "$uri"'
[[ $D_RC -eq 0 ]] && grep -q -x 6917529027641081856 "$D_TMP/one.out" &&
  d_ok "a 6 EiB volume of one member is served" ||
  d_bad "a 6 EiB volume of one member was not served"

d_done
