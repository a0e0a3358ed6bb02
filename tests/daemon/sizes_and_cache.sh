#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One size syntax and nbdkit's cache names (nbdstripe(8), SIZES and
# cache; nbdkit-stripe-plugin(1), chunk= and cache=):
#
#   the config's chunk and data_offset take every spelling -- bytes, B,
#     s (512-byte sectors), K/KiB (either case), the integer form -- and
#     mean the same bytes (check --json: chunk, size)
#   the plugin's chunk= takes the same spellings and lays data out by
#     them: volume offset 64K lands at member 1's offset 0; it refuses
#     what the config refuses (128KB, 1.5M, +64K)
#   what status prints as the chunk (1536KiB) is a config's chunk again
#   cache = "none" (config) and cache=none (plugin) open the members with
#     O_DIRECT, as "direct" does; "default" and "writeback" do not
#     (the server's /proc/PID/fdinfo flags)
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init jq nbdcopy

M=$((1024 * 1024))
for m in m0 m1; do truncate -s $((8 * M)) "$D_TMP/$m"; done

# conf FILE CHUNK DATA_OFFSET [EXTRA]: a header-less volume over m0, m1
# (CHUNK and DATA_OFFSET as written: quote strings yourself).
conf ()
{
  cat >"$1" <<EOF
name = "sz";
metadata = "none";
chunk = $2;
data_offset = $3;
members = [ "$D_TMP/m0", "$D_TMP/m1" ];
serve = { socket = "$D_TMP/sz.sock"; pidfile = "$D_TMP/sz.pid"; };
health = { status_file = "$D_TMP/sz.status.json"; };
${4-}
EOF
}

# ---- the config ---------------------------------------------------------
# 2 x (8M - 1M) = 14M whatever the spelling.
i=0
for chunk in 65536 '"65536"' '"65536B"' '"65536b"' '"128s"' '"128S"' \
  '"64K"' '"64k"' '"64KiB"' '"64kib"' '"64KIB"'; do
  for off in 1048576 '"2048s"' '"1024K"' '"1M"' '"1m"' '"1MiB"' '"1mib"'; do
    i=$((i + 1))
    conf "$D_TMP/c.conf" "$chunk" "$off"
    d_run "c.$i" d_ns check --json "$D_TMP/c.conf" >/dev/null
    jq -e '.can_serve and .chunk == 65536 and .size == 14680064' \
      "$D_TMP/c.$i.out" >/dev/null ||
      d_bad "chunk = $chunk, data_offset = $off: not 64K and 1M"
  done
done
for chunk in '"64KB"' '"1.5M"' '"+64K"' '"64 K"' '"0x10000"'; do
  i=$((i + 1))
  conf "$D_TMP/c.conf" "$chunk" 0
  d_run "c.$i" d_ns check "$D_TMP/c.conf"
  d_expect_fail "c.$i" &&
    d_expect_err "c.$i" "chunk: expected a size such as \"128K\"" "got $chunk"
done
d_ok "the config: every spelling of 64K and 1M, and the refusals"

# ---- the plugin's chunk= ----------------------------------------------
# 4K of 0x55 written at volume offset 64K must land at member 1's offset
# 0 (chunk 64K, no metadata: data at 0) -- and with 128K at member 0's
# offset 64K, which tells a wrong parse from a right one.
# The volume's image (16M, no metadata): zeros, and the 4K at 64K.
truncate -s $((16 * M)) "$D_TMP/image"
head -c 4096 /dev/zero | tr '\0' '\125' |
  dd of="$D_TMP/image" bs=4096 seek=16 conv=notrunc status=none
plugin_chunk ()
{
  local name=$1 chunk=$2
  for m in m0 m1; do rm -f "$D_TMP/$m"; truncate -s $((8 * M)) "$D_TMP/$m"; done
  d_run "$name" d_nbdkit -U - "$STRIPE_PLUGIN" "file=$D_TMP/m0" \
    "file=$D_TMP/m1" "chunk=$chunk" --run "nbdcopy '$D_TMP/image' \"\$uri\""
}
pattern=$(d_hex "$D_TMP/image" 65536 4096)
for chunk in 65536 65536B 65536b 128s 128S 64K 64k 64KiB 64kib 64KIB; do
  plugin_chunk "p.$chunk" "$chunk"
  [[ $D_RC -eq 0 ]] || { d_bad "chunk=$chunk: nbdkit failed"; continue; }
  [[ $(d_hex "$D_TMP/m1" 0 4096) == "$pattern" ]] ||
    d_bad "chunk=$chunk: volume offset 64K is not at member 1's offset 0"
done
plugin_chunk p.control 128K
[[ $(d_hex "$D_TMP/m0" 65536 4096) == "$pattern" ]] ||
  d_bad "chunk=128K (control): volume offset 64K is not on member 0"
for chunk in 64KB 1.5M +64K 64Ki 0x10000; do
  i=$((i + 1))
  plugin_chunk "p.$i" "$chunk"
  [[ $D_RC -ne 0 ]] || d_bad "chunk=$chunk: accepted"
  d_expect_err "p.$i" "chunk=$chunk: expected a size such as 128K"
done
d_ok "the plugin's chunk=: the config's spellings, the same layout"

# ---- what status prints, the config takes back -------------------------
conf "$D_TMP/odd.conf" '"1536K"' '"3M"'
d_run odd.status d_ns status "$D_TMP/odd.conf"
printed=$(sed -n 's/^Stripe geometry for mkfs (chunk \([^,]*\), 2 members):$/\1/p' \
  "$D_TMP/odd.status.out")
[[ $printed == 1536KiB ]] || d_bad "status prints the chunk as '$printed', expected 1536KiB"
conf "$D_TMP/back.conf" "\"$printed\"" '"3M"'
d_run back d_ns check --json "$D_TMP/back.conf"
jq -e '.chunk == 1572864' "$D_TMP/back.out" >/dev/null ||
  d_bad "chunk = \"$printed\" (as status printed it) is not 1536K"
d_ok "status prints the chunk as $printed, which the config takes back"

# ---- cache names ---------------------------------------------------------
# direct_fds PID: how many of PID's descriptors for m0 are O_DIRECT.  A
# script, for nbdkit --run (whose $PPID in sh -c is nbdkit) too.
cat >"$D_TMP/direct_fds" <<'EOF'
pid=$1 m0=$2 n=0
for fd in /proc/"$pid"/fd/*; do
  [[ $(readlink "$fd") == "$m0" ]] || continue
  flags=$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/${fd##*/}")
  (((8#$flags & 8#40000) != 0)) && n=$((n + 1))
done
echo "$n"
EOF
direct_fds () { bash "$D_TMP/direct_fds" "$1" "$D_TMP/m0"; }
for mode in none direct default writeback; do
  conf "$D_TMP/cache.conf" '"64K"' 0 "cache = \"$mode\";"
  d_serve "serve.$mode" "$D_TMP/cache.conf" "$D_TMP/sz.pid" ||
    { d_bad "serve with cache = \"$mode\" failed"; continue; }
  n=$(direct_fds "$D_SERVER_PID")
  case $mode in
  none | direct) ((n > 0)) || d_bad "cache = \"$mode\": m0 not opened O_DIRECT" ;;
  *) ((n == 0)) || d_bad "cache = \"$mode\": m0 opened O_DIRECT" ;;
  esac
  d_stop "$D_SERVER_PID"
done
for mode in none direct default writeback; do
  d_run "pc.$mode" d_nbdkit -U - "$STRIPE_PLUGIN" "file=$D_TMP/m0" \
    "file=$D_TMP/m1" "cache=$mode" \
    --run "bash '$D_TMP/direct_fds' \$PPID '$D_TMP/m0'"
  n=$(<"$D_TMP/pc.$mode.out")
  case $mode in
  none | direct) ((n > 0)) || d_bad "cache=$mode: m0 not opened O_DIRECT" ;;
  *) ((n == 0)) || d_bad "cache=$mode: m0 opened O_DIRECT" ;;
  esac
done
d_run pc.bad d_nbdkit -U - "$STRIPE_PLUGIN" "file=$D_TMP/m0" cache=unsafe \
  --run true
[[ $D_RC -ne 0 ]] || d_bad "cache=unsafe accepted"
d_expect_err pc.bad "cache=unsafe: expected writeback, writethrough or direct (or nbdkit's default or none)"
d_ok "cache none/default: nbdkit's names, as direct/writeback, config and plugin"
d_done
