// Memory-bound row ops: softmax, the fused scale + causal-mask softmax of the attention paths,
// LayerNorm and RMSNorm. Full sizes are well beyond L2 (and the CPU's last-level cache), so
// bytes_per_second is a bandwidth figure, not a cache one.
#include <vector>

#include "bench/support/bench_support.h"
#include "ops/norm/norm.h"
#include "ops/softmax/softmax.h"

namespace blockscope::bench {
namespace {

struct Rows {
  int64_t rows, n;  // x: [rows, n], reduced over n
};
struct Scores {
  int64_t batch, heads, seq;  // scores: [batch, heads, seq, seq]
};

void register_rows(const char* workload, Device device, DType dtype, const Rows& s) {
  Case c;
  c.key = workload_key(workload, "plain", dtype, {{"R", s.rows}, {"N", s.n}});
  c.device = device;
  c.dtype = dtype;
  const std::string op = workload;
  set_cost(c, workload, {"", "", {{"R", s.rows}, {"N", s.n}}, {{"bias", op == "layer_norm"}}});
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    Tensor x = random_tensor(ctx, {s.rows, s.n}, dtype, 11);
    Tensor y = ctx.empty({s.rows, s.n}, dtype);
    Tensor weight = random_tensor(ctx, {s.n}, dtype, 12);
    Tensor bias = random_tensor(ctx, {s.n}, dtype, 13);
    if (op == "softmax") return [&ctx, x, y]() mutable { ops::softmax(ctx, x, y); };
    if (op == "layer_norm") {
      return [&ctx, x, y, weight, bias]() mutable { ops::layer_norm(ctx, x, weight, bias, 1e-5f, y); };
    }
    return [&ctx, x, y, weight]() mutable { ops::rms_norm(ctx, x, weight, 1e-5f, y); };
  });
}

void register_scores(Device device, DType dtype, const Scores& s) {
  Case c;
  c.key = workload_key("softmax_scale_causal", "fused", dtype, {{"B", s.batch}, {"H", s.heads}, {"S", s.seq}});
  c.device = device;
  c.dtype = dtype;
  set_cost(c, "softmax_scale_causal", {"", "", {{"R", s.batch * s.heads * s.seq}, {"N", s.seq}}, {}});
  register_case(c, [=](Context& ctx) -> std::function<void()> {
    Tensor x = random_tensor(ctx, {s.batch, s.heads, s.seq, s.seq}, dtype, 21);
    Tensor y = ctx.empty(x.shape(), dtype);
    return [&ctx, x, y]() mutable { ops::softmax_scale_causal(ctx, x, 0.125f, true, y); };
  });
}

void register_all() {
  const bool smoke = options().smoke;
  for (const Device& device : devices()) {
    std::vector<DType> dtypes;
    std::vector<Rows> rows;
    std::vector<Scores> scores;
    if (smoke) {
      dtypes = {DType::f32};
      rows = {{7, 33}};
      scores = {{1, 2, 33}};
    } else if (device.is_cpu()) {
      dtypes = {DType::f32, DType::bf16};
      rows = {{4096, 1024}};     // 16 MiB in f32
      scores = {{1, 4, 1024}};  // 16 MiB in f32
    } else {
      dtypes = {DType::bf16, DType::f16, DType::f32};
      rows = {{65536, 4096}, {8192, 768}};  // 512 MiB in bf16; GPT-2's rows
      scores = {{8, 16, 1024}};             // the series' attention scores
    }
    for (DType dtype : dtypes) {
      for (const Rows& s : rows) {
        for (const char* op : {"softmax", "layer_norm", "rms_norm"}) register_rows(op, device, dtype, s);
      }
      for (const Scores& s : scores) register_scores(device, dtype, s);
    }
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
