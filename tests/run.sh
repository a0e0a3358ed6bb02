#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: installs what is needed, builds twice (plain with
# -Werror, and with AddressSanitizer + UndefinedBehaviorSanitizer) and runs
# every test in both builds.  Exit status 0 only if everything passed.
# Tests run side by side, one more than there are CPUs (most wait on I/O
# and on their servers): each has its own temporary and run directory
# (tests/lib/common.sh); those that need the machine to themselves say
# so (RUN_SERIAL, PROCESSORS, RESOURCE_LOCK in their CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
run_suite () {
  local dir=$1; shift
  echo "== build $dir $*"
  .ci/setup "$dir" "$@"
  echo "== tests in $dir"
  # Longest first.  ctest orders tests by their times in the build
  # directory's CTestCostData.txt; a fresh build has none, and ctest ran
  # them in the order they are declared: the crash tests, declared last,
  # ran last, three at a time long after the rest, and the tests that
  # need two processors waited for two free slots to the very end.
  # tests/ctest-cost.txt: seconds a test took in a run of this command
  # (the tests that need two processors first, while slots are free);
  # ctest's own times replace it from the second run on.
  local cost=$dir/Testing/Temporary/CTestCostData.txt
  if [[ ! -e $cost ]]; then
    mkdir -p "$(dirname "$cost")"
    cp tests/ctest-cost.txt "$cost"
  fi
  ctest --test-dir "$dir" --output-on-failure --timeout 600 \
    -j "$(($(nproc) + 1))" || status=1
}

run_suite build
run_suite build-asan -DNBDSTRIPE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
exit $status
