#!/usr/bin/env bash
# tools/ci/check_layers.cmake must pass this tree, pass planted includes that follow the rules, and
# fail each planted include that breaks one, naming the file, the include and the rule:
#   check_layers_test.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
src="$1" scratch="$2"
mkdir -p "$scratch"
check() { cmake -DSOURCE_DIR="$1" -P "$src/tools/ci/check_layers.cmake" > "$scratch/out.log" 2>&1; }

check "$src" || { cat "$scratch/out.log"; echo "FAIL: the tree itself does not pass"; exit 1; }

# A copy of the project's folders with one line added to FILE: #include FORM ("x.h" or <x.h>).
copy_with() {
  rm -rf "$scratch/tree" && mkdir -p "$scratch/tree"
  cp -r "$src"/{sim,runtime,profiler,ops,model,reference,tools,bench,test} "$scratch/tree/"
  echo "#include $2" >> "$scratch/tree/$1"
}

# plant FILE FORM REASON: the check must fail and say "FILE includes FORM: REASON".
plant() {
  copy_with "$1" "$2"
  if check "$scratch/tree"; then echo "FAIL: $1 including $2 passed the check"; exit 1; fi
  grep -qF "$1 includes $2: $3" "$scratch/out.log" || { cat "$scratch/out.log"; echo "FAIL: no reason for $1 -> $2"; exit 1; }
  echo "caught: $1 -> $2"
}

# allow FILE FORM: the check must pass (a downward, relative, system or toolkit include).
allow() {
  copy_with "$1" "$2"
  check "$scratch/tree" || { cat "$scratch/out.log"; echo "FAIL: $1 including $2 was refused"; exit 1; }
  echo "allowed: $1 -> $2"
}

# Upward includes, in each include form the check resolves.
plant runtime/tensor.h '"ops/softmax/softmax.h"' "runtime/ is below ops/"
plant runtime/tensor.h '<ops/softmax/softmax.h>' "runtime/ is below ops/"
plant ops/common/rows.h '"../linear/linear.h"' "ops/common/ sits under every op"
plant ops/softmax/softmax.cpp '"model/config.h"' "ops/ is below model/"
plant model/block.cpp '"reference/accuracy.h"' "model/ is below reference/"
# The rules beyond the order of the layers.
plant profiler/trace.cpp '"runtime/cuda/cuda_backend.h"' "the profiler uses no backend header"
plant runtime/context.cpp '"cpu/gemm.h"' "runtime's core types name no backend"
plant reference/ops_reference.cpp '"ops/linear/linear.h"' "the oracles are written independently"
plant sim/executor.cpp '"runtime/tensor.h"' "the simulator includes nothing of blockscope but sim/"
plant sim/executor.cpp '"../runtime/error.h"' "the simulator includes nothing of blockscope but sim/"
plant ops/softmax/cuda.cu '"sim/sim.h"' "only ops/common/cuda/tensor_core.cuh and runtime/cuda/kernel_counters.cpp reach into the simulator"
plant ops/softmax/softmax.cpp '"bench/support/bench_support.h"' "libraries never include bench/ or test/"
plant runtime/tensor.cpp '<test/support/test_support.h>' "libraries never include bench/ or test/"
plant sim/executor.cpp '"test/managed.h"' "libraries never include bench/ or test/"

# Includes the rules allow.
allow ops/softmax/softmax.cpp '"../common/rows.h"'
allow ops/softmax/softmax.cpp '"runtime/tensor.h"'
allow model/block.cpp '<vector>'
allow ops/softmax/cuda.cu '<cuda_runtime.h>'
allow sim/executor.cpp '"symbols.h"'
echo "check_layers: 14 planted includes caught, 5 allowed ones passed"
