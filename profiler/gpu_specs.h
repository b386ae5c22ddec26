// The GPUs blockscope can predict kernel times for without one (profiler/gpu_model.h): one
// table of their published figures, each with its source in gpu_specs.cpp, and the few
// achievable fractions measured on them (also cited). docs/PREDICTION.md prints the table.
#pragma once

#include <string>
#include <vector>

#include "sim/occupancy.h"

namespace blockscope::profiler {

// Who does a kernel's FLOPs: a tensor-core MMA of an input type, or the CUDA cores.
enum class ComputeUnit {
  tensor_fp64,
  tensor_tf32,
  tensor_bf16,  // bf16 and f16 inputs, f32 accumulate: the same rate
  tensor_fp8,
  tensor_int8,  // OP/s rather than FLOP/s
  cuda_fp32,
  cuda_fp16x2,  // packed half2 / bfloat162 FMA on the CUDA cores
  cuda_fp64,
  none,         // a copy or a kernel whose FLOPs do not matter
};
const char* compute_unit_name(ComputeUnit unit);

// Dense throughput of one SM per clock (FLOP, or OP for int8), and which clock the published
// peak assumes: NVIDIA quotes H100's tensor peaks at 1.83 GHz but its CUDA-core and FP64 peaks
// at the 1.98 GHz boost, so peak = SMs × clock × per-clock rate reproduces each datasheet figure.
struct UnitRate {
  double per_sm_per_clock = 0;  // 0: the GPU has no such unit (A100 has no FP8 tensor cores)
  bool at_tensor_clock = true;
};

struct GpuSpec {
  const char* name;                  // "h100-sxm"
  std::vector<const char*> aliases;  // "h100"
  const char* description;           // "NVIDIA H100 SXM5 80 GB (Hopper, sm_90)"
  int compute_capability;            // 90, 80

  int sms;
  double boost_clock_ghz;   // the CUDA cores' peaks assume it
  double tensor_clock_ghz;  // the tensor cores' peaks assume it

  UnitRate tensor_fp64, tensor_tf32, tensor_bf16, tensor_fp8, tensor_int8;
  UnitRate cuda_fp32, cuda_fp16x2, cuda_fp64;
  int sfu_per_sm_per_clock;  // exp2/rcp/rsqrt (the MUFU): the softmax's exp in flash attention

  double hbm_tbps;   // peak DRAM bandwidth, TB/s (1e12 bytes)
  double hbm_gb;     // DRAM size, GB (1e9 bytes)
  double l2_mb;      // L2 size, MB (1e6 bytes)
  double l2_tbps;    // L2 bandwidth at the boost clock, TB/s

  // An SM's limits for occupancy: its compute capability's (sim/occupancy.h states them once,
  // with their sources, for the simulated GPU and this table alike).
  sim::SmLimits sm;

  double nvlink_gbps;  // NVLink bandwidth per GPU, one direction, GB/s
  bool nvlink_sharp;   // NVSwitch reduces in the switch (NCCL's NVLS all-reduce)

  double launch_overhead_us;  // GPU time between back-to-back eager kernels
  double graph_node_us;       // the same for a node of a replayed CUDA graph

  // Achievable fractions, measured on the GPU (sources in gpu_specs.cpp).
  double dram_efficiency;      // of hbm_tbps, by a large streaming kernel
  double l2_efficiency;        // of l2_tbps, likewise for an L2-resident stream
  double gemm_efficiency;      // of a full tile's share of the bf16 peak, cuBLAS(Lt) at its best tile
  double fp8_gemm_factor;      // an FP8 GEMM's efficiency relative to gemm_efficiency
  double mma_sync_efficiency;  // of the tensor peak, by an mma.sync (FA2-class) attention's MMAs
  double nvlink_ring_efficiency;  // of nvlink_gbps, NCCL's ring at large messages (nccl-tests busbw)
  double nvlink_sharp_efficiency; // of nvlink_gbps, NCCL's NVLS all-reduce algbw at large messages

  // Peak TFLOP/s (TOP/s for int8) of `unit`: SMs × its clock × its per-SM rate; 0 for none.
  double peak_tflops(ComputeUnit unit) const;
  double tensor_flops_per_sm_per_clock(ComputeUnit unit) const;
  // The GPU's name followed by its aliases: "h100-sxm (h100)".
  std::string names() const;
};

// Every GPU of the table, in a fixed order.
const std::vector<GpuSpec>& gpu_specs();
// The GPU called `name` (a name or an alias, case-insensitive); an InputError naming the valid
// ones otherwise.
const GpuSpec& gpu_spec(const std::string& name);
// "h100-sxm (h100), h200, a100-sxm (a100)": for messages and --help.
std::string gpu_spec_names();

}  // namespace blockscope::profiler
