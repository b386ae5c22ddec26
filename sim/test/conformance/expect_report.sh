#!/usr/bin/env bash
# Runs a planted-hazard twin and passes only if it failed (non-zero exit) with the expected report:
#   expect_report.sh PATTERN PROGRAM
set -u
pattern="$1"
shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_report: the planted hazard went unreported (exit 0)"
  exit 1
fi
if ! printf '%s\n' "$output" | grep -qE -- "$pattern"; then
  echo "expect_report: exit $status, but no report matching: $pattern"
  exit 1
fi
echo "expect_report: reported ($pattern)"
