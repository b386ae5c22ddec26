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
#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/support/bench_support.h"
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
    // Fill every position: one chunk of random rows written at each chunk's start (the same
    // rows repeat every kFillChunk positions; only the time is measured).
    const int64_t chunk = std::min(s.length, kFillChunk);
    const Tensor k = random_tensor(ctx, {s.batch, s.kv_heads, chunk, s.head_dim}, dtype, 41);
    const Tensor v = random_tensor(ctx, {s.batch, s.kv_heads, chunk, s.head_dim}, dtype, 42);
    for (int64_t start = 0; start < s.length; start += chunk) {
      const int64_t rows = std::min(chunk, s.length - start);
      const IndexTable starts(ctx, std::vector<int32_t>(static_cast<size_t>(s.batch), static_cast<int32_t>(start)), 1,
                              s.batch);
      const IndexTable counts(ctx, std::vector<int32_t>(static_cast<size_t>(s.batch), static_cast<int32_t>(rows)), 1,
                              s.batch);
      ops::kv_cache_write(ctx, k, v, cache, starts.row(0), counts.row(0));
    }
    ctx.synchronize();
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
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
