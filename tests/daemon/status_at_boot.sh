#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The status file is written as soon as the volume is served, whatever
# the machine's uptime: a volume started by its unit at boot must not go
# without a status file for up to health.interval.
#
# The server runs in a time namespace of its own (unshare --time) whose
# monotonic clock reads a chosen uptime: 5 s (a machine booted a moment
# ago), 30 min (within the hour of interval = 3600) and 10 days.  With
# interval = 3600 and nothing happening on the volume, the status file must
# appear within 10 s of the server listening, say running: true, and carry
# every member.  Deterministic on any machine: the test does not depend on
# the uptime of the one it runs on.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit jq unshare python3

M=$((1024 * 1024))
# A time namespace needs CAP_SYS_ADMIN (root) and a kernel with them (5.6).
unshare --time --monotonic=0 true 2>/dev/null ||
  d_skip "cannot create a time namespace here (unshare --time)"

for m in m0 m1; do truncate -s $((8 * M)) "$D_TMP/$m"; done
for boot in 5 1800 864000; do
  name=b$boot
  conf=$D_TMP/$name.conf
  status=$D_TMP/$name.status.json
  d_conf "$conf" "$name" 64K "" "$D_TMP/m0" "$D_TMP/m1"
  printf 'health = { status_file = "%s"; interval = 3600; };\n' "$status" >>"$conf"
  d_run "create-$name" d_ns create --force "$conf"
  [[ $D_RC -eq 0 ]] || d_fail "create $conf"
  rm -f "$status"
  # The namespace's monotonic clock: CLOCK_MONOTONIC here + offset = boot.
  clock=$(python3 -c 'import time; print(int(time.monotonic()))')
  offset=$((boot - clock))
  saved=("${D_PRE[@]}")
  D_PRE=(unshare --time --monotonic="$offset" "${saved[@]}")
  d_nbdkit_start "$name" -U "$D_TMP/$name.sock" "$STRIPE_PLUGIN" \
    config="$conf" || d_fail "$name: the server did not start"
  D_PRE=("${saved[@]}")
  pid=$D_NBDKIT_PID
  # The server's own view of the clock: /proc/PID/timens_offsets.
  read -r _ secs _ < <(grep '^monotonic' "/proc/$pid/timens_offsets")
  [[ $secs -eq $offset ]] ||
    d_bad "$name: the server's monotonic offset is $secs, expected $offset"
  deadline=$((SECONDS + 10))
  # Polled with a deadline: the file is what is being waited for.
  until [[ -s $status ]] || ((SECONDS > deadline)); do sleep 0.05; done
  if [[ -s $status ]] &&
     jq -e '.running == true and (.members | length) == 2' "$status" >/dev/null
  then
    d_ok "$name: status file written at start, uptime ${boot} s as the server sees it"
  else
    d_bad "$name: no status file within 10 s of the start (uptime $boot s, interval 3600)"
  fi
  d_stop "$pid"
done
d_done
