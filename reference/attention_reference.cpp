#include "reference/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "reference/gemm64.h"
#include "runtime/interrupt.h"

namespace blockscope::reference {
namespace {

int64_t last(const RefTensor& t, int64_t from_end) {
  return t.shape[t.shape.size() - static_cast<size_t>(from_end)];
}

bool visible(int64_t i, int64_t j, int64_t sq, int64_t sk) { return j <= i + (sk - sq); }

// Softmax of one row in place; a row with no finite maximum becomes zeros.
void softmax_row(double* row, int64_t n) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) max_value = std::max(max_value, row[j]);
  if (!std::isfinite(max_value)) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0;
    return;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - max_value);
    sum += row[j];
  }
  for (int64_t j = 0; j < n; ++j) row[j] /= sum;
}

}  // namespace

RefTensor elementwise_add(const RefTensor& a, const RefTensor& b) {
  require(b.numel() > 0 && a.numel() % b.numel() == 0, "add: b does not broadcast over a");
  RefTensor out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.data[i] = a.data[i] + b.data[i % b.numel()];
  return out;
}

RefTensor elementwise_mul(const RefTensor& a, const RefTensor& b) {
  require(a.numel() == b.numel(), "mul: sizes differ");
  RefTensor out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.data[i] = a.data[i] * b.data[i];
  return out;
}

RefTensor elementwise_scale(const RefTensor& x, double factor) {
  RefTensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = x.data[i] * factor;
  return out;
}

RefTensor causal_masked_fill(const RefTensor& scores, double value) {
  require(scores.shape.size() >= 2, "masked_fill: scores must be [..., Sq, Sk]");
  const int64_t sq = last(scores, 2), sk = last(scores, 1);
  RefTensor out = scores;
  for (int64_t index = 0; index < out.numel(); ++index) {
    const int64_t j = index % sk, i = (index / sk) % sq;
    if (!visible(i, j, sq, sk)) out.data[index] = value;
  }
  return out;
}

RefTensor softmax_rows(const RefTensor& x) {
  require(!x.shape.empty(), "softmax: x must have a last dimension");
  const int64_t n = last(x, 1);
  RefTensor out = x;
  for (int64_t start = 0; n > 0 && start < out.numel(); start += n) softmax_row(&out.data[start], n);
  return out;
}

RefTensor softmax_scale_causal(const RefTensor& x, double scale, bool causal) {
  RefTensor scaled = elementwise_scale(x, scale);
  if (causal) scaled = causal_masked_fill(scaled, -std::numeric_limits<double>::infinity());
  return softmax_rows(scaled);
}

RefTensor batched_matmul(const RefTensor& a, const RefTensor& b, bool trans_b, double alpha, int64_t b_group) {
  require(a.shape.size() >= 2 && b.shape.size() >= 2, "batched_matmul: operands must be at least 2-D");
  const int64_t m = last(a, 2), k = last(a, 1);
  const int64_t n = trans_b ? last(b, 2) : last(b, 1);
  require((trans_b ? last(b, 1) : last(b, 2)) == k, "batched_matmul: inner dimensions differ");
  // Batches from the leading dimensions, not numel / (m·k): an empty matrix is still a batch.
  auto leading = [](const RefTensor& t) {
    int64_t product = 1;
    for (size_t d = 0; d + 2 < t.shape.size(); ++d) product *= t.shape[d];
    return product;
  };
  const int64_t batch_a = leading(a), batch_b = leading(b);
  require(batch_a == batch_b * b_group, "batched_matmul: batch of a is not b_group times batch of b");
  Shape shape = a.shape;
  shape.back() = n;
  RefTensor c(shape);
  for (int64_t batch = 0; batch < batch_a; ++batch) {
    check_interrupted("while computing the float64 reference");
    // Pointers, not &data[i]: an empty matrix (m, n or k = 0) has no element to refer to.
    const double* a_matrix = a.data.data() + batch * m * k;
    const double* b_matrix = b.data.data() + (batch / b_group) * k * n;
    double* c_matrix = c.data.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          sum += a_matrix[i * k + p] * (trans_b ? b_matrix[j * k + p] : b_matrix[p * n + j]);
        }
        c_matrix[i * n + j] = alpha * sum;
      }
    }
  }
  return c;
}

RefTensor attention(const RefTensor& q, const RefTensor& k, const RefTensor& v, bool causal, double scale) {
  require(q.shape.size() == 4 && k.shape.size() == 4 && v.shape.size() == 4, "attention: q, k, v must be 4-D");
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], d = q.shape[3];
  const int64_t kv_heads = k.shape[1], sk = k.shape[2];
  require(k.shape == v.shape && k.shape[0] == batch && k.shape[3] == d, "attention: k, v shapes");
  require(kv_heads > 0 && heads % kv_heads == 0, "attention: heads not a multiple of kv heads");
  const int64_t group = heads / kv_heads;
  RefTensor out(q.shape);
  // One (batch, head) per task, on the reference's threads (gemm64.h); seconds per head at long Sk.
  parallel_chunks(batch * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> weights(static_cast<size_t>(sk));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads, kv = h / group;
      const double* q_head = q.data.data() + ((b * heads + h) * sq) * d;
      const double* k_head = k.data.data() + ((b * kv_heads + kv) * sk) * d;
      const double* v_head = v.data.data() + ((b * kv_heads + kv) * sk) * d;
      double* out_head = out.data.data() + ((b * heads + h) * sq) * d;
      for (int64_t i = 0; i < sq; ++i) {
        for (int64_t j = 0; j < sk; ++j) {
          weights[j] = causal && !visible(i, j, sq, sk) ? -std::numeric_limits<double>::infinity()
                                                        : scale * dot64(q_head + i * d, k_head + j * d, d);
        }
        softmax_row(weights.data(), sk);
        double* out_row = &out_head[i * d];  // zero-initialised; sums over j in order
        // Keys past the causal limit have weight 0: they add nothing.
        const int64_t visible_keys = causal ? std::max<int64_t>(0, std::min(sk, i + (sk - sq) + 1)) : sk;
        for (int64_t j = 0; j < visible_keys; ++j) {
          for (int64_t p = 0; p < d; ++p) out_row[p] += weights[j] * v_head[j * d + p];
        }
      }
    }
  });
  return out;
}

RefTensor decode_attention(const RefTensor& q, const RefTensor& k, const RefTensor& v,
                           const std::vector<int64_t>& lengths, double scale) {
  const int64_t B = q.shape[0], H = q.shape[1], D = q.shape[2], Hkv = k.shape[1], S = k.shape[2], group = H / Hkv;
  RefTensor out({B, H, D});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t length = lengths[static_cast<size_t>(b)];
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const double* qv = q.data.data() + (b * H + h) * D;
      std::vector<double> scores(static_cast<size_t>(length));
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t p = 0; p < length; ++p) {
        const double* kv = k.data.data() + ((b * Hkv + g) * S + p) * D;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qv[d] * kv[d];
        scores[static_cast<size_t>(p)] = dot * scale;
        top = std::max(top, dot * scale);
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - top));
      double* o = out.data.data() + (b * H + h) * D;
      for (int64_t p = 0; p < length; ++p) {
        const double* vv = v.data.data() + ((b * Hkv + g) * S + p) * D;
        for (int64_t d = 0; d < D; ++d) o[d] += scores[static_cast<size_t>(p)] / sum * vv[d];
      }
    }
  }
  return out;
}

}  // namespace blockscope::reference
