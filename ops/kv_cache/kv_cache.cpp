// KV cache: layout names, sizes, allocation, and the public kv_cache_write (validation, then
// run_op).
#include "ops/kv_cache/kv_cache.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "ops/common/dispatch.h"
#include "ops/kv_cache/backends.h"
#include "runtime/error.h"

namespace blockscope::ops {

const char* kv_layout_name(KvLayout layout) {
  return layout == KvLayout::paged ? "paged" : "contiguous";
}

namespace {
constexpr KvLayout kKvLayouts[] = {KvLayout::contiguous, KvLayout::paged};
}  // namespace

std::vector<std::string> kv_layout_names() {
  std::vector<std::string> names;
  for (KvLayout layout : kKvLayouts) names.push_back(kv_layout_name(layout));
  return names;
}

bool parse_kv_layout(const std::string& text, KvLayout* out) {
  for (KvLayout layout : kKvLayouts) {
    if (text == kv_layout_name(layout)) {
      *out = layout;
      return true;
    }
  }
  return false;
}

int64_t KvCacheShape::pages_of(int64_t b) const {
  if (layout == KvLayout::contiguous) return 1;
  return (positions[static_cast<size_t>(b)] + page_size - 1) / page_size;
}

int64_t KvCacheShape::pages() const {
  int64_t total = 0;
  for (int64_t b = 0; b < batch(); ++b) total += pages_of(b);
  return total;
}

int64_t KvCacheShape::table_width() const {
  int64_t width = 0;
  for (int64_t b = 0; b < batch(); ++b) width = std::max(width, pages_of(b));
  return width;
}

double KvCacheShape::bytes(DType dtype) const {
  return 2.0 * static_cast<double>(pages()) * static_cast<double>(kv_heads) * static_cast<double>(page_size) *
         static_cast<double>(head_dim) * static_cast<double>(dtype_size(dtype));
}

KvCache make_kv_cache(Context& ctx, const KvCacheShape& shape, DType dtype, uint64_t shuffle_seed) {
  BS_CHECK_INPUT(shape.batch() > 0 && shape.kv_heads > 0 && shape.head_dim > 0 && shape.page_size > 0,
                 "KV cache: batch ", shape.batch(), ", kv heads ", shape.kv_heads, ", head dim ", shape.head_dim,
                 " and page size ", shape.page_size, " must all be positive");
  for (int64_t b = 0; b < shape.batch(); ++b) {
    const int64_t need = shape.positions[static_cast<size_t>(b)];
    BS_CHECK_INPUT(need >= 1, "KV cache: sequence ", b, " must hold at least one position, got ", need);
    BS_CHECK_INPUT(shape.layout == KvLayout::paged || need <= shape.page_size, "KV cache: sequence ", b, " needs ",
                   need, " positions but the contiguous cache holds max_len = ", shape.page_size);
  }
  KvCache cache;
  cache.shape = shape;
  const int64_t pages = shape.pages(), width = shape.table_width();
  std::vector<int32_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_seed != 0) std::shuffle(order.begin(), order.end(), std::mt19937_64(shuffle_seed));
  std::vector<int32_t> table(static_cast<size_t>(shape.batch() * width), -1);
  size_t next = 0;
  for (int64_t b = 0; b < shape.batch(); ++b)
    for (int64_t i = 0; i < shape.pages_of(b); ++i) table[static_cast<size_t>(b * width + i)] = order[next++];
  const Shape pages_shape{pages, shape.kv_heads, shape.page_size, shape.head_dim};
  cache.k = ctx.empty(pages_shape, dtype);
  cache.v = ctx.empty(pages_shape, dtype);
  cache.block_table = IndexTable(ctx, std::move(table), shape.batch(), width);
  return cache;
}

void check_on_device(const Context& ctx, const char* op, const KvCache& cache, std::initializer_list<IndexView> views) {
  BS_CHECK_INPUT(cache.k.defined() && cache.v.defined() && cache.block_table.defined(), op,
                 ": the KV cache is not allocated (ops::make_kv_cache)");
  for (const Tensor* t : {&cache.k, &cache.v}) {
    BS_CHECK_INPUT(t->device() == ctx.device(), op, ": the KV cache ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
  }
  BS_CHECK_INPUT(cache.block_table.row(0).on == ctx.device(), op, ": the KV cache's block table is on ",
                 cache.block_table.row(0).on.str(), " but the context runs on ", ctx.device().str());
  for (const IndexView& view : views) check_index_view(ctx, op, "an index view (positions, lengths or counts)", view);
}

void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts) {
  const Tensor* tensors[] = {&k_new, &v_new};
  const char* roles[] = {"k_new", "v_new"};
  for (int i = 0; i < 2; ++i) {
    const Tensor& t = *tensors[i];
    BS_CHECK_INPUT(t.defined(), "kv_cache_write: ", roles[i], " is undefined");
    BS_CHECK_INPUT(t.device() == ctx.device(), "kv_cache_write: ", roles[i], " ", t.str(), " is on ",
                   t.device().str(), " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t.dim() == 4 && t.size(0) == cache.shape.batch() && t.size(1) == cache.shape.kv_heads &&
                       t.size(3) == cache.shape.head_dim,
                   "kv_cache_write: ", roles[i], " ", t.str(), " must be [B = ", cache.shape.batch(),
                   ", Hkv = ", cache.shape.kv_heads, ", S, D = ", cache.shape.head_dim, "]");
    BS_CHECK_INPUT(t.stride(3) == 1, "kv_cache_write: ", roles[i], " ", t.str(), " must have a contiguous head dim");
    BS_CHECK_INPUT(t.dtype() == cache.k.dtype(), "kv_cache_write: ", roles[i], " ", t.str(),
                   " and the cache (", dtype_name(cache.k.dtype()), ") have different dtypes");
  }
  check_on_device(ctx, "kv_cache_write", cache, {starts, counts});
  BS_CHECK_INPUT(v_new.shape() == k_new.shape(), "kv_cache_write: v_new ", v_new.str(), " and k_new ", k_new.str(),
                 " differ");
  BS_CHECK_INPUT(starts.count == cache.shape.batch() && counts.count == cache.shape.batch(),
                 "kv_cache_write: starts (", starts.count, ") and counts (", counts.count, ") must have B = ",
                 cache.shape.batch(), " entries");
  const int64_t rows = k_new.size(2);
  int64_t written = 0;
  for (int64_t b = 0; b < cache.shape.batch(); ++b) {
    // Bounded views (a step replayed from a CUDA graph): the lowest values >= 0, the highest in range.
    BS_CHECK_INPUT(starts.lowest(b) >= 0 && counts.lowest(b) >= 0 && counts[b] <= rows, "kv_cache_write: sequence ",
                   b, ": start ", starts.lowest(b), " and count ", counts.lowest(b),
                   " must be >= 0, the count at most S = ", rows, " (got ", counts[b], ")");
    BS_CHECK_INPUT(int64_t{starts[b]} + counts[b] <= cache.capacity(b), "kv_cache_write: sequence ", b,
                   " would write positions [", starts[b], ", ", int64_t{starts[b]} + counts[b], ") but its cache holds ",
                   cache.capacity(b), " (", cache.shape.pages_of(b), " pages of ", cache.shape.page_size, ")");
    written += counts[b];
  }
  const double row_bytes = static_cast<double>(cache.shape.kv_heads * cache.shape.head_dim) *
                           static_cast<double>(dtype_size(k_new.dtype()));
  // Each written row of k and v read once and written once.
  const double bytes = 4.0 * row_bytes * static_cast<double>(written);
  run_op(ctx,
         OpRecord{"kv_cache_write", "", profiler::Family::copy, {&k_new, &v_new}, {}, 0.0, written == 0}
             .with_bytes(bytes),
         [&] { cpu::kv_cache_write(ctx, k_new, v_new, cache, starts, counts); },
         [&] { cuda::kv_cache_write(ctx, k_new, v_new, cache, starts, counts); });
}

}  // namespace blockscope::ops
