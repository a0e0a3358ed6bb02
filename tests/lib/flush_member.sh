#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# An nbdkit sh plugin: a member that says when it syncs, and whose syncs
# a test can hold and make fail.  For the tests of which members a FLUSH
# syncs (tests/integration/flush.sh, tests/replace/flush.sh).
#
#   nbdkit sh tests/lib/flush_member.sh dir=DIR
#
# DIR/data is the member's content (its size is the export's).  Every
# write, zero and trim, once done, and every flush, when it starts and
# when it ends, appends one line to DIR/log (one write(2) with O_APPEND:
# lines from concurrent requests never mix, and their order is the order
# of the events):
#
#   write OFFSET COUNT FLAGS     the data is in DIR/data
#   zero OFFSET COUNT FLAGS
#   trim OFFSET COUNT FLAGS
#   flush-start ID               a sync has begun (ID: its own)
#   flush-end ID                 ... and succeeded
#   flush-fail ID                ... and failed (EIO)
#
# While DIR/hold exists, a flush that has started waits (after its
# flush-start line); while DIR/fail exists, a flush fails with EIO.
# While DIR/hold-write exists, a write waits before it lands, after a
# line "write-held OFFSET COUNT".
# FLAGS is nbdkit's ("fua", "may_trim", ...; "-" for none).  Requests
# run in parallel; the server advertises FUA (native), multi-conn,
# trim and zero.

d=
[[ -f $tmpdir/dir ]] && d=$(<"$tmpdir/dir")

log () { printf '%s\n' "$*" >>"$d/log"; }

case "$1" in
  config)
    if [[ $2 != dir ]]; then
      echo "unknown parameter $2" >&2
      exit 1
    fi
    printf '%s\n' "$3" >"$tmpdir/dir" ;;
  config_complete)
    [[ -f $(<"$tmpdir/dir")/data ]] || { echo "dir=: no DIR/data" >&2; exit 1; } ;;
  thread_model) echo parallel ;;
  get_size) stat -L -c %s "$d/data" ;;
  can_write | can_flush | can_trim | can_zero | can_multi_conn) exit 0 ;;
  can_fua) echo native ;;
  pread)
    dd if="$d/data" iflag=skip_bytes,count_bytes skip="$4" count="$3" \
      status=none ;;
  pwrite)
    if [[ -e $d/hold-write ]]; then
      log write-held "$4" "$3"
      while [[ -e $d/hold-write ]]; do sleep 0.01; done
    fi
    dd of="$d/data" bs="$3" count=1 iflag=fullblock oflag=seek_bytes \
      seek="$4" conv=notrunc status=none || exit 1
    log write "$4" "$3" "${5:--}" ;;
  zero)
    dd if=/dev/zero of="$d/data" bs="$3" count=1 oflag=seek_bytes \
      seek="$4" conv=notrunc status=none || exit 1
    log zero "$4" "$3" "${5:--}" ;;
  trim) log trim "$4" "$3" "${5:--}" ;;
  flush)
    log flush-start $$
    while [[ -e $d/hold ]]; do sleep 0.01; done
    if [[ -e $d/fail ]]; then
      log flush-fail $$
      echo "EIO flush refused (DIR/fail exists)" >&2
      exit 1
    fi
    log flush-end $$ ;;
  *) exit 2 ;;
esac
