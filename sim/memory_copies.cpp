// Copies and memsets on the simulated GPU: plain, pitched (2D) and between devices, each one op
// of the stream's queue, its device side(s) checked against the live allocations of memory.cpp.
//
// Copies follow the docs' "API synchronization behavior": a pageable host source of an
// asynchronous host-to-device copy is staged (snapshotted) at the call; a device-to-pageable
// copy returns only once done (the queue runs); pinned (cudaMallocHost) memory is read or written
// when the copy executes, so a host reusing a pinned buffer too early sees what a GPU would.
#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "sim/runtime_state.h"

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

namespace {

// Resolves cudaMemcpyDefault and checks the device side(s) of a copy against live allocations:
// the destination spans dst_bytes, the source src_bytes (they differ for pitched copies).
cudaError_t check_copy(void* dst, size_t dst_bytes, const void* src, size_t src_bytes, cudaMemcpyKind* kind) {
  if (*kind == cudaMemcpyDefault) {
    const bool dst_device = device_range_ok(dst, dst_bytes), src_device = device_range_ok(src, src_bytes);
    *kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                       : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  switch (*kind) {
    case cudaMemcpyHostToHost: return cudaSuccess;
    case cudaMemcpyHostToDevice: return device_range_ok(dst, dst_bytes) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return device_range_ok(src, src_bytes) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
      return device_range_ok(dst, dst_bytes) && device_range_ok(src, src_bytes) ? cudaSuccess : cudaErrorInvalidValue;
    default: return cudaErrorInvalidMemcpyDirection;
  }
}

const char* copy_name(cudaMemcpyKind kind) {
  return kind == cudaMemcpyHostToDevice   ? "Memcpy HtoD"
         : kind == cudaMemcpyDeviceToHost ? "Memcpy DtoH"
         : kind == cudaMemcpyDeviceToDevice ? "Memcpy DtoD"
                                            : "Memcpy HtoH";
}

cudaError_t memset_async(void* ptr, int value, size_t count, CUstream_st* s) {
  if (count == 0) return cudaSuccess;
  if (!device_range_ok(ptr, count)) return cudaErrorInvalidValue;
  return submit(s, "Memset", [ptr, value, count]() {
    note_op_access(ptr, count, true);
    std::memset(ptr, value, count);
    note_written(ptr, count);
  });
}

// The bytes a pitched region of `height` rows of `width` bytes spans.
size_t pitched_span(size_t pitch, size_t width, size_t height) { return pitch * (height - 1) + width; }

// A copy of `height` rows of `width` bytes, rows `spitch` apart in the source, `dpitch` in the
// destination, as one op (a plain copy is one row). Staging a pageable source is what makes the
// call safe to return early; a pinned one is read when the copy runs, and a graph node reads its
// source at every launch. A copy to pageable memory (or a synchronous one) returns once done.
cudaError_t memcpy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                           cudaMemcpyKind kind, CUstream_st* s, bool synchronous) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  const size_t dst_span = pitched_span(dpitch, width, height), src_span = pitched_span(spitch, width, height);
  if (const cudaError_t error = check_copy(dst, dst_span, src, src_span, &kind); error != cudaSuccess) return error;
  const bool capturing = s->capture != nullptr;
  const bool stage = kind == cudaMemcpyHostToDevice && !is_pinned(src, src_span) && !capturing;
  std::function<void()> op;
  auto* to = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(src);
  if (stage) {  // the rows, packed, copied now
    auto rows = std::make_shared<std::vector<unsigned char>>(width * height);
    for (size_t r = 0; r < height; ++r) std::memcpy(rows->data() + r * width, from + r * spitch, width);
    op = [to, dpitch, width, height, rows]() {
      note_op_access(to, pitched_span(dpitch, width, height), true);
      for (size_t r = 0; r < height; ++r) std::memcpy(to + r * dpitch, rows->data() + r * width, width);
      for (size_t r = 0; r < height; ++r) note_written(to + r * dpitch, width);
    };
  } else {
    op = [to, dpitch, from, spitch, width, height]() {
      note_op_access(from, pitched_span(spitch, width, height), false);
      note_op_access(to, pitched_span(dpitch, width, height), true);
      for (size_t r = 0; r < height; ++r) note_copied(to + r * dpitch, from + r * spitch, width);
      for (size_t r = 0; r < height; ++r) std::memmove(to + r * dpitch, from + r * spitch, width);
    };
  }
  if (const cudaError_t error = submit(s, copy_name(kind), std::move(op)); error != cudaSuccess) return error;
  const bool to_pageable = (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) && !is_pinned(dst, dst_span);
  if (!capturing && (synchronous || to_pageable)) return run_through(s->last_seq, s->device);
  return cudaSuccess;
}

// A plain copy: one row of `count` bytes.
cudaError_t memcpy_async(void* dst, const void* src, size_t count, cudaMemcpyKind kind, CUstream_st* s,
                         bool synchronous) {
  return memcpy2d_async(dst, count, src, count, count, 1, kind, s, synchronous);
}

cudaError_t memset2d_async(void* ptr, size_t pitch, int value, size_t width, size_t height, CUstream_st* s) {
  if (width > pitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  if (!device_range_ok(ptr, pitched_span(pitch, width, height))) return cudaErrorInvalidValue;
  auto* to = static_cast<unsigned char*>(ptr);
  return submit(s, "Memset", [to, pitch, value, width, height]() {
    note_op_access(to, pitched_span(pitch, width, height), true);
    for (size_t r = 0; r < height; ++r) std::memset(to + r * pitch, value, width);
    for (size_t r = 0; r < height; ++r) note_written(to + r * pitch, width);
  });
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  return result(memcpy_async(dst, src, count, kind, resolve_stream(nullptr), true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memcpy_async(dst, src, count, kind, s, false));
}

// Asynchronous for device memory, per the docs (synchronous only for pinned or managed targets).
cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  Lock lock(state_mutex());
  return result(memset_async(ptr, value, count, resolve_stream(nullptr)));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memset_async(ptr, value, count, s));
}

// ---- 2D copies -------------------------------------------------------------------------------------
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return result(error);
  return result(memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, resolve_stream(nullptr), true));
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, s, false));
}

cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
  Lock lock(state_mutex());
  return result(memset2d_async(ptr, pitch, value, width, height, resolve_stream(nullptr)));
}

cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  return result(memset2d_async(ptr, pitch, value, width, height, s));
}

// ---- Copies between devices ----------------------------------------------------------------------
cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                cudaStream_t stream) {
  Lock lock(state_mutex());
  if (!valid_device(dst_device) || !valid_device(src_device)) return result(cudaErrorInvalidDevice);
  CUstream_st* s = resolve_stream(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  if (!on_device(dst, count, dst_device) || !on_device(src, count, src_device)) return result(cudaErrorInvalidValue);
  return result(memcpy_async(dst, src, count, cudaMemcpyDeviceToDevice, s, false));
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  return cudaMemcpyPeerAsync(dst, dst_device, src, src_device, count, nullptr);
}

}  // extern "C"
