// Workload configs: strict YAML (yaml-cpp) read into a typed WorkloadConfig.
//
// Every problem is an Error(invalid_input) whose message starts with where it is and which key:
//   configs/x.yaml:7:3: model.n_kv_heads: 5 does not divide n_heads = 12
//   --set model.d_model=7: model.d_model: ...
// Unknown keys get a "did you mean" (edit distance). `--set key.sub=value` overrides are
// applied to the YAML tree before validation, so they are checked exactly like the file.
//
// Key names are blockscope's own. Where Hugging Face uses another name we keep ours in
// the YAML (d_model, not hidden_size) and say so in the error when a user writes the HF name;
// HF names are read only from a Hugging Face config.json given as `weights.config`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/common/activations.h"
#include "ops/common/paths.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/precision/precision.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace blockscope {

enum class WorkloadKind { block, stack, matmul_add, linear, mlp, attention, softmax, decode };
enum class ModelFamily { gpt2, llama, custom };
enum class NormKind { layernorm, rmsnorm };
enum class WeightInit {
  random,     // Hugging Face-like: weights N(0, 0.02), norm weights 1, biases 0
  perturbed,  // as random, but norm weights 1 + N(0, 0.1) and biases N(0, 0.02): every
              // parameter then matters, so an outside check (torch_reference.py) sees misuse
  scaled,     // as perturbed, but weights N(0, 1/fan_in): each sublayer's output is on the
              // scale of its input, as in a trained model, so its errors are not hidden under the
              // residual (tests, `check`)
  file,       // a safetensors file with Hugging Face names
};

// Where a workload kind's sizes come from.
enum class WorkloadSizes {
  model_and_input,  // model: and input: {batch, seq_len} (block, stack, mlp, attention)
  gemm_shape,       // shape: {m, n, k}
  rows_shape,       // shape: {m, n}, m rows of n
  decode,           // model: and decode: {batch, prompt_len or prompt_lens, new_tokens, kv_cache}
};

// What a workload kind is, in one row per kind (model/config.cpp): the config reader, the
// size check, the run's title and the runners read it instead of listing kinds.
struct WorkloadTraits {
  WorkloadKind kind;
  const char* name;                    // as configs spell it
  WorkloadSizes sizes;
  bool whole_block;                    // a transformer block (or a stack of them): family, layers, HF import
  std::vector<ops::PathOp> path_ops;   // the ops whose paths it uses, in PathOp order
};
const WorkloadTraits& workload_traits(WorkloadKind kind);

const char* workload_kind_name(WorkloadKind kind);
// Every workload kind, in enum order, and their config names; the parse of one name.
const std::vector<WorkloadKind>& workload_kinds();
std::vector<std::string> workload_names();
bool parse_workload_kind(const std::string& text, WorkloadKind* out);  // false if unknown
// The ops whose paths a workload uses, in PathOp order (block: all three; softmax: none).
std::vector<ops::PathOp> path_ops_for(WorkloadKind kind);
const char* family_name(ModelFamily family);
const char* norm_name(NormKind norm);
const char* weight_init_name(WeightInit init);
bool is_block_workload(WorkloadKind kind);  // block, stack or decode

struct WorkloadConfig;
// Transformer layers a workload runs: model.n_layers for stack and decode, 1 for block, 0 for
// the single-module kinds.
int64_t layers_run(const WorkloadConfig& config);

struct ModelConfig {
  ModelFamily family = ModelFamily::custom;
  int64_t d_model = 0;     // Hugging Face: hidden_size (GPT-2: n_embd)
  int64_t n_heads = 0;     // num_attention_heads (n_head)
  int64_t n_kv_heads = 0;  // num_key_value_heads; fewer than n_heads = GQA
  int64_t head_dim = 0;    // default d_model / n_heads
  int64_t d_ff = 0;        // intermediate_size (n_inner; GPT-2 default 4 * d_model)
  int64_t n_layers = 1;    // num_hidden_layers (n_layer): blocks in a stack
  double norm_eps = 1e-5;  // layer_norm_epsilon / rms_norm_eps
  double rope_theta = 10000.0;
  // Fixed by gpt2 and llama; explicit for custom.
  NormKind norm = NormKind::layernorm;
  ops::Activation activation = ops::Activation::gelu_tanh;
  bool gated = false;  // gated MLP: down(act(gate(x)) * up(x))
  bool bias = true;    // biases on the linear layers (and LayerNorm)
  bool rope = false;
  bool causal = true;
};

struct InputConfig {
  int64_t batch = 0;
  int64_t seq_len = 0;
  // Optional safetensors file whose tensor "input" replaces the seeded input (block, stack,
  // mlp); a --dump file works, so a dumped run can be replayed exactly.
  std::string file;
};

// `decode:` -- prefill a batch of prompts into a KV cache, then new_tokens decode steps of one
// token per sequence (model/workload_kinds.cpp, DecodeRunner).
struct KvCacheConfig {
  ops::KvLayout layout = ops::KvLayout::contiguous;
  int64_t page_size = 16;  // paged: positions per page, a power of two
  // Positions each sequence's cache can hold, allocated for every sequence: contiguous, one page
  // of max_len; paged, the pages that cover max_len (a reservation per sequence). Not given
  // (max_len_given false): the longest prompt + new_tokens, and a paged sequence gets only the
  // pages its own prompt and new tokens need.
  int64_t max_len = 0;
  bool max_len_given = false;
};

struct DecodeConfig {
  // One prompt length per sequence; `prompt_len: P` with `batch: B` gives B of P, and
  // `prompt_lens: [512, 77]` a ragged batch (batch = its length).
  std::vector<int64_t> prompt_lens;
  int64_t new_tokens = 0;
  KvCacheConfig kv_cache;
  // CUDA: capture one decode step (every layer) as a CUDA graph and replay it per token, the
  // step's index in device memory (ops/decode_step). CPU: accepted, a no-op (said in the output).
  bool cuda_graph = false;

  int64_t batch() const { return static_cast<int64_t>(prompt_lens.size()); }
  int64_t longest_prompt() const;
  // The positions sequence b needs: its prompt and the new tokens.
  int64_t positions(int64_t b) const { return prompt_lens[static_cast<size_t>(b)] + new_tokens; }
  // Positions decode step t attends to, all sequences together: each its prompt, the t tokens
  // before and the new one.
  int64_t attended(int64_t t) const;
  bool ragged() const;
};

// `parallel:` -- Megatron-style tensor parallelism over `tensor` ranks (model/tensor_parallel.h):
// each rank holds 1/tensor of the heads, the kv heads and d_ff; an all-reduce after the attention
// output and the MLP's second projection. Launched with one process per rank (mpirun -np N).
struct ParallelConfig {
  int64_t tensor = 1;
  // Megatron's sequence parallelism: the norms and residual adds on each rank's block of the
  // B·S tokens, a reduce-scatter and an all-gather in place of each all-reduce.
  bool sequence_parallel = false;
};

// matmul_add: a [m, k] · b [k, n] + c [n]; linear: x [m, k] · W[n, k]ᵀ + b; softmax: x [m, n].
struct ShapeConfig {
  int64_t m = 0, n = 0, k = 0;
};

struct WeightsConfig {
  WeightInit init = WeightInit::random;
  std::string file;    // safetensors with Hugging Face names (init: file)
  int64_t layer = 0;   // first layer taken from the file
  std::string config;  // a Hugging Face config.json that supplies model dims
};

struct PathConfig {
  ops::AttentionPath attention = ops::AttentionPath::flash;
  ops::LinearPath linear = ops::LinearPath::epilogue;
  ops::MlpPath mlp = ops::MlpPath::epilogue;  // default: epilogue for plain MLPs, fused for gated

  // The path chosen for `op`, by its config name ("flash").
  const char* name(ops::PathOp op) const;
  // Sets op's path from its config name; false when it is not one of op's paths.
  bool set(ops::PathOp op, const std::string& name);
};
// "attention=flash,linear=epilogue,mlp=fused".
std::string paths_str(const PathConfig& paths);
// The paths of `ops` only: "attention=naive,mlp=fused" ("" for none).
std::string paths_str(const PathConfig& paths, const std::vector<ops::PathOp>& ops);
// Only the paths `kind` uses: "mlp=fused" for an MLP; the workload's name when it has no
// paths ("softmax").
std::string paths_str(const PathConfig& paths, WorkloadKind kind);

// `precision:` -- FP8 in two forms (docs/FP8.md), one at a time:
//   gemm: fp8_e4m3     the GEMMs in FP8: each weight quantized once when the workload is made
//                      (per tensor, from its own amax), each input every step by the recipe, one
//                      FP8 GEMM (ops/fp8_linear) into the workload's dtype;
//   weights: fp8_e4m3  weight-only FP8 (or fp8_e5m2): each weight stored as FP8 codes with one
//                      scale per output row, made once; the inputs stay in the workload's dtype
//                      and each GEMM widens the codes as it streams them (ops/fp8_weight_linear).
enum class Fp8Recipe {
  current,  // amax of this step's input, then its scale, then the cast (Transformer Engine's current scaling)
  delayed,  // the cast with the scale of an amax history, then the scale update (DelayedScaling)
};
const char* fp8_recipe_name(Fp8Recipe recipe);

struct PrecisionConfig {
  DType gemm = DType::f32;  // the GEMM's operands: fp8_e4m3, or (not FP8) the workload's dtype
  Fp8Recipe recipe = Fp8Recipe::current;
  int64_t amax_history = 16;  // delayed: steps of amax kept (Transformer Engine's amax_history_len)
  ops::AmaxAlgo amax_algo = ops::AmaxAlgo::max;
  int margin = 0;
  bool fast_accum = false;
  DType weights = DType::f32;  // weight-only FP8's code format, or (not FP8) the workload's dtype

  bool fp8() const { return is_fp8(gemm); }
  bool weight_only() const { return is_fp8(weights); }
  // Whether this precision fixes op's path: FP8 GEMMs (either form) have one path (the config's,
  // its epilogues); the attention, in the run's dtype, keeps its paths.
  bool fixes_path(ops::PathOp op) const { return (fp8() || weight_only()) && op != ops::PathOp::attention; }
};

struct RunConfig {
  int warmup = 3;
  int iters = 10;
  bool cuda_graph = false;
  bool allow_tf32 = false;
  // Diagnosis: after every op, name the first whose output holds a NaN or an infinity (slow:
  // synchronises and reads every output back).
  bool check_finite = false;
};

// `cpu:` -- how the CPU backend runs GEMMs.
struct CpuConfig {
  // "auto" (loaded weights' GEMMs planned per shape by timing; runtime/cpu/gemm.h) or one linked
  // library for every GEMM: "onednn", "openblas", "builtin".
  std::string gemm = "auto";
};

struct ProfileConfig {
  int wait = 1, warmup = 1, active = 5;
  std::string sort_by = "self_device";  // a profiler::TableOptions key (torch's names accepted)
  int row_limit = 20;
  bool group_by_shape = false;  // one op-table row per (op, input shapes)
  std::string trace;  // Chrome trace path, empty = none
  bool memory = true;
};

// One entry of `compare:`: the base paths with some overridden.
struct Variant {
  std::string label;  // "attention=inplace"
  PathConfig paths;
};

struct WorkloadConfig {
  std::string name;
  std::string source;  // file path, "<default>", or the label given to load_config_text
  WorkloadKind kind = WorkloadKind::block;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N (resolve_device)
  DType dtype = DType::f32;
  uint64_t seed = 0;
  ModelConfig model;
  InputConfig input;
  ShapeConfig shape;
  DecodeConfig decode;  // workload: decode (input.batch and input.seq_len then mirror its batch and longest prompt)
  ParallelConfig parallel;
  WeightsConfig weights;
  PathConfig paths;
  PrecisionConfig precision;
  RunConfig run;
  CpuConfig cpu;
  ProfileConfig profile;
  std::vector<Variant> compare;
  // Every key of the YAML as read, after --set, flattened in file order ("model.d_model" ->
  // "768", "compare[1].paths.attention" -> "flash"): what the ranks of an mpirun compare before
  // any work (tools/cli/rank_agreement.h). Keys left out take the same defaults everywhere.
  std::vector<std::pair<std::string, std::string>> keys;
};

// Reads and validates a YAML file; `sets` are "key.sub=value" overrides (--set).
WorkloadConfig load_config_file(const std::string& path, const std::vector<std::string>& sets = {});
// The same from text; `source` names it in messages.
WorkloadConfig load_config_text(const std::string& text, const std::string& source,
                                const std::vector<std::string>& sets = {});
// The default config compiled into the binary (configs/default.yaml at configure time).
const char* default_config_yaml();
WorkloadConfig load_default_config(const std::vector<std::string>& sets = {});

// "auto" -> cuda:0 when a GPU is usable, else cpu. Throws InputError for a bad name.
Device resolve_device(const std::string& text);

// Levenshtein distance (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace blockscope
