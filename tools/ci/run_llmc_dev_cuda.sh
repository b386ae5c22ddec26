#!/usr/bin/env bash
# Builds Karpathy's llm.c dev/cuda kernel programs with nvcc-sim, unmodified, and runs each on
# the simulated GPU until its own validation is done: CUDA written by others, as a check that
# the simulator runs ordinary CUDA (sim/README.md lists what it gave). llm.c is not part of this
# repository: clone it first.
#
#   git clone https://github.com/karpathy/llm.c LLMC
#   tools/ci/run_llmc_dev_cuda.sh LLMC [BUILD_DIR] [PROGRAM...]
#
# BUILD_DIR: a cuda-sim build (default build/cuda-sim). PROGRAM: names under LLMC/dev/cuda
# without .cu (default: every one). Each is compiled as its Makefile compiles it (-O3
# --use_fast_math -lcublas -lcublasLt -std=c++17, -Xcompiler -fopenmp where it asks) and run with
# its default kernel. A program checks its kernel against its CPU reference at every block size,
# prints "All results match." (two print "All results match for block_size=N." after each size:
# the last, 1024, counts) and then benchmarks it (1000 launches per block size: timing, which the
# simulator does not model): the run is stopped there and counted as validated. Reported as
# one line per program: built or not, the outcome (validated, mismatch, exit status, or the
# time limit LLMC_TIMEOUT_S, default 300, reached first), seconds, the last line it printed.
# Logs stay in $OUT (default build/llmc-dev-cuda). Exit status 0 unless the arguments are wrong.
set -uo pipefail

if [[ $# -lt 1 || ! -f "$1/dev/cuda/common.h" ]]; then
  echo "usage: $0 LLMC_CLONE [BUILD_DIR] [PROGRAM...]  (a clone of karpathy/llm.c)" >&2
  exit 2
fi
dev=$(cd "$1/dev/cuda" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build/cuda-sim}
shift $(( $# >= 2 ? 2 : 1 ))
nvcc_sim="$(cd "$build" 2>/dev/null && pwd)/bin/nvcc-sim"
if [[ ! -x "$nvcc_sim" ]]; then
  echo "$0: no $nvcc_sim (cmake --preset cuda-sim && cmake --build --preset cuda-sim)" >&2
  exit 2
fi
out=${OUT:-$root/build/llmc-dev-cuda}
limit=${LLMC_TIMEOUT_S:-300}
mkdir -p "$out" && out=$(cd "$out" && pwd)

list=("$@")
if [[ ${#list[@]} -eq 0 ]]; then
  mapfile -t list < <(cd "$dev" && ls -- *.cu | sed 's/\.cu$//')
fi

# The Makefile's flags for one program (its rules, as of 2024-2026).
flags_for() {
  local flags=(-O3 --use_fast_math -lcublas -lcublasLt -std=c++17)
  case "$1" in
    matmul_forward | matmul_backward) flags+=(-Xcompiler -fopenmp) ;;
    nccl_all_reduce) flags=(-lmpi -lnccl -lcublas -lcublasLt -std=c++17 -I/usr/lib/x86_64-linux-gnu/openmpi/include
                            -L/usr/lib/x86_64-linux-gnu/openmpi/lib/) ;;
  esac
  printf '%s\n' "${flags[@]}"
}

# The line that ends a program's validation (see above).
validated_line='All results match(\.| for block_size=1024\.)'

# Runs $out/$1 until it prints the validated line (then stopped), exits, or the limit.
run_until_validated() {
  local name=$1 log=$out/$1.run.log
  # stdbuf: line-buffered output, so a run stopped at the limit shows how far it got.
  (cd "$dev" && exec timeout "$limit" stdbuf -oL "$out/$name") > "$log" 2>&1 &
  local pid=$! outcome=""
  while kill -0 "$pid" 2>/dev/null; do
    if grep -Eq "$validated_line" "$log"; then
      outcome=validated
      pkill -TERM -P "$pid" 2>/dev/null  # the program, under timeout (stdbuf execs it)
      break
    fi
    sleep 1
  done
  wait "$pid"
  local rc=$?
  if [[ -z "$outcome" ]]; then
    if grep -Eq "$validated_line" "$log"; then
      outcome=validated
    elif grep -qi "mismatch" "$log"; then
      outcome=mismatch
    elif [[ $rc -eq 124 ]]; then
      outcome="timeout"
    else
      outcome="exit $rc"
    fi
  fi
  echo "$outcome"
}

printf '%-32s %-6s %-10s %6s  %s\n' program built outcome seconds "last line"
for name in "${list[@]}"; do
  if [[ ! -f "$dev/$name.cu" ]]; then
    printf '%-32s %-6s\n' "$name" missing
    continue
  fi
  mapfile -t flags < <(flags_for "$name")
  if ! (cd "$dev" && "$nvcc_sim" "${flags[@]}" "$name.cu" -o "$out/$name") > "$out/$name.build.log" 2>&1; then
    printf '%-32s %-6s %-10s %6s  %s\n' "$name" no - - "$(grep -m1 -i 'error' "$out/$name.build.log" | cut -c1-120)"
    continue
  fi
  start=$(date +%s)
  outcome=$(run_until_validated "$name")
  printf '%-32s %-6s %-10s %6s  %s\n' "$name" yes "$outcome" "$(( $(date +%s) - start ))" \
    "$(grep -v '^\s*$' "$out/$name.run.log" | grep -v '^block_size' | tail -1 | cut -c1-120)"
done
