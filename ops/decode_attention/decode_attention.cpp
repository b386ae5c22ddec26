// Public decode attention: validation once for every device, then the device's kernels.
#include "ops/decode_attention/decode_attention.h"

#include <algorithm>
#include <string>

#include "ops/common/dispatch.h"
#include "ops/decode_attention/backends.h"
#include "runtime/error.h"

namespace blockscope::ops {

bool has_decode_form(AttentionPath path) { return path == AttentionPath::naive || path == AttentionPath::flash; }

double decode_attention_flops(int64_t heads, int64_t head_dim, int64_t total_length) {
  return 4.0 * static_cast<double>(heads) * static_cast<double>(head_dim) * static_cast<double>(total_length);
}

double decode_attention_bytes(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t total_length,
                              DType dtype) {
  const double rows = 2.0 * static_cast<double>(batch * heads) + 2.0 * static_cast<double>(total_length * kv_heads);
  return rows * static_cast<double>(head_dim) * static_cast<double>(dtype_size(dtype));
}

FlashDecodeGrid flash_decode_grid(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                  int64_t max_length, int sm_count) {
  BS_CHECK_INPUT(batch >= 1 && heads >= 1 && kv_heads >= 1 && head_dim >= 1 && max_length >= 1 && sm_count >= 1,
                 "flash_decode_grid: B = ", batch, ", H = ", heads, ", Hkv = ", kv_heads, ", D = ", head_dim,
                 ", max length = ", max_length, " and ", sm_count, " SMs must all be at least 1");
  BS_CHECK_INPUT(heads % kv_heads == 0, "flash_decode_grid: H = ", heads, " is not a multiple of Hkv = ", kv_heads);
  BS_CHECK_INPUT(head_dim <= kFlashDecodeMaxOutputs, "flash_decode_grid: D = ", head_dim, " is over ",
                 kFlashDecodeMaxOutputs);
  const int64_t group = heads / kv_heads;
  FlashDecodeGrid grid;
  grid.heads_per_block = std::min({group, kFlashDecodeMaxHeads, kFlashDecodeMaxOutputs / head_dim});
  grid.head_chunks = (group + grid.heads_per_block - 1) / grid.heads_per_block;
  grid.blocks = batch * kv_heads * grid.head_chunks;
  const int64_t target = 2 * static_cast<int64_t>(sm_count);
  if (grid.blocks >= target) return grid;  // splits = 1
  const int64_t wanted = (target + grid.blocks - 1) / grid.blocks;
  const int64_t by_length = (max_length + kFlashDecodeMinSplitKeys - 1) / kFlashDecodeMinSplitKeys;
  grid.splits = std::max<int64_t>(1, std::min({wanted, by_length, kFlashDecodeMaxSplits}));
  return grid;
}

int64_t flash_decode_splits(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t max_length,
                            int sm_count) {
  return flash_decode_grid(batch, heads, kv_heads, head_dim, max_length, sm_count).splits;
}

void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale) {
  BS_CHECK_INPUT(has_decode_form(path), "decode_attention: the ", path_name(path),
                 " attention path has no decode form (use naive or flash)");
  check_on_device(ctx, "decode_attention", cache, {lengths});
  const KvCacheShape& shape = cache.shape;
  const Tensor* tensors[] = {&q, &out};
  const char* roles[] = {"q", "out"};
  for (int i = 0; i < 2; ++i) {
    const Tensor& t = *tensors[i];
    BS_CHECK_INPUT(t.defined(), "decode_attention: ", roles[i], " is undefined");
    BS_CHECK_INPUT(t.device() == ctx.device(), "decode_attention: ", roles[i], " ", t.str(), " is on ",
                   t.device().str(), " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t.dim() == 3 && t.is_contiguous(), "decode_attention: ", roles[i], " ", t.str(),
                   " must be [B, H, D] contiguous");
    BS_CHECK_INPUT(t.dtype() == cache.k.dtype(), "decode_attention: ", roles[i], " ", t.str(), " and the cache (",
                   dtype_name(cache.k.dtype()), ") have different dtypes");
  }
  BS_CHECK_INPUT(out.shape() == q.shape(), "decode_attention: out ", out.str(), " must have the shape of q ", q.str());
  BS_CHECK_INPUT(q.size(0) == shape.batch() && q.size(2) == shape.head_dim, "decode_attention: q ", q.str(),
                 " must be [B = ", shape.batch(), ", H, D = ", shape.head_dim, "] to match the cache");
  BS_CHECK_INPUT(q.size(1) % shape.kv_heads == 0, "decode_attention: q ", q.str(), " has H = ", q.size(1),
                 " heads, which is not a multiple of the cache's Hkv = ", shape.kv_heads);
  BS_CHECK_INPUT(lengths.count == shape.batch(), "decode_attention: ", lengths.count, " lengths for B = ",
                 shape.batch(), " sequences");
  int64_t total = 0;
  for (int64_t b = 0; b < shape.batch(); ++b) {
    // A bounded view (a step replayed from a CUDA graph): its whole range must be valid; the
    // kernels' grids are sized for the highest lengths.
    BS_CHECK_INPUT(lengths.lowest(b) >= 1 && lengths[b] <= cache.capacity(b), "decode_attention: sequence ", b,
                   " has length ", lengths.lowest(b) == lengths[b] ? std::to_string(lengths[b])
                                                                   : std::to_string(lengths.lowest(b)) + " to " +
                                                                         std::to_string(lengths[b]),
                   "; it must be in [1, ", cache.capacity(b), "] (its cache's capacity)");
    total += lengths[b];
  }
  // A named record, not a copy of a temporary: its tensor lists point into the braces' arrays.
  OpRecord record{"decode_attention",
                  path_name(path),
                  profiler::Family::attention,
                  {&q},
                  {&out},
                  decode_attention_flops(q.size(1), q.size(2), total),
                  q.numel() == 0};
  record.with_bytes(decode_attention_bytes(q.size(0), q.size(1), shape.kv_heads, q.size(2), total, q.dtype()));
  run_op(ctx, record, [&] { cpu::decode_attention(ctx, q, cache, lengths, out, path, scale); },
         [&] { cuda::decode_attention(ctx, q, cache, lengths, out, path, scale); });
}

}  // namespace blockscope::ops
