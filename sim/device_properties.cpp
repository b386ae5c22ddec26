// What the simulated GPU says it is: an H200 SXM (compute capability 9.0), per device; function
// attributes and occupancy from the limits an H200 has (threads, blocks, shared memory and
// registers per SM) and, where nvcc-sim recorded them, ptxas's figures for each kernel.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "sim/occupancy.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
namespace {

constexpr int kClockKhz = 1980000;        // boost clock
constexpr int kMemoryClockKhz = 3201000;  // HBM3e: 6144 bits x 3.2 GHz x 2 = 4.9 TB/s

struct FunctionAttributes {
  int max_dynamic_smem = 0;  // cudaFuncAttributeMaxDynamicSharedMemorySize
  int carveout = -1;         // cudaFuncAttributePreferredSharedMemoryCarveout
};

std::map<const void*, FunctionAttributes>& function_attributes() {
  static std::map<const void*, FunctionAttributes> attributes;
  return attributes;
}

}  // namespace

size_t max_dynamic_smem(const void* function) {
  Lock lock(state_mutex());
  auto it = function_attributes().find(function);
  return it == function_attributes().end() ? 0 : static_cast<size_t>(it->second.max_dynamic_smem);
}

}  // namespace blockscope::sim::detail

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  // "(simulated)" is how blockscope's runtime tells the simulator from a GPU (cuda_simulated()).
  std::snprintf(prop->name, sizeof prop->name, "NVIDIA H200 (simulated)");
  prop->uuid.bytes[0] = static_cast<char>(device + 1);
  prop->totalGlobalMem = kTotalGlobalMem;
  prop->sharedMemPerBlock = kSharedPerBlock;
  prop->regsPerBlock = blockscope::sim::kSm90Limits.registers_per_block;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024, prop->maxThreadsDim[1] = 1024, prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647, prop->maxGridSize[1] = 65535, prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 65536;
  prop->major = 9;
  prop->minor = 0;
  prop->textureAlignment = 512;
  prop->texturePitchAlignment = 32;
  prop->multiProcessorCount = kSmCount;
  prop->integrated = 0;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->pciBusID = kFirstPciBus + device;
  prop->asyncEngineCount = 3;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = 6144;
  prop->l2CacheSize = 50 << 20;
  prop->persistingL2CacheMaxSize = static_cast<int>(kPersistingL2CacheMax);
  prop->maxThreadsPerMultiProcessor = kMaxThreadsPerSm;
  prop->streamPrioritiesSupported = 1;
  prop->globalL1CacheSupported = 1;
  prop->localL1CacheSupported = 1;
  prop->sharedMemPerMultiprocessor = kSharedPerSm;
  prop->regsPerMultiprocessor = kRegistersPerSm;
  prop->managedMemory = 1;
  prop->computePreemptionSupported = 1;
  prop->cooperativeLaunch = 1;
  prop->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  prop->maxBlocksPerMultiProcessor = kMaxBlocksPerSm;
  prop->accessPolicyMaxWindowSize = static_cast<int>(kAccessPolicyMaxWindow);
  prop->reservedSharedMemPerBlock = kReservedSharedPerBlock;
  prop->hostRegisterSupported = 1;
  prop->memoryPoolsSupported = 1;
  prop->memoryPoolSupportedHandleTypes = 1;
  prop->clusterLaunch = 1;
  prop->unifiedFunctionPointers = 1;
  prop->hostNumaId = -1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrTotalConstantMemory: *value = static_cast<int>(p.totalConstMem); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate: *value = kClockKhz; break;
    case cudaDevAttrMemoryClockRate: *value = kMemoryClockKhz; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(p.sharedMemPerMultiprocessor); break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = static_cast<int>(p.reservedSharedMemPerBlock); break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrCooperativeLaunch: *value = p.cooperativeLaunch; break;
    case cudaDevAttrMemoryPoolsSupported: *value = p.memoryPoolsSupported; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrStreamPrioritiesSupported: *value = p.streamPrioritiesSupported; break;
    case cudaDevAttrClusterLaunch: *value = p.clusterLaunch; break;
    case cudaDevAttrMaxPitch: *value = static_cast<int>(p.memPitch); break;
    case cudaDevAttrTextureAlignment: *value = static_cast<int>(p.textureAlignment); break;
    case cudaDevAttrTexturePitchAlignment: *value = static_cast<int>(p.texturePitchAlignment); break;
    case cudaDevAttrSurfaceAlignment: *value = 512; break;
    case cudaDevAttrGpuOverlap: *value = 1; break;
    case cudaDevAttrKernelExecTimeout: *value = 0; break;  // no display watchdog
    case cudaDevAttrComputeMode: *value = cudaComputeModeDefault; break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrPciDomainId: *value = 0; break;
    case cudaDevAttrTccDriver: *value = 0; break;
    case cudaDevAttrGlobalL1CacheSupported: *value = p.globalL1CacheSupported; break;
    case cudaDevAttrLocalL1CacheSupported: *value = p.localL1CacheSupported; break;
    case cudaDevAttrIsMultiGpuBoard: *value = 0; break;
    case cudaDevAttrMultiGpuBoardGroupID: *value = device; break;
    case cudaDevAttrHostNativeAtomicSupported: *value = 0; break;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: *value = 2; break;
    case cudaDevAttrPageableMemoryAccess: *value = 0; break;
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables: *value = 0; break;
    case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
    case cudaDevAttrDirectManagedMemAccessFromHost: *value = 0; break;
    case cudaDevAttrComputePreemptionSupported: *value = p.computePreemptionSupported; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: *value = 1; break;
    case cudaDevAttrHostRegisterSupported: *value = p.hostRegisterSupported; break;
    case cudaDevAttrHostRegisterReadOnlySupported: *value = 1; break;
    case cudaDevAttrCanFlushRemoteWrites: *value = 0; break;
    case cudaDevAttrMaxPersistingL2CacheSize: *value = p.persistingL2CacheMaxSize; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: *value = p.accessPolicyMaxWindowSize; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: *value = static_cast<int>(p.memoryPoolSupportedHandleTypes); break;
    case cudaDevAttrMemSyncDomainCount: *value = 4; break;
    case cudaDevAttrNumaId: *value = -1; break;
    case cudaDevAttrHostNumaId: *value = -1; break;
    // Not modelled: textures, surfaces and CUDA arrays (their limits read 0, and the APIs are
    // absent); IPC, RDMA, MPS, NUMA placement, graphics interop.
    case cudaDevAttrMaxTexture1DWidth: case cudaDevAttrMaxTexture2DWidth: case cudaDevAttrMaxTexture2DHeight:
    case cudaDevAttrMaxTexture3DWidth: case cudaDevAttrMaxTexture3DHeight: case cudaDevAttrMaxTexture3DDepth:
    case cudaDevAttrMaxTexture2DLayeredWidth: case cudaDevAttrMaxTexture2DLayeredHeight:
    case cudaDevAttrMaxTexture2DLayeredLayers: case cudaDevAttrMaxTexture1DLayeredWidth:
    case cudaDevAttrMaxTexture1DLayeredLayers: case cudaDevAttrMaxTexture2DGatherWidth:
    case cudaDevAttrMaxTexture2DGatherHeight: case cudaDevAttrMaxTexture3DWidthAlt:
    case cudaDevAttrMaxTexture3DHeightAlt: case cudaDevAttrMaxTexture3DDepthAlt:
    case cudaDevAttrMaxTextureCubemapWidth: case cudaDevAttrMaxTextureCubemapLayeredWidth:
    case cudaDevAttrMaxTextureCubemapLayeredLayers: case cudaDevAttrMaxSurface1DWidth:
    case cudaDevAttrMaxSurface2DWidth: case cudaDevAttrMaxSurface2DHeight: case cudaDevAttrMaxSurface3DWidth:
    case cudaDevAttrMaxSurface3DHeight: case cudaDevAttrMaxSurface3DDepth: case cudaDevAttrMaxSurface1DLayeredWidth:
    case cudaDevAttrMaxSurface1DLayeredLayers: case cudaDevAttrMaxSurface2DLayeredWidth:
    case cudaDevAttrMaxSurface2DLayeredHeight: case cudaDevAttrMaxSurface2DLayeredLayers:
    case cudaDevAttrMaxSurfaceCubemapWidth: case cudaDevAttrMaxSurfaceCubemapLayeredWidth:
    case cudaDevAttrMaxSurfaceCubemapLayeredLayers: case cudaDevAttrMaxTexture1DLinearWidth:
    case cudaDevAttrMaxTexture2DLinearWidth: case cudaDevAttrMaxTexture2DLinearHeight:
    case cudaDevAttrMaxTexture2DLinearPitch: case cudaDevAttrMaxTexture2DMipmappedWidth:
    case cudaDevAttrMaxTexture2DMipmappedHeight: case cudaDevAttrMaxTexture1DMipmappedWidth:
    case cudaDevAttrSparseCudaArraySupported: case cudaDevAttrDeferredMappingCudaArraySupported:
    case cudaDevAttrTimelineSemaphoreInteropSupported: case cudaDevAttrGPUDirectRDMASupported:
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions: case cudaDevAttrGPUDirectRDMAWritesOrdering:
    case cudaDevAttrIpcEventSupport: case cudaDevAttrNumaConfig: case cudaDevAttrMpsEnabled:
    case cudaDevAttrD3D12CigSupported: case cudaDevAttrVulkanCigSupported:
    case cudaDevAttrHostNumaMemoryPoolsSupported: case cudaDevAttrHostNumaMultinodeIpcSupported:
    case cudaDevAttrHostMemoryPoolsSupported: case cudaDevAttrOnlyPartialHostNativeAtomicSupported:
      *value = 0;
      break;
    default: return result(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// Registers, static shared memory and local memory are ptxas's figures for sm_90 when nvcc-sim
// recorded them (nvcc was there when the kernel was compiled); otherwise numRegs is -1 and the
// sizes 0: unknown, never a made-up count.
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attributes, const void* function) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  Lock lock(state_mutex());
  std::memset(attributes, 0, sizeof *attributes);
  const FunctionAttributes& set = function_attributes()[function];
  blockscope::sim::KernelResources resources{};
  const bool known = blockscope::sim::kernel_resources(function, &resources);
  attributes->maxThreadsPerBlock = 1024;
  attributes->numRegs = known ? resources.registers : -1;
  attributes->sharedSizeBytes = known ? static_cast<size_t>(resources.static_smem) : 0;
  attributes->localSizeBytes = known ? static_cast<size_t>(resources.local_bytes) : 0;
  attributes->ptxVersion = 90;
  attributes->binaryVersion = 90;
  attributes->maxDynamicSharedSizeBytes = set.max_dynamic_smem != 0 ? set.max_dynamic_smem : static_cast<int>(kSharedPerBlock);
  attributes->preferredShmemCarveout = set.carveout;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* function, enum cudaFuncAttribute attr, int value) {
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  Lock lock(state_mutex());
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || static_cast<size_t>(value) > kSharedPerBlockOptin) return result(cudaErrorInvalidValue);
      function_attributes()[function].max_dynamic_smem = value;
      return cudaSuccess;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      if (value < -1 || value > 100) return result(cudaErrorInvalidValue);
      function_attributes()[function].carveout = value;
      return cudaSuccess;
    default: return result(cudaErrorInvalidValue);
  }
}

// Resident blocks per SM by the occupancy calculator's rules for sm_90 (sim/occupancy.h): threads
// (whole warps), blocks, shared memory (each block also takes the 1 KiB the driver reserves) and —
// when ptxas's figures are known — registers and static shared memory.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* function, int block_size,
                                                          size_t dynamic_smem) {
  if (blocks == nullptr || block_size <= 0) return result(cudaErrorInvalidValue);
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  const size_t limit = std::max(kSharedPerBlock, max_dynamic_smem(function));
  if (block_size > 1024 || dynamic_smem > limit) {
    *blocks = 0;
    return cudaSuccess;
  }
  blockscope::sim::KernelResources resources{};
  const bool known = blockscope::sim::kernel_resources(function, &resources);
  const size_t smem = dynamic_smem + (known ? static_cast<size_t>(resources.static_smem) : 0);
  *blocks = blockscope::sim::theoretical_occupancy(blockscope::sim::kSm90Limits, block_size,
                                                   known ? resources.registers : -1, static_cast<int64_t>(smem))
                .blocks_per_sm;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* function, int block_size,
                                                                   size_t dynamic_smem, unsigned int flags) {
  // cudaOccupancyDisableCachingOverride: about the L1/shared split, which the count above ignores.
  if (flags != cudaOccupancyDefault && flags != cudaOccupancyDisableCachingOverride) return result(cudaErrorInvalidValue);
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, function, block_size, dynamic_smem);
}

// The dynamic shared memory each of `blocks` resident blocks of `block_size` threads can have.
cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* bytes, const void* function, int blocks,
                                                      int block_size) {
  if (bytes == nullptr || blocks <= 0 || block_size <= 0 || block_size > 1024) return result(cudaErrorInvalidValue);
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  blockscope::sim::KernelResources resources{};
  const bool known = blockscope::sim::kernel_resources(function, &resources);
  const size_t per_block = kSharedPerSm / static_cast<size_t>(blocks);
  const size_t fixed = kReservedSharedPerBlock + (known ? static_cast<size_t>(resources.static_smem) : 0);
  *bytes = per_block > fixed ? std::min(per_block - fixed, kSharedPerBlockOptin) : 0;
  return cudaSuccess;
}

}  // extern "C"
