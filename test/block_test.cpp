// Blocks and stacks on the CPU against the float64 block reference, for every path mix;
// seeded init determinism; weights from safetensors; the memory estimate; profiler regions.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/recorder.h"
#include "model/config.h"
#include "runtime/error.h"
#include "model/block.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "model/workload.h"
#include "reference/block_reference.h"
#include "reference/error_model.h"
#include "reference/families.h"
#include "runtime/cpu/gemm.h"
#include "test/support/test_support.h"

namespace bs = blockscope;
namespace ref = blockscope::reference;
using bs::ops::AttentionPath;
using bs::ops::LinearPath;
using bs::ops::MlpPath;

namespace {

// YAML for a small block of `family` with odd sizes (seq 13, batch 2); `model_extra` adds model
// keys. Weights `scaled` (N(0, 1/fan_in), norm weights and biases perturbed): each sublayer's
// output is on the scale of its input, so an error in one is not hidden under the residual.
std::string block_yaml(const std::string& family, uint64_t seed, const std::string& model_extra,
                       const std::string& workload = "block", const std::string& dtype = "f32") {
  return "workload: " + workload + "\ndtype: " + dtype + "\nseed: " + std::to_string(seed % 1000000) +
         "\nmodel:\n  family: " + family + "\n" + model_extra + "input: {batch: 2, seq_len: 13}\nweights: {init: scaled}\n";
}

std::vector<bs::PathConfig> every_mix(bool gated) {
  std::vector<bs::PathConfig> mixes;
  for (MlpPath m : {MlpPath::naive, gated ? MlpPath::fused : MlpPath::epilogue})
    for (LinearPath l : {LinearPath::naive, LinearPath::epilogue, LinearPath::addmm})
      for (AttentionPath a : {AttentionPath::naive, AttentionPath::inplace, AttentionPath::fused_softmax, AttentionPath::flash})
        mixes.push_back({a, l, m});
  return mixes;
}

ref::blockref::Named reference_inputs(const bs::Workload& workload) {
  ref::blockref::Named named;
  for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = ref::from_tensor(tensor);
  return named;
}

std::vector<double> reference_output(const bs::WorkloadConfig& config, const bs::Workload& workload) {
  return ref::blockref::workload_output(config, reference_inputs(workload)).data;
}

// Runs every path mix and checks each against the float64 reference and the accuracy rule
// against the naive mix. Four relative errors, each measured where it can be seen: the block's
// output, its change (output - input), and each sublayer's own output (attention: residual -
// input; MLP: output - residual), all held to the block's derived bound
// (reference/error_model.h): with weights `scaled` each is on the scale of the input, as the
// bound assumes. `name` labels the measured errors (report_error; docs/TESTING.md).
void check_every_mix(const std::string& yaml, const std::string& name) {
  const bs::WorkloadConfig config = bs::load_config_text(yaml, "block_test");
  const double bound = ref::workload_error_bound(config);
  // The oracle computes gpt2 and llama from its own knowledge of the families; the config
  // must agree with it.
  for (const std::string& mismatch : ref::family_mismatches(config.model)) ADD_FAILURE() << mismatch;
  bs::Context ctx(bs::Device::cpu());
  const std::vector<bs::PathConfig> mixes = every_mix(config.model.gated);
  bs::Workload workload(ctx, config, mixes);
  const ref::blockref::Named named = reference_inputs(workload);
  ref::RefTensor expected_residual;
  const std::vector<double> expected =
      ref::blockref::block_forward(config.model, named, named.at("input"), 0, &expected_residual).data;
  const std::vector<double> expected_input = named.at("input").data;
  const std::vector<float> input = bs::to_floats(workload.inputs_and_weights().front().second);
  double naive_error = 0;
  for (size_t i = 0; i < mixes.size(); ++i) {
    SCOPED_TRACE(bs::paths_str(mixes[i]));
    workload.set_paths(mixes[i]);
    bs::Tensor out = workload.output();
    bs::fill_nan(out);
    workload.forward();
    const std::vector<float> actual = bs::to_floats(workload.output());
    const auto intermediates = workload.intermediates();
    ASSERT_GE(intermediates.size(), 2u);
    ASSERT_EQ(intermediates[0].first, "layer_input");
    ASSERT_EQ(intermediates[1].first, "residual");
    EXPECT_EQ(bs::to_floats(intermediates[0].second), input) << "one layer: its input is the workload's";
    const std::vector<float> residual = bs::to_floats(intermediates[1].second);
    ASSERT_EQ(bs::testing::first_nan(actual), -1) << "an output element was not written";
    const double error = bs::testing::max_relative_error(actual, expected);
    const double block_delta = bs::testing::max_delta_error(actual, input, expected, expected_input);
    const double attention = bs::testing::max_delta_error(residual, input, expected_residual.data, expected_input);
    const double mlp = bs::testing::max_delta_error(actual, residual, expected, expected_residual.data);
    bs::testing::report_error(name + ".output", error, bound);
    bs::testing::report_error(name + ".block_delta", block_delta, bound);
    bs::testing::report_error(name + ".attention", attention, bound);
    bs::testing::report_error(name + ".mlp", mlp, bound);
    EXPECT_LE(error, bound);
    EXPECT_LE(block_delta, bound);
    EXPECT_LE(attention, bound);
    EXPECT_LE(mlp, bound);
    if (i == 0) {
      naive_error = error;
    } else {
      EXPECT_TRUE(bs::testing::within_accuracy_rule(error, naive_error, config.dtype))
          << "error " << error << " vs naive " << naive_error;
    }
  }
}

}  // namespace

TEST(Block, Gpt2EveryPathMixMatchesTheReference) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  check_every_mix(block_yaml("gpt2", seed, "  d_model: 48\n  n_heads: 3\n  d_ff: 80\n  norm_eps: 1.0e-2\n"), "block.gpt2.f32");
}

TEST(Block, LlamaGqaRopeEveryPathMixMatchesTheReference) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  check_every_mix(block_yaml("llama", seed,
                             "  d_model: 64\n  n_heads: 8\n  n_kv_heads: 2\n  d_ff: 96\n  rope_theta: 500000\n"
                             "  norm_eps: 1.0e-2\n"), "block.llama.f32");
}

TEST(Block, CustomBlocksEveryPathMixMatchTheReference) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  // LayerNorm with biases, GELU (erf) plain MLP, GQA, no RoPE, bidirectional; head_dim chosen
  // so that n_heads · head_dim != d_model.
  check_every_mix(block_yaml("custom", seed,
                             "  d_model: 40\n  n_heads: 6\n  n_kv_heads: 3\n  head_dim: 8\n  d_ff: 72\n"
                             "  norm: layernorm\n  activation: gelu\n  gated: false\n  bias: true\n  rope: false\n"
                             "  causal: false\n"), "block.custom_plain.f32");
  // RMSNorm, GeGLU gated MLP, RoPE, causal, MHA.
  check_every_mix(block_yaml("custom", seed + 1,
                             "  d_model: 32\n  n_heads: 2\n  d_ff: 48\n  norm: rmsnorm\n  activation: gelu_tanh\n"
                             "  gated: true\n  bias: false\n  rope: true\n  causal: true\n"), "block.custom_gated.f32");
}

TEST(Block, Bf16FollowsTheAccuracyRule) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  check_every_mix(block_yaml("llama", seed, "  d_model: 32\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 48\n", "block", "bf16"), "block.llama.bf16");
  check_every_mix(block_yaml("gpt2", seed + 1, "  d_model: 32\n  n_heads: 4\n  d_ff: 48\n", "block", "bf16"), "block.gpt2.bf16");
}

TEST(Block, StackOfThreeLayersMatchesTheReference) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const bs::WorkloadConfig config =
      bs::load_config_text(block_yaml("gpt2", seed, "  d_model: 32\n  n_heads: 4\n  n_layers: 3\n", "stack"), "t");
  bs::Context ctx(bs::Device::cpu());
  bs::Workload workload(ctx, config, {config.paths});
  EXPECT_TRUE(workload.inputs_and_weights().size() == 1 + 3 * 12);
  bs::Tensor out = workload.output();
  bs::fill_nan(out);
  workload.forward();
  EXPECT_LE(bs::testing::max_relative_error(bs::to_floats(workload.output()), reference_output(config, workload)), 2e-5);
}

TEST(Init, SameNumbersWhateverTheThreadCount) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = bs::init::normal_values(seed, "h.0.attn.c_attn.weight", 100003, 0.0f, 0.02f);
  omp_set_num_threads(std::max(2, threads));
  const std::vector<float> many = bs::init::normal_values(seed, "h.0.attn.c_attn.weight", 100003, 0.0f, 0.02f);
  omp_set_num_threads(threads);
  ASSERT_EQ(one.size(), many.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], many[i]) << "element " << i;
  // A prefix is the same stream: element i does not depend on the tensor's size.
  const std::vector<float> prefix = bs::init::normal_values(seed, "h.0.attn.c_attn.weight", 17, 0.0f, 0.02f);
  for (size_t i = 0; i < prefix.size(); ++i) EXPECT_EQ(prefix[i], one[i]);
}

TEST(Init, NormalWithTheRequestedScaleAndDistinctStreams) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::vector<float> a = bs::init::normal_values(seed, "a", 200000, 1.0f, 0.02f);
  double mean = 0, square = 0;
  for (float v : a) mean += v;
  mean /= static_cast<double>(a.size());
  for (float v : a) square += (v - mean) * (v - mean);
  const double std = std::sqrt(square / static_cast<double>(a.size()));
  EXPECT_NEAR(mean, 1.0, 0.001);
  EXPECT_NEAR(std, 0.02, 0.0005);
  const std::vector<float> b = bs::init::normal_values(seed, "b", 1000, 1.0f, 0.02f);
  const std::vector<float> other_seed = bs::init::normal_values(seed + 1, "a", 1000, 1.0f, 0.02f);
  int same_b = 0, same_seed = 0;
  for (size_t i = 0; i < 1000; ++i) {
    same_b += a[i] == b[i];
    same_seed += a[i] == other_seed[i];
  }
  EXPECT_LT(same_b, 5);
  EXPECT_LT(same_seed, 5);
}

TEST(Init, HuggingFaceScales) {
  const bs::WorkloadConfig config = bs::load_config_text(
      "workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4, n_layers: 8}\ninput: {batch: 1, seq_len: 4}\n", "t");
  bs::Context ctx(bs::Device::cpu());
  bs::Workload workload(ctx, config, {config.paths});
  auto stats = [&](const std::string& name) {
    for (const auto& [n, t] : workload.inputs_and_weights()) {
      if (n != name) continue;
      const std::vector<float> v = bs::to_floats(t);
      double square = 0, mean = 0;
      for (float x : v) mean += x;
      for (float x : v) square += static_cast<double>(x) * x;
      return std::make_pair(mean / static_cast<double>(v.size()), std::sqrt(square / static_cast<double>(v.size())));
    }
    ADD_FAILURE() << "no tensor " << name;
    return std::make_pair(0.0, 0.0);
  };
  EXPECT_NEAR(stats("h.0.attn.c_attn.weight").second, 0.02, 0.002);
  EXPECT_NEAR(stats("h.0.mlp.c_proj.weight").second, 0.02 / 4.0, 0.0005);  // 1/sqrt(2 · 8)
  EXPECT_EQ(stats("h.0.ln_1.weight").first, 1.0);
  EXPECT_EQ(stats("h.0.ln_1.bias").second, 0.0);
}

TEST(Weights, FromSafetensorsWithLayerShiftGiveTheSameOutput) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::string model = "  d_model: 32\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 40\n";
  const bs::WorkloadConfig random_config = bs::load_config_text(block_yaml("llama", seed, model), "t");
  bs::Context ctx(bs::Device::cpu());
  bs::Workload original(ctx, random_config, {random_config.paths});
  original.forward();

  // Write the weights as layer 5 of a file (plus an unrelated tensor), then load layer 5.
  std::vector<std::pair<std::string, bs::Tensor>> tensors;
  for (const auto& [name, tensor] : original.inputs_and_weights()) {
    if (name == "input") continue;
    tensors.emplace_back("model.layers.5." + name.substr(std::string("model.layers.0.").size()), tensor);
  }
  tensors.emplace_back("model.embed_tokens.weight", bs::init::normal_tensor(ctx, "e", {3, 32}, bs::DType::f32, 1, 0, 1));
  const std::string dir = bs::testing::scratch_root().string();
  const std::string file = dir + "/block_test_weights.safetensors";
  bs::write_safetensors(file, tensors);

  const bs::WorkloadConfig file_config = bs::load_config_text(
      block_yaml("llama", seed, model) + "", "t", {"weights={file: " + file + ", layer: 5}"});
  bs::Workload loaded(ctx, file_config, {file_config.paths});
  loaded.forward();
  EXPECT_EQ(bs::to_floats(loaded.output()), bs::to_floats(original.output()));

  // A missing layer and a wrong shape are input errors naming the file and the tensor.
  try {
    const bs::WorkloadConfig c = bs::load_config_text(block_yaml("llama", seed, model), "t",
                                                      {"weights={file: " + file + ", layer: 4}"});
    bs::Workload w(ctx, c, {c.paths});
    FAIL() << "no error";
  } catch (const bs::Error& e) {
    EXPECT_EQ(e.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(e.message().find(file + ": weights.file has no tensor 'model.layers.4.input_layernorm.weight'"),
              std::string::npos)
        << e.message();
  }
  try {
    const bs::WorkloadConfig c = bs::load_config_text(block_yaml("llama", seed, "  d_model: 32\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 48\n"),
                                                      "t", {"weights={file: " + file + ", layer: 5}"});
    bs::Workload w(ctx, c, {c.paths});
    FAIL() << "no error";
  } catch (const bs::Error& e) {
    EXPECT_EQ(e.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(e.message().find("tensor 'model.layers.5.mlp.gate_proj.weight' has shape [40, 32], but the config's model "
                               "needs [48, 32]"),
              std::string::npos)
        << e.message();
  }
  // An FP8 checkpoint (codes a separate weight_scale tensor scales) is refused, not read as values.
  for (auto& [name, tensor] : tensors) {
    if (name == "model.layers.5.mlp.down_proj.weight") {
      bs::Tensor codes = ctx.empty(tensor.shape(), bs::DType::fp8_e4m3);
      bs::from_floats(codes, bs::to_floats(tensor));
      tensor = codes;
    }
  }
  bs::write_safetensors(file, tensors);
  try {
    const bs::WorkloadConfig c = bs::load_config_text(block_yaml("llama", seed, model), "t",
                                                      {"weights={file: " + file + ", layer: 5}"});
    bs::Workload w(ctx, c, {c.paths});
    FAIL() << "no error";
  } catch (const bs::Error& e) {
    EXPECT_EQ(e.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(e.message().find("tensor 'model.layers.5.mlp.down_proj.weight' is fp8_e4m3: an FP8 checkpoint's weights"),
              std::string::npos)
        << e.message();
  }
  std::filesystem::remove(file);
}

TEST(Weights, Gpt2CheckpointNamesUnderTransformerPrefixAreFound) {
  const uint64_t seed = bs::testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::string model = "  d_model: 32\n  n_heads: 2\n";
  const bs::WorkloadConfig config = bs::load_config_text(block_yaml("gpt2", seed, model, "stack") + "", "t",
                                                         {"model.n_layers=2"});
  bs::Context ctx(bs::Device::cpu());
  bs::Workload original(ctx, config, {config.paths});
  original.forward();
  // GPT2LMHeadModel checkpoints prefix every name with "transformer.".
  std::vector<std::pair<std::string, bs::Tensor>> tensors;
  for (const auto& [name, tensor] : original.inputs_and_weights())
    if (name != "input") tensors.emplace_back("transformer." + name, tensor);
  const std::string file = (bs::testing::scratch_root() / "block_test_gpt2.safetensors").string();
  bs::write_safetensors(file, tensors);
  const bs::WorkloadConfig from_file =
      bs::load_config_text(block_yaml("gpt2", seed, model, "stack"), "t", {"model.n_layers=2", "weights={file: " + file + "}"});
  bs::Workload loaded(ctx, from_file, {from_file.paths});
  loaded.forward();
  EXPECT_EQ(bs::to_floats(loaded.output()), bs::to_floats(original.output()));
  std::filesystem::remove(file);
}

TEST(Workload, RefusesWhatDoesNotFitAndSuggestsFlash) {
  const bs::WorkloadConfig config = bs::load_config_text(
      "workload: attention\nmodel: {n_heads: 16, head_dim: 64}\ninput: {batch: 64, seq_len: 1048576}\n"
      "paths: {attention: naive}\n",
      "t");
  bs::Context ctx(bs::Device::cpu());
  try {
    bs::Workload workload(ctx, config, {config.paths});
    FAIL() << "no error";
  } catch (const bs::Error& e) {
    EXPECT_EQ(e.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(e.message().find("use paths.attention: flash"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("available"), std::string::npos) << e.message();
  }
  EXPECT_EQ(ctx.backend().memory_stats().in_use, 0u);  // refused before allocating anything
  // The flash path needs no scores.
  bs::PathConfig flash = config.paths;
  flash.attention = AttentionPath::flash;
  EXPECT_EQ(bs::estimate_memory(config, {flash}).scores, 0u);
  EXPECT_GT(bs::estimate_memory(config, {config.paths}).scores, bs::estimate_memory(config, {flash}).total());
}

// A block's weights are read-only once loaded (a GEMM library may keep packed copies of them,
// cpu::MatmulPlan): writing one is refused; the input stays writable. With oneDNN the packed
// copies are in the estimate, apart.
TEST(Workload, LoadedWeightsAreReadOnly) {
  const bs::WorkloadConfig config =
      bs::load_config_text(block_yaml("gpt2", 1, "  d_model: 64\n  n_heads: 4\n"), "t", {"input.seq_len=16"});
  bs::Context ctx(bs::Device::cpu());
  bs::Workload workload(ctx, config, {config.paths});
  int weights = 0;
  for (const auto& [name, tensor] : workload.inputs_and_weights()) {
    SCOPED_TRACE(name);
    const bool input = name == "input";
    EXPECT_EQ(tensor.storage()->read_only(), !input);
    bs::Tensor t = tensor;
    if (!input) {
      EXPECT_THROW(bs::fill_nan(t), bs::Error);
      ++weights;
    }
  }
  EXPECT_EQ(weights, 12);
  EXPECT_EQ(workload.memory().packed_weights > 0, bs::cpu::packs_weights());
  EXPECT_LE(workload.memory().packed_weights, 2 * workload.memory().weights) << "padded copies of the GEMM weights";
}

// A block and a 3-layer stack (whose layers share one set of activation buffers: a later layer
// allocating its own first, even for a moment, would show in the peak).
TEST(Workload, MemoryEstimateCoversThePeakOfEveryPath) {
  for (const char* family : {"gpt2", "llama"}) {
    for (const char* kind : {"block", "stack"}) {
      SCOPED_TRACE(std::string(family) + " " + kind);
      const std::string model = std::string(family) == "gpt2" ? "  d_model: 64\n  n_heads: 4\n  n_layers: 3\n"
                                                              : "  d_model: 64\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 96\n  n_layers: 3\n";
      const bs::WorkloadConfig config = bs::load_config_text(block_yaml(family, 1, model, kind), "t", {"input.seq_len=64"});
      for (const bs::PathConfig& paths : every_mix(config.model.gated)) {
        SCOPED_TRACE(bs::paths_str(paths));
        bs::Context ctx(bs::Device::cpu());
        bs::Workload workload(ctx, config, {paths});
        workload.set_paths(paths);
        workload.forward();
        const size_t peak = ctx.backend().memory_stats().peak_in_use;
        EXPECT_GE(workload.memory().total(), peak);
        EXPECT_LE(workload.memory().total(), 4 * peak) << "the estimate should stay close to what runs";
      }
    }
  }
}

// The FP8 copies a block makes, by hand, for one Llama layer of d 64, 4 heads of 16 on 2 kv heads,
// d_ff 96: weights q [64, 64], k and v [32, 64], o [64, 64], gate and up [96, 64], down [64, 96]
// -- 30720 codes of one byte; weight-only FP8 adds one f32 scale per output row (64 + 32 + 32 +
// 64 + 96 + 96 + 64 = 448 rows: 1792 bytes), FP8 GEMMs one per tensor (7: 28 bytes) and the
// inputs' codes for T = 2 · 13 tokens (2 · 64 + 64 + 96 = 288 each: 7488 bytes). The workload's
// memory estimate grows by exactly that, and the blocks hold what it says.
TEST(Workload, MemoryEstimateCountsTheFp8Copies) {
  const std::string model = "  d_model: 64\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 96\n";
  const bs::WorkloadConfig plain = bs::load_config_text(block_yaml("llama", 1, model, "block", "bf16"), "t");
  const auto weights = [&](const std::string& precision) {
    const bs::WorkloadConfig config =
        bs::load_config_text(block_yaml("llama", 1, model, "block", "bf16") + "precision: " + precision + "\n", "t");
    return static_cast<double>(bs::estimate_memory(config, {config.paths}).weights);
  };
  const double base = static_cast<double>(bs::estimate_memory(plain, {plain.paths}).weights);
  EXPECT_EQ(weights("{weights: fp8_e4m3}") - base, 30720.0 + 1792.0);
  EXPECT_EQ(weights("{gemm: fp8_e4m3}") - base, 30720.0 + 28.0 + 7488.0);

  bs::Context ctx(bs::Device::cpu());
  bs::WeightSet set;
  bs::init_weights(ctx, bs::block_weight_specs(plain.model, 0), bs::DType::bf16, 1, bs::WeightInit::scaled, set);
  bs::BlockStack prefill(ctx, plain.model, bs::DType::bf16, set, 1, 2, 13), step(ctx, plain.model, bs::DType::bf16, set, 1, 2, 1);
  prefill.use_fp8_weights(ctx, bs::DType::fp8_e4m3);
  step.use_fp8_weights(ctx, bs::DType::fp8_e4m3, &prefill);
  EXPECT_EQ(prefill.fp8_weight_bytes(), 30720u + 1792u);
  EXPECT_EQ(step.fp8_weight_bytes(), 30720u + 1792u) << "the step stack reads the prefill's codes";
}

TEST(Workload, ProfilerRegionsNameBlockAttnMlp) {
  const bs::WorkloadConfig config = bs::load_config_text(block_yaml("gpt2", 1, "  d_model: 32\n  n_heads: 2\n  n_layers: 2\n", "stack"), "t");
  bs::Context ctx(bs::Device::cpu());
  bs::Workload workload(ctx, config, {config.paths});
  bs::profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  workload.forward();
  ctx.set_recorder(nullptr);
  bool attention = false, mlp = false, second_layer = false;
  for (const bs::profiler::OpEvent& op : recorder.ops()) {
    attention |= op.scope == "block.0/attn/attention";
    mlp |= op.scope.rfind("block.0/mlp/", 0) == 0 && !op.is_region;
    second_layer |= op.scope.rfind("block.1/attn/", 0) == 0;
  }
  EXPECT_TRUE(attention);
  EXPECT_TRUE(mlp);
  EXPECT_TRUE(second_layer);
}

TEST(Workload, DumpMetadataDescribesTheBlock) {
  const bs::WorkloadConfig config = bs::load_config_text(
      block_yaml("llama", 1, "  d_model: 32\n  n_heads: 4\n  n_kv_heads: 2\n  d_ff: 40\n  n_layers: 7\n"), "t");
  bs::Context ctx(bs::Device::cpu());
  bs::Workload workload(ctx, config, {config.paths});
  const nlohmann::json meta = nlohmann::json::parse(workload.dump_metadata().at("blockscope"));
  for (const char* key : {"workload", "family", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "n_layers",
                          "norm_eps", "rope_theta", "norm", "activation", "gated", "bias", "rope", "causal", "dtype",
                          "batch", "seq_len"})
    EXPECT_TRUE(meta.contains(key)) << key;
  EXPECT_EQ(meta["family"], "llama");
  EXPECT_EQ(meta["n_layers"], 1);  // a block runs one layer
  // The knobs a dump records are Hugging Face Llama's (tools/peers/torch_reference.py checks them too).
  const ref::FamilySemantics& hf = *ref::hf_family(bs::ModelFamily::llama);
  EXPECT_EQ(meta["activation"], bs::ops::activation_name(hf.activation));
  EXPECT_EQ(meta["norm"], bs::norm_name(hf.norm));
  EXPECT_EQ(meta["causal"], hf.causal);
  EXPECT_EQ(meta["rope"], hf.rope);
  EXPECT_EQ(meta["gated"], hf.gated);
  EXPECT_EQ(meta["bias"], hf.bias);
  const auto tensors = workload.dump_tensors();
  EXPECT_EQ(tensors.front().first, "input");
  EXPECT_EQ(tensors.back().first, "output");
}
