#!/usr/bin/env bash
# Tests remove what they create. Every test of the suite runs with TMPDIR pointed at one
# directory (test/CMakeLists.txt; GoogleTest's scratch directories and every program a test
# starts live there). Two CTest fixture steps around the whole suite:
#   tmp_clean_test.sh ready DIR   before any test: DIR made, empty
#   tmp_clean_test.sh check DIR   after every test: fails, listing them, if anything is left in
#                                 DIR (whether the tests passed or not), then removes DIR
# Left out of the check: Open MPI's session directories (ompi.*, prte.*, openmpi-sessions-*),
# which mpirun keeps after a job it killed, as the tests of stuck and aborted ranks make it do.
set -uo pipefail
if [[ $# -ne 2 || ( "$1" != ready && "$1" != check ) ]]; then
  echo "usage: $0 ready|check DIR" >&2
  exit 2
fi
dir=$2
if [[ "$1" == ready ]]; then
  rm -rf "$dir" && mkdir -p "$dir"
  exit $?
fi
left=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name 'ompi.*' ! -name 'prte.*' ! -name 'openmpi-sessions-*' 2>/dev/null | sort)
rm -rf "$dir"
if [[ -n "$left" ]]; then
  echo "tmp_clean_test: the tests left these in the temporary directory (the names say which test made them):"
  echo "$left" | head -50
  exit 1
fi
echo "tmp_clean_test: every test left the temporary directory as it found it"
