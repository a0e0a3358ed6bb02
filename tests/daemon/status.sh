#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdstripe status CONFIG [--json]: the health of a served volume, read
# from the status file the plugin keeps (format: include/health.h).  No
# server runs here: status files are written by hand from the templates
# in status-fixtures/ (@PID@, @NOW@, @T0@, @RECENT@ become a live pid and
# times around now), or mutated from them.
#
#   exit 0 / 1 / 2 for an ok / degraded / failed volume (live pid, fresh)
#   exit 3, the reason on stderr naming the status file, for: no file,
#     garbage, truncated JSON, "running": false, a dead pid, updated_unix
#     older than 3 x interval + 5 s, another format, another volume's file;
#     the last figures are still shown, marked stale
#   usage errors exit 3 (2 would say "failed" to a monitoring script)
#   the table names the member that is slow, failing or failed, its path
#     and the reason; a "last errors" section
#   --json prints the file itself: jq parses it and it equals the file;
#   without a file that is a JSON object, {"state": "unknown", ...}
#   the drives side by side (wear, data written, write rate, when each
#     reaches its rated endurance, what a drive predicts; why a member
#     has none), only when the status has drive objects
#   the mkfs stripe geometry comes from the config (chunk, members), is
#     the one `nbdstripe check` prints, and is printed even without status
#   mutated files (fields deleted or retyped, huge numbers, control
#     characters, invalid UTF-8, truncation) never crash it: exit 0..3,
#     no sanitizer report, no control character reaches the terminal
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init jq

FIXTURES=$(dirname "$(realpath "$0")")/status-fixtures
STATUS=$D_TMP/fast0.status.json

# conf FILE CHUNK NR_MEMBERS [STATUS_FILE]: a config for volume fast0.
conf ()
{
  local file=$1 chunk=$2 n=$3 sf=${4:-$STATUS} i m=()
  for ((i = 0; i < n; i++)); do m+=("$D_TMP/m$i.img"); done
  d_conf "$file" fast0 "$chunk" "" "${m[@]}"
  printf 'health = { status_file = "%s"; interval = 5; };\n' "$sf" >>"$file"
}
conf "$D_TMP/fast0.conf" 256K 4
CONF=$D_TMP/fast0.conf

now () { date +%s.%N; }

# fixture NAME [PID [UPDATED]] > FILE: a template made live.
fixture ()
{
  local name=$1 pid=${2:-$$} t
  t=$(now)
  sed -e "s/@PID@/$pid/" -e "s/@NOW@/${3:-$t}/" \
      -e "s/@T0@/$(awk -v t="$t" 'BEGIN { printf "%.3f", t - 3945 }')/" \
      -e "s/@RECENT@/$(awk -v t="$t" 'BEGIN { printf "%.3f", t - 12 }')/" \
      "$FIXTURES/$name.json.in"
}

# A pid that is certainly not running: a child that has exited and been
# reaped.
( exit 0 ) &
DEAD_PID=$!
wait "$DEAD_PID"
kill -0 "$DEAD_PID" 2>/dev/null && d_skip "pid $DEAD_PID was reused at once"

# expect_rc NAME STATUS ARGS...: nbdstripe ARGS exits STATUS.
expect_rc ()
{
  local name=$1 want=$2
  shift 2
  d_run "$name" d_ns "$@"
  [[ $D_RC -eq $want ]] || d_bad "$name: exit $D_RC, expected $want"
}

# expect_out NAME STRING...: each string is in NAME's stdout.
expect_out ()
{
  local name=$1 s
  shift
  for s in "$@"; do
    grep -q -F -- "$s" "$D_TMP/$name.out" ||
      d_bad "$name: stdout does not contain: $s"
  done
}

# expect_lines NAME REGEX...: each extended regex matches a line of
# NAME's stdout.
expect_lines ()
{
  local name=$1 s
  shift
  for s in "$@"; do
    grep -q -E -- "$s" "$D_TMP/$name.out" ||
      d_bad "$name: no line of stdout matches: $s"
  done
}

# A status file (and --json) for each verdict.
for v in ok:0 degraded:1 failed:2; do
  name=${v%:*} want=${v#*:}
  fixture "$name" >"$STATUS"
  expect_rc "$name" "$want" status "$CONF"
  expect_out "$name" "State : $name" "Volume : fast0" \
    "UUID : 0b3c1e52-5c7a-4b8e-9d0f-2f1a6c3b9e71" \
    "Size : 16GiB (17179869184 bytes)" "Chunk : 256KiB (262144 bytes)" \
    "Members : 4" "Uptime : 1h 5m 45s" "Server : pid $$, running" \
    "Status file : $STATUS" "/srv/stripe/m0.img"
  grep -q -E '^ +Last update : [0-9.]+ s ago$' "$D_TMP/$name.out" ||
    d_bad "$name: no 'Last update : N s ago' line"
  [[ ! -s $D_TMP/$name.err ]] || d_bad "$name: wrote to stderr"

  expect_rc "$name.json" "$want" status --json "$CONF"
  jq -e . "$D_TMP/$name.json.out" >/dev/null ||
    d_bad "$name.json: jq cannot parse the output"
  cmp -s "$D_TMP/$name.json.out" "$STATUS" ||
    d_bad "$name.json: the output is not the status file"
  [[ $(jq -S . "$D_TMP/$name.json.out") == "$(jq -S . "$STATUS")" ]] ||
    d_bad "$name.json: the output is not the same JSON as the status file"
  # --json after CONFIG, as the synopsis of the issue wrote it.
  expect_rc "$name.json-after" "$want" status "$CONF" --json
  cmp -s "$D_TMP/$name.json-after.out" "$STATUS" ||
    d_bad "$name.json-after: the output is not the status file"
done
d_ok "ok, degraded, failed: exit 0, 1, 2; --json is the file"

# The members' rows: counters, latencies ("-" without samples), path.
fixture ok >"$STATUS"
expect_rc rows 0 status "$CONF"
grep -q -E '^ +0 ok +12034 +1\.47G +0 +30211 +3\.69G +0 3/12/40 +81 +410 +95 +900  /srv/stripe/m0\.img$' \
  "$D_TMP/rows.out" || d_bad "rows: member 0's row is not as expected"
jq '.members[0].ops.read.latency_us.p50 = null
    | .members[0].ops.read.latency_us.p99 = null' "$STATUS" >"$STATUS.new"
mv "$STATUS.new" "$STATUS"
expect_rc rows-null 0 status "$CONF"
grep -q -E '^ +0 ok +12034 .* 3/12/40 +- +- +95 +900  /srv/stripe/m0\.img$' \
  "$D_TMP/rows-null.out" || d_bad "rows-null: null latencies are not shown as -"

# The table says which member is not ok, where it is, and why.
fixture degraded >"$STATUS"
expect_rc degraded-names 1 status "$CONF"
# (12 s ago when the fixture was written; the sanitizer build is slow.)
expect_lines degraded-names \
  "member 1 failing for 1[2-9]\.[0-9] s: read error EIO at member offset 1048576 \(1 in a row\) \(/srv/stripe/m1\.img\)$" \
  "member 2 slow for 1[2-9]\.[0-9] s: read median 4100 us is 5\.1 x its peers' 800 us \(64K-512K reads\) \(/srv/stripe/m2\.img\)$" \
  "^Last errors:$" \
  "^  member 1: read EIO \(errno 5, Input/output error\) at member offset 1048576, 1[2-9] s ago$"
grep -q -E '^ +2 slow +8000 .* 4100 +9800 ' "$D_TMP/degraded-names.out" ||
  d_bad "degraded-names: member 2's row does not show its read latency"
fixture failed >"$STATUS"
expect_rc failed-names 2 status "$CONF"
expect_lines failed-names \
  "member 3 failed for 1[2-9]\.[0-9] s: 8 consecutive errors \(last: EIO on write\) \(/srv/stripe/m3\.img\)$" \
  "^  member 3: write EIO \(errno 5, Input/output error\) at member offset 2199023255552, 1[2-9] s ago$"
grep -q -E '^ +3 failed +5000 .* 8 .* 3e\+07  /srv/stripe/m3\.img$' \
  "$D_TMP/failed-names.out" || d_bad "failed-names: member 3's row is not as expected"
# A volume state better than its members' says is not believed.
jq '.volume.state = "ok"' "$STATUS" >"$STATUS.new" && mv "$STATUS.new" "$STATUS"
expect_rc failed-member-volume-ok 2 status "$CONF"
d_ok "the table names the member, its path and the reason"

# A replace, from the file (no control socket beside it): one line.
fixture ok | jq '.replace = {"state": "copying", "member": 1,
  "old": "/srv/stripe/m1.img", "new": "/dev/sdc", "bytes_copied": 1288490188,
  "bytes_total": 3435973836, "rate": 429916160.0, "eta_seconds": 4.6,
  "elapsed_seconds": 3.0, "unreadable": []}' >"$STATUS"
expect_rc replace-copying 0 status "$CONF"
grep -q -x -E ' +Replace : member 1 -> /dev/sdc: copying, 37% \(1\.2GiB of 3\.2GiB\), 410MiB/s, ETA 5 s' \
  "$D_TMP/replace-copying.out" || d_bad "replace-copying: no Replace line as expected"
if grep -q 'Control socket' "$D_TMP/replace-copying.out"; then
  d_bad "replace-copying: a Control socket line without a socket"
fi
expect_rc replace-copying.json 0 status --json "$CONF"
cmp -s "$D_TMP/replace-copying.json.out" "$STATUS" ||
  d_bad "replace-copying.json: the output is not the status file"
jq '.replace.state = "failed" | del(.replace.eta_seconds)
  | .replace.error = "the new member (/dev/sdc) failed: write at offset 0: EIO"
  | .replace.unreadable = [{"offset": 0, "length": 4096}]' "$STATUS" >"$STATUS.new"
mv "$STATUS.new" "$STATUS"
expect_rc replace-failed 0 status "$CONF"
grep -q -x -E ' +Replace : member 1 -> /dev/sdc: failed, 37% \(1\.2GiB of 3\.2GiB\), 410MiB/s, in 3\.0 s, 1 unreadable range: the new member \(/dev/sdc\) failed: write at offset 0: EIO' \
  "$D_TMP/replace-failed.out" || d_bad "replace-failed: no Replace line as expected"
d_ok "a replace in the status file: the Replace line"

# The drives side by side: wear, written, rate, when each reaches its
# rated endurance, and what a drive predicts; a member without a drive
# says why.  A status without drive objects (an older server) has no
# such section.
if grep -q '^Drives' "$D_TMP/rows.out"; then
  d_bad "rows: a Drives section without drive objects"
fi
fixture ok | jq '.health.drive_interval = 600
  | .members[0].drive = {"available": true, "kind": "nvme",
      "temperature_celsius": 41, "percentage_used": 30,
      "available_spare": 100, "available_spare_threshold": 10,
      "data_written_bytes": 3000000000000, "predicts_failure": null,
      "wear": {"write_rate_bytes_per_second": 10000000,
               "rated_endurance_bytes": 10000000000000,
               "seconds_to_rated_endurance": 700000,
               "estimate": "estimated"}}
  | .members[1].drive = {"available": true, "kind": "nvme",
      "temperature_celsius": 44, "percentage_used": 31,
      "available_spare": 8, "available_spare_threshold": 10,
      "data_written_bytes": 3100000000000,
      "predicts_failure": "predicted: available spare 8% < threshold 10%",
      "wear": {"write_rate_bytes_per_second": null,
               "rated_endurance_bytes": 10000000000000,
               "seconds_to_rated_endurance": null,
               "estimate": "no_write_rate"}}
  | .members[2].drive = {"available": false,
      "reason": "/dev/sdc: SMART READ DATA: Input/output error",
      "kind": "ata", "temperature_celsius": 30, "percentage_used": 100,
      "available_spare": null, "data_written_bytes": null,
      "smart_status": "passed", "predicts_failure": null,
      "wear": {"write_rate_bytes_per_second": 0,
               "rated_endurance_bytes": null,
               "seconds_to_rated_endurance": 0, "estimate": "reached"}}
  | .members[3].drive = {"available": false,
      "reason": "a loop device (over /srv/l.img): no drive of its own"}' \
  >"$STATUS"
expect_rc drives 0 status "$CONF"
expect_lines drives \
  '^Drives \(read every 600 s; wear at the recent write rate\):$' \
  '^ +0 nvme +41C +30% +100%/10% +2\.728TiB +9\.537MiB/s +9\.095TiB  in 8 days +ok$' \
  '^ +1 nvme +44C +31% +8%/10% +2\.819TiB +- +9\.095TiB  - +predicted: available spare 8% < threshold 10%$' \
  '^ +2 ata +30C +100% +- +- +0 bytes/s +-  reached +ok \(now unreadable: /dev/sdc: SMART READ DATA: Input/output error\)$' \
  '^ +3 - +not available: a loop device \(over /srv/l\.img\): no drive of its own$'
d_ok "drives side by side: used, written, rate, endurance, when, health"

# The mkfs geometry: from the config, the lines `check` prints, and there
# without any status.
for m in 0 1 2 3; do truncate -s 16M "$D_TMP/m$m.img"; done
d_run create d_ns create "$CONF"
[[ $D_RC -eq 0 ]] || d_fail "create: exit $D_RC"
expect_rc check 0 check "$CONF"
fixture ok >"$STATUS"
expect_rc geometry 0 status "$CONF"
geometry='  mkfs.ext4 -b 4096 -E stride=64,stripe_width=256
  mkfs.xfs -d su=256k,sw=4'
[[ $(grep "^  mkfs\." "$D_TMP/check.out") == "$geometry" ]] ||
  d_bad "check: the geometry is not: $geometry"
[[ $(grep "^  mkfs\." "$D_TMP/geometry.out") == "$geometry" ]] ||
  d_bad "geometry: status does not print the geometry check prints"
expect_out geometry "Stripe geometry for mkfs (chunk 256KiB, 4 members):"
conf "$D_TMP/small.conf" 64K 3 "$D_TMP/none.status.json"
expect_rc geometry-no-status 3 status "$D_TMP/small.conf"
[[ $(grep "^  mkfs\." "$D_TMP/geometry-no-status.out") == '  mkfs.ext4 -b 4096 -E stride=16,stripe_width=48
  mkfs.xfs -d su=64k,sw=3' ]] ||
  d_bad "geometry-no-status: not the geometry of a 64K chunk over 3 members"
d_ok "mkfs geometry from the config, as check prints it"

# Exit 3 and why, naming the status file.
# unknown NAME WHY FIGURES JSON: status exits 3 and says WHY on stderr
# with the status file's name.  FIGURES: the table still shows the last
# figures marked stale (stale), figures (shown) or none (no).  JSON:
# --json prints the file (file: it is a JSON object) or, when there is
# none, still JSON: {"state": "unknown", "reason": WHY, ...} (none).
unknown ()
{
  local name=$1 why=$2 figures=$3 json=$4
  expect_rc "$name" 3 status "$CONF"
  d_expect_err "$name" "$STATUS" "$why"
  expect_out "$name" "mkfs.ext4 -b 4096 -E stride=64,stripe_width=256"
  case $figures in
  stale) expect_out "$name" "STALE" "/srv/stripe/m0.img" ;;
  shown) expect_out "$name" "/srv/stripe/m0.img" ;;
  *) ! grep -q -F "/srv/stripe/m0.img" "$D_TMP/$name.out" ||
       d_bad "$name: shows figures it cannot read" ;;
  esac
  expect_rc "$name.json" 3 status --json "$CONF"
  d_expect_err "$name.json" "$STATUS" "$why"
  if [[ $json == file ]]; then
    cmp -s "$D_TMP/$name.json.out" "$STATUS" ||
      d_bad "$name.json: the output is not the status file"
  elif ! jq -e --arg why "$why" --arg file "$STATUS" \
         '.state == "unknown" and .volume.state == "unknown"
          and (.reason | contains($why)) and .status_file == $file' \
         "$D_TMP/$name.json.out" >/dev/null; then
    d_bad "$name.json: not {\"state\": \"unknown\", \"reason\": ...$why...}"
  fi
}

rm -f "$STATUS"
unknown missing "does not exist" no none
printf 'hello, world\n' >"$STATUS"
unknown garbage "not valid JSON" no none
fixture degraded | head -c 2000 >"$STATUS"
unknown truncated "not valid JSON" no none
: >"$STATUS"
unknown empty "not valid JSON" no none
printf '[1, 2, 3]\n' >"$STATUS"
unknown not-an-object "not a JSON object" no none
fixture ok | sed 's/"running": true/"running": false/' >"$STATUS"
unknown stopped '"running": false' stale file
expect_out stopped "Server : pid $$, stopped"
fixture ok "$DEAD_PID" >"$STATUS"
unknown dead-pid "the server (pid $DEAD_PID) is not running" stale file
expect_out dead-pid "Server : pid $DEAD_PID, not running"
fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 21 }')" >"$STATUS"
unknown old "s ago, more than 3 x interval (5 s) + 5 s" stale file
d_expect_err old "stale: last updated 2"
fixture ok | sed 's/"format": 1/"format": 2/' >"$STATUS"
unknown format-2 "format 2, expected 1" no file
fixture ok | sed '/"format": 1,/d' >"$STATUS"
unknown no-format 'no valid "format" field' no file
fixture ok | sed 's/"name": "fast0"/"name": "slow1"/' >"$STATUS"
unknown other-volume "the status of volume 'slow1', not of 'fast0'" stale file
fixture ok | sed 's/"pid": [0-9]*/"pid": 0/' >"$STATUS"
unknown pid-0 'no valid "pid" field' stale file
fixture ok | jq '.volume.state = "fine"' >"$STATUS"
unknown volume-state "no valid volume state" shown file
fixture ok | sed 's/"running": true/"running": true, "x": NaN/' >"$STATUS"
unknown nan "not valid JSON" no none
fixture ok | sed 's|/srv/stripe/m0.img|/srv/\xff.img|' >"$STATUS"
unknown invalid-utf8 "not valid JSON" no none
mkfifo "$STATUS.fifo"
conf "$D_TMP/fifo.conf" 256K 4 "$STATUS.fifo"
d_run fifo timeout 20 "$NBDSTRIPE" status "$D_TMP/fifo.conf"
[[ $D_RC -eq 3 ]] || d_bad "fifo: exit $D_RC, expected 3"
d_expect_err fifo "$STATUS.fifo: not a regular file"

# Freshness is relative to the file's interval: 100 s is fresh at 60 s.
fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 100 }')" |
  sed 's/"interval": 5/"interval": 60/' >"$STATUS"
expect_rc interval-60 0 status "$CONF"
fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 10 }')" >"$STATUS"
expect_rc ten-seconds-old 0 status "$CONF"
d_ok "missing, invalid, stopped, dead, stale, foreign: exit 3 and why"

# The command line: usage errors exit 3, --help 0.
expect_rc help 0 status --help
expect_out help "Usage: nbdstripe status"
expect_rc no-config 3 status
d_expect_err no-config "Usage: nbdstripe status"
expect_rc bad-option 3 status --frobnicate "$CONF"
d_expect_err bad-option "Usage: nbdstripe status"
expect_rc two-configs 3 status "$CONF" "$CONF"
d_expect_err two-configs "Usage: nbdstripe status"
expect_rc no-such-config 3 status "$D_TMP/no-such.conf"
d_expect_err no-such-config "$D_TMP/no-such.conf"
expect_rc main-help 0 --help
grep -q -E '^ +status ' "$D_TMP/main-help.out" || d_bad "--help does not list 'status'"
d_ok "usage errors exit 3"

# Strings reach the terminal escaped.
fixture failed | jq '.members[3].path = "/dev/\u001b[2J\u001b]0;pwned\u0007x"
  | .members[3].reason = "line\nbreak\r\u0000nul \u009b31m \u202egnp.exe\\"' \
  >"$STATUS"
expect_rc escapes 2 status "$CONF"
expect_out escapes '/dev/\u001b[2J\u001b]0;pwned\u0007x' \
  'line\u000abreak\u000d\u0000nul \u009b31m \u202egnp.exe\\'
if tr -d '\n' <"$D_TMP/escapes.out" | LC_ALL=C grep -q '[[:cntrl:]]'; then
  d_bad "escapes: a control character reached stdout"
fi
d_ok "control characters are escaped"

# Mutations of a valid file: whatever the damage, exit 0..3, no crash, no
# sanitizer report, no control character on stdout.
mutations=(
  'del(.volume)' 'del(.members)' 'del(.health)' 'del(.pid)'
  'del(.updated_unix)' 'del(.interval)' 'del(.running)' 'del(.volume.state)'
  'del(.members[3].ops)' 'del(.members[3].last_error.op)'
  'del(.members[3].ops.read.latency_us)' 'del(.members[].index)'
  '.volume = "x"' '.volume = null' '.members = 5' '.members = {}'
  '.members[0] = 7' '.members[0] = null' '.members[3].ops.read = []'
  '.members[3].ops.read.latency_us.p50 = "x"'
  '.members[3].ops.write.latency_us = 3' '.members[3].last_error = "x"'
  '.members[3].last_error.errno = -5' '.members[3].last_error.errno = 1e300'
  '.members[3].last_error.errno = 99999999999'
  '.members[3].last_error.error = null'
  '.members[3].last_error.error = null | .members[3].last_error.errno = 100000'
  '.members[3].last_error.time_unix = -1e308' '.members[3].state = 42'
  '.members[3].state_since_unix = 1e308' '.members[3].state_since_unix = "now"'
  '.volume.size = 1e308' '.volume.size = -1' '.volume.size = 1.5'
  '.volume.chunk = true' '.volume.members = -3' '.volume.uptime_seconds = 1e300'
  '.volume.uptime_seconds = -5' '.volume.uuid = null' '.volume.uuid = 3'
  '.volume.name = 7' '.members[3].ops.read.requests = -1'
  '.members[3].ops.read.bytes = 1e19' '.members[3].ops.read.bytes = 1e300'
  '.members[3].ops.read.latency_us.p99 = -1'
  '.members[3].ops.read.latency_us.p99 = 1e308'
  '.updated_unix = 1e300' '.updated_unix = -1e300' '.updated_unix = "soon"'
  '.pid = -1' '.pid = 1e300' '.pid = "1"' '.pid = 4294967296' '.pid = 1.5'
  '.interval = 0' '.interval = -5' '.interval = 1e9' '.interval = null'
  '.running = "yes"' '.running = 1' '.format = "1"' '.format = 1.0'
  '.health.window = "ten"'
  '.members[3].path = ([range(20000) | "\u001b"] | join(""))'
  '.members[3].reason = ([range(5000) | "\u00e9\u202e"] | join(""))'
  '.members[3].last_error.message = "\ud800\udfff\u0000"'
  '.members[3].state = "\u009b\u0007failed"'
  '.members = [range(1000) as $i | .members[0] | .index = $i]'
  '.members[3].ops.read = ([range(100)] | reduce .[] as $x (1; [.]))'
  '.replace = 5' '.replace = {}' '.replace = {"state": 3, "member": -1}'
  '.replace = {"state": "copying", "bytes_copied": 20, "bytes_total": 10,
     "rate": -1, "eta_seconds": -1, "elapsed_seconds": "x"}'
  '.replace = {"state": "copying", "bytes_copied": 1e300, "bytes_total": 1e308,
     "rate": 1e308, "eta_seconds": 1e308, "member": 1e300}'
  '.replace = {"state": "done", "bytes_copied": 0, "bytes_total": 0,
     "elapsed_seconds": 1e300, "unreadable": 7}'
  '.replace = {"state": "\u001b[2J", "new": ([range(5000) | "\u202e"] | join("")),
     "error": ([range(5000) | "\u001b"] | join("")), "unreadable": [range(100)]}'
  '.members[3].drive = 5' '.members[3].drive = {"kind": 7}'
  '.members[3].drive = {"kind": "nvme", "temperature_celsius": 1e308,
     "percentage_used": -1, "available_spare": 1e300,
     "available_spare_threshold": "x", "data_written_bytes": 1e300,
     "wear": {"write_rate_bytes_per_second": -1e308,
              "rated_endurance_bytes": 1e19, "estimate": "estimated",
              "seconds_to_rated_endurance": 1e308}}'
  '.members[3].drive = {"kind": "\u001b[2J", "available": "no",
     "reason": ([range(5000) | "\u001b"] | join("")),
     "predicts_failure": ([range(5000) | "\u202e"] | join("")),
     "wear": 3}'
  '.members[3].drive = {"kind": "ata", "available": false, "reason": 4,
     "smart_status": "failing", "wear": {"estimate": "estimated",
     "seconds_to_rated_endurance": -1}}'
  '.health.drive_interval = "x" | .members[0].drive = {"kind": "nvme"}'
)
i=0
for m in "${mutations[@]}"; do
  i=$((i + 1))
  fixture failed | jq "$m" >"$STATUS.$i" 2>"$D_TMP/jq.err" ||
    { d_bad "mutation $i: jq '$m' failed: $(<"$D_TMP/jq.err")"; continue; }
  cp "$STATUS.$i" "$STATUS"
  for json in "" --json; do
    D_RC=0
    "$NBDSTRIPE" status $json "$CONF" >"$D_TMP/mut.out" 2>"$D_TMP/mut.err" ||
      D_RC=$?
    if [[ $D_RC -gt 3 ]] ||
       grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/mut.err"; then
      d_bad "mutation $i ($m) $json: exit $D_RC"
      sed 's/^/   | /' "$D_TMP/mut.err" | head -40
    fi
    if [[ -z $json ]] &&
       tr -d '\n' <"$D_TMP/mut.out" | LC_ALL=C grep -q '[[:cntrl:]]'; then
      d_bad "mutation $i ($m): a control character reached stdout"
    fi
  done
done
# And damage at the byte level: truncation anywhere, bytes flipped.
fixture failed >"$STATUS.good"
size=$(stat -c %s "$STATUS.good")
# (The last byte is a newline: without it the file is still JSON.)
for cut in 0 1 2 17 100 333 1000 2500 5000 $((size - 3)) $((size - 2)); do
  head -c "$cut" "$STATUS.good" >"$STATUS"
  D_RC=0
  "$NBDSTRIPE" status "$CONF" >"$D_TMP/mut.out" 2>"$D_TMP/mut.err" || D_RC=$?
  [[ $D_RC -eq 3 ]] || d_bad "truncated at $cut: exit $D_RC, expected 3"
  grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/mut.err" &&
    d_bad "truncated at $cut: sanitizer report"
done
for off in 0 1 10 50 200 400 800 1600 3200 6400; do
  for byte in '\x00' '\xff' '\x1b' '"' '}' '\\'; do
    cp "$STATUS.good" "$STATUS"
    printf "$byte" | dd of="$STATUS" bs=1 seek="$off" conv=notrunc status=none
    D_RC=0
    "$NBDSTRIPE" status "$CONF" >"$D_TMP/mut.out" 2>"$D_TMP/mut.err" || D_RC=$?
    if [[ $D_RC -gt 3 ]] ||
       grep -E -q 'AddressSanitizer|LeakSanitizer|runtime error:' "$D_TMP/mut.err"; then
      d_bad "byte $byte at $off: exit $D_RC"
      sed 's/^/   | /' "$D_TMP/mut.err" | head -40
    fi
  done
done
d_ok "$i mutated files and byte-level damage: no crash"
d_done
