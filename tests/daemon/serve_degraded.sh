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
# without nbdkit -r is refused.  md and none volumes record no missing
# member's size: refused, saying so (below, md and none).
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

    d_serve deg.$n.$i "$conf" "$pid" --degraded ||
      d_fail "serve --degraded without member $i"
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

# refused_degraded NAME CONFIG PIDFILE: serve --degraded must refuse,
# starting nothing.
refused_degraded ()
{
  local name=$1 conf=$2 pid=$3
  rm -f "$pid"
  d_run "$name" d_ns_serve --degraded "$conf"
  if [[ -s $pid ]]; then
    d_bad "$name: served degraded"
    D_PIDS+=("$(<"$pid")")
    d_stop "$(<"$pid")"
  fi
  d_expect_fail "$name"
}

sb () { "$PY" "$HERE/../lib/md_sb.py" "$@"; }

# md TAG LAYOUT SIZE...: an md raid0 volume (md superblocks 1.2, chunk
# 64K) of members of these sizes, each member missing in turn.  An md
# superblock holds its own member's data size only (data_size), so a
# missing member's place -- the zones, the array's size -- is never
# known: check, serve and serve --degraded refuse, naming the member,
# its file and what no superblock records; lost-files says the same;
# nothing is written to any member.  Then as Linux md leaves the array
# once it has run it (the component size, at most the smallest
# member's data size, in every superblock): still refused, the
# component size a lower bound only -- also with the smallest member
# missing, where every member read holds more.
md ()
{
  local tag=$1 layout=$2 i m=() smallest=0 dir=$D_TMP/$1
  shift 2
  local sizes=("$@") n=$#
  mkdir -p "$dir"
  for ((i = 0; i < n; i++)); do
    m+=("$dir/m$i.img")
    truncate -s "${sizes[i]}" "${m[i]}"
    [[ $(numfmt --from=iec "${sizes[i]}") -lt \
       $(numfmt --from=iec "${sizes[smallest]}") ]] && smallest=$i
  done
  local conf=$dir/vol.conf pid=$dir/vol.pid
  d_conf "$conf" "$tag" 64K "socket = \"$dir/vol.sock\"; pidfile = \"$pid\";" \
    "${m[@]}"
  printf 'metadata = "md";\n' >>"$conf"
  [[ -z $layout ]] || printf 'layout = "%s";\n' "$layout" >>"$conf"
  d_log "md $tag (${sizes[*]}${layout:+, $layout}): create"
  d_run create.$tag d_ns create "$conf"
  [[ $D_RC -eq 0 ]] || d_fail "$tag: create with metadata md"
  local before
  before=$(d_sums "${m[@]}")

  for ((i = 0; i < n; i++)); do
    d_log "md $tag: member $i missing"
    mv "${m[i]}" "$dir/away"
    local gone="member $i (${m[i]}): open: No such file or directory"
    local why="member $i (${m[i]}): an md superblock records a member's data size (data_size) only on that member, and the others' component size is 0 (as mdadm --create and nbdstripe create write it for raid0): its size, on which md raid0's zones and the array's size depend, is recorded nowhere else, so the array cannot be served degraded without it"
    d_run check.$tag.$i d_ns check "$conf"
    d_expect_fail check.$tag.$i
    d_expect_err check.$tag.$i "$gone"
    ! grep -q -e "--degraded" "$D_TMP/check.$tag.$i.err" ||
      d_bad "$tag/$i: check offers serve --degraded for md"
    refused_degraded deg.$tag.$i "$conf" "$pid"
    d_expect_err deg.$tag.$i "$gone" "$why" &&
      d_ok "$tag/$i: serve --degraded refused, naming member $i and why"
    d_run lost.$tag.$i d_ns lost-files --json "$conf"
    [[ $D_RC -ne 0 ]] || d_bad "$tag/$i: lost-files without member $i: exit 0"
    d_expect_err lost.$tag.$i "$why"
    mv "$dir/away" "${m[i]}"
  done
  d_same_sums "md $tag" "$before" "${m[@]}" &&
    d_ok "md $tag: every member byte-identical after the refusals"

  # As Linux md records it once it has run the array: the smallest
  # member's data size, in sectors, as the component size.
  local min
  min=$(sb "${m[smallest]}" get data_size) || d_fail "md_sb.py get data_size"
  for ((i = 0; i < n; i++)); do
    sb "${m[i]}" set "size=$min" >/dev/null || d_fail "md_sb.py set size"
  done
  before=$(d_sums "${m[@]}")
  for i in $(printf '%s\n' "$smallest" "$((n - 1))" | sort -u); do
    d_log "md $tag, component size $min: member $i missing"
    mv "${m[i]}" "$dir/away"
    refused_degraded sized.$tag.$i "$conf" "$pid"
    d_expect_err sized.$tag.$i \
      "member $i (${m[i]}): open: No such file or directory" \
      "member $i (${m[i]}): an md superblock records a member's data size (data_size) only on that member, and the others' component size ($min sectors, at most the smallest member's data size, as Linux md records it) says only that it holds at least that much" &&
      d_ok "$tag/$i: component size $min: refused, a lower bound only"
    mv "$dir/away" "${m[i]}"
  done
  d_same_sums "md $tag, component size" "$before" "${m[@]}"
}

# Equal members (one zone); members of different sizes in both of md's
# layouts (the smallest, member 1, makes zone 0 end at an odd chunk).
md mdeq "" 4M 4M 4M
md mdorig original 5M 3200K 5M
md mdalt alternate 5M 3200K 4M

# none: nothing on the members, the config no size (meta_none.c): a
# member that cannot be opened is refused, naming it and why; with every
# member there --degraded serves the volume, read-only, as it is.
d_log "metadata none: every member there, then each missing"
nd=$D_TMP/none
mkdir -p "$nd"
nm=()
for i in 0 1 2; do
  nm+=("$nd/m$i.img")
  truncate -s $((4 * M)) "$nd/m$i.img"
done
d_conf "$nd/vol.conf" degnone 64K \
  "socket = \"$nd/vol.sock\"; pidfile = \"$nd/vol.pid\";" "${nm[@]}"
printf 'metadata = "none";\n' >>"$nd/vol.conf"
nuri="nbd+unix:///?socket=$nd/vol.sock"
d_serve serve.none "$nd/vol.conf" "$nd/vol.pid" || d_fail "serve (none)"
d_random "$nd/image" "$(d_nbd_size "$nuri")"
nbdcopy "$nd/image" "$nuri" || d_fail "nbdcopy into the none volume"
d_stop "$D_SERVER_PID"
before=$(d_sums "${nm[@]}")
d_serve deg.none "$nd/vol.conf" "$nd/vol.pid" --degraded ||
  d_fail "none: serve --degraded with every member there"
[[ $(nbdinfo --json "$nuri" | jq '.exports[0]."is_read_only"') == true ]] ||
  d_bad "none: the export is not read-only"
nbdcopy "$nuri" "$nd/back" || d_bad "none: nbdcopy out of the volume"
cmp -s "$nd/image" "$nd/back" && d_ok "none: every member there: served as written" ||
  d_bad "none: served --degraded with every member, it does not read as written"
d_stop "$D_SERVER_PID"
for i in 0 1 2; do
  mv "${nm[i]}" "$nd/away"
  refused_degraded deg.none.$i "$nd/vol.conf" "$nd/vol.pid"
  d_expect_err deg.none.$i \
    "member $i (${nm[i]}): open: No such file or directory" \
    "member $i (${nm[i]}): metadata \"none\" records nothing on the members, and the config gives no member's size: its size, on which the volume's zones and size depend, is known only from the device itself, so the volume cannot be served degraded without it" &&
    d_ok "none/$i: serve --degraded refused, naming member $i and why"
  mv "$nd/away" "${nm[i]}"
done
d_same_sums "none" "$before" "${nm[@]}" &&
  d_ok "none: every member byte-identical"
d_done
