#!/usr/bin/env bash
# Compare oneDNN 2.6 (Debian, system-wide) with oneDNN 3.2 (pip wheels, GNU OpenMP build) on the
# matmul shapes of a GPT-2-small block: Y = X*W^T + bias for (M,N,K) in
# 512x3072x768, 256x2304x768, 256x768x768, 256x3072x768, 256x768x3072; f32 and bf16; weights
# plain ([N,K] row-major, used transposed) and blocked (format_tag::any, reordered once, untimed).
# Single-threaded (OMP_NUM_THREADS=1, pinned to CPU 0 with taskset when available), so it
# measures per-core kernel quality, not scaling. Source: bench/tools/onednn_matmul_versions.cpp.
#
# Usage:
#   bench/tools/onednn_versions.sh [WHEEL_DIR] [OUTPUT_CSV]
#     WHEEL_DIR   holds onednn_cpu_gomp-*.whl and onednn_devel_cpu_gomp-*.whl (default /tmp/onednn3):
#                 pip download onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 --no-deps -d DIR
#     OUTPUT_CSV  result file (default /tmp/onednn_versions.csv)
#   QUICK=1 ...           smoke run: first shape only, 0.05 s per case
#   SCRATCH=DIR ...       where wheels are unpacked and binaries built (default /tmp/onednn_versions_build)
#   ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 ...   (or AVX512_CORE, AVX2, ...) caps the ISA oneDNN may
#                         dispatch to; both 2.6 and 3.2 honour it, so it holds both versions to the same
#                         ISA (e.g. to compare without AMX). Its value is recorded in the output.
#
# Output: a '#' comment block (date, CPU model, ISA flags, settings), one CSV header line, then for each
# of four runs (v2, v3, v2, v3 -- interleaved so drift between runs shows) a '# run' comment, the
# program's own '#' line (oneDNN version, OpenMP threads) and one row per case:
#   onednn_version,dtype,layout,M,N,K,implementation,best_us,median_us,gflops
# Read it with e.g. pandas.read_csv(path, comment='#').
set -euo pipefail

wheel_dir=${1:-/tmp/onednn3}
out=${2:-/tmp/onednn_versions.csv}
scratch=${SCRATCH:-/tmp/onednn_versions_build}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/onednn_matmul_versions.cpp

mkdir -p "$scratch/root"
root=$scratch/root

# --- unpack the wheels (once) ------------------------------------------------------------------
shopt -s nullglob
lib_whl=("$wheel_dir"/onednn_cpu_gomp-*.whl)
dev_whl=("$wheel_dir"/onednn_devel_cpu_gomp-*.whl)
shopt -u nullglob
if [[ ${#lib_whl[@]} -ne 1 || ${#dev_whl[@]} -ne 1 ]]; then
  echo "error: need exactly one onednn_cpu_gomp-*.whl and one onednn_devel_cpu_gomp-*.whl in $wheel_dir" >&2
  exit 1
fi
for whl in "${lib_whl[0]}" "${dev_whl[0]}"; do
  stamp=$root/.unpacked-$(basename "$whl")
  if [[ ! -e $stamp ]]; then
    python3 -m zipfile -e "$whl" "$root"
    touch "$stamp"
  fi
done

v3_hdr=$(find "$root" -path '*/include/oneapi/dnnl/dnnl.hpp' -print -quit)
v3_so=$(find "$root" -name 'libdnnl.so.3' -print -quit)
if [[ -z $v3_hdr || -z $v3_so ]]; then
  echo "error: oneapi/dnnl/dnnl.hpp or libdnnl.so.3 not found under $root" >&2
  exit 1
fi
v3_inc=${v3_hdr%/oneapi/dnnl/dnnl.hpp}
v3_lib=$(dirname "$v3_so")
# The zip format drops symlinks: make sure the link-time name exists.
[[ -e $v3_lib/libdnnl.so ]] || ln -s libdnnl.so.3 "$v3_lib/libdnnl.so"

# --- build -------------------------------------------------------------------------------------
if [[ ! -e /usr/include/oneapi/dnnl/dnnl.hpp ]]; then
  echo "error: system oneDNN headers missing (apt-get install libdnnl-dev)" >&2
  exit 1
fi
bin_v2=$scratch/onednn_matmul_v2
bin_v3=$scratch/onednn_matmul_v3
g++ -O2 -std=c++17 -fopenmp "$src" -ldnnl -o "$bin_v2"
g++ -O2 -std=c++17 -fopenmp -I"$v3_inc" "$src" -L"$v3_lib" -Wl,-rpath,"$v3_lib" -ldnnl -o "$bin_v3"
# Guard against either binary silently picking up the other version's library.
ldd "$bin_v2" | grep 'libdnnl\.so\.2' >/dev/null || { echo "error: $bin_v2 not linked to libdnnl.so.2" >&2; exit 1; }
ldd "$bin_v3" | grep "$v3_lib/libdnnl\.so\.3" >/dev/null || { echo "error: $bin_v3 not linked to $v3_lib/libdnnl.so.3" >&2; exit 1; }

# --- run ---------------------------------------------------------------------------------------
args=(--no-header)
[[ ${QUICK:-0} == 1 ]] && args+=(--quick)
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c 0)

cpu_model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
isa_flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx512f|avx512_bf16|amx_bf16' | sort -u | paste -sd' ' - || true)

{
  echo "# onednn_versions.sh: oneDNN 2.6 (system) vs 3.2 (wheel) matmul, GPT-2-small block shapes"
  echo "# date_utc: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
  echo "# host: $(uname -n) kernel $(uname -r)"
  echo "# cpu_model: $cpu_model"
  echo "# isa_flags: ${isa_flags:-none}"
  echo "# OMP_NUM_THREADS=1 pin: ${pin[*]:-none} ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset} quick: ${QUICK:-0}"
  echo "# v3 library: $v3_so"
  echo "onednn_version,dtype,layout,M,N,K,implementation,best_us,median_us,gflops"
} >"$out"

run=0
for rep in 1 2; do
  for v in 2 3; do
    run=$((run + 1))
    bin_var=bin_v$v
    echo "# run $run/4: oneDNN v$v (rep $rep)" >>"$out"
    echo "run $run/4: oneDNN v$v (rep $rep)" >&2
    OMP_NUM_THREADS=1 "${pin[@]}" "${!bin_var}" "${args[@]}" >>"$out"
  done
done
echo "wrote $out" >&2
