#include "ops/catalogue/catalogue.h"

#include <cstdio>

#include "ops/activation/backends.h"
#include "ops/all_gather/backends.h"
#include "ops/all_reduce/backends.h"
#include "ops/attention/backends.h"
#include "ops/common/flops.h"
#include "ops/common/kernel_names.h"
#include "ops/decode_attention/backends.h"
#include "ops/kv_cache/backends.h"
#include "ops/elementwise/backends.h"
#include "ops/fp8_linear/backends.h"
#include "ops/fp8_weight_linear/backends.h"
#include "ops/linear/backends.h"
#include "ops/linear/skinny_gemm.h"
#include "ops/mlp/mlp.h"
#include "ops/norm/backends.h"
#include "ops/precision/backends.h"
#include "ops/reduce_scatter/backends.h"
#include "ops/rope/backends.h"
#include "ops/softmax/backends.h"
#include "runtime/error.h"

namespace blockscope::ops {

int64_t OpCall::size(const std::string& name) const {
  const auto it = sizes.find(name);
  BS_CHECK_INPUT(it != sizes.end(), "op catalogue: the call has no size '", name, "'");
  return it->second;
}

bool OpCall::flag(const std::string& name) const {
  const auto it = flags.find(name);
  return it != flags.end() && it->second;
}

namespace {

using Names = std::vector<std::string>;

double d(int64_t v) { return static_cast<double>(v); }

// 1.23e+18: an element count too large to spell out.
std::string fmt_elements(double elements) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", elements);
  return text;
}

double elem(const OpCall& c) { return static_cast<double>(dtype_size(c.dtype)); }

Activation activation_of(const OpCall& c) {
  Activation act{};
  BS_CHECK_INPUT(parse_activation(c.activation, &act), "op catalogue: unknown activation '", c.activation, "'");
  return act;
}

template <class Path>
Path path_of(const OpCall& c) {
  Path path{};
  BS_CHECK_INPUT(parse_path(c.path, &path), "op catalogue: unknown path '", c.path, "'");
  return path;
}

// Single-kernel ops: that kernel on every device.
template <const char* kName>
Names one_kernel(const OpCall&, DeviceType) {
  return {kName};
}

// ---- costs, from the formulas the ops record (their headers) --------------------------------
// Sizes: R rows of N elements; B, H, Hkv, Sq, Sk, D for attention; M, K, N for a GEMM
// (x [M, K], y [M, N]); T tokens, D model width, F hidden width for the MLP.

OpCost rows_cost(const OpCall& c, double flops_per_element, int reads, int writes) {
  const double n = d(c.size("R")) * d(c.size("N"));
  return {flops_per_element * n, (reads + writes) * n * elem(c)};
}

OpCost add_cost(const OpCall& c) {
  const double n = d(c.size("R")) * d(c.size("N"));
  const double b = c.flag("broadcast") ? d(c.size("N")) : n;  // b is [N] or a's shape
  return {n, (2 * n + b) * elem(c)};
}
OpCost mul_cost(const OpCall& c) { return rows_cost(c, 1.0, 2, 1); }
OpCost scale_cost(const OpCall& c) { return rows_cost(c, 1.0, 1, 1); }
OpCost copy_cost(const OpCall& c) { return rows_cost(c, 0.0, 1, 1); }

double masked_bytes(const OpCall& c) {
  return causal_masked_elements(c.size("B"), c.size("Sq"), c.size("Sk")) * elem(c);
}
OpCost masked_fill_cost(const OpCall& c) {
  return {0.0, 2 * d(c.size("B")) * d(c.size("Sq")) * d(c.size("Sk")) * elem(c) + masked_bytes(c)};
}
OpCost masked_fill_inplace_cost(const OpCall& c) { return {0.0, masked_bytes(c)}; }

OpCost activation_cost(const OpCall& c) {
  return rows_cost(c, activation_flops_per_element(activation_of(c)), 1, 1);
}
OpCost gated_activation_cost(const OpCall& c) {
  return rows_cost(c, activation_flops_per_element(activation_of(c)) + 1.0, 2, 1);
}

OpCost layer_norm_cost(const OpCall& c) {
  const double n = d(c.size("N"));
  const OpCost rows = rows_cost(c, kLayerNormFlopsPerElement, 1, 1);
  return {rows.flops, rows.bytes + (c.flag("bias") ? 2 : 1) * n * elem(c)};  // weight (and bias) [N]
}
OpCost rms_norm_cost(const OpCall& c) {
  const OpCost rows = rows_cost(c, kRmsNormFlopsPerElement, 1, 1);
  return {rows.flops, rows.bytes + d(c.size("N")) * elem(c)};
}
OpCost softmax_cost(const OpCall& c) { return rows_cost(c, kSoftmaxFlopsPerElement, 1, 1); }
OpCost softmax_scale_causal_cost(const OpCall& c) { return rows_cost(c, kSoftmaxScaleFlopsPerElement, 1, 1); }

OpCost rope_cost(const OpCall& c) {
  const double n = d(c.size("B")) * d(c.size("H")) * d(c.size("S")) * d(c.size("D"));
  return {kRopeFlopsPerElement * n, 2 * n * elem(c)};
}

// The precision ops: the call's dtype is the compute side's (x of quantize and amax, y of
// dequantize); FP8 elements are 1 byte; a scale, its inverse or an amax is one f32 (4 bytes).
constexpr double kFp8Bytes = 1.0, kScalarBytes = 4.0;
OpCost quantize_cost(const OpCall& c) {
  const double n = d(c.size("R")) * d(c.size("N"));
  const bool amax = c.flag("amax");  // the running amax, read and written
  return {(kQuantizeFlopsPerElement + (amax ? kAmaxFlopsPerElement : 0.0)) * n,
          n * elem(c) + kScalarBytes + n * kFp8Bytes + (amax ? 2 * kScalarBytes : 0.0)};
}
OpCost dequantize_cost(const OpCall& c) {
  const double n = d(c.size("R")) * d(c.size("N"));
  return {kDequantizeFlopsPerElement * n, n * kFp8Bytes + kScalarBytes + n * elem(c)};
}
// The history compared, a divide and a reciprocal; the history read (and written back when
// rolled), the old scale read, the scale and its inverse written; the saturation counts read and
// written.
OpCost fp8_scale_update_cost(const OpCall& c) {
  const double h = d(c.size("H"));
  const double saturation = c.flag("saturation") ? 2 * 3 * kScalarBytes : 0.0;  // f32 [3] read and written
  return {h + 2.0, h * kScalarBytes * (c.flag("roll") ? 2 : 1) + 3 * kScalarBytes + saturation};
}
OpCost amax_cost(const OpCall& c) {
  const double n = d(c.size("R")) * d(c.size("N"));
  return {kAmaxFlopsPerElement * n, n * elem(c) + kScalarBytes};
}

OpCost linear_cost(const OpCall& c) {
  const int64_t m = c.size("M"), k = c.size("K"), n = c.size("N");
  const double bias = c.flag("bias") ? d(n) : 0.0;
  return {linear_flops(m, k, n), (d(m) * d(k) + d(n) * d(k) + bias + d(m) * d(n)) * elem(c)};
}

// The call's dtype is y's (FP8 or a compute type); x and w are FP8; the bias 16-bit; the two
// dequantisation scales, an FP8 y's out_scale and the amax one f32 each.
OpCost fp8_linear_cost(const OpCall& c) {
  const int64_t m = c.size("M"), k = c.size("K"), n = c.size("N");
  const double scalars = 2 + (is_fp8(c.dtype) ? 1 : 0) + (c.flag("amax") ? 1 : 0);
  return {linear_flops(m, k, n), (d(m) * d(k) + d(n) * d(k)) * kFp8Bytes + (c.flag("bias") ? 2 * d(n) : 0.0) +
                                     d(m) * d(n) * elem(c) + scalars * kScalarBytes};
}

// Weight-only FP8: x, bias and y of the call's dtype; w FP8; one f32 dequantisation factor per row.
OpCost fp8_weight_linear_cost(const OpCall& c) {
  const int64_t m = c.size("M"), k = c.size("K"), n = c.size("N");
  const double bias = c.flag("bias") ? d(n) : 0.0;
  return {linear_flops(m, k, n), d(n) * d(k) * kFp8Bytes + d(n) * kScalarBytes + (d(m) * d(k) + bias + d(m) * d(n)) * elem(c)};
}

OpCost batched_matmul_cost(const OpCall& c) {
  // a [batch, M, K], b [batch / G, K, N], c [batch, M, N]
  const int64_t batch = c.size("batch"), m = c.size("M"), k = c.size("K"), n = c.size("N");
  const double b_matrices = d(batch) / d(c.size("G"));
  return {gemm_flops(batch * m, n, k), (d(batch) * d(m) * d(k) + b_matrices * d(k) * d(n) + d(batch) * d(m) * d(n)) * elem(c)};
}

OpCost attention_cost(const OpCall& c) {
  const int64_t b = c.size("B"), h = c.size("H"), hkv = c.size("Hkv"), sq = c.size("Sq"), sk = c.size("Sk"),
                dh = c.size("D");
  const double q_and_out = 2 * d(b) * d(h) * d(sq) * d(dh), k_and_v = 2 * d(b) * d(hkv) * d(sk) * d(dh);
  return {attention_flops(b, h, sq, sk, dh, c.flag("causal")), (q_and_out + k_and_v) * elem(c)};
}

// W: rows written in all, each [Hkv, D] of k and of v, read once and written once.
OpCost kv_cache_write_cost(const OpCall& c) {
  return {0.0, 4.0 * d(c.size("W")) * d(c.size("Hkv")) * d(c.size("D")) * elem(c)};
}

// N elements all-reduced over `ranks`: the additions, and the bus bytes (all_reduce.h).
OpCost all_reduce_cost(const OpCall& c) {
  const int ranks = static_cast<int>(c.size("ranks"));
  return {all_reduce_flops(d(c.size("N")), ranks), all_reduce_bus_bytes(d(c.size("N")) * elem(c), ranks)};
}

// Sequence parallelism: N elements of the whole tensor (reduce_scatter's input, all_gather's
// output) over `ranks`: the additions of one rank's block, and the bus bytes (reduce_scatter.h).
OpCost reduce_scatter_cost(const OpCall& c) {
  const int ranks = static_cast<int>(c.size("ranks"));
  const double n = d(c.size("N"));
  return {ranks <= 1 ? 0.0 : n * (ranks - 1) / ranks, reduce_scatter_bus_bytes(n * elem(c), ranks)};
}
OpCost all_gather_cost(const OpCall& c) {
  return {0.0, reduce_scatter_bus_bytes(d(c.size("N")) * elem(c), static_cast<int>(c.size("ranks")))};
}

// L: the sequences' lengths summed (the cached rows read).
OpCost decode_attention_cost(const OpCall& c) {
  const int64_t b = c.size("B"), h = c.size("H"), hkv = c.size("Hkv"), dh = c.size("D"), l = c.size("L");
  return {decode_attention_flops(h, dh, l), decode_attention_bytes(b, h, hkv, dh, l, c.dtype)};
}

OpCost mlp_cost(const OpCall& c) {
  const int64_t t = c.size("T"), dm = c.size("D"), f = c.size("F");
  const bool gated = c.flag("gated");
  // plain: fc [F, D] + bias [F], proj [D, F] + bias [D]; gated: gate and up [F, D], down [D, F].
  const double weights = gated ? 3 * d(dm) * d(f) : 2 * d(dm) * d(f) + (c.flag("bias") ? d(f) + d(dm) : 0.0);
  return {mlp_flops(t, dm, f, gated), (2 * d(t) * d(dm) + weights) * elem(c)};
}

// ---- kernels per call ----------------------------------------------------------------------

Names masked_fill_kernels(const OpCall&, DeviceType) {
  return {kernel_names::kMemcpyDtoD, kernel_names::kMaskedFillCausal};  // out of place: copy, then fill
}
Names copy_kernels(const OpCall& c, DeviceType) {
  // A contiguous source is one device-to-device copy; a strided view, the gather kernel.
  return {c.flag("strided") ? kernel_names::kCopy : kernel_names::kMemcpyDtoD};
}
Names activation_kernels(const OpCall& c, DeviceType) { return {kernel_names::activation(activation_of(c))}; }
Names gated_activation_kernels(const OpCall& c, DeviceType) {
  return {kernel_names::gated_activation(activation_of(c))};
}
Names batched_matmul_kernels(const OpCall& c, DeviceType device) {
  // CUDA writes an empty sum (K = 0) with a memset; the CPU runs its GEMM.
  if (device == DeviceType::cuda && c.size("K") == 0) return {kernel_names::kMemset};
  return {c.path.empty() ? kernel_names::kGemm : c.path};  // recorded under its label
}

// Whether CUDA runs a linear of sizes M, K, N (flag in_out: W is [K, N]) on its weight-streaming
// kernel rather than cuBLASLt: ops/linear/skinny_gemm.h's rule, for contiguous operands (so every
// row starts 16-byte aligned exactly when a row of K elements is a multiple of 16 bytes). A call
// without sizes (the path table's kernel counts) gets cuBLASLt's names: the same count.
bool streams_weights(const OpCall& c, DeviceType device, LinearPath path) {
  if (device != DeviceType::cuda || !c.sizes.count("M") || !c.sizes.count("K") || !c.sizes.count("N")) return false;
  const int64_t rows = c.size("M"), in = c.size("K"), out = c.size("N");
  const bool rows_whole = (in * static_cast<int64_t>(dtype_size(c.dtype))) % 16 == 0;
  SkinnyGemm g;
  g.rows = rows;
  g.in = in;
  g.out = out;
  g.dtype = c.dtype;
  g.layout = c.flag("in_out") ? WeightLayout::in_out : WeightLayout::out_in;
  g.path = path;
  g.rows_aligned16 = (rows <= 1 || rows_whole) && (out <= 1 || rows_whole);
  return use_weight_streaming(g, weight_streaming_mode());
}

// linear: naive GEMM, bias, GELU; epilogue one GEMM; addmm bias copy, GEMM(beta = 1), GELU. On
// CUDA the GEMM is the weight-streaming kernel where its rule takes the call (streams_weights).
Names linear_kernels(const OpCall& c, DeviceType device) {
  const bool bias = c.flag("bias"), gelu = c.flag("gelu");
  Names names;
  if (device == DeviceType::cuda && c.sizes.count("K") && c.size("K") == 0) {
    // CUDA: an empty sum (K = 0) is y = bias (broadcast copy) or zeros (memset) on any path.
    names = {bias ? kernel_names::kBiasBroadcastCopy : kernel_names::kMemset};
    if (gelu) names.push_back(kernel_names::activation(Activation::gelu_tanh));
    return names;
  }
  const LinearPath path = path_of<LinearPath>(c);
  const bool streams = streams_weights(c, device, path);
  switch (path) {
    case LinearPath::naive:
      names = {streams ? kernel_names::kWeightStreaming : kernel_names::kGemm};
      if (bias) names.push_back(kernel_names::kBiasAdd);
      break;
    case LinearPath::epilogue:
      return {kernel_names::gemm_with_epilogue(bias, gelu, streams)};
    case LinearPath::addmm:
      if (bias) names.push_back(kernel_names::kBiasBroadcastCopy);
      names.push_back(kernel_names::kGemm);
      break;
  }
  if (gelu) names.push_back(kernel_names::activation(Activation::gelu_tanh));
  return names;
}

Names attention_kernels(const OpCall& c, DeviceType device) {
  const bool causal = c.flag("causal");
  switch (path_of<AttentionPath>(c)) {
    case AttentionPath::naive:
      if (causal)
        return {kernel_names::kGemmQk, kernel_names::kScale, kernel_names::kMemcpyDtoD,
                kernel_names::kMaskedFillCausal, kernel_names::kSoftmax, kernel_names::kGemmPv};
      break;
    case AttentionPath::inplace:
      if (causal)
        return {kernel_names::kGemmQk, kernel_names::kScale, kernel_names::kMaskedFillCausal, kernel_names::kSoftmax,
                kernel_names::kGemmPv};
      break;
    case AttentionPath::fused_softmax:
      return {kernel_names::kGemmQk, kernel_names::kSoftmaxCausalScale, kernel_names::kGemmPv};
    case AttentionPath::flash:
      // On CUDA a short query (Sq <= 64) over many keys may be split over the keys
      // (flash-decoding, ops/attention/flash.cu): then the split-key combine kernel follows (the
      // one flash decode's splits use). The call says so with the flag split_keys.
      if (device == DeviceType::cuda && c.flag("split_keys"))
        return {kernel_names::kFlashAttention, kernel_names::kSplitCombine};
      return {kernel_names::kFlashAttention};
  }
  return {kernel_names::kGemmQk, kernel_names::kScale, kernel_names::kSoftmax, kernel_names::kGemmPv};
}

Names decode_attention_kernels(const OpCall& c, DeviceType device) {
  if (path_of<AttentionPath>(c) == AttentionPath::naive)
    return {kernel_names::kDecodeQk, kernel_names::kDecodeSoftmax, kernel_names::kDecodePv};
  // CUDA splits a sequence's keys over blocks when B · Hkv cannot fill the GPU
  // (ops/decode_attention/cuda.cu); the call says so with split_keys.
  if (device == DeviceType::cuda && c.flag("split_keys")) return {kernel_names::kFlashDecode, kernel_names::kSplitCombine};
  return {kernel_names::kFlashDecode};
}

// The MLP is the sum of its public ops (ops/mlp/mlp.cpp).
Names mlp_kernels(const OpCall& c, DeviceType device) {
  const Activation act = activation_of(c);
  const bool bias = !c.flag("gated") && c.flag("bias");
  const bool sized = c.sizes.count("T") && c.sizes.count("D") && c.sizes.count("F");
  const int64_t T = sized ? c.size("T") : 0, D = sized ? c.size("D") : 0, F = sized ? c.size("F") : 0;
  // One of its linears: x [T, in] -> [T, out] (unsized when the call is: the path table's counts).
  auto gemm = [&](const char* path, int64_t in, int64_t out, bool gelu = false) {
    OpCall l;
    l.path = path;
    if (sized) l.sizes = {{"M", T}, {"K", in}, {"N", out}};
    l.flags = {{"bias", bias}, {"gelu", gelu}, {"in_out", c.flag("in_out")}};
    l.dtype = c.dtype;
    return linear_kernels(l, device);
  };
  auto append = [](Names& to, const Names& from) { to.insert(to.end(), from.begin(), from.end()); };
  Names names;
  const MlpPath path = path_of<MlpPath>(c);
  if (!c.flag("gated")) {
    const char* linear_path = path == MlpPath::naive ? "naive" : "epilogue";
    const bool gelu_epilogue = path != MlpPath::naive && act == Activation::gelu_tanh;
    append(names, gemm(linear_path, D, F, gelu_epilogue));
    if (!gelu_epilogue) names.push_back(kernel_names::activation(act));
    append(names, gemm(linear_path, F, D));
  } else if (path == MlpPath::naive) {  // gate, up, act(gate), gate · up, down
    append(names, gemm("naive", D, F));
    append(names, gemm("naive", D, F));
    names.push_back(kernel_names::activation(act));
    names.push_back(kernel_names::kMul);
    append(names, gemm("naive", F, D));
  } else {  // gate|up in one GEMM, the gated activation, down
    append(names, gemm("epilogue", D, 2 * F));
    names.push_back(kernel_names::gated_activation(act));
    append(names, gemm("epilogue", F, D));
  }
  return names;
}

Names fp8_linear_kernels(const OpCall& c, DeviceType) {
  return {kernel_names::fp8_gemm(c.flag("bias"), c.flag("gelu"))};
}

Names fp8_weight_linear_kernels(const OpCall& c, DeviceType) {
  return {kernel_names::fp8_weight_gemm(c.flag("bias"), c.flag("gelu"))};
}

Names quantize_kernels(const OpCall& c, DeviceType) {
  return {c.flag("amax") ? kernel_names::kQuantizeAmax : kernel_names::kQuantize};
}
// CUDA zeroes the amax before the blocks' atomic maxima meet in it.
Names amax_kernels(const OpCall&, DeviceType device) {
  if (device == DeviceType::cuda) return {kernel_names::kMemset, kernel_names::kAmax};
  return {kernel_names::kAmax};
}

std::string activation_event_name(const OpCall& c) { return activation_name(activation_of(c)); }
std::string no_path(const OpCall&) { return ""; }

std::vector<OpSpec> make_catalogue() {
  using profiler::Family;
  const Names rows{"R", "N"}, scores{"B", "Sq", "Sk"};
  return {
      {"add", Family::elementwise, std::nullopt, rows, {rows}, {"broadcast"}, false,
       "out = a + b; a, out [R, N], b [R, N] or [N] (row broadcast)", add_cost, one_kernel<kernel_names::kAdd>},
      {"mul", Family::elementwise, std::nullopt, rows, {rows}, {}, false, "out = a * b; [R, N]", mul_cost,
       one_kernel<kernel_names::kMul>},
      {"scale", Family::elementwise, std::nullopt, rows, {rows}, {}, false, "out = x * factor; [R, N]", scale_cost,
       one_kernel<kernel_names::kScale>},
      {"copy", Family::copy, std::nullopt, rows, {rows}, {"strided"}, false, "dst = src; [R, N], src any strides",
       copy_cost, copy_kernels},
      {"masked_fill", Family::elementwise, std::nullopt, scores, {scores}, {}, false,
       "out = scores.masked_fill(causal, value); scores [B, Sq, Sk]", masked_fill_cost, masked_fill_kernels},
      {"masked_fill_", Family::elementwise, std::nullopt, scores, {scores}, {}, false,
       "scores.masked_fill_(causal, value); scores [B, Sq, Sk]", masked_fill_inplace_cost,
       one_kernel<kernel_names::kMaskedFillCausal>},
      {"activation", Family::activation, std::nullopt, rows, {rows}, {}, true, "y = act(x); [R, N]", activation_cost,
       activation_kernels, activation_event_name, no_path},
      {"gated_activation", Family::activation, std::nullopt, rows, {rows}, {}, true,
       "y = act(gate) * up; [R, N], gate and up may be column halves of one [R, 2N]", gated_activation_cost,
       gated_activation_kernels, nullptr, activation_event_name},
      {"layer_norm", Family::norm, std::nullopt, rows, {rows}, {"bias"}, false,
       "y = (x - mean) / sqrt(var + eps) * weight + bias; x, y [R, N], weight, bias [N]", layer_norm_cost,
       one_kernel<kernel_names::kLayerNorm>},
      {"rms_norm", Family::norm, std::nullopt, rows, {rows}, {}, false,
       "y = x / sqrt(mean(x^2) + eps) * weight; x, y [R, N], weight [N]", rms_norm_cost,
       one_kernel<kernel_names::kRmsNorm>},
      {"softmax", Family::softmax, std::nullopt, rows, {rows}, {}, false, "y = softmax(x) over N; [R, N]", softmax_cost,
       one_kernel<kernel_names::kSoftmax>},
      {"softmax_scale_causal", Family::softmax, std::nullopt, rows, {rows}, {}, false,
       "y = softmax(scale * x + causal mask) over N; [R, N] (R = matrices x Sq)", softmax_scale_causal_cost,
       one_kernel<kernel_names::kSoftmaxCausalScale>},
      {"rope", Family::rope, std::nullopt, {"B", "H", "S", "D"}, {{"B", "H", "S", "D"}}, {}, false,
       "rotary embedding, rotate_half; x, y [B, H, S, D]", rope_cost, one_kernel<kernel_names::kRope>},
      {"linear", Family::linear, PathOp::linear, {"M", "K", "N"}, {{"M", "N"}, {"M", "K"}, {"K", "N"}},
       {"bias", "gelu", "in_out"}, false,
       "y = x * W^T + b (in_out: x * W); x [M, K], y [M, N], optional tanh-GELU", linear_cost, linear_kernels},
      {"fp8_linear", Family::linear, std::nullopt, {"M", "K", "N"}, {{"M", "N"}, {"M", "K"}, {"K", "N"}},
       {"bias", "gelu", "amax"}, false,
       "y = (x * sx) (w * sw)^T + b, optional tanh-GELU, accumulated in f32; x [M, K], w [N, K] FP8, y [M, N] "
       "(the call's dtype; FP8 through out_scale); amax: max |y| before out_scale",
       fp8_linear_cost, fp8_linear_kernels},
      {"fp8_weight_linear", Family::linear, std::nullopt, {"M", "K", "N"}, {{"M", "N"}, {"M", "K"}, {"K", "N"}},
       {"bias", "gelu"}, false,
       "y = x (w * w_scale)^T + b, optional tanh-GELU, accumulated in f32; x [M, K], y [M, N] (the call's dtype), "
       "w [N, K] FP8 codes, w_scale [N] f32 (weight-only FP8)",
       fp8_weight_linear_cost, fp8_weight_linear_kernels},
      {"batched_matmul", Family::linear, std::nullopt, {"batch", "G", "M", "K", "N"},
       {{"batch", "M", "N"}, {"batch", "M", "K"}, {"batch", "K", "N"}}, {}, false,
       "c[i] = alpha * a[i] * op(b[i / G]); a [batch, M, K], c [batch, M, N]; path = the kernel label",
       batched_matmul_cost, batched_matmul_kernels, nullptr, nullptr, /*path_is_kernel_label=*/true},
      {"attention", Family::attention, PathOp::attention, {"B", "H", "Hkv", "Sq", "Sk", "D"},
       {{"B", "H", "Sq", "D"}, {"B", "Hkv", "Sk", "D"}}, {"causal", "split_keys"}, false,
       "softmax(q k^T * scale + mask) v; q, out [B, H, Sq, D], k, v [B, Hkv, Sk, D]", attention_cost,
       attention_kernels},
      {"kv_cache_write", Family::copy, std::nullopt, {"B", "Hkv", "S", "D", "W"},
       {{"W", "Hkv", "D"}, {"B", "Hkv", "S", "D"}}, {}, false,
       "cache[b, starts[b] + s] = k_new, v_new[b, :, s] for s < counts[b]; k_new, v_new [B, Hkv, S, D], W rows "
       "written in all; the cache paged or contiguous",
       kv_cache_write_cost, one_kernel<kernel_names::kKvCacheWrite>},
      {"decode_attention", Family::attention, std::nullopt, {"B", "H", "Hkv", "D", "L"},
       {{"B", "H", "D"}, {"L", "Hkv", "D"}}, {"split_keys"}, false,
       "softmax(q k^T * scale) v over each sequence's cached positions; q, out [B, H, D], L = the lengths summed; "
       "path naive or flash",
       decode_attention_cost, decode_attention_kernels, nullptr, nullptr, false, {"naive", "flash"}},
      {"mlp", Family::linear, PathOp::mlp, {"T", "D", "F"}, {{"T", "D"}, {"T", "F"}, {"D", "F"}},
       {"gated", "bias", "in_out"}, true,
       "plain proj(act(fc(x))) or gated down(act(gate(x)) * up(x)); x, y [T, D], hidden F; in_out: [in, out] "
       "weights",
       mlp_cost, mlp_kernels},
      {"quantize", Family::precision, std::nullopt, rows, {rows}, {"amax"}, false,
       "y = fp8(x * scale), saturating; x [R, N] (the call's dtype), y [R, N] FP8, scale f32 [1]; amax: also "
       "amax = max(amax, max |x|)",
       quantize_cost, quantize_kernels},
      {"dequantize", Family::precision, std::nullopt, rows, {rows}, {}, false,
       "y = x * scale_inv; x [R, N] FP8, y [R, N] (the call's dtype), scale_inv f32 [1]", dequantize_cost,
       one_kernel<kernel_names::kDequantize>},
      {"amax", Family::precision, std::nullopt, rows, {{}, rows}, {}, false,
       "amax = max |x| (NaN if x holds one, 0 for no elements); x [R, N], amax f32 [1]", amax_cost, amax_kernels},
      {"fp8_scale_update", Family::precision, std::nullopt, {"H"}, {{}, {"H"}}, {"roll", "saturation"}, false,
       "scale = fp8 max / amax / 2^margin (kept when amax is 0 or not finite), scale_inv = 1 / scale; amax the "
       "max (or the newest) of an f32 [H] history; roll: the history shifts by one; saturation: first counts "
       "whether the newest amax times the old scale passed the format's clip threshold (f32 [3])",
       fp8_scale_update_cost, one_kernel<kernel_names::kScaleUpdate>},
      {"all_reduce", Family::collective, std::nullopt, {"N", "ranks"}, {{"N"}}, {}, false,
       "t = the sum of every rank's t, in place; t N elements, contiguous; bytes: the bus bytes, "
       "N * element size * 2(ranks - 1)/ranks",
       all_reduce_cost, one_kernel<kernel_names::kAllReduce>},
      {"reduce_scatter", Family::collective, std::nullopt, {"N", "ranks"}, {{"N"}}, {}, false,
       "out = this rank's block of rows of the sum of every rank's x; x [ranks * n, ...] N elements, out [n, ...]; "
       "bytes: the bus bytes, N * element size * (ranks - 1)/ranks",
       reduce_scatter_cost, one_kernel<kernel_names::kReduceScatter>},
      {"all_gather", Family::collective, std::nullopt, {"N", "ranks"}, {{"N"}}, {}, false,
       "out = every rank's x in rank order along dim 0; x [n, ...], out [ranks * n, ...] N elements; bytes: the "
       "bus bytes, N * element size * (ranks - 1)/ranks",
       all_gather_cost, one_kernel<kernel_names::kAllGather>},
  };
}

}  // namespace

const std::vector<OpSpec>& op_catalogue() {
  static const std::vector<OpSpec> catalogue = make_catalogue();
  return catalogue;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpSpec& spec : op_catalogue()) names.push_back(spec.name);
  return names;
}

std::vector<std::string> op_paths(const OpSpec& spec) {
  return spec.path_op ? path_names(*spec.path_op) : spec.own_paths;
}

const OpSpec& op_spec(const std::string& name) {
  for (const OpSpec& spec : op_catalogue())
    if (name == spec.name) return spec;
  std::string known;
  for (const std::string& n : op_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::invalid_input, "op catalogue: no op '" + name + "' (known: " + known + ")");
}

void check_call(const OpSpec& spec, const OpCall& call) {
  const std::string op = spec.name;
  const auto fail = [&](const std::string& why) { throw Error(ErrorKind::invalid_input, op + ": " + why); };
  const auto has = [&](const char* name) { return call.sizes.count(name) > 0; };
  for (const auto& [name, value] : call.sizes) {
    if (value < 0) fail("size '" + name + "' = " + std::to_string(value) + " is negative");
    if (value > kMaxCallSize)
      fail("size '" + name + "' = " + std::to_string(value) + " is over " + std::to_string(kMaxCallSize) +
           " (2^31 - 1, what an int holds)");
  }
  for (const std::vector<std::string>& tensor : spec.tensors) {
    double elements = 1;
    std::string names;
    bool sized = true;
    for (const std::string& name : tensor) {
      sized = sized && has(name.c_str());
      if (!sized) break;
      elements *= d(call.sizes.at(name));
      names += (names.empty() ? "" : " x ") + name;
    }
    if (sized && elements > kMaxCallElements)
      fail("impossible size: " + names + " = " + fmt_elements(elements) +
           " elements, more than any device holds (at most 2^50 per tensor)");
  }
  if (has("H") && has("Hkv")) {
    const int64_t h = call.sizes.at("H"), hkv = call.sizes.at("Hkv");
    if (hkv < 1 || h % hkv != 0)
      fail("size 'Hkv' = " + std::to_string(hkv) + " must be at least 1 and divide H = " + std::to_string(h) +
           " (the query heads share the kv heads evenly)");
  }
  if (has("batch") && has("G")) {
    const int64_t batch = call.sizes.at("batch"), g = call.sizes.at("G");
    if (g < 1 || batch % g != 0)
      fail("size 'G' = " + std::to_string(g) + " must be at least 1 and divide batch = " + std::to_string(batch));
  }
  if (has("ranks")) {
    const int64_t ranks = call.sizes.at("ranks");
    if (ranks < 1) fail("size 'ranks' = " + std::to_string(ranks) + " must be at least 1");
    if (op != "all_reduce" && has("N") && call.sizes.at("N") % ranks != 0)
      fail("size 'N' = " + std::to_string(call.sizes.at("N")) + " must be a multiple of ranks = " +
           std::to_string(ranks) + " (every rank holds an equal block)");
  }
  if (op == "decode_attention" && has("L") && has("B") && call.sizes.at("L") < call.sizes.at("B"))
    fail("size 'L' = " + std::to_string(call.sizes.at("L")) + " (the lengths summed) must be at least B = " +
         std::to_string(call.sizes.at("B")) + ": every sequence attends at least one position");
  if (op == "kv_cache_write" && has("W") && has("B") && has("S") &&
      d(call.sizes.at("W")) > d(call.sizes.at("B")) * d(call.sizes.at("S")))
    fail("size 'W' = " + std::to_string(call.sizes.at("W")) + " (rows written) is more than B x S = " +
         fmt_elements(d(call.sizes.at("B")) * d(call.sizes.at("S"))) + " rows the sources hold");
}

double output_elements(const OpSpec& spec, const OpCall& call) {
  double elements = 1;
  if (!spec.tensors.empty())
    for (const std::string& name : spec.tensors.front()) elements *= d(call.size(name));
  return elements;
}

std::vector<std::string> launched_kernels(const OpSpec& spec, const OpCall& call, DeviceType device) {
  if (output_elements(spec, call) == 0) return {};
  return spec.kernels(call, device);
}

std::string recorded_name(const OpSpec& spec, const OpCall& call) {
  return spec.event_name != nullptr ? spec.event_name(call) : spec.name;
}

std::string recorded_path(const OpSpec& spec, const OpCall& call) {
  return spec.event_path != nullptr ? spec.event_path(call) : call.path;
}

std::vector<std::string> path_kernels(const PathInfo& row, bool causal, DeviceType device) {
  OpCall call;
  call.path = row.name;
  call.activation = "gelu_tanh";
  call.flags = {{"bias", true}, {"causal", causal}, {"gated", !row.plain_mlp}};
  return op_spec(path_op_name(row.op)).kernels(call, device);
}

}  // namespace blockscope::ops
