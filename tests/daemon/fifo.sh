#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A FIFO hangs nothing.  Opening a FIFO for reading waits for a writer:
# a FIFO given as a member, or as the config file, must be refused at
# once by check, serve, create, inspect and the plugin -- not block them.
# (c876f37: every one of them blocked for ever.)  Each command gets 10 s.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit timeout

M=$((1024 * 1024))
truncate -s $((4 * M)) "$D_TMP/m0"
mkfifo "$D_TMP/fifo" "$D_TMP/conf.fifo"
d_conf f.conf ff 64K "socket = \"$D_TMP/f.sock\"; pidfile = \"$D_TMP/f.pid\";" \
  "$D_TMP/m0" "$D_TMP/fifo"

for cmd in check create serve; do
  d_run "member.$cmd" timeout 10 "${D_PRE[@]}" "$NBDSTRIPE" "$cmd" f.conf
  d_expect_fail "member.$cmd"
  d_expect_err "member.$cmd" "member 1 ($D_TMP/fifo): a FIFO, not a regular file or a block device"
done
d_run member.inspect timeout 10 "$NBDSTRIPE" inspect "$D_TMP/fifo"
d_expect_fail member.inspect
d_expect_err member.inspect "a FIFO, not a regular file or a block device"
d_run member.plugin timeout 10 "${D_PRE[@]}" nbdkit -U - "$STRIPE_PLUGIN" \
  file="$D_TMP/m0" file="$D_TMP/fifo" --run true
d_expect_fail member.plugin
d_expect_err member.plugin "member 1 ($D_TMP/fifo): a FIFO, not a regular file or a block device"

for cmd in check serve; do
  d_run "config.$cmd" timeout 10 "${D_PRE[@]}" "$NBDSTRIPE" "$cmd" "$D_TMP/conf.fifo"
  d_expect_fail "config.$cmd"
  d_expect_err "config.$cmd" "$D_TMP/conf.fifo: is a FIFO, expected a volume config file"
done
d_run config.plugin timeout 10 "${D_PRE[@]}" nbdkit -U - "$STRIPE_PLUGIN" \
  "config=$D_TMP/conf.fifo" --run true
d_expect_fail config.plugin
d_expect_err config.plugin "$D_TMP/conf.fifo: is a FIFO, expected a volume config file"

d_done
