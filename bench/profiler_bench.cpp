// What the built-in profiler costs: a small block-like sequence of ops on the CPU (attention,
// then a residual add, a scale and a softmax) with the recorder detached vs attached, plus
// the bare cost of one op scope and one kernel scope.
//
//   build/<dir>/bin/profiler_bench --benchmark_min_time=0.5
//
// Overhead = (time with recorder / time without) - 1, for the same shape. A recorded step
// also pays for resolve() + clear() (what profile_steps does after each kept step), so they
// are inside the timed loop here.
#include <benchmark/benchmark.h>

#include "bench/support/bench_support.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "profiler/scope.h"

namespace blockscope {
namespace {

// One "block-like" step: attention [1, H, S, 64] (fused_softmax path: 3 work items), a
// residual add, a scale and a row softmax: 4 public ops, 6 work items, a few nested scopes.
struct Sequence {
  Sequence(Context& ctx, int64_t heads, int64_t seq)
      : q(bench::random_tensor(ctx, {1, heads, seq, 64}, DType::f32, 1)),
        residual(bench::random_tensor(ctx, {1, heads, seq, 64}, DType::f32, 2)),
        attn(ctx.empty({1, heads, seq, 64}, DType::f32)),
        sum(ctx.empty({1, heads, seq, 64}, DType::f32)),
        out(ctx.empty({1, heads, seq, 64}, DType::f32)) {}

  void run(Context& ctx) {
    profiler::RegionScope block(ctx, "block.0");
    {
      profiler::RegionScope region(ctx, "attn");
      ops::attention(ctx, q, q, q, attn, ops::AttentionPath::fused_softmax, true, 0.125f);
    }
    ops::add(ctx, attn, residual, sum);
    ops::scale(ctx, sum, 0.5f, sum);
    ops::softmax(ctx, sum, out);
  }

  Tensor q, residual, attn, sum, out;
};

void BM_BlockSequence(benchmark::State& state) {
  const bool recording = state.range(0) != 0;
  Context ctx(Device::cpu());
  Sequence sequence(ctx, state.range(1), state.range(2));
  profiler::Recorder recorder(ctx);
  if (recording) ctx.set_recorder(&recorder);
  for (int i = 0; i < 3; ++i) sequence.run(ctx);  // warm-up
  recorder.clear();
  size_t events = 0;
  for (auto _ : state) {
    sequence.run(ctx);
    if (recording) {
      recorder.resolve();
      events = recorder.ops().size() + recorder.kernels().size();
      recorder.clear();
    }
  }
  ctx.set_recorder(nullptr);
  state.counters["events_per_step"] = static_cast<double>(events);
  state.SetLabel(recording ? "recorder on" : "recorder off");
}

// The floor: one OpScope holding one KernelScope and no work.
void BM_EmptyScopes(benchmark::State& state) {
  const bool recording = state.range(0) != 0;
  Context ctx(Device::cpu());
  profiler::Recorder recorder(ctx);
  if (recording) ctx.set_recorder(&recorder);
  int64_t since_clear = 0;
  for (auto _ : state) {
    {
      profiler::OpScope op(ctx, "empty_op", "", profiler::Family::elementwise, {});
      profiler::KernelScope kernel(ctx, "empty_kernel");
    }
    if (recording && ++since_clear == 4096) {  // bounded memory; amortised like a step's clear()
      recorder.clear();
      since_clear = 0;
    }
  }
  ctx.set_recorder(nullptr);
  state.SetLabel(recording ? "recorder on" : "recorder off");
}

void register_all() {
  const bool smoke = bench::options().smoke;
  for (const auto& [heads, seq] : smoke ? std::vector<std::pair<int64_t, int64_t>>{{2, 32}}
                                        : std::vector<std::pair<int64_t, int64_t>>{{2, 32}, {4, 128}, {8, 256}}) {
    for (int recording : {0, 1}) {
      benchmark::RegisterBenchmark("profiler/block_sequence", BM_BlockSequence)
          ->ArgNames({"recorder", "H", "S"})
          ->Args({recording, heads, seq})
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (int recording : {0, 1}) {
    benchmark::RegisterBenchmark("profiler/empty_scopes", BM_EmptyScopes)->ArgNames({"recorder"})->Arg(recording);
  }
}

}  // namespace
}  // namespace blockscope

int main(int argc, char** argv) { return blockscope::bench::run_main(argc, argv, blockscope::register_all); }
