// An analytic model of kernel times on a GPU blockscope has no access to (profiler/gpu_specs.h):
// occupancy and waves by NVIDIA's rules, a kernel's compute and memory time and their overlap
// (as XLA's GPU cost model), cuBLAS-like GEMMs by the tile they would run, an FA2-class flash
// attention, and NCCL collectives by bus bandwidth and latency. Every constant is documented
// where it is defined (gpu_model.cpp); docs/PREDICTION.md gives the formulas and the validation
// against published measurements (profiler/gpu_validation.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "profiler/gpu_specs.h"

namespace blockscope::profiler::predict {

// Printed with every prediction: a change to a constant or a formula bumps it.
constexpr const char* kModelVersion = "gpu-model 1";

// ---- occupancy and waves ---------------------------------------------------------------------

// Nsight Compute's names for what bounds the blocks per SM
// (launch__occupancy_limit_registers|shared_mem|warps|blocks).
enum class Limiter { registers, shared_mem, warps, blocks };
const char* limiter_name(Limiter limiter);

struct Occupancy {
  int blocks_per_sm = 0;
  int warps_per_block = 0;
  int active_warps = 0;       // blocks_per_sm × warps_per_block
  double theoretical = 0;     // active_warps / max warps per SM
  Limiter limiter = Limiter::blocks;
  // Each limit's blocks per SM; limit_registers is -1 when the register count is unknown.
  int limit_registers = -1, limit_shared_mem = 0, limit_warps = 0, limit_blocks = 0;
  std::string note;           // "registers unknown: not applied", else ""
};

// Blocks of `threads_per_block` threads using `registers_per_thread` registers (-1: unknown, the
// limit is not applied) and `smem_bytes` of shared memory (static + dynamic) per block, on one
// SM of `spec`. An InputError for a launch the GPU refuses (no threads, more than 1024, more
// than 255 registers, more shared memory than a block may opt in to).
Occupancy occupancy(const GpuSpec& spec, int threads_per_block, int registers_per_thread, int smem_bytes);

struct Waves {
  int64_t blocks_per_wave = 0;  // blocks_per_sm × SMs
  double fractional = 0;        // blocks / blocks_per_wave
  int64_t whole = 0;            // ceil(fractional)
  // How much longer the compute takes than with perfectly divisible work: the busiest SM's
  // blocks over the average, ceil(blocks / SMs) / (blocks / SMs); with one block per SM that is
  // whole / fractional (1.1 waves cost like 2), and SMs / blocks when SMs are left idle.
  double tail_factor = 1;
};
Waves waves(const GpuSpec& spec, int64_t blocks, int blocks_per_sm);

// ---- one kernel ----------------------------------------------------------------------------

enum class LaunchMode { eager, graph };

struct LaunchShape {
  int64_t grid = 0;         // blocks in all
  int block = 0;            // threads per block
  int registers = -1;       // per thread; -1 unknown
  int smem_bytes = 0;       // static + dynamic per block
};

struct KernelWork {
  double flops = 0;
  ComputeUnit unit = ComputeUnit::none;
  double dram_bytes = 0;          // bytes read and written once (the catalogue's bytes, or sectors × 32)
  double working_set_bytes = -1;  // what must fit in L2 for the L2's bandwidth to apply; -1: dram_bytes
  std::optional<LaunchShape> launch;
  LaunchMode mode = LaunchMode::eager;
};

struct KernelPrediction {
  double compute_us = 0;    // the FLOPs at the achievable rate, stretched by the tail wave
  double memory_us = 0;     // the bytes at the achievable bandwidth (L2 or DRAM)
  double launch_us = 0;     // the launch's own cost (eager or graph node)
  double predicted_us = 0;  // launch_us + max(overlapped compute and memory, the fixed floor)
  double waves = 0;         // fractional waves (0 when the launch shape is unknown)
  std::string bound;        // "compute", "memory" or "latency" (the floor dominates)
  std::optional<Occupancy> occupancy;
};

KernelPrediction predict_kernel(const GpuSpec& spec, const KernelWork& work);

// ---- cuBLAS(Lt) GEMMs ------------------------------------------------------------------------

enum class Epilogue { none, bias, gelu, bias_gelu, accumulate };  // accumulate: beta = 1, C is read

struct GemmPrediction : KernelPrediction {
  int tile_m = 0, tile_n = 0;  // the CTA tile the model picked
  int split_k = 1;
  int64_t ctas = 0;
  std::string tile;            // "128x256" or "64x64 split-k 4"
};

// batch × (m × k) · (k × n) on the tensor cores of `dtype` (tensor_bf16 for bf16/f16,
// tensor_fp8, tensor_tf32) or on the CUDA cores (cuda_fp32): the tile cuBLAS would plausibly
// pick (the fastest of the model's candidates), its waves, and A, B, C/D traffic.
GemmPrediction predict_gemm(const GpuSpec& spec, int64_t m, int64_t n, int64_t k, int64_t batch, ComputeUnit dtype,
                            Epilogue epilogue = Epilogue::none, LaunchMode mode = LaunchMode::eager);

// ---- flash attention (an mma.sync FlashAttention-2-class kernel) ----------------------------

struct AttentionShape {
  int64_t batch = 1, heads = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  bool causal = false;
  int64_t kv_heads = -1;  // -1: heads (no GQA)
  int tile_q = 64;        // query rows per block: ops/attention/flash.cu's kFlashRows
  int tile_k = 64;        // keys per iteration: kFlashKeys (FlashAttention-2 uses 128 × 64 at d 128)
};
// FLOPs by FlashAttention's convention: 4·B·H·Sq·Sk·D, halved when causal.
double attention_flops(const AttentionShape& shape);
// Forward, bf16/f16 inputs. predicted_us is an FA2-class kernel's time (calibrated on
// FlashAttention-2's published H100 figures); a kernel with fewer rows per warp or without
// FA2's pipelining is slower, never faster (docs/PREDICTION.md: the band).
KernelPrediction predict_attention_flash(const GpuSpec& spec, const AttentionShape& shape,
                                         LaunchMode mode = LaunchMode::eager);

// ---- NCCL collectives ------------------------------------------------------------------------

enum class Collective { all_reduce, reduce_scatter, all_gather };
enum class CollectiveAlgorithm { automatic, ring, nvls };

struct CollectivePrediction : KernelPrediction {
  std::string algorithm;    // "ring" or "nvls"
  std::string protocol;     // "LL" or "Simple"
  double algbw_gbps = 0;    // bytes / time
  double busbw_gbps = 0;    // nccl-tests' bus bandwidth: algbw × 2(n-1)/n or (n-1)/n
};

// `bytes`: nccl-tests' size (the all-reduced buffer, all-gather's output, reduce-scatter's
// input) over `ranks` GPUs of `spec` joined by NVLink.
CollectivePrediction predict_collective(const GpuSpec& spec, Collective op, double bytes, int ranks,
                                        CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic);
CollectivePrediction predict_all_reduce(const GpuSpec& spec, double bytes, int ranks);
// nccl-tests' bus-bandwidth factor of `op` over `ranks`.
double bus_factor(Collective op, int ranks);

// Bytes per element the tensor cores of `unit` read (bf16 2, fp8 1, tf32 and fp32 4).
double element_bytes(ComputeUnit unit);

}  // namespace blockscope::profiler::predict
