// Decode attention with a KV cache (ops/decode_attention/decode_attention.h): one new query per
// sequence against every cached key and value of that sequence, on both decode paths — naive
// (3 kernels, the scores [B, H, S] materialised) and flash (1 kernel; on CUDA 2 when the keys
// are split over blocks, flash-decoding) — over a contiguous cache (one page of S positions per
// sequence, Hugging Face's static cache) and a paged one (16 positions per page, the pages
// handed out in a shuffled order by make_kv_cache's shuffle_seed, as vLLM's allocator leaves
// them).
//
// The key: decode_attention/<path>/<dtype>/B=..,H=..,Hkv=..,D=..,S=..,paged=0|1,split_keys=0|1
// with S every sequence's cache length (L = B · S rows read) and split_keys the catalogue's flag
// for the call: the flash path on CUDA when flash_decode_splits(...) > 1 on this GPU's SM count
// (always 0 on CPU), so tools/ci/bench_gate.py gets the kernel list from the key alone.
//
// Head layouts: TinyLlama's H = 32, Hkv = 4, D = 64 on every batch (1, 8, 32) and cache length
// (128, 1024, 8192); Llama-3-8B's H = 32, Hkv = 8, D = 128 on fewer (CPU) or all (CUDA). The
// cache is filled once in setup with kv_cache_write (random rows, outside the timed region);
// the timed call is one decode_attention. CPU: B · S <= 65536 (drops B = 32 at S = 8192, so a
// full run stays within a few minutes on 2 cores); CUDA: every combination.
//
// Whole decode steps (model/block.h's BlockStack::decode: norm, q/k/v GEMMs at M = B, RoPE, the
// cache write, decode attention, o_proj, the MLP) on one TinyLlama-1.1B layer (d 2048, 32 heads
// on 4 kv heads, D 64, gated MLP 5632), eager and — on CUDA — replayed from a CUDA graph
// (model/step_graph.h, as decode.cuda_graph does), so the pair shows the launch overhead a graph
// removes. The key: decode_step/<eager|graph>/<dtype>/model=tinyllama,B=..,S=..,paged=0|1 with
// S the cache length the step attends to; each iteration is the same step (position S - 1: the
// cache row it writes is rewritten), the cache filled once in setup. CPU: B 1 and 8 at S 1024;
// CUDA: B 1, 8, 32 at S 128, 1024, 8192. Beside each eager step, the same step with weight-only
// FP8 (precision.weights: fp8_e4m3, Block::use_fp8_weights): decode_step/fp8_weights/<dtype>/...,
// its GEMMs streaming e4m3 codes (half of bf16's weight bytes, a quarter of f32's).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "bench/support/bench_support.h"
#include "model/block.h"
#include "model/config.h"
#include "model/step_graph.h"
#include "model/weights.h"
#include "ops/decode_attention/decode_attention.h"
#include "ops/kv_cache/kv_cache.h"
#include "runtime/index_table.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_backend.h"
#endif

namespace blockscope::bench {
namespace {

struct DecodeShape {
  int64_t batch, heads, kv_heads, head_dim, length;
};

constexpr int64_t kPageSize = 16;
constexpr uint64_t kShuffleSeed = 7;
constexpr int64_t kFillChunk = 1024;  // positions per kv_cache_write while filling (bounds setup memory)

const std::vector<ops::AttentionPath> kPaths = {ops::AttentionPath::naive, ops::AttentionPath::flash};

// The SM count the CUDA flash path plans its split with (0 on CPU: never split there).
int sm_count(Device device) {
#ifdef BLOCKSCOPE_WITH_CUDA
  if (device.is_cuda()) return cuda_backend(context_for(device)).properties().multiProcessorCount;
#endif
  (void)device;
  return 0;
}

// Every position [0, length) of every sequence's cache: one chunk of random rows written at each
// chunk's start (the same rows repeat every kFillChunk positions; only the time is measured).
void fill_cache(Context& ctx, ops::KvCache& cache, DType dtype, int64_t batch, int64_t length) {
  const int64_t kv_heads = cache.shape.kv_heads, head_dim = cache.shape.head_dim;
  const int64_t chunk = std::min(length, kFillChunk);
  const Tensor k = random_tensor(ctx, {batch, kv_heads, chunk, head_dim}, dtype, 41);
  const Tensor v = random_tensor(ctx, {batch, kv_heads, chunk, head_dim}, dtype, 42);
  for (int64_t start = 0; start < length; start += chunk) {
    const int64_t rows = std::min(chunk, length - start);
    const IndexTable starts(ctx, std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(start)), 1,
                            batch);
    const IndexTable counts(ctx, std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(rows)), 1, batch);
    ops::kv_cache_write(ctx, k, v, cache, starts.row(0), counts.row(0));
  }
  ctx.synchronize();
}

void register_decode(Device device, DType dtype, const DecodeShape& s, ops::KvLayout layout,
                     ops::AttentionPath path) {
  const bool paged = layout == ops::KvLayout::paged;
  const int sms = sm_count(device);
  const bool split_keys = device.is_cuda() && path == ops::AttentionPath::flash &&
                          ops::flash_decode_splits(s.batch, s.heads, s.kv_heads, s.head_dim, s.length, sms) > 1;
  Case c;
  c.key = workload_key("decode_attention", ops::path_name(path), dtype,
                       {{"B", s.batch},
                        {"H", s.heads},
                        {"Hkv", s.kv_heads},
                        {"D", s.head_dim},
                        {"S", s.length},
                        {"paged", paged ? 1 : 0},
                        {"split_keys", split_keys ? 1 : 0}});
  c.device = device;
  c.dtype = dtype;
  // Bytes: q and out once, every cached key and value row once (L = B · S rows per tensor).
  set_cost(c, "decode_attention",
           {ops::path_name(path), "",
            {{"B", s.batch}, {"H", s.heads}, {"Hkv", s.kv_heads}, {"D", s.head_dim}, {"L", s.batch * s.length}},
            {{"split_keys", split_keys}}});
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    ops::KvCacheShape shape;
    shape.layout = layout;
    shape.kv_heads = s.kv_heads;
    shape.head_dim = s.head_dim;
    shape.page_size = paged ? kPageSize : s.length;
    shape.positions.assign(static_cast<size_t>(s.batch), s.length);
    ops::KvCache cache = ops::make_kv_cache(ctx, shape, dtype, paged ? kShuffleSeed : 0);
    fill_cache(ctx, cache, dtype, s.batch, s.length);
    const IndexTable lengths(ctx, std::vector<int32_t>(static_cast<size_t>(s.batch), static_cast<int32_t>(s.length)),
                             1, s.batch);
    Tensor q = random_tensor(ctx, {s.batch, s.heads, s.head_dim}, dtype, 43);
    Tensor out = ctx.empty({s.batch, s.heads, s.head_dim}, dtype);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    return [&ctx, q, cache, lengths, out, path, scale]() mutable {
      ops::decode_attention(ctx, q, cache, lengths.row(0), out, path, scale);
    };
  });
}

// One TinyLlama-1.1B layer (smoke: a tiny Llama layer of the same form).
ModelConfig step_model(bool smoke) {
  const std::string dims = smoke ? "d_model: 64, n_heads: 4, n_kv_heads: 2, d_ff: 96"
                                 : "d_model: 2048, n_heads: 32, n_kv_heads: 4, d_ff: 5632";
  return load_config_text("workload: block\nmodel: {family: llama, " + dims + ", n_layers: 1}\ninput: {batch: 1, seq_len: 1}\n", "decode_bench").model;
}

// How a step runs: eager, replayed from a CUDA graph, or eager on weight-only FP8 weights.
enum class StepKind { eager, graph, fp8_weights };
const char* step_kind_name(StepKind kind) {
  return kind == StepKind::eager ? "eager" : kind == StepKind::graph ? "graph" : "fp8_weights";
}

void register_step(Device device, DType dtype, int64_t batch, int64_t length, ops::KvLayout layout, StepKind kind) {
  const bool paged = layout == ops::KvLayout::paged, graph = kind == StepKind::graph;
  const bool smoke = options().smoke;
  Case c;
  c.key = std::string("decode_step/") + step_kind_name(kind) + "/" + dtype_name(dtype) + "/model=" +
          (smoke ? "tiny" : "tinyllama") + ",B=" + std::to_string(batch) + ",S=" + std::to_string(length) +
          ",paged=" + (paged ? "1" : "0");
  c.device = device;
  c.dtype = dtype;
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    const ModelConfig model = step_model(smoke);
    auto weights = std::make_shared<WeightSet>();
    init_weights(ctx, block_weight_specs(model, 0), dtype, 5, WeightInit::scaled, *weights);
    // Read-only, as a workload's loaded weights are: the CPU's GEMM planner may pack them.
    for (const auto& [name, weight] : weights->items()) weight.storage()->set_read_only();
    PathConfig paths;
    paths.attention = ops::AttentionPath::flash;
    paths.mlp = ops::MlpPath::fused;  // gate|up in one GEMM, as the shipped Llama decode configs
    auto stack = std::make_shared<BlockStack>(ctx, model, dtype, *weights, 1, batch, 1);
    if (kind == StepKind::fp8_weights) stack->use_fp8_weights(ctx, DType::fp8_e4m3);
    stack->prepare(ctx, paths);
    ops::KvCacheShape shape;
    shape.layout = layout;
    shape.kv_heads = model.n_kv_heads;
    shape.head_dim = model.head_dim;
    shape.page_size = paged ? kPageSize : length;
    shape.positions.assign(static_cast<size_t>(batch), length);
    auto caches = std::make_shared<std::vector<ops::KvCache>>();
    caches->push_back(ops::make_kv_cache(ctx, shape, dtype, paged ? kShuffleSeed : 0));
    fill_cache(ctx, caches->front(), dtype, batch, length - 1);
    const auto table = [&](int32_t value) {
      return std::make_shared<IndexTable>(ctx, std::vector<int32_t>(static_cast<size_t>(batch), value), 1, batch);
    };
    const auto positions = table(static_cast<int32_t>(length - 1)), lengths = table(static_cast<int32_t>(length)),
               ones = table(1);
    const Tensor x = random_tensor(ctx, {batch, 1, model.d_model}, dtype, 44);
    Tensor y = ctx.empty({batch, 1, model.d_model}, dtype);
    auto step = [&ctx, weights, stack, caches, positions, lengths, ones, x, y, paths]() mutable {
      stack->decode(ctx, x, y, paths, *caches, DecodeStep{positions->row(0), lengths->row(0), ones->row(0)});
    };
    if (!graph) return step;
    step();  // eagerly once: RoPE table and GEMM plans, which a capture cannot make
    auto captured = std::make_shared<StepGraph>();
    return [&ctx, captured, step]() mutable { captured->run(ctx, step); };
  });
}

void register_all() {
  const bool smoke = options().smoke;
  const std::vector<ops::KvLayout> layouts = {ops::KvLayout::contiguous, ops::KvLayout::paged};
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<DecodeShape> shapes;
    if (smoke) {
      // Tiny; on CUDA the first splits its keys (B · Hkv = 2 blocks, 3 splits of >= 256 keys)
      // and the second does not (one split: fewer than 256 keys).
      dtypes = {DType::f32};
      shapes = {{1, 4, 2, 32, 600}, {2, 4, 1, 16, 100}};
    } else {
      dtypes = device.is_cpu() ? std::vector<DType>{DType::f32, DType::bf16} : std::vector<DType>{DType::bf16, DType::f16};
      for (int64_t batch : {1, 8, 32})
        for (int64_t length : {128, 1024, 8192}) {
          if (device.is_cpu() && batch * length > 65536) continue;
          shapes.push_back({batch, 32, 4, 64, length});  // TinyLlama-1.1B
        }
      if (device.is_cpu()) {
        for (int64_t batch : {1, 8}) shapes.push_back({batch, 32, 8, 128, 1024});  // Llama-3-8B
      } else {
        for (int64_t batch : {1, 8, 32})
          for (int64_t length : {128, 1024, 8192}) shapes.push_back({batch, 32, 8, 128, length});
      }
    }
    for (DType dtype : dtypes)
      for (const DecodeShape& s : shapes)
        for (ops::KvLayout layout : layouts)
          for (ops::AttentionPath path : kPaths) register_decode(device, dtype, s, layout, path);
    // Whole steps: eager, and on CUDA from a graph.
    std::vector<std::pair<int64_t, int64_t>> steps;  // (B, S)
    if (smoke) {
      steps = {{2, 40}};
    } else if (device.is_cpu()) {
      steps = {{1, 1024}, {8, 1024}};
    } else {
      for (int64_t batch : {1, 8, 32})
        for (int64_t length : {128, 1024, 8192}) steps.emplace_back(batch, length);
    }
    for (DType dtype : dtypes)
      for (const auto& [batch, length] : steps)
        for (ops::KvLayout layout : layouts)
          for (StepKind kind : {StepKind::eager, StepKind::graph, StepKind::fp8_weights})
            if (kind != StepKind::graph || device.is_cuda()) register_step(device, dtype, batch, length, layout, kind);
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
