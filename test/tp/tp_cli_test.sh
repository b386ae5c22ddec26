#!/usr/bin/env bash
# Tensor parallelism over MPI on the CPU, end to end through the CLI (ctest: tp_cli):
#   - check: the output of 2 (and 4) ranks against the float64 reference of the unsplit block,
#     GPT-2 (fused c_attn split by heads), Llama (GQA: kv heads split) and a custom block, f32 and
#     bf16, every path mix;
#   - profile: rank 0 prints each rank's op table with the all-reduces, the per-rank summary and
#     the merged table; only rank 0 writes --save;
#   - refused before any work, naming the fix: ranks that do not divide the heads, a group size
#     other than mpirun's, parallel.tensor without mpirun;
#   - ranks given different work (config keys, command -- info, diff and report included --,
#     outputs, effective thread count) refused on every rank before any work, naming each key and
#     both values; mpirun without parallel.tensor refused; '-' (standard input) refused;
#   - report under mpirun written by rank 0 alone;
#   - every rank-derived output (PATH.rankN.json) checked before any work;
#   - --dump under mpirun (its forward's collectives need every rank);
#   - one rank failing mid-run (SIGTERM to rank 1) ends every rank: rank 0 stops at its next
#     collective naming rank 1, removes what it wrote and its temporaries — no hang, no output.
# Usage: tp_cli_test.sh BLOCKSCOPE SOURCE_DIR WORK_DIR MPIEXEC
set -uo pipefail
cli=$1 src=$2 work=$3 mpiexec=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_rmaps_base_oversubscribe=1                        # 4 ranks on 2 cores
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run NAME EXPECTED_EXIT COMMAND...: output in NAME.out
run() {
  local name=$1 want=$2; shift 2
  timeout 300 "$@" > "$name.out" 2>&1
  local got=$?
  [ "$got" -eq "$want" ] || { fail "$name: exit $got, expected $want"; tail -20 "$name.out"; }
}
expect() {  # expect NAME TEXT: TEXT occurs in NAME.out
  grep -qF -- "$2" "$1.out" || { fail "$1: output lacks '$2'"; tail -20 "$1.out"; }
}
blocks=$src/configs/blocks

# tiny-custom's 3 kv heads do not split in 2: 2 kv heads (3 query heads each) instead.
for config in tiny-gpt2 tiny-llama tiny-custom; do
  extra=()
  [ "$config" = tiny-custom ] && extra=(--set model.n_kv_heads=2)
  for dtype in f32 bf16; do
    run "check_${config}_${dtype}" 0 "$mpiexec" -np 2 "$cli" check "$blocks/$config.yaml" --device cpu --dtype "$dtype" \
        --set parallel.tensor=2 "${extra[@]}"
    expect "check_${config}_${dtype}" "tensor parallel over 2 ranks"
    expect "check_${config}_${dtype}" "all paths within the accuracy rule"
  done
done
run check_gpt2_4ranks 0 "$mpiexec" -np 4 "$cli" check "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=4
expect check_gpt2_4ranks "all paths within the accuracy rule"

# Sequence parallelism: the norms and residual adds on each rank's block of tokens, a
# reduce-scatter and an all-gather for each all-reduce; tiny-gpt2 is a 2-layer stack (the rows
# pass from layer to layer without a gather), tiny-llama one block; 4 ranks on 4·8 tokens.
for config in tiny-gpt2 tiny-llama; do
  for dtype in f32 bf16; do
    run "sp_${config}_${dtype}" 0 "$mpiexec" -np 2 "$cli" check "$blocks/$config.yaml" --device cpu --dtype "$dtype" \
        --set parallel.tensor=2 --set parallel.sequence_parallel=true
    expect "sp_${config}_${dtype}" "tensor parallel over 2 ranks with sequence parallelism"
    expect "sp_${config}_${dtype}" "all paths within the accuracy rule"
  done
done
run sp_gpt2_4ranks 0 "$mpiexec" -np 4 "$cli" check "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=4 \
    --set parallel.sequence_parallel=true --set input.seq_len=16
expect sp_gpt2_4ranks "all paths within the accuracy rule"
run sp_profile 0 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-llama.yaml" --device cpu --set parallel.tensor=2 \
    --set parallel.sequence_parallel=true
for text in "reduce_scatter" "all_gather" "collective %"; do expect sp_profile "$text"; done
grep -q "all_reduce " sp_profile.out && fail "sp_profile: an all_reduce under sequence parallelism"

run profile_gpt2 0 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=2 \
    --save "$work/tp.json" --trace "$work/tp_trace.json" --predict h100
for text in "all_reduce" "/ rank 1 ==" "/ ranks (tensor parallel over 2" "merged across ranks" "slowest rank:"; do
  expect profile_gpt2 "$text"
done
[ -f "$work/tp.json" ] || fail "profile_gpt2: rank 0 did not save tp.json"
[ "$(ls "$work" | grep -c '^tp\..*json$')" -ge 1 ] || fail "profile_gpt2: no per-variant profile saved"
# Saved profiles keep their rank (rank 1's beside rank 0's); each rank's trace is its own file
# (rank 1's beside rank 0's, as HTA reads them), a process pair per variant, its rank in
# distributedInfo.
python3 - "$work" <<'PY' || fail "profile_gpt2: saved ranks or trace processes wrong"
import json, sys, os
work = sys.argv[1]
base, rank1 = json.load(open(f"{work}/tp.json")), json.load(open(f"{work}/tp.rank1.json"))
assert base["tensor_parallel"] == {"rank": 0, "ranks": 2}, base.get("tensor_parallel")
assert rank1["tensor_parallel"] == {"rank": 1, "ranks": 2}, rank1.get("tensor_parallel")
assert any(op["name"] == "all_reduce" for op in rank1["ops"])
# --predict: every rank's profile carries its prediction, the all-reduces priced as NCCL's over
# 2 H100s (small messages: latency-bound).
for saved in (base, rank1):
    reduces = [op for op in saved["prediction"]["ops"] if op["name"] == "all_reduce"]
    assert saved["prediction"]["target"] == "h100-sxm" and reduces, saved["prediction"]
    assert reduces[0]["bound"] == "latency" and reduces[0]["predicted_us"] > 0, reduces
for rank, name in ((0, "tp_trace.json"), (1, "tp_trace.rank1.json")):
    trace = json.load(open(f"{work}/{name}"))
    assert trace["distributedInfo"] == {"backend": "mpi", "rank": rank, "world_size": 2}, trace["distributedInfo"]
    hosts = [e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"].startswith("host: ")]
    assert len(hosts) == 2 and all(n.endswith(f"/ rank {rank}") for n in hosts), hosts  # 2 variants
    assert any(n.startswith("host: base") for n in hosts), hosts
PY
# diff: TP = 1 (one process, the same config) against TP = 2's rank 0: the all-reduces appear.
run profile_tp1 0 "$cli" profile "$blocks/tiny-gpt2.yaml" --device cpu --save "$work/tp1.json"
run diff_tp 0 "$cli" diff "$work/tp1.json" "$work/tp.json"
expect diff_tp "all_reduce"
expect diff_tp "before unsplit, after rank 0 of 2 (tensor parallel)"

# GPUs under mpirun (where this build has any: the simulated GPU's build has them): each rank
# on its own GPU (node rank mod GPUs), the collectives over NCCL started over MPI where NCCL is
# built (the simulated GPU's build: its NCCL joins the processes through shared memory), else
# staged through host memory over MPI.
if "$cli" info --format json 2>/dev/null | grep -q '"cuda_available": true'; then
  engine="MPI"
  "$cli" info --format json 2>/dev/null | grep -q '"nccl_built": true' && engine="over MPI"
  # f32 too: bf16's bound is loose enough that a missing all-reduce (a half-summed sublayer next
  # to the residual stream, error 1.7e-2 against 5.7e-2) passes it; f32's is not (4.5e-6).
  for dtype in f32 bf16; do
    for sp in false true; do
      name="cuda_mpi_${dtype}_sp_$sp"
      run "$name" 0 "$mpiexec" -np 2 "$cli" check "$blocks/tiny-llama.yaml" --device cuda --dtype $dtype \
          --set parallel.tensor=2 --set parallel.sequence_parallel=$sp
      expect "$name" "all paths within the accuracy rule"
      expect "$name" "cuda:0"
      expect "$name" "$engine"
    done
  done
  run cuda_mpi_profile 0 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" --device cuda --set parallel.tensor=2
  for text in "all_reduce" "/ rank 1 ==" "merged across ranks"; do expect cuda_mpi_profile "$text"; done
else
  echo "no CUDA device in this build: the GPU-under-mpirun checks are left to the simulated GPU's build"
fi

# Refused before any work (exit 2), each naming the fix.
run bad_divide 2 "$cli" check "$blocks/tiny-llama.yaml" --device cpu --set parallel.tensor=4
expect bad_divide "model.n_kv_heads = 2"
run bad_no_mpirun 2 "$cli" run "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=2
expect bad_no_mpirun "mpirun -np 2"
run bad_group 2 "$mpiexec" -np 2 "$cli" run "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=4
expect bad_group "mpirun started 2 ranks"

# Ranks given different work: refused on every rank before any work (exit 2), each difference
# named with both values. Rank 1's config with other weights, another n_layers, another seed;
# another command; another --save.
sed "s|weights: {init: perturbed}|weights: {init: random}|" "$blocks/tiny-gpt2.yaml" > "$work/rank1.yaml"
mpmd() {  # mpmd NAME EXPECTED_EXIT "RANK 0 ARGS" "RANK 1 ARGS" (word-split)
  local name=$1 want=$2
  # shellcheck disable=SC2086
  run "$name" "$want" "$mpiexec" -np 1 "$cli" $3 : -np 1 "$cli" $4
}
tp="--device cpu --set parallel.tensor=2"
mpmd disagree_weights 2 "profile $blocks/tiny-gpt2.yaml $tp --save $work/never.json" \
    "profile $work/rank1.yaml $tp --save $work/never.json"
expect disagree_weights "not given the same work"
expect disagree_weights "weights.init: rank 0 has 'perturbed', rank 1 has 'random'"
expect disagree_weights "blockscope (rank 1 of 2): error:"
[ ! -e "$work/never.json" ] || fail "disagree_weights: rank 0 wrote never.json"
# Rank 1's config names a weights file that does not exist: rank 1 fails reading its config,
# and rank 0, already waiting for the agreement, is told why and ends too — no hang, no file.
sed "s|weights: {init: perturbed}|weights: {init: file, file: $work/missing.safetensors}|" "$blocks/tiny-gpt2.yaml" \
    > "$work/rank1_missing.yaml"
mpmd rank1_config_fails 2 "profile $blocks/tiny-gpt2.yaml $tp --save $work/never.json" \
    "profile $work/rank1_missing.yaml $tp --save $work/never.json"
expect rank1_config_fails "blockscope (rank 0 of 2): runtime failure"
expect rank1_config_fails "rank 1 of 2: $work/rank1_missing.yaml"
expect rank1_config_fails "missing.safetensors"
[ ! -e "$work/never.json" ] || fail "rank1_config_fails: rank 0 wrote never.json"
mpmd disagree_layers 2 "run $blocks/tiny-gpt2.yaml $tp" "run $blocks/tiny-gpt2.yaml $tp --set model.n_layers=3"
expect disagree_layers "model.n_layers: rank 0 has '2', rank 1 has '3'"
mpmd disagree_seed 2 "run $blocks/tiny-gpt2.yaml $tp --set seed=1" "run $blocks/tiny-gpt2.yaml $tp --set seed=2"
expect disagree_seed "seed: rank 0 has '1', rank 1 has '2'"
mpmd disagree_command 2 "run $blocks/tiny-gpt2.yaml $tp" "check $blocks/tiny-gpt2.yaml $tp"
expect disagree_command "command: rank 0 has 'run', rank 1 has 'check'"
mpmd disagree_save 2 "profile $blocks/tiny-gpt2.yaml $tp --save $work/a.json" \
    "profile $blocks/tiny-gpt2.yaml $tp --save $work/b.json"
expect disagree_save "--save: rank 0 has '$work/a.json', rank 1 has '$work/b.json'"
[ ! -e "$work/a.json" ] || fail "disagree_save: rank 0 wrote a.json"

# Hostile round F11: a rank given info, diff or report beside a workload command: refused at
# once on every rank, naming each rank's command (before: 60 s in a collective, then "a rank is
# gone, stuck"). F13: the effective thread count is compared, OMP_NUM_THREADS included (before:
# only the --threads flag).
mpmd_quick() {  # mpmd_quick NAME EXPECTED_TEXT "RANK 0 ARGS" "RANK 1 ARGS": exit 2 within 30 s
  local started=$SECONDS
  mpmd "$1" 2 "$3" "$4"
  expect "$1" "$2"
  [ $((SECONDS - started)) -lt 30 ] || fail "$1: took $((SECONDS - started)) s"
}
mpmd_quick mpmd_info "command: rank 0 has 'run', rank 1 has 'info'" "run $blocks/tiny-gpt2.yaml $tp" "info"
mpmd_quick mpmd_diff "command: rank 0 has 'profile', rank 1 has 'diff'" \
    "profile $blocks/tiny-gpt2.yaml $tp --save $work/never.json" "diff $work/tp1.json $work/tp1.json"
mpmd_quick mpmd_report "command: rank 0 has 'report', rank 1 has 'check'" "report $work/tp1.json -o $work/never.html" \
    "check $blocks/tiny-gpt2.yaml $tp"
[ ! -e "$work/never.json" ] && [ ! -e "$work/never.html" ] || fail "mpmd: a rank wrote an output"
# shellcheck disable=SC2086
run disagree_threads_env 2 "$mpiexec" -np 1 env OMP_NUM_THREADS=1 "$cli" run "$blocks/tiny-gpt2.yaml" $tp \
    : -np 1 env OMP_NUM_THREADS=2 "$cli" run "$blocks/tiny-gpt2.yaml" $tp
expect disagree_threads_env "threads (--threads, else OMP_NUM_THREADS, else the cores less one): rank 0 has '1', rank 1 has '2'"
# M43: report under mpirun: rank 0 alone writes it (before: every rank, "wrote report" twice).
run report_tp 0 "$mpiexec" -np 2 "$cli" report "$work/tp1.json" -o "$work/tp1.html"
[ "$(grep -c "^wrote report" report_tp.out)" -eq 1 ] || fail "report_tp: not said once"
[ -s "$work/tp1.html" ] || fail "report_tp: no report written"
# F12: '-' (standard input) under mpirun: Open MPI gives it to rank 0 only; refused on every rank
# naming why (before: rank 1 read nothing and said "workload: missing required key").
run stdin_config 2 sh -c 'cat "$1" | "$2" -np 2 "$3" run - --device cpu --set parallel.tensor=2' sh \
    "$blocks/tiny-gpt2.yaml" "$mpiexec" "$cli"
expect stdin_config "Open MPI passes standard input to rank 0 only"
grep -q "missing required key" stdin_config.out && fail "stdin_config: a rank read an empty config"

# A command line that does not parse on rank 1: rank 0, waiting for the agreement, is told.
mpmd usage_error 2 "run $blocks/tiny-gpt2.yaml $tp" "run --bogus"
expect usage_error "rank 1 of 2: The following argument was not expected: --bogus"

# mpirun without parallel.tensor: every rank would run the whole workload alone.
run no_split 2 "$mpiexec" -np 2 "$cli" run "$blocks/tiny-gpt2.yaml" --device cpu
expect no_split "mpirun started 2 ranks but parallel.tensor is 1"

# Rank-derived outputs are checked before any work: rank 1's profile would be saved as
# q6.rank1.json, here the config itself; a trace at q4.rank1.json; a directory where rank 1's
# trace would go (q7_trace.rank1.json); a directory at q5.rank1.json.
cp "$blocks/tiny-gpt2.yaml" "$work/q6.rank1.json"
run derived_config 2 "$mpiexec" -np 2 "$cli" profile "$work/q6.rank1.json" $tp --save "$work/q6.json"
expect derived_config "q6.rank1.json"
cmp -s "$blocks/tiny-gpt2.yaml" "$work/q6.rank1.json" || fail "derived_config: the config was overwritten"
run derived_trace 2 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" $tp --save "$work/q4.json" \
    --trace "$work/q4.rank1.json"
expect derived_trace "q4.rank1.json"
mkdir -p "$work/q7_trace.rank1.json"
run derived_trace_rank 2 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" $tp --trace "$work/q7_trace.json"
expect derived_trace_rank "q7_trace.rank1.json"
[ ! -e "$work/q7_trace.json" ] || fail "derived_trace_rank: rank 0's trace was written"
mkdir -p "$work/q5.rank1.json"
run derived_directory 2 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" $tp --save "$work/q5.json"
expect derived_directory "q5.rank1.json"
[ ! -e "$work/q4.json" ] && [ ! -e "$work/q5.json" ] && [ ! -e "$work/q6.json" ] || fail "derived: a profile was saved"

# --dump: the dump's forward runs on every rank (its all-reduces need them all); rank 0 writes.
run dump_tp 0 "$mpiexec" -np 2 "$cli" run "$blocks/tiny-gpt2.yaml" $tp --dump "$work/tp_dump.safetensors"
[ -s "$work/tp_dump.safetensors" ] || fail "dump_tp: no dump written"

# One rank failing mid-run: SIGTERM to rank 1 (its pid from the wrapper) while rank 0 profiles
# 6000 steps with --save and --trace, 0.2 s into the first variant so the signal lands among the
# steps. Rank 0 must stop at its next collective naming rank 1, remove what it wrote and its
# temporaries; no hang. On GPUs too (over NCCL where it is built).
devices=(cpu)
"$cli" info --format json 2>/dev/null | grep -q '"cuda_available": true' && devices+=(cuda)
for device in "${devices[@]}"; do
  name="one_rank_fails_$device"
  rm -rf "$work/fails" && mkdir -p "$work/fails"
  args=(profile "$blocks/tiny-gpt2.yaml" --device "$device" --set parallel.tensor=2 --set profile.schedule.active=6000
        --save "$work/fails/never.json" --trace "$work/fails/never_trace.json")
  start=$(date +%s)
  timeout 120 "$mpiexec" -np 1 "$cli" "${args[@]}" : -np 1 sh -c 'echo $$ > "$0"; exec "$@"' "$work/rank1.pid" \
      "$cli" "${args[@]}" > "$name.out" 2>&1 &
  launcher=$!
  for _ in $(seq 300); do grep -q "^profile: \[1/2\]" "$name.out" 2>/dev/null && break; sleep 0.1; done
  sleep 0.2
  kill -TERM "$(cat "$work/rank1.pid")" 2>/dev/null || fail "$name: rank 1 was not running"
  wait "$launcher"
  got=$?
  [ "$got" -eq 143 ] || fail "$name: exit $got, expected 143, rank 1's (0: not failed; 124: hung)"
  expect "$name" "rank 1 of 2: interrupted by SIGTERM"
  expect "$name" "blockscope (rank 0 of 2): runtime failure"
  [ -z "$(ls -A "$work/fails")" ] || fail "$name: rank 0 left $(ls -A "$work/fails" | tr '\n' ' ')"
  echo "$name: one rank failing ended the run in $(( $(date +%s) - start )) s with exit $got"
done

# SIGTERM to mpirun itself (Ctrl-C's SIGINT too: the ranks have process groups of their own, so
# only mpirun gets it): Open MPI forwards it to every rank as SIGTERM; each must stop, say so and
# leave nothing. mpirun's own status is Open MPI's (1 in 4.1). `timeout --foreground` passes
# the signal on once (without it, timeout signals mpirun's process group as well, and a second
# signal makes Open MPI kill the ranks at once).
# Twice: among the steps, and while rank 0 gathers and reads the other rank's profile after
# its own tables (seconds of JSON at 6000 steps: both ranks must answer the signal there too,
# and a collective they leave unfinished must not write into memory they freed).
mpirun_sigterm() {
  local name=$1 started=$2 delay=$3
  rm -rf "$work/fails" && mkdir -p "$work/fails"
  timeout --foreground 120 "$mpiexec" -np 2 "$cli" profile "$blocks/tiny-gpt2.yaml" --device cpu --set parallel.tensor=2 \
      --set profile.schedule.active=6000 --save "$work/fails/never.json" --trace "$work/fails/never_trace.json" \
      > "$name.out" 2>&1 &
  local launcher=$!
  for _ in $(seq 600); do grep -q "$started" "$name.out" 2>/dev/null && break; sleep 0.1; done
  sleep "$delay"
  kill -TERM "$launcher"
  wait "$launcher"
  local got=$?
  [ "$got" -ne 0 ] && [ "$got" -ne 124 ] || fail "$name: exit $got (0: not stopped; 124: hung)"
  expect "$name" "blockscope (rank 0 of 2): interrupted by SIGTERM"
  expect "$name" "blockscope (rank 1 of 2): interrupted by SIGTERM"
  if grep -q "Process received signal\|Segmentation fault" "$name.out"; then fail "$name: a rank crashed"; fi
  [ -z "$(ls -A "$work/fails")" ] || fail "$name: left $(ls -A "$work/fails" | tr '\n' ' ')"
}
mpirun_sigterm mpirun_sigterm "^profile: \[1/2\]" 0.2
# 1 s after rank 0's tables, rank 1 is still serialising its profile; 2 s after, it has sent
# its part and rank 0 has not taken it in yet (that one crashed rank 0 in 3 of 5 runs before
# the collectives ran on memory of their own).
mpirun_sigterm mpirun_sigterm_serialising "^Kernels per step" 1
mpirun_sigterm mpirun_sigterm_gathering "^Kernels per step" 2

[ "$failures" -eq 0 ] && echo "tp_cli: all passed" || echo "tp_cli: $failures failure(s)"
[ "$failures" -eq 0 ]
