// Shared pieces of blockscope's Google Benchmark suites (bench/*_bench.cpp).
//
// Every benchmark is one workload on one device, named `<key>/<device>` where the key is
// `<workload>/<variant>/<dtype>/<shape>` (e.g. `attention/flash/bf16/B=8,H=16,S=1024,D=64,causal=1`).
// The key is also the benchmark's label, so tools/peers/torch_peer.py and tools/peers/side_by_side.py can
// match PyTorch's time for the same workload, and tools/ci/bench_gate.py can recompute FLOPs and
// bytes from the shape.
//
// Timing: warm-up iterations outside the timed region; on CPU wall time (UseRealTime: the ops
// are multi-threaded), on CUDA CUDA events around each iteration with UseManualTime and the L2
// cache flushed (a memset of twice its size) before every iteration, outside the events.
//
// Counters (per benchmark, in the JSON):
//   FLOPs             FLOP/s (iteration-invariant rate of the workload's FLOPs per iteration)
//   bytes_per_second  minimum bytes moved per iteration / time
//   pct_of_peak       % of the device peak of the binding resource (max of the FLOP and byte
//                     fractions); only when a peak is known (CUDA table, or --peak_tflops /
//                     --peak_gbps)
//   kernels_per_iter  kernel events of one extra iteration run with a profiler::Recorder
//   op_flops, op_bytes  FLOPs and bytes the outermost ops recorded for that iteration (the
//                     ops' own formulas; tools/ci/bench_gate.py checks them)
//   peak_extra_bytes  allocator peak during one iteration above what was in use before it
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/catalogue/catalogue.h"
#include "runtime/context.h"
#include "runtime/tensor.h"

namespace blockscope::bench {

// blockscope's own flags, removed from argv before benchmark::Initialize (which rejects
// flags it does not know):
//   --smoke             tiny shapes only (CI); also the default min time drops to 0.01 s
//   --cpu_only          do not benchmark CUDA even when a GPU is present
//   --peak_tflops=X     peak FLOP rate for pct_of_peak (overrides the built-in table)
//   --peak_gbps=X       peak memory bandwidth for pct_of_peak
//   --set=key.sub=value a config override for block_bench (repeatable), as the CLI's --set
struct Options {
  bool smoke = false;
  bool cpu_only = false;
  double peak_tflops = 0;
  double peak_gbps = 0;
  std::vector<std::string> sets;
  std::vector<std::string> positional;  // arguments that are not flags (block_bench: YAML files)
};

// Parses and strips blockscope's flags; throws blockscope::Error on a malformed value.
void parse_flags(int* argc, char** argv);
const Options& options();

// Devices to benchmark: cpu, and cuda:0 when a GPU is usable (and not --cpu_only).
std::vector<Device> devices();

// One context per device for the whole run (CUDA contexts own a stream, a pool and cuBLASLt
// handles: creating them per benchmark would time their setup).
Context& context_for(Device device);

// "<workload>/<variant>/<dtype>/<NAME=value,...>" — the shape pairs in the given order.
using ShapeList = std::vector<std::pair<std::string, int64_t>>;
std::string workload_key(const std::string& workload, const std::string& variant, DType dtype, const ShapeList& shape);

// A tensor on ctx's device with uniform values in [-1, 1) from `seed` (fast, not for tests).
Tensor random_tensor(Context& ctx, const Shape& shape, DType dtype, uint64_t seed);

// What one benchmark measures.
struct Case {
  std::string key;      // workload key (also the label)
  Device device;
  double flops = 0;     // per iteration, from the op's formula (0: take the recorded op_flops)
  double bytes = 0;     // minimum bytes read + written per iteration (0: the recorded op_bytes)
  DType dtype = DType::f32;  // for the peak lookup
  int warmup = 2;       // untimed iterations first
};

// c.flops and c.bytes of one call of `op` from the op catalogue (the formulas the ops record
// with), at the case's dtype: sizes and flags as `blockscope info --cost` takes them.
inline void set_cost(Case& c, const char* op, ops::OpCall call) {
  call.dtype = c.dtype;
  const ops::OpCost cost = ops::op_spec(op).cost(call);
  c.flops = cost.flops;
  c.bytes = cost.bytes;
}

// Builds the tensors of a case on a context and returns one forward (work queued on the
// context's stream; no synchronisation needed inside).
using Setup = std::function<std::function<void()>(Context& ctx)>;

// Registers `<key>/<device>` with the right time mode and unit; returns it for more settings.
benchmark::internal::Benchmark* register_case(const Case& c, Setup setup);

// The timed loop with every counter (what register_case's benchmark calls); exposed for
// suites that register their own functions (block_bench).
void run_case(benchmark::State& state, Context& ctx, const Case& c, const std::function<void()>& step);

// Device, driver, GEMM library, build type, threads, smoke flag -> benchmark's JSON context.
void add_context();

// main() of every suite: parse flags, add context, register (after flags are known), run.
int run_main(int argc, char** argv, const std::function<void()>& register_all);

}  // namespace blockscope::bench

#define BLOCKSCOPE_BENCH_MAIN(register_all) \
  int main(int argc, char** argv) { return ::blockscope::bench::run_main(argc, argv, register_all); }
