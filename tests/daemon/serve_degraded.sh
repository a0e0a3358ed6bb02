#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A member is missing (its file moved away): `serve --degraded` serves
# the rest read-only (issue 37), and lost stays lost.
#
# A 3-member volume (chunk 64K) and a 4-member one (chunk 96K, not a
# power of two), 4 MiB per member, filled with random data through
# nbdcopy and stopped.  Then, for each member in turn, moved away:
#   - check and plain serve refuse, naming the member, its error and
#     `nbdstripe serve --degraded VOLUME`;
#   - serve --degraded serves; degraded_read.py, with its own model of
#     the layout (chunk c on member c mod N), reads every chunk: those on
#     the missing member fail with EIO (never zeros), the others are what
#     was written; block status never calls a lost chunk zero; a write
#     is refused;
#   - status --json says degraded, the member "missing" with its path;
#     the Prometheus file has the state; list --json says degraded;
#   - after the stop every member, present or moved back, is
#     byte-identical to before (no generation bump, no header write).
# And all members missing is still refused; the plugin's degraded=1
# without nbdkit -r is refused; metadata "md" refused with --degraded,
# saying so.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo sha256sum jq
PY=/usr/bin/python3
$PY -c 'import nbd' 2>/dev/null || d_skip "no libnbd python module"

M=$((1024 * 1024))
# list finds servers by the run directory they were started with.
export NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_RUNDIR"

# one N CHUNK: the volume, then each member missing in turn.
one ()
{
  local n=$1 chunk=$2 i j m=() dir=$D_TMP/v$1
  mkdir -p "$dir"
  for ((i = 0; i < n; i++)); do
    m+=("$dir/m$i.img")
    truncate -s $((4 * M)) "$dir/m$i.img"
  done
  local conf=$dir/vol.conf sock=$dir/vol.sock pid=$dir/vol.pid
  local uri="nbd+unix:///?socket=$dir/vol.sock"
  d_conf "$conf" "deg$n" "$chunk" "socket = \"$sock\"; pidfile = \"$pid\";" \
    "${m[@]}"
  printf 'health = { status_file = "%s"; prometheus_file = "%s"; interval = 1; };\n' \
    "$dir/vol.status.json" "$dir/vol.prom" >>"$conf"

  d_log "$n members, chunk $chunk: create and fill"
  d_run create.$n d_ns create "$conf"
  [[ $D_RC -eq 0 ]] || d_fail "create"
  d_serve serve.$n "$conf" "$pid" || d_fail "serve"
  local size
  size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
  d_random "$dir/image" "$size"
  nbdcopy "$dir/image" "$uri" || d_fail "nbdcopy into the volume"
  d_stop "$D_SERVER_PID"
  local before
  before=$(d_sums "${m[@]}")

  for ((i = 0; i < n; i++)); do
    d_log "$n members: member $i missing"
    mv "${m[i]}" "$dir/away"
    local why="member $i (${m[i]}): open: No such file or directory; the volume can be served read-only without it: nbdstripe serve --degraded $conf"
    d_run check.$n.$i d_ns check "$conf"
    d_expect_fail check.$n.$i
    d_expect_err check.$n.$i "$why"
    d_serve_refused serve.$n.$i "$conf" "$pid"
    d_expect_err serve.$n.$i "$why"

    rm -f "$pid"
    d_run deg.$n.$i d_ns_serve --degraded "$conf"
    [[ $D_RC -eq 0 ]] || d_fail "serve --degraded without member $i"
    D_SERVER_PID=$(<"$pid")
    D_PIDS+=("$D_SERVER_PID")
    d_expect_err deg.$n.$i "serving 'deg$n' read-only and degraded"
    [[ $(nbdinfo --json "$uri" | jq '.exports[0]."is_read_only"') == true ]] ||
      d_bad "$n/$i: the export is not read-only"
    if $PY "$HERE/degraded_read.py" "$uri" "$dir/image" \
      "$(numfmt --from=iec "$chunk")" "$n" "$i" >"$D_TMP/read.$n.$i.out"; then
      d_ok "$n/$i: $(tail -1 "$D_TMP/read.$n.$i.out")"
    else
      cat "$D_TMP/read.$n.$i.out" >&2
      d_bad "$n/$i: the degraded volume does not read as it must"
    fi

    d_run status.$n.$i d_ns status --json "$conf"
    jq -e --argjson i "$i" --arg p "${m[i]}" '.state == "degraded"
        and .status.volume.state == "degraded"
        and (.status.members[$i] | .state == "missing" and .path == $p
             and (.reason | contains("No such file or directory")))
        and ([.status.members[] | select(.state != "ok")] | length) == 1' \
      "$D_TMP/status.$n.$i.out" >/dev/null ||
      d_bad "$n/$i: status --json does not say degraded with member $i missing"
    grep -q "state=\"missing\"} 1" "$dir/vol.prom" ||
      d_bad "$n/$i: the Prometheus file has no member in state missing"
    # list looks at every process: once per volume is enough.
    if [[ $i -eq 0 ]]; then
      d_run list.$n.$i d_ns list --json
      jq -e --arg name "deg$n" '[.volumes[] | select(.name == $name)]
          | length == 1 and .[0].state == "degraded"
            and (.[0].reason | contains("missing"))' \
        "$D_TMP/list.$n.$i.out" >/dev/null ||
        d_bad "$n/$i: list --json does not say degraded"
    fi

    d_stop "$D_SERVER_PID"
    mv "$dir/away" "${m[i]}"
    d_same_sums "$n/$i" "$before" "${m[@]}" &&
      d_ok "$n/$i: every member byte-identical after the degraded serve"
  done

  d_log "$n members: all missing"
  mkdir -p "$dir/gone"
  mv "${m[@]}" "$dir/gone/"
  rm -f "$pid"
  d_run alldeg.$n d_ns_serve --degraded "$conf"
  if [[ -s $pid ]]; then
    d_bad "all members missing: served"
    D_PIDS+=("$(<"$pid")")
    d_stop "$(<"$pid")"
  fi
  d_expect_fail alldeg.$n
  d_expect_err alldeg.$n "no member could be read"
  mv "$dir"/gone/* "$dir/"
}

one 3 64K
one 4 96K

d_log "the plugin: degraded=1 without nbdkit -r refused"
mv "$D_TMP/v3/m1.img" "$D_TMP/v3/away"
d_run plugin.rw timeout 20 "${D_PRE[@]}" nbdkit -f -U "$D_TMP/p.sock" \
  "$STRIPE_PLUGIN" config="$D_TMP/v3/vol.conf" degraded=1
[[ $D_RC -ne 0 && $D_RC -ne 124 ]] || d_bad "nbdkit without -r: exit $D_RC"
d_expect_err plugin.rw "degraded=1 serves the volume without its missing members, read-only: give nbdkit -r"
mv "$D_TMP/v3/away" "$D_TMP/v3/m1.img"

d_log "metadata md: --degraded refused, saying why"
for i in 0 1; do truncate -s $((4 * M)) "$D_TMP/md$i.img"; done
d_conf "$D_TMP/md.conf" degmd 64K \
  "socket = \"$D_TMP/md.sock\"; pidfile = \"$D_TMP/md.pid\";" \
  "$D_TMP/md0.img" "$D_TMP/md1.img"
printf 'metadata = "md";\n' >>"$D_TMP/md.conf"
d_run create.md d_ns create "$D_TMP/md.conf"
[[ $D_RC -eq 0 ]] || d_fail "create with metadata md"
mv "$D_TMP/md1.img" "$D_TMP/md1.away"
d_run deg.md d_ns_serve --degraded "$D_TMP/md.conf"
[[ -s $D_TMP/md.pid ]] && { D_PIDS+=("$(<"$D_TMP/md.pid")"); d_bad "md served degraded"; }
d_expect_fail deg.md
d_expect_err deg.md 'metadata "md": a volume can be served degraded'
d_done
