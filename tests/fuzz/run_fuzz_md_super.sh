#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz the md v1.x superblock decoder (plugin/meta/md_super.c) with libFuzzer.
#   tests/fuzz/run_fuzz_md_super.sh BUILD_DIR SECONDS
# Compiles fuzz_md_super.c with clang (gcc has no libFuzzer) under ASan
# and UBSan, runs it for SECONDS over a copy of the seed corpus, and fails
# on any crash, sanitizer report or broken promise.  Exits 77 (skip)
# when clang or its fuzzer runtime is not installed.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$(realpath -m "$1")
seconds=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$build/fuzz-md-super

clang=${CLANG:-}
if [ -z "$clang" ]; then
  for c in clang clang-14; do
    if command -v "$c" >/dev/null; then clang=$c; break; fi
  done
fi
if [ -z "$clang" ]; then
  echo "SKIP: clang not found (apt-get install clang libclang-rt-14-dev)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"

# Probe for the fuzzer runtime apart from our code, so that a missing
# package is a skip but a compile error in our code is a failure.
echo 'int LLVMFuzzerTestOneInput (const char *d, unsigned long n)
      { (void) d; (void) n; return 0; }' > "$work/probe.c"
if ! "$clang" -fsanitize=fuzzer,address,undefined "$work/probe.c" \
     -o "$work/probe" >"$work/probe.log" 2>&1; then
  echo "SKIP: $clang cannot build a libFuzzer target" \
       "(is libclang-rt-dev installed?):"
  sed 's/^/  /' "$work/probe.log"
  exit 77
fi

# -fno-sanitize-recover: a UBSan report must stop the run, not scroll past.
cd "$src"
"$clang" -g -O1 -Wall -Wextra -Werror -D_GNU_SOURCE \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I include plugin/meta/md_super.c tests/fuzz/fuzz_md_super.c \
  -o "$work/fuzz_md_super"

cp tests/fuzz/corpus/md_super/* "$work/corpus/"

# libFuzzer's own default exit code for a crash is 77, which CTest would
# take for a skip: ask for 1 instead.
status=0
"$work/fuzz_md_super" -max_total_time="$seconds" -max_len=4200 \
  -timeout=10 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if [ $status -ne 0 ]; then
  echo "FAIL: fuzz_md_super exited with $status; reproducer(s):"
  ls -l "$work/artifacts/"
  exit 1
fi
echo "PASS: no crash in $seconds s;" \
     "corpus grew to $(ls "$work/corpus" | wc -l) inputs"
