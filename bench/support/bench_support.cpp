#include "bench/support/bench_support.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "profiler/recorder.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/cuda_backend.h"
#endif

#ifndef BLOCKSCOPE_BUILD_TYPE
#define BLOCKSCOPE_BUILD_TYPE "unknown"
#endif

namespace blockscope::bench {

namespace {

Options& mutable_options() {
  static Options opts;
  return opts;
}

// "--name=value" -> value as a positive double; throws a named error otherwise.
double flag_number(const std::string& arg, const std::string& name) {
  const std::string text = arg.substr(name.size() + 1);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  BS_CHECK_INPUT(!text.empty() && end != nullptr && *end == '\0' && value > 0,
                 name, " needs a positive number, got '", text, "'");
  return value;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Peak figures by device (dense, per dtype) for pct_of_peak: public datasheet numbers
// (NVIDIA's A100 / H100 / H200 datasheets). CPU peaks are not guessed: pass --peak_tflops / --peak_gbps.
struct Peak {
  double tflops = 0;
  double gbps = 0;
};

Peak device_peak(Context& ctx, DType dtype) {
  Peak peak;
#ifdef BLOCKSCOPE_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const std::string name = cuda_backend(ctx).properties().name;
    const bool half = dtype != DType::f32;
    if (name.find("H200") != std::string::npos) {
      peak = {half ? 989.0 : 67.0, 4800.0};
    } else if (name.find("H100") != std::string::npos) {
      peak = {half ? 989.0 : 67.0, 3350.0};
    } else if (name.find("A100") != std::string::npos) {
      peak = {half ? 312.0 : 19.5, 2039.0};
    }
  }
#endif
  const Options& opts = options();
  if (opts.peak_tflops > 0) peak.tflops = opts.peak_tflops;
  if (opts.peak_gbps > 0) peak.gbps = opts.peak_gbps;
  return peak;
}

// splitmix64: a fast, seedable stream for benchmark inputs.
uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One iteration's profile: kernels launched, and FLOPs/bytes of the outermost ops (regions
// are containers, not work: an op inside a region still counts as outermost).
struct IterationProfile {
  double kernels = 0;
  double op_flops = 0;
  double op_bytes = 0;
};

IterationProfile profile_one_iteration(Context& ctx, const std::function<void()>& step) {
  profiler::Recorder recorder(ctx);
  profiler::Recorder* previous = ctx.recorder();
  ctx.set_recorder(&recorder);
  try {
    step();
  } catch (...) {
    ctx.set_recorder(previous);
    throw;
  }
  ctx.set_recorder(previous);
  recorder.resolve();
  IterationProfile result;
  result.kernels = static_cast<double>(recorder.kernels().size());
  const auto& ops = recorder.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].is_region) continue;
    bool inside_op = false;
    for (int p = ops[i].parent; p >= 0; p = ops[p].parent) {
      if (!ops[p].is_region) {
        inside_op = true;
        break;
      }
    }
    if (inside_op) continue;
    result.op_flops += ops[i].flops;
    result.op_bytes += ops[i].bytes;
  }
  recorder.clear();
  return result;
}

#ifdef BLOCKSCOPE_WITH_CUDA
// Twice the L2 size of the device, rewritten before every timed iteration so that no input
// is served from L2 (the series' shapes are larger than L2 anyway; small ones are not).
struct L2Flusher {
  void* buffer = nullptr;
  size_t bytes = 0;
};

L2Flusher& l2_flusher(Context& ctx) {
  static std::map<int, L2Flusher> flushers;
  L2Flusher& flusher = flushers[ctx.device().index];
  if (flusher.buffer == nullptr) {
    const int l2 = cuda_backend(ctx).properties().l2CacheSize;
    flusher.bytes = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
    // Outside the context's pool on purpose: the pool's statistics feed peak_extra_bytes.
    if (cudaMalloc(&flusher.buffer, flusher.bytes) != cudaSuccess) {
      throw Error(ErrorKind::runtime, "bench: cannot allocate the L2 flush buffer");
    }
  }
  return flusher;
}

// Timed loop on CUDA: events around each iteration, flush outside them. Returns total seconds.
double timed_loop_cuda(benchmark::State& state, Context& ctx, const std::function<void()>& step) {
  CudaBackend& backend = cuda_backend(ctx);
  cudaStream_t stream = backend.stream();
  L2Flusher& flusher = l2_flusher(ctx);
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double total_s = 0;
  int fill = 0;
  for (auto _ : state) {
    cudaMemsetAsync(flusher.buffer, (fill++) & 0xff, flusher.bytes, stream);
    cudaEventRecord(start, stream);
    step();
    cudaEventRecord(stop, stream);
    const cudaError_t status = cudaEventSynchronize(stop);
    if (status != cudaSuccess) {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      throw Error(ErrorKind::runtime, std::string("bench: CUDA error during the timed loop: ") + cudaGetErrorString(status));
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
    total_s += ms / 1e3;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return total_s;
}
#endif

// Timed loop on CPU: the ops are synchronous; wall time of the whole loop.
double timed_loop_cpu(benchmark::State& state, const std::function<void()>& step) {
  const auto begin = std::chrono::steady_clock::now();
  for (auto _ : state) step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

}  // namespace

const Options& options() { return mutable_options(); }

void parse_flags(int* argc, char** argv) {
  Options& opts = mutable_options();
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--smoke") {
      opts.smoke = true;
    } else if (arg == "--cpu_only") {
      opts.cpu_only = true;
    } else if (starts_with(arg, "--peak_tflops=")) {
      opts.peak_tflops = flag_number(arg, "--peak_tflops");
    } else if (starts_with(arg, "--peak_gbps=")) {
      opts.peak_gbps = flag_number(arg, "--peak_gbps");
    } else if (starts_with(arg, "--set=")) {
      opts.sets.push_back(arg.substr(6));
    } else if (arg == "--set" && i + 1 < *argc) {
      opts.sets.push_back(argv[++i]);
    } else if (!starts_with(arg, "-")) {
      opts.positional.push_back(arg);
    } else {
      argv[kept++] = argv[i];  // a Google Benchmark flag: leave it for benchmark::Initialize
    }
  }
  argv[kept] = nullptr;
  *argc = kept;
}

std::vector<Device> devices() {
  std::vector<Device> out{Device::cpu()};
  if (!options().cpu_only && cuda_available()) out.push_back(Device::cuda(0));
  return out;
}

Context& context_for(Device device) {
  static std::map<std::string, std::unique_ptr<Context>> contexts;
  auto& slot = contexts[device.str()];
  if (!slot) slot = std::make_unique<Context>(device);
  return *slot;
}

std::string workload_key(const std::string& workload, const std::string& variant, DType dtype, const ShapeList& shape) {
  std::string key = workload + "/" + variant + "/" + dtype_name(dtype) + "/";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) key += ",";
    key += shape[i].first + "=" + std::to_string(shape[i].second);
  }
  return key;
}

Tensor random_tensor(Context& ctx, const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = ctx.empty(shape, dtype);
  std::vector<float> values(static_cast<size_t>(t.numel()));
  uint64_t state = seed * 0x2545f4914f6cdd1dull + 1;
  for (float& v : values) {
    v = static_cast<float>(static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  from_floats(t, values);
  return t;
}

void run_case(benchmark::State& state, Context& ctx, const Case& c, const std::function<void()>& step) {
  state.SetLabel(c.key);
  try {
    // Warm-up outside the timed region (first-touch pages, cuBLASLt heuristics, pool growth).
    for (int i = 0; i < c.warmup; ++i) step();
    ctx.synchronize();

    // Memory: the allocator peak of one iteration above what was already in use.
    Backend& backend = ctx.backend();
    backend.reset_peak_memory();
    const size_t in_use_before = backend.memory_stats().in_use;
    step();
    ctx.synchronize();
    const size_t peak = backend.memory_stats().peak_in_use;
    const double peak_extra = peak > in_use_before ? static_cast<double>(peak - in_use_before) : 0.0;

    // Kernels and the ops' own FLOPs/bytes: one extra, recorded iteration.
    const IterationProfile profile = profile_one_iteration(ctx, step);

#ifdef BLOCKSCOPE_WITH_CUDA
    const double elapsed_s = ctx.device().is_cuda() ? timed_loop_cuda(state, ctx, step) : timed_loop_cpu(state, step);
#else
    const double elapsed_s = timed_loop_cpu(state, step);
#endif
    const double iterations = static_cast<double>(state.iterations());
    // Whole blocks have no single formula: their cost is the sum of what their ops record.
    const double flops = c.flops > 0 ? c.flops : profile.op_flops;
    const double bytes = c.bytes > 0 ? c.bytes : profile.op_bytes;

    state.counters["FLOPs"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    state.SetBytesProcessed(static_cast<int64_t>(bytes * iterations));
    state.counters["kernels_per_iter"] = profile.kernels;
    state.counters["op_flops"] = profile.op_flops;
    state.counters["op_bytes"] = profile.op_bytes;
    state.counters["peak_extra_bytes"] = peak_extra;
    const Peak device = device_peak(ctx, c.dtype);
    if (elapsed_s > 0 && iterations > 0 && (device.tflops > 0 || device.gbps > 0)) {
      const double per_iter_s = elapsed_s / iterations;
      double fraction = 0;
      if (device.tflops > 0) fraction = std::max(fraction, flops / per_iter_s / (device.tflops * 1e12));
      if (device.gbps > 0) fraction = std::max(fraction, bytes / per_iter_s / (device.gbps * 1e9));
      state.counters["pct_of_peak"] = 100.0 * fraction;
    }
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
  }
}

benchmark::internal::Benchmark* register_case(const Case& c, Setup setup) {
  const std::string name = c.key + "/" + c.device.str();
  auto* bench = benchmark::RegisterBenchmark(name.c_str(), [c, name, setup](benchmark::State& state) {
    // Google Benchmark calls this several times in a row while it sizes the iteration count:
    // keep the tensors of the last benchmark only (built once, freed before the next one's
    // are made, so two large workloads never sit in memory together).
    static std::string last_name;
    static std::function<void()> last_step;
    try {
      Context& ctx = context_for(c.device);
      if (last_name != name || !last_step) {
        last_step = nullptr;  // free the previous benchmark's tensors first
        last_name.clear();
        last_step = setup(ctx);
        last_name = name;
      }
      run_case(state, ctx, c, last_step);
    } catch (const std::exception& error) {
      last_step = nullptr;
      last_name.clear();
      state.SkipWithError(error.what());
    }
  });
  bench->Unit(benchmark::kMicrosecond);
  if (c.device.is_cuda()) {
    bench->UseManualTime();
  } else {
    bench->UseRealTime();  // the CPU ops run on several OpenMP threads
  }
  return bench;
}

void add_context() {
  const Options& opts = options();
  benchmark::AddCustomContext("blockscope_build_type", BLOCKSCOPE_BUILD_TYPE);
  benchmark::AddCustomContext("blockscope_smoke", opts.smoke ? "true" : "false");
  benchmark::AddCustomContext("cpu_gemm_library", cpu::gemm_library());
#ifdef _OPENMP
  benchmark::AddCustomContext("cpu_threads", std::to_string(omp_get_max_threads()));
#else
  benchmark::AddCustomContext("cpu_threads", "1");
#endif
  benchmark::AddCustomContext("cuda_built", cuda_built() ? "true" : "false");
  std::string device_list;
  for (const Device& d : devices()) device_list += (device_list.empty() ? "" : ",") + d.str();
  benchmark::AddCustomContext("blockscope_devices", device_list);
#ifdef BLOCKSCOPE_WITH_CUDA
  if (!opts.cpu_only && cuda_available()) {
    Context& ctx = context_for(Device::cuda(0));
    const cudaDeviceProp& props = cuda_backend(ctx).properties();
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    benchmark::AddCustomContext("cuda_device", props.name);
    benchmark::AddCustomContext("cuda_compute_capability", std::to_string(props.major) + "." + std::to_string(props.minor));
    benchmark::AddCustomContext("cuda_driver", std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10));
    benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10));
    benchmark::AddCustomContext("cuda_gemm_library", "cublasLt");
    benchmark::AddCustomContext("cuda_l2_bytes", std::to_string(props.l2CacheSize));
  }
#endif
  if (opts.peak_tflops > 0) benchmark::AddCustomContext("peak_tflops", std::to_string(opts.peak_tflops));
  if (opts.peak_gbps > 0) benchmark::AddCustomContext("peak_gbps", std::to_string(opts.peak_gbps));
}

int run_main(int argc, char** argv, const std::function<void()>& register_all) {
  try {
    parse_flags(&argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
  // Smoke runs are for CI: a short default min time unless the user gave one.
  std::vector<char*> args(argv, argv + argc);
  static char smoke_min_time[] = "--benchmark_min_time=0.01";
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i) has_min_time |= starts_with(argv[i], "--benchmark_min_time");
  if (options().smoke && !has_min_time) args.push_back(smoke_min_time);
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  try {
    // The CLI's default thread count (OMP_NUM_THREADS, else physical cores less one), recorded
    // as cpu_threads by add_context and pinned to the same count on PyTorch's side.
    cpu::set_thread_count(cpu::default_thread_count().count);
    add_context();
    register_all();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench: %s\n", error.what());
    return 2;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace blockscope::bench
