// CPU decode attention. Work item: one (sequence b, kv head g) — its G = H / Hkv query heads
// read each cached key and value row once. Rows are widened to f32 straight from their pages
// (naive: one row at a time; flash: a page's run of a chunk at a time).
//   naive  scores [B, H, max length] in the tensor dtype (QKᵀ, then · scale, each rounded to
//          the dtype as PyTorch eager stores them), softmax rows of each sequence's length,
//          then PV with f32 sums: three passes, recorded as three kernels.
//   flash  one pass over key chunks with an online softmax: f32 scores, float64 running sums
//          and output accumulators (as the prefill flash path: a cache of thousands of rows
//          rescaled in f32 chunk after chunk would lose accuracy to the naive path's one sum);
//          each 64-key chunk's scores and P · V are cpu_math's tile kernels (AVX-512 / AVX2
//          clones), summed in f32 within the chunk, then added once. At ~2 GB/s of cache on
//          one thread this is compute-bound, not at the memory's rate (bench/NOTES.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common/cpu_math.h"
#include "ops/common/cpu_rows.h"
#include "ops/common/rows.h"
#include "ops/decode_attention/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {
namespace {

constexpr int64_t kKeyChunk = 64;  // flash: keys per online-softmax step

// Where sequence b's cached rows live: row p of kv head g is at row(p), D elements.
struct CacheRows {
  const KvCache& cache;
  const Tensor& pages;  // cache.k or cache.v
  int64_t b, g;
  const void* row(int64_t p) const { return element_at(pages.dtype(), pages.data(), cache.row_offset(b, g, p)); }
  // Rows [p0, p0 + n) widened to f32 into out [n, D]: one conversion per run of rows in one
  // page (a contiguous cache is one run), not one per row.
  void load(int64_t p0, int64_t n, float* out) const {
    const int64_t page = cache.shape.page_size, D = cache.shape.head_dim;
    for (int64_t j = 0; j < n;) {
      const int64_t run = std::min(n - j, page - (p0 + j) % page);
      load_row(pages.dtype(), row(p0 + j), out + j * D, run * D);
      j += run;
    }
  }
};

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Parallel over (b, g) when there is enough work; `body(b, g)` does one.
template <typename Body>
void for_each_sequence_head(const KvCache& cache, IndexView lengths, Body body) {
  const int64_t B = cache.shape.batch(), Hkv = cache.shape.kv_heads;
  int64_t total = 0;
  for (int64_t b = 0; b < B; ++b) total += lengths[b];
#pragma omp parallel for collapse(2) if (total * Hkv * cache.shape.head_dim >= kParallelMinElements) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < Hkv; ++g) body(b, g);
}

void naive(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out, float scale) {
  const DType dtype = q.dtype();
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), Hkv = cache.shape.kv_heads, G = H / Hkv;
  int64_t max_length = 0;
  for (int64_t b = 0; b < B; ++b) max_length = std::max<int64_t>(max_length, lengths[b]);
  Tensor scores = ctx.empty({B, H, max_length}, dtype);  // row (b, h): lengths[b] valid entries
  const auto score_row = [&](int64_t b, int64_t h) {
    return element_at(dtype, scores.data(), (b * H + h) * max_length);
  };
  {
    profiler::KernelScope kernel(ctx, kernel_names::kDecodeQk);
    for_each_sequence_head(cache, lengths, [&](int64_t b, int64_t g) {
      const CacheRows keys{cache, cache.k, b, g};
      const int64_t L = lengths[b];
      std::vector<float> qf(static_cast<size_t>(G * D)), k(static_cast<size_t>(D)), s(static_cast<size_t>(G * L));
      load_row(dtype, element_at(dtype, q.data(), (b * H + g * G) * D), qf.data(), G * D);
      for (int64_t p = 0; p < L; ++p) {  // each key row read once for the G heads
        load_row(dtype, keys.row(p), k.data(), D);
        for (int64_t i = 0; i < G; ++i) {
          // Stored in the dtype, then scaled and stored again (the series' order).
          s[static_cast<size_t>(i * L + p)] = round_to(dtype, round_to(dtype, dot(qf.data() + i * D, k.data(), D)) * scale);
        }
      }
      for (int64_t i = 0; i < G; ++i) store_row(dtype, s.data() + i * L, score_row(b, g * G + i), L);
    });
  }
  {
    profiler::KernelScope kernel(ctx, kernel_names::kDecodeSoftmax);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        std::vector<float> row(static_cast<size_t>(lengths[b]));
        load_row(dtype, score_row(b, h), row.data(), lengths[b]);
        const float shift = row_max(row.data(), lengths[b]);
        const float sum = exp_shifted_sum(row.data(), lengths[b], shift);
        scale_row(row.data(), lengths[b], 1.0f / sum);
        store_row(dtype, row.data(), score_row(b, h), lengths[b]);
      }
    }
  }
  {
    profiler::KernelScope kernel(ctx, kernel_names::kDecodePv);
    for_each_sequence_head(cache, lengths, [&](int64_t b, int64_t g) {
      const CacheRows values{cache, cache.v, b, g};
      const int64_t L = lengths[b];
      std::vector<float> probs(static_cast<size_t>(G * L)), v(static_cast<size_t>(D)), acc(static_cast<size_t>(G * D), 0.0f);
      for (int64_t i = 0; i < G; ++i) load_row(dtype, score_row(b, g * G + i), probs.data() + i * L, L);
      for (int64_t p = 0; p < L; ++p) {
        load_row(dtype, values.row(p), v.data(), D);
        for (int64_t i = 0; i < G; ++i) {
          const float w = probs[static_cast<size_t>(i * L + p)];
          float* a = acc.data() + i * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) a[d] += w * v[d];
        }
      }
      store_row(dtype, acc.data(), element_at(dtype, out.data(), (b * H + g * G) * D), G * D);
    });
  }
}

void flash(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out, float scale) {
  profiler::KernelScope kernel(ctx, kernel_names::kFlashDecode);
  const DType dtype = q.dtype();
  const int64_t H = q.size(1), D = q.size(2), Hkv = cache.shape.kv_heads, G = H / Hkv;
  for_each_sequence_head(cache, lengths, [&](int64_t b, int64_t g) {
    const CacheRows keys{cache, cache.k, b, g}, values{cache, cache.v, b, g};
    const int64_t L = lengths[b];
    std::vector<float> qf(static_cast<size_t>(G * D)), kv(static_cast<size_t>(kKeyChunk * D)),
        kt(static_cast<size_t>(D * kKeyChunk)), s(static_cast<size_t>(G * kKeyChunk)), result(static_cast<size_t>(G * D));
    std::vector<double> acc(static_cast<size_t>(G * D), 0.0), sum(static_cast<size_t>(G), 0.0);
    std::vector<float> m(static_cast<size_t>(G), -std::numeric_limits<float>::infinity());
    load_row(dtype, element_at(dtype, q.data(), (b * H + g * G) * D), qf.data(), G * D);
    std::vector<double> rescale(static_cast<size_t>(G));
    for (int64_t p0 = 0; p0 < L; p0 += kKeyChunk) {
      const int64_t n = std::min(kKeyChunk, L - p0);
      // Keys transposed, kt [D, chunk], for cpu_math's tile kernels (AVX-512 / AVX2 clones).
      keys.load(p0, n, kv.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < D; ++d) kt[static_cast<size_t>(d * kKeyChunk + j)] = kv[static_cast<size_t>(j * D + d)];
      tile_scores(qf.data(), kt.data(), kKeyChunk, G, n, D, scale, s.data(), kKeyChunk);
      for (int64_t i = 0; i < G; ++i) {
        float* si = s.data() + i * kKeyChunk;
        const float m_new = std::max(m[i], row_max(si, n));
        rescale[i] = std::exp(static_cast<double>(m[i]) - m_new);  // exp(-inf) = 0 at the start
        sum[i] = sum[i] * rescale[i] + exp_shifted_sum(si, n, m_new);  // si now holds exp(s - m_new)
        m[i] = m_new;
      }
      values.load(p0, n, kv.data());
      // The chunk's P · V in f32 (n ≤ 64 terms, as one GEMM tile), added to the float64
      // accumulator once per chunk.
      std::fill(result.begin(), result.end(), 0.0f);
      tile_accumulate(s.data(), kKeyChunk, kv.data(), G, n, D, result.data());
      for (int64_t i = 0; i < G; ++i) {
        double* a = acc.data() + i * D;
        const float* o = result.data() + i * D;
        for (int64_t d = 0; d < D; ++d) a[d] = a[d] * rescale[i] + o[d];
      }
    }
    for (int64_t i = 0; i < G * D; ++i) result[static_cast<size_t>(i)] = static_cast<float>(acc[static_cast<size_t>(i)] / sum[static_cast<size_t>(i / D)]);
    store_row(dtype, result.data(), element_at(dtype, out.data(), (b * H + g * G) * D), G * D);
  });
}

}  // namespace

void decode_attention(Context& ctx, const Tensor& q, const KvCache& cache, IndexView lengths, Tensor& out,
                      AttentionPath path, float scale) {
  if (path == AttentionPath::naive) {
    naive(ctx, q, cache, lengths, out, scale);
  } else {
    flash(ctx, q, cache, lengths, out, scale);
  }
}

}  // namespace blockscope::ops::cpu
