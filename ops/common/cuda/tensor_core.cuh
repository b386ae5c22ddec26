// Tensor-core primitives for sm_80+ kernels (FlashAttention-2-style attention, GEMM tiles):
// warp-level mma.sync m16n8k16 (f16/bf16 in, f32 accumulate), ldmatrix m8n8 (.x1/.x2/.x4,
// plain and .trans), cp.async 16-byte global→shared copies with commit/wait groups, and the
// small helpers around them.
//
// The one place where the ops' CUDA code differs between a GPU and the simulated GPU: inline PTX
// cannot run on the simulator, so there (BLOCKSCOPE_CUDA_SIM) each wrapper calls the simulator's
// emulation of the same instruction (sim/ptx.h: warp collectives following the PTX ISA's fragment
// layouts, cp.async deferred to the wait that covers it). Everything else in ops/ is plain CUDA.
//
// Fragment layouts (which lane holds which matrix element) are those of the PTX ISA sections
// "Matrix Fragments for mma.m16n8k16 with floating point type" and "Warp-level matrix load
// instruction: ldmatrix"; sim/ptx_model.h spells them out.
//
// Usage rules (the same on both implementations; the sim turns violations into Faults):
//   * mma_* and ldmatrix_* must be executed by all 32 lanes of the warp, converged (.sync.aligned).
//   * ldmatrix row addresses: shared memory, 16-byte aligned (each row is 16 bytes = 8 b16
//     elements). .x1 reads the addresses of lanes 0–7, .x2 of lanes 0–15, .x4 of all 32; the
//     other lanes' pointers are ignored (sm_80+), but pass something valid anyway.
//   * cp_async_16: 16-byte aligned shared destination and global source. Data written by
//     cp.async is visible to the issuing thread only after a cp_async_wait<N>() /
//     cp_async_wait_all() that covers its group, and to other threads only after that wait
//     followed by a barrier (__syncthreads / __syncwarp). __syncthreads alone does not wait for
//     cp.async.
#pragma once

#include <cstdint>

#ifndef BLOCKSCOPE_CUDA_SIM
// =============================================================================================
// Real GPU: inline PTX
// =============================================================================================
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ops/common/cuda/tensor_core.cuh needs sm_80 or newer (mma.m16n8k16 .bf16, cp.async)"
#endif

namespace blockscope::ops::cuda::tensor_core {

// 32-bit .shared address of a generic pointer into shared memory (what ldmatrix / cp.async take).
__device__ __forceinline__ uint32_t shared_address(const void* smem_ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
}

// Two floats rounded to nearest-even into one .bf16x2 / .f16x2 register; `lo` in bits 0–15
// (the lower-numbered fragment element, e.g. a0 of the pair a0,a1).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

// ---- mma.sync m16n8k16: D = A·B + C (A 16x16 row, B 16x8 col, C/D 16x8 f32) ----------------
// d may be the same array as c.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// ---- ldmatrix.sync m8n8 .b16: this lane's row address in, this lane's fragments out ---------
// The "memory" clobber keeps the compiler from moving shared-memory stores across the load.
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(smem_row_ptr))
               : "memory");
}

// ---- cp.async (.cg, 16 bytes, L2 only) --------------------------------------------------------
// valid == false copies nothing from gmem and zero-fills the 16 destination bytes (src-size 0).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)),
               "l"(__cvta_generic_to_global(gmem)), "r"(valid ? 16 : 0)
               : "memory");
}
// Tail copy: the first src_bytes (0..16) bytes come from gmem, the rest of the 16 are zeros.
__device__ __forceinline__ void cp_async_16_zfill(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)),
               "l"(__cvta_generic_to_global(gmem)), "r"(src_bytes)
               : "memory");
}
// Closes the thread's current cp.async-group (an empty group is trivially complete).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative constant");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Commits the open group and waits for all of this thread's cp.async.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace blockscope::ops::cuda::tensor_core

#else  // BLOCKSCOPE_CUDA_SIM
// =============================================================================================
// Simulated GPU: the simulator's emulation of the same instructions (sim/ptx.h)
// =============================================================================================
#include "sim/ptx.h"

namespace blockscope::ops::cuda::tensor_core {

namespace ptx = ::blockscope::sim::ptx;

inline uint32_t shared_address(const void* smem_ptr) { return ptx::shared_address(smem_ptr); }
inline uint32_t pack_bf16x2(float lo, float hi) { return ptx::pack_bf16x2(lo, hi); }
inline uint32_t pack_f16x2(float lo, float hi) { return ptx::pack_f16x2(lo, hi); }

inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  ptx::mma_m16n8k16(true, d, a, b, c);
}
inline void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  ptx::mma_m16n8k16(false, d, a, b, c);
}

inline void ldmatrix_x1(uint32_t (&r)[1], const void* p) { ptx::ldmatrix(1, false, r, p); }
inline void ldmatrix_x2(uint32_t (&r)[2], const void* p) { ptx::ldmatrix(2, false, r, p); }
inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) { ptx::ldmatrix(4, false, r, p); }
inline void ldmatrix_x1_trans(uint32_t (&r)[1], const void* p) { ptx::ldmatrix(1, true, r, p); }
inline void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) { ptx::ldmatrix(2, true, r, p); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) { ptx::ldmatrix(4, true, r, p); }

inline void cp_async_16(void* smem, const void* gmem, bool valid = true) { ptx::cp_async(smem, gmem, valid ? 16 : 0); }
inline void cp_async_16_zfill(void* smem, const void* gmem, int src_bytes) { ptx::cp_async(smem, gmem, src_bytes); }
inline void cp_async_commit() { ptx::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative constant");
  ptx::cp_async_wait(N);
}
inline void cp_async_wait_all() { ptx::cp_async_wait_all(); }

}  // namespace blockscope::ops::cuda::tensor_core

#endif  // BLOCKSCOPE_CUDA_SIM
