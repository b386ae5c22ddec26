// matmul + add (the series' Part 1) and linear (nn.Linear, Part 2) on every path:
// naive (GEMM, then a bias-add kernel), epilogue (bias in the GEMM), addmm (bias broadcast
// copy, then GEMM with beta = 1: what torch.compile makes of matmul + add).
//
// Shapes: the series' squares 64 and 4096 and the MLP's 8192 x 3072 x 768 on CUDA; small
// squares on CPU; tiny ones with --smoke.
//
// And the FP8 GEMM alone (workload "fp8_linear", variant e4m3: ops::fp8_linear on e4m3 x and w
// quantized once, bias, bf16 y; docs/FP8.md): its TFLOP/s by shape, beside the bf16 linear at
// the same shapes — on a GPU against the FP8 tensor cores' peak; on the CPU the codes are
// widened to f32 (no FP8 arithmetic), so its rows there say what the widening costs.
//
// And decode's skinny GEMMs (M = batch rows 1 and 8; TinyLlama-1.1B's gate/up and down shapes):
// weight-only FP8 (workload "fp8_weight_linear", variant e4m3: ops::fp8_weight_linear on e4m3
// codes with one scale per row, x, bias and y of the key's dtype; docs/FP8.md) beside
// "linear/epilogue" at the same shapes on a loaded (read-only) weight, as a decode step runs it:
// what streaming half (bf16) or a quarter (f32) of the weight bytes buys on this CPU.
//
// In oneDNN builds, on CPU, also oneDNN's own matmul primitive on the linear shapes, outside
// blockscope (workload "onednn_matmul", as benchdnn would time it): variant plain_weights
// passes W [n, k] as stored, blocked_weights passes W reordered once into the layout oneDNN
// picks for it (format_tag::any). The first is what blockscope's epilogue path runs; the pair
// says what reordering weights at load would buy.
#include <vector>

#include "bench/support/bench_support.h"
#include "ops/fp8_linear/fp8_linear.h"
#include "model/fp8_layer.h"
#include "ops/linear/linear.h"
#include "ops/precision/precision.h"

#ifdef BLOCKSCOPE_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace blockscope::bench {
namespace {

struct GemmShape {
  int64_t m, n, k;  // Y [m, n] = X [m, k] · W + bias [n]
};

const std::vector<ops::LinearPath> kPaths = ops::all_paths<ops::LinearPath>(ops::PathOp::linear);

// workload "matmul_add": W is [k, n] (in_out, Y = A·B + c); "linear": W is [n, k] (out_in,
// nn.Linear's layout; the transpose is a GEMM flag, never a copy).
void register_gemm(const char* workload, ops::WeightLayout layout, Device device, DType dtype, const GemmShape& s,
                   ops::LinearPath path) {
  Case c;
  c.key = workload_key(workload, ops::path_name(path), dtype, {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = dtype;
  set_cost(c, "linear", {ops::path_name(path), "", {{"M", s.m}, {"K", s.k}, {"N", s.n}}, {{"bias", true}}});
  register_case(c, [=](Context& ctx) {
    const Shape w_shape = layout == ops::WeightLayout::in_out ? Shape{s.k, s.n} : Shape{s.n, s.k};
    Tensor x = random_tensor(ctx, {s.m, s.k}, dtype, 1);
    Tensor w = random_tensor(ctx, w_shape, dtype, 2);
    Tensor bias = random_tensor(ctx, {s.n}, dtype, 3);
    Tensor y = ctx.empty({s.m, s.n}, dtype);
    return [&ctx, x, w, bias, y, path, layout]() mutable { ops::linear(ctx, x, w, bias, y, path, layout); };
  });
}

// Y [m, n] bf16 = X [m, k] e4m3 · W [n, k] e4m3ᵀ (each with its dequantisation scale) + bias:
// the operands quantized once in setup (amax, scale, cast), only the GEMM timed.
void register_fp8_gemm(Device device, const GemmShape& s) {
  Case c;
  c.key = workload_key("fp8_linear", "e4m3", DType::bf16, {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = DType::bf16;
  set_cost(c, "fp8_linear", {"", "", {{"M", s.m}, {"K", s.k}, {"N", s.n}}, {{"bias", true}}});
  register_case(c, [=](Context& ctx) {
    const auto quantized = [&ctx](const Tensor& t, Tensor& scale_inv) {
      Tensor amax = ctx.empty({1}, DType::f32), scale = ctx.empty({1}, DType::f32);
      scale_inv = ctx.empty({1}, DType::f32);
      from_floats(scale, {1.0f});
      Tensor codes = ctx.empty(t.shape(), DType::fp8_e4m3);
      ops::amax(ctx, t, amax);
      ops::fp8_scale_update(ctx, amax, scale, scale_inv, {});
      ops::quantize(ctx, t, scale, codes);
      return codes;
    };
    Tensor x_scale_inv, w_scale_inv;
    Tensor x = quantized(random_tensor(ctx, {s.m, s.k}, DType::bf16, 1), x_scale_inv);
    Tensor w = quantized(random_tensor(ctx, {s.n, s.k}, DType::bf16, 2), w_scale_inv);
    Tensor bias = random_tensor(ctx, {s.n}, DType::bf16, 3);
    Tensor y = ctx.empty({s.m, s.n}, DType::bf16);
    return [&ctx, x, x_scale_inv, w, w_scale_inv, bias, y]() mutable {
      ops::fp8_linear(ctx, x, x_scale_inv, w, w_scale_inv, bias, y);
    };
  });
}

// Y [m, n] = X [m, k] · (codes · w_scale)ᵀ + bias: the weight quantized to e4m3 once in setup.
void register_fp8_weight_gemm(Device device, DType dtype, const GemmShape& s) {
  Case c;
  c.key = workload_key("fp8_weight_linear", "e4m3", dtype, {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = dtype;
  set_cost(c, "fp8_weight_linear", {"", "", {{"M", s.m}, {"K", s.k}, {"N", s.n}}, {{"bias", true}}});
  register_case(c, [=](Context& ctx) {
    const Fp8RowWeight w(ctx, random_tensor(ctx, {s.n, s.k}, DType::f32, 2), DType::fp8_e4m3,
                         ops::WeightLayout::out_in, "w");
    Tensor x = random_tensor(ctx, {s.m, s.k}, dtype, 1);
    Tensor bias = random_tensor(ctx, {s.n}, dtype, 3);
    Tensor y = ctx.empty({s.m, s.n}, dtype);
    return [&ctx, x, w, bias, y]() mutable { fp8_weight_gemm(ctx, x, w, bias, y); };
  });
}

// linear's epilogue path on a read-only weight (a loaded one: the CPU's GEMM planner may keep a
// packed copy of it), the bf16/f32 twin of register_fp8_weight_gemm's rows.
void register_loaded_linear(Device device, DType dtype, const GemmShape& s) {
  Case c;
  c.key = workload_key("linear", "epilogue", dtype, {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = dtype;
  set_cost(c, "linear", {"epilogue", "", {{"M", s.m}, {"K", s.k}, {"N", s.n}}, {{"bias", true}}});
  register_case(c, [=](Context& ctx) {
    Tensor x = random_tensor(ctx, {s.m, s.k}, dtype, 1);
    Tensor w = random_tensor(ctx, {s.n, s.k}, dtype, 2);
    w.storage()->set_read_only();
    Tensor bias = random_tensor(ctx, {s.n}, dtype, 3);
    Tensor y = ctx.empty({s.m, s.n}, dtype);
    return [&ctx, x, w, bias, y]() mutable {
      ops::linear(ctx, x, w, bias, y, ops::LinearPath::epilogue, ops::WeightLayout::out_in);
    };
  });
}

#ifdef BLOCKSCOPE_WITH_ONEDNN
// Y [m, n] = X [m, k] · Wᵀ + bias, W stored [n, k]: one oneDNN matmul primitive, created once.
void register_onednn_matmul(Device device, DType dtype, const GemmShape& s, bool blocked_weights) {
  using dnnl::memory;
  Case c;
  c.key = workload_key("onednn_matmul", blocked_weights ? "blocked_weights" : "plain_weights", dtype,
                       {{"M", s.m}, {"N", s.n}, {"K", s.k}});
  c.device = device;
  c.dtype = dtype;
  // The same work as linear's epilogue path with a bias: the catalogue's numbers for it.
  set_cost(c, "linear", {"epilogue", "", {{"M", s.m}, {"K", s.k}, {"N", s.n}}, {{"bias", true}}});
  register_case(c, [=](Context& ctx) {
    struct State {
      dnnl::engine engine{dnnl::engine::kind::cpu, 0};
      dnnl::stream stream{engine};
      dnnl::matmul matmul;
      memory x, w, bias, y;
      Tensor tensors[4];
    };
    auto st = std::make_shared<State>();
    st->tensors[0] = random_tensor(ctx, {s.m, s.k}, dtype, 1);
    st->tensors[1] = random_tensor(ctx, {s.n, s.k}, dtype, 2);
    st->tensors[2] = random_tensor(ctx, {s.n}, dtype, 3);
    st->tensors[3] = ctx.empty({s.m, s.n}, dtype);
    const memory::data_type dt = dtype == DType::bf16 ? memory::data_type::bf16
                                 : dtype == DType::f16 ? memory::data_type::f16
                                                       : memory::data_type::f32;
    using tag = memory::format_tag;
    const memory::desc x_md({s.m, s.k}, dt, tag::ab), y_md({s.m, s.n}, dt, tag::ab), bias_md({1, s.n}, dt, tag::ab);
    const memory::desc w_plain({s.k, s.n}, dt, tag::ba);  // [n, k] as stored, read as [k, n]
    const memory::desc w_md = blocked_weights ? memory::desc({s.k, s.n}, dt, tag::any) : w_plain;
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, bias_md, y_md), st->engine);
    st->matmul = dnnl::matmul(pd);
    st->x = memory(x_md, st->engine, st->tensors[0].data());
    st->bias = memory(bias_md, st->engine, st->tensors[2].data());
    st->y = memory(y_md, st->engine, st->tensors[3].data());
    memory w_stored(w_plain, st->engine, st->tensors[1].data());
    if (blocked_weights) {
      st->w = memory(pd.weights_desc(), st->engine);  // oneDNN-owned, reordered once here
      dnnl::reorder(w_stored, st->w).execute(st->stream, w_stored, st->w);
      st->stream.wait();
    } else {
      st->w = w_stored;
    }
    return [st]() {
      st->matmul.execute(st->stream, {{DNNL_ARG_SRC, st->x}, {DNNL_ARG_WEIGHTS, st->w}, {DNNL_ARG_BIAS, st->bias},
                                      {DNNL_ARG_DST, st->y}});
      st->stream.wait();
    };
  });
}
#endif

void register_all() {
  const bool smoke = options().smoke;
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<GemmShape> squares, linears, fp8, decode;
    if (smoke) {
      dtypes = {DType::f32};
      squares = {{64, 64, 64}, {33, 17, 29}};
      linears = {{64, 48, 32}};
      fp8 = {{64, 48, 32}};
      decode = {{2, 40, 24}};
    } else if (device.is_cpu()) {
      dtypes = {DType::f32, DType::bf16};
      squares = {{64, 64, 64}, {256, 256, 256}, {512, 512, 512}};
      // 512 x 3072 x 768, then GPT-2 small's four GEMMs at S = 256 (c_attn, attention c_proj,
      // c_fc, mlp c_proj): what a CPU GEMM planner chooses between (issue: CPU GEMMs by
      // measurement; bench/NOTES.md).
      linears = {{512, 3072, 768}, {256, 2304, 768}, {256, 768, 768}, {256, 3072, 768}, {256, 768, 3072}};
      fp8 = {{256, 768, 768}, {256, 3072, 768}};
      for (int64_t m : {1, 8}) {
        decode.push_back({m, 5632, 2048});  // gate, up
        decode.push_back({m, 2048, 5632});  // down
      }
    } else {
      dtypes = {DType::bf16, DType::f16, DType::f32};
      squares = {{64, 64, 64}, {4096, 4096, 4096}};
      linears = {{8192, 3072, 768}};
      // Where FP8 pays off, by size: a decode-sized GEMM, the series' linear, large squares.
      fp8 = {{128, 768, 768}, {8192, 3072, 768}, {4096, 4096, 4096}, {8192, 8192, 8192}};
      for (int64_t m : {1, 8}) decode.push_back({m, 14336, 4096});  // Llama-3-8B's gate/up
    }
    for (const GemmShape& s : fp8) register_fp8_gemm(device, s);
    for (DType dtype : dtypes) {
      for (const GemmShape& s : decode) {
        register_fp8_weight_gemm(device, dtype, s);
        register_loaded_linear(device, dtype, s);
      }
      for (const GemmShape& s : squares)
        for (ops::LinearPath path : kPaths) register_gemm("matmul_add", ops::WeightLayout::in_out, device, dtype, s, path);
      for (const GemmShape& s : linears)
        for (ops::LinearPath path : kPaths) register_gemm("linear", ops::WeightLayout::out_in, device, dtype, s, path);
#ifdef BLOCKSCOPE_WITH_ONEDNN
      if (device.is_cpu() && dtype != DType::f16)
        for (const GemmShape& s : linears)
          for (bool blocked : {false, true}) register_onednn_matmul(device, dtype, s, blocked);
#endif
    }
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
