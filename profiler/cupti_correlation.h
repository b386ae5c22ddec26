// The recorder's side of CUPTI (profiler/cupti.h): around each kernel scope it marks the
// launches that follow with an external correlation id, so CUPTI can tell which library
// kernels ran inside which scope. Its own header so recorder.cpp does not include cupti.h,
// which includes recorder.h back. Only in builds with CUPTI (BLOCKSCOPE_WITH_CUPTI); no-ops
// unless a CuptiKernelNames collects.
#pragma once

#ifdef BLOCKSCOPE_WITH_CUPTI

#include <cstdint>

namespace blockscope::profiler {

void cupti_kernel_begin(uint64_t external_id);
void cupti_kernel_end();

}  // namespace blockscope::profiler

#endif  // BLOCKSCOPE_WITH_CUPTI
