#!/usr/bin/env bash
# Tests remove what they create: runs test binaries (BINARY or BINARY:GTEST_FILTER) with the
# temporary directory (TMPDIR, and TEST_TMPDIR, which GoogleTest's TempDir() reads) pointed at
# a fresh empty one, and fails when anything is left in it afterwards — whether the tests
# passed or not. The binaries named are those that write files: the CLI's, the readers', the
# profiler outputs', the device tools'.
#   usage: tmp_clean_test.sh WORK_DIR BINARY[:FILTER]...
set -uo pipefail
work=$1
shift
rm -rf "$work"
mkdir -p "$work"
status=0
for spec in "$@"; do
  binary=${spec%%:*}
  filter='*'
  [[ "$spec" == *:* ]] && filter=${spec#*:}
  if ! TMPDIR="$work" TEST_TMPDIR="$work" OMP_NUM_THREADS=1 "$binary" --gtest_filter="$filter" > "$work.log" 2>&1; then
    echo "tmp_clean_test: $(basename "$binary") failed (its own failures; the check below still runs):"
    tail -20 "$work.log"
    status=1
  fi
  left=$(find "$work" -mindepth 1 | head -20)
  if [[ -n "$left" ]]; then
    echo "tmp_clean_test: $(basename "$binary") --gtest_filter='$filter' left in the temporary directory:"
    echo "$left"
    status=1
    rm -rf "${work:?}"/*
  fi
done
rm -f "$work.log"
rmdir "$work" 2>/dev/null
[[ $status -eq 0 ]] && echo "tmp_clean_test: every binary left the temporary directory as it found it"
exit $status
