#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Under systemd every log line of the plugin carries its priority: with
# stderr the journal ($JOURNAL_STREAM names it, as systemd sets it for
# StandardError=journal) each line starts with "<N>" (sd-daemon(3)), which
# journald turns into the line's priority (include/log.h).
#
# `nbdstripe serve --foreground` (as nbdstripe@.service runs it) with its
# stderr a file that JOURNAL_STREAM names; volume of 3 members (nbdkit
# file + error filter behind nbdfuse, as in injected_errors.sh), chunk 64K,
# metadata "none", cache "direct", error_threshold 4.  Member 1's reads
# fail, then stop failing; the server is stopped.  The lines, in order:
#
#   <6>nbdkit: stripe: info: volume 'hvol': serving 3 members, ...
#   <3>nbdkit: stripe: error: member 1 (PATH): pread at member offset ...
#   <4>nbdkit: stripe: warning: health: member 1 (PATH): ok -> failing: ...
#   <3>nbdkit: stripe: error: health: member 1 (PATH): failing -> failed: ...
#   <5>nbdkit: stripe: notice: health: member 1 (PATH): failed -> ok: ...
#   <6>nbdkit: stripe: info: volume 'hvol': stopping
#
# and no line of the plugin without its "<N>" (serve's own lines, before
# nbdkit runs, have none: they are nbdstripe's).  The texts after the level
# are the ones logged outside the journal.
source "$(dirname "$0")/../lib/health.sh" || exit 1
h_init

M=$((1024 * 1024))
for i in 0 1 2; do h_member "$i" $((8 * M)) error; done
h_volume 3 0 'metadata = "none";
cache = "direct";'
mkfifo "$D_TMP/vol.pid"

journal=$D_TMP/journal
: >"$journal"
stream=$(stat -c '%d:%i' "$journal")
d_log "serve --foreground, stderr the \"journal\" (JOURNAL_STREAM=$stream)"
JOURNAL_STREAM=$stream setsid "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground \
  "$H_CONF" >"$D_TMP/serve.out" 2>>"$journal" </dev/null &
server=$!
D_BGPIDS+=("$server")
said=$(timeout 60 cat "$D_TMP/vol.pid") ||
  { cat "$journal" >&2; d_fail "serve --foreground never wrote its pidfile"; }
[[ $said == "$server" ]] || d_fail "the pidfile says $said, serve ran as $server"
H_URI="nbd+unix:///?socket=$D_TMP/vol.sock"
ORACLE=$(h_oracle)

d_log "member 1's reads fail: failing, then failed"
h_inject 1 read on
h_io err1 1 --count 1 --first-slot 1 --expect EIO --bound 1
h_expect_event MemberFailing 1 3
h_io err2 1 --count 3 --first-slot 2 --expect EIO --bound 1
h_expect_event MemberFailed 1 3
d_log "errors off: member 1 comes back"
h_inject 1 read off
h_expect_event MemberRecovered 1 5
h_io recovered 1 --count 2 --first-slot 1 --bound 1 --oracle "$ORACLE"

kill -TERM "$server"
rc=0
wait "$server" || rc=$?
D_BGPIDS=()
[[ $rc -eq 0 ]] || d_bad "the server exited $rc on SIGTERM"
sed 's/^/   journal | /' "$journal"

m1=$(printf '%s' "$D_TMP/m1" | sed 's/[][\.*^$]/\\&/g')
# expect WHAT REGEX: a line of the journal matches (grep -E, whole line).
expect ()
{
  if grep -E -q -x -- "$2" "$journal"; then d_ok "$1"
  else d_bad "$1: no line matches $2"; fi
}
expect "start: info" "<6>nbdkit: stripe: info: volume 'hvol': serving 3 members, .*"
expect "a member's read error: error" \
  "<3>nbdkit: stripe: error: member 1 \\($m1\\): pread at member offset [0-9]+: Input/output error"
expect "ok -> failing: warning" \
  "<4>nbdkit: stripe: warning: health: member 1 \\($m1\\): ok -> failing: .+"
expect "failing -> failed: error" \
  "<3>nbdkit: stripe: error: health: member 1 \\($m1\\): failing -> failed: .+"
expect "failed -> ok: notice" \
  "<5>nbdkit: stripe: notice: health: member 1 \\($m1\\): failed -> ok(: .+)?"
expect "stop: info" "<6>nbdkit: stripe: info: volume 'hvol': stopping"
# In order: the transitions, then the stop.
order=$(grep -n -E 'ok -> failing|failing -> failed|failed -> ok|stopping$' "$journal" |
        cut -d: -f1 | tr '\n' ' ')
sorted=$(tr ' ' '\n' <<<"$order" | sed '/^$/d' | sort -n | tr '\n' ' ')
[[ $order == "$sorted" && $(wc -w <<<"$order") -eq 4 ]] &&
  d_ok "in order" || d_bad "the transitions are not in order (lines $order)"
# Every line of the plugin (nbdkit's or ours) carries a priority.
bare=$(grep -E '(^|: )(stripe|health)(\[[0-9]+\])?: ' "$journal" | grep -v -E '^<[0-7]>')
[[ -z $bare ]] && d_ok "no plugin line without its priority" ||
  d_bad "plugin lines without a priority: $bare"
d_done
