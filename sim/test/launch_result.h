// What the simulator's own tests ask of a kernel just launched: run it, and say how it ended.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace blockscope::sim::test {

// Runs the kernel already launched; returns "" or the fault's message (checking its code is
// `expected`), and clears the error so the next test starts clean.
inline std::string finish(cudaError_t expected = cudaSuccess) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) {
    cudaDeviceSynchronize();
    cudaGetLastError();
    return std::string("launch failed: ") + cudaGetErrorName(launch);
  }
  const cudaError_t status = cudaDeviceSynchronize();
  EXPECT_EQ(status, expected) << cudaGetErrorString(status);
  cudaGetLastError();
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace blockscope::sim::test
