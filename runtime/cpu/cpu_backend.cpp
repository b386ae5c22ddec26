// The CPU backend: aligned host memory with statistics, and steady-clock timing marks.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/context.h"
#include "runtime/error.h"

namespace blockscope {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }

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
  // MemAvailable from /proc/meminfo; fall back to "plenty" where it cannot be read.
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        std::fclose(f);
        return static_cast<size_t>(kib) * 1024;
      }
    }
    std::fclose(f);
  }
  return static_cast<size_t>(1) << 40;
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
