#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit-stripe-plugin.so exports what nbdkit looks up and nothing else
# (plugin/nbdkit-stripe-plugin.syms): plugin_init and the debug flags
# stripe_debug_NAME.  nbdkit dlopens plugins with RTLD_GLOBAL, so an
# engine symbol exported from the plugin (config_load, volume_open, crc32c,
# ...) could interpose on a filter's or a library's of the same name.
#
# Asserts: `nm -D --defined-only` lists plugin_init, stripe_debug_io_uring
# and no other symbol; nbdkit loads the plugin (--dump-plugin, name=stripe);
# nbdkit still finds the debug flag (-D stripe.io_uring=0 switches io_uring
# off: the plugin says so in a debug line).
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh" || exit 1

fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
[[ -n ${STRIPE_PLUGIN:-} && -f $STRIPE_PLUGIN ]] ||
  skip "STRIPE_PLUGIN is not set (run through ctest)"
for t in nm nbdkit; do
  command -v "$t" >/dev/null || skip "$t is not installed"
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-exports.XXXXXX")
trap 'rm -rf -- "$TMP"' EXIT
t_server_env "$TMP"

syms=$(nm -D --defined-only "$STRIPE_PLUGIN" | awk '{ print $NF }' | sort) ||
  fail "nm -D $STRIPE_PLUGIN"
printf 'exported: %s\n' $syms
extra=$(grep -v -x -E 'plugin_init|stripe_debug_[A-Za-z0-9_]+' <<<"$syms")
[[ -z $extra ]] || fail "exported beyond plugin_init and stripe_debug_*: $(tr '\n' ' ' <<<"$extra")"
for s in plugin_init stripe_debug_io_uring; do
  grep -q -x "$s" <<<"$syms" || fail "$s is not exported"
done

"${T_PRE[@]}" nbdkit "$STRIPE_PLUGIN" --dump-plugin >"$TMP/dump" 2>&1 ||
  { cat "$TMP/dump" >&2; fail "nbdkit cannot load the plugin"; }
grep -q -x 'name=stripe' "$TMP/dump" || fail "--dump-plugin: no name=stripe"

truncate -s 1M "$TMP/m0"
"${T_PRE[@]}" nbdkit -v -D stripe.io_uring=0 "$STRIPE_PLUGIN" \
  "file=$TMP/m0" chunk=64K -U - --run true >"$TMP/run" 2>&1 ||
  { cat "$TMP/run" >&2; fail "nbdkit -D stripe.io_uring=0 failed"; }
grep -q 'io_uring switched off' "$TMP/run" ||
  fail "-D stripe.io_uring=0 did not reach the plugin (stripe_debug_io_uring not found by nbdkit?)"
t_asan_reports "$TMP"
[[ $T_REPORTS -eq 0 ]] || fail "sanitizer reports (above)"
echo PASS
