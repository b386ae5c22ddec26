// See cupti.h. NOT RUN ON A GPU YET (compile-checked only).
#include "profiler/cupti.h"

#ifdef BLOCKSCOPE_WITH_CUPTI

#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace blockscope::profiler {

namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;

std::atomic<bool> g_collecting{false};
std::mutex g_mutex;
std::map<uint32_t, uint64_t> g_external_ids;                       // CUDA correlation id -> our id
std::vector<std::pair<uint32_t, std::string>> g_kernel_names;      // (correlation id, kernel name)

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI wants 8-byte aligned buffers.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        // The name is CUPTI's memory: copy it now.
        g_kernel_names.emplace_back(kernel->correlationId, kernel->name != nullptr ? kernel->name : "?");
      } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* correlation = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (correlation->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
          g_external_ids[correlation->correlationId] = correlation->externalId;
        }
      }
    }
  }
  std::free(buffer);
}

// CUPTI can be unavailable (another tool such as nsys holds it, an old driver): kernel names
// are a nicety, so a failure leaves the scope names in place instead of failing the profile.
bool ok(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "blockscope: CUPTI %s failed (%s); library kernels keep their scope names\n", what,
               text ? text : "unknown error");
  return false;
}

}  // namespace

void cupti_kernel_begin(uint64_t external_id) {
  if (g_collecting.load(std::memory_order_relaxed)) {
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, external_id);
  }
}

void cupti_kernel_end() {
  if (g_collecting.load(std::memory_order_relaxed)) {
    uint64_t last = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }
}

CuptiKernelNames::CuptiKernelNames(Context& ctx) {
  if (!ctx.device().is_cuda() || g_collecting.load()) return;  // one collector at a time
  if (!ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling CONCURRENT_KERNEL records") ||
      !ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), "enabling EXTERNAL_CORRELATION records")) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    return;
  }
  active_ = true;
  g_collecting.store(true);
}

CuptiKernelNames::~CuptiKernelNames() {
  if (!active_) return;
  g_collecting.store(false);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_external_ids.clear();
  g_kernel_names.clear();
}

void CuptiKernelNames::attach(Recorder& recorder) {
  if (!active_) return;
  if (!ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll")) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<KernelEvent>& kernels = recorder.mutable_kernels();
  std::vector<std::string> names(kernels.size());
  for (const auto& [correlation, name] : g_kernel_names) {
    const auto found = g_external_ids.find(correlation);
    if (found == g_external_ids.end() || found->second == 0 || found->second > kernels.size()) continue;
    std::string& joined = names[found->second - 1];
    joined += (joined.empty() ? "" : " + ") + name;
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    // Our own kernels carry launch attributes and already have their real names.
    if (!names[i].empty() && kernels[i].registers == 0) kernels[i].name = names[i];
  }
  g_external_ids.clear();
  g_kernel_names.clear();
}

}  // namespace blockscope::profiler

#endif  // BLOCKSCOPE_WITH_CUPTI
