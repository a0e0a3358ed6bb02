#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file says its licence (LICENSE: BSD-3-Clause) in an SPDX
# line near its top: C, headers, shell, Python, CMake, POD, units, the
# example config and the scripts without a suffix.  Data files (JSON,
# test configs and corpora, the published bench results) and debian/
# (debian/copyright) are not.
# Needs the git checkout (exit 77 without one).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "SKIP: not a git checkout"; exit 77; }
missing=0
while IFS= read -r f; do
  case $f in
    debian/* | tests/fuzz/corpus/* | bench/results/* | LICENSE | *.json | *.json.in | *.md | \
      .gitignore | */.gitignore | .clang-format) continue ;;
    tests/*.conf | tests/*/*.conf | tests/*/*/*.conf) continue ;;
  esac
  case $f in
    *.c | *.h | *.sh | *.py | *CMakeLists.txt | *.pod | *.in | *.syms | \
      *.supp | *.dict | *.service | *.socket | conf/*.conf | */*.bash | \
      bench/* | .ci/*) ;;
    *) [[ $f == */* && ${f##*/} != *.* && -x $f ]] || continue ;;
  esac
  if ! head -c 600 "$f" | grep -q "SPDX-License-Identifier: BSD-3-Clause"; then
    echo "FAIL: $f has no SPDX-License-Identifier line"
    missing=$((missing + 1))
  fi
done < <(git ls-files)
[[ $missing -eq 0 ]] || exit 1
echo "ok: every source file carries SPDX-License-Identifier: BSD-3-Clause"
