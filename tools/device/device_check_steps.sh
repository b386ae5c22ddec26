# tools/device/device_check_steps.sh — the GPU run's bookkeeping: phases and their time budgets,
# steps run under a time limit clipped to them, the rows the steps record, and the summary written
# from those rows (finish). Apart from device_check.sh, which says what runs in each phase, because
# this is how any step is timed, judged and reported, whatever it runs. Sourced by device_check.sh
# (ROOT set there; finish reads DEST, WORK, COMMITS and RUNNER, which its run sets); not run on
# its own.
# shellcheck shell=bash
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  echo "device_check_steps.sh: sourced by tools/device/device_check.sh; run that (--help)" >&2
  exit 2
fi

START=$(date +%s)
BUDGET_S=${DEVICE_CHECK_BUDGET_S:-450}
MIN_STEP_S=${DEVICE_CHECK_MIN_STEP_S:-15}
ROWS=()        # "step|status|seconds|note" for the table
FAILED=0
PHASE=setup    # the current phase and when its budget ends (begin_phase)
PHASE_BUDGET_S=$BUDGET_S
PHASE_END=$(( START + BUDGET_S ))

# begin_phase NAME BUDGET_S: the steps that follow share BUDGET_S seconds (never past the
# whole run's budget), so a slow phase cannot take the time of the phases after it.
begin_phase() {
  PHASE="$1"
  PHASE_BUDGET_S="$2"
  PHASE_END=$(( $(date +%s) + $2 ))
  (( PHASE_END > START + BUDGET_S )) && PHASE_END=$(( START + BUDGET_S ))
  echo "device_check: phase $PHASE (budget ${PHASE_BUDGET_S}s, $(( PHASE_END - $(date +%s) ))s available)"
}

remaining() { echo $(( PHASE_END - $(date +%s) )); }

record() {  # record STEP STATUS SECONDS NOTE
  ROWS+=("$1|$2|$3|$4")
  [[ "$2" == FAIL ]] && FAILED=1
  [[ "$2" == timeout && "$PHASE" == tests ]] && FAILED=1  # a hung test is a failure
  printf "device_check: %-34s %-7s %4ss  %s\n" "$1" "$2" "$3" "$4"
}

# status_of RC: ok, timeout (timeout(1) gives 124, or 137 after its --kill-after) or FAIL.
status_of() {
  case "$1" in
    0) echo ok ;;
    124|137) echo timeout ;;
    *) echo FAIL ;;
  esac
}

# run_step NAME LIMIT_S LOG COMMAND...: runs with a time limit clipped to the phase's budget
# left; sets STEP_RC (124 on timeout) and STEP_S. Returns 1 (and records "skip") if no time
# is left.
run_step() {
  local name="$1" limit="$2" log="$3"
  shift 3
  local left
  left=$(remaining)
  if (( left < MIN_STEP_S )); then
    record "$name" skip 0 "no time left in the $PHASE phase's ${PHASE_BUDGET_S}s budget (run budget ${BUDGET_S}s)"
    return 1
  fi
  (( limit > left )) && limit=$left
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  # shellcheck disable=SC2034  # STEP_RC and STEP_S are read by device_check.sh's steps
  STEP_RC=$?
  # shellcheck disable=SC2034
  STEP_S=$(( $(date +%s) - t0 ))
  return 0
}

# "N passed, M failed, K skipped" from a gtest log.
gtest_counts() {
  local log="$1" passed failed skipped
  passed=$(grep -Eo '\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  failed=$(grep -Eo '\[  FAILED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | tail -1)
  skipped=$(grep -Eo '\[  SKIPPED \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | tail -1)
  echo "${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
}

finish() {  # finish GPU COMMIT: summary file, logs archive, stdout table, exit status
  local gpu="$1" commit="$2" row step status seconds note
  {
    echo "# blockscope device check"
    echo
    echo "- GPU: $gpu"
    echo "- commit: ${COMMITS:-kit $commit} (kit built on the build machine; runner: ${RUNNER:-none})"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); wall time $(( $(date +%s) - START )) s of a ${BUDGET_S} s budget"
    echo "- logs: logs.tar.gz (gtest XML, sanitizer reports, profiles, benchmark and PyTorch JSON)"
    echo
    echo "| step | status | seconds | note |"
    echo "|---|---|---|---|"
    for row in "${ROWS[@]}"; do
      IFS='|' read -r step status seconds note <<< "$row"
      echo "| $step | $status | $seconds | $note |"
    done
  } > "$DEST/summary.md"
  tar -C "$WORK" -czf "$DEST/logs.tar.gz" logs 2>/dev/null || true

  echo
  printf "%-34s %-7s %7s  %s\n" STEP STATUS SECONDS NOTE
  for row in "${ROWS[@]}"; do
    IFS='|' read -r step status seconds note <<< "$row"
    printf "%-34s %-7s %7s  %s\n" "$step" "$status" "$seconds" "$note"
  done
  echo "device_check: summary in $DEST/summary.md ($(( $(date +%s) - START )) s)"
  rm -rf "$WORK"
  exit "$FAILED"
}
