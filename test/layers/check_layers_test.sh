#!/usr/bin/env bash
# tools/check_layers.cmake must pass this tree and fail each planted upward include:
#   check_layers_test.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
src="$1" scratch="$2"
mkdir -p "$scratch"
check() { cmake -DSOURCE_DIR="$1" -P "$src/tools/check_layers.cmake" > "$scratch/out.log" 2>&1; }

check "$src" || { cat "$scratch/out.log"; echo "FAIL: the tree itself does not pass"; exit 1; }

# plant FILE INCLUDE EXPECTED-REASON: a copy of the layered folders with one include added.
plant() {
  rm -rf "$scratch/tree" && mkdir -p "$scratch/tree"
  cp -r "$src"/{runtime,profiler,ops,model,reference,tools} "$scratch/tree/"
  echo "#include \"$2\"" >> "$scratch/tree/$1"
  if check "$scratch/tree"; then echo "FAIL: $1 including $2 passed the check"; exit 1; fi
  grep -q "$1 includes \"$2\": $3" "$scratch/out.log" || { cat "$scratch/out.log"; echo "FAIL: no reason for $1"; exit 1; }
  echo "caught: $1 -> $2"
}
plant runtime/tensor.h ops/softmax/softmax.h "runtime/ is below ops/"
plant profiler/trace.cpp runtime/cuda/cuda_backend.h "the profiler uses no backend header"
plant ops/common/rows.h ops/linear/linear.h "ops/common/ sits under every op"
plant reference/ops_reference.cpp ops/linear/linear.h "the oracles are written independently"
plant model/block.cpp reference/accuracy.h "model/ is below reference/"
plant ops/softmax/softmax.cpp model/config.h "ops/ is below model/"
echo "check_layers: 6 planted upward includes caught"
