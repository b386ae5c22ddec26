// CPU flash attention: tiled over queries and keys with an online softmax (running max and
// sum, rescaled as new keys arrive), f32 accumulators, and per-thread tile buffers of
// O(tile · D + tile²). No [Sq, Sk] score matrix exists anywhere, which is the point of the path.
//
// Per (query tile, key tile) pair: S = scale · Q Kᵀ ([Br, Bc]) and O += P V ([Br, D]) are two
// small cpu::sgemm calls (oneDNN's or OpenBLAS's kernels where built with one), and the online softmax
// between them runs on the vectorised row kernels of cpu_math.h (AVX2 clone where available).
// With the built-in GEMM, the two products are cpu_math's vectorised tile kernels instead.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/attention/backends.h"
#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::ops::cpu {
namespace {

constexpr int64_t kQueryTile = 64;  // Br: query rows per work item
constexpr int64_t kKeyTile = 64;    // Bc: most keys per inner step (see key_tile)

// Keys per inner step for head size d. OpenBLAS runs a GEMM of m·n·k ≤ 262144 on the calling
// thread (its multithreading threshold, 65536 × 4); above it, it would start its own threads
// from inside ours. Both tile GEMMs are Br · Bc · D, so Bc shrinks for D > 64 to stay below.
int64_t key_tile(int64_t d) {
  const int64_t fits = 262144 / (kQueryTile * std::max<int64_t>(d, 1));
  return std::clamp<int64_t>(fits / 8 * 8, 8, kKeyTile);
}

// One thread's tile buffers, carved out of a single f32 scratch allocation. The output and
// row-sum accumulators are float64: the tile products are f32 GEMMs, but adding Sk / Bc tile
// results (and rescaling them at each new max) in f32 would cost a rounding per key tile, and
// on long rows that makes flash several times less accurate than one blocked GEMM over all
// keys. Doubles cost O(Br · D) per tile pair next to the tiles' O(Br · Bc · D).
struct TileBuffers {
  double* acc;  // [Br, D]  unnormalised output accumulator
  double* l;    // [Br]     running row sum of exp(score - m)
  float* q;     // [Br, D]  query rows (f32)
  float* k;     // [Bc, D]  key rows
  float* k_t;   // [D, Bc]  keys transposed (the tile kernels' layout, without BLAS)
  float* v;     // [Bc, D]
  float* s;     // [Br, Bc] scores of the tile pair, then their probabilities (row stride kKeyTile)
  float* o;     // [Br, D]  this tile pair's P · V, then the normalised output
  float* m;     // [Br]     running row max of the scaled scores

  // In floats; the doubles come first, so they are as aligned as the scratch itself.
  static int64_t floats(int64_t d) {
    return 2 * (kQueryTile * d + kQueryTile) + 2 * kQueryTile * d + 3 * kKeyTile * d + kQueryTile * kKeyTile + kQueryTile;
  }

  TileBuffers(float* base, int64_t d) {
    acc = reinterpret_cast<double*>(base);
    l = acc + kQueryTile * d;
    q = reinterpret_cast<float*>(l + kQueryTile);
    k = q + kQueryTile * d;
    k_t = k + kKeyTile * d;
    v = k_t + kKeyTile * d;
    s = v + kKeyTile * d;
    o = s + kQueryTile * kKeyTile;
    m = o + kQueryTile * d;
  }
};

// acc[i] += x[i] and acc[i] *= factor, for the float64 accumulators (restrict: vectorised).
void add_to(double* __restrict acc, const float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(x[i]);
}
void scale_f64(double* __restrict acc, int64_t n, double factor) {
  for (int64_t i = 0; i < n; ++i) acc[i] *= factor;
}

struct Geometry {
  int64_t heads, kv_heads, sq, sk, d;
  bool causal;
  float scale;
  int64_t q_ld, k_ld, v_ld, o_ld;  // elements from one row (query or key) to the next
};

// Rows [row0, row0 + rows) of an [S, D] matrix with row stride ld, converted to f32 into dst
// ([rows, D], contiguous), and the way back.
void load_rows(DType dtype, const void* head, int64_t ld, int64_t row0, int64_t rows, int64_t d, float* dst) {
  if (ld == d) return load_row(dtype, element_at(dtype, head, row0 * d), dst, rows * d);
  for (int64_t r = 0; r < rows; ++r) load_row(dtype, element_at(dtype, head, (row0 + r) * ld), dst + r * d, d);
}
void store_rows(DType dtype, const float* src, void* head, int64_t ld, int64_t row0, int64_t rows, int64_t d) {
  if (ld == d) return store_row(dtype, src, element_at(dtype, head, row0 * d), rows * d);
  for (int64_t r = 0; r < rows; ++r) store_row(dtype, src + r * d, element_at(dtype, head, (row0 + r) * ld), d);
}

// Attention for query rows [i0, i1) of head h of batch entry b. q_head, k_head, v_head and
// out_head point at the [S, D] matrices of that head (and its kv head), rows g.*_ld apart.
void attend_query_tile(const Geometry& g, DType dtype, bool blas, const void* q_head, const void* k_head, const void* v_head,
                       void* out_head, int64_t i0, int64_t i1, TileBuffers& t) {
  const int64_t d = g.d, rows = i1 - i0, bc = key_tile(d);
  const int64_t offset = g.sk - g.sq;  // causal: query i sees keys j <= i + offset
  const float minus_inf = -std::numeric_limits<float>::infinity();

  // f32 heads with contiguous rows are used in place; other dtypes and strided rows are
  // converted (copied) tile by tile into the f32 buffers.
  const bool direct = dtype == DType::f32 && g.q_ld == d && g.k_ld == d && g.v_ld == d;
  const float* q = direct ? static_cast<const float*>(q_head) + i0 * d : t.q;
  if (!direct) load_rows(dtype, q_head, g.q_ld, i0, rows, d, t.q);
  std::fill(t.acc, t.acc + rows * d, 0.0);
  std::fill(t.m, t.m + rows, minus_inf);
  std::fill(t.l, t.l + rows, 0.0);

  // Keys past the last visible one of the tile's last query never contribute.
  const int64_t key_end = g.causal ? std::clamp<int64_t>(i1 - 1 + offset + 1, 0, g.sk) : g.sk;
  for (int64_t j0 = 0; j0 < key_end; j0 += bc) {
    const int64_t cols = std::min(bc, key_end - j0);
    const float* k = direct ? static_cast<const float*>(k_head) + j0 * d : t.k;
    const float* v = direct ? static_cast<const float*>(v_head) + j0 * d : t.v;
    if (!direct) {
      load_rows(dtype, k_head, g.k_ld, j0, cols, d, t.k);
      load_rows(dtype, v_head, g.v_ld, j0, cols, d, t.v);
    }

    // S[r, c] = scale · q_r · k_c for the whole tile pair (masked entries are dropped below).
    if (blas) {
      blockscope::cpu::sgemm(false, true, rows, cols, d, g.scale, q, d, k, d, 0.0f, t.s, kKeyTile);
    } else {
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t p = 0; p < d; ++p) t.k_t[p * kKeyTile + c] = k[c * d + p];
      tile_scores(q, t.k_t, kKeyTile, rows, cols, d, g.scale, t.s, kKeyTile);
    }

    for (int64_t r = 0; r < rows; ++r) {
      float* s_row = t.s + r * kKeyTile;
      // Visible keys of this row inside the tile: [0, limit); the rest get probability 0.
      const int64_t limit = g.causal ? std::clamp<int64_t>(i0 + r + offset - j0 + 1, 0, cols) : cols;
      if (limit < cols) std::fill(s_row + std::max<int64_t>(limit, 0), s_row + cols, 0.0f);
      if (limit <= 0) continue;

      // Online softmax: rescale what was accumulated under the old max to the new one.
      const float new_max = std::max(t.m[r], row_max(s_row, limit));
      const float correction = std::exp(t.m[r] - new_max);  // exp(-inf) = 0 on the first tile
      if (correction != 1.0f) {
        t.l[r] *= correction;
        scale_f64(t.acc + r * d, d, correction);
      }
      t.l[r] += exp_shifted_sum(s_row, limit, new_max);  // s_row becomes the probabilities
      t.m[r] = new_max;
    }

    // O = P · V for this tile pair (rows with no visible key have P = 0), added to acc.
    if (blas) {
      blockscope::cpu::sgemm(false, false, rows, d, cols, 1.0f, t.s, kKeyTile, v, d, 0.0f, t.o, d);
    } else {
      std::fill(t.o, t.o + rows * d, 0.0f);
      tile_accumulate(t.s, kKeyTile, v, rows, cols, d, t.o);
    }
    add_to(t.acc, t.o, rows * d);
  }

  // Normalise. A row that saw no key (causal with Sq > Sk) has l = 0 and is defined as zeros.
  for (int64_t r = 0; r < rows; ++r) {
    const double inv = t.l[r] > 0.0 ? 1.0 / t.l[r] : 0.0;
    for (int64_t c = 0; c < d; ++c) t.o[r * d + c] = static_cast<float>(t.acc[r * d + c] * inv);
  }
  store_rows(dtype, t.o, out_head, g.o_ld, i0, rows, d);
}

}  // namespace

void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, bool causal,
                     float scale) {
  profiler::KernelScope kernel(ctx, kernel_names::kFlashAttention);
  const Geometry g{q.size(1),  k.size(1),  q.size(2),  k.size(2),  q.size(3),  causal, scale,
                   q.stride(2), k.stride(2), v.stride(2), out.stride(2)};
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

  // With a GEMM library (oneDNN's dnnl_sgemm, OpenBLAS) the tile products are its GEMMs; the
  // built-in sgemm (allocating, untuned) is slower on 64×64 tiles than the vectorised tile
  // kernels of cpu_math.h, so those run instead.
  const bool blas = std::strcmp(blockscope::cpu::gemm_library(), "builtin") != 0;
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
      // q, out: [B, H, Sq, D]; k, v: [B, Hkv, Sk, D]; through their strides.
      const int64_t i0 = tile * kQueryTile, i1 = std::min(g.sq, i0 + kQueryTile);
      attend_query_tile(g, dtype, blas, element_at(dtype, q_data, b * q.stride(0) + head * q.stride(1)),
                        element_at(dtype, k_data, b * k.stride(0) + kv_head * k.stride(1)),
                        element_at(dtype, v_data, b * v.stride(0) + kv_head * v.stride(1)),
                        element_at(dtype, out_data, b * out.stride(0) + head * out.stride(1)), i0, i1, tiles);
    }
  }
}

}  // namespace blockscope::ops::cpu
