// Helpers for kernels that give one block to one row (softmax, LayerNorm, RMSNorm, decode's
// score rows): visit a contiguous row of n elements in 16-byte packs when the row allows it,
// element by element otherwise. Each thread visits the same elements in every pass
// over the row, so a pass that writes y[j] after reading x[j] is safe when y aliases x.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/common/rows.h"
#include "ops/common/cuda/vector_io.cuh"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace blockscope::ops::cuda::kernels {

// Calls f(j, x[j]) (x[j] as float) for every j < n this thread owns. PARTIAL_PACK: n need not be
// a whole number of packs when vectorized (decode's score rows, one length per sequence): the
// last partial pack goes element by element. Off by default: the extra loop costs the
// register-row kernels a spill.
template <bool PARTIAL_PACK = false, typename T, typename F>
__device__ __forceinline__ void row_read(const T* row, int64_t n, bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  int64_t tail = 0;  // elements before it go in packs
  if (vectorized) {
    tail = PARTIAL_PACK ? n - n % P : n;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * P; j < tail; j += static_cast<int64_t>(blockDim.x) * P) {
      const Pack<T> pack = load_pack(row + j);
#pragma unroll
      for (int e = 0; e < P; ++e) f(j + e, to_float(pack.v[e]));
    }
    if constexpr (!PARTIAL_PACK) return;
  }
  for (int64_t j = tail + threadIdx.x; j < n; j += blockDim.x) f(j, to_float(row[j]));
}

// out[j] = f(j, in[j]) for every j < n this thread owns; PARTIAL_PACK as for row_read.
template <bool PARTIAL_PACK = false, typename T, typename F>
__device__ __forceinline__ void row_transform(const T* in, T* out, int64_t n, bool vectorized, F f) {
  constexpr int P = Pack<T>::size;
  int64_t tail = 0;  // elements before it go in packs
  if (vectorized) {
    tail = PARTIAL_PACK ? n - n % P : n;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * P; j < tail; j += static_cast<int64_t>(blockDim.x) * P) {
      const Pack<T> pack = load_pack(in + j);
      Pack<T> result;
#pragma unroll
      for (int e = 0; e < P; ++e) result.v[e] = from_float<T>(f(j + e, to_float(pack.v[e])));
      store_pack(out + j, result);
    }
    if constexpr (!PARTIAL_PACK) return;
  }
  for (int64_t j = tail + threadIdx.x; j < n; j += blockDim.x) out[j] = from_float<T>(f(j, to_float(in[j])));
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

// Threads for a one-block-per-row kernel: about one pack per thread, a whole number of warps,
// 32 to 1024.
inline unsigned row_block_threads(int64_t n, int64_t pack) {
  const int64_t wanted = (n + pack - 1) / pack;
  unsigned threads = 32;
  while (threads < 1024 && threads < wanted) threads *= 2;
  return threads;
}

// Blocks for a grid-stride loop over rows: all rows at once up to a few waves of the GPU.
inline unsigned row_grid(int64_t rows, unsigned threads, int sm_count) {
  const int64_t per_sm = 2048 / threads;  // resident blocks per SM when threads limit occupancy
  const int64_t cap = static_cast<int64_t>(sm_count) * per_sm * 4;
  const int64_t blocks = rows < cap ? rows : cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Launch shape of a one-block-per-row kernel over x, y: [rows, n] (y contiguous; x contiguous,
// or, with strided_x_rows, rows of n contiguous elements x_ld apart).
struct RowLaunch {
  int64_t rows = 0, n = 0;
  int64_t x_ld = 0;         // elements from one row of x to the next (n when x is contiguous)
  bool vectorized = false;  // x and y 16-byte aligned, n and x_ld whole numbers of packs
  unsigned blocks = 1, threads = 32;
};

// strided_x_rows: the norms accept x as a row-strided view (ops/norm/norm.h: e.g. a column
// slice of a wider tensor), as their CPU twins do; softmax requires x contiguous. Before this
// flag the norms refused strided x on CUDA with a runtime error that the CPU never raises.
inline RowLaunch plan_row_launch(const char* op, const Tensor& x, const Tensor& y, int sm_count,
                                 bool strided_x_rows = false) {
  BS_CHECK(y.is_contiguous() && (strided_x_rows || x.is_contiguous()), op, ": x ", x.str(), " and y ", y.str(),
           " must be contiguous");
  RowLaunch plan;
  plan.n = x.size(-1);
  plan.rows = plan.n == 0 ? 0 : x.numel() / plan.n;
  plan.x_ld = plan.n;
  if (!x.is_contiguous()) plan.x_ld = ops::leading_dimension(op, x);
  const int64_t pack = pack_elems(x.dtype());
  // Every row start of x must stay 16-byte aligned, so the row stride counts too: a column
  // slice of width n out of a row of odd length must take the element-by-element path.
  plan.vectorized = aligned16(x.data()) && aligned16(y.data()) && plan.n % pack == 0 && plan.x_ld % pack == 0;
  plan.threads = row_block_threads(plan.n, plan.vectorized ? pack : 1);
  plan.blocks = row_grid(plan.rows, plan.threads, sm_count);
  return plan;
}

}  // namespace blockscope::ops::cuda

// ---- Rows held in registers -------------------------------------------------------------------
// A "group" (one warp, or the whole block) owns one row; each of its `group` threads keeps
// UNITS units of the row in registers, a unit being one 16-byte pack (VEC) or one element.
// Unit u of thread `rank` is unit index u·group + rank of the row (consecutive threads read
// consecutive 16-byte packs: coalesced). The row is read from global memory once; every later
// pass runs on the registers, so y may alias x.
namespace blockscope::ops::cuda::kernels {

template <typename T, bool VEC, int UNITS>
struct RowRegs {
  static constexpr int kElems = VEC ? Pack<T>::size : 1;  // elements per unit
  static constexpr int kCount = UNITS * kElems;           // floats this thread holds
  float v[kCount];

  // Element index of slot (u, e) for this thread.
  __device__ __forceinline__ static int index(int u, int e, int rank, int group) {
    return (u * group + rank) * kElems + e;
  }

  // Loads elements j < limit (limit <= n); every other slot gets `fill`. Units that start at or
  // past `limit` are not read at all (a causal row reads only its visible part).
  __device__ __forceinline__ void load(const T* row, int n, int limit, int rank, int group, float fill) {
#pragma unroll
    for (int u = 0; u < UNITS; ++u) {
      const int j0 = index(u, 0, rank, group);
      if constexpr (VEC) {
        if (j0 < limit) {
          const Pack<T> pack = load_pack(row + j0);
#pragma unroll
          for (int e = 0; e < kElems; ++e) v[u * kElems + e] = j0 + e < limit ? to_float(pack.v[e]) : fill;
        } else {
#pragma unroll
          for (int e = 0; e < kElems; ++e) v[u * kElems + e] = fill;
        }
      } else {
        v[u] = j0 < limit ? to_float(row[j0]) : fill;
      }
    }
    (void)n;
  }

  // out[j] = f(j, v) for every j < n of this thread.
  template <typename F>
  __device__ __forceinline__ void store(T* row, int n, int rank, int group, F f) const {
#pragma unroll
    for (int u = 0; u < UNITS; ++u) {
      const int j0 = index(u, 0, rank, group);
      if (j0 < n) {
        if constexpr (VEC) {
          Pack<T> pack;
#pragma unroll
          for (int e = 0; e < kElems; ++e) pack.v[e] = from_float<T>(f(j0 + e, v[u * kElems + e]));
          store_pack(row + j0, pack);
        } else {
          row[j0] = from_float<T>(f(j0, v[u]));
        }
      }
    }
  }
};

// Floats per thread the register-row kernels are built for: 32 in warp-per-row kernels (a row
// of up to 1024 elements per warp; 256-thread blocks, so up to 255 registers), 16 in
// block-per-row ones (up to 16384 elements with 1024 threads, 8192 element by element) within
// the 64 registers a 1024-thread block allows.
template <typename T, bool VEC, bool WARP>
struct RowShape {
  static constexpr int kFloats = WARP ? 32 : 16;
  // Element by element, each unit also keeps its own address live: half as many in a block.
  static constexpr int kUnits = VEC ? kFloats / Pack<T>::size : (WARP ? 32 : 8);
};

// Group reductions: the warp's lanes (WARP) or the block's threads; every thread gets the result.
template <bool WARP>
__device__ __forceinline__ float group_sum(float v, float* scratch) {
  if constexpr (WARP) {
    (void)scratch;
    return warp_sum(v);
  } else {
    return block_sum(v, scratch);
  }
}
template <bool WARP>
__device__ __forceinline__ float group_max(float v, float* scratch) {
  if constexpr (WARP) {
    (void)scratch;
    return warp_max(v);
  } else {
    return block_max(v, scratch);
  }
}

// Warp-per-row kernels: 8 warps (rows) per block of 256 threads.
constexpr int kRowsPerWarpBlock = 8;

// Row loop of a register-row kernel: calls body(row, rank, group) for every row this group owns.
template <bool WARP, typename F>
__device__ __forceinline__ void for_each_group_row(int64_t rows, F body) {
  if constexpr (WARP) {
    const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerWarpBlock + warp; r < rows;
         r += static_cast<int64_t>(gridDim.x) * kRowsPerWarpBlock)
      body(r, lane, 32);
  } else {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
      body(r, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

// How a register-row kernel covers rows of n elements (units = n / pack when vectorised).
enum class RowMode { warp, block, stream };
struct RowRegsLaunch {
  RowMode mode = RowMode::stream;
  unsigned blocks = 1, threads = 32;
};

// warp: one warp per row when a lane's `warp_units` cover it; block: one block per row with
// threads = a whole number of warps so that `block_units` per thread cover it; stream: rows too
// long for registers (the caller's streaming kernel, with `plan`'s launch shape).
inline RowRegsLaunch plan_row_regs(const RowLaunch& plan, int64_t pack, int warp_units, int block_units,
                                   int sm_count) {
  const int64_t units = plan.vectorized ? plan.n / pack : plan.n;
  RowRegsLaunch out;
  if (units <= 32 * warp_units) {
    out.mode = RowMode::warp;
    out.threads = 32 * kernels::kRowsPerWarpBlock;
    const int64_t needed = (plan.rows + kernels::kRowsPerWarpBlock - 1) / kernels::kRowsPerWarpBlock;
    const int64_t cap = static_cast<int64_t>(sm_count) * 8 * 4;  // 8 blocks of 256 per SM, 4 waves
    out.blocks = static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, cap)));
  } else if (units <= 1024 * block_units) {
    out.mode = RowMode::block;
    const int64_t per_thread = (units + block_units - 1) / block_units;
    out.threads = static_cast<unsigned>(std::min<int64_t>(1024, (per_thread + 31) / 32 * 32));
    out.blocks = row_grid(plan.rows, out.threads, sm_count);
  } else {
    out.mode = RowMode::stream;
    out.threads = plan.threads;
    out.blocks = plan.blocks;
  }
  return out;
}

// Calls run(V, MODE, launch) for the register-row kernel instance that fits plan's rows:
// V = std::bool_constant (vectorised or not), MODE = std::integral_constant<int, RowMode>, so
// the caller names its kernel template as kernel<T, decltype(V)::value, decltype(MODE)::value>.
template <typename T, typename Run>
void pick_row_kernel(const RowLaunch& plan, int sm_count, Run run) {
  const int64_t pack = 16 / static_cast<int64_t>(sizeof(T));
  auto go = [&](auto vec) {
    constexpr bool V = decltype(vec)::value;
    const RowRegsLaunch rl = plan_row_regs(plan, pack, kernels::RowShape<T, V, true>::kUnits,
                                           kernels::RowShape<T, V, false>::kUnits, sm_count);
    switch (rl.mode) {
      case RowMode::warp: run(vec, std::integral_constant<int, 0>{}, rl); return;
      case RowMode::block: run(vec, std::integral_constant<int, 1>{}, rl); return;
      case RowMode::stream: run(vec, std::integral_constant<int, 2>{}, rl); return;
    }
  };
  if (plan.vectorized) {
    go(std::true_type{});
  } else {
    go(std::false_type{});
  }
}

}  // namespace blockscope::ops::cuda
