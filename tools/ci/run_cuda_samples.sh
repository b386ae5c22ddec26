#!/usr/bin/env bash
# Builds NVIDIA's CUDA samples with nvcc-sim and runs them on the simulated GPU: CUDA written by
# others, as a check that the simulator runs ordinary CUDA (sim/README.md lists what it
# gave). The samples are not part of this repository: clone them first.
#
#   git clone https://github.com/NVIDIA/cuda-samples SAMPLES
#   tools/ci/run_cuda_samples.sh SAMPLES [BUILD_DIR] [SAMPLE_DIR...]
#
# BUILD_DIR: a cuda-sim build (default build/cuda-sim). SAMPLE_DIR: paths under SAMPLES/Samples
# (default: the list below). Each sample's .cu and .cpp files are compiled together with
# `nvcc-sim -O2 -I SAMPLES/Common`, run with a time limit (SAMPLE_TIMEOUT_S, 240), and reported
# as one line: built or not, exit status, seconds, the last line it printed. Logs stay in
# $OUT (default build/cuda-samples). Exit status 0 unless the arguments are wrong.
set -uo pipefail

if [[ $# -lt 1 || ! -d "$1/Samples" || ! -d "$1/Common" ]]; then
  echo "usage: $0 CUDA_SAMPLES_CLONE [BUILD_DIR] [SAMPLE_DIR...]  (a clone of NVIDIA/cuda-samples)" >&2
  exit 2
fi
samples=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build/cuda-sim}
shift $(( $# >= 2 ? 2 : 1 ))
nvcc_sim="$(cd "$build" 2>/dev/null && pwd)/bin/nvcc-sim"
if [[ ! -x "$nvcc_sim" ]]; then
  echo "$0: no $nvcc_sim (cmake --preset cuda-sim && cmake --build --preset cuda-sim)" >&2
  exit 2
fi
out=${OUT:-$root/build/cuda-samples}
limit=${SAMPLE_TIMEOUT_S:-240}
mkdir -p "$out" && out=$(cd "$out" && pwd)

list=("$@")
if [[ ${#list[@]} -eq 0 ]]; then
  list=(0_Introduction/{vectorAdd,asyncAPI,clock,fp16ScalarProduct,matrixMul,mergeSort,simpleAssert}
        0_Introduction/{simpleAtomicIntrinsics,simpleAttributes,simpleCallback,simpleCooperativeGroups}
        0_Introduction/{simpleHyperQ,simpleMultiCopy,simpleMultiGPU,simpleOccupancy,simpleP2P,simplePrintf}
        0_Introduction/{simpleStreams,simpleTemplates,simpleVoteIntrinsics,simpleZeroCopy,systemWideAtomics}
        0_Introduction/{template,UnifiedMemoryStreams,simpleAWBarrier}
        2_Concepts_and_Techniques/{histogram,reduction,reductionMultiBlockCG,scalarProd,scan,shfl_scan}
        2_Concepts_and_Techniques/{sortingNetworks,threadFenceReduction,eigenvalues,boxFilter})
fi

printf '%-28s %-7s %4s %6s  %s\n' sample built rc seconds "last line"
for dir in "${list[@]}"; do
  name=$(basename "$dir")
  src="$samples/Samples/$dir"
  if [[ ! -d "$src" ]]; then
    printf '%-28s %-7s\n' "$name" missing
    continue
  fi
  mapfile -t sources < <(cd "$src" && ls -- *.cu *.cpp 2>/dev/null | grep -v '_nvrtc')
  if ! (cd "$src" && "$nvcc_sim" -O2 -I"$samples/Common" -I. "${sources[@]}" -o "$out/$name") > "$out/$name.build.log" 2>&1; then
    printf '%-28s %-7s %4s %6s  %s\n' "$name" no - - "$(grep -m1 -i 'error' "$out/$name.build.log" | cut -c1-120)"
    continue
  fi
  start=$(date +%s)
  (cd "$src" && timeout "$limit" "$out/$name") > "$out/$name.run.log" 2>&1
  rc=$?
  printf '%-28s %-7s %4s %6s  %s\n' "$name" yes "$rc" "$(( $(date +%s) - start ))" \
    "$(grep -v '^\s*$' "$out/$name.run.log" | tail -1 | cut -c1-120)"
done
