// CPU flash attention: tiled over queries and keys with an online softmax (running max and
// sum, rescaled as new keys arrive), f32 accumulators, and per-thread tile buffers of
// O(tile · D). No [Sq, Sk] score matrix exists anywhere, which is the point of the path.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common/backends.h"
#include "ops/common/cpu_rows.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

constexpr int64_t kQueryTile = 64;  // Br: query rows per work item
constexpr int64_t kKeyTile = 64;    // Bc: keys per inner step
constexpr int64_t kDepthBlock = 8;  // terms of a QKᵀ dot product summed before they join the total

// One thread's tile buffers, carved out of a single f32 scratch allocation.
struct TileBuffers {
  float* q;       // [Br, D]  query rows (f32)
  float* k;       // [Bc, D]  key rows as loaded
  float* k_t;     // [D, Bc]  keys transposed, so the QKᵀ inner loop runs over keys contiguously
  float* v;       // [Bc, D]
  float* s;       // [Bc]     one query row's scores against the key tile
  float* partial; // [Bc]     partial dot products (see kDepthBlock)
  float* o;       // [Br, D]  unnormalised output accumulator
  float* m;       // [Br]     running row max of the scaled scores
  float* l;       // [Br]     running row sum of exp(score - m)

  static int64_t floats(int64_t d) {
    return 2 * kQueryTile * d + 3 * kKeyTile * d + 2 * kKeyTile + 2 * kQueryTile;
  }

  TileBuffers(float* base, int64_t d) {
    q = base;
    k = q + kQueryTile * d;
    k_t = k + kKeyTile * d;
    v = k_t + kKeyTile * d;
    s = v + kKeyTile * d;
    partial = s + kKeyTile;
    o = partial + kKeyTile;
    m = o + kQueryTile * d;
    l = m + kQueryTile;
  }
};

struct Geometry {
  int64_t heads, kv_heads, sq, sk, d;
  bool causal;
  float scale;
};

// Attention for query rows [i0, i1) of head h of batch entry b. q_head, k_head, v_head and
// out_head point at the [S, D] matrices of that head (and its kv head).
void attend_query_tile(const Geometry& g, DType dtype, const void* q_head, const void* k_head, const void* v_head,
                       void* out_head, int64_t i0, int64_t i1, TileBuffers& t) {
  const int64_t d = g.d, rows = i1 - i0;
  const int64_t offset = g.sk - g.sq;  // causal: query i sees keys j <= i + offset
  const float minus_inf = -std::numeric_limits<float>::infinity();

  load_row(dtype, element_at(dtype, q_head, i0 * d), t.q, rows * d);
  std::fill(t.o, t.o + rows * d, 0.0f);
  std::fill(t.m, t.m + rows, minus_inf);
  std::fill(t.l, t.l + rows, 0.0f);

  // Keys past the last visible one of the tile's last query never contribute.
  const int64_t key_end = g.causal ? std::clamp<int64_t>(i1 - 1 + offset + 1, 0, g.sk) : g.sk;
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, key_end - j0);
    load_row(dtype, element_at(dtype, k_head, j0 * d), t.k, cols * d);
    load_row(dtype, element_at(dtype, v_head, j0 * d), t.v, cols * d);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t p = 0; p < d; ++p) t.k_t[p * kKeyTile + c] = t.k[c * d + p];

    for (int64_t r = 0; r < rows; ++r) {
      // Visible keys of this row inside the tile: [0, limit).
      const int64_t limit = g.causal ? std::min(cols, i0 + r + offset - j0 + 1) : cols;
      if (limit <= 0) continue;
      float* s_row = t.s;  // s_row[c] = scale · q_r · k_c
      const float* q_row = t.q + r * d;
      // Two-level f32 sum over D: partial sums of kDepthBlock terms, then their sum. A plain
      // running sum over all D terms loses about D/kDepthBlock times more to rounding, which
      // shows next to the naive path's BLAS GEMM in f32.
      std::fill(s_row, s_row + limit, 0.0f);
      for (int64_t p0 = 0; p0 < d; p0 += kDepthBlock) {
        std::fill(t.partial, t.partial + limit, 0.0f);
        for (int64_t p = p0; p < std::min(d, p0 + kDepthBlock); ++p) {
          const float qv = q_row[p];
          const float* k_col = t.k_t + p * kKeyTile;
          for (int64_t c = 0; c < limit; ++c) t.partial[c] += qv * k_col[c];
        }
        for (int64_t c = 0; c < limit; ++c) s_row[c] += t.partial[c];
      }
      float tile_max = minus_inf;
      for (int64_t c = 0; c < limit; ++c) {
        s_row[c] *= g.scale;
        tile_max = std::max(tile_max, s_row[c]);
      }

      // Online softmax: rescale what was accumulated under the old max to the new one.
      const float new_max = std::max(t.m[r], tile_max);
      const float correction = std::exp(t.m[r] - new_max);  // exp(-inf) = 0 on the first tile
      float* o_row = t.o + r * d;
      if (correction != 1.0f) {
        t.l[r] *= correction;
        for (int64_t p = 0; p < d; ++p) o_row[p] *= correction;
      }
      float row_sum = 0.0f;
      for (int64_t c = 0; c < limit; ++c) {
        const float prob = std::exp(s_row[c] - new_max);
        row_sum += prob;
        const float* v_row = t.v + c * d;
        for (int64_t p = 0; p < d; ++p) o_row[p] += prob * v_row[p];
      }
      t.l[r] += row_sum;
      t.m[r] = new_max;
    }
  }

  // Normalise. A row that saw no key (causal with Sq > Sk) has l = 0 and is defined as zeros.
  for (int64_t r = 0; r < rows; ++r) {
    float* o_row = t.o + r * d;
    const float inverse = t.l[r] > 0.0f ? 1.0f / t.l[r] : 0.0f;
    for (int64_t p = 0; p < d; ++p) o_row[p] *= inverse;
  }
  store_row(dtype, t.o, element_at(dtype, out_head, i0 * d), rows * d);
}

}  // namespace

void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale) {
  profiler::KernelScope kernel(ctx, "flash_attention_kernel");
  const Geometry g{q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), causal, scale};
  const DType dtype = q.dtype();
  const int64_t batch = q.size(0);
  const int64_t group = g.heads / g.kv_heads;  // query head h reads kv head h / group
  const int64_t query_tiles = (g.sq + kQueryTile - 1) / kQueryTile;
  const int64_t work_items = batch * g.heads * query_tiles;

  // Small problems stay on one thread: a parallel region costs more than a few tiles.
  const double work = static_cast<double>(batch * g.heads) * static_cast<double>(g.sq) * static_cast<double>(g.sk) *
                      static_cast<double>(g.d);
  const int threads = work < (1 << 20) ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), work_items));
  const int64_t per_thread = TileBuffers::floats(g.d);
  Tensor scratch = ctx.empty({threads, per_thread}, DType::f32);  // O(threads · tile · D), never O(S²)
  float* scratch_base = scratch.data_as<float>();

  const void* q_data = q.data();
  const void* k_data = k.data();
  const void* v_data = v.data();
  void* out_data = out.data();
#pragma omp parallel num_threads(threads)
  {
    TileBuffers tiles(scratch_base + static_cast<int64_t>(omp_get_thread_num()) * per_thread, g.d);
    // Dynamic: causal tiles near the top of the matrix have far fewer keys than those below.
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < work_items; ++item) {
      const int64_t tile = item % query_tiles;
      const int64_t head = (item / query_tiles) % g.heads;
      const int64_t b = item / (query_tiles * g.heads);
      const int64_t kv_head = head / group;
      const int64_t q_head_offset = (b * g.heads + head) * g.sq * g.d;   // q, out: [B, H, Sq, D]
      const int64_t kv_head_offset = (b * g.kv_heads + kv_head) * g.sk * g.d;  // k, v: [B, Hkv, Sk, D]
      const int64_t i0 = tile * kQueryTile, i1 = std::min(g.sq, i0 + kQueryTile);
      attend_query_tile(g, dtype, element_at(dtype, q_data, q_head_offset), element_at(dtype, k_data, kv_head_offset),
                        element_at(dtype, v_data, kv_head_offset), element_at(dtype, out_data, q_head_offset), i0, i1,
                        tiles);
    }
  }
}

}  // namespace blockscope::ops::cpu
