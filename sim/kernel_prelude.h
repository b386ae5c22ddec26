// Force-included (-include) into every .cu that nvcc-sim compiles for the simulated GPU: what nvcc
// and its headers give CUDA code, for the host compiler. Its partner is nvcc-sim's rewriter
// (sim/nvcc_sim/rewrite.cpp), which runs on the preprocessed source: the execution-space
// keywords below become markers it replaces —
//   kernel<<<grid, block, smem, stream>>>(args)  a kernel_launch::launch(...) call (below)
//   __shared__ T x[N];                           a reference to the block's shared memory
//                                                (sim::shared_variable: poisoned per block,
//                                                redzones, exact alignment)
//   extern __shared__ T x[];                     a reference to the dynamic shared memory
//   __device__/__constant__/__managed__ variables  registered (per-device copies, memcheck)
//   __device__ on functions                      nothing
//   malloc/free/new/delete in device code        the device heap (sim/device_heap.h)
//   __global__                                   noinline; its body's first statement faults
//                                                when called outside a launch (no <<<>>>)
//
// The toolkit's headers are included first, in host mode; then __CUDACC__ and __CUDA_ARCH__
// (900, the simulated H200) are defined, so arch-guarded kernel code compiles as it would for
// sm_90 (<cuda_fp8.h> is one of the host-mode headers: its arch-guarded inline PTX cannot run,
// its C conversions give the same codes). Headers that need nvcc's device mode beyond that are
// not supported (cub, thrust, cuda/pipeline); <cooperative_groups.h> and <mma.h> are the
// simulator's own (sim/cuda_include/).
//
// Differences from a GPU worth knowing:
//   assert() in a kernel ends the grid with cudaErrorAssert; printf prints at once, not at the
//   next synchronisation.
//   clock64() counts cycles of the 1980 MHz clock cudaDevAttrClockRate reports (steady time x
//   1.98), and so does clock() in a kernel (its low 32 bits, as a GPU's); on the host, clock()
//   stays the C library's process CPU time.
//   Math intrinsics (__expf, __sinf, rsqrtf, …) use the C library: results may differ from the
//   GPU's within the ulp bounds the CUDA programming guide documents for each.
//   __activemask() returns the lanes of the warp that reach an __activemask while no other lane
//   of the warp can run on (device.h: active_lanes).
//   Inline PTX (asm) cannot run: ops/common/cuda/tensor_core.cuh calls sim/ptx.h instead.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>  // host mode: its conversions' C code (on sm_89+ GPUs, cvt.rn.satfinite; same codes)

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "sim/device.h"
#include "sim/device_heap.h"
#include "sim/device_math.h"
#include "sim/ptx.h"
#include "sim/sim.h"

// ---- Execution spaces: markers for the rewriter, or nothing -----------------------------------------
#undef __global__
#undef __host__
#undef __device__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __grid_constant__
#undef __launch_bounds__
#undef __cluster_dims__
#undef __forceinline__
#undef __maxnreg__
#define __global__ __blockscope_global__
#define __host__
#define __device__ __blockscope_device__
#define __shared__ __blockscope_shared__
#define __constant__ __blockscope_constant__
#define __managed__ __blockscope_managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __maxnreg__(...)
#define __forceinline__ inline __attribute__((always_inline))
// __noinline__ stays undefined (libstdc++ spells __attribute__((__noinline__))); the rewriter turns
// a bare one into __attribute__((noinline)).

// ---- What nvcc defines ----------------------------------------------------------------------------------
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __CUDACC_VER_MAJOR__ (CUDART_VERSION / 1000)
#define __CUDACC_VER_MINOR__ (CUDART_VERSION % 1000 / 10)
#define __CUDACC_VER_BUILD__ 0
#ifndef BLOCKSCOPE_CUDA_SIM
#define BLOCKSCOPE_CUDA_SIM 1
#endif

// ---- Built-in variables ---------------------------------------------------------------------------------
// Variables, as nvcc's are, so a local or a member of the same name (llm.c's `dim3 gridDim`,
// cudaKernelNodeParams::gridDim) is an ordinary declaration. The executor sets them, per host
// thread, for the GPU thread it resumes (sim/executor.cpp); outside a kernel they mean nothing.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
// A variable, not a macro: cudaDeviceProp has a member of that name.
inline constexpr int warpSize = 32;

// ---- Barriers ---------------------------------------------------------------------------------------------
// The source site identifies the barrier: threads of one block at different __syncthreads are a
// Fault (undefined behaviour on a GPU: a hang or a corruption).
#define __syncthreads() ((void)::blockscope::sim::sync_block_at("__syncthreads", __FILE__, __LINE__, 0))
#define __syncthreads_count(predicate) \
  (::blockscope::sim::sync_block_at("__syncthreads_count", __FILE__, __LINE__, (predicate)))
#define __syncthreads_and(predicate)                                                                   \
  (::blockscope::sim::sync_block_at("__syncthreads_and", __FILE__, __LINE__, !(predicate)) == 0 ? 1 : 0)
#define __syncthreads_or(predicate) \
  (::blockscope::sim::sync_block_at("__syncthreads_or", __FILE__, __LINE__, (predicate)) != 0 ? 1 : 0)

// ---- Warp collectives -------------------------------------------------------------------------------------
namespace blockscope::sim::prelude {

template <typename T>
inline T shuffle(const char* what, ShuffleMode mode, unsigned mask, T var, int b, int width) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_destructible<T>::value,
                "warp shuffles move trivially copyable values of at most 16 bytes");
  T result = var;
  warp_shuffle(what, mode, mask, &var, &result, sizeof(T), b, width);
  return result;
}

template <typename T>
inline unsigned match_any(unsigned mask, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_any_sync takes 32- or 64-bit values");
  return warp_match_any(mask, &value, sizeof(T));
}

template <typename T>
inline unsigned match_all(unsigned mask, T value, int* pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_all_sync takes 32- or 64-bit values");
  return warp_match_all(mask, &value, sizeof(T), pred);
}

}  // namespace blockscope::sim::prelude

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::blockscope::sim::prelude::shuffle("__shfl_sync", ::blockscope::sim::kShuffleIdx, mask, var, src_lane, width);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::blockscope::sim::prelude::shuffle("__shfl_up_sync", ::blockscope::sim::kShuffleUp, mask, var,
                                             static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::blockscope::sim::prelude::shuffle("__shfl_down_sync", ::blockscope::sim::kShuffleDown, mask, var,
                                             static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::blockscope::sim::prelude::shuffle("__shfl_xor_sync", ::blockscope::sim::kShuffleXor, mask, var, lane_mask,
                                             width);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::blockscope::sim::warp_vote("__ballot_sync", mask, predicate);
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::blockscope::sim::warp_vote("__any_sync", mask, predicate) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  // Lanes of the mask that exited do not vote: every lane that voted must have voted yes.
  return ::blockscope::sim::warp_vote("__all_sync", mask, !predicate) == 0;
}
inline int __uni_sync(unsigned mask, int predicate) {
  const unsigned yes = ::blockscope::sim::warp_vote("__uni_sync", mask, predicate);
  const unsigned no = ::blockscope::sim::warp_vote("__uni_sync", mask, !predicate);
  return yes == 0 || no == 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::blockscope::sim::warp_collective("__syncwarp", mask, nullptr, 0, nullptr, 0,
                                     [](const ::blockscope::sim::WarpCollectiveArgs&) {});
}
inline unsigned __activemask() { return ::blockscope::sim::active_lanes(); }

template <typename T>
inline unsigned __match_any_sync(unsigned mask, T value) {
  return ::blockscope::sim::prelude::match_any(mask, value);
}
template <typename T>
inline unsigned __match_all_sync(unsigned mask, T value, int* pred) {
  return ::blockscope::sim::prelude::match_all(mask, value, pred);
}

#define BLOCKSCOPE_SIM_REDUCE(name, T, op)                                                                        \
  inline T name(unsigned mask, T value) {                                                                         \
    return static_cast<T>(::blockscope::sim::warp_reduce(#name, mask, ::blockscope::sim::WarpReduce::op,          \
                                                         static_cast<unsigned>(value)));                          \
  }
BLOCKSCOPE_SIM_REDUCE(__reduce_add_sync, unsigned, add)
BLOCKSCOPE_SIM_REDUCE(__reduce_add_sync, int, add)
BLOCKSCOPE_SIM_REDUCE(__reduce_min_sync, unsigned, umin)
BLOCKSCOPE_SIM_REDUCE(__reduce_min_sync, int, min)
BLOCKSCOPE_SIM_REDUCE(__reduce_max_sync, unsigned, umax)
BLOCKSCOPE_SIM_REDUCE(__reduce_max_sync, int, max)
BLOCKSCOPE_SIM_REDUCE(__reduce_and_sync, unsigned, and_)
BLOCKSCOPE_SIM_REDUCE(__reduce_or_sync, unsigned, or_)
BLOCKSCOPE_SIM_REDUCE(__reduce_xor_sync, unsigned, xor_)
#undef BLOCKSCOPE_SIM_REDUCE

// ---- Bit manipulation -------------------------------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) | __brev(static_cast<unsigned>(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned result = 0;
  for (int i = 0; i < 4; ++i) result |= static_cast<unsigned>((bytes >> (((s >> (4 * i)) & 7u) * 8)) & 0xffu) << (8 * i);
  return result;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline int __mul24(int x, int y) { return (x << 8 >> 8) * (y << 8 >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) { return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32); }
inline long long __mul64hi(long long x, long long y) { return static_cast<long long>((static_cast<__int128>(x) * y) >> 64); }
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}

// ---- Reinterpretation -------------------------------------------------------------------------------------
namespace blockscope::sim::prelude {
template <typename To, typename From>
inline To bits(From from) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
}  // namespace blockscope::sim::prelude
inline int __float_as_int(float x) { return ::blockscope::sim::prelude::bits<int>(x); }
inline unsigned __float_as_uint(float x) { return ::blockscope::sim::prelude::bits<unsigned>(x); }
inline float __int_as_float(int x) { return ::blockscope::sim::prelude::bits<float>(x); }
inline float __uint_as_float(unsigned x) { return ::blockscope::sim::prelude::bits<float>(x); }
inline long long __double_as_longlong(double x) { return ::blockscope::sim::prelude::bits<long long>(x); }
inline double __longlong_as_double(long long x) { return ::blockscope::sim::prelude::bits<double>(x); }

// ---- Math intrinsics (C library; see the note at the top on accuracy) -----------------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x), *c = std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __fma_rn(double x, double y, double z) { return std::fma(x, y, z); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline unsigned __float2uint_rz(float x) { return static_cast<unsigned>(x); }

// CUDA's global min/max overloads for device code (same-type arguments).
#define BLOCKSCOPE_SIM_MINMAX(T)                     \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
BLOCKSCOPE_SIM_MINMAX(int)
BLOCKSCOPE_SIM_MINMAX(unsigned)
BLOCKSCOPE_SIM_MINMAX(long)
BLOCKSCOPE_SIM_MINMAX(unsigned long)
BLOCKSCOPE_SIM_MINMAX(long long)
BLOCKSCOPE_SIM_MINMAX(unsigned long long)
#undef BLOCKSCOPE_SIM_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
// And its mixed ones: signed with unsigned of one width compare as the unsigned type (integer
// promotion), float with double as double; without them min(int, unsigned) is ambiguous here
// where nvcc takes it (llm.c's softmax_forward: min(C - 1, i + u * blockDim.x)).
#define BLOCKSCOPE_SIM_MINMAX_MIXED(R, A, B)                                            \
  inline R min(A a, B b) { return min(static_cast<R>(a), static_cast<R>(b)); } \
  inline R max(A a, B b) { return max(static_cast<R>(a), static_cast<R>(b)); }
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned, int, unsigned)
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned, unsigned, int)
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned long, long, unsigned long)
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned long, unsigned long, long)
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned long long, long long, unsigned long long)
BLOCKSCOPE_SIM_MINMAX_MIXED(unsigned long long, unsigned long long, long long)
BLOCKSCOPE_SIM_MINMAX_MIXED(double, float, double)
BLOCKSCOPE_SIM_MINMAX_MIXED(double, double, float)
#undef BLOCKSCOPE_SIM_MINMAX_MIXED

// nvcc's headers declare the classification functions in the global namespace for host code as
// well (CUDA programs call isfinite(x) unqualified on the host: llm.c's common.h).
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

// ---- Atomics ----------------------------------------------------------------------------------------------
// Each is one indivisible step of the simulated GPU: atomic_begin checks the address (and may let
// other threads run first), the read-modify-write happens with the access checks paused, so it
// is neither interrupted nor a race; atomic_end notes whether it changed memory (progress).
namespace blockscope::sim::prelude {
template <typename T, typename F>
inline T rmw(T* address, F f) {
  atomic_begin(address, sizeof(T));
  const T old = *address;
  const T updated = f(old);
  *address = updated;
  atomic_end(std::memcmp(&old, &updated, sizeof(T)) != 0);
  return old;
}
template <typename T>
inline T cas(T* address, T compare, T val) {
  atomic_begin(address, sizeof(T));
  const T old = *address;
  const bool swap = std::memcmp(&old, &compare, sizeof(T)) == 0;
  if (swap) *address = val;
  atomic_end(swap && std::memcmp(&old, &val, sizeof(T)) != 0);
  return old;
}
}  // namespace blockscope::sim::prelude

// Every atomic also in its _block and _system forms (one device: the same operation).
#define BLOCKSCOPE_SIM_ATOMIC(name, T, expr)                                                            \
  inline T name(T* address, T val) {                                                                    \
    return ::blockscope::sim::prelude::rmw(address, [val]([[maybe_unused]] T old) { return (expr); }); \
  }                                                                                                     \
  inline T name##_block(T* address, T val) { return name(address, val); }                               \
  inline T name##_system(T* address, T val) { return name(address, val); }
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, int, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, unsigned, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, unsigned long long, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, float, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, double, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, __half, __float2half_rn(__half2float(old) + __half2float(val)))
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, __nv_bfloat16, __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(val)))
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, __half2,
                      __floats2half2_rn(__low2float(old) + __low2float(val), __high2float(old) + __high2float(val)))
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, __nv_bfloat162,
                      __floats2bfloat162_rn(__low2float(old) + __low2float(val), __high2float(old) + __high2float(val)))
BLOCKSCOPE_SIM_ATOMIC(atomicSub, int, old - val)
BLOCKSCOPE_SIM_ATOMIC(atomicSub, unsigned, old - val)
BLOCKSCOPE_SIM_ATOMIC(atomicExch, int, val)
BLOCKSCOPE_SIM_ATOMIC(atomicExch, unsigned, val)
BLOCKSCOPE_SIM_ATOMIC(atomicExch, unsigned long long, val)
BLOCKSCOPE_SIM_ATOMIC(atomicExch, float, val)
BLOCKSCOPE_SIM_ATOMIC(atomicMax, int, old < val ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMax, unsigned, old < val ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMax, long long, old < val ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMax, unsigned long long, old < val ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMin, int, val < old ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMin, unsigned, val < old ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMin, long long, val < old ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicMin, unsigned long long, val < old ? val : old)
BLOCKSCOPE_SIM_ATOMIC(atomicAnd, int, old & val)
BLOCKSCOPE_SIM_ATOMIC(atomicAnd, unsigned, old & val)
BLOCKSCOPE_SIM_ATOMIC(atomicAnd, unsigned long long, old & val)
BLOCKSCOPE_SIM_ATOMIC(atomicOr, int, old | val)
BLOCKSCOPE_SIM_ATOMIC(atomicOr, unsigned, old | val)
BLOCKSCOPE_SIM_ATOMIC(atomicOr, unsigned long long, old | val)
BLOCKSCOPE_SIM_ATOMIC(atomicXor, int, old ^ val)
BLOCKSCOPE_SIM_ATOMIC(atomicXor, unsigned, old ^ val)
BLOCKSCOPE_SIM_ATOMIC(atomicXor, unsigned long long, old ^ val)
BLOCKSCOPE_SIM_ATOMIC(atomicInc, unsigned, old >= val ? 0u : old + 1)
BLOCKSCOPE_SIM_ATOMIC(atomicDec, unsigned, (old == 0 || old > val) ? val : old - 1)
#undef BLOCKSCOPE_SIM_ATOMIC
#define BLOCKSCOPE_SIM_CAS(T)                                                                     \
  inline T atomicCAS(T* address, T compare, T val) {                                             \
    return ::blockscope::sim::prelude::cas(address, compare, val);                              \
  }                                                                                               \
  inline T atomicCAS_block(T* address, T compare, T val) { return atomicCAS(address, compare, val); } \
  inline T atomicCAS_system(T* address, T compare, T val) { return atomicCAS(address, compare, val); }
BLOCKSCOPE_SIM_CAS(int)
BLOCKSCOPE_SIM_CAS(unsigned)
BLOCKSCOPE_SIM_CAS(unsigned long long)
BLOCKSCOPE_SIM_CAS(unsigned short)
#undef BLOCKSCOPE_SIM_CAS

// ---- Memory, fences and time -----------------------------------------------------------------------------
// A fence is a poll: other threads may run (a spin loop with a fence makes progress); memory the
// fibers share is always coherent.
inline void __threadfence() { ::blockscope::sim::fence(); }
inline void __threadfence_block() { ::blockscope::sim::fence(); }
inline void __threadfence_system() { ::blockscope::sim::fence(); }
template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) { return *p; }
template <typename T>
inline T __ldca(const T* p) { return *p; }
template <typename T>
inline T __ldcs(const T* p) { return *p; }
template <typename T>
inline T __ldlu(const T* p) { return *p; }
template <typename T>
inline T __ldcv(const T* p) { return *p; }
template <typename T>
inline void __stcg(T* p, T v) { *p = v; }
template <typename T>
inline void __stcs(T* p, T v) { *p = v; }
template <typename T>
inline void __stwb(T* p, T v) { *p = v; }
template <typename T>
inline void __stwt(T* p, T v) { *p = v; }
// Yields to the other threads, so a spin-wait makes progress.
inline void __nanosleep(unsigned) { ::blockscope::sim::yield_thread(); }
inline long long clock64() { return ::blockscope::sim::sm_cycles(); }
[[noreturn]] inline void __trap() { ::blockscope::sim::fault("__trap() called"); }
[[noreturn]] inline void __brkpt() { ::blockscope::sim::fault("__brkpt() called"); }
inline unsigned __cvta_generic_to_shared(const void* p) { return ::blockscope::sim::ptx::shared_address(p); }

// ---- The C++ forms of runtime functions nvcc's headers declare only for nvcc ------------------------------
template <class T>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* entry) {
  return ::cudaFuncGetAttributes(attributes, reinterpret_cast<const void*>(entry));
}
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attribute, value);
}
template <class T>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, T* entry, int block_size,
                                                                 size_t dynamic_smem) {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(entry), block_size,
                                                         dynamic_smem);
}
template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return ::cudaMemcpyToSymbol(static_cast<const void*>(&symbol), src, count, offset, kind);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  return ::cudaMemcpyFromSymbol(dst, static_cast<const void*>(&symbol), count, offset, kind);
}
template <class T>
inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                           cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) {
  return ::cudaMemcpyToSymbolAsync(static_cast<const void*>(&symbol), src, count, offset, kind, stream);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                             cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) {
  return ::cudaMemcpyFromSymbolAsync(dst, static_cast<const void*>(&symbol), count, offset, kind, stream);
}
template <class T>
inline cudaError_t cudaGetSymbolAddress(void** address, const T& symbol) {
  return ::cudaGetSymbolAddress(address, static_cast<const void*>(&symbol));
}
template <class T>
inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
  return ::cudaGetSymbolSize(size, static_cast<const void*>(&symbol));
}

// ---- Launches: what <<<>>> and cudaLaunchKernel become (sim/kernel_launch.h) -----------------------------
#include "sim/kernel_launch.h"
