#!/usr/bin/env bash
# Runs test binaries N times with BLOCKSCOPE_TEST_ERRORS=1 (fresh seeds each run) and prints the
# largest error each check measured ("measured-error NAME VALUE" lines, test/support): what
# the bounds in docs/TESTING.md come from.
#   tools/ci/measure_errors.sh 20 build/default/test/{block,norm,activation,softmax,attention}_test
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 RUNS TEST_BINARY..." >&2
  exit 2
fi
runs=$1
shift
for ((i = 0; i < runs; i++)); do
  for binary in "$@"; do
    BLOCKSCOPE_TEST_ERRORS=1 "$binary" --gtest_brief=1 | grep '^measured-error ' || {
      echo "$0: $binary failed on run $((i + 1)) (its output above)" >&2
      exit 1
    }
  done
done | awk '{ if (!($2 in worst) || $3 + 0 > worst[$2]) worst[$2] = $3 + 0; n[$2]++ }
            END { printf "%-40s %10s %8s\n", "check", "max error", "samples";
                  for (k in worst) printf "%-40s %10.3e %8d\n", k, worst[k], n[k] }' | sort
