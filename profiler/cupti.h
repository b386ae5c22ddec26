// CUPTI activity records: the real names of library kernels (cuBLASLt GEMMs), attached to the
// KernelEvents recorded around the library calls. Only in builds with CUPTI
// (BLOCKSCOPE_WITH_CUPTI); active only while a CUDA context is profiled.
//
// NOT RUN ON A GPU YET: this code compiles in CUDA builds but has not been exercised on a
// device; treat names it reports as unverified until it has.
//
// How: each KernelScope pushes an external correlation id (its kernel index + 1) around the
// launch; CUPTI pairs every kernel it sees with that id (EXTERNAL_CORRELATION records) and
// reports the kernel's name (CONCURRENT_KERNEL records). attach() flushes and renames.
#pragma once

#ifdef BLOCKSCOPE_WITH_CUPTI

#include "profiler/cupti_correlation.h"  // the recorder's side: cupti_kernel_begin / end
#include "profiler/recorder.h"
#include "runtime/context.h"

namespace blockscope::profiler {

class CuptiKernelNames {
 public:
  explicit CuptiKernelNames(Context& ctx);  // collects only when ctx is a CUDA context
  ~CuptiKernelNames();
  CuptiKernelNames(const CuptiKernelNames&) = delete;
  CuptiKernelNames& operator=(const CuptiKernelNames&) = delete;

  // Flushes CUPTI's buffers and renames the recorder's library kernels (those without
  // launch attributes) to the kernel names CUPTI saw inside their scope ("a + b" if several).
  void attach(Recorder& recorder);

 private:
  bool active_ = false;
};

}  // namespace blockscope::profiler

#endif  // BLOCKSCOPE_WITH_CUPTI
