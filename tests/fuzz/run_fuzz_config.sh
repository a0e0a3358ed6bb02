#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the config loader's libFuzzer target with clang (ASan + UBSan)
# and fuzzes it for a bounded time.
#
#   run_fuzz_config.sh BUILD_DIR SECONDS
#
# The binary goes to BUILD_DIR/tests/fuzz/config/, and so does any input
# that crashes it (crash-*, leak-*, timeout-*), to reproduce with
#   LSAN_OPTIONS=suppressions=tests/lib/lsan.supp \
#     BUILD_DIR/tests/fuzz/config/fuzz_config FILE
# The seeds are tests/fuzz/corpus/config/, conf/example.conf and the bad
# configs (tests/config/bad/), with the words of fuzz_config.dict; new
# inputs found during the run are thrown away with the working copy of the
# corpus.
#
# Exit: 0 no crash, 1 a crash (or a build failure), 77 no clang/libFuzzer.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$(realpath -- "$1")
seconds=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/tests/fuzz/config

skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }

cc=
for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
  if command -v "$c" >/dev/null; then cc=$c; break; fi
done
[[ -n $cc ]] || skip "clang is not installed (libFuzzer needs it)"

work=$(mktemp -d /tmp/nbdstripe-fuzz-config-run.XXXXXX)
trap 'rm -rf -- "$work"' EXIT

cat > "$work/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  (void) data;
  (void) size;
  return 0;
}
EOF
"$cc" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" 2>"$work/probe.log" ||
  skip "$cc cannot link -fsanitize=fuzzer (install libclang-rt-dev):" \
       "$(head -n 3 "$work/probe.log")"

if pkg-config --exists libconfig 2>/dev/null; then
  read -r -a libconfig_cflags <<< "$(pkg-config --cflags libconfig)"
  read -r -a libconfig_libs <<< "$(pkg-config --libs libconfig)"
else
  libconfig_cflags=() libconfig_libs=(-lconfig)
fi

mkdir -p "$out"
echo "== building $out/fuzz_config with $cc"
"$cc" -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$src/include" "${libconfig_cflags[@]}" \
  "$src/tests/fuzz/fuzz_config.c" "$src/plugin/core/cache_mode.c" \
  "$src/plugin/util/log.c" \
  "$src/plugin/config/config.c" "$src/plugin/config/config_report.c" \
  "$src/plugin/config/config_value.c" "$src/plugin/config/config_volume.c" \
  "$src/plugin/config/config_sections.c" \
  "$src/plugin/config/config_check.c" "$src/plugin/config/config_text.c" \
  "${libconfig_libs[@]}" -o "$out/fuzz_config"

mkdir "$work/corpus"
cp "$src"/tests/fuzz/corpus/config/* "$src/conf/example.conf" \
   "$src"/tests/config/bad/*.conf "$work/corpus/"

echo "== fuzzing for ${seconds}s"
export TMPDIR=$work
supp=$src/tests/lib/lsan.supp
export LSAN_OPTIONS="suppressions=$supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# libFuzzer's own default exit code for a crash is 77, CTest's "skipped".
rc=0
"$out/fuzz_config" -max_total_time="$seconds" -timeout=10 -max_len=8192 \
  -dict="$src/tests/fuzz/fuzz_config.dict" -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$out/" "$work/corpus" < /dev/null || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: fuzz_config exited with $rc; reproducer(s) in $out/:" >&2
  ls -1 "$out" | grep -E '^(crash|leak|timeout|oom)-' >&2 || :
  exit 1
fi
echo "== no crash in ${seconds}s"
