// Config parsing: every shipped config loads; every kind of mistake is an invalid_input Error
// whose message names file:line:column (or the --set) and the key path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test/support/test_support.h"
#include "model/config.h"
#include "reference/error_model.h"
#include "reference/families.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"

namespace bs = blockscope;
namespace fs = std::filesystem;

namespace {

// Files of one test in a directory of their own: ctest runs the tests of this binary in
// parallel processes, which must not write each other's case.yaml.
std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path path = blockscope::testing::test_scratch_dir() / name;
  std::ofstream(path) << text;
  return path.string();
}

// Loads `yaml` from a file and returns the error message (fails the test if none).
std::string error_of(const std::string& yaml, const std::vector<std::string>& sets = {}, std::string* path_out = nullptr) {
  const std::string path = write_temp("case.yaml", yaml);
  if (path_out) *path_out = path;
  try {
    bs::load_config_file(path, sets);
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input) << error.what();
    return error.message();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

// `expected` must appear after "<file>:<line>:<column>: ".
void expect_error_at(const std::string& yaml, int line, int column, const std::string& expected,
                     const std::vector<std::string>& sets = {}) {
  std::string path;
  const std::string message = error_of(yaml, sets, &path);
  const std::string where = path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  EXPECT_EQ(message.rfind(where, 0), 0u) << "message: " << message << "\nexpected to start with: " << where;
  EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message << "\nexpected: " << expected;
}

const char* kBlock =
    "workload: block\n"
    "model:\n"
    "  family: gpt2\n"
    "  d_model: 64\n"
    "  n_heads: 4\n"
    "input: {batch: 2, seq_len: 8}\n";

}  // namespace

TEST(Config, DefaultConfigIsASmallGpt2Block) {
  const bs::WorkloadConfig config = bs::load_default_config();
  EXPECT_EQ(config.kind, bs::WorkloadKind::block);
  EXPECT_EQ(config.model.family, bs::ModelFamily::gpt2);
  EXPECT_EQ(config.model.head_dim * config.model.n_heads, config.model.d_model);
  EXPECT_EQ(config.model.d_ff, 4 * config.model.d_model);  // GPT-2's default n_inner
  EXPECT_FALSE(config.compare.empty());
}

TEST(Config, DefaultConfigMatchesTheFileInTheSourceTree) {
  std::ifstream in(std::string(blockscope::testing::source_dir()) + "/configs/default.yaml");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), bs::default_config_yaml());
}

TEST(Config, EveryShippedConfigLoads) {
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(std::string(blockscope::testing::source_dir()) + "/configs")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".yaml" || path.find("/configs/test/") != std::string::npos) continue;
    SCOPED_TRACE(path);
    const bs::WorkloadConfig config = bs::load_config_file(path);
    EXPECT_FALSE(config.name.empty());
    for (const std::string& mismatch : bs::reference::family_mismatches(config.model)) ADD_FAILURE() << mismatch;
    ++count;
  }
  EXPECT_GE(count, 11);
}

// The derived error bound `check` holds every shipped workload's naive path to
// (reference/error_model.h) stays far below a wrong element at the shapes users run: under
// 1e-4 in f32 (a misplaced eps or a dropped bias costs 1e-3 and more) and 0.1 in bf16; and it
// grows with the depth of the sums and the layers, as the model says.
TEST(Config, EveryShippedConfigsErrorBoundIsFarBelowAWrongElement) {
  for (const auto& entry : fs::recursive_directory_iterator(std::string(blockscope::testing::source_dir()) + "/configs")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".yaml" || path.find("/configs/test/") != std::string::npos) continue;
    SCOPED_TRACE(path);
    bs::WorkloadConfig config = bs::load_config_file(path);
    // FP8 roundings dominate (Fp8ErrorBoundWorkedByHand): 0.18 (a linear) to 0.36 (a block layer),
    // loose against a block (docs/FP8.md); the FP8 ops' own tests hold the GEMMs tightly.
    if (config.precision.fp8()) {
      EXPECT_LT(bs::reference::workload_error_bound(config), 0.4);
      continue;
    }
    config.dtype = bs::DType::f32;
    const double f32 = bs::reference::workload_error_bound(config);
    EXPECT_GT(f32, 1e-7);
    EXPECT_LT(f32, 1e-4);
    config.dtype = bs::DType::bf16;
    EXPECT_LT(bs::reference::workload_error_bound(config), 0.1);
  }
  bs::WorkloadConfig stack = bs::load_config_text("workload: stack\nmodel: {family: gpt2, d_model: 64, n_heads: 4, "
                                                  "n_layers: 1}\ninput: {batch: 1, seq_len: 16}\n", "stack");
  const double one = bs::reference::workload_error_bound(stack);
  stack.model.n_layers = 4;
  EXPECT_NEAR(bs::reference::workload_error_bound(stack), 2.0 * one, 1e-12) << "four layers: twice one layer's (√4)";
  stack.input.seq_len = 1024;
  EXPECT_GT(bs::reference::workload_error_bound(stack), 2.0 * one) << "longer softmax and P·V sums";
}

// The config code against the oracle's own knowledge of the Hugging Face families
// (reference/families.h): the fixed knobs and the defaults of eps and theta.
TEST(Config, FamiliesAreHuggingFaces) {
  for (const char* family : {"gpt2", "llama"}) {
    SCOPED_TRACE(family);
    const std::string extra = std::string(family) == "llama" ? ", n_kv_heads: 2, d_ff: 96" : "";
    const bs::WorkloadConfig c = bs::load_config_text(std::string("workload: block\nmodel: {family: ") + family +
                                                          ", d_model: 64, n_heads: 4" + extra +
                                                          "}\ninput: {batch: 1, seq_len: 4}\n",
                                                      "t");
    const bs::reference::FamilySemantics* hf = bs::reference::hf_family(c.model.family);
    ASSERT_NE(hf, nullptr);
    const std::vector<std::string> mismatches = bs::reference::family_mismatches(c.model);
    EXPECT_TRUE(mismatches.empty()) << mismatches.front();
    EXPECT_DOUBLE_EQ(c.model.norm_eps, hf->default_norm_eps);
    if (hf->rope) {
      EXPECT_DOUBLE_EQ(c.model.rope_theta, hf->default_rope_theta);
    }
    EXPECT_TRUE(c.model.causal);
  }
  // The check itself sees a wrong knob.
  bs::WorkloadConfig c = bs::load_default_config();
  c.model.causal = false;
  c.model.activation = bs::ops::Activation::relu;
  const std::vector<std::string> mismatches = bs::reference::family_mismatches(c.model);
  ASSERT_EQ(mismatches.size(), 2u);
  EXPECT_EQ(mismatches[0], "activation: the config has relu, Hugging Face gpt2 uses gelu_tanh");
  EXPECT_EQ(mismatches[1], "causal: the config has false, Hugging Face gpt2 is causal");
}

TEST(Config, ShippedLlamaConfigHasTheLlama3Shape) {
  const bs::WorkloadConfig c = bs::load_config_file(std::string(blockscope::testing::source_dir()) + "/configs/blocks/llama-3-8b.yaml");
  EXPECT_EQ(c.model.d_model, 4096);
  EXPECT_EQ(c.model.n_heads, 32);
  EXPECT_EQ(c.model.n_kv_heads, 8);
  EXPECT_EQ(c.model.head_dim, 128);
  EXPECT_EQ(c.model.d_ff, 14336);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 500000);
  EXPECT_TRUE(c.model.rope && c.model.gated && !c.model.bias);
  EXPECT_EQ(c.model.norm, bs::NormKind::rmsnorm);
  EXPECT_EQ(c.paths.mlp, bs::ops::MlpPath::fused);
  ASSERT_EQ(c.compare.size(), 2u);
  EXPECT_EQ(c.compare[0].label, "attention=fused_softmax");
  EXPECT_EQ(c.compare[0].paths.mlp, bs::ops::MlpPath::fused);  // overrides only what it names
}

TEST(Config, DefaultsPerFamily) {
  const bs::WorkloadConfig c = bs::load_config_text(kBlock, "t");
  EXPECT_EQ(c.model.n_kv_heads, 4);
  EXPECT_EQ(c.model.head_dim, 16);
  EXPECT_EQ(c.model.d_ff, 256);
  EXPECT_EQ(c.dtype, bs::DType::f32);
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.paths.mlp, bs::ops::MlpPath::epilogue);  // plain MLP default
  EXPECT_EQ(c.weights.init, bs::WeightInit::random);
}

TEST(Config, UnknownKeySuggestsTheNearestKey) {
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_modle: 64\n  n_heads: 4\ninput: {batch: 1, seq_len: 4}\n",
                  4, 3, "model.d_modle: unknown key 'd_modle'; did you mean 'd_model'?");
  expect_error_at("workload: block\nmodle: {}\n", 2, 1, "modle: unknown key 'modle'; did you mean 'model'?");
}

TEST(Config, HuggingFaceKeyNamesOurs) {
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  hidden_size: 64\n", 4, 3,
                  "model.hidden_size: unknown key 'hidden_size'; Hugging Face's hidden_size is 'd_model' here");
}

TEST(Config, WrongTypes) {
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: sixty\n  n_heads: 4\ninput: {batch: 1, seq_len: 4}\n",
                  4, 12, "model.d_model: expected an integer, got 'sixty'");
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: 64.5\n  n_heads: 4\n", 4, 12,
                  "model.d_model: expected an integer, got '64.5'");
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: [64]\n  n_heads: 4\n", 4, 12,
                  "model.d_model: expected an integer, got a list");
  expect_error_at(std::string(kBlock) + "run: {cuda_graph: maybe}\n", 7, 19,
                  "run.cuda_graph: expected true or false, got 'maybe'");
  expect_error_at(std::string(kBlock) + "model2: 1\n", 7, 1, "unknown key 'model2'");
  expect_error_at("workload: block\nmodel: 5\n", 2, 8, "model: expected a map of keys, got '5'");
  expect_error_at(std::string(kBlock) + "compare: {attention: naive}\n", 7, 10, "compare: expected a list of path overrides");
}

TEST(Config, MissingKeys) {
  expect_error_at("model: {family: gpt2}\n", 1, 1, "workload: missing required key");
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: 64\ninput: {batch: 1, seq_len: 4}\n", 3, 3,
                  "model.n_heads: missing required key");
  expect_error_at("workload: block\nmodel:\n  family: llama\n  d_model: 64\n  n_heads: 4\ninput: {batch: 1, seq_len: 4}\n",
                  3, 3, "model.d_ff: missing required key (Hugging Face: intermediate_size)");
  expect_error_at("workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4}\ninput: {batch: 2}\n", 3, 8,
                  "input.seq_len: missing required key");
  expect_error_at("workload: matmul_add\nshape: {m: 4, n: 4}\n", 2, 8, "shape.k: missing required key");
  expect_error_at("workload: block\nmodel:\n  family: custom\n  d_model: 64\n  n_heads: 4\n  d_ff: 128\n", 3, 3,
                  "model.norm: missing required key (family custom sets every knob explicitly)");
}

TEST(Config, ImpossibleShapes) {
  expect_error_at(
      "workload: block\nmodel:\n  family: llama\n  d_model: 768\n  n_heads: 12\n  n_kv_heads: 5\n  d_ff: 64\n"
      "input: {batch: 1, seq_len: 4}\n",
      6, 15, "model.n_kv_heads: 5 does not divide n_heads = 12");
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: 100\n  n_heads: 12\ninput: {batch: 1, seq_len: 4}\n",
                  5, 12, "model.n_heads: 12 does not divide d_model = 100");
  expect_error_at(
      "workload: block\nmodel:\n  family: llama\n  d_model: 64\n  n_heads: 4\n  head_dim: 15\n  d_ff: 64\n"
      "input: {batch: 1, seq_len: 4}\n",
      6, 13, "model.head_dim: head_dim = 15 is odd, but RoPE rotates pairs");
  expect_error_at("workload: block\nmodel:\n  family: gpt2\n  d_model: 0\n  n_heads: 4\n", 4, 12,
                  "model.d_model: must be positive, got 0");
  expect_error_at(std::string(kBlock) + "run: {iters: -3}\n", 7, 14, "run.iters: must be positive, got -3");
  expect_error_at("workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4, n_kv_heads: 2}\n", 2, 60,
                  "model.n_kv_heads: gpt2 has no grouped-query attention");
  expect_error_at("workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4, norm_eps: -1}\n", 2, 58,
                  "model.norm_eps: must be positive, got -1");
}

// The bound of an FP8 linear, by hand (reference/error_model.h): k = 64 f32 terms (2^-48 each),
// two bf16 stores (2^-16 each: the GEMM's and the bias's), two e4m3-quantized operands (2^-8
// each): 2·√(64·2^-48 + 2·2^-16 + 2·2^-8) = 0.177122...; the same linear in bf16 without them:
// 2·√(64·2^-48 + 2·2^-16) = 0.011049.
TEST(Config, Fp8ErrorBoundWorkedByHand) {
  const std::string linear = "workload: linear\ndtype: bf16\nshape: {m: 32, n: 48, k: 64}\n";
  const bs::WorkloadConfig fp8 = bs::load_config_text(linear + "precision: {gemm: fp8_e4m3}\n", "t");
  EXPECT_NEAR(bs::reference::workload_error_bound(fp8), 0.177122, 1e-6);
  EXPECT_NEAR(bs::reference::workload_error_bound(bs::load_config_text(linear, "t")), 0.011049, 1e-6);
  // An MLP's two GEMMs: 4 quantized operands; a block layer's four on its longest path (q, the
  // output projection, the MLP's two): 8; a stack of 3 such layers: 24.
  const std::string mlp = "workload: mlp\ndtype: bf16\nmodel: {d_model: 64, d_ff: 128}\ninput: {batch: 1, seq_len: 8}\n";
  EXPECT_EQ(bs::reference::workload_roundings(bs::load_config_text(mlp + "precision: {gemm: fp8_e4m3}\n", "t")).fp8, 4);
  const std::string block = std::string(kBlock) + "dtype: bf16\nprecision: {gemm: fp8_e4m3}\n";
  EXPECT_EQ(bs::reference::workload_roundings(bs::load_config_text(block, "t")).fp8, 8);
  bs::WorkloadConfig stack = bs::load_config_text(block, "t");
  stack.kind = bs::WorkloadKind::stack;
  stack.model.n_layers = 3;
  EXPECT_EQ(bs::reference::workload_roundings(stack).fp8, 24);
  EXPECT_EQ(bs::reference::workload_roundings(bs::load_config_text(kBlock, "t")).fp8, 0);
}

// precision: a linear workload's FP8 GEMM and its recipe (docs/FP8.md): read, defaults, and
// every refusal at its key.
TEST(Config, Fp8PrecisionSection) {
  const std::string linear = "workload: linear\ndtype: bf16\nshape: {m: 32, n: 48, k: 64}\n";
  const bs::WorkloadConfig plain = bs::load_config_text(linear, "t");
  EXPECT_FALSE(plain.precision.fp8());
  const bs::WorkloadConfig delayed = bs::load_config_text(
      linear + "precision: {gemm: fp8_e4m3, recipe: delayed, amax_history: 4, amax_algo: most_recent, margin: 2, "
               "fast_accum: true}\n",
      "t");
  EXPECT_TRUE(delayed.precision.fp8());
  EXPECT_EQ(delayed.precision.gemm, bs::DType::fp8_e4m3);
  EXPECT_EQ(delayed.precision.recipe, bs::Fp8Recipe::delayed);
  EXPECT_EQ(delayed.precision.amax_history, 4);
  EXPECT_EQ(delayed.precision.amax_algo, bs::ops::AmaxAlgo::most_recent);
  EXPECT_EQ(delayed.precision.margin, 2);
  EXPECT_TRUE(delayed.precision.fast_accum);
  const bs::WorkloadConfig current = bs::load_config_text(linear + "precision: {gemm: fp8_e4m3}\n", "t");
  EXPECT_EQ(current.precision.recipe, bs::Fp8Recipe::current);
  EXPECT_FALSE(current.precision.fast_accum);

  expect_error_at(linear + "precision: {gemm: fp8_e4m3, amax_history: 4}\n", 4, 43,
                  "precision.amax_history: applies to the delayed recipe");
  expect_error_at(linear + "precision: {recipe: delayed}\n", 4, 21,
                  "precision.recipe: applies to FP8 GEMMs: set precision.gemm: fp8_e4m3");
  expect_error_at(linear + "precision: {gemm: fp8_e5m2}\n", 4, 19,
                  "precision.gemm: unknown GEMM dtype 'fp8_e5m2'; did you mean 'fp8_e4m3'?");
  expect_error_at("workload: linear\ndtype: f32\nshape: {m: 32, n: 48, k: 64}\nprecision: {gemm: fp8_e4m3}\n", 4, 19,
                  "precision.gemm: the FP8 GEMM writes bf16 or f16 here; the workload's dtype is f32");
  expect_error_at("workload: linear\ndtype: bf16\nshape: {m: 32, n: 40, k: 64}\nprecision: {gemm: fp8_e4m3}\n", 4, 19,
                  "precision.gemm: cuBLASLt's FP8 GEMMs take K and N in multiples of 16; shape.n is 40");
  expect_error_at(linear + "precision: {gemm: fp8_e4m3}\ncompare:\n  - {linear: naive}\n", 6, 14,
                  "compare[0].linear: linear paths apply to 16- and 32-bit GEMMs");
  expect_error_at(linear + "paths: {linear: naive}\nprecision: {gemm: fp8_e4m3}\n", 5, 19,
                  "precision.gemm: the FP8 GEMMs have one path; paths.linear is naive: leave it at epilogue");
  // A block: every GEMM's K and N, one rank; its attention keeps its paths.
  const bs::WorkloadConfig block =
      bs::load_config_text(std::string(kBlock) + "dtype: bf16\nprecision: {gemm: fp8_e4m3}\n", "t");
  EXPECT_TRUE(block.precision.fp8());
  EXPECT_NO_THROW(bs::load_config_text(std::string(kBlock) + "dtype: bf16\nprecision: {gemm: fp8_e4m3}\ncompare:\n"
                                       "  - {attention: naive}\n", "t"));
  expect_error_at(std::string(kBlock) + "dtype: bf16\nprecision: {gemm: fp8_e4m3}\n", 8, 19,
                  "precision.gemm: cuBLASLt's FP8 GEMMs take K and N in multiples of 16; model.d_ff is 72",
                  {"model.d_ff=72"});
  expect_error_at(std::string(kBlock) + "dtype: bf16\nprecision: {gemm: fp8_e4m3}\nparallel: {tensor: 2}\n", 8, 19,
                  "precision.gemm: FP8 blocks run on one rank so far; parallel.tensor is 2");
  expect_error_at("workload: attention\ndtype: bf16\nmodel: {n_heads: 2, head_dim: 16}\ninput: {batch: 1, seq_len: 8}\n"
                  "precision: {gemm: fp8_e4m3}\n", 5, 19,
                  "precision.gemm: FP8 GEMMs run in linear, mlp, block and stack workloads so far; workload attention");
}

// precision.weights: weight-only FP8 (docs/FP8.md) -- read, its error count by hand, and every
// refusal at its key.
TEST(Config, WeightOnlyFp8PrecisionSection) {
  const bs::WorkloadConfig e4m3 = bs::load_config_text(std::string(kBlock) + "precision: {weights: fp8_e4m3}\n", "t");
  EXPECT_TRUE(e4m3.precision.weight_only());
  EXPECT_FALSE(e4m3.precision.fp8());
  EXPECT_EQ(e4m3.precision.weights, bs::DType::fp8_e4m3);
  EXPECT_EQ(e4m3.dtype, bs::DType::f32) << "weight-only FP8 keeps any compute dtype";
  EXPECT_TRUE(e4m3.precision.fixes_path(bs::ops::PathOp::linear));
  EXPECT_FALSE(e4m3.precision.fixes_path(bs::ops::PathOp::attention));
  const bs::WorkloadConfig e5m2 = bs::load_config_text(std::string(kBlock) + "precision: {weights: fp8_e5m2}\n", "t");
  EXPECT_EQ(e5m2.precision.weights, bs::DType::fp8_e5m2);
  EXPECT_FALSE(bs::load_config_text(kBlock, "t").precision.weight_only());
  // The oracle computes with the values of the codes (reference::blockref::dequantize_fp8_weights):
  // no FP8 term in the bound, which stays the dtype's own.
  EXPECT_EQ(bs::reference::workload_roundings(e5m2).fp8, 0);
  EXPECT_EQ(bs::reference::workload_error_bound(e5m2), bs::reference::workload_error_bound(bs::load_config_text(kBlock, "t")));

  expect_error_at(std::string(kBlock) + "precision: {weights: fp8_e4m3, gemm: fp8_e4m3}\n", 7, 22,
                  "precision.weights: and precision.gemm are two forms of FP8 weights");
  expect_error_at(std::string(kBlock) + "precision: {weights: fp8_e4m3, recipe: delayed}\n", 7, 40,
                  "precision.recipe: applies to FP8 GEMMs (precision.gemm); weight-only FP8 scales each weight row once");
  expect_error_at(std::string(kBlock) + "precision: {weights: int8}\n", 7, 22, "precision.weights: unknown weight dtype 'int8'");
  expect_error_at("workload: linear\nshape: {m: 4, n: 8, k: 8}\nprecision: {weights: fp8_e4m3}\n", 3, 22,
                  "precision.weights: weight-only FP8 runs in block, stack and decode workloads so far; workload linear");
  expect_error_at(std::string(kBlock) + "precision: {weights: fp8_e4m3}\nparallel: {tensor: 2}\n", 7, 22,
                  "precision.weights: weight-only FP8 runs on one rank so far; parallel.tensor is 2");
  expect_error_at(std::string(kBlock) + "paths: {linear: naive}\nprecision: {weights: fp8_e4m3}\n", 8, 22,
                  "precision.weights: the weight-only FP8 GEMMs have one path; paths.linear is naive: leave it at "
                  "epilogue");
}

TEST(Config, UnknownPathDtypeDeviceAndWorkload) {
  expect_error_at(std::string(kBlock) + "paths: {attention: flashy}\n", 7, 20,
                  "paths.attention: unknown attention path 'flashy'; did you mean 'flash'?");
  expect_error_at(std::string(kBlock) + "dtype: fp8\n", 7, 8, "dtype: unknown dtype 'fp8'");
  // FP8 is a storage type (runtime/dtype.h): named as such, not as unknown.
  expect_error_at(std::string(kBlock) + "dtype: fp8_e4m3\n", 7, 8,
                  "dtype: fp8_e4m3 is a storage type: a workload computes in f32, f16, bf16 (docs/FP8.md)");
  expect_error_at(std::string(kBlock) + "dtype: float8_e5m2\n", 7, 8, "dtype: fp8_e5m2 is a storage type");
  expect_error_at(std::string(kBlock) + "device: tpu\n", 7, 9, "device: unknown device 'tpu'");
  expect_error_at("workload: blocks\n", 1, 11, "workload: unknown workload 'blocks'; did you mean 'block'?");
  expect_error_at(std::string(kBlock) + "paths: {mlp: fused}\n", 7, 14, "paths.mlp: fused applies to gated MLPs");
  expect_error_at(std::string(kBlock) + "compare:\n  - {attention: naive}\n  - {atention: flash}\n", 9, 6,
                  "compare[1].atention: unknown key 'atention'; did you mean 'attention'?");
  expect_error_at("workload: matmul_add\nshape: {m: 4, n: 4, k: 4}\npaths: {attention: naive}\n", 3, 9,
                  "paths.attention: a attention path does not apply to workload matmul_add");  expect_error_at(std::string(kBlock) + "cpu: {gemm: mkl}\n", 7, 13,
                  "cpu.gemm: unknown GEMM library 'mkl' (expected one of auto, ");
  expect_error_at(std::string(kBlock) + "cpu: {gem: onednn}\n", 7, 7, "cpu.gem: unknown key 'gem'; did you mean 'gemm'?");
}

// cpu.gemm: auto by default; every linked library by name (the built-in one always).
TEST(Config, CpuGemmNamesALinkedLibrary) {
  EXPECT_EQ(bs::load_config_text(kBlock, "t").cpu.gemm, "auto");
  EXPECT_EQ(bs::load_config_text(kBlock, "t", {"cpu.gemm=builtin"}).cpu.gemm, "builtin");
  for (bs::cpu::GemmLibrary library : bs::cpu::linked_gemm_libraries()) {
    const std::string name = bs::cpu::gemm_library_name(library);
    EXPECT_EQ(bs::load_config_text(std::string(kBlock) + "cpu: {gemm: " + name + "}\n", "t").cpu.gemm, name);
  }
}

TEST(Config, StructuralMistakes) {
  expect_error_at(std::string(kBlock) + "seed: 1\nseed: 2\n", 8, 1, "seed: duplicate key 'seed'");
  expect_error_at("workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4}\ninput: {batch: 1, seq_len: 4}\n"
                  "shape: {m: 1, n: 1, k: 1}\n",
                  4, 1, "shape: does not apply to workload block");
  expect_error_at("workload: block\nmodel: {family: gpt2, d_model: 64, n_heads: 4, rope: true}\n", 2, 48,
                  "model.rope: is fixed by family gpt2");
  const std::string syntax = error_of("workload: block\nmodel: {family: gpt2\n");
  EXPECT_NE(syntax.find("YAML syntax error"), std::string::npos) << syntax;
  const std::string empty = error_of("");
  EXPECT_NE(empty.find("the config is empty"), std::string::npos) << empty;
}

TEST(Config, MissingFileIsAnInputError) {
  try {
    bs::load_config_file("/nonexistent/blockscope.yaml");
    FAIL() << "no error";
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(error.message().find("config '/nonexistent/blockscope.yaml': no such file"), std::string::npos)
        << error.message();
  }
}

TEST(Config, SetOverridesAreAppliedBeforeValidation) {
  const bs::WorkloadConfig c = bs::load_config_text(
      kBlock, "t", {"input.seq_len=7", "paths.attention=naive", "model.n_layers=3", "compare=[{linear: addmm}]"});
  EXPECT_EQ(c.input.seq_len, 7);
  EXPECT_EQ(c.paths.attention, bs::ops::AttentionPath::naive);
  EXPECT_EQ(c.model.n_layers, 3);
  ASSERT_EQ(c.compare.size(), 1u);
  EXPECT_EQ(c.compare[0].label, "linear=addmm");
  // A --set can create a section and change the workload.
  const bs::WorkloadConfig m = bs::load_default_config({"workload=mlp", "model={d_model: 32, d_ff: 64}",
                                                        "paths={mlp: naive}", "compare=[]"});
  EXPECT_EQ(m.kind, bs::WorkloadKind::mlp);
  EXPECT_EQ(m.model.d_ff, 64);
}

TEST(Config, SetErrorsNameTheSet) {
  auto message_of = [](const std::vector<std::string>& sets) {
    try {
      bs::load_config_text(kBlock, "t.yaml", sets);
    } catch (const bs::Error& error) {
      EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
      return error.message();
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  EXPECT_EQ(message_of({"model.d_model=abc"}).rfind("--set model.d_model=abc: model.d_model: expected an integer", 0), 0u)
      << message_of({"model.d_model=abc"});
  EXPECT_EQ(message_of({"model.d_modl=64"}).rfind("--set model.d_modl=64: model.d_modl: unknown key 'd_modl'; did you mean 'd_model'?", 0), 0u)
      << message_of({"model.d_modl=64"});
  EXPECT_EQ(message_of({"model.n_kv_heads=3"}).rfind("--set model.n_kv_heads=3: model.n_kv_heads: 3 does not divide n_heads = 4", 0), 0u)
      << message_of({"model.n_kv_heads=3"});
  EXPECT_NE(message_of({"model.d_model"}).find("--set model.d_model: expected key.sub=value"), std::string::npos);
  EXPECT_NE(message_of({"seed.x=1"}).find("--set seed.x=1: seed: expected an integer, got a map"), std::string::npos)
      << message_of({"seed.x=1"});
  EXPECT_NE(message_of({"seed=1", "seed.x=1"}).find("--set seed.x=1: 'seed' is a value ('1'), not a map of keys"),
            std::string::npos)
      << message_of({"seed=1", "seed.x=1"});
  EXPECT_NE(message_of({"model..d=1"}).find("empty name"), std::string::npos);
  EXPECT_NE(message_of({"model.d_model=[1,"}).find("not valid YAML"), std::string::npos);
}

TEST(Config, HuggingFaceConfigJsonSuppliesDims) {
  const std::string json = write_temp("config.json",
                                      "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 64,\n"
                                      "  \"num_attention_heads\": 4,\n  \"num_key_value_heads\": 2,\n"
                                      "  \"intermediate_size\": 96,\n  \"num_hidden_layers\": 3,\n"
                                      "  \"rms_norm_eps\": 1e-06,\n  \"rope_theta\": 500000.0,\n  \"vocab_size\": 128256\n}\n");
  const bs::WorkloadConfig c = bs::load_config_text(
      "workload: block\nmodel: {d_ff: 128}\ninput: {batch: 1, seq_len: 4}\nweights: {config: " + json + "}\n", "t");
  EXPECT_EQ(c.model.family, bs::ModelFamily::llama);
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.n_kv_heads, 2);
  EXPECT_EQ(c.model.d_ff, 128);  // the YAML wins over the JSON
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.model.norm_eps, 1e-6);

  // A bad value imported from the JSON is located in the JSON file.
  const std::string bad = write_temp("bad_config.json", "{\"model_type\": \"llama\", \"hidden_size\": 64,\n"
                                                        " \"num_attention_heads\": 4, \"num_key_value_heads\": 3,\n"
                                                        " \"intermediate_size\": 96}\n");
  try {
    bs::load_config_text("workload: block\ninput: {batch: 1, seq_len: 4}\nweights: {config: " + bad + "}\n", "t");
    FAIL() << "no error";
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.message().rfind(bad + ":2:51: model.n_kv_heads: 3 does not divide n_heads = 4", 0), 0u)
        << error.message();
  }
}

TEST(Config, WeightsSection) {
  const std::string file = write_temp("w.safetensors", "not read by the config parser");
  const std::string yaml = std::string(kBlock) + "weights: {file: " + file + ", layer: 2}\n";
  const bs::WorkloadConfig c = bs::load_config_text(yaml, "t");
  EXPECT_EQ(c.weights.init, bs::WeightInit::file);
  EXPECT_EQ(c.weights.layer, 2);
  expect_error_at(std::string(kBlock) + "weights: {init: file}\n", 7, 10, "weights.file: init: file needs weights.file");
  expect_error_at(std::string(kBlock) + "weights: {init: random, file: x.safetensors}\n", 7, 17,
                  "weights.init: is random but weights.file is set");
  expect_error_at(std::string(kBlock) + "weights: {file: /nonexistent/w.safetensors}\n", 7, 17,
                  "weights.file: cannot read '/nonexistent/w.safetensors': no such file");
}

TEST(Config, EditDistance) {
  EXPECT_EQ(bs::edit_distance("d_model", "d_model"), 0u);
  EXPECT_EQ(bs::edit_distance("d_modle", "d_model"), 2u);
  EXPECT_EQ(bs::edit_distance("", "abc"), 3u);
  EXPECT_EQ(bs::edit_distance("kitten", "sitting"), 3u);
}
