// The skinny GEMMs of a decode step (M = batch rows ≤ 16): when the CUDA linear runs its own
// weight-streaming kernel instead of cuBLASLt. Pure host code (no CUDA headers), so the rule can
// be read, tested and quoted without a GPU; ops/linear/cuda.cu is its one caller today.
//
// The kernel (ops/linear/weight_streaming.cuh, `linear_weight_streaming*`): Y[m, o] = Σ_k X[m, k] ·
// W[o, k] (+ bias[o], + tanh-GELU on the epilogue path), f32 accumulation, for W in nn.Linear's
// [out, in] layout (WeightLayout::out_in). Each weight element is read exactly once per call,
// with 16-byte loads where every row of x and w starts on a 16-byte boundary; the M ≤ 16 partial
// sums stay in registers. A decode step's GEMM is pure weight streaming (M·K·N FLOPs on K·N
// weights: 2·M FLOPs per weight element), so its time is the weight bytes over the memory
// bandwidth — and cuBLASLt's heuristics for M ≤ 16 are known to pick tiles that leave bandwidth
// on the table (a 64- or 128-row tile mostly padding; split-K or not as it guesses).
//
// The rule (use_weight_streaming), under BLOCKSCOPE_LINEAR_WEIGHT_STREAMING=auto (the default):
//   - 1 ≤ rows ≤ kWeightStreamingMaxRows (16): beyond, the f32 FMAs per weight byte (M per
//     element, from registers) make the kernel compute-bound on the FP32 cores, where cuBLASLt's
//     tensor-core tiles win;
//   - layout out_in: each output's weights are one contiguous row (in_out would stream columns);
//   - the naive and epilogue paths only (addmm is torch.compile's bias copy + beta = 1 GEMM, kept
//     as it is); in ≥ 1 (k = 0 is the memset / bias copy of cuda.cu);
//   - every row of x and of w 16-byte aligned (x's base and row stride, w's base and row length
//     in bytes; a single row / single output needs no stride): the 16-byte loads need it, and a
//     misaligned operand goes to cuBLASLt, which is told its real alignment;
//   - weights of at least kWeightStreamingMinWeightBytes (1 MiB): below, the call is a few µs of
//     launch latency whichever kernel runs (and small enough to sit in L2), so the tested
//     cuBLASLt path keeps it.
// The thresholds are provisional: tuned on no GPU yet (no GPU has been lent to this project's
// sessions); a GPU run should time both kernels over M = 1..16 and the decode shapes and move them.
//
// BLOCKSCOPE_LINEAR_WEIGHT_STREAMING (read by weight_streaming_mode(), the one place):
//   auto (or unset / empty)  the rule above;
//   on                       wherever the kernel is able (weight_streaming_able: rows 1..16,
//                            out_in, naive or epilogue path, in ≥ 1): misaligned rows run its
//                            scalar loads, small weights run it too (tests, diagnosis);
//   off                      never: cuBLASLt as before.
// Anything else is an InputError naming the variable. Read at every call, so a test may set it
// around a call.
//
// The kernel table says what ran: `linear_weight_streaming` (naive path: then bias_add_kernel
// and gelu_tanh_kernel as before) or `linear_weight_streaming_bias` / `_gelu` / `_bias_gelu`
// (epilogue path, one kernel), the same kernel counts per path as cuBLASLt's; the
// Implementation column gives the dtype and the loads ("bf16, 16-byte loads").
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "ops/common/paths.h"
#include "ops/linear/linear.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace blockscope::ops {

inline constexpr int64_t kWeightStreamingMaxRows = 16;
inline constexpr int64_t kWeightStreamingMinWeightBytes = int64_t{1} << 20;
inline constexpr char kWeightStreamingEnv[] = "BLOCKSCOPE_LINEAR_WEIGHT_STREAMING";

enum class WeightStreamingMode { automatic, on, off };

// BLOCKSCOPE_LINEAR_WEIGHT_STREAMING, read now: unset or "" or "auto" → automatic.
inline WeightStreamingMode weight_streaming_mode() {
  const char* value = std::getenv(kWeightStreamingEnv);
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "auto") return WeightStreamingMode::automatic;
  if (text == "on") return WeightStreamingMode::on;
  if (text == "off") return WeightStreamingMode::off;
  throw InputError(std::string(kWeightStreamingEnv) + "='" + text + "': expected auto, on or off");
}

// What the rule looks at: the GEMM's shape and the operands' alignment.
struct SkinnyGemm {
  int64_t rows = 0, in = 0, out = 0;  // Y [rows, out] = X [rows, in] · Wᵀ
  DType dtype = DType::f32;
  WeightLayout layout = WeightLayout::out_in;
  LinearPath path = LinearPath::epilogue;
  bool rows_aligned16 = false;  // every row of x and w starts 16-byte aligned (weight_streaming_rows_aligned16)
};

// Every row of x (base x, rows `rows`, row stride `x_row_stride` elements) and of w (base w,
// `out` rows of `in` elements) starts on a 16-byte boundary: the kernel's 16-byte loads can run.
inline bool weight_streaming_rows_aligned16(const void* x, int64_t x_row_stride, int64_t rows, const void* w,
                                            int64_t in, int64_t out, DType dtype) {
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(x) && aligned(w) && (rows <= 1 || (x_row_stride * elem) % 16 == 0) &&
         (out <= 1 || (in * elem) % 16 == 0);
}

// The shapes the kernel can compute at all (with scalar loads where rows are misaligned).
inline bool weight_streaming_able(const SkinnyGemm& g) {
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  return g.rows >= 1 && g.rows <= kWeightStreamingMaxRows && g.layout == WeightLayout::out_in &&
         (g.path == LinearPath::naive || g.path == LinearPath::epilogue) && g.in >= 1 && g.in <= kIntMax &&
         g.out >= 1 && g.out <= kIntMax;
}

// The rule: true where the CUDA linear runs the weight-streaming kernel (see the top of this file).
inline bool use_weight_streaming(const SkinnyGemm& g, WeightStreamingMode mode) {
  if (mode == WeightStreamingMode::off || !weight_streaming_able(g)) return false;
  if (mode == WeightStreamingMode::on) return true;
  const int64_t weight_bytes = g.in * g.out * static_cast<int64_t>(dtype_size(g.dtype));
  return g.rows_aligned16 && weight_bytes >= kWeightStreamingMinWeightBytes;
}

}  // namespace blockscope::ops
