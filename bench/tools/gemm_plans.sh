#!/usr/bin/env bash
# The CPU GEMM planner's choices on this machine: for each block config, dtype and sequence
# length, one run with an empty plan cache (the plan timed) and one with the cache (read), then
# `blockscope info --format json`'s gemm_plans -- every weight shape's candidates and their
# times. One thread, pinned to one core.
#
#   bench/tools/gemm_plans.sh OUT_DIR [CONFIG...]     (default: GPT-2 small and TinyLlama-1.1B)
#
# Writes OUT_DIR/plans.json (info's gemm_plans), OUT_DIR/first_runs.tsv (config, dtype, seq_len,
# wall seconds with the cache empty and with it filled) and OUT_DIR/environment.txt.
# Environment: BLOCKSCOPE (the binary; default build/default/bin/blockscope), SEQ_LENS
# ("256 1024"), DTYPES ("f32 bf16"), and whatever the GEMM libraries read (OPENBLAS_CORETYPE...).
set -euo pipefail
out=${1:?usage: gemm_plans.sh OUT_DIR [CONFIG...]}
shift
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(configs/blocks/gpt2-small.yaml configs/blocks/tinyllama-1.1b.yaml)
bin=${BLOCKSCOPE:-build/default/bin/blockscope}
mkdir -p "$out"
export BLOCKSCOPE_PLAN_CACHE="$out/plans-cache.json" OMP_NUM_THREADS=1
rm -f "$BLOCKSCOPE_PLAN_CACHE"
{
  date -u +%Y-%m-%dT%H:%MZ
  grep -m1 'model name' /proc/cpuinfo
  grep -m1 -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-}"
  "$bin" info | sed -n '1,4p'
} > "$out/environment.txt"
printf 'config\tdtype\tseq_len\tfirst_run_s\tcached_run_s\n' > "$out/first_runs.tsv"
for config in "${configs[@]}"; do
  for dtype in ${DTYPES:-f32 bf16}; do
    for seq in ${SEQ_LENS:-256 1024}; do
      run=("$bin" run "$config" --device cpu --threads 1 --dtype "$dtype" --set input.batch=1
           --set input.seq_len="$seq" --set run.warmup=0 --set run.iters=1)
      times=()
      for pass in empty filled; do
        start=$(date +%s.%N)
        taskset -c 0 "${run[@]}" > /dev/null
        times+=("$(python3 -c "print($(date +%s.%N) - $start)")")
      done
      printf '%s\t%s\t%s\t%.2f\t%.2f\n' "$(basename "$config" .yaml)" "$dtype" "$seq" "${times[0]}" "${times[1]}" \
        >> "$out/first_runs.tsv"
    done
  done
done
"$bin" info --format json | python3 -c 'import json, sys; json.dump(json.load(sys.stdin)["gemm_plans"], sys.stdout, indent=2)' \
  > "$out/plans.json"
rm -f "$BLOCKSCOPE_PLAN_CACHE"
