// ptxas's figures for nvcc-sim: what `nvcc -cubin --resource-usage` printed, as a table compiled
// into the simulated program (sim::register_kernel_resources at start-up).
#pragma once

#include <string>
#include <vector>

namespace blockscope::sim::nvcc {

struct KernelFigures {
  std::string mangled_name;
  int registers = 0;
  int static_smem = 0;  // bytes
  int stack = 0;        // bytes of stack frame per thread
  int barriers = 0;
};

// The entry functions (kernels) in ptxas's "--resource-usage" output.
std::vector<KernelFigures> parse_ptxas(const std::string& log);

// C++ that registers them (empty when there are none).
std::string resource_table(const std::vector<KernelFigures>& kernels);

}  // namespace blockscope::sim::nvcc
