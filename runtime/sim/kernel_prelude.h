// Force-included (-include) into every .cu compiled by the host compiler for the simulated GPU,
// and included first by the sim's own tests: what nvcc would provide to device code.
//
// Execution spaces are empty, except __shared__ = `static`: grids run one at a time (a global
// mutex), blocks one after another, and the fibers of a block share the function's statics —
// so a static is exactly one block's shared memory. Unlike a GPU, static shared memory is not
// poisoned between blocks (it keeps the previous block's values; zero before the first).
//
// Not supported (a compile error, or different behaviour, where noted):
//   extern __shared__ arrays: use sim::dynamic_shared_memory() (ops/common/cuda/vector_io.cuh does)
//   kernel<<<...>>>: use sim::launch_kernel (ops/common/cuda/launch.cuh does)
//   __noinline__: left undefined (a macro would break libstdc++'s __attribute__((__noinline__)))
//   assert() in a kernel aborts the process (on a GPU: cudaErrorAssert)
//   clock() is the C library's (process CPU time); clock64() is steady-clock nanoseconds
//   Math intrinsics (__expf, __sinf, rsqrtf, …) use the C library: results may differ from the
//   GPU's within the ulp bounds the CUDA programming guide documents for each.
//   __activemask() returns the lanes of the warp that reach an __activemask while no other lane
//   of the warp can run on (device.h: active_lanes): lanes at different __activemask calls of
//   divergent code count together, where a GPU would report only the lanes converged there.
#pragma once

// host_defines.h leaves these alone when they are already defined (`#if defined(__CUDACC__) ||
// !defined(__shared__)`), so ours win.
#define __shared__ static
#define __constant__
#define __managed__
#define __grid_constant__

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/sim/device.h"
#include "runtime/sim/sim.h"

#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __cluster_dims__
#define __cluster_dims__(...)
#undef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))

#ifndef BLOCKSCOPE_CUDA_SIM
#define BLOCKSCOPE_CUDA_SIM 1
#endif

// The C++ overloads cuda_runtime.h declares only for nvcc (kernel pointers of any type).
template <class T>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* entry) {
  return ::cudaFuncGetAttributes(attributes, reinterpret_cast<const void*>(entry));
}
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attribute, value);
}

// ---- Built-in variables -------------------------------------------------------------------------
#define threadIdx (::blockscope::sim::current_thread().thread_idx)
#define blockIdx (::blockscope::sim::current_thread().block_idx)
#define blockDim (::blockscope::sim::current_thread().block_dim)
#define gridDim (::blockscope::sim::current_thread().grid_dim)
// A variable, not a macro: cudaDeviceProp has a member of that name.
inline constexpr int warpSize = 32;

// ---- Barriers -----------------------------------------------------------------------------------
// The source site identifies the barrier: threads of one block at different __syncthreads are a
// Fault (undefined behaviour on a GPU: a hang or a corruption).
#define __syncthreads() ((void)::blockscope::sim::sync_block_at("__syncthreads", __FILE__, __LINE__, 0))
#define __syncthreads_count(predicate) \
  (::blockscope::sim::sync_block_at("__syncthreads_count", __FILE__, __LINE__, (predicate)))
#define __syncthreads_and(predicate)                                                                   \
  (::blockscope::sim::sync_block_at("__syncthreads_and", __FILE__, __LINE__, !(predicate)) == 0 ? 1 : 0)
#define __syncthreads_or(predicate) \
  (::blockscope::sim::sync_block_at("__syncthreads_or", __FILE__, __LINE__, (predicate)) != 0 ? 1 : 0)

// ---- Warp collectives ---------------------------------------------------------------------------
namespace blockscope::sim::prelude {

template <typename T>
inline T shuffle(const char* what, ShuffleMode mode, unsigned mask, T var, int b, int width) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_destructible<T>::value,
                "warp shuffles move trivially copyable values of at most 16 bytes");
  T result = var;
  warp_shuffle(what, mode, mask, &var, &result, sizeof(T), b, width);
  return result;
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
  return ::blockscope::sim::warp_vote("__all_sync", mask, predicate) == mask;
}
inline int __uni_sync(unsigned mask, int predicate) {
  const unsigned ballot = ::blockscope::sim::warp_vote("__uni_sync", mask, predicate);
  return ballot == 0 || ballot == mask;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::blockscope::sim::warp_collective("__syncwarp", mask, nullptr, 0, nullptr, 0,
                                     [](const ::blockscope::sim::WarpCollectiveArgs&) {});
}
inline unsigned __activemask() { return ::blockscope::sim::active_lanes(); }

// ---- Bit manipulation ---------------------------------------------------------------------------
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

// ---- Reinterpretation ---------------------------------------------------------------------------
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

// ---- Math intrinsics (C library; see the note at the top on accuracy) ---------------------------
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

// ---- Atomics ------------------------------------------------------------------------------------
// Fibers are cooperative (a thread is never interrupted between a load and a store), so a plain
// read-modify-write is atomic with respect to every other simulated GPU thread.
namespace blockscope::sim::prelude {
template <typename T, typename F>
inline T rmw(T* address, F f) {
  const T old = *address;
  *address = f(old);
  return old;
}
}  // namespace blockscope::sim::prelude
#define BLOCKSCOPE_SIM_ATOMIC(name, T, expr)                                        \
  inline T name(T* address, T val) {                                             \
    return ::blockscope::sim::prelude::rmw(address, [val]([[maybe_unused]] T old) { return (expr); }); \
  }
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, int, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, unsigned, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, unsigned long long, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, float, old + val)
BLOCKSCOPE_SIM_ATOMIC(atomicAdd, double, old + val)
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
inline int atomicCAS(int* address, int compare, int val) {
  const int old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned val) {
  const unsigned old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare, unsigned long long val) {
  const unsigned long long old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val) {
  const unsigned short old = *address;
  if (old == compare) *address = val;
  return old;
}

// ---- Memory and timing --------------------------------------------------------------------------
// Fences only keep the compiler from moving memory accesses across them: a fiber switch is a
// function call, so other simulated threads always see earlier stores.
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
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
// Yields to the other threads of the block, so a spin-wait on shared memory makes progress.
inline void __nanosleep(unsigned) { ::blockscope::sim::yield_thread(); }
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
[[noreturn]] inline void __trap() { ::blockscope::sim::fault("__trap() called"); }
[[noreturn]] inline void __brkpt() { ::blockscope::sim::fault("__brkpt() called"); }
