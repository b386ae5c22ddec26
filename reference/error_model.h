// Error bounds derived from a computation's arithmetic, not measured on one machine: every
// rounding error along the path to one output element, counted, and a bound on their sum.
//
// The model (probabilistic rounding error analysis, Higham & Mary 2019): each rounding error is
// at most u of the value it rounds and of random sign, so n of them add like √n·u, not n·u.
// An output element depends on
//   - the terms of every f32 sum on its path (a sum of k terms rounds k times, each at most
//     u32 of a partial sum, which is about the sum's own scale: √k·u32 relative to it, whatever
//     the GEMM library's blocking, which only shortens the chains), and f32 function
//     evaluations (exp, erf, tanh: up to 4 ulps, counted as 16 roundings);
//   - every intermediate stored in the run's dtype (one rounding of u_d each);
//   - an attention score's error enters its probability through exp, multiplied by the score's
//     magnitude: scores of unit-scale q and k (a normed block's, or uniform in [-2, 2]) have a
//     standard deviation up to 1.33 and reach about 6 in a large tensor, so a score counts
//     6² = 36 times.
// Along a block the layers' norms keep every value near the output's scale, so each error is
// relative to the largest output. The bound is kErrorMargin · √(u32² · f32 terms + u_d² · stored
// values): the margin covers the largest of many elements and the gains below 1.2 of GELU, SiLU
// and the softmax normalisation. It holds on every GEMM library and ISA (docs/TESTING.md shows
// the measurements against it) and is far below a wrong element (1e-3 and more).
#pragma once

#include <cstdint>

#include "model/config.h"
#include "runtime/dtype.h"

namespace blockscope::reference {

inline constexpr double kErrorMargin = 2.0;
// An f32 function evaluation (exp, erf, tanh) within 4 ulps: 4² roundings.
inline constexpr int64_t kEvaluationRoundings = 16;
// An attention score of magnitude up to s turns its absolute error into s times the relative
// error of its probability: s² roundings. Unit-scale q and k give scores up to about 6.
inline constexpr double kUnitScaleLargestScore = 6.0;

// The rounding errors one output element depends on.
struct RoundingCount {
  int64_t f32_terms = 0;  // terms of f32 sums and f32 evaluations (units of u32²)
  int64_t stored = 0;     // values stored in the run's dtype (units of u_d²)
  // Operands quantized to fp8_e4m3 on the way (units of u_e4m3² = 2^-8): an FP8 GEMM's two,
  // each element's rounding of random sign adding like the f32 terms, relative to the output.
  int64_t fp8 = 0;

  RoundingCount& operator+=(const RoundingCount& other) {
    f32_terms += other.f32_terms;
    stored += other.stored;
    fp8 += other.fp8;
    return *this;
  }
};

// kErrorMargin · √(u32² · f32_terms + u_d² · stored + u_e4m3² · fp8): the largest error relative
// to the largest reference value.
double error_bound(const RoundingCount& count, DType dtype);

// The pieces, for the op tests that bound one op.
// A GEMM of depth k, stored once (plus `epilogue_stores` for bias / activation passes).
RoundingCount gemm_roundings(int64_t k, int64_t epilogue_stores = 0);
// A softmax over rows of n: the f32 sum of n exps, the exp itself, the stored result.
RoundingCount softmax_roundings(int64_t n);
// Attention for one query: scores of depth head_dim (stored, and magnified by exp: `largest_score`
// is the largest |scale·q·k| expected), the softmax over `keys`, the probabilities' sum with V
// over `keys`, the stored output.
RoundingCount attention_roundings(int64_t head_dim, int64_t keys, double largest_score = kUnitScaleLargestScore);
// The MLP of `model`: fc (or gate and up) over d_model, the activation, proj over d_ff.
RoundingCount mlp_roundings(const ModelConfig& model);
// One block layer of `model` over `keys` positions, along its longest path (the naive one,
// which stores every intermediate).
RoundingCount block_layer_roundings(const ModelConfig& model, int64_t keys);
// A whole workload (every layer of a stack; a module's own op).
RoundingCount workload_roundings(const WorkloadConfig& config);

// error_bound(workload_roundings(config), config.dtype): what `check` holds a naive path to.
double workload_error_bound(const WorkloadConfig& config);

}  // namespace blockscope::reference
