# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the tests of members that are NBD URIs (tests/daemon/remote*.sh).
# Sourced after daemon.sh; not executable on its own.
#
# A remote member is a backing file in the test directory served by a
# stock `nbdkit file` (or another stock plugin), on a Unix socket or on
# 127.0.0.1 TCP.  The oracle reads the backing files directly, never
# through the code under test.
#
# Readiness without sleeping: nbdkit runs in the foreground (-f) in the
# background of the test, --exit-with-parent, with its pidfile a FIFO
# that it writes once it listens; if it fails first, its wrapper writes
# the failure to the FIFO instead.

# r_start NAME LISTEN NBDKIT_ARGS...: start nbdkit -f LISTEN NBDKIT_ARGS
# (LISTEN: "-U SOCKET" or "-i 127.0.0.1 -p PORT", one word each) as server
# NAME; returns 0 once it listens (R_PID its pid), 1 if it failed (its
# log in $D_TMP/NAME.log).
r_start ()
{
  local name=$1 listen=$2 fifo=$D_TMP/$1.pid ready
  shift 2
  rm -f "$fifo"
  mkfifo "$fifo" || d_fail "mkfifo $fifo"
  # shellcheck disable=SC2086 # LISTEN is split on purpose
  setsid bash -c 'fifo=$1; shift
    nbdkit -f --exit-with-parent -P "$fifo" "$@" ||
      echo "nbdkit failed: exit $?" >"$fifo"' \
    nbdkit-wrapper "$fifo" $listen "$@" \
    </dev/null >>"$D_TMP/$name.log" 2>&1 &
  D_BGPIDS+=("$!")
  ready=$(timeout 30 cat "$fifo") || ready="no pidfile within 30 s"
  # A later failure message must not block on a FIFO nobody reads.
  rm -f "$fifo"
  if [[ ! $ready =~ ^[0-9]+$ ]]; then
    printf '%s: %s\n' "$name" "$ready" >&2
    sed 's/^/   | /' "$D_TMP/$name.log" >&2
    return 1
  fi
  R_PID=$ready
  D_PIDS+=("$R_PID")
  return 0
}

# r_unix NAME NBDKIT_ARGS...: a server on $D_TMP/NAME.sock; sets R_URI.
r_unix ()
{
  local name=$1
  shift
  rm -f "$D_TMP/$name.sock"
  r_start "$name" "-U $D_TMP/$name.sock" "$@" || d_fail "$name: nbdkit did not start"
  R_URI="nbd+unix:///?socket=$D_TMP/$name.sock"
}

# r_tcp NAME NBDKIT_ARGS...: a server on 127.0.0.1 and a free port (tried
# again with another port when the one chosen was taken meanwhile); sets
# R_URI and R_PORT.
r_tcp ()
{
  local name=$1 try
  shift
  for try in 1 2 3 4 5; do
    R_PORT=$("$DAEMON_HELPER" free-port) || d_fail "daemon_helper free-port"
    if r_start "$name" "-i 127.0.0.1 -p $R_PORT" "$@"; then
      R_URI="nbd://127.0.0.1:$R_PORT/"
      return 0
    fi
    grep -q -i "address already in use" "$D_TMP/$name.log" || break
  done
  d_fail "$name: nbdkit did not start on 127.0.0.1"
}

# r_header_ok LABEL FILE INDEX COUNT CHUNK DATA_OFFSET MEMBER_SIZE NAME:
# FILE (a backing file, read directly) holds at offset 0 a header as the
# format says (magic, version 2, size, name, index, count, chunk, layout 2,
# flags, data offset, this member's size, events 1, CRC32C of bytes 0..4091 by
# daemon_helper's own implementation).  Sets R_UUID to the array UUID
# (hex); counts a failure (d_bad) for every field that is wrong.
r_header_ok ()
{
  local label=$1 f=$2 i=$3 n=$4 chunk=$5 doff=$6 msize=$7 name=$8 name_hex
  name_hex=$(printf '%s' "$name" | od -An -v -t x1 | tr -d ' \n')
  name_hex=$name_hex$(printf '%0*d' $((128 - ${#name_hex})) 0)
  r_field "$label" magic "$(head -c 8 -- "$f")" NBDSTRIP
  r_field "$label" version "$(d_u32 "$f" 8)" 2
  r_field "$label" header_size "$(d_u32 "$f" 12)" 4096
  r_field "$label" name "$(d_hex "$f" 48 64)" "$name_hex"
  r_field "$label" member_index "$(d_u32 "$f" 120)" "$i"
  r_field "$label" member_count "$(d_u32 "$f" 124)" "$n"
  r_field "$label" chunk "$(d_u64 "$f" 128)" "$chunk"
  r_field "$label" layout "$(d_u32 "$f" 136)" 2
  r_field "$label" flags "$(d_u32 "$f" 140)" 0
  r_field "$label" data_offset "$(d_u64 "$f" 144)" "$doff"
  r_field "$label" "member_sizes[$i]" "$(d_u64 "$f" $((152 + 8 * i)))" "$msize"
  r_field "$label" events "$(d_u64 "$f" 664)" 1
  r_field "$label" crc32c "$(d_u32 "$f" 4092)" \
    "$("$DAEMON_HELPER" crc32c "$f" 0 4092)"
  R_UUID=$(d_hex "$f" 16 16)
}

# r_field LABEL FIELD ACTUAL EXPECTED
r_field ()
{
  [[ $3 == "$4" ]] || d_bad "$1: $2 is '$3', expected '$4'"
}

# r_layout_ok LABEL SRC N DATA_OFFSET USABLE CHUNK FILE...: equal members,
# so logical chunk k of SRC is on member k mod N at DATA_OFFSET + (k div N)
# * CHUNK of its backing FILE.
r_layout_ok ()
{
  local label=$1 src=$2 n=$3 doff=$4 use=$5 chunk=$6 k mem off bad=0
  shift 6
  local files=("$@")
  for ((k = 0; k < n * use / chunk; k++)); do
    mem=$((k % n))
    off=$((doff + (k / n) * chunk))
    if ! cmp -s -n "$chunk" -i "$((k * chunk)):$off" "$src" "${files[mem]}"; then
      ((bad++ < 10)) && d_bad "$label: logical chunk $k is not at member $mem (${files[mem]}) offset $off"
    fi
  done
  ((bad == 0)) && d_ok "$label: $((n * use / chunk)) chunks where the layout puts them, read from the backing files"
}

# r_elapsed_ms START: milliseconds since START (an $EPOCHREALTIME).
r_elapsed_ms ()
{
  local now=$EPOCHREALTIME
  echo $(((${now/./} - ${1/./}) / 1000))
}
