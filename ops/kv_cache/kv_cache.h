// A layer's KV cache for decode, and the op that writes keys and values into it.
//
// Storage is pages: k and v are [pages, Hkv, page_size, D]; the block table [B, table_width]
// says where sequence b's positions live — position p is row p % page_size of page
// table[b][p / page_size] (-1: no page). That is vLLM's and FlashInfer's paged layout.
// The contiguous layout is the same structure with one page of max_len positions per
// sequence, in order (table[b] = {b}): k and v are then [B, Hkv, max_len, D], Hugging Face's
// static cache. So every decode kernel reads both layouts through the table, and a test can
// shuffle the pages to prove it does.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/index_table.h"

namespace blockscope::ops {

enum class KvLayout { contiguous, paged };
const char* kv_layout_name(KvLayout layout);       // "contiguous", "paged"
std::vector<std::string> kv_layout_names();         // every layout's, in enum order
bool parse_kv_layout(const std::string& text, KvLayout* out);  // false if unknown

// What a cache must hold, before it is allocated (memory estimates use this too).
struct KvCacheShape {
  KvLayout layout = KvLayout::contiguous;
  int64_t kv_heads = 0, head_dim = 0;
  // paged: positions per page (a power of two); contiguous: max_len, every sequence's capacity.
  int64_t page_size = 0;
  std::vector<int64_t> positions;  // per sequence: the positions it must hold (prompt + new tokens)

  int64_t batch() const { return static_cast<int64_t>(positions.size()); }
  int64_t pages_of(int64_t b) const;  // pages sequence b needs
  int64_t pages() const;              // all sequences' pages
  int64_t table_width() const;        // the most pages one sequence has
  // Bytes of k and v together (the block table not counted: int32 per page).
  double bytes(DType dtype) const;
};

// make_kv_cache's block table gives every page to one sequence; kv_cache_write relies on it
// (two sequences writing one page would race).
struct KvCache {
  KvCacheShape shape;
  Tensor k, v;              // [pages, Hkv, page_size, D]
  IndexTable block_table;   // [B, table_width]
  // Positions sequence b can hold: its pages × page_size.
  int64_t capacity(int64_t b) const { return shape.pages_of(b) * shape.page_size; }
  // Elements from the start of k (or v) to row `position` of sequence b, kv head h, through the
  // block table's host copy (the CPU kernels; ops/kv_cache/kv_cache_row.cuh is the device twin).
  int64_t row_offset(int64_t b, int64_t h, int64_t position) const {
    const int64_t page = block_table.host()[static_cast<size_t>(b * block_table.cols() + position / shape.page_size)];
    return ((page * shape.kv_heads + h) * shape.page_size + position % shape.page_size) * shape.head_dim;
  }
};

// Allocates the pages (uninitialised) and uploads the block table. Pages are handed out in
// sequence order; with shuffle_seed != 0 in a seeded random order instead, as a real page
// allocator leaves them after sequences come and go.
KvCache make_kv_cache(Context& ctx, const KvCacheShape& shape, DType dtype, uint64_t shuffle_seed = 0);

// Writes keys and values into the cache: row s < counts[b] of sequence b (k_new, v_new
// [B, Hkv, S, D], any strides with a contiguous head dim) goes to position starts[b] + s.
// Prefill writes each prompt (starts 0, counts = prompt lengths: the padding rows of a ragged
// batch are not written); a decode step appends one row (starts = positions, counts 1).
// Refused before any work when a row would land past its sequence's capacity. 1 kernel.
// Refuses (invalid_input) a cache, k_new or index view that is not on the context's device.
void check_on_device(const Context& ctx, const char* op, const KvCache& cache, std::initializer_list<IndexView> views);

void kv_cache_write(Context& ctx, const Tensor& k_new, const Tensor& v_new, KvCache& cache, IndexView starts,
                    IndexView counts);

}  // namespace blockscope::ops
