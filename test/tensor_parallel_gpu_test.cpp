// Tensor parallelism between GPUs in one process (run_on_gpus: a thread per GPU, NCCL): blocks
// and stacks split over 2 and 4 GPUs give the unsplit block's output within the accuracy rule of
// `blockscope check` (the float64 reference of the whole block), the same bits on every rank;
// the all-reduces are recorded as ops; a rank that fails ends the group with its own error; a
// count that differs between ranks is an error on every rank; the CLI's check, profile and run
// split over GPUs. On the simulated GPU (4 devices: kFourDevices below) its NCCL subset moves
// the data.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "model/tensor_parallel.h"
#include "model/workload.h"
#include "ops/all_reduce/all_reduce.h"
#include "profiler/session.h"
#include "reference/accuracy.h"
#include "reference/block_reference.h"
#include "reference/error_model.h"
#include "runtime/error.h"
#include "test/support/test_support.h"

#ifdef BLOCKSCOPE_CUDA_SIM
// Blocks split over 2 and 4 simulated GPUs (the simulator has 2 unless told): set before main, so
// before it first counts its devices.
[[maybe_unused]] static const bool kFourDevices = ::setenv("BLOCKSCOPE_SIM_DEVICES", "4", /*overwrite=*/0) == 0;
#endif

namespace bs = blockscope;
namespace ref = blockscope::reference;
using bs::ops::AttentionPath;
using bs::ops::LinearPath;
using bs::ops::MlpPath;

namespace {

// Odd-ish sizes (2 x 14 tokens: 7 per rank on 4 ranks), weights `scaled` so every sublayer
// matters at the output; heads, kv heads and d_ff divisible by 4. GPT-2: a 2-layer stack (the fused c_attn split per q|k|v); Llama:
// GQA (8 query heads on 4 kv heads), SwiGLU, RoPE.
std::string yaml_of(const std::string& family, const std::string& dtype, uint64_t seed) {
  const std::string model = family == "gpt2" ? "  d_model: 64\n  n_heads: 4\n  d_ff: 128\n  n_layers: 2\n"
                                             : "  d_model: 64\n  n_heads: 8\n  n_kv_heads: 4\n  d_ff: 96\n";
  return std::string("workload: ") + (family == "gpt2" ? "stack" : "block") + "\ndtype: " + dtype +
         "\nseed: " + std::to_string(seed % 1000000) + "\nmodel:\n  family: " + family + "\n" + model +
         "input: {batch: 2, seq_len: 14}\nweights: {init: scaled}\n";
}

// The all-naive mix first (its error sets the others' bound), then fused ones.
std::vector<bs::PathConfig> mixes_for(bool gated) {
  return {{AttentionPath::naive, LinearPath::naive, MlpPath::naive},
          {AttentionPath::flash, LinearPath::epilogue, gated ? MlpPath::fused : MlpPath::epilogue},
          {AttentionPath::fused_softmax, LinearPath::addmm, MlpPath::naive}};
}

// (family, dtype, ranks, sequence parallelism)
class TensorParallelGpus : public ::testing::TestWithParam<std::tuple<std::string, std::string, int, bool>> {};

TEST_P(TensorParallelGpus, OutputEqualsTheUnsplitReference) {
  const auto& [family, dtype, ranks, sequence_parallel] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(ranks - 1));
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const bs::WorkloadConfig config =
      bs::load_config_text(yaml_of(family, dtype, seed), "tp_gpu_test",
                           {"parallel.tensor=" + std::to_string(ranks),
                            std::string("parallel.sequence_parallel=") + (sequence_parallel ? "true" : "false")});
  const std::vector<bs::PathConfig> mixes = mixes_for(config.model.gated);
  std::vector<std::vector<std::vector<float>>> outputs(ranks);  // [rank][mix]
  ref::blockref::Named named;
  bs::run_on_gpus(ranks, [&](bs::Context& ctx, bs::Communicator& comm) {
    bs::Workload workload(ctx, config, mixes, &comm);
    if (comm.rank() == 0)  // every rank holds the same whole weights (seeded): rank 0's serve the oracle
      for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = ref::from_tensor(tensor);
    for (const bs::PathConfig& mix : mixes) {
      workload.set_paths(mix);
      bs::Tensor out = workload.output();
      bs::fill_nan(out);
      workload.forward();
      ctx.synchronize();
      outputs[comm.rank()].push_back(bs::to_floats(workload.output()));
    }
  });
  const std::vector<double> expected = ref::blockref::workload_output(config, named).data;
  const double naive_bound = ref::workload_error_bound(config);
  double naive_error = 0;
  for (size_t m = 0; m < mixes.size(); ++m) {
    SCOPED_TRACE(bs::paths_str(mixes[m], config.kind));
    const double error = ref::max_relative_error(outputs[0][m], expected);
    if (m == 0) naive_error = error;
    const double bound = m == 0 ? naive_bound : ref::accuracy_bound(naive_error, config.dtype);
    EXPECT_LE(error, bound);
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(outputs[r][m], outputs[0][m]) << "rank " << r << " differs from rank 0";
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, TensorParallelGpus,
                         ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values("f32", "bf16"),
                                            ::testing::Values(2, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_tp" +
                                  std::to_string(std::get<2>(info.param)) + (std::get<3>(info.param) ? "_sp" : "");
                         });

// The profile of one rank: two all_reduce ops per layer (after the attention output projection
// and after the MLP) with the bus bytes of nccl-tests, each with its kernel.
TEST(TensorParallelGpuProfile, AllReducesAreOpsWithBusBytes) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  const bs::WorkloadConfig config =
      bs::load_config_text(yaml_of("llama", "bf16", 7), "tp_gpu_test", {"parallel.tensor=2"});
  std::vector<bs::profiler::Profile> profiles(2);
  bs::run_on_gpus(2, [&](bs::Context& ctx, bs::Communicator& comm) {
    bs::Workload workload(ctx, config, {config.paths}, &comm);
    profiles[comm.rank()] = bs::profiler::profile_steps(ctx, "tp", bs::profiler::Schedule{0, 0, 1, false},
                                                        [&](int) { workload.forward(); });
  });
  const double bytes = 2.0 * 14 * 64 * 2;  // [B, S, d] bf16
  for (const bs::profiler::Profile& profile : profiles) {
    int all_reduces = 0;
    for (const bs::profiler::OpEvent& op : profile.ops) {
      if (op.name != "all_reduce") continue;
      ++all_reduces;
      EXPECT_DOUBLE_EQ(op.bytes, bs::ops::all_reduce_bus_bytes(bytes, 2));
    }
    EXPECT_EQ(all_reduces, 2);
    int kernels = 0;
    for (const bs::profiler::KernelEvent& kernel : profile.kernels) kernels += kernel.name == "all_reduce_sum";
    EXPECT_EQ(kernels, 2);
  }
}

// Sequence parallelism's profile: per layer two reduce-scatters (of the whole [T, d]) and three
// all-gathers (two of the normed rows, and the block's output), no all-reduce.
TEST(TensorParallelGpuProfile, SequenceParallelismRecordsReduceScattersAndAllGathers) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  const bs::WorkloadConfig config = bs::load_config_text(yaml_of("llama", "f32", 8), "tp_gpu_test",
                                                         {"parallel.tensor=2", "parallel.sequence_parallel=true"});
  std::vector<std::map<std::string, int>> counts(2);
  bs::run_on_gpus(2, [&](bs::Context& ctx, bs::Communicator& comm) {
    bs::Workload workload(ctx, config, {config.paths}, &comm);
    const bs::profiler::Profile profile = bs::profiler::profile_steps(ctx, "sp", bs::profiler::Schedule{0, 0, 1, false},
                                                                      [&](int) { workload.forward(); });
    for (const bs::profiler::OpEvent& op : profile.ops) counts[comm.rank()][op.name] += 1;
  });
  for (const auto& count : counts) {
    EXPECT_EQ(count.count("all_reduce"), 0u);
    EXPECT_EQ(count.at("reduce_scatter"), 2);
    EXPECT_EQ(count.at("all_gather"), 3);
  }
}

// Each rank's memory estimate (the whole weights and its shard, the activations and, under
// sequence parallelism, the layers' two shared row buffers) covers what its GPU held at the peak
// of a forward — the stack's construction included — and stays near it.
TEST(TensorParallelGpuMemory, EachRanksEstimateCoversItsPeak) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  for (const bool sequence_parallel : {false, true}) {
    SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "tensor parallel");
    const bs::WorkloadConfig config =
        bs::load_config_text(yaml_of("gpt2", "f32", 9), "tp_gpu_test",
                             {"parallel.tensor=2", std::string("parallel.sequence_parallel=") +
                                                       (sequence_parallel ? "true" : "false")});
    std::vector<size_t> estimates(2), peaks(2);
    bs::run_on_gpus(2, [&](bs::Context& ctx, bs::Communicator& comm) {
      bs::Workload workload(ctx, config, {config.paths}, &comm);
      workload.forward();
      ctx.synchronize();
      estimates[comm.rank()] = workload.memory().total();
      peaks[comm.rank()] = ctx.backend().memory_stats().peak_in_use;
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_GE(estimates[r], peaks[r]) << "rank " << r;
      EXPECT_LE(estimates[r], 4 * peaks[r]) << "rank " << r << ": the estimate should stay close to what runs";
    }
  }
}

// One rank fails before its first collective while the other waits in one: run_on_gpus returns
// (the group is aborted, nobody waits forever) and rethrows the failing rank's own error.
TEST(TensorParallelGpuErrors, ARankThatFailsEndsTheGroupWithItsError) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  const auto start = std::chrono::steady_clock::now();
  try {
    bs::run_on_gpus(2, [&](bs::Context& ctx, bs::Communicator& comm) {
      if (comm.rank() == 1) throw bs::InputError("rank 1's weights file is missing");
      bs::Tensor t = ctx.empty({1024}, bs::DType::f32);
      bs::ops::all_reduce(ctx, t, comm);
      ctx.synchronize();
    });
    FAIL() << "expected rank 1's error";
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find("weights file is missing"), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// NCCL does not check that the ranks agree: the group does, and every rank says so.
TEST(TensorParallelGpuErrors, CountsThatDifferAreAnErrorOnEveryRank) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  std::mutex mutex;
  std::vector<std::string> messages;
  EXPECT_THROW(bs::run_on_gpus(2,
                               [&](bs::Context& ctx, bs::Communicator& comm) {
                                 bs::Tensor t = ctx.empty({comm.rank() == 0 ? 512 : 1024}, bs::DType::bf16);
                                 try {
                                   bs::ops::all_reduce(ctx, t, comm);
                                 } catch (const bs::Error& error) {
                                   std::lock_guard<std::mutex> lock(mutex);
                                   messages.push_back(error.what());
                                   throw;
                                 }
                               }),
               bs::Error);
  ASSERT_EQ(messages.size(), 2u);
  for (const std::string& message : messages) {
    EXPECT_NE(message.find("512 bf16"), std::string::npos) << message;
    EXPECT_NE(message.find("1024 bf16"), std::string::npos) << message;
  }
}

// The CLI with --device cuda and no mpirun: the same commands as under mpirun, on a GPU group.
TEST(TensorParallelGpuCli, CheckProfileAndRunSplitOverTwoGpus) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(1));
  const std::string blocks = std::string(blockscope::testing::source_dir()) + "/configs/blocks/";
  const auto cli = [](const std::vector<std::string>& args) { return bs::testing::run_program(blockscope::testing::cli_path(), args); };
  const bs::testing::ProgramResult check = cli({"check", blocks + "tiny-llama.yaml", "--device", "cuda", "--set",
                                                "parallel.tensor=2", "--set", "parallel.sequence_parallel=true"});
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  for (const char* text : {"tensor parallel over 2 ranks with sequence parallelism (NCCL", "cuda:0-1",
                           "all paths within the accuracy rule"})
    EXPECT_NE(check.out.find(text), std::string::npos) << text << "\n" << check.out;

  const std::filesystem::path dir = bs::testing::test_scratch_dir();
  const bs::testing::ProgramResult profile =
      cli({"profile", blocks + "tiny-gpt2.yaml", "--device", "cuda", "--set", "parallel.tensor=2", "--save",
           (dir / "tp.json").string(), "--trace", (dir / "trace.json").string()});
  EXPECT_EQ(profile.code, 0) << profile.out << profile.err;
  for (const char* text : {"all_reduce", "/ rank 1 ==", "/ ranks (tensor parallel over 2, NCCL", "merged across ranks",
                           "slowest rank:"})
    EXPECT_NE(profile.out.find(text), std::string::npos) << text << "\n" << profile.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "tp.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "tp.rank1.json")) << "rank 1's profile beside rank 0's";
  // One trace per rank, as Kineto writes them (HTA reads a folder of them): rank 1's beside rank 0's.
  const std::string rank0_trace = bs::testing::read_text_file(dir / "trace.json");
  EXPECT_NE(rank0_trace.find("/ rank 0"), std::string::npos);
  EXPECT_EQ(rank0_trace.find("/ rank 1"), std::string::npos) << "rank 1's events belong in its own file";
  EXPECT_NE(bs::testing::read_text_file(dir / "trace.rank1.json").find("/ rank 1"), std::string::npos);

  const bs::testing::ProgramResult run =
      cli({"run", blocks + "tiny-llama.yaml", "--device", "cuda", "--set", "parallel.tensor=2"});
  EXPECT_EQ(run.code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("median ms"), std::string::npos) << run.out;

  const bs::testing::ProgramResult elsewhere =
      cli({"run", blocks + "tiny-llama.yaml", "--device", "cuda:1", "--set", "parallel.tensor=2"});
  EXPECT_EQ(elsewhere.code, 2) << elsewhere.err;
  EXPECT_NE(elsewhere.err.find("a GPU group is cuda:0 .. cuda:1"), std::string::npos) << elsewhere.err;
}

TEST(TensorParallelGpuErrors, MoreRanksThanGpusIsAnInputError) {
  BS_SKIP_IF_UNAVAILABLE(bs::Device::cuda(0));
  const int gpus = bs::cuda_device_count();
  try {
    bs::run_on_gpus(gpus + 1, [](bs::Context&, bs::Communicator&) {});
    FAIL() << "expected an error";
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find(std::to_string(gpus) + " CUDA GPU(s) are present"), std::string::npos)
        << error.what();
  }
}

}  // namespace
