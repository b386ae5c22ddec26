// nvcc-sim's rewriter: from preprocessed CUDA (the output of `c++ -E` with sim/kernel_prelude.h
// force-included, so the execution-space keywords arrive as __blockscope_*__ markers) to plain
// C++ for the host compiler, keeping every line where it was:
//   K<<<grid, block[, smem[, stream]]>>>(args)   →  a sim::kernel_launch::launch(...) call
//   [static] __shared__ T x[N];  (in a function)   →  T (&x)[N] bound to the block's shared memory
//   extern __shared__ T x[];     (in a function)   →  T (&x)[] bound to the dynamic shared memory
//   __shared__ / extern __shared__ at namespace scope → every later use of the name becomes the
//                                                    same expression
//   __device__ / __constant__ / __managed__ variables at namespace scope → registered after their
//                                                    definition (sim::DeviceVariable)
//   __device__ on a function, anything else          →  removed
//   a bare __noinline__                              →  __attribute__((noinline))
// Errors (a launch it cannot parse, …) name the file and line of the original source.
#pragma once

#include <string>
#include <vector>

namespace blockscope::sim::nvcc {

struct RewriteResult {
  std::string text;
  std::vector<std::string> errors;  // "file:line: error: …"
};

RewriteResult rewrite(const std::string& preprocessed);

}  // namespace blockscope::sim::nvcc
