// CPU decode attention. Work item: one (sequence b, kv head g) — its G = H / Hkv query heads
// read each cached key and value row once (the step is memory-bound: the rows are the
// traffic). Rows are widened to f32 one at a time, straight from their page.
//   naive  scores [B, H, max length] in the tensor dtype (QKᵀ, then · scale, each rounded to
//          the dtype as PyTorch eager stores them), softmax rows of each sequence's length,
//          then PV with f32 sums: three passes, recorded as three kernels.
//   flash  one pass over key chunks with an online softmax: f32 scores, float64 running sums
//          and output accumulators (as the prefill flash path: a cache of thousands of rows
//          rescaled in f32 chunk after chunk would lose accuracy to the naive path's one sum).
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
  const void* row(int64_t p) const {
    const KvCacheShape& s = cache.shape;
    const int64_t page = cache.block_table.host()[static_cast<size_t>(b * cache.block_table.cols() + p / s.page_size)];
    const int64_t index = ((page * s.kv_heads + g) * s.page_size + p % s.page_size) * s.head_dim;
    return element_at(pages.dtype(), pages.data(), index);
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
      std::vector<float> qf(static_cast<size_t>(G * D)), k(static_cast<size_t>(D)), s(static_cast<size_t>(lengths[b]));
      load_row(dtype, element_at(dtype, q.data(), (b * H + g * G) * D), qf.data(), G * D);
      for (int64_t i = 0; i < G; ++i) {
        for (int64_t p = 0; p < lengths[b]; ++p) {
          load_row(dtype, keys.row(p), k.data(), D);
          // Stored in the dtype, then scaled and stored again (the series' order).
          s[p] = round_to(dtype, round_to(dtype, dot(qf.data() + i * D, k.data(), D)) * scale);
        }
        store_row(dtype, s.data(), score_row(b, g * G + i), lengths[b]);
      }
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
        s(static_cast<size_t>(G * kKeyChunk)), result(static_cast<size_t>(G * D));
    std::vector<double> acc(static_cast<size_t>(G * D), 0.0), sum(static_cast<size_t>(G), 0.0);
    std::vector<float> m(static_cast<size_t>(G), -std::numeric_limits<float>::infinity());
    load_row(dtype, element_at(dtype, q.data(), (b * H + g * G) * D), qf.data(), G * D);
    for (int64_t p0 = 0; p0 < L; p0 += kKeyChunk) {
      const int64_t n = std::min(kKeyChunk, L - p0);
      for (int64_t j = 0; j < n; ++j) load_row(dtype, keys.row(p0 + j), kv.data() + j * D, D);
      for (int64_t i = 0; i < G; ++i) {
        float* si = s.data() + i * kKeyChunk;
        for (int64_t j = 0; j < n; ++j) si[j] = dot(qf.data() + i * D, kv.data() + j * D, D) * scale;
        const float m_new = std::max(m[i], row_max(si, n));
        const double rescale = std::exp(static_cast<double>(m[i]) - m_new);  // exp(-inf) = 0 at the start
        sum[i] = sum[i] * rescale + exp_shifted_sum(si, n, m_new);           // si now holds exp(s - m_new)
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(i * D + d)] *= rescale;
        m[i] = m_new;
      }
      for (int64_t j = 0; j < n; ++j) load_row(dtype, values.row(p0 + j), kv.data() + j * D, D);
      for (int64_t i = 0; i < G; ++i) {
        double* a = acc.data() + i * D;
        for (int64_t j = 0; j < n; ++j) {
          const double w = s[static_cast<size_t>(i * kKeyChunk + j)];
          const float* v = kv.data() + j * D;
          for (int64_t d = 0; d < D; ++d) a[d] += w * v[d];
        }
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
