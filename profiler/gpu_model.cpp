#include "profiler/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/error.h"
#include "sim/occupancy.h"

namespace blockscope::profiler::predict {

namespace {

// ---- the model's constants (per-GPU figures live in gpu_specs.cpp) --------------------------

// XLA's GPU cost model overlaps compute and memory: t = c + m - 0.95·min(c, m)
// (kMemoryComputeParallelism, openxla/xla gpu_performance_model_base).
constexpr double kOverlap = 0.95;
// No kernel body finishes faster than this after its launch: the grid's blocks must be
// scheduled, run and retire (an estimate; Nsight Systems shows ~2 µs for near-empty kernels).
constexpr double kKernelFloorUs = 2.0;
// A hand-written kernel's CUDA-core FLOPs reach this fraction of the peak (an estimate: the
// FLOPs of our non-GEMM kernels are far below their bytes' time, so it rarely matters).
constexpr double kCudaCoreEfficiency = 0.7;
// Data the previous kernel left in L2 is read at L2 bandwidth while the working set fits in
// this fraction of it (A100/H100's L2 is two partitions, data may be held in both; "funny L2",
// chipsandcheese 2023); between 1× and 2× of it the hit rate falls linearly to 0.
constexpr double kL2ResidentFraction = 0.5;
// Little's law for a launch of known shape: each resident warp keeps this many bytes in flight
// (two 16-byte loads per lane: a vectorised, unrolled stream) over a loaded DRAM latency of
// kDramLatencyUs (unloaded ~400 ns on H100 per the QuACK post; loaded higher: an estimate).
constexpr double kBytesInFlightPerWarp = 1024;
constexpr double kDramLatencyUs = 0.6;

// GEMM: the CTA tiles the model lets cuBLAS pick from, and each one's efficiency relative to a
// 128 × 256 tile (operand reuse grows with BM·BN/(BM+BN)); fitted [CAL] with the fixed costs.
struct TileChoice {
  int m, n;
  double relative_efficiency;
};
constexpr TileChoice kGemmTiles[] = {{128, 256, 1.0}, {256, 128, 1.0}, {128, 128, 1.0},
                                     {128, 64, 0.7},  {64, 128, 0.7},  {64, 64, 0.6}};
constexpr int kSplitKs[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int64_t kMinSplitKDepth = 256;  // no split leaves a CTA less K than this
// Per tile: the prologue filling the pipeline and the epilogue storing it [CAL].
constexpr double kGemmTileFixedUs = 0.5;
// Per GEMM kernel beyond its launch: the smallest sm_90 GEMMs of XLA's table take 5.8 µs
// (256 × 512 × 256 at 11.5 TFLOP/s); 4 µs + the 1 µs launch reproduces them [CAL].
constexpr double kGemmFixedUs = 4.0;

// Flash attention (FA2-class): per block, its own prologue (Q tile load, O store) costs this
// many key-block iterations; a causal block's diagonal tile costs this many more (masking);
// causal grids lose this fraction to load imbalance; the softmax's exp costs the MUFU time
// of one element per score, of which this fraction is not hidden behind the MMAs [CAL: FA2 in
// the FlashAttention-3 paper, Fig. 5; the fit lands at 160 tensor FLOP-slots per score on H100
// = 0.625 × 4096/16, the tensor rate over the MUFU rate].
constexpr double kFlashBlockFixedIters = 0.25;
constexpr double kFlashDiagonalIters = 1.5;
constexpr double kFlashCausalEfficiency = 0.95;
constexpr double kFlashExposedExp = 0.625;
constexpr double kFlashFixedUs = 4.0;  // as kGemmFixedUs

// NCCL (src/graph/tuning.cc, 2.19+): ring latency = baseLat + steps × hwLat on NVLink; Simple
// 8.4 + 3.4 µs/step, LL 6.6 + 0.6 µs/step; NVLS 25 µs. LL sends 8 bytes per 4 of data.
constexpr double kRingSimpleBaseUs = 8.4, kRingSimpleStepUs = 3.4;
constexpr double kRingLlBaseUs = 6.6, kRingLlStepUs = 0.6, kLlBandwidthFraction = 0.5;
constexpr double kNvlsLatencyUs = 25.0;
// NCCL picks NVLS only for wide groups: "an all-reduce over 4 or fewer accelerators loses
// SHARP altogether" (stas00/ml-engineering network/README.md); 5-7 get part of it (not modelled).
constexpr int kNvlsMinRanks = 5;

double ceil_div(double a, double b) { return std::ceil(a / b); }

double overlap(double compute_us, double memory_us) {
  return compute_us + memory_us - kOverlap * std::min(compute_us, memory_us);
}

std::string bound_of(double compute_us, double memory_us, double body_us, double floor_us) {
  if (body_us < floor_us) return "latency";
  return compute_us >= memory_us ? "compute" : "memory";
}

double launch_cost(const GpuSpec& spec, LaunchMode mode) {
  return mode == LaunchMode::graph ? spec.graph_node_us : spec.launch_overhead_us;
}

// Achievable bandwidth for `bytes` with `working_set` to fit in L2, in bytes per µs.
double memory_time_us(const GpuSpec& spec, double bytes, double working_set) {
  const double dram = spec.hbm_tbps * spec.dram_efficiency * 1e6;  // TB/s = 1e6 bytes per µs
  const double l2 = spec.l2_tbps * spec.l2_efficiency * 1e6;
  const double resident = spec.l2_mb * 1e6 * kL2ResidentFraction;
  const double hit = working_set <= resident ? 1.0 : std::max(0.0, (2 * resident - working_set) / resident);
  return bytes * (hit / l2 + (1 - hit) / dram);
}

}  // namespace

const char* limiter_name(Limiter limiter) {
  switch (limiter) {
    case Limiter::registers: return "registers";
    case Limiter::shared_mem: return "shared_mem";
    case Limiter::warps: return "warps";
    case Limiter::blocks: return "blocks";
  }
  return "blocks";
}

double element_bytes(ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::tensor_fp8:
    case ComputeUnit::tensor_int8: return 1;
    case ComputeUnit::tensor_bf16:
    case ComputeUnit::cuda_fp16x2: return 2;
    case ComputeUnit::tensor_fp64:
    case ComputeUnit::cuda_fp64: return 8;
    default: return 4;
  }
}

Occupancy occupancy(const GpuSpec& spec, int threads_per_block, int registers_per_thread, int smem_bytes) {
  const sim::SmLimits& sm = spec.sm;
  BS_CHECK_INPUT(threads_per_block >= 1 && threads_per_block <= sm.max_threads_per_block, "occupancy: ",
                 threads_per_block, " threads per block (1 to ", sm.max_threads_per_block, " on ", spec.name, ")");
  BS_CHECK_INPUT(registers_per_thread <= sm.max_registers_per_thread, "occupancy: ", registers_per_thread,
                 " registers per thread (at most ", sm.max_registers_per_thread, ")");
  BS_CHECK_INPUT(smem_bytes >= 0 && smem_bytes <= sm.max_smem_per_block, "occupancy: ", smem_bytes,
                 " bytes of shared memory per block (at most ", sm.max_smem_per_block, " on ", spec.name, ")");
  // The occupancy calculator's rules live once, in sim/occupancy.h (checked there against the
  // CUDA toolkit's cuda_occupancy.h).
  const sim::Occupancy rules = sim::theoretical_occupancy(sm, threads_per_block, registers_per_thread, smem_bytes);
  Occupancy o;
  o.warps_per_block = rules.warps_per_block;
  o.limit_warps = rules.limit_warps;
  o.limit_blocks = rules.limit_blocks;
  o.limit_shared_mem = rules.limit_shared_mem;
  o.limit_registers = rules.registers_known ? rules.limit_registers : -1;
  if (!rules.registers_known) o.note = "registers unknown: their limit is not applied";
  o.blocks_per_sm = rules.blocks_per_sm;
  const std::string limiter = rules.limiter;
  o.limiter = limiter == "registers"    ? Limiter::registers
              : limiter == "shared_mem" ? Limiter::shared_mem
              : limiter == "warps"      ? Limiter::warps
                                        : Limiter::blocks;
  o.active_warps = rules.active_warps;
  o.theoretical = rules.occupancy;
  return o;
}

Waves waves(const GpuSpec& spec, int64_t blocks, int blocks_per_sm) {
  Waves w;
  if (blocks <= 0 || blocks_per_sm <= 0) return w;
  w.blocks_per_wave = static_cast<int64_t>(blocks_per_sm) * spec.sms;
  w.fractional = static_cast<double>(blocks) / static_cast<double>(w.blocks_per_wave);
  w.whole = static_cast<int64_t>(std::ceil(w.fractional - 1e-12));
  // Blocks resident on one SM share its throughput, so the busiest SM holds ceil(blocks / SMs)
  // blocks' work against blocks / SMs on average: 1.1 waves of one block per SM cost 2 (1.82×),
  // and fewer blocks than SMs leave SMs idle.
  const double per_sm = static_cast<double>(blocks) / spec.sms;
  w.tail_factor = std::ceil(per_sm - 1e-12) / per_sm;
  return w;
}

KernelPrediction predict_kernel(const GpuSpec& spec, const KernelWork& work) {
  KernelPrediction p;
  if (work.flops > 0 && work.unit != ComputeUnit::none) {
    const double peak = spec.peak_tflops(work.unit);
    BS_CHECK_INPUT(peak > 0, spec.name, " has no ", compute_unit_name(work.unit), " units");
    const bool tensor = work.unit <= ComputeUnit::tensor_int8;
    const double efficiency = tensor ? spec.mma_sync_efficiency : kCudaCoreEfficiency;
    p.compute_us = work.flops / (peak * 1e6 * efficiency);  // TFLOP/s = 1e6 FLOP per µs
  }
  const double working_set = work.working_set_bytes >= 0 ? work.working_set_bytes : work.dram_bytes;
  p.memory_us = memory_time_us(spec, work.dram_bytes, working_set);
  if (work.launch) {
    const LaunchShape& shape = *work.launch;
    BS_CHECK_INPUT(shape.grid >= 1, "predict_kernel: a launch of ", shape.grid, " blocks");
    const Occupancy occ = occupancy(spec, shape.block, shape.registers, shape.smem_bytes);
    p.occupancy = occ;
    BS_CHECK_INPUT(occ.blocks_per_sm > 0, "predict_kernel: the block does not fit on an SM of ", spec.name);
    const Waves w = waves(spec, shape.grid, occ.blocks_per_sm);
    p.waves = w.fractional;
    p.compute_us *= w.tail_factor;
    // Little's law: the resident warps can keep only so many bytes in flight.
    const double resident_blocks = std::min<double>(static_cast<double>(shape.grid), static_cast<double>(w.blocks_per_wave));
    const double in_flight = resident_blocks * occ.warps_per_block * kBytesInFlightPerWarp;
    p.memory_us = std::max(p.memory_us, work.dram_bytes / (in_flight / kDramLatencyUs));
  }
  p.launch_us = launch_cost(spec, work.mode);
  const double body = overlap(p.compute_us, p.memory_us);
  p.bound = bound_of(p.compute_us, p.memory_us, body, kKernelFloorUs);
  p.predicted_us = p.launch_us + std::max(body, kKernelFloorUs);
  return p;
}

GemmPrediction predict_gemm(const GpuSpec& spec, int64_t m, int64_t n, int64_t k, int64_t batch, ComputeUnit dtype,
                            Epilogue epilogue, LaunchMode mode) {
  BS_CHECK_INPUT(m >= 1 && n >= 1 && k >= 1 && batch >= 1, "predict_gemm: sizes must be positive (m ", m, ", n ", n,
                 ", k ", k, ", batch ", batch, ")");
  const double peak = spec.peak_tflops(dtype);
  BS_CHECK_INPUT(peak > 0, spec.name, " has no ", compute_unit_name(dtype), " units");
  double efficiency = spec.gemm_efficiency;
  if (dtype == ComputeUnit::tensor_fp8) efficiency *= spec.fp8_gemm_factor;
  const double per_sm = peak * 1e6 / spec.sms;  // FLOP per µs of one SM
  // A and B once, D written (FP8 GEMMs write bf16); C read for beta = 1, a bias row for bias.
  const double in_bytes = element_bytes(dtype);
  const double out_bytes = dtype == ComputeUnit::tensor_fp8 ? 2 : in_bytes;
  const double b = static_cast<double>(batch), dm = static_cast<double>(m), dn = static_cast<double>(n),
               dk = static_cast<double>(k);
  double bytes = b * (dm * dk + dk * dn) * in_bytes + b * dm * dn * out_bytes;
  if (epilogue == Epilogue::accumulate) bytes += b * dm * dn * out_bytes;
  if (epilogue == Epilogue::bias || epilogue == Epilogue::bias_gelu) bytes += dn * out_bytes;

  GemmPrediction best;
  double best_total = std::numeric_limits<double>::infinity();
  for (const TileChoice& tile : kGemmTiles) {
    const double tiles = b * ceil_div(dm, tile.m) * ceil_div(dn, tile.n);
    for (int split : kSplitKs) {
      if (split > 1 && k / split < kMinSplitKDepth) continue;
      const double ctas = tiles * split;
      const double wave_count = std::ceil(ctas / spec.sms);  // one CTA per SM: cuBLAS's large tiles
      const double tile_us = kGemmTileFixedUs + 2.0 * tile.m * tile.n * (dk / split) / (per_sm * efficiency * tile.relative_efficiency);
      const double compute = wave_count * tile_us;
      // Split-K writes f32 partial tiles and reads them back to reduce.
      const double partials = split > 1 ? b * dm * dn * 4.0 * split * 2.0 : 0.0;
      const double memory = memory_time_us(spec, bytes + partials, std::numeric_limits<double>::infinity());
      const double total = overlap(compute, memory) + kGemmFixedUs;
      if (total < best_total) {
        best_total = total;
        best.tile_m = tile.m;
        best.tile_n = tile.n;
        best.split_k = split;
        best.ctas = static_cast<int64_t>(ctas);
        best.compute_us = compute;
        best.memory_us = memory;
        best.waves = ctas / spec.sms;
      }
    }
  }
  best.tile = std::to_string(best.tile_m) + "x" + std::to_string(best.tile_n) +
              (best.split_k > 1 ? " split-k " + std::to_string(best.split_k) : "");
  best.launch_us = launch_cost(spec, mode);
  const double body = overlap(best.compute_us, best.memory_us);
  best.bound = bound_of(best.compute_us, best.memory_us, body, kGemmFixedUs);
  best.predicted_us = best.launch_us + body + kGemmFixedUs;
  return best;
}

double attention_flops(const AttentionShape& s) {
  const double full = 4.0 * s.batch * s.heads * static_cast<double>(s.seq_q) * s.seq_k * s.head_dim;
  return s.causal ? full / 2 : full;
}

KernelPrediction predict_attention_flash(const GpuSpec& spec, const AttentionShape& s, LaunchMode mode) {
  BS_CHECK_INPUT(s.batch >= 1 && s.heads >= 1 && s.seq_q >= 1 && s.seq_k >= 1 && s.head_dim >= 1 && s.tile_q >= 1 &&
                     s.tile_k >= 1,
                 "predict_attention_flash: sizes must be positive");
  const double tensor_per_clock = spec.tensor_flops_per_sm_per_clock(ComputeUnit::tensor_bf16);
  const double clock_per_us = spec.tensor_clock_ghz * 1e3;
  // One key-block iteration of one block, on one SM: the two MMAs (Q·Kᵀ and P·V, 4·tq·tk·D
  // FLOPs) at the mma.sync rate, plus the scores' exp on the MUFU where it is not hidden.
  const double exp_slots = kFlashExposedExp * tensor_per_clock / spec.sfu_per_sm_per_clock;
  const double iteration_us = (4.0 * s.tile_q * s.tile_k * s.head_dim / (tensor_per_clock * spec.mma_sync_efficiency) +
                               static_cast<double>(s.tile_q) * s.tile_k * exp_slots / tensor_per_clock) /
                              clock_per_us;
  const int64_t q_blocks = (s.seq_q + s.tile_q - 1) / s.tile_q;
  const double heads = static_cast<double>(s.batch) * s.heads;
  const double blocks = heads * q_blocks;
  KernelPrediction p;
  if (!s.causal) {
    const double iterations = std::ceil(static_cast<double>(s.seq_k) / s.tile_k) + kFlashBlockFixedIters;
    p.compute_us = std::ceil(blocks / spec.sms) * iterations * iteration_us;
  } else {
    // Query block i sees the keys up to its last row (aligned to the end when Sk > Sq).
    double work = 0, longest = 0;
    for (int64_t i = 0; i < q_blocks; ++i) {
      const int64_t last_row = std::min(s.seq_q, (i + 1) * s.tile_q);
      const int64_t keys = std::min(s.seq_k, s.seq_k - s.seq_q + last_row);
      const double iterations = std::ceil(static_cast<double>(std::max<int64_t>(keys, 0)) / s.tile_k) +
                                kFlashBlockFixedIters + kFlashDiagonalIters;
      work += iterations * iteration_us * heads;
      longest = std::max(longest, iterations * iteration_us);
    }
    p.compute_us = std::max(work / spec.sms, longest) / kFlashCausalEfficiency;
  }
  const double kv_heads = s.kv_heads > 0 ? static_cast<double>(s.kv_heads) : static_cast<double>(s.heads);
  const double bytes = 2.0 * s.batch * (2.0 * s.heads * s.seq_q + 2.0 * kv_heads * s.seq_k) * s.head_dim;  // Q, O, K, V
  p.memory_us = memory_time_us(spec, bytes, bytes);
  p.waves = blocks / spec.sms;
  p.launch_us = launch_cost(spec, mode);
  const double body = overlap(p.compute_us, p.memory_us);
  p.bound = bound_of(p.compute_us, p.memory_us, body, kFlashFixedUs);
  p.predicted_us = p.launch_us + body + kFlashFixedUs;
  return p;
}

double bus_factor(Collective op, int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return op == Collective::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
}

CollectivePrediction predict_collective(const GpuSpec& spec, Collective op, double bytes, int ranks,
                                        CollectiveAlgorithm algorithm) {
  BS_CHECK_INPUT(ranks >= 1 && bytes >= 0, "predict_collective: ", ranks, " ranks, ", bytes, " bytes");
  CollectivePrediction p;
  p.launch_us = spec.launch_overhead_us;
  if (ranks == 1 || bytes == 0) {  // NCCL returns at once (or copies in place)
    p.algorithm = "none";
    p.bound = "latency";
    p.predicted_us = p.launch_us;
    return p;
  }
  const double factor = bus_factor(op, ranks);
  const double steps = op == Collective::all_reduce ? 2.0 * (ranks - 1) : ranks - 1.0;
  const double ring_bw = spec.nvlink_gbps * spec.nvlink_ring_efficiency * 1e3;  // GB/s = 1e3 bytes per µs
  struct Option {
    const char* algorithm;
    const char* protocol;
    double latency_us, transfer_us;
  };
  std::vector<Option> options;
  if (algorithm != CollectiveAlgorithm::nvls) {
    options.push_back({"ring", "Simple", kRingSimpleBaseUs + steps * kRingSimpleStepUs, bytes * factor / ring_bw});
    options.push_back({"ring", "LL", kRingLlBaseUs + steps * kRingLlStepUs, bytes * factor / (ring_bw * kLlBandwidthFraction)});
  }
  const bool nvls = op == Collective::all_reduce && spec.nvlink_sharp && ranks >= kNvlsMinRanks;
  if (algorithm == CollectiveAlgorithm::nvls) BS_CHECK_INPUT(nvls, "NVLS needs an all-reduce over ", kNvlsMinRanks,
                                                             "+ GPUs of an NVSwitch with SHARP (", spec.name, ")");
  if (nvls && algorithm != CollectiveAlgorithm::ring) {
    // The switch reduces: each GPU sends its buffer once and receives the sum once.
    options.push_back({"nvls", "Simple", kNvlsLatencyUs, bytes / (spec.nvlink_gbps * spec.nvlink_sharp_efficiency * 1e3)});
  }
  const Option* best = &options.front();
  for (const Option& o : options)
    if (o.latency_us + o.transfer_us < best->latency_us + best->transfer_us) best = &o;
  p.algorithm = best->algorithm;
  p.protocol = best->protocol;
  p.memory_us = best->transfer_us;
  p.launch_us = best->latency_us;  // NCCL's base latency includes its kernel's launch
  p.predicted_us = best->latency_us + best->transfer_us;
  p.bound = best->transfer_us >= best->latency_us ? "memory" : "latency";
  p.algbw_gbps = bytes / p.predicted_us * 1e-3;
  p.busbw_gbps = p.algbw_gbps * factor;
  return p;
}

CollectivePrediction predict_all_reduce(const GpuSpec& spec, double bytes, int ranks) {
  return predict_collective(spec, Collective::all_reduce, bytes, ranks);
}

}  // namespace blockscope::profiler::predict
