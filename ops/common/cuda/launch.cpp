// Launch bookkeeping for ops/common/cuda/launch.cuh (declared in launch_support.h): kernel attributes and occupancy (cached per
// kernel function and block shape), launch checks, and recorded device-to-device copies.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "profiler/scope.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "ops/common/cuda/launch_support.h"
#include "ops/common/kernel_names.h"

namespace blockscope::ops::cuda {
namespace {

struct LaunchFacts {
  int registers = 0;
  int64_t static_smem = 0;
  double occupancy = 0;  // theoretical: resident threads / max threads per SM
};

// Attributes do not change for a kernel; occupancy depends on the block size and dynamic
// shared memory too. cudaFuncGetAttributes is slow enough to matter per launch, so cache.
using LaunchKey = std::tuple<const void*, int, unsigned, size_t>;  // kernel, device, threads, smem

LaunchFacts launch_facts(const void* kernel, int device, unsigned threads, size_t dynamic_smem) {
  static std::mutex mutex;
  static std::map<LaunchKey, LaunchFacts> cache;
  const LaunchKey key{kernel, device, threads, dynamic_smem};
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;

  LaunchFacts facts;
  cudaFuncAttributes attributes{};
  BS_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  facts.registers = attributes.numRegs;
  facts.static_smem = static_cast<int64_t>(attributes.sharedSizeBytes);
  int blocks_per_sm = 0;
  BS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, static_cast<int>(threads),
                                                              dynamic_smem));
  int max_threads_per_sm = 0;
  BS_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  if (max_threads_per_sm > 0) {
    facts.occupancy = static_cast<double>(blocks_per_sm) * threads / max_threads_per_sm;
  }
  cache.emplace(key, facts);
  return facts;
}

std::string config_str(dim3 grid, dim3 block, size_t dynamic_smem) {
  return "grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) +
         "), block (" + std::to_string(block.x) + ", " + std::to_string(block.y) + ", " + std::to_string(block.z) +
         "), " + std::to_string(dynamic_smem) + " bytes dynamic shared memory";
}

}  // namespace

void describe_launch(profiler::KernelEvent& event, const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
                     int device) {
  event.grid = profiler::Dim3{grid.x, grid.y, grid.z};
  event.block = profiler::Dim3{block.x, block.y, block.z};
  event.dynamic_smem = static_cast<int64_t>(dynamic_smem);
  const LaunchFacts facts = launch_facts(kernel, device, block.x * block.y * block.z, dynamic_smem);
  event.registers = facts.registers;
  event.static_smem = facts.static_smem;
  event.occupancy = facts.occupancy;
}

void check_launch(Context& ctx, const char* kernel, dim3 grid, dim3 block, size_t dynamic_smem) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  const std::string op = ctx.scope_path().empty() ? std::string("(no op)") : ctx.scope_path();
  throw Error(ErrorKind::runtime, std::string("CUDA launch of ") + kernel + " in op '" + op + "' failed: " +
                                      cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + "); " +
                                      config_str(grid, block, dynamic_smem));
}

void memcpy_dtod(Context& ctx, void* dst, const void* src, size_t bytes) {
  CudaBackend& backend = cuda_backend(ctx);
  profiler::KernelScope scope(ctx, kernel_names::kMemcpyDtoD);
  if (bytes == 0) return;
  const cudaError_t status = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, backend.stream());
  if (status != cudaSuccess) {
    cudaGetLastError();  // reported here; the next launch check must not report it again
    throw Error(ErrorKind::runtime, std::string("Memcpy DtoD of ") + std::to_string(bytes) + " bytes in op '" +
                                        ctx.scope_path() + "' failed: " + cudaGetErrorName(status) + " (" +
                                        cudaGetErrorString(status) + ")");
  }
}

}  // namespace blockscope::ops::cuda
