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
#   --json prints one object of the same keys whatever there is (state,
#     reason, name, config, status_file, source, status): its "state" is
#     the verdict the exit status gives (ok, degraded, failed;
#     not-running, stale, unknown for 3), "reason" why (the members not
#     ok; the surest reason the status cannot be trusted), "status" the
#     file itself (null without a JSON object); never "ok" for a volume
#     that is not served, whatever the file's last words say
#   the man page's monitoring example, run as it is written there, prints
#     the verdict
#   the drives side by side (wear, data written, write rate, when each
#     reaches its rated endurance, what a drive predicts; why a member
#     has none), only when the status has drive objects
#   the mkfs stripe geometry comes from the config (chunk, members), is
#     the one `nbdstripe check` prints, and is printed even without status
#   mutated files (fields deleted or retyped, huge numbers, control
#     characters, invalid UTF-8, truncation) never crash it: exit 0..3,
#     no sanitizer report, no control character reaches the terminal,
#     --json keeps its shape
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

# The keys of status --json, whatever there is to say.
KEYS='["config","error","name","ok","reason","source","state","status","status_file"]'

# expect_json NAME STATE FILTER: NAME's stdout is status --json's one
# shape, its state STATE, and the jq FILTER holds.
expect_json ()
{
  local name=$1 state=$2 filter=$3
  jq -e --argjson keys "$KEYS" --arg state "$state" \
    '(keys == $keys) and .state == $state and .ok == (.state == "ok")
     and .error == (if .ok then null else .reason end)' \
    "$D_TMP/$name.out" >/dev/null ||
    { d_bad "$name: not the keys $KEYS with state \"$state\": $(jq -c 'del(.status)' "$D_TMP/$name.out" 2>&1 | head -c 300)"
      return; }
  jq -e --arg conf "$CONF" --arg file "$STATUS" "$filter" \
    "$D_TMP/$name.out" >/dev/null ||
    d_bad "$name: not true of its JSON: $filter: $(jq -c 'del(.status)' "$D_TMP/$name.out" 2>&1 | head -c 300)"
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
  expect_json "$name.json" "$name" '.name == "fast0" and .config == $conf
    and .status_file == $file and .source == "status_file"'
  [[ $(jq -S .status "$D_TMP/$name.json.out") == "$(jq -S . "$STATUS")" ]] ||
    d_bad "$name.json: its status is not the same JSON as the status file"
  # --json after CONFIG, as the synopsis of the issue wrote it.
  expect_rc "$name.json-after" "$want" status "$CONF" --json
  cmp -s "$D_TMP/$name.json-after.out" "$D_TMP/$name.json.out" ||
    d_bad "$name.json-after: not what --json before CONFIG prints"
done
expect_json ok.json ok '.reason == null'
expect_json degraded.json degraded '.reason == "member 1 failing: read error EIO at member offset 1048576 (1 in a row); member 2 slow: read median 4100 us is 5.1 x its peers'"'"' 800 us (64K-512K reads)"'
expect_json failed.json failed '.reason | startswith("member 3 failed: 8 consecutive errors (last: EIO on write)")'
d_ok "ok, degraded, failed: exit 0, 1, 2; --json's state and reason the same, the file under status"

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
expect_out failed-member-volume-ok "State : failed (the server says ok)"
expect_rc failed-member-volume-ok.json 2 status --json "$CONF"
expect_json failed-member-volume-ok.json failed \
  '(.reason | startswith("member 3 failed: ")) and .status.volume.state == "ok"'
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
expect_json replace-copying.json ok '.status.replace.state == "copying"'
[[ $(jq -S .status "$D_TMP/replace-copying.json.out") == "$(jq -S . "$STATUS")" ]] ||
  d_bad "replace-copying.json: its status is not the status file"
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
# unknown NAME STATE WHY FIGURES JSON: status exits 3 and says WHY on
# stderr with the status file's name.  FIGURES: the table still shows the
# last figures marked stale (stale), figures (shown) or none (no).
# --json: the same keys, state STATE (not-running, stale, unknown), the
# reason WHY, and the file under status (JSON file: it is a JSON object)
# or null (none).
unknown ()
{
  local name=$1 state=$2 why=$3 figures=$4 json=$5
  expect_rc "$name" 3 status "$CONF"
  d_expect_err "$name" "$STATUS" "$why"
  expect_out "$name" "mkfs.ext4 -b 4096 -E stride=64,stripe_width=256" \
    "State : $state "
  case $figures in
  stale) expect_out "$name" "STALE" "/srv/stripe/m0.img" ;;
  shown) expect_out "$name" "/srv/stripe/m0.img" ;;
  *) ! grep -q -F "/srv/stripe/m0.img" "$D_TMP/$name.out" ||
       d_bad "$name: shows figures it cannot read" ;;
  esac
  expect_rc "$name.json" 3 status --json "$CONF"
  d_expect_err "$name.json" "$STATUS" "$why"
  expect_json "$name.json" "$state" \
    '(.reason | startswith($file + ": ")) and .name == "fast0"
     and .config == $conf and .status_file == $file'
  jq -e --arg why "$why" '.reason | contains($why)' "$D_TMP/$name.json.out" \
    >/dev/null || d_bad "$name.json: its reason does not say: $why"
  if [[ $json == file ]]; then
    [[ $(jq -S .status "$D_TMP/$name.json.out") == "$(jq -S . "$STATUS")" ]] &&
      jq -e '.source == "status_file"' "$D_TMP/$name.json.out" >/dev/null ||
      d_bad "$name.json: its status is not the status file"
  else
    jq -e '.status == null and .source == null' "$D_TMP/$name.json.out" \
      >/dev/null || d_bad "$name.json: a status where there is none"
  fi
}

rm -f "$STATUS"
unknown missing not-running "does not exist" no none
printf 'hello, world\n' >"$STATUS"
unknown garbage unknown "not valid JSON" no none
fixture degraded | head -c 2000 >"$STATUS"
unknown truncated unknown "not valid JSON" no none
: >"$STATUS"
unknown empty unknown "not valid JSON" no none
printf '[1, 2, 3]\n' >"$STATUS"
unknown not-an-object unknown "not a JSON object" no none
# The server's last words say ok, and a member is missing since: the
# volume is not served, whatever they say (#34).
fixture ok | sed 's/"running": true/"running": false/' >"$STATUS"
mv "$D_TMP/m1.img" "$D_TMP/m1.away"
unknown stopped not-running '"running": false' stale file
expect_out stopped "Server : pid $$, stopped"
expect_out stopped "State : not-running (STALE: the last figures, no live server behind them; they said ok)"
jq -e '.status.volume.state == "ok"' "$D_TMP/stopped.json.out" >/dev/null ||
  d_bad "stopped.json: the fixture's own state is not under status"
mv "$D_TMP/m1.away" "$D_TMP/m1.img"
fixture ok "$DEAD_PID" >"$STATUS"
unknown dead-pid not-running "the server (pid $DEAD_PID) is not running" stale file
expect_out dead-pid "Server : pid $DEAD_PID, not running"
fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 21 }')" >"$STATUS"
unknown old stale "s ago, more than 3 x interval (5 s) + 5 s" stale file
d_expect_err old "stale: last updated 2"
fixture ok | sed 's/"format": 1/"format": 2/' >"$STATUS"
unknown format-2 unknown "format 2, expected 1" no file
fixture ok | sed '/"format": 1,/d' >"$STATUS"
unknown no-format unknown 'no valid "format" field' no file
fixture ok | sed 's/"name": "fast0"/"name": "slow1"/' >"$STATUS"
unknown other-volume unknown "the status of volume 'slow1', not of 'fast0'" stale file
fixture ok | sed 's/"pid": [0-9]*/"pid": 0/' >"$STATUS"
unknown pid-0 unknown 'no valid "pid" field' stale file
fixture ok | jq '.volume.state = "fine"' >"$STATUS"
unknown volume-state unknown "no valid volume state" shown file
fixture ok | sed 's/"running": true/"running": true, "x": NaN/' >"$STATUS"
unknown nan unknown "not valid JSON" no none
fixture ok | sed 's|/srv/stripe/m0.img|/srv/\xff.img|' >"$STATUS"
unknown invalid-utf8 unknown "not valid JSON" no none
# Of several reasons, the state is the surest's and the reason its own:
# another volume's file says nothing of this one's server, dead or not;
# a server that stopped long ago is not running rather than stale.
fixture ok "$DEAD_PID" | sed 's/"name": "fast0"/"name": "slow1"/' >"$STATUS"
unknown foreign-dead unknown "the status of volume 'slow1', not of 'fast0'" stale file
fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 600 }')" |
  sed 's/"running": true/"running": false/' >"$STATUS"
unknown stopped-long-ago not-running '"running": false' stale file
# A config that does not load: the same keys, what is known.
expect_rc no-config.json 3 status --json "$D_TMP/no-such.conf"
jq -e --argjson keys "$KEYS" --arg conf "$D_TMP/no-such.conf" \
  'keys == $keys and .state == "unknown" and .config == $conf
   and (.reason | contains($conf)) and .name == null
   and .status_file == null and .source == null and .status == null' \
  "$D_TMP/no-config.json.out" >/dev/null ||
  d_bad "no-config.json: not the one shape, unknown, naming the config"
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
d_ok "missing, invalid, stopped, dead, stale, foreign: exit 3 and why; --json not-running, stale or unknown"

# The man page's examples that print the verdict, word for word
# (nbdstripe on PATH, the volume fast0 in NBDSTRIPE_CONFDIR).
mkdir -p "$D_TMP/bin"
ln -sf "$NBDSTRIPE" "$D_TMP/bin/nbdstripe"
mapfile -t examples < <(sed -n \
  '/^=head1 EXAMPLES/,/^=head1/s/^ \(nbdstripe status .*| jq -r \.state\)$/\1/p' \
  "$NBDSTRIPE_SOURCE_DIR/daemon/nbdstripe.pod")
[[ ${#examples[@]} -ge 2 ]] ||
  d_fail "not two 'nbdstripe status ... | jq -r .state' lines in the man page's EXAMPLES"
before=$D_FAILS
for example in "${examples[@]}"; do
  printf -- '-- the example: %s\n' "$example"
  for v in ok degraded failed stopped:not-running dead:not-running \
           old:stale other:unknown missing:not-running; do
    name=${v%:*} want=${v#*:}
    case $name in
    stopped) fixture ok | sed 's/"running": true/"running": false/' ;;
    dead) fixture ok "$DEAD_PID" ;;
    old) fixture ok $$ "$(awk -v t="$(now)" 'BEGIN { printf "%.3f", t - 21 }')" ;;
    other) fixture ok | sed 's/"name": "fast0"/"name": "slow1"/' ;;
    missing) ;;
    *) fixture "$name" ;;
    esac >"$STATUS"
    [[ $name == missing ]] && rm -f "$STATUS"
    got=$(cd "$D_TMP" && PATH="$D_TMP/bin:$PATH" NBDSTRIPE_CONFDIR=$D_TMP \
          bash -c "$example" 2>/dev/null)
    [[ $got == "$want" ]] ||
      d_bad "the man page's '$example' prints '$got' for $name, not '$want'"
  done
done
[[ $D_FAILS -eq $before ]] &&
  d_ok "the man page's examples print the verdict"

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
# sanitizer report, no control character on stdout; --json of the one
# shape, its state the exit status's.
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
    if [[ -n $json ]] &&
       ! jq -e --argjson keys "$KEYS" --argjson rc "$D_RC" \
         'keys == $keys and (.state | IN("ok", "degraded", "failed",
                                         "not-running", "stale", "unknown"))
          and ({"ok": 0, "degraded": 1, "failed": 2}[.state] // 3) == $rc' \
         "$D_TMP/mut.out" >/dev/null 2>&1; then
      d_bad "mutation $i ($m) --json: not the one shape, or not exit $D_RC's state"
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
