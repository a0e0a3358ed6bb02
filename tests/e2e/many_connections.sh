#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# 1,100 clients at once, each with 16 reads in flight that span two
# members: every request succeeds.  nbdkit runs 16 threads per connection
# (17,600 here); with an io_uring ring in every one, the rings and the
# threads' stacks together ran out of memory mappings (vm.max_map_count)
# and requests failed with ENOMEM (c876f37: 32 of 17,600).  Rings are now
# created only where a request needs one, up to a cap.
here=$(dirname "$(realpath "$0")")
source "$here/../lib/daemon.sh" || exit 1
d_init nbdkit
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
# Descriptors: the server needs one per connection and one per ring; with
# too few, ring creation fails (EMFILE) before memory mappings run out,
# which would hide what this test is about.
ulimit -n 32768 2>/dev/null || ulimit -n "$(ulimit -Hn)"
(( $(ulimit -n) >= 20000 )) || d_skip "cannot raise the open file limit to 20000"

# A sanitizer runtime maps memory of its own for every thread: 17,600
# threads exhaust vm.max_map_count there whatever the plugin does.  Under
# a sanitizer the test still runs, with fewer clients.
N=1100
[[ -z ${STRIPE_LD_PRELOAD:-} ]] || N=200

M=$((1024 * 1024))
truncate -s $((64 * M)) "$D_TMP/m0" "$D_TMP/m1"
# The delay filter holds each read 20 ms before the plugin runs it, so
# that all 16 threads of every connection run one at once.
d_nbdkit_start s -U "$D_TMP/s.sock" --filter=delay "$STRIPE_PLUGIN" \
  rdelay=20ms chunk=64K file="$D_TMP/m0" file="$D_TMP/m1" || d_fail "nbdkit"
d_run many "$PY" "$here/../lib/many_connections.py" \
  "nbd+unix:///?socket=$D_TMP/s.sock" "$N"
[[ $D_RC -eq 0 ]] && d_ok "$N connections x 16 requests, no error" ||
  d_bad "requests failed with $N connections (above)"
d_done
