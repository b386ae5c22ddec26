#!/usr/bin/env bash
# tools/device/device_check.sh — every GPU check of the CUDA backend in one run, on an H200 machine,
# in under 8 minutes. Run from the repository root.
#
# THE PLAN (decided here, read before changing): build HERE, carry the binaries THERE.
#   The GPU machine has nvcc 13.0, CMake, ninja, compute-sanitizer and Python 3.12 with
#   PyTorch 2.11, but none of the Debian libraries blockscope links (yaml-cpp, nlohmann-json,
#   CLI11, fmt, GoogleTest, Google Benchmark, OpenBLAS) and no network, and what travels with
#   the source may not exceed 64 MiB. So:
#
#   1. On the build machine:   tools/device/device_check.sh --prepare
#        configures build/device (Release, CUDA for sm_90 only, OpenBLAS off so nothing needs
#        libgfortran, tests and benchmarks on), builds everything, strips the binaries and packs
#          kit/bin/     the CLI, every test binary, every benchmark binary
#          kit/lib/     shared libraries they need that a CUDA image may lack (libgomp,
#                       libbenchmark, ...): put on LD_LIBRARY_PATH of our binaries only
#          kit/loader/  this machine's dynamic loader, libc, libm, libstdc++, libgcc_s: used
#                       only if the binaries cannot start with the GPU machine's own libc
#                       (then every binary runs as `loader/ld-linux-x86-64.so.2 --library-path
#                       ... bin/X`)
#        into build/device-kit.tar.xz (xz -9 with a 64 MiB window stores the static library
#        that every binary holds about once). cuBLASLt, CUPTI and the driver come from the GPU
#        machine (CUDA 13 there as here).
#   2. On the GPU machine (device tool: carry ["build/device-kit.tar.xz"]):
#        tools/device/device_check.sh
#      which: checks the GPU (exits 3 with "no GPU" when nvidia-smi is absent or fails),
#      checks up front that the kit can run here (exits 4 with the reason: the driver's CUDA
#      version older than the kit's runtime, or a compute capability the kit has no code for),
#      unpacks the kit (with Python's lzma/tarfile when xz is missing), compares the kit's
#      commit with this tree's, then in four phases, cheapest evidence first, each with its own
#      time budget so that a slow phase cannot starve the next:
#        tests       (DEVICE_CHECK_TESTS_S, 150 s)  `blockscope info`, the CUDA tests and the
#                    per-op tests (their CUDA cases run there), `blockscope profile` on every
#                    configs/series/*.yaml (a compare: variant the device cannot run is
#                    reported as skipped with the reason; the others still print and save;
#                    each writes its HTML report, and 01_matmul_add_64's step verdict must
#                    read host-bound: the series' small-size lesson, measured); with 2 or more
#                    GPUs and a kit built with DEVICE_CHECK_NCCL=ON, tensor parallelism over
#                    NCCL (the split block checked, tensor_parallel_gpu_test, a Llama-3-8B
#                    block's profile at TP = 1, 2, 4, 8; tp_bench's GPU rows over mpirun, one
#                    process per GPU, where the GPU machine has mpirun); otherwise one skip
#                    row says why
#        sanitizers  (DEVICE_CHECK_SANITIZERS_S, 110 s)  compute-sanitizer memcheck and
#                    racecheck over a small subset; a run cut by its limit is "timeout"
#        benchmarks  (DEVICE_CHECK_BENCH_S, 100 s)  the suites, --benchmark_filter'd to their
#                    CUDA cases (names with /cuda:N); a suite without any is skipped
#        counters    (DEVICE_CHECK_COUNTERS_S, 30 s)  Nsight Compute's counters of the series'
#                    attention beside the simulated GPU's (tools/ci/compare_counters.py:
#                    counters.md; a difference is a WARN to explain)
#        pytorch     (DEVICE_CHECK_TORCH_S, 60 s)  tools/peers/torch_peer.py on the same workloads
#                    and tools/peers/side_by_side.py
#      then writes one summary file and prints a short table. Every step has a time limit
#      clipped to its phase's budget and the whole run's (DEVICE_CHECK_BUDGET_S, default
#      450 s), so it ends inside 8 minutes; a step that no longer fits is reported as skipped,
#      never silently dropped.
#   Test knobs (test/cuda_tools_test.cpp runs all of this on a fake GPU and a fake kit):
#   NVIDIA_SMI, DEVICE_CHECK_KIT (the archive), DEVICE_CHECK_XZ (the xz to use),
#   COMPUTE_SANITIZER, NCU, DEVICE_CHECK_MIN_STEP_S (least time a step needs, 15 s).
#
# Results: $OUT when set (the device tool), else bench/results/<date>-<gpu>/:
#   summary.md (the table, the GPU, the commit, test counts, sanitizer verdicts),
#   logs.tar.gz (every log, gtest XML, benchmark and PyTorch JSON), bench.json (all suites),
#   torch_peer.json and side_by_side.txt when PyTorch ran.
# Exit status: 0 every step passed (timeouts of sanitizer, benchmark and PyTorch steps are
# reported, not failures), 1 some step failed (a test that timed out too), 2 bad usage or no
# kit, 3 no GPU, 4 the kit cannot run on this GPU (driver too old, or no code for its
# compute capability).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIT_ARCHIVE="${DEVICE_CHECK_KIT:-$ROOT/build/device-kit.tar.xz}"

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  exit 2
}

# --prepare (the build machine's half: build and pack the kit): device_check_prepare.sh.
# shellcheck source-path=SCRIPTDIR source=device_check_prepare.sh
source "$ROOT/tools/device/device_check_prepare.sh"

# ---------------------------------------------------------------------------------------------
# The run on the GPU machine.
# ---------------------------------------------------------------------------------------------
# Phases, budgeted steps, their rows and the summary (record, run_step, finish, ...):
# device_check_steps.sh.
# shellcheck source-path=SCRIPTDIR source=device_check_steps.sh
source "$ROOT/tools/device/device_check_steps.sh"

# set_bin NAME: BIN becomes the command line that runs kit binary NAME with the chosen runner
# (direct with the kit's lib/ on LD_LIBRARY_PATH, or through the carried loader). Arrays, not
# functions, so that `timeout` and compute-sanitizer can run it.
set_bin() {
  if [[ "$RUNNER" == direct ]]; then
    BIN=(env "LD_LIBRARY_PATH=$KIT/lib:$CUDA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$KIT/bin/$1")
  else
    BIN=("$KIT/loader/ld-linux-x86-64.so.2" --library-path "$KIT/lib:$KIT/loader:$CUDA_LIBS:$SYSTEM_LIBS"
         "$KIT/bin/$1")
  fi
}

# Folders holding cuBLASLt and CUPTI on the GPU machine (toolkit or pip wheels).
find_cuda_libs() {
  local dirs=() d site
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda/extras/CUPTI/lib64 /usr/lib/x86_64-linux-gnu; do
    [[ -d "$d" ]] && dirs+=("$d")
  done
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
  for d in $(find $site /usr/local/cuda* -maxdepth 6 \( -name 'libcublasLt.so.13*' -o -name 'libcupti.so.13*' \) \
             -printf '%h\n' 2>/dev/null | sort -u); do
    dirs+=("$d")
  done
  local IFS=:
  echo "${dirs[*]}"
}

main_run() {
  # ---- the GPU --------------------------------------------------------------------------------
  # NVIDIA_SMI: which nvidia-smi to ask (tests point it at a missing or failing one).
  local smi="${NVIDIA_SMI:-nvidia-smi}"
  if ! command -v "$smi" > /dev/null 2>&1; then
    echo "device_check: no GPU: nvidia-smi is not installed on this machine; run this on the GPU machine" >&2
    exit 3
  fi
  local gpu
  if ! gpu=$("$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1) ||
     [[ -z "$gpu" ]] || [[ "$gpu" == *"failed"* ]] || [[ "$gpu" == *"No devices"* ]]; then
    echo "device_check: no GPU: nvidia-smi found no usable device (${gpu:-no output})" >&2
    exit 3
  fi
  local gpu_name gpu_slug
  gpu_name=$(echo "$gpu" | cut -d, -f1 | sed 's/^ *//; s/ *$//')
  gpu_slug=$(echo "$gpu_name" | tr 'A-Z' 'a-z' | sed 's/nvidia //; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
  DEST="${OUT:-$ROOT/bench/results/$(date -u +%Y-%m-%d)-${gpu_slug:-gpu}}"
  mkdir -p "$DEST"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/blockscope-device.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT  # on every exit: the kit refused, a failure, the end
  LOGS="$WORK/logs"
  mkdir -p "$LOGS"
  echo "device_check: $gpu_name; results in $DEST; budget ${BUDGET_S}s"

  # ---- the kit ----------------------------------------------------------------------------------
  if [[ ! -r "$KIT_ARCHIVE" ]]; then
    echo "device_check: no kit at $KIT_ARCHIVE: run 'tools/device/device_check.sh --prepare' on the build machine" \
         "and carry build/device-kit.tar.xz" >&2
    exit 2
  fi
  # xz where there is one; else Python's lzma + tarfile (the GPU image may lack xz-utils).
  local xz="${DEVICE_CHECK_XZ:-xz}"
  if command -v "$xz" > /dev/null 2>&1; then
    { "$xz" -dc "$KIT_ARCHIVE" | tar -C "$WORK" -xf - ; } ||
      { echo "device_check: cannot unpack $KIT_ARCHIVE" >&2; exit 2; }
  else
    echo "device_check: no $xz here: unpacking the kit with Python's lzma/tarfile"
    python3 - "$KIT_ARCHIVE" "$WORK" <<'PY' || { echo "device_check: cannot unpack $KIT_ARCHIVE (python3 lzma/tarfile)" >&2; exit 2; }
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as tar:
    if hasattr(tarfile, "fully_trusted_filter"):
        tar.extractall(sys.argv[2], filter="fully_trusted")  # our own kit; no warning on 3.12+
    else:
        tar.extractall(sys.argv[2])
PY
  fi
  KIT="$WORK/kit"
  [[ -d "$KIT/bin" ]] || { echo "device_check: $KIT_ARCHIVE holds no kit/bin" >&2; exit 2; }

  # ---- can the kit run on this GPU? (before anything runs: exit 4 with the reason) ------------
  local driver_cuda kit_cuda compute_cap kit_archs
  driver_cuda=$("$smi" 2>/dev/null | grep -Eo 'CUDA Version: *[0-9]+\.[0-9]+' | grep -Eo '[0-9]+\.[0-9]+' | head -1)
  kit_cuda=$(cat "$KIT/CUDA_VERSION" 2>/dev/null || echo unknown)
  if [[ -n "$driver_cuda" && "$kit_cuda" =~ ^[0-9]+\.[0-9]+$ ]] &&
     [[ "$(printf '%s\n%s\n' "$driver_cuda" "$kit_cuda" | sort -V | head -1)" != "$kit_cuda" ]]; then
    echo "device_check: the kit cannot run here: its CUDA runtime is $kit_cuda but the driver supports CUDA" \
         "$driver_cuda only (update the driver, or build the kit with a CUDA $driver_cuda toolkit)" >&2
    exit 4
  fi
  compute_cap=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  kit_archs=$(cat "$KIT/CUDA_ARCHS" 2>/dev/null || true)
  if [[ "$compute_cap" =~ ^[0-9]+\.[0-9]+$ && -n "$kit_archs" ]]; then
    # sm_XY code runs on compute capability X.Y only; a plain "XY" (CMake's default) also
    # carries compute_XY PTX, which the driver compiles for any later capability.
    local cc=$(( ${compute_cap%%.*} * 10 + ${compute_cap##*.} )) arch fits=0
    for arch in ${kit_archs//[;,]/ }; do
      local num=${arch%%-*}
      num=${num//[!0-9]/}
      [[ -z "$num" ]] && continue
      if (( num == cc )) || { [[ "$arch" != *-real ]] && (( num < cc )); }; then fits=1; fi
    done
    if (( fits == 0 )); then
      echo "device_check: the kit cannot run here: the GPU has compute capability $compute_cap but the kit" \
           "was built for CUDA architectures $kit_archs (rebuild with -DCMAKE_CUDA_ARCHITECTURES=$cc)" >&2
      exit 4
    fi
  fi
  echo "device_check: driver CUDA ${driver_cuda:-unknown}, kit runtime $kit_cuda;" \
       "compute capability ${compute_cap:-unknown}, kit architectures ${kit_archs:-unknown}"
  CUDA_LIBS=$(find_cuda_libs)
  SYSTEM_LIBS=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64
  local commit compiled_root tree_commit
  commit=$(cat "$KIT/COMMIT" 2>/dev/null || echo unknown)
  tree_commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  # Binaries read configs and test data under the checkout path they were built in: point
  # that path at this checkout when it does not exist here.
  compiled_root=$(cat "$KIT/SOURCE_DIR" 2>/dev/null || true)
  if [[ -n "$compiled_root" && "$compiled_root" != "$ROOT" && ! -e "$compiled_root" ]]; then
    if mkdir -p "$(dirname "$compiled_root")" 2>/dev/null && ln -s "$ROOT" "$compiled_root" 2>/dev/null; then
      echo "device_check: linked $compiled_root -> $ROOT (the path compiled into the binaries)"
    else
      echo "device_check: warning: cannot link $compiled_root to $ROOT; tests reading configs may fail" >&2
    fi
  fi

  # Direct start first; the carried loader if the GPU machine's C runtime is too old for us.
  RUNNER=direct
  set_bin core_test
  if ! "${BIN[@]}" --gtest_list_tests > "$LOGS/runner_direct.log" 2>&1; then
    RUNNER=loader
    set_bin core_test
    if ! "${BIN[@]}" --gtest_list_tests > "$LOGS/runner_loader.log" 2>&1; then
      record "start binaries" FAIL 0 "neither directly nor through the carried loader (logs/runner_*.log)"
      finish "$gpu" "$commit"
      return
    fi
  fi
  record "start binaries" ok 0 "runner: $RUNNER"

  # The kit's commit against this tree's: the binaries test the kit's code, the configs and
  # tools/peers/*.py come from this tree.
  local dirty=""
  [[ -s "$KIT/DIRTY" ]] && dirty=" (built with uncommitted changes: $(wc -l < "$KIT/DIRTY") files)"
  if [[ "$tree_commit" == unknown ]]; then
    record "kit commit" ok 0 "kit ${commit:0:12}$dirty; this tree's commit is unknown (no git here)"
  elif [[ "$commit" == "$tree_commit" ]]; then
    record "kit commit" ok 0 "kit = tree ${commit:0:12}$dirty"
  else
    record "kit commit" WARN 0 "kit ${commit:0:12}$dirty but this tree is at ${tree_commit:0:12}: rebuild the kit"
  fi
  COMMITS="kit $commit, tree $tree_commit"

  begin_phase tests "${DEVICE_CHECK_TESTS_S:-150}"

  set_bin blockscope
  if run_step "blockscope info" 30 "$LOGS/info.log" "${BIN[@]}" info; then
    record "blockscope info" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
  fi

  # ---- tests ------------------------------------------------------------------------------------
  local tests=() t
  for t in cuda_context_test cuda_kernels_test cuda_graph_test core_test linear_test activation_test \
           elementwise_test softmax_test norm_test rope_test attention_test mlp_test block_test profiler_session_test \
           precision_test fp8_linear_test op_harness_test; do
    [[ -x "$KIT/bin/$t" ]] && tests+=("$t")
  done
  for t in "${tests[@]}"; do
    set_bin "$t"
    if run_step "test $t" 120 "$LOGS/$t.log" "${BIN[@]}" --gtest_output="xml:$LOGS/$t.xml"; then
      record "test $t" "$(status_of $STEP_RC)" "$STEP_S" "$(gtest_counts "$LOGS/$t.log")"
    fi
  done

  # ---- the conformance programs (sim/test/conformance): plain CUDA, checked against the CPU ----
  # The simulated GPU runs them in every CI run; here they meet the hardware.
  for t in "$KIT"/bin/conformance_*; do
    [[ -x "$t" ]] || continue
    name=$(basename "$t")
    [[ "$name" == *_planted ]] && continue
    set_bin "$name"
    if run_step "conformance ${name#conformance_}" 20 "$LOGS/$name.log" "${BIN[@]}"; then
      record "conformance ${name#conformance_}" "$(status_of $STEP_RC)" "$STEP_S" "$(tail -1 "$LOGS/$name.log")"
    fi
  done

  # ---- the series configs through the CLI (cheap: part of the tests phase) --------------------
  local config name line variant reason
  for config in "$ROOT"/configs/series/*.yaml; do
    [[ -e "$config" ]] || continue
    name=$(basename "$config" .yaml)
    set_bin blockscope
    if run_step "profile $name" 60 "$LOGS/profile_$name.log" "${BIN[@]}" profile "$config" --device cuda \
         --save "$LOGS/profile_$name.json" --report "$LOGS/profile_$name.html"; then
      record "profile $name" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
      # At 64x64 every kernel is shorter than its launch: the device idles most of the step.
      # The simulator cannot show this (its times are its own), so a GPU is where it is checked.
      if [[ "$name" == 01_matmul_add_64 ]]; then
        line=$(grep -m1 "^Step verdict: " "$LOGS/profile_$name.log" || true)
        if [[ "$line" == "Step verdict: host-bound"* ]]; then
          record "verdict $name" ok 0 "${line#Step verdict: }"
        else
          record "verdict $name" FAIL 0 "expected host-bound, got: ${line:-no verdict line}"
        fi
      fi
      # A compare: variant this device cannot run: the CLI skips it with the reason and still
      # prints and saves the others; each gets its own row here.
      while IFS= read -r line; do
        variant=$(sed -E "s/^blockscope: profile: variant '([^']*)' skipped on [^:]*:[0-9]*: .*/\1/" <<< "$line")
        reason=$(sed -E "s/^blockscope: profile: variant '[^']*' skipped on [^:]*:[0-9]*: //" <<< "$line")
        record "profile $name [$variant]" skip 0 "$reason"
      done < <(grep -E "^blockscope: profile: variant '[^']*' skipped on " "$LOGS/profile_$name.log")
    fi
  done

  # ---- FP8 (docs/FP8.md): the configs on cuBLASLt's real FP8 kernels, their check, and what the ---
  # casts cost against the bf16 linear (its profile saved above). The op table's fp8_linear row
  # is the FP8 GEMM's TFLOP/s at each shape.
  for config in "$ROOT"/configs/fp8/*.yaml; do
    [[ -e "$config" ]] || continue
    name=fp8_$(basename "$config" .yaml)
    set_bin blockscope
    if run_step "profile $name" 60 "$LOGS/profile_$name.log" "${BIN[@]}" profile "$config" --device cuda \
         --save "$LOGS/profile_$name.json"; then
      record "profile $name" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
    fi
  done
  set_bin blockscope
  if run_step "check fp8_linear-delayed" 60 "$LOGS/check_fp8_linear-delayed.log" "${BIN[@]}" check \
       "$ROOT/configs/fp8/linear-delayed.yaml" --device cuda --set "shape={m: 1024, n: 1024, k: 768}"; then
    record "check fp8_linear-delayed" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
  fi
  if [[ -f "$LOGS/profile_02_linear.json" && -f "$LOGS/profile_fp8_linear-current.json" ]]; then
    if run_step "diff bf16 vs fp8 linear" 20 "$DEST/diff_linear_bf16_fp8.txt" "${BIN[@]}" diff \
         "$LOGS/profile_02_linear.json" "$LOGS/profile_fp8_linear-current.json"; then
      record "diff bf16 vs fp8 linear" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
    fi
  fi

  # ---- tensor parallelism over this machine's GPUs (NCCL, one process, a thread per GPU) -------
  # Only with 2 or more GPUs and a kit built with NCCL (DEVICE_CHECK_NCCL=ON at --prepare; the
  # GPU machine must then have libnccl.so.2): the split blocks against the unsplit reference,
  # the GPU tests, and a Llama-3-8B block's profile at TP = 2, 4, 8 (its per-rank table's
  # collective share is what bench/NOTES.md predicts).
  local gpus n
  gpus=$("${NVIDIA_SMI:-nvidia-smi}" --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c . || true)
  set_bin blockscope
  if (( gpus < 2 )); then
    record "tensor parallel" skip 0 "$gpus GPU: tensor parallelism needs 2 or more"
  elif ! "${BIN[@]}" info --format json 2>/dev/null | grep -q '"nccl_built": true'; then
    record "tensor parallel" skip 0 "the kit was built without NCCL (--prepare with DEVICE_CHECK_NCCL=ON)"
  else
    if run_step "tp check" 60 "$LOGS/tp_check.log" "${BIN[@]}" check "$ROOT/configs/blocks/tiny-llama.yaml" \
         --device cuda --set parallel.tensor=2 --set parallel.sequence_parallel=true; then
      record "tp check" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
    fi
    set_bin tensor_parallel_gpu_test
    if run_step "test tensor_parallel_gpu_test" 120 "$LOGS/tensor_parallel_gpu_test.log" "${BIN[@]}"; then
      record "test tensor_parallel_gpu_test" "$(status_of $STEP_RC)" "$STEP_S" "$(gtest_counts "$LOGS/tensor_parallel_gpu_test.log")"
    fi
    set_bin blockscope
    for n in 1 2 4 8; do
      (( n <= gpus )) || continue
      if run_step "tp profile llama-3-8b tp=$n" 90 "$LOGS/tp_profile_$n.log" "${BIN[@]}" profile \
           "$ROOT/configs/blocks/llama-3-8b.yaml" --device cuda --dtype bf16 --set parallel.tensor=$n \
           --set input.batch=1 --save "$LOGS/tp_profile_$n.json"; then
        record "tp profile llama-3-8b tp=$n" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
      fi
    done
    # One process per GPU, NCCL started over MPI: tp_bench's GPU rows (the all-reduces at the
    # blocks' sizes, the blocks at TP = GPUs), where the GPU machine has an mpirun.
    local mpirun="${MPIRUN:-mpirun}"
    if ! command -v "$mpirun" >/dev/null 2>&1; then
      record "tp_bench over mpirun" skip 0 "no mpirun on the GPU machine (MPIRUN=...)"
    else
      set_bin tp_bench
      if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 run_step "tp_bench over mpirun" 240 \
           "$LOGS/tp_bench.log" "$mpirun" -np "$gpus" "${BIN[@]}" --benchmark_filter=cuda \
           --benchmark_out="$LOGS/tp_bench.json" --benchmark_out_format=json; then
        record "tp_bench over mpirun" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC, $gpus processes"
      fi
    fi
  fi

  # ---- compute-sanitizer ------------------------------------------------------------------------
  begin_phase sanitizers "${DEVICE_CHECK_SANITIZERS_S:-110}"
  local sanitizer="${COMPUTE_SANITIZER:-}"
  [[ -z "$sanitizer" ]] &&
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  [[ -n "$sanitizer" && ! -x "$sanitizer" ]] && sanitizer=$(command -v "$sanitizer" || true)
  if [[ -z "$sanitizer" ]]; then
    record "compute-sanitizer" skip 0 "not installed"
  else
    # sanitize NAME TOOL TEST_BINARY FILTER LIMIT: one compute-sanitizer run over a test subset.
    sanitize() {
      local step="$1 $3" log="$LOGS/$2_$3.log" summary
      set_bin "$3"
      # env/loader in BIN are child processes of the sanitizer: follow them all.
      if run_step "$step" "$5" "$log" "$sanitizer" --tool "$2" --target-processes all --error-exitcode 99 \
           "${BIN[@]}" --gtest_filter="$4"; then
        summary=$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+ [a-z]+' "$log" | tail -1)
        local verdict
        verdict=$(status_of $STEP_RC)
        # Cut by its time limit: no verdict on the code (the sanitizer is 10-100x slower).
        [[ "$verdict" == timeout ]] && summary="cut at the limit, no verdict${summary:+; so far $summary}"
        record "$step" "$verdict" "$STEP_S" "${summary:-no summary} rc $STEP_RC"
      fi
    }
    # Each op's CUDA-against-CPU cases (its test file's CudaOps suite), one dtype each.
    sanitize memcheck memcheck softmax_test '*CudaOps.Softmax*/bf16' 40
    sanitize memcheck memcheck norm_test '*CudaOps.LayerNorm*/bf16' 25
    sanitize memcheck memcheck rope_test '*CudaOps.Rope*/f16' 20
    sanitize memcheck memcheck elementwise_test '*CudaOps.CausalMaskedFill*/bf16:*CudaOps.ElementwiseAddMulScaleCopy*/f16' 25
    sanitize memcheck memcheck activation_test '*CudaOps.ActivationsPlainAndGated*/bf16' 20
    sanitize memcheck memcheck linear_test '*CudaOps.BatchedMatmul*/f32' 20
    sanitize memcheck memcheck cuda_graph_test '*ReplayIsBitIdentical*/bf16' 90
    sanitize racecheck racecheck softmax_test '*CudaOps.Softmax*/bf16' 60
    sanitize racecheck racecheck norm_test '*CudaOps.LayerNorm*/f32' 60
    # The conformance twins' planted hazards as compute-sanitizer sees them on the GPU: the
    # simulator reports every one (ctest conformance.*.planted.*); does the hardware's tool agree?
    # "reported" = the tool's error exit.
    planted() {
      local name="conformance_$2_planted" log="$LOGS/$1_$2_planted.log"
      [[ -x "$KIT/bin/$name" ]] || return 0
      set_bin "$name"
      if run_step "$1 planted $2" 20 "$log" "$sanitizer" --tool "$1" --error-exitcode 99 "${BIN[@]}"; then
        if [[ "$STEP_RC" == 99 ]]; then
          record "$1 planted $2" ok "$STEP_S" "reported: $(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+ [a-z]+' "$log" | tail -1)"
        else
          record "$1 planted $2" WARN "$STEP_S" "the planted hazard went unreported by compute-sanitizer (rc $STEP_RC)"
        fi
      fi
    }
    for t in reduce_shared scan histogram cg_tiles last_block; do planted racecheck "$t"; done
    for t in matmul_tiled dynamic_smem transpose; do planted memcheck "$t"; done
  fi

  # ---- benchmarks -------------------------------------------------------------------------------
  # Only the CUDA cases: every suite registers each workload per device (name KEY/cuda:0[/manual_time] or
  # .../cpu); the CPU cases would spend the phase on what the build machine measures anyway.
  begin_phase benchmarks "${DEVICE_CHECK_BENCH_S:-100}"
  local bench bench_jsons=() cuda_filter='/cuda:[0-9]+' cases
  for bench in "$KIT"/bin/*_bench; do
    [[ -x "$bench" ]] || continue
    name=$(basename "$bench")
    set_bin "$name"
    cases=$("${BIN[@]}" --benchmark_list_tests=true --benchmark_filter="$cuda_filter" 2>/dev/null | grep -c . || true)
    if [[ "${cases:-0}" == 0 ]]; then
      record "bench $name" skip 0 "no CUDA cases (--benchmark_filter='$cuda_filter')"
      continue
    fi
    if run_step "bench $name" 90 "$LOGS/$name.log" "${BIN[@]}" --benchmark_filter="$cuda_filter" \
         --benchmark_min_time=0.1 --benchmark_out="$LOGS/$name.json" --benchmark_out_format=json; then
      record "bench $name" "$(status_of $STEP_RC)" "$STEP_S" \
        "$(grep -c '"name"' "$LOGS/$name.json" 2>/dev/null || echo 0) results of $cases CUDA cases"
      [[ -s "$LOGS/$name.json" ]] && bench_jsons+=("$LOGS/$name.json")
    fi
  done
  if (( ${#bench_jsons[@]} > 0 )); then
    python3 - "$DEST/bench.json" "${bench_jsons[@]}" <<'PY' || true
import json, sys
merged = {"schema": "blockscope.device_check.bench/1", "suites": {}}
for path in sys.argv[2:]:
    try:
        merged["suites"][path.rsplit("/", 1)[-1]] = json.load(open(path))
    except Exception as error:  # a suite killed mid-write: keep the others
        merged["suites"][path.rsplit("/", 1)[-1]] = {"error": str(error)}
json.dump(merged, open(sys.argv[1], "w"), indent=1)
PY
  fi

  # ---- Counters: Nsight Compute beside the simulated GPU ---------------------------------------
  # The series' attention (counter_gate.py's case attention-bf16, one step) under ncu with the
  # metrics the simulator counts; tools/ci/compare_counters.py writes counters.md, both side by
  # side. Deterministic counts should match; a difference is a WARN to explain, not a failure.
  begin_phase counters "${DEVICE_CHECK_COUNTERS_S:-30}"
  local ncu="${NCU:-}"
  [[ -z "$ncu" ]] && ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  if [[ -z "$ncu" || ! -x "$ncu" ]]; then
    record "counters vs ncu" skip 0 "Nsight Compute (ncu) not installed"
  else
    set_bin blockscope
    if run_step "counters vs ncu" 60 "$LOGS/ncu_attention.csv" "$ncu" --csv --target-processes all \
         --metrics "$(python3 "$ROOT/tools/ci/compare_counters.py" metrics)" "${BIN[@]}" profile \
         "$ROOT/configs/series/04_attention.yaml" --device cuda --set input.batch=1 --set input.seq_len=160 \
         --set profile.schedule.wait=0 --set profile.schedule.warmup=0 --set profile.schedule.active=1; then
      if [[ "$STEP_RC" != 0 ]]; then
        record "counters vs ncu" "$(status_of $STEP_RC)" "$STEP_S" "ncu rc $STEP_RC (ncu_attention.csv)"
      elif python3 "$ROOT/tools/ci/compare_counters.py" compare --baseline "$ROOT/bench/counters/sim_baseline.json" \
             --case attention-bf16 --ncu "$LOGS/ncu_attention.csv" --out "$DEST/counters.md" > /dev/null; then
        record "counters vs ncu" ok "$STEP_S" "every compared count equal (counters.md)"
      else
        record "counters vs ncu" WARN "$STEP_S" "some counts differ from the simulator's: explain each (counters.md)"
      fi
    fi
  fi

  # ---- PyTorch side by side ---------------------------------------------------------------------
  begin_phase pytorch "${DEVICE_CHECK_TORCH_S:-60}"
  if [[ -f "$ROOT/tools/peers/torch_peer.py" ]] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    local peer_args=(--device cuda --out "$LOGS/torch_peer.json")
    if (( ${#bench_jsons[@]} > 0 )); then peer_args+=(--from-json "${bench_jsons[@]}"); else peer_args+=(--sizes gpu); fi
    (( $(remaining) < 150 )) && peer_args+=(--no-compile)  # torch.compile alone takes minutes
    if run_step "torch_peer.py" 150 "$LOGS/torch_peer.log" python3 "$ROOT/tools/peers/torch_peer.py" "${peer_args[@]}"; then
      record "torch_peer.py" "$(status_of $STEP_RC)" "$STEP_S" "rc $STEP_RC"
      [[ -s "$LOGS/torch_peer.json" ]] && cp "$LOGS/torch_peer.json" "$DEST/torch_peer.json"
    fi
    if [[ -f "$ROOT/tools/peers/side_by_side.py" && -s "$LOGS/torch_peer.json" && ${#bench_jsons[@]} -gt 0 ]]; then
      if run_step "side_by_side.py" 30 "$DEST/side_by_side.txt" python3 "$ROOT/tools/peers/side_by_side.py" \
           --blockscope "${bench_jsons[@]}" --torch "$LOGS/torch_peer.json" --json "$LOGS/side_by_side.json"; then
        record "side_by_side.py" "$(status_of $STEP_RC)" "$STEP_S" "side_by_side.txt"
      fi
    fi
  else
    record "torch_peer.py" skip 0 "no tools/peers/torch_peer.py or no CUDA PyTorch"
  fi

  finish "$gpu" "$commit"
}

case "${1:-}" in
  --prepare) prepare ;;
  -h|--help) usage ;;
  "") main_run ;;
  *) echo "device_check: unknown argument '$1'" >&2; usage ;;
esac
