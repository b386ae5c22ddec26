#include "profiler/gpu_specs.h"

#include <algorithm>
#include <cctype>

#include "runtime/error.h"

namespace blockscope::profiler {

// Sources, cited once here and by letter below:
// [DS]   NVIDIA datasheets and architecture whitepapers (H100 SXM5: "NVIDIA H100 Tensor Core GPU"
//        datasheet and Hopper whitepaper; H200: H200 datasheet; A100: "NVIDIA A100 Tensor Core
//        GPU Architecture" whitepaper, A100 80GB datasheet), as tabulated with the same figures in
//        glennklockwood.com/garden/processors/h100 (peaks per type: FP64 33.5/66.9, FP32 66.9,
//        TF32 494.7, FP16/BF16 133.8 vector and 989.4 matrix, FP8/INT8 1978.9) and in
//        stas00/ml-engineering compute/accelerator/README.md (H100: 1830 MHz × 512 FMA per tensor
//        core × 528 tensor cores = 989 TFLOP/s; A100: 1410 MHz × 256 × 432 = 312; HBM: H100 SXM
//        3.35 TB/s, H200 4.8 TB/s 141 GB, A100 SXM 80GB 2.0 TB/s).
// [CCG]  CUDA C Programming Guide, "Arithmetic Instructions" (16 MUFU results per clock per SM on
//        8.0 and 9.0). The SMs' occupancy limits (registers, warps, blocks, shared memory) are
//        sim/occupancy.h's kSm80Limits / kSm90Limits, cited there.
// [L2]   PMC10448217 (pmc.ncbi.nlm.nih.gov/articles/PMC10448217, Table 3): L2 bandwidth
//        A100 7219 GB/s and GH100 8986 GB/s, i.e. 5120 bytes per clock (A100 whitepaper's L2
//        width) at 1.41 / 1.755 GHz.
// [NVL]  NVLink 4 (H100/H200 SXM): 18 links, 900 GB/s both directions per GPU; NVLink 3 (A100
//        SXM): 12 links, 600 GB/s [DS]. NVLS (SHARP in NVSwitch 3) on HGX H100/H200 only.
// [GRAPH] developer.nvidia.com/blog/cuda-graphs ("Getting Started with CUDA Graphs"): a 2.9 µs
//        kernel takes 3.8 µs per launch back to back on a stream, 3.4 µs as a graph node: ~0.9 µs
//        and ~0.5 µs of launch cost; XLA's GPU cost model uses kKernelLaunchOverhead = 1 µs
//        (openxla/xla xla/service/gpu/model/gpu_performance_model_base.h).
// [QUACK] Dao-AILab/quack media/2025-07-10-membound-sol.md (also sysml.cs.princeton.edu/blogs/
//        memory-bound-kernels.html): softmax 16K × 131K f32 on H100 SXM at 3.01 TB/s DRAM
//        throughput, "89.7% of the peak"; "~5-10 TB/s for accessing L2".
// [A100BW] forums.developer.nvidia.com/t/trouble-to-reach-peak-bandwidth-of-a100/339083: a read
//        kernel on A100 80GB SXM at 1.80 TB/s, Nsight Compute 88% of peak.
// [NCCL] stas00/ml-engineering network/README.md (SHARP section), nccl-tests on 8× H200
//        (NVLink 4, nccl 2.27.7, 16 GiB): all-reduce NVLS 480.0 GB/s busbw, ring (NVLS off)
//        367.2 GB/s = 82% of 450, all-gather 361.4, reduce-scatter 362.9.
// [CAL]  Fitted by this repository to the published rows of bench/validation/published_gpu.csv
//        (docs/PREDICTION.md): cuBLAS GEMMs by shape (XLA's sm_90 table, fast.cu, the MAMF
//        table) for gemm_efficiency; FlashAttention-2 in the FlashAttention-3 paper (arXiv
//        2407.08608, Fig. 5) for mma_sync_efficiency on Hopper.

namespace {

GpuSpec hopper(const char* name, std::vector<const char*> aliases, const char* description, double hbm_tbps,
               double hbm_gb) {
  GpuSpec s{};
  s.name = name;
  s.aliases = std::move(aliases);
  s.description = description;
  s.compute_capability = 90;
  s.sms = 132;               // [DS] 132 SMs enabled of GH100's 144
  s.boost_clock_ghz = 1.98;  // [DS] FP32 66.9 TFLOP/s = 132 × 128 FMA × 2 × 1.98 GHz
  s.tensor_clock_ghz = 1.83; // [DS] BF16 989.4 TFLOP/s = 132 × 4096 × 1.83 GHz
  s.tensor_fp64 = {256, false};   // 66.9 TFLOP/s at 1.98 GHz [DS]
  s.tensor_tf32 = {2048, true};   // 494.7 [DS]
  s.tensor_bf16 = {4096, true};   // 989.4 dense [DS]
  s.tensor_fp8 = {8192, true};    // 1978.9 dense [DS]
  s.tensor_int8 = {8192, true};   // 1978.9 TOP/s dense [DS]
  s.cuda_fp32 = {256, false};     // 66.9 [DS]
  s.cuda_fp16x2 = {512, false};   // 133.8 (FP16/BF16 "vector") [DS]
  s.cuda_fp64 = {128, false};     // 33.5 [DS]
  s.sfu_per_sm_per_clock = 16;    // [CCG]
  s.hbm_tbps = hbm_tbps;
  s.hbm_gb = hbm_gb;
  s.l2_mb = 50;      // [DS] 50 MB
  s.l2_tbps = 8.986; // [L2]
  s.sm = sim::kSm90Limits;
  s.nvlink_gbps = 450;     // [NVL] 900 GB/s both ways
  s.nvlink_sharp = true;   // [NVL]
  s.dram_efficiency = 0.90;   // [QUACK] 3.01 of 3.35 TB/s; H200 assumed alike (no measurement cited)
  s.l2_efficiency = 0.75;     // [QUACK]'s 5-10 TB/s observed, against [L2]'s 9.0: an estimate
  s.gemm_efficiency = 0.86;   // [CAL]
  s.fp8_gemm_factor = 0.90;   // [CAL] on the MAMF table's FP8 rows (H100 70.9%, H200 73.4% of peak)
  s.mma_sync_efficiency = 0.42;        // [CAL] FA2 plateaus at 370 (d128) and 324 (d64) TFLOP/s
  s.nvlink_ring_efficiency = 0.816;    // [NCCL] 367.2 / 450
  s.nvlink_sharp_efficiency = 0.612;   // [NCCL] busbw 480.0 = algbw × 2·7/8: algbw 274.3 / 450
  return s;
}

// Shared by every GPU of the table.
void common_launch_costs(GpuSpec& s) {
  s.launch_overhead_us = 1.0;  // [GRAPH] XLA's 1 µs; the blog's ~0.9 µs
  s.graph_node_us = 0.5;       // [GRAPH] 3.4 - 2.9 µs
}

std::vector<GpuSpec> make_specs() {
  GpuSpec h100 = hopper("h100-sxm", {"h100"}, "NVIDIA H100 SXM5 80 GB (Hopper, sm_90, HBM3)", 3.35, 80);
  GpuSpec h200 = hopper("h200", {"h200-sxm"}, "NVIDIA H200 SXM 141 GB (Hopper, sm_90, HBM3e)", 4.8, 141);

  GpuSpec a100{};
  a100.name = "a100-sxm";
  a100.aliases = {"a100"};
  a100.description = "NVIDIA A100 SXM4 80 GB (Ampere, sm_80, HBM2e)";
  a100.compute_capability = 80;
  a100.sms = 108;                 // [DS]
  a100.boost_clock_ghz = 1.41;    // [DS] the peaks all assume 1410 MHz
  a100.tensor_clock_ghz = 1.41;
  a100.tensor_fp64 = {128, true};   // 19.5 TFLOP/s [DS]
  a100.tensor_tf32 = {1024, true};  // 156 [DS]
  a100.tensor_bf16 = {2048, true};  // 312 dense [DS]
  a100.tensor_fp8 = {0, true};      // no FP8 tensor cores on sm_80
  a100.tensor_int8 = {4096, true};  // 624 TOP/s dense [DS]
  a100.cuda_fp32 = {128, true};     // 19.5 [DS]
  a100.cuda_fp16x2 = {512, true};   // 78 (FP16 non-tensor) [DS]
  a100.cuda_fp64 = {64, true};      // 9.7 [DS]
  a100.sfu_per_sm_per_clock = 16;   // [CCG]
  a100.hbm_tbps = 2.039;            // [DS] 80 GB SXM4
  a100.hbm_gb = 80;
  a100.l2_mb = 40;                  // [DS]
  a100.l2_tbps = 7.219;             // [L2]
  a100.sm = sim::kSm80Limits;
  a100.nvlink_gbps = 300;          // [NVL] 600 GB/s both ways
  a100.nvlink_sharp = false;       // NVSwitch 2 has no SHARP
  a100.dram_efficiency = 0.88;     // [A100BW]
  a100.l2_efficiency = 0.75;       // as Hopper: an estimate
  a100.gemm_efficiency = 0.86;     // [CAL] MAMF A100 SXM rows (271.2, 267.9 TFLOP/s)
  a100.fp8_gemm_factor = 0;        // no FP8
  // FlashAttention-2's abstract: 50-73% of A100's peak in the forward pass; 0.82 reproduces 73%
  // at head dim 128 with the softmax's MUFU cost of gpu_model.cpp (an estimate, no row checks it).
  a100.mma_sync_efficiency = 0.82;
  a100.nvlink_ring_efficiency = 0.816;  // as NVLink 4's ring [NCCL]; 245 GB/s busbw
  a100.nvlink_sharp_efficiency = 0;

  std::vector<GpuSpec> specs{h100, h200, a100};
  for (GpuSpec& s : specs) common_launch_costs(s);
  return specs;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

const char* compute_unit_name(ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::tensor_fp64: return "tensor_fp64";
    case ComputeUnit::tensor_tf32: return "tensor_tf32";
    case ComputeUnit::tensor_bf16: return "tensor_bf16";
    case ComputeUnit::tensor_fp8: return "tensor_fp8";
    case ComputeUnit::tensor_int8: return "tensor_int8";
    case ComputeUnit::cuda_fp32: return "cuda_fp32";
    case ComputeUnit::cuda_fp16x2: return "cuda_fp16x2";
    case ComputeUnit::cuda_fp64: return "cuda_fp64";
    case ComputeUnit::none: return "none";
  }
  return "none";
}

double GpuSpec::tensor_flops_per_sm_per_clock(ComputeUnit unit) const {
  switch (unit) {
    case ComputeUnit::tensor_fp64: return tensor_fp64.per_sm_per_clock;
    case ComputeUnit::tensor_tf32: return tensor_tf32.per_sm_per_clock;
    case ComputeUnit::tensor_bf16: return tensor_bf16.per_sm_per_clock;
    case ComputeUnit::tensor_fp8: return tensor_fp8.per_sm_per_clock;
    case ComputeUnit::tensor_int8: return tensor_int8.per_sm_per_clock;
    case ComputeUnit::cuda_fp32: return cuda_fp32.per_sm_per_clock;
    case ComputeUnit::cuda_fp16x2: return cuda_fp16x2.per_sm_per_clock;
    case ComputeUnit::cuda_fp64: return cuda_fp64.per_sm_per_clock;
    case ComputeUnit::none: return 0;
  }
  return 0;
}

double GpuSpec::peak_tflops(ComputeUnit unit) const {
  const UnitRate* rate = nullptr;
  switch (unit) {
    case ComputeUnit::tensor_fp64: rate = &tensor_fp64; break;
    case ComputeUnit::tensor_tf32: rate = &tensor_tf32; break;
    case ComputeUnit::tensor_bf16: rate = &tensor_bf16; break;
    case ComputeUnit::tensor_fp8: rate = &tensor_fp8; break;
    case ComputeUnit::tensor_int8: rate = &tensor_int8; break;
    case ComputeUnit::cuda_fp32: rate = &cuda_fp32; break;
    case ComputeUnit::cuda_fp16x2: rate = &cuda_fp16x2; break;
    case ComputeUnit::cuda_fp64: rate = &cuda_fp64; break;
    case ComputeUnit::none: return 0;
  }
  const double clock = rate->at_tensor_clock ? tensor_clock_ghz : boost_clock_ghz;
  return sms * clock * rate->per_sm_per_clock * 1e-3;  // SMs × GHz × FLOP/clk = GFLOP/s / 1e3
}

std::string GpuSpec::names() const {
  std::string text = name;
  for (size_t i = 0; i < aliases.size(); ++i) text += (i == 0 ? " (" : ", ") + std::string(aliases[i]);
  return aliases.empty() ? text : text + ")";
}

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = make_specs();
  return specs;
}

std::string gpu_spec_names() {
  std::string text;
  for (const GpuSpec& spec : gpu_specs()) text += (text.empty() ? "" : ", ") + spec.names();
  return text;
}

const GpuSpec& gpu_spec(const std::string& name) {
  const std::string wanted = lower(name);
  for (const GpuSpec& spec : gpu_specs()) {
    if (wanted == spec.name) return spec;
    for (const char* alias : spec.aliases)
      if (wanted == alias) return spec;
  }
  throw InputError("unknown GPU '" + name + "' (known: " + gpu_spec_names() + ")");
}

}  // namespace blockscope::profiler
