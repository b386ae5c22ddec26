// The CPU backend: aligned host memory with statistics, steady-clock timing marks, and the
// peaks the profiler's % of peak is measured against.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/machine_cache.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"

namespace blockscope {
namespace {

// Peak figures a machine can have: from a millionth of a TFLOP/s to a million (an exaflop), from
// a thousandth of a GB/s to ten million. Outside them a figure is a typo or damage: it would
// print every % of peak as 0 or as hundreds of digits.
constexpr double kMinTflops = 1e-6, kMaxTflops = 1e6, kMinGbps = 1e-3, kMaxGbps = 1e7;
bool plausible_tflops(double value) { return value >= kMinTflops && value <= kMaxTflops; }
bool plausible_gbps(double value) { return value >= kMinGbps && value <= kMaxGbps; }

// A number in [min, max] from an environment variable, 0 when unset; an InputError naming the
// variable and the range when it is set to anything else (inf, 1e400, nan, -1, "fast"). Decimal
// only, as written by hand: strtod would also read hex (0x10 = 16), " 5" and "infinity".
double env_figure(const char* variable, double min, double max) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return 0;
  const bool decimal = std::strspn(text, "0123456789.eE+-") == std::strlen(text) &&
                       (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.');
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  BS_CHECK_INPUT(decimal && end != text && *end == '\0' && std::isfinite(value) && value >= min && value <= max,
                 "environment variable ", variable, " must be a decimal number from ", min, " to ", max, ", got '",
                 text, "'");
  return value;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best of a few runs of a 512^3 GEMM in `dtype` through the same GEMM the ops use: oneDNN's
// matmul in that dtype where it runs it natively (bf16 on AVX512_BF16 CPUs), else the f32
// sgemm the ops widen to. What the CPU reaches on a GEMM of this size, not its datasheet peak.
double measure_cpu_tflops(DType dtype) {
  // The machine's peak, on its default library, whatever library this run's cpu.gemm forces.
  const cpu::ScopedGemmChoice default_library("auto");
  const int64_t n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  std::vector<uint16_t> a16(n * n), b16(n * n), c16(n * n);
  std::function<void()> gemm = [&] {
    cpu::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  if (dtype != DType::f32) {
    for (int64_t i = 0; i < n * n; ++i) {
      store_from_float(dtype, &a16[i], a[i]);
      store_from_float(dtype, &b16[i], b[i]);
    }
    cpu::Matmul mm;
    mm.m = mm.n = mm.k = n;
    mm.a = {a16.data(), dtype, n, 0, false};
    mm.b = {b16.data(), dtype, n, 0, false};
    mm.c = c16.data();
    mm.c_dtype = dtype;
    mm.ldc = n;
    if (cpu::fused_matmul(mm)) gemm = [mm] { cpu::fused_matmul(mm); };
  }
  gemm();  // warm-up
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    gemm();
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * n / best / 1e12;
}

// Users ask why bf16 is slower than f32: on a CPU whose 512^3 GEMM in `dtype` is no faster than
// in f32 (under 1.1x: a build without native bf16 kernels measures the same f32 GEMM twice),
// say so with the figures and the kernel that ran (none: the ops widen to f32 and back).
std::string slow_dtype_note(DType dtype, double tflops, double f32_tflops) {
  const int64_t n = 512;
  cpu::Matmul mm;  // the measurement's GEMM, asked which kernel oneDNN picks (no data is read)
  mm.m = mm.n = mm.k = n;
  mm.a = {nullptr, dtype, n, 0, false};
  mm.b = {nullptr, dtype, n, 0, false};
  mm.c_dtype = dtype;
  mm.ldc = n;
  const std::string kernel = cpu::matmul_implementation(mm);
  const std::string name = dtype_name(dtype);
  std::ostringstream note;
  note.precision(3);
  note << name << " GEMMs are no faster than f32 on this CPU: " << tflops << " vs " << f32_tflops
       << " TFLOP/s on a 512^3 GEMM (";
  if (kernel.empty()) {
    note << "no native " << name << " kernel in " << cpu::gemm_library() << " here: the ops widen to f32 and round back";
  } else {
    note << "oneDNN's " << kernel << " kernel";
  }
  note << "); f32 may be the faster dtype on this machine";
  return note.str();
}

// How this run's GEMMs run, for the device description: "onednn gemm", "gemm planned: onednn,
// openblas, builtin" (auto with oneDNN and another library: weights' GEMMs planned), or
// "openblas gemm (cpu.gemm)".
std::string gemm_description() {
  if (const std::optional<cpu::GemmLibrary> forced = cpu::forced_gemm_library()) {
    return std::string(cpu::gemm_library_name(*forced)) + " gemm (cpu.gemm)";
  }
  const std::vector<cpu::GemmLibrary>& linked = cpu::linked_gemm_libraries();
  if (!cpu::packs_weights() || linked.size() == 1) return std::string(cpu::gemm_library()) + " gemm";
  std::string names;
  for (cpu::GemmLibrary library : linked) names += (names.empty() ? "" : ", ") + std::string(cpu::gemm_library_name(library));
  return "gemm planned: " + names;
}

// Best of a few 64 MiB memcpy calls: bytes read plus bytes written per second.
double measure_cpu_gbps() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // warm-up: pages faulted in
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

// The cached figures for `key`, or false. An entry that is missing or damaged is measured anew.
bool read_cached_peaks(const std::string& path, const std::string& key, double* tflops, double* gbps) {
  const nlohmann::json cache = cpu::read_machine_cache(path);
  if (!cache.is_object() || !cache.contains(key) || !cache[key].is_object()) return false;
  const nlohmann::json& entry = cache[key];
  if (!entry.value("tflops", nlohmann::json()).is_number() || !entry.value("gbps", nlohmann::json()).is_number())
    return false;
  *tflops = entry["tflops"].get<double>();
  *gbps = entry["gbps"].get<double>();
  // A figure no CPU reaches (a damaged or hand-edited cache) is measured anew.
  return plausible_tflops(*tflops) && plausible_gbps(*gbps);
}

// Whether `key` is a peak cache's: "<cpu::machine_key> | <dtype>".
bool is_peak_key(const std::string& key) {
  const size_t bar = key.rfind(" | ");
  if (bar == std::string::npos) return false;
  DType dtype;
  return parse_dtype(key.substr(bar + 3), &dtype) && dtype_name(dtype) == key.substr(bar + 3) &&
         cpu::is_machine_key(key.substr(0, bar));
}

// Whether `cache` is a peak cache, as write_cached_peaks writes one: every key a peak key and
// every entry an object with tflops and gbps. A plan cache, a tsconfig.json or any other JSON
// object is not. The figures are not checked here: a damaged entry ("tflops": "abc") is measured
// anew and replaced, the cache repaired (before: the whole file refused for good).
bool is_peak_cache(const nlohmann::json& cache) {
  for (const auto& [key, entry] : cache.items()) {
    if (!is_peak_key(key) || !entry.is_object() || !entry.contains("tflops") || !entry.contains("gbps")) return false;
  }
  return true;
}

// Adds `key` to the peak cache (cpu::update_machine_cache's file rules). True when it holds them.
bool write_cached_peaks(const std::string& path, const std::string& key, double tflops, double gbps) {
  const nlohmann::json entry = {
      {"tflops", tflops}, {"gbps", gbps}, {"how", "best of 5: 512^3 GEMM in the dtype, 64 MiB memcpy"}};
  return cpu::update_machine_cache(path, "peak cache", is_peak_cache, [&](nlohmann::json& cache) { cache[key] = entry; });
}

// Ignore the cache from now on (set by remeasure_peaks()).
bool g_remeasure = false;

// The CPU's description and peaks for `dtype`; `forget` drops what was measured so far.
BackendInfo cpu_info(DType dtype, bool forget = false) {
  // Measured once per machine (thread count, GEMM library, dtype) and cached, so % of peak is
  // against the same figure in every run; the environment overrides either figure.
  struct Measured {
    std::string key;
    double tflops = 0, gbps = 0;
    std::string source;
    bool cached = false;
  };
  static std::mutex mutex;
  static Measured per_dtype[3];
  if (forget) {  // remeasure_peaks(): every dtype measured anew, the cache not read
    std::lock_guard<std::mutex> lock(mutex);
    for (Measured& m : per_dtype) m = Measured{};
    return {};
  }
  BackendInfo info;
  const int threads = omp_get_max_threads();
  info.cpu_threads = threads;
  info.description = "cpu (" + std::to_string(threads) + (threads == 1 ? " thread, " : " threads, ") +
                     gemm_description() + ")";
  const double tflops_override = env_figure("BLOCKSCOPE_CPU_PEAK_TFLOPS", kMinTflops, kMaxTflops);
  const double gbps_override = env_figure("BLOCKSCOPE_CPU_PEAK_GBPS", kMinGbps, kMaxGbps);
  if (tflops_override <= 0 || gbps_override <= 0) {
    std::lock_guard<std::mutex> lock(mutex);
    Measured& m = per_dtype[static_cast<int>(dtype)];
    // Measured per machine, libraries and threads (cpu::machine_key) and dtype.
    const std::string key = cpu::machine_key(threads) + " | " + dtype_name(dtype);
    if (m.key != key) {
      const std::string cache = cpu::machine_cache_path("BLOCKSCOPE_PEAK_CACHE", "cpu-peaks.json");
      if (!cache.empty() && !g_remeasure && read_cached_peaks(cache, key, &m.tflops, &m.gbps)) {
        m.source = "measured earlier on this machine, cached in " + cache;
        m.cached = true;
      } else {
        m.tflops = measure_cpu_tflops(dtype);
        m.gbps = measure_cpu_gbps();
        // Said as it is: "cached in" only when the cache holds them now.
        const bool cached = !cache.empty() && write_cached_peaks(cache, key, m.tflops, m.gbps);
        m.source = "measured now" + (cached ? ", cached in " + cache : std::string(", not cached"));
      }
      m.key = key;
    }
    info.peak_tflops = m.tflops;
    info.peak_gbps = m.gbps;
    info.peaks_cached = m.cached;
    info.peak_source = std::string("512^3 ") + dtype_name(dtype) + " GEMM and 64 MiB memcpy, " + m.source +
                       "; BLOCKSCOPE_CPU_PEAK_TFLOPS / _GBPS override";
  }
  if (tflops_override > 0) info.peak_tflops = tflops_override;
  if (gbps_override > 0) info.peak_gbps = gbps_override;
  if (tflops_override > 0 && gbps_override > 0) info.peak_source = "BLOCKSCOPE_CPU_PEAK_TFLOPS and _GBPS";
  if (dtype != DType::f32 && tflops_override <= 0) {
    const double f32_tflops = cpu_info(DType::f32).peak_tflops;  // measured or cached like this dtype's
    if (info.peak_tflops < 1.1 * f32_tflops) info.dtype_note = slow_dtype_note(dtype, info.peak_tflops, f32_tflops);
  }
  return info;
}



class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }
  BackendInfo info(DType dtype) override { return cpu_info(dtype); }
  void remeasure_peaks() override {
    g_remeasure = true;
    cpu_info(DType::f32, /*forget=*/true);
  }

  void* allocate(size_t bytes) override {
    // 64-byte alignment: cache lines, and any SIMD width.
    const size_t rounded = ((bytes + 63) / 64) * 64;
    void* ptr = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (ptr == nullptr) throw Error(ErrorKind::runtime, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use += bytes;
    stats_.total_allocated += bytes;
    stats_.allocation_count += 1;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    std::free(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use -= bytes;
  }

  MemoryStats memory_stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak_memory() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_in_use = stats_.in_use;
  }
  void restore_peak_memory(size_t peak) override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_in_use = std::max(peak, stats_.in_use);
  }
  size_t memory_available() const override;

  void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_within(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}

  TimeMark mark() override {
    marks_.push_back(std::chrono::steady_clock::now());
    return TimeMark{static_cast<int64_t>(marks_.size() - 1)};
  }
  double elapsed_ms(TimeMark start, TimeMark end) override {
    BS_CHECK(start.valid() && end.valid() && static_cast<size_t>(end.value) < marks_.size() &&
                 static_cast<size_t>(start.value) < marks_.size(),
             "unknown time mark");
    return std::chrono::duration<double, std::milli>(marks_[end.value] - marks_[start.value]).count();
  }
  void release_marks() override { marks_.clear(); }

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

size_t CpuBackend::memory_available() const {
  // Free RAM, or what the address-space limit (ulimit -v) leaves, whichever is smaller.
  const HostMemory host = host_memory();
  return std::min(host.free_ram, host.address_space_left);
}

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

#ifndef BLOCKSCOPE_WITH_CUDA
bool cuda_built() { return false; }
bool cuda_simulated() { return false; }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
#endif

}  // namespace blockscope
