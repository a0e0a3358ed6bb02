#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every command's --json, on success and on failure, matches its schema
# (daemon/json/COMMAND.json: ok and error always there, the same keys
# whatever happened) and its ok says its exit status: create, check,
# status, list, inspect, accept, import, stop, replace, scrub, grow,
# shrink and lost-files, each refused for what it can be refused for (no
# such volume, a missing member, a bad config, the volume not served, a
# bad argument, no file system on it) and run to its end (--wait: JSON Lines, the progress lines matching
# daemon/json/progress.json).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh" || exit 1
d_init jq mkfs.ext4 nbdcopy
python3 -c 'import jsonschema' 2>/dev/null ||
  d_skip "python3-jsonschema is not installed"

SCHEMAS=$NBDSTRIPE_SOURCE_DIR/daemon/json
CHECKER=$NBDSTRIPE_SOURCE_DIR/tests/daemon/json_schema.py
export NBDSTRIPE_CONFDIR=$D_TMP/conf NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_CONFDIR" "$NBDSTRIPE_RUNDIR"

# case LABEL WANT_STATUS [--lines] -- ARGS...: nbdstripe ARGS (the
# command's name first) exits WANT_STATUS and its --json output matches
# the command's schema, ok saying the exit status.
case_ ()
{
  local label=$1 want=$2 lines=
  shift 2
  [[ $1 == --lines ]] && { lines=--lines; shift; }
  shift
  d_run "$label" d_ns "$@"
  [[ $D_RC -eq $want ]] || d_bad "$label: nbdstripe $*: exit $D_RC, expected $want"
  python3 "$CHECKER" "$SCHEMAS" "$1" "$D_RC" "$D_TMP/$label.out" $lines ||
    d_bad "$label: its JSON (above)"
}

for f in m0 m1 m2 n0 d0 d1; do truncate -s 16M "$D_TMP/$f"; done
sock=$D_TMP/v.sock
d_conf "$NBDSTRIPE_CONFDIR/v.conf" v 64K \
  "socket = \"$sock\"; pidfile = \"$D_TMP/v.pid\";" "$D_TMP/m0" "$D_TMP/m1"
printf 'health = { status_file = "%s"; };\n' "$D_TMP/v.status.json" \
  >>"$NBDSTRIPE_CONFDIR/v.conf"
d_conf "$NBDSTRIPE_CONFDIR/md.conf" md 64K "" "$D_TMP/d0" "$D_TMP/d1"
printf 'metadata = "md";\n' >>"$NBDSTRIPE_CONFDIR/md.conf"
printf 'name = "bad";\nchunk = "3K";\nmembers = [ ];\n' \
  >"$NBDSTRIPE_CONFDIR/bad.conf"

# ---- nothing served ------------------------------------------------------
case_ create.nosuch 1 -- create --json nosuch
case_ create.bad 1 -- create --json bad
case_ create 0 -- create --json v
case_ create.again 1 -- create --json v
case_ create.md 0 -- create --json md
case_ check 0 -- check --json v
case_ check.nosuch 1 -- check --json nosuch
case_ check.bad 1 -- check --json bad
mv "$D_TMP/m1" "$D_TMP/m1.away"
case_ check.missing 1 -- check --json v
case_ accept.missing 1 -- accept --json v 1
mv "$D_TMP/m1.away" "$D_TMP/m1"
case_ inspect 0 -- inspect --json "$D_TMP/m0" "$D_TMP/d0"
case_ inspect.blank 1 -- inspect --json "$D_TMP/m0" "$D_TMP/n0"
case_ accept 0 -- accept --json v 1
case_ accept.nosuch 1 -- accept --json nosuch 0
case_ accept.index 1 -- accept --json v 5
case_ import 0 -- import --json --out "$D_TMP/imp.conf" "$D_TMP/d0" "$D_TMP/d1"
case_ import.blank 1 -- import --json --out "$D_TMP/imp2.conf" "$D_TMP/n0"
case_ status.down 3 -- status --json v
case_ status.nosuch 3 -- status --json nosuch
case_ list 0 -- list --json
case_ stop.down 0 -- stop --json v
case_ stop.down-strict 1 -- stop --json --strict v
case_ replace.down 1 -- replace --json v 1 "$D_TMP/n0"
case_ replace.nosuch 1 -- replace --json nosuch 1 "$D_TMP/n0"
case_ replace.cancel-down 1 -- replace --cancel --json v
case_ replace.dry-down 0 -- replace --json --dry-run v 1 "$D_TMP/n0"
jq -e '.dry_run == true and .bytes_to_copy > 0 and .started == false' \
  "$D_TMP/replace.dry-down.out" >/dev/null ||
  d_bad "replace --dry-run --json: no dry_run true, or no bytes_to_copy"
case_ replace.dry-member 1 -- replace --json --dry-run v 1 "$D_TMP/m0"
jq -e '.dry_run == true and .bytes_to_copy == null' \
  "$D_TMP/replace.dry-member.out" >/dev/null ||
  d_bad "replace --dry-run --json refused: bytes_to_copy not null"
case_ scrub.down 1 --lines -- scrub --wait --json v
case_ scrub.cancel-down 1 -- scrub --cancel --json v
case_ grow.down 1 -- grow --json v "$D_TMP/m2"
case_ grow.nosuch 1 -- grow --json nosuch "$D_TMP/m2"
case_ shrink.dry-down 0 -- shrink --json --dry-run v 1
case_ shrink.down 1 -- shrink --json v 1 --size 4096
case_ shrink.bad 1 -- shrink --json --dry-run bad 1
case_ lost-files.down 1 -- lost-files --json --member 0 v
case_ lost-files.nosuch 1 -- lost-files --json nosuch
case_ lost-files.index 2 -- lost-files --json --member 5 v

# ---- served ----------------------------------------------------------------
d_serve serve "$NBDSTRIPE_CONFDIR/v.conf" "$D_TMP/v.pid" || d_fail "serve v"
case_ status 0 -- status --json v
case_ lost-files.nofs 1 -- lost-files --json --member 1 v
mkfs.ext4 -q -F -b 4096 "$D_TMP/fs.img" 8M || d_fail "mkfs.ext4"
nbdcopy "$D_TMP/fs.img" "nbd+unix:///?socket=$sock" || d_fail "nbdcopy"
case_ lost-files 0 -- lost-files --json --member 1 v
case_ list.served 0 -- list --json
case_ replace.index 2 -- replace --json v 7 "$D_TMP/n0"
case_ replace.member 1 -- replace --json v 1 "$D_TMP/m0"
case_ replace 0 --lines -- replace --wait --json v 1 "$D_TMP/n0"
case_ scrub 0 --lines -- scrub --wait --json v
case_ scrub.started 0 -- scrub --json v
case_ grow.member 1 -- grow --json v "$D_TMP/m0"
case_ grow.dry 0 -- grow --json --dry-run v "$D_TMP/m2"
case_ grow 0 --lines -- grow --wait --json v "$D_TMP/m2"
case_ shrink.dry 0 -- shrink --json --dry-run v 2
case_ shrink.size 1 -- shrink --json v 2 --size 4096
case_ grow.continue-none 1 -- grow --json v
case_ shrink.cancel-none 1 -- shrink --cancel --json v
case_ stop 0 -- stop --json v
d_wait_gone "$D_SERVER_PID" 30
D_PIDS=()
case_ stop.again 0 -- stop --json v

d_done
