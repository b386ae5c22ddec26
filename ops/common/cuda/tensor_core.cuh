// Tensor-core primitives for sm_80+ kernels (FlashAttention-2-style attention, GEMM tiles):
// warp-level mma.sync m16n8k16 (f16/bf16 in, f32 accumulate), ldmatrix m8n8 (.x1/.x2/.x4,
// plain and .trans), cp.async 16-byte global→shared copies with commit/wait groups, and the
// small helpers around them.
//
// Two implementations, chosen at compile time:
//   * nvcc (real GPU): inline PTX, one instruction per wrapper.
//   * BLOCKSCOPE_CUDA_SIM (the simulated GPU, runtime/sim; host compiler, every GPU thread a
//     fiber): mma and ldmatrix are warp collectives (blockscope::sim::warp_collective, all 32
//     lanes, mask 0xffffffff as .aligned requires) whose combine step computes every lane's
//     registers with tensor_core_model.h, which follows the PTX ISA's fragment layouts; cp.async
//     is deferred per thread until a cp.async.wait_group that covers it (see below).
//
// Fragment layouts (which lane holds which matrix element) are those of the PTX ISA sections
// "Matrix Fragments for mma.m16n8k16 with floating point type" and "Warp-level matrix load
// instruction: ldmatrix"; tensor_core_model.h spells them out.
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
// Simulated GPU: warp collectives over the host-only model, deferred cp.async
// =============================================================================================
#include <cstddef>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/common/cuda/tensor_core_model.h"
#include "runtime/sim/device.h"

namespace blockscope::ops::cuda::tensor_core {

namespace sim_detail {
namespace model = blockscope::ops::cuda::tensor_core_model;

inline bool in_dynamic_shared(const void* p) {
  const auto* base = static_cast<const unsigned char*>(sim::dynamic_shared_memory());
  const auto* q = static_cast<const unsigned char*>(p);
  return base && q >= base && q < base + sim::dynamic_shared_bytes();
}

// A 16-byte access [p, p+16) that starts inside the dynamic shared memory must end inside it.
// (Static __shared__ arrays may live elsewhere; only alignment is checked for those.)
inline const char* check_shared_16(const void* p) {
  if (!p) return "null shared-memory address";
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return "shared-memory address not 16-byte aligned";
  if (in_dynamic_shared(p)) {
    const auto* base = static_cast<const unsigned char*>(sim::dynamic_shared_memory());
    if (static_cast<const unsigned char*>(p) + 16 > base + sim::dynamic_shared_bytes())
      return "16-byte shared-memory access runs past the end of dynamic shared memory";
  }
  return nullptr;
}

struct MmaIn {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

inline void mma(const char* what, bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                const float (&c)[4]) {
  MmaIn in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  std::memcpy(in.c, c, sizeof in.c);
  float out[4];
  sim::warp_collective(what, 0xffffffffu, &in, sizeof in, out, sizeof out, [bf16](const sim::WarpCollectiveArgs& args) {
    uint32_t A[model::kWarpSize][4], B[model::kWarpSize][2];
    float C[model::kWarpSize][4], D[model::kWarpSize][4];
    for (int lane = 0; lane < model::kWarpSize; ++lane) {
      MmaIn lane_in;
      std::memcpy(&lane_in, args.in[lane], sizeof lane_in);
      std::memcpy(A[lane], lane_in.a, sizeof lane_in.a);
      std::memcpy(B[lane], lane_in.b, sizeof lane_in.b);
      std::memcpy(C[lane], lane_in.c, sizeof lane_in.c);
    }
    model::mma_m16n8k16(A, B, C, D, bf16);
    for (int lane = 0; lane < model::kWarpSize; ++lane) std::memcpy(args.out[lane], D[lane], sizeof D[lane]);
  });
  std::memcpy(d, out, sizeof out);  // after the collective: d may alias c
}

template <int Num>
inline void ldmatrix(const char* what, bool trans, uint32_t (&r)[Num], const void* smem_row_ptr) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "ldmatrix loads 1, 2 or 4 matrices");
  uint32_t out[4] = {0, 0, 0, 0};
  sim::warp_collective(what, 0xffffffffu, &smem_row_ptr, sizeof smem_row_ptr, out, sizeof out,
                       [trans](const sim::WarpCollectiveArgs& args) {
                         const void* rows[model::kWarpSize] = {};
                         for (int t = 0; t < 8 * Num; ++t) {  // only these threads' addresses count
                           std::memcpy(&rows[t], args.in[t], sizeof rows[t]);
                           if (const char* problem = check_shared_16(rows[t])) {
                             sim::fault((std::string("ldmatrix: lane ") + std::to_string(t) + " row address: " + problem)
                                            .c_str());
                           }
                         }
                         uint32_t regs[model::kWarpSize][4] = {};
                         model::ldmatrix_m8n8_b16(rows, Num, trans, regs);
                         for (int lane = 0; lane < model::kWarpSize; ++lane)
                           std::memcpy(args.out[lane], regs[lane], sizeof regs[lane]);
                       });
  for (int m = 0; m < Num; ++m) r[m] = out[m];
}

// ---- cp.async, deferred ------------------------------------------------------------------
// Model: cp_async_16 reads its 16 source bytes when it is issued (the PTX ISA leaves the time of
// the read open between issue and completion; reading at issue keeps the sim from touching global
// memory later) and queues the 16-byte write to shared memory in the thread's open group;
// cp_async_commit closes the group; cp_async_wait<N> performs, oldest first, every committed
// group but the newest N; cp_async_wait_all commits and performs everything. Until then the
// destination keeps its old contents (the sim's 0xFF poison at block start), so a kernel that
// reads shared memory before the covering wait (or before wait + barrier, from another thread)
// sees stale data, as it can on a GPU.
// __syncthreads does NOT perform pending copies (it does not wait for cp.async on a GPU either).
// A thread that exits with copies it never waited for: they are DROPPED, never performed. On a
// GPU they would land at some unspecified time, so nothing may rely on them; in the sim, readers
// see the old data. (Limitation: the sim has no thread-exit hook, so the dropped state is found
// and discarded lazily: per-thread queues are keyed by the ThreadState of the calling fiber and
// carry the thread's grid/block/thread identity; a later thread that gets the same ThreadState
// with another identity discards them. A later launch with the identical identity would see them
// at its first wait; a copy whose destination then lies outside its new dynamic shared memory
// Faults.)
struct PendingCopy {
  void* dst;
  bool dst_in_dynamic;
  unsigned char bytes[16];
};
struct Identity {
  uint3 block, thread;
  dim3 grid_dim, block_dim;
  const void* smem;
  size_t smem_bytes;
  bool operator==(const Identity& o) const {
    const auto eq3 = [](auto x, auto y) { return x.x == y.x && x.y == y.y && x.z == y.z; };
    return eq3(block, o.block) && eq3(thread, o.thread) && eq3(grid_dim, o.grid_dim) && eq3(block_dim, o.block_dim) &&
           smem == o.smem && smem_bytes == o.smem_bytes;
  }
};
struct ThreadCopies {
  Identity id;
  std::vector<PendingCopy> open;                 // issued, not yet committed
  std::deque<std::vector<PendingCopy>> groups;  // committed, oldest first
};

inline std::mutex& copies_mutex() {
  static std::mutex m;
  return m;
}
inline std::unordered_map<const sim::ThreadState*, ThreadCopies>& copies_table() {
  static std::unordered_map<const sim::ThreadState*, ThreadCopies> table;
  return table;
}
inline Identity this_identity(const sim::ThreadState& t) {
  return {t.block_idx, t.thread_idx, t.grid_dim, t.block_dim, sim::dynamic_shared_memory(), sim::dynamic_shared_bytes()};
}
// The calling thread's queues (created empty; a stale entry of an exited thread is discarded).
// Caller holds copies_mutex().
inline ThreadCopies& this_thread_copies() {
  const sim::ThreadState& t = sim::current_thread();
  const Identity id = this_identity(t);
  auto [it, inserted] = copies_table().try_emplace(&t);
  if (inserted || !(it->second.id == id)) {
    it->second = ThreadCopies{};
    it->second.id = id;
  }
  return it->second;
}
inline void forget_if_idle(ThreadCopies& copies) {
  if (copies.open.empty() && copies.groups.empty()) copies_table().erase(&sim::current_thread());
}
inline void perform(const std::vector<PendingCopy>& group) {
  for (const PendingCopy& copy : group) {
    if (copy.dst_in_dynamic && !in_dynamic_shared(copy.dst))
      sim::fault("cp.async: a pending copy's destination is no longer in this block's shared memory");
    std::memcpy(copy.dst, copy.bytes, 16);
  }
}

inline void issue(void* smem, const void* gmem, int src_bytes) {
  if (src_bytes < 0 || src_bytes > 16) sim::fault("cp.async: src-size outside 0..16");
  if (const char* problem = check_shared_16(smem)) sim::fault((std::string("cp.async destination: ") + problem).c_str());
  if (src_bytes > 0) {
    if (!gmem) sim::fault("cp.async: null global source");
    if (reinterpret_cast<uintptr_t>(gmem) % 16 != 0) sim::fault("cp.async: global source not 16-byte aligned");
    if (in_dynamic_shared(gmem)) sim::fault("cp.async: source is in shared memory, not global memory");
  }
  PendingCopy copy{smem, in_dynamic_shared(smem), {}};
  if (src_bytes > 0) std::memcpy(copy.bytes, gmem, static_cast<size_t>(src_bytes));
  std::lock_guard<std::mutex> lock(copies_mutex());
  this_thread_copies().open.push_back(copy);
}

inline void commit() {
  std::lock_guard<std::mutex> lock(copies_mutex());
  ThreadCopies& copies = this_thread_copies();
  copies.groups.push_back(std::move(copies.open));
  copies.open.clear();
}

inline void wait_group(int n) {
  std::lock_guard<std::mutex> lock(copies_mutex());
  ThreadCopies& copies = this_thread_copies();
  while (static_cast<int>(copies.groups.size()) > n) {
    perform(copies.groups.front());
    copies.groups.pop_front();
  }
  forget_if_idle(copies);
}

inline void wait_all() {
  std::lock_guard<std::mutex> lock(copies_mutex());
  ThreadCopies& copies = this_thread_copies();
  for (const auto& group : copies.groups) perform(group);
  perform(copies.open);
  copies.groups.clear();
  copies.open.clear();
  forget_if_idle(copies);
}
}  // namespace sim_detail

// In the sim, "shared addresses" are offsets into the block's dynamic shared memory (for pointers
// elsewhere, the low 32 bits of the host pointer): differences and alignment bits are meaningful,
// the values are not the GPU's.
inline uint32_t shared_address(const void* smem_ptr) {
  if (sim_detail::in_dynamic_shared(smem_ptr))
    return static_cast<uint32_t>(static_cast<const unsigned char*>(smem_ptr) -
                                 static_cast<const unsigned char*>(sim::dynamic_shared_memory()));
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(smem_ptr));
}

inline uint32_t pack_bf16x2(float lo, float hi) {
  return tensor_core_model::pack_b16x2(tensor_core_model::float_to_bf16_bits_rn(lo),
                                       tensor_core_model::float_to_bf16_bits_rn(hi));
}
inline uint32_t pack_f16x2(float lo, float hi) {
  return tensor_core_model::pack_b16x2(tensor_core_model::float_to_f16_bits_rn(lo),
                                       tensor_core_model::float_to_f16_bits_rn(hi));
}

inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  sim_detail::mma("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", true, d, a, b, c);
}
inline void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  sim_detail::mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", false, d, a, b, c);
}

inline void ldmatrix_x1(uint32_t (&r)[1], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x1.shared.b16", false, r, p);
}
inline void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x2.shared.b16", false, r, p);
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x4.shared.b16", false, r, p);
}
inline void ldmatrix_x1_trans(uint32_t (&r)[1], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", true, r, p);
}
inline void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", true, r, p);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  sim_detail::ldmatrix("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", true, r, p);
}

inline void cp_async_16(void* smem, const void* gmem, bool valid = true) { sim_detail::issue(smem, gmem, valid ? 16 : 0); }
inline void cp_async_16_zfill(void* smem, const void* gmem, int src_bytes) { sim_detail::issue(smem, gmem, src_bytes); }
inline void cp_async_commit() { sim_detail::commit(); }
template <int N>
inline void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative constant");
  sim_detail::wait_group(N);
}
inline void cp_async_wait_all() { sim_detail::wait_all(); }

}  // namespace blockscope::ops::cuda::tensor_core

#endif  // BLOCKSCOPE_CUDA_SIM
