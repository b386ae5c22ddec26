#include "profiler/session.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "profiler/scope.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_backend.h"
#endif
#ifdef BLOCKSCOPE_WITH_CUPTI
#include "profiler/cupti.h"
#endif

namespace blockscope::profiler {

namespace {

// Attaches a recorder to the context for the session and puts back whatever was attached
// before, also when a step throws.
class RecorderAttachment {
 public:
  explicit RecorderAttachment(Context& ctx) : ctx_(ctx), previous_(ctx.recorder()) {}
  ~RecorderAttachment() { ctx_.set_recorder(previous_); }
  RecorderAttachment(const RecorderAttachment&) = delete;
  RecorderAttachment& operator=(const RecorderAttachment&) = delete;

 private:
  Context& ctx_;
  Recorder* previous_;
};

// Moves the recorder's events of one step into the profile: op indices (parents, the kernels'
// op) are shifted by the number of events already kept.
void keep_events(const Recorder& recorder, Profile* profile) {
  const int offset = static_cast<int>(profile->ops.size());
  for (OpEvent event : recorder.ops()) {
    if (event.parent >= 0) event.parent += offset;
    profile->ops.push_back(std::move(event));
  }
  for (KernelEvent kernel : recorder.kernels()) {
    if (kernel.op >= 0) kernel.op += offset;
    profile->kernels.push_back(std::move(kernel));
  }
}

std::string device_description(Context& ctx) {
#ifdef BLOCKSCOPE_WITH_CUDA
  if (ctx.device().is_cuda()) return cuda_backend(ctx).properties().name;
#endif
  return "cpu (" + std::to_string(omp_get_max_threads()) + " threads, " + cpu::gemm_library() + " gemm)";
}

}  // namespace

Profile profile_steps(Context& ctx, const std::string& label, const Schedule& schedule,
                      const std::function<void(int step)>& step) {
  BS_CHECK_INPUT(schedule.wait >= 0 && schedule.warmup >= 0 && schedule.active >= 0,
                 "profile schedule: wait, warmup and active must not be negative (got wait=", schedule.wait,
                 ", warmup=", schedule.warmup, ", active=", schedule.active, ")");
  BS_CHECK_INPUT(schedule.active > 0 || schedule.keep_cold_step,
                 "profile schedule: active must be at least 1 (nothing would be kept)");

  Profile profile;
  profile.label = label;
  profile.device = ctx.device().str();
  profile.device_name = device_description(ctx);
  profile.simulated = ctx.device().is_cuda() && cuda_simulated();

  Recorder recorder(ctx);
  RecorderAttachment restore(ctx);
#ifdef BLOCKSCOPE_WITH_CUPTI
  CuptiKernelNames cupti_names(ctx);  // real names for library kernels (not run on a GPU here)
#endif

  // Phases in order: the cold step (kept when asked for), wait (detached), warmup (recorded,
  // dropped), active (kept).
  const int cold = schedule.keep_cold_step ? 1 : 0;
  const int total = cold + schedule.wait + schedule.warmup + schedule.active;
  for (int index = 0; index < total; ++index) {
    const bool is_cold = index < cold;
    const bool waiting = !is_cold && index < cold + schedule.wait;
    const bool warming = !is_cold && !waiting && index < cold + schedule.wait + schedule.warmup;
    const bool keep = is_cold || (!waiting && !warming);

    ctx.set_recorder(waiting ? nullptr : &recorder);
    recorder.set_step(index);
    {
      // A region per step, also while waiting: its NVTX range lets
      // `nsys --capture-range=nvtx --nvtx-capture="step 3@blockscope"` pick steps.
      RegionScope step_region(ctx, "step " + std::to_string(index));
      step(index);
    }
    ctx.set_recorder(nullptr);
    if (waiting) continue;
    recorder.resolve();  // synchronises: every device time of this step is known
#ifdef BLOCKSCOPE_WITH_CUPTI
    cupti_names.attach(recorder);
#endif
    if (keep) {
      keep_events(recorder, &profile);
      profile.active_steps += 1;
    }
    recorder.clear();
  }

  // The profiled dtype is the one most ops ran in (regions carry none).
  int dtype_counts[3] = {0, 0, 0};
  for (const OpEvent& event : profile.ops) {
    if (!event.is_region && !event.input_shapes.empty()) dtype_counts[static_cast<int>(event.dtype)] += 1;
  }
  const int most = static_cast<int>(std::max_element(dtype_counts, dtype_counts + 3) - dtype_counts);
  const DType dtype = dtype_counts[most] > 0 ? static_cast<DType>(most) : DType::f32;
  profile.dtype = dtype_name(dtype);
  profile.peaks = device_peaks(ctx, dtype);
  return profile;
}

namespace {

// A positive number from an environment variable, 0 when unset; an InputError naming the
// variable when it is set to something else.
double env_figure(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  BS_CHECK_INPUT(end != text && *end == '\0' && value > 0, "environment variable ", variable,
                 " must be a positive number, got '", text, "'");
  return value;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best of a few runs of a 512^3 sgemm through the same GEMM the ops use (BLAS or built-in):
// what the CPU reaches on a GEMM of this size, not its datasheet peak.
double measure_cpu_tflops() {
  const int64_t n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  cpu::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    cpu::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * n / best / 1e12;
}

// Best of a few 64 MiB memcpy calls: bytes read plus bytes written per second.
double measure_cpu_gbps() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // warm-up: pages faulted in
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

Peaks cpu_peaks() {
  // Measured once per process; the environment overrides either figure (and skips its probe).
  static std::mutex mutex;
  static bool measured = false;
  static Peaks cached;
  const double tflops_override = env_figure("BLOCKSCOPE_CPU_PEAK_TFLOPS");
  const double gbps_override = env_figure("BLOCKSCOPE_CPU_PEAK_GBPS");
  Peaks peaks;
  if (tflops_override > 0 && gbps_override > 0) return Peaks{tflops_override, gbps_override};
  std::lock_guard<std::mutex> lock(mutex);
  if (!measured) {
    cached.tflops = measure_cpu_tflops();
    cached.gbps = measure_cpu_gbps();
    measured = true;
  }
  peaks.tflops = tflops_override > 0 ? tflops_override : cached.tflops;
  peaks.gbps = gbps_override > 0 ? gbps_override : cached.gbps;
  return peaks;
}

#ifdef BLOCKSCOPE_WITH_CUDA
// Dense FLOPs per SM per clock, from NVIDIA's architecture whitepapers (A100: 312 TFLOP/s
// bf16 = 108 SMs x 1.41 GHz x 2048; H100 SXM: 989 TFLOP/s = 132 SMs x 1.83 GHz x 4096; L40S /
// Ada: 1024; GA10x: 512 with f32 accumulation; B200: 8192). f32 runs on the FP32 cores
// (no TF32): 2 FLOPs per FMA x FP32 lanes per SM (64 on sm_80, 128 on sm_86+ and sm_90).
// 0 = not in the table (the % of peak column then shows "-").
double flops_per_sm_per_clock(int major, int minor, DType dtype) {
  const bool half = dtype != DType::f32;
  const int cc = major * 10 + minor;
  switch (cc) {
    case 80: return half ? 2048 : 128;
    case 86: return half ? 512 : 256;
    case 87: return half ? 1024 : 256;
    case 89: return half ? 1024 : 256;
    case 90: return half ? 4096 : 256;
    case 100: return half ? 8192 : 256;
    default: return 0;
  }
}

Peaks cuda_peaks(Context& ctx, DType dtype) {
  CudaBackend& backend = cuda_backend(ctx);
  const cudaDeviceProp& properties = backend.properties();
  // Clock rates come from device attributes (cudaDeviceProp's clock fields are gone in
  // CUDA 13). Both are in kHz.
  int clock_khz = 0, memory_clock_khz = 0;
  const int device = ctx.device().index;
  // A failure only hides the peak; clear it (cudaGetLastError) so that the next kernel's launch
  // check does not report it as that kernel's failure.
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
    clock_khz = 0;
    cudaGetLastError();
  }
  if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess) {
    memory_clock_khz = 0;
    cudaGetLastError();
  }
  Peaks peaks;
  peaks.tflops = properties.multiProcessorCount * (clock_khz * 1e3) *
                 flops_per_sm_per_clock(properties.major, properties.minor, dtype) / 1e12;
  // Bus width (bits) / 8 x memory clock x 2 (double data rate): H100 SXM 5120 bits x
  // 2.619 GHz x 2 = 3.35 TB/s, the datasheet figure.
  peaks.gbps = properties.memoryBusWidth / 8.0 * (memory_clock_khz * 1e3) * 2.0 / 1e9;
  return peaks;
}
#endif

}  // namespace

Peaks device_peaks(Context& ctx, DType dtype) {
#ifdef BLOCKSCOPE_WITH_CUDA
  // Simulated times say nothing about the modelled GPU's speed: no peak, so no % of peak.
  if (ctx.device().is_cuda()) return cuda_simulated() ? Peaks{} : cuda_peaks(ctx, dtype);
#endif
  return cpu_peaks();
}

}  // namespace blockscope::profiler
