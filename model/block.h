// A transformer block (and a stack of them) built only from the public ops (ops/*/*.h).
//
//   gpt2    x + c_proj(attn(split(c_attn(ln_1(x)))));  then + c_proj(gelu_tanh(c_fc(ln_2(.))))
//   llama   x + o_proj(attn(rope(q_proj(rms(x))), rope(k_proj(.)), v_proj(.)));  then + SwiGLU MLP
//   custom  any mix: norm, activation, gated MLP, biases, GQA, RoPE, causal
//
// Profiler regions: each layer is a RegionScope "block.N" with "attn" (norm, projections,
// attention, residual) and "mlp" (norm, MLP, residual) inside, so ops read
// block.0/attn/softmax in the tables and in Nsight.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/kv_cache/kv_cache.h"
#include "ops/mlp/mlp.h"
#include "model/config.h"
#include "runtime/communicator.h"
#include "runtime/context.h"
#include "runtime/index_table.h"
#include "model/fp8_layer.h"
#include "model/weights.h"

namespace blockscope {

// One activation buffer of a block, for a model and input size.
struct BufferSpec {
  const char* name;  // the Block member it becomes ("q_lin"), for messages and tests
  Shape shape;
};
// Every activation buffer a block allocates, T = batch · seq tokens: the one list the Block
// constructor allocates from and the workload's memory estimate sums. GPT-2 has the fused
// qkv [T, 3d]; the others q_lin, k_lin, v_lin.
std::vector<BufferSpec> block_buffer_specs(const ModelConfig& model, int64_t batch, int64_t seq_len);
// A stack of n_layers: one block's buffers (the layers share them) and the ping/pong tensors
// [B, S, d] between layers (ping from 2 layers, pong from 3).
std::vector<BufferSpec> stack_buffer_specs(const ModelConfig& model, int64_t n_layers, int64_t batch, int64_t seq_len);

// Prefill into a KV cache: after RoPE, rows s < counts[b] of sequence b's keys and values go
// to positions starts[b] + s of the layer's cache (a ragged batch's padding rows are not
// written).
struct CacheWrite {
  ops::KvCache* cache = nullptr;
  IndexView starts, counts;
};

// One decode step's per-sequence indices: the new token's position (its RoPE angle and where
// its key and value go), the length attended to (position + 1), and all-ones (rows written).
struct DecodeStep {
  IndexView positions, lengths, ones;
};

class Block {
 public:
  // Binds the weights of layer `layer` (names from block_weight_specs) and allocates every
  // activation buffer for inputs [batch, seq_len, d_model] once, so forward() allocates
  // nothing of its own — or, with `buffers_of` (same model and sizes), uses that block's: the
  // layers of a stack run one after another, so they share one set (never allocated twice).
  Block(Context& ctx, const ModelConfig& model, DType dtype, const WeightSet& weights, int64_t layer, int64_t batch,
        int64_t seq_len, const Block* buffers_of = nullptr);

  // Packs the concatenated gate|up weight once when a fused MLP path will run (not after
  // use_fp8 or use_fp8_weights: their MLPs read FP8 copies of the gate and up weights).
  void prepare(Context& ctx, const PathConfig& paths);

  // x: [B, S, d_model] contiguous -> y: [B, S, d_model] contiguous (y must not alias x).
  // Launches work only: no host synchronisation.
  // With `write`, the keys and values are also written to its cache (prefill).
  void forward(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths, const CacheWrite* write = nullptr);

  // One decode step, on a Block built for seq_len 1: x [B, 1, d] -> y [B, 1, d]. The new
  // token's key and value are appended to `cache` at step.positions, and its query attends to
  // step.lengths positions (ops/decode_attention). paths.attention must have a decode form.
  void decode(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths, ops::KvCache& cache,
              const DecodeStep& step);

  // Bytes of the activation buffers this block holds.
  size_t buffer_bytes() const;

  // After forward(): x + the attention sublayer, [T, d] (what the MLP sublayer adds to). The
  // block tests measure each sublayer through it.
  const Tensor& residual() const { return residual_; }
  // After forward(): what the path ops read and wrote, by name: "attention.q", "attention.k",
  // "attention.v" [B, H(kv), S, D] and "attention.out" [B, H, S, D]; "out_proj.input"
  // [B, S, H·D] and "out_proj.out" [T, d] (the attention's output projection, a linear);
  // "mlp.input" and "mlp.out" [T, d]. `check` measures each op on its own inputs with them.
  std::vector<std::pair<std::string, Tensor>> op_tensors() const;

  // Tensor parallelism (model/tensor_parallel.h): this block is one rank's shard, and the
  // attention output projection's and the MLP's partial sums are all-reduced over `comm`
  // before each residual add. nullptr (the default): one rank, no collective.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  // Sequence parallelism (Megatron's, with set_communicator's group of R ranks): the norms and
  // residual adds run on this rank's block of the T tokens (rows [rank·T/R, (rank + 1)·T/R)),
  // an all-gather before each column-parallel GEMM and a reduce-scatter in place of each
  // all-reduce — the same bytes on the wire, 1/R of the norm work. The block reads only its
  // rows of x and writes only its rows of y, unless `gather_output` (a single block, a stack's
  // last layer): then y is whole on every rank. Two [T/R, d] row buffers, scratch within a
  // layer: `rows_of`'s when given (a stack's later layers share the first's).
  void split_sequence(Context& ctx, bool gather_output, const Block* rows_of = nullptr);

  // precision.gemm FP8 (docs/FP8.md, model/fp8_layer.h): every GEMM of the block in FP8 from
  // here on -- the projections' and the MLP's weights quantized now (GPT-2's [in, out] ones
  // transposed first), each GEMM input cast per forward by the recipe (q, k and v read one cast
  // of the normed input). Prefill only (forward()); one rank, no sequence parallelism.
  void use_fp8(Context& ctx, const PrecisionConfig& precision);
  // precision.weights FP8 (weight-only, docs/FP8.md): from here on the projections' and the MLP's
  // weights are read as FP8 codes of `format` with one scale per output row (made now; GPT-2's
  // [in, out] ones read transposed), each GEMM one ops::fp8_weight_linear on the run's-dtype
  // activations. Prefill and decode alike; one rank, no sequence parallelism. With `codes_of` (a
  // block of the same layer after its use_fp8_weights: a decode's prefill and step blocks), its
  // codes are shared, not made again.
  void use_fp8_weights(Context& ctx, DType format, const Block* codes_of = nullptr);
  // Bytes of the FP8 weight copies use_fp8_weights made or shares (0 without).
  size_t fp8_weight_bytes() const;
  // use_fp8 with delayed scaling: its cast inputs' saturation counts, "block.N." + "attention.input",
  // "out_proj.input", "mlp.input", "mlp.hidden" (Fp8Input::saturation); none otherwise.
  void add_fp8_saturation(Fp8SaturationCounts& out) const;

 private:
  void attention_part(Context& ctx, const Tensor& x2d, const PathConfig& paths, const CacheWrite* write);
  void project_qkv(Context& ctx, const PathConfig& paths);
  void decode_attention_part(Context& ctx, const Tensor& x2d, const PathConfig& paths, ops::KvCache& cache,
                             const DecodeStep& step);
  void check_io(const Tensor& x, const Tensor& y, const PathConfig& paths) const;
  // The output projection of the heads side by side, heads2d [T, H·D] -> proj_, then
  // residual_ = x2d + proj_ (prefill and decode alike).
  void project_and_add(Context& ctx, const Tensor& x2d, const Tensor& heads2d, const PathConfig& paths);
  void mlp_part(Context& ctx, Tensor& y2d, const PathConfig& paths);
  // Sequence parallelism: this rank's block of rows of a [T, d] tensor.
  Tensor my_rows(const Tensor& t2d) const;
  // norm(x_rows) on this rank's rows, all-gathered into normed_ (the GEMMs' whole input).
  void norm_and_gather(Context& ctx, const Tensor& x_rows, const Tensor& weight, const Tensor& bias);
  void norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) const;
  // Every activation buffer below with its block_buffer_specs name (allocation, sizes and
  // sharing all walk it).
  std::array<std::pair<const char*, Tensor*>, 13> activation_buffers();

  ModelConfig model_;
  int64_t layer_, batch_, seq_;
  struct Fp8Gemms;                    // use_fp8's weights and inputs (block.cpp)
  std::shared_ptr<Fp8Gemms> fp8_;      // null: the GEMMs run in the run's dtype
  // Either FP8 form: the MLP reads FP8 copies, never the gate|up pack.
  bool fp8_gemms_or_weights() const { return fp8_ != nullptr || fp8_weights_ != nullptr; }
  struct Fp8WeightGemms;               // use_fp8_weights's weights (block.cpp)
  std::shared_ptr<Fp8WeightGemms> fp8_weights_;  // null: the weights as loaded
  Communicator* comm_ = nullptr;  // tensor parallelism: the ranks proj_ and mlp_out_ are summed over
  bool sequence_parallel_ = false, gather_output_ = false;  // split_sequence
  Tensor rows_normed_, rows_sum_;  // sequence parallelism: [T/R, d] each, this rank's rows
  // Weights (bound from the WeightSet; shared storage, no copy).
  Tensor norm1_w_, norm1_b_, norm2_w_, norm2_b_;
  Tensor qkv_w_, qkv_b_;                  // gpt2: fused c_attn [d, 3d] (in, out)
  Tensor q_w_, k_w_, v_w_, o_w_;          // llama/custom: [out, in]; gpt2: o_w_ = c_proj [d, d] (in, out)
  Tensor q_b_, k_b_, v_b_, o_b_;
  ops::MlpWeights mlp_;
  // Activations. T = batch · seq tokens.
  Tensor normed_;                          // [T, d]
  Tensor qkv_;                             // gpt2: [T, 3d]
  Tensor q_lin_, k_lin_, v_lin_;           // llama/custom: [T, H·D], [T, Hkv·D], [T, Hkv·D]
  Tensor q_, k_, v_;                       // [B, H, S, D], [B, Hkv, S, D] contiguous
  Tensor attn_out_;                        // [B, H, S, D]
  Tensor merged_;                          // [B, S, H·D]: heads back side by side
  Tensor proj_;                            // [T, d]
  Tensor residual_;                        // [T, d]: x + attention
  Tensor mlp_out_;                         // [T, d]
};

// n_layers blocks in sequence (a "stack" workload); layer i's weights are named with index i.
class BlockStack {
 public:
  BlockStack(Context& ctx, const ModelConfig& model, DType dtype, const WeightSet& weights, int64_t n_layers,
             int64_t batch, int64_t seq_len);
  void prepare(Context& ctx, const PathConfig& paths);
  // With `caches` (one per layer), prefill: layer i's keys and values go to caches[i]
  // (CacheWrite's starts and counts).
  void forward(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths,
               std::vector<ops::KvCache>* caches = nullptr, IndexView starts = {}, IndexView counts = {});
  // One decode step through every layer (a stack built for seq_len 1), layer i on caches[i].
  void decode(Context& ctx, const Tensor& x, Tensor& y, const PathConfig& paths, std::vector<ops::KvCache>& caches,
              const DecodeStep& step);
  int64_t layers() const { return static_cast<int64_t>(blocks_.size()); }
  // Every layer a tensor-parallel shard (Block::set_communicator).
  void set_communicator(Communicator* comm) {
    for (Block& block : blocks_) block.set_communicator(comm);
  }
  // Sequence parallelism (Block::split_sequence): the layers pass their rows on, the last one
  // gathers the whole output.
  void split_sequence(Context& ctx) {
    for (size_t i = 0; i < blocks_.size(); ++i)
      blocks_[i].split_sequence(ctx, i + 1 == blocks_.size(), i > 0 ? &blocks_.front() : nullptr);
  }
  // Every layer's GEMMs in FP8 (Block::use_fp8), each layer with its own scales.
  void use_fp8(Context& ctx, const PrecisionConfig& precision) {
    for (Block& block : blocks_) block.use_fp8(ctx, precision);
  }
  // Every layer's weights as FP8 codes (Block::use_fp8_weights): made, or shared with `codes_of`'s
  // layers (a stack of the same weights, after its own call).
  void use_fp8_weights(Context& ctx, DType format, const BlockStack* codes_of = nullptr) {
    for (size_t i = 0; i < blocks_.size(); ++i)
      blocks_[i].use_fp8_weights(ctx, format, codes_of != nullptr ? &codes_of->blocks_.at(i) : nullptr);
  }
  Fp8SaturationCounts fp8_saturation() const {
    Fp8SaturationCounts out;
    for (const Block& block : blocks_) block.add_fp8_saturation(out);
    return out;
  }
  // Bytes of the FP8 weight copies, every layer's.
  size_t fp8_weight_bytes() const {
    size_t total = 0;
    for (const Block& block : blocks_) total += block.fp8_weight_bytes();
    return total;
  }
  size_t buffer_bytes() const;
  // After forward(): the last layer's x + attention, [T, d].
  const Tensor& last_residual() const { return blocks_.back().residual(); }
  std::vector<std::pair<std::string, Tensor>> last_op_tensors() const { return blocks_.back().op_tensors(); }
  // After forward(x, ...): the last layer's input, [B, S, d] (x itself for one layer; layer i
  // writes ping_ when i is even, pong_ when odd).
  const Tensor& last_input(const Tensor& x) const {
    return blocks_.size() == 1 ? x : (blocks_.size() % 2 == 0 ? ping_ : pong_);
  }

 private:
  // Runs `layer(block, in, out, i)` for every layer, ping-ponging between the buffers.
  template <typename Layer>
  void each_layer(const Tensor& x, Tensor& y, Layer layer);

  std::vector<Block> blocks_;
  Tensor ping_, pong_;  // [B, S, d] between layers
};

}  // namespace blockscope
