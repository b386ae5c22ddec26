// The GPU performance model (profiler/gpu_model.h): every formula on hand-computed cases, the
// GPU table's figures, and the model held to the published measurements of
// bench/validation/published_gpu.csv — with planted wrong constants that must fail it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/gpu_model.h"
#include "profiler/gpu_specs.h"
#include "profiler/gpu_validation.h"
#include "runtime/error.h"
#include "test/support/test_support.h"

namespace {

using namespace blockscope::profiler;
using namespace blockscope::profiler::predict;

const GpuSpec& h100() { return gpu_spec("h100-sxm"); }
const GpuSpec& a100() { return gpu_spec("a100-sxm"); }

std::string published_csv() { return std::string(blockscope::testing::source_dir()) + "/bench/validation/published_gpu.csv"; }

// ---- the table -------------------------------------------------------------------------------

TEST(GpuModelSpecs, PeaksReproduceTheDatasheets) {
  // SMs × clock × per-SM rate: H100 bf16 132 × 1.83 GHz × 4096 = 989.4 TFLOP/s.
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::tensor_bf16), 989.4, 0.5);
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::tensor_fp8), 1978.9, 1.0);
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::tensor_tf32), 494.7, 0.3);
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::tensor_fp64), 66.9, 0.1);  // at the 1.98 GHz boost
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::cuda_fp32), 66.9, 0.1);
  EXPECT_NEAR(h100().peak_tflops(ComputeUnit::cuda_fp16x2), 133.8, 0.1);
  EXPECT_NEAR(a100().peak_tflops(ComputeUnit::tensor_bf16), 312.0, 0.5);  // 108 × 1.41 × 2048
  EXPECT_NEAR(a100().peak_tflops(ComputeUnit::tensor_tf32), 156.0, 0.3);
  EXPECT_NEAR(a100().peak_tflops(ComputeUnit::cuda_fp32), 19.5, 0.1);
  EXPECT_EQ(a100().peak_tflops(ComputeUnit::tensor_fp8), 0.0);  // no FP8 on sm_80
  const GpuSpec& h200 = gpu_spec("h200");
  EXPECT_EQ(h200.sms, 132);
  EXPECT_DOUBLE_EQ(h200.hbm_tbps, 4.8);
  EXPECT_DOUBLE_EQ(h200.hbm_gb, 141);
  EXPECT_NEAR(h200.peak_tflops(ComputeUnit::tensor_bf16), 989.4, 0.5);  // the same compute as H100
  EXPECT_EQ(h100().sm.smem_per_sm, 228 * 1024);
  EXPECT_EQ(a100().sm.max_smem_per_block, 163 * 1024);
}

TEST(GpuModelSpecs, NamesAndAliasesResolve) {
  EXPECT_STREQ(gpu_spec("h100").name, "h100-sxm");
  EXPECT_STREQ(gpu_spec("H100-SXM").name, "h100-sxm");
  EXPECT_STREQ(gpu_spec("a100").name, "a100-sxm");
  EXPECT_STREQ(gpu_spec("h200").name, "h200");
}

TEST(GpuModelSpecs, UnknownNameIsAnInputErrorNamingTheValidOnes) {
  try {
    gpu_spec("nope");
    FAIL() << "no error";
  } catch (const blockscope::Error& error) {
    EXPECT_EQ(error.kind(), blockscope::ErrorKind::invalid_input);
    const std::string message = error.message();
    for (const char* name : {"'nope'", "h100-sxm", "h100", "h200", "a100-sxm", "a100"})
      EXPECT_NE(message.find(name), std::string::npos) << name << " not in: " << message;
  }
}

// ---- occupancy ------------------------------------------------------------------------------

TEST(GpuModelOccupancy, RegistersLimit) {
  // 128 threads × 255 registers: 8160 registers per warp, rounded up to 256 → 8192; 65536 / 8192
  // = 8 warps (a multiple of 4) → 2 blocks of 4 warps: 8 of 64 warps, "registers".
  const Occupancy o = occupancy(h100(), 128, 255, 0);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.active_warps, 8);
  EXPECT_DOUBLE_EQ(o.theoretical, 8.0 / 64);
  EXPECT_EQ(o.limiter, Limiter::registers);
  EXPECT_STREQ(limiter_name(o.limiter), "registers");
  EXPECT_EQ(o.limit_registers, 2);
  EXPECT_EQ(o.limit_shared_mem, 228);  // (0 + 1 KiB reserved) per block: 233472 / 1024
  EXPECT_EQ(o.limit_warps, 16);        // 64 / 4
  EXPECT_EQ(o.limit_blocks, 32);
}

TEST(GpuModelOccupancy, SharedMemoryLimitDiffersBetweenH100AndA100) {
  // 256 threads × 32 registers, 48 KiB: (49152 + 1024) rounded to 128 = 50176 bytes per block;
  // H100 233472 / 50176 = 4 blocks (32 warps, 50%); registers 1024 per warp → 64 warps → 8 blocks.
  const Occupancy h = occupancy(h100(), 256, 32, 48 * 1024);
  EXPECT_EQ(h.blocks_per_sm, 4);
  EXPECT_EQ(h.limiter, Limiter::shared_mem);
  EXPECT_EQ(h.limit_registers, 8);
  EXPECT_EQ(h.limit_warps, 8);
  EXPECT_DOUBLE_EQ(h.theoretical, 0.5);
  // A100: 167936 / 50176 = 3 blocks, 24 warps = 37.5%.
  const Occupancy a = occupancy(a100(), 256, 32, 48 * 1024);
  EXPECT_EQ(a.blocks_per_sm, 3);
  EXPECT_EQ(a.limiter, Limiter::shared_mem);
  EXPECT_DOUBLE_EQ(a.theoretical, 24.0 / 64);
}

TEST(GpuModelOccupancy, WarpAndBlockLimitsAndRounding) {
  // 1024 threads × 64 registers: 2048 per warp → 32 warps → 1 block; warps also allow 2.
  Occupancy o = occupancy(h100(), 1024, 64, 0);
  EXPECT_EQ(o.blocks_per_sm, 1);
  EXPECT_EQ(o.limiter, Limiter::registers);
  EXPECT_DOUBLE_EQ(o.theoretical, 0.5);
  // 96 threads (3 warps) × 40 registers: 1280 per warp → 51 warps → 48 (groups of 4) → 16 blocks
  // = 48 warps (75%); warps alone would allow 21.
  o = occupancy(h100(), 96, 40, 0);
  EXPECT_EQ(o.blocks_per_sm, 16);
  EXPECT_EQ(o.limit_warps, 21);
  EXPECT_DOUBLE_EQ(o.theoretical, 0.75);
  // 32 threads: 64 warps would allow 64 blocks, the SM holds 32: "blocks", 50%.
  o = occupancy(h100(), 32, 16, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limiter, Limiter::blocks);
  EXPECT_DOUBLE_EQ(o.theoretical, 0.5);
  // Unknown registers: not applied, and said so; 64 threads → 32 blocks by warps and by blocks
  // (a tie goes to warps), 100%.
  o = occupancy(h100(), 64, -1, 0);
  EXPECT_EQ(o.limit_registers, -1);
  EXPECT_FALSE(o.note.empty());
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limiter, Limiter::warps);
  EXPECT_DOUBLE_EQ(o.theoretical, 1.0);
}

TEST(GpuModelOccupancy, LaunchesTheGpuRefusesAreInputErrors) {
  EXPECT_THROW(occupancy(h100(), 2048, 32, 0), blockscope::Error);
  EXPECT_THROW(occupancy(h100(), 0, 32, 0), blockscope::Error);
  EXPECT_THROW(occupancy(h100(), 128, 256, 0), blockscope::Error);
  EXPECT_THROW(occupancy(h100(), 128, 32, 228 * 1024), blockscope::Error);  // above 227 KiB opt-in
  EXPECT_NO_THROW(occupancy(h100(), 128, 32, 227 * 1024));
  EXPECT_THROW(occupancy(a100(), 128, 32, 164 * 1024), blockscope::Error);  // above 163 KiB
}

TEST(GpuModelOccupancy, Waves) {
  // One block per SM on 132 SMs: 264 blocks are 2 whole waves; 145 are 1.098 waves costing 2
  // (tail 2 / 1.098 = 1.82); 66 blocks leave half the SMs idle (tail 2).
  Waves w = waves(h100(), 264, 1);
  EXPECT_EQ(w.blocks_per_wave, 132);
  EXPECT_DOUBLE_EQ(w.fractional, 2.0);
  EXPECT_EQ(w.whole, 2);
  EXPECT_DOUBLE_EQ(w.tail_factor, 1.0);
  w = waves(h100(), 145, 1);
  EXPECT_EQ(w.whole, 2);
  EXPECT_NEAR(w.fractional, 145.0 / 132, 1e-12);
  EXPECT_NEAR(w.tail_factor, 2.0 / (145.0 / 132), 1e-12);
  w = waves(h100(), 66, 1);
  EXPECT_EQ(w.whole, 1);
  EXPECT_DOUBLE_EQ(w.tail_factor, 2.0);
  // 4 blocks per SM: 1056 blocks = 2 waves of 528; blocks spread 8 per SM, no tail.
  w = waves(h100(), 1056, 4);
  EXPECT_EQ(w.blocks_per_wave, 528);
  EXPECT_EQ(w.whole, 2);
  EXPECT_DOUBLE_EQ(w.tail_factor, 1.0);
}

// ---- kernels --------------------------------------------------------------------------------

TEST(GpuModelKernel, MemoryBoundStreamFromDram) {
  // 1 GB through DRAM (far beyond 25 MB of L2): 1e9 / (3.35e12 × 0.90) = 331.675 µs, + 1 µs launch.
  KernelWork work;
  work.dram_bytes = 1e9;
  const KernelPrediction p = predict_kernel(h100(), work);
  EXPECT_NEAR(p.memory_us, 1e9 / (3.35e12 * 0.90) * 1e6, 1e-6);
  EXPECT_DOUBLE_EQ(p.compute_us, 0.0);
  EXPECT_DOUBLE_EQ(p.launch_us, 1.0);
  EXPECT_NEAR(p.predicted_us, 331.675 + 1.0, 1e-3);
  EXPECT_EQ(p.bound, "memory");
  // H200's 4.8 TB/s: the same stream in 231.48 µs + 1.
  EXPECT_NEAR(predict_kernel(gpu_spec("h200"), work).predicted_us, 1e9 / (4.8e12 * 0.90) * 1e6 + 1, 1e-3);
}

TEST(GpuModelKernel, SmallKernelHitsTheFloorAndLaunchCostsDifferEagerVsGraph) {
  // 10 MB resident in L2 (under half its 50 MB): 1e7 / (8.986e12 × 0.75) = 1.48 µs < the 2 µs floor.
  KernelWork work;
  work.dram_bytes = 1e7;
  KernelPrediction p = predict_kernel(h100(), work);
  EXPECT_NEAR(p.memory_us, 1e7 / (8.986e12 * 0.75) * 1e6, 1e-6);
  EXPECT_EQ(p.bound, "latency");
  EXPECT_DOUBLE_EQ(p.predicted_us, 1.0 + 2.0);  // eager: 1 µs launch + 2 µs floor
  work.mode = LaunchMode::graph;
  p = predict_kernel(h100(), work);
  EXPECT_DOUBLE_EQ(p.launch_us, 0.5);
  EXPECT_DOUBLE_EQ(p.predicted_us, 0.5 + 2.0);  // a graph node: 0.5 µs
}

TEST(GpuModelKernel, ComputeAndMemoryOverlapAndTheTailWave) {
  // 1e12 FLOPs on the CUDA cores (66.9 TFLOP/s at 70%): 21355 µs; 1 GB: 331.675 µs;
  // t = c + m - 0.95·min(c, m).
  KernelWork work;
  work.flops = 1e12;
  work.unit = ComputeUnit::cuda_fp32;
  work.dram_bytes = 1e9;
  KernelPrediction p = predict_kernel(h100(), work);
  const double c = 1e12 / (h100().peak_tflops(ComputeUnit::cuda_fp32) * 1e6 * 0.7), m = 1e9 / (3.35e12 * 0.9) * 1e6;
  EXPECT_NEAR(p.compute_us, c, 1e-6);
  EXPECT_NEAR(p.predicted_us, 1 + c + m - 0.95 * m, 1e-6);
  EXPECT_EQ(p.bound, "compute");
  // The same on 145 blocks of 256 threads, one per SM (a block using all the shared memory):
  // 1.098 waves cost 2 → compute × 1.82.
  work.launch = LaunchShape{145, 256, 32, 200 * 1024};
  p = predict_kernel(h100(), work);
  ASSERT_TRUE(p.occupancy);
  EXPECT_EQ(p.occupancy->blocks_per_sm, 1);
  EXPECT_NEAR(p.waves, 145.0 / 132, 1e-12);
  EXPECT_NEAR(p.compute_us, c * 2 / (145.0 / 132), 1e-6);
  // An FP8 tensor kernel on an A100: no such units.
  work.unit = ComputeUnit::tensor_fp8;
  EXPECT_THROW(predict_kernel(a100(), work), blockscope::Error);
}

TEST(GpuModelKernel, FewWarpsCannotSaturateDram) {
  // Little's law: 132 blocks of one warp keep 132 × 1 KiB in flight over 0.6 µs = 225 GB/s,
  // far below 3 TB/s: 1 GB takes 1e9 / 225.3e3 B/µs = 4439 µs.
  KernelWork work;
  work.dram_bytes = 1e9;
  work.launch = LaunchShape{132, 32, 32, 0};
  const KernelPrediction p = predict_kernel(h100(), work);
  EXPECT_NEAR(p.memory_us, 1e9 / (132 * 1024 / 0.6), 1e-3);
}

TEST(GpuModelGemm, ComputeBoundGemmByHand) {
  // 8192³ bf16 on H100: 128 × 256 tiles, 64 × 32 = 2048 CTAs = 15.5 waves → 16. A tile:
  // 0.5 µs + 2·128·256·8192 FLOP / (989.4e6/132 FLOP/µs per SM × 0.86) = 0.5 + 83.28 µs.
  // Memory: A, B, D = 3 × 8192² × 2 bytes / 3.015e6 B/µs = 133.5 µs; overlapped, + 4 µs fixed
  // + 1 µs launch.
  const GemmPrediction g = predict_gemm(h100(), 8192, 8192, 8192, 1, ComputeUnit::tensor_bf16);
  const double per_sm = h100().peak_tflops(ComputeUnit::tensor_bf16) * 1e6 / 132;
  const double tile = 0.5 + 2.0 * 128 * 256 * 8192 / (per_sm * 0.86);
  const double c = 16 * tile, m = 3.0 * 8192 * 8192 * 2 / (3.35e12 * 0.9) * 1e6;
  EXPECT_EQ(g.tile, "128x256");
  EXPECT_EQ(g.ctas, 2048);
  EXPECT_NEAR(g.waves, 2048.0 / 132, 1e-9);
  EXPECT_NEAR(g.compute_us, c, 1e-6);
  EXPECT_NEAR(g.memory_us, m, 1e-6);
  EXPECT_NEAR(g.predicted_us, c + m - 0.95 * m + 4 + 1, 1e-6);
  EXPECT_EQ(g.bound, "compute");
  // ≈ 813 TFLOP/s: cuBLAS measured 797.8 (pranjalssh/fast.cu).
  EXPECT_NEAR(2.0 * 8192 * 8192 * 8192 / g.predicted_us * 1e-6, 813, 2);
}

TEST(GpuModelGemm, SmallGemmsPickSmallTilesOrSplitK) {
  // 256 × 256 × 4096: 64 × 64 tiles give only 16 CTAs; splitting K over 6 runs 96 CTAs.
  const GemmPrediction g = predict_gemm(h100(), 256, 256, 4096, 1, ComputeUnit::tensor_bf16);
  EXPECT_EQ(g.tile_m, 64);
  EXPECT_GT(g.split_k, 1);
  // A 256 × 512 × 256 GEMM is the fixed cost: ~6 µs (XLA's table: 5.86 µs).
  EXPECT_NEAR(predict_gemm(h100(), 256, 512, 256, 1, ComputeUnit::tensor_bf16).predicted_us, 6.05, 0.1);
  // The epilogue's C read (beta = 1) adds bytes; a graph launch costs less.
  const GemmPrediction plain = predict_gemm(h100(), 4096, 4096, 256, 1, ComputeUnit::tensor_bf16);
  EXPECT_GT(predict_gemm(h100(), 4096, 4096, 256, 1, ComputeUnit::tensor_bf16, Epilogue::accumulate).memory_us,
            plain.memory_us);
  EXPECT_DOUBLE_EQ(
      plain.predicted_us -
          predict_gemm(h100(), 4096, 4096, 256, 1, ComputeUnit::tensor_bf16, Epilogue::none, LaunchMode::graph).predicted_us,
      0.5);
}

TEST(GpuModelAttention, OneWaveByHand) {
  // B·H = 132 heads of 64 queries × 64 keys, D 64, 64 × 64 tiles: 132 blocks, one iteration
  // (+0.25 for the block's own prologue). An iteration: 4·64·64·64 FLOP at 4096 × 0.42 per clock
  // plus 64·64 scores × 160 slots at 4096 per clock, over 1830 clocks per µs = 0.4205 µs.
  AttentionShape s;
  s.batch = 1;
  s.heads = 132;
  s.seq_q = s.seq_k = 64;
  s.head_dim = 64;
  const KernelPrediction p = predict_attention_flash(h100(), s);
  const double iteration = (4.0 * 64 * 64 * 64 / (4096 * 0.42) + 64.0 * 64 * 0.625 * 4096 / 16 / 4096) / 1830;
  EXPECT_NEAR(p.compute_us, 1.25 * iteration, 1e-9);
  const double bytes = 2.0 * (2 * 132 * 64 + 2 * 132 * 64) * 64;  // Q, O, K, V in bf16: L2-resident
  EXPECT_NEAR(p.memory_us, bytes / (8.986e12 * 0.75) * 1e6, 1e-9);
  EXPECT_NEAR(p.predicted_us, 1 + 4 + p.compute_us + p.memory_us - 0.95 * std::min(p.compute_us, p.memory_us), 1e-9);
  EXPECT_DOUBLE_EQ(attention_flops(s), 4.0 * 132 * 64 * 64 * 64);
  s.causal = true;
  EXPECT_DOUBLE_EQ(attention_flops(s), 2.0 * 132 * 64 * 64 * 64);
}

TEST(GpuModelCollective, AllReduceRingAndNvlsByHand) {
  // 8 H100s, 1 GiB: ring Simple = 8.4 + 14 × 3.4 µs + 1 GiB × 1.75 / (450 × 0.816 GB/s) =
  // 56 + 5117.2 µs; NVLS = 25 + 1 GiB / (450 × 0.612) = 25 + 3898.8 µs: NVLS.
  const double gib = 1073741824.0;
  CollectivePrediction p = predict_all_reduce(h100(), gib, 8);
  EXPECT_EQ(p.algorithm, "nvls");
  EXPECT_NEAR(p.predicted_us, 25 + gib / (450 * 0.612 * 1e3), 1e-6);
  EXPECT_NEAR(p.busbw_gbps, gib / p.predicted_us * 1e-3 * 1.75, 1e-9);
  p = predict_collective(h100(), Collective::all_reduce, gib, 8, CollectiveAlgorithm::ring);
  EXPECT_EQ(p.algorithm, "ring");
  EXPECT_EQ(p.protocol, "Simple");
  EXPECT_NEAR(p.predicted_us, 8.4 + 14 * 3.4 + gib * 1.75 / (450 * 0.816 * 1e3), 1e-6);
  // Reduce-scatter and all-gather move (n-1)/n: 7 steps.
  p = predict_collective(h100(), Collective::all_gather, gib, 8);
  EXPECT_NEAR(p.predicted_us, 8.4 + 7 * 3.4 + gib * 0.875 / (450 * 0.816 * 1e3), 1e-6);
  // 2 ranks, 1 MiB: LL (6.6 + 2 × 0.6 + 1 MiB / (367.2 GB/s / 2) = 13.5 µs) beats Simple (18.1):
  // NVLS needs 5+ GPUs, the A100 none.
  p = predict_all_reduce(h100(), 1048576, 2);
  EXPECT_EQ(p.protocol, "LL");
  EXPECT_NEAR(p.predicted_us, 6.6 + 1.2 + 1048576.0 / (367.2e3 * 0.5), 1e-6);
  EXPECT_EQ(predict_all_reduce(a100(), gib, 8).algorithm, "ring");
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(predict_all_reduce(h100(), gib, 1).predicted_us, 1.0);  // one rank: the launch only
}

// ---- validation against published measurements ----------------------------------------------

TEST(GpuModelValidation, PublishedMeasurementsWithinTheGoal) {
  const std::vector<PublishedRow> rows = load_published(published_csv());
  ASSERT_GE(rows.size(), 60u);
  const ValidationSummary summary = validate(rows);
  EXPECT_TRUE(summary.within(0.20, 2.0)) << validation_markdown(summary);
  // docs/PREDICTION.md's table: BLOCKSCOPE_PRINT_VALIDATION=1 gpu_model_test prints it.
  if (std::getenv("BLOCKSCOPE_PRINT_VALIDATION") != nullptr) std::cout << validation_markdown(summary);
  // Every kind and GPU is covered.
  for (const char* kind : {"gemm", "memory_stream", "attention_fa2", "all_reduce", "all_gather", "reduce_scatter"})
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const PublishedRow& r) { return r.kind == kind; })) << kind;
  for (const char* gpu : {"h100-sxm", "h200", "a100-sxm"})
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const PublishedRow& r) { return r.gpu == gpu; })) << gpu;
}

// The validation must be able to fail: a copy of the table with one figure planted wrong.
ValidationSummary validate_with(const std::function<void(GpuSpec&)>& plant) {
  std::vector<GpuSpec> specs = gpu_specs();
  for (GpuSpec& spec : specs) plant(spec);
  const auto lookup = [&specs](const std::string& name) -> const GpuSpec& {
    for (const GpuSpec& spec : specs)
      if (name == spec.name) return spec;
    return gpu_spec(name);
  };
  return validate(load_published(published_csv()), lookup);
}

TEST(GpuModelValidation, HbmTenTimesTooFastFails) {
  const ValidationSummary s = validate_with([](GpuSpec& spec) { spec.hbm_tbps *= 10; });
  EXPECT_FALSE(s.within(0.20, 2.0)) << validation_markdown(s);
  EXPECT_EQ(s.rows[s.worst_row].row.kind, "memory_stream");
  EXPECT_GT(s.worst_ratio, 5.0);
}

TEST(GpuModelValidation, HalfTheSmsFails) {
  const ValidationSummary s = validate_with([](GpuSpec& spec) { spec.sms /= 2; });
  EXPECT_FALSE(s.within(0.20, 2.0)) << validation_markdown(s);
  EXPECT_GT(s.median_abs_error, 0.20);
}

TEST(GpuModelValidation, MalformedFilesAreInputErrors) {
  EXPECT_THROW(load_published("/nonexistent/published.csv"), blockscope::Error);
  PublishedRow row;
  row.kind = "teleport";
  row.params = "bytes=1";
  EXPECT_THROW(predict_row(h100(), row), blockscope::Error);
  row.kind = "gemm";
  row.params = "m=1 n=1";  // no k
  EXPECT_THROW(predict_row(h100(), row), blockscope::Error);
}

}  // namespace
