#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A FLUSH syncs the members that hold writes completed before it, on any
# connection, and only those (include/dirty.h).  Four remote members, each
# a stock nbdkit running tests/lib/flush_member.sh, which logs every write
# landed and every sync started and ended, and holds or fails syncs on
# demand; the volume is the plugin over them (ad hoc, chunk 64K).
# tests/integration/flush.py, from 4 connections:
#
#   - a flush with nothing written, or nothing since the last flush,
#     syncs no member; after a write on one member (another connection),
#     that member only; FUA writes need no sync; zeroes, trims and writes
#     across members mark the members they touched;
#   - a write that lands while a member's sync is held: a flush started
#     after it returns only after a sync that started after the write
#     (not the held one) has ended, and with no flush racing, the next
#     flush syncs the member again (the mark is cleared before a sync,
#     not after);
#     a flush with nothing written since a running sync relies on it;
#     a write held at the member while a flush syncs it is synced by the
#     next flush (the mark is set once the write has completed);
#   - a sync that fails fails the flush (EIO) and the member stays dirty:
#     the next flushes sync it again until it succeeds; a flush relying on
#     the failed sync fails too;
#   - 4 connections writing to members at random and flushing: every
#     flush covers every write answered before it started.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1
d_init nbdkit dd
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || d_skip "python3-libnbd is not installed"
LIB=$(realpath "$(dirname "$0")/../lib")
HERE=$(realpath "$(dirname "$0")")

uris=()
for i in 0 1 2 3; do
  mkdir "$D_TMP/m$i"
  truncate -s 8M "$D_TMP/m$i/data"
  : >"$D_TMP/m$i/log"
  r_unix "m$i" sh "$LIB/flush_member.sh" dir="$D_TMP/m$i"
  uris+=("file=$R_URI")
done
d_nbdkit_start vol -U "$D_TMP/vol.sock" "$STRIPE_PLUGIN" chunk=64K \
  "${uris[@]}" || d_fail "the volume's nbdkit did not start"

if "$PY" "$HERE/flush.py" "nbd+unix:///?socket=$D_TMP/vol.sock" 65536 \
     "$D_TMP"/m{0,1,2,3}; then
  d_ok "flush.py: every check passed"
else
  d_bad "flush.py (above)"
  for i in 0 1 2 3; do printf -- '-- member %d log (tail):\n' "$i"; tail -20 "$D_TMP/m$i/log"; done
fi
d_done
