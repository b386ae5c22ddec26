#!/usr/bin/env bash
# The CPU side-by-side of bench/results/: blockscope's per-op suites and whole blocks against
# PyTorch eager (tools/peers/torch_peer.py), one thread on each side, every pool pinned, in one run.
#
#   tools/peers/cpu_side_by_side.sh [OUT_DIR] [BUILD_DIR]
#
# OUT_DIR (default bench/results/cpu-<gemm library>-<date>) gets the Google Benchmark JSON of
# each suite, torch_peer's JSON, the merged table side_by_side_cpu.md (+ .json, ratios_cpu.png
# when matplotlib is there) and environment.txt: thread settings, OPENBLAS_* and the kernels
# oneDNN and OpenBLAS ran. BUILD_DIR (default build/default) must hold a Release build with the
# benchmarks (bin/*_bench, bin/blockscope).
#
# Blocks: gpt2-small and tinyllama-1.1b (configs/blocks/), B=1, S = 256 and 1024, f32 and
# bf16, every path mix each config lists. Knobs (environment): BLOCK_CONFIGS, BLOCK_SEQ_LENS,
# BLOCK_DTYPES, SUITES, MIN_TIME (seconds per benchmark, default 0.5), REPS (repetitions, median
# compared; default 3), PYTHON (the interpreter with torch; default /usr/bin/python3, Debian's
# python3-torch, which tools/install_deps.sh installs). OPENBLAS_CORETYPE is passed through:
# tools/peers/openblas_coretypes.py finds the kernel set that makes PyTorch's f32 GEMM fastest.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${2:-build/default}
python=${PYTHON:-/usr/bin/python3}
for binary in blockscope linear_bench block_bench; do
  [ -x "$build/bin/$binary" ] || { echo "$0: $build/bin/$binary not built (cmake --build --preset default)" >&2; exit 2; }
done
library=$("$build/bin/blockscope" info --format json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["gemm_library"])')
out=${1:-bench/results/cpu-$library-$(date -u +%F)}
mkdir -p "$out"
configs=${BLOCK_CONFIGS:-"gpt2-small tinyllama-1.1b"}
seq_lens=${BLOCK_SEQ_LENS:-"256 1024"}
dtypes=${BLOCK_DTYPES:-"f32 bf16"}
suites=${SUITES:-"linear mlp softmax_norm attention"}
min_time=${MIN_TIME:-0.5}
reps=${REPS:-3}

# One thread everywhere: blockscope's one OpenMP team (oneDNN runs on it), and on PyTorch's
# side torch_peer.py pins intra-op, OpenMP and OpenBLAS/MKL itself (--threads 1).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
gbench=(--benchmark_min_time="$min_time" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
        --benchmark_out_format=json)

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo ' (with uncommitted changes)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "threads: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS MKL_NUM_THREADS=$MKL_NUM_THREADS; torch_peer.py --threads 1"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-<unset>}"
  echo "blockscope: $("$build/bin/blockscope" info | grep -m1 'CPU GEMM')"
  echo "benchmark flags: ${gbench[*]}"
} > "$out/environment.txt"

jsons=()
for suite in $suites; do
  echo "cpu_side_by_side: ${suite}_bench" >&2
  "$build/bin/${suite}_bench" "${gbench[@]}" --benchmark_out="$out/${suite}_bench.json" > /dev/null
  jsons+=("$out/${suite}_bench.json")
done
for config in $configs; do
  for dtype in $dtypes; do
    for s in $seq_lens; do
      name="block_bench_${config}_${dtype}_S${s}"
      echo "cpu_side_by_side: $name" >&2
      "$build/bin/block_bench" "configs/blocks/$config.yaml" --set=dtype="$dtype" --set=input.batch=1 \
        --set=input.seq_len="$s" "${gbench[@]}" --benchmark_out="$out/$name.json" > /dev/null
      jsons+=("$out/$name.json")
    done
  done
done

echo "cpu_side_by_side: PyTorch peers" >&2
"$python" tools/peers/torch_peer.py --threads 1 --min-time "$min_time" --min-iters "$reps" --blockscope "$build/bin/blockscope" \
  --from-json "${jsons[@]}" -o "$out/torch_peer.json"

# Which kernels ran: oneDNN's verbose log of one block step per dtype on each side (primitive
# and ISA), and the OpenBLAS kernel set torch_peer.py recorded.
{
  echo
  echo "oneDNN primitives, one gpt2-small block step at S=256 (count, kind, implementation, dtypes):"
  for dtype in $dtypes; do
    echo "  blockscope $dtype:"
    ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 "$build/bin/blockscope" run configs/blocks/gpt2-small.yaml --device cpu \
      --dtype "$dtype" --set input.batch=1 --set input.seq_len=256 --set run.warmup=0 --set run.iters=1 \
      --format json 2>/dev/null | grep -E '^(onednn|dnnl)_verbose,(exec|info,cpu,isa)' | cut -d, -f4,5,7 | sort | uniq -c | sed 's/^/    /' || true
  done
  for dtype in $dtypes; do
    echo "  PyTorch $dtype (one F.linear 256x768 -> 3072; no line: not oneDNN, e.g. OpenBLAS's sgemm):"
    ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 "$python" -c "
import torch, torch.nn.functional as F
torch.set_num_threads(1)
dt = {'f32': torch.float32, 'bf16': torch.bfloat16, 'f16': torch.float16}['$dtype']
x, w = torch.randn(256, 768).to(dt), torch.randn(3072, 768).to(dt)
F.linear(x, w); F.linear(x, w)" 2>/dev/null | grep -E '^(onednn|dnnl)_verbose,(exec|info,cpu,isa)' | cut -d, -f4,5,7 | sort | uniq -c | sed 's/^/    /' || true
  done
  "$python" - "$out/torch_peer.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
context = doc["context"]
print("PyTorch side (torch_peer.json context):", json.dumps({k: v for k, v in context.items() if k != "date"}))
EOF
} >> "$out/environment.txt"

args=(--torch-stat median --blockscope "${jsons[@]}" --torch "$out/torch_peer.json" --json "$out/side_by_side_cpu.json")
if "$python" -c 'import matplotlib' 2> /dev/null; then args+=(--png "$out/ratios_cpu.png"); fi
"$python" tools/peers/side_by_side.py "${args[@]}" > "$out/side_by_side_cpu.md"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/environment.txt"
echo "cpu_side_by_side: wrote $out/side_by_side_cpu.md" >&2
