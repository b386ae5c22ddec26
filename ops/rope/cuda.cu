// CUDA rotary position embedding (Hugging Face "rotate_half" convention): for each head
// vector, pairs (d, d + D/2) rotate by angle pos · theta^(-2d/D).
// The cos/sin values come from the table of ops/rope/rope_table.h, built on the host in double
// (HF's float32 inv_freq and angles, as the CPU backend) and uploaded once per (backend, theta,
// head_dim, position window); the kernel only loads it. Products are rounded before the sum
// (__fmul_rn, no FMA), as on the CPU: both backends give the same bits.
//
// Per-sequence positions (a decode step of a ragged batch): row s of sequence b is at
// positions[b] + s; the kernel reads positions[b] from device memory, and the table window is
// chosen on the host from the host copy to cover every sequence's rows.
//
// Graph capture: an upload is a synchronous copy, which a capture forbids. A table that is not
// on the device yet during a capture is a named error (run rope once before capturing, as the
// warm-up of `run.cuda_graph` does); a table is never freed while its backend lives, so a
// captured graph's pointer stays valid.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "ops/rope/backends.h"
#include "ops/rope/rope_table.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "ops/common/cuda/elementwise_map.cuh"
#include "ops/common/cuda/fast_divmod.h"
#include "ops/common/cuda/launch.cuh"
#include "ops/common/cuda/vector_io.cuh"

namespace blockscope::ops::cuda::kernels {

// Element strides of a [B, H, S, D] view.
struct Strides4 {
  int64_t b, h, s, d;
};

// 2-D grid: blockIdx.x·blockDim.y + threadIdx.y walks rows (b·H + h)·S + s (grid-stride),
// blockIdx.y·blockDim.x + threadIdx.x is the chunk of VEC ? Pack<T>::size : 1 consecutive
// pairs. 32-bit index math: row → (b, h, s) by two FastDivmods. table: [positions][cos | sin]
// [half] floats, row pos0 + s — or, with per-sequence `positions` (device memory, B entries),
// row positions[b] - base + s. VEC: x and y are 16-byte aligned with unit D stride and every
// other stride a whole number of packs, half a whole number of packs. x and y may be the same
// view (in place): each thread reads both halves of its pairs before writing them.
template <typename T, bool VEC>
__global__ void rope_kernel(const T* __restrict__ x, Strides4 xs, T* __restrict__ y, Strides4 ys,
                            const float* __restrict__ table, FastDivmod seq_div, FastDivmod heads_div, uint32_t rows,
                            uint32_t half, uint32_t chunks, uint32_t pos0, const int32_t* __restrict__ positions,
                            uint32_t base) {
  constexpr int V = VEC ? Pack<T>::size : 1;
  const uint32_t chunk = blockIdx.y * blockDim.x + threadIdx.x;
  if (chunk >= chunks) return;
  const uint32_t d = chunk * V;
  for (uint32_t row = blockIdx.x * blockDim.y + threadIdx.y; row < rows; row += gridDim.x * blockDim.y) {
    uint32_t bh, s, b, h;
    seq_div.divmod(row, bh, s);
    heads_div.divmod(bh, b, h);
    const T* in = x + (static_cast<int64_t>(b) * xs.b + static_cast<int64_t>(h) * xs.h + static_cast<int64_t>(s) * xs.s);
    T* out = y + (static_cast<int64_t>(b) * ys.b + static_cast<int64_t>(h) * ys.h + static_cast<int64_t>(s) * ys.s);
    const uint32_t first = positions != nullptr ? static_cast<uint32_t>(positions[b]) - base : pos0;
    const float* cs = table + (first + s) * (2 * half) + d;
    if constexpr (VEC) {
      const Pack<T> lo = load_pack(in + d), hi = load_pack(in + d + half);
      float c[V], sn[V];
#pragma unroll
      for (int k = 0; k < V; k += 4) {
        const float4 cv = *reinterpret_cast<const float4*>(cs + k);
        const float4 sv = *reinterpret_cast<const float4*>(cs + half + k);
        c[k] = cv.x, c[k + 1] = cv.y, c[k + 2] = cv.z, c[k + 3] = cv.w;
        sn[k] = sv.x, sn[k + 1] = sv.y, sn[k + 2] = sv.z, sn[k + 3] = sv.w;
      }
      Pack<T> out_lo, out_hi;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float first = to_float(lo.v[k]), second = to_float(hi.v[k]);
        out_lo.v[k] = from_float<T>(__fsub_rn(__fmul_rn(first, c[k]), __fmul_rn(second, sn[k])));
        out_hi.v[k] = from_float<T>(__fadd_rn(__fmul_rn(second, c[k]), __fmul_rn(first, sn[k])));
      }
      store_pack(out + d, out_lo);
      store_pack(out + d + half, out_hi);
    } else {
      const float c = cs[0], sn = cs[half];
      const float first = to_float(in[d * xs.d]), second = to_float(in[(d + half) * xs.d]);
      out[d * ys.d] = from_float<T>(__fsub_rn(__fmul_rn(first, c), __fmul_rn(second, sn)));
      out[(d + half) * ys.d] = from_float<T>(__fadd_rn(__fmul_rn(second, c), __fmul_rn(first, sn)));
    }
  }
}

}  // namespace blockscope::ops::cuda::kernels

namespace blockscope::ops::cuda {

namespace {

// Device tables, per (backend, theta, head_dim): positions [base, base + count). cudaMalloc'd
// (not the backend's pool, so they do not show in its memory statistics), freed once the
// backend is gone; never while it lives (a captured graph may hold the address).
struct RopeTable {
  std::weak_ptr<Backend> owner;
  const Backend* backend = nullptr;
  int device = 0;
  uint32_t theta_bits = 0;
  int64_t dim = 0, base = 0, count = 0;
  float* data = nullptr;
};

std::mutex& tables_mutex() {
  static std::mutex* m = new std::mutex;  // leaked on purpose: no teardown order at exit
  return *m;
}
std::vector<RopeTable>& tables() {
  static std::vector<RopeTable>* t = new std::vector<RopeTable>;
  return *t;
}

// Positions a table holds: from 0 up to a power of two (at least 4096) while positions stay
// under 2^16; past that a window from the offset rounded down to 4096.
void window_for(int64_t first, int64_t count, int64_t& base, int64_t& size) {
  const int64_t end = first + count;
  base = end <= (int64_t{1} << 16) ? 0 : first / 4096 * 4096;
  size = 4096;
  while (size < end - base) size *= 2;
}

// The table holding positions [first, first + count); `base` is its first position.
const float* device_table(Context& ctx, float theta, int64_t dim, int64_t first, int64_t count, int64_t& base) {
  CudaBackend& backend = cuda_backend(ctx);
  uint32_t theta_bits;
  std::memcpy(&theta_bits, &theta, sizeof theta_bits);
  std::lock_guard<std::mutex> lock(tables_mutex());
  std::vector<RopeTable>& all = tables();
  // Tables of backends that are gone.
  for (size_t i = 0; i < all.size();) {
    if (all[i].owner.expired()) {
      BS_CUDA_CHECK(cudaSetDevice(all[i].device));
      BS_CUDA_CHECK(cudaFree(all[i].data));
      all[i] = all.back();
      all.pop_back();
    } else {
      ++i;
    }
  }
  const RopeTable* best = nullptr;
  for (const RopeTable& t : all) {
    if (t.backend == &backend && t.theta_bits == theta_bits && t.dim == dim && t.base <= first &&
        first + count <= t.base + t.count && (best == nullptr || t.count > best->count))
      best = &t;
  }
  if (best != nullptr) {
    base = best->base;
    return best->data;
  }

  int64_t size;
  window_for(first, count, base, size);
  BS_CHECK(!backend.capturing(), "rope: the cos/sin table for theta ", theta, ", head_dim ", dim, ", positions [",
           first, ", ", first + count, ") is not on ", ctx.device().str(),
           " yet, and uploading it is not allowed during a CUDA graph capture; run rope once with these "
           "parameters before capturing");
  const int64_t half = dim / 2;
  std::vector<float> host(static_cast<size_t>(size * 2 * half));
  const std::vector<float> inv_freq = rope_inv_freq(theta, dim);
  for (int64_t p = 0; p < size; ++p) rope_table_row(inv_freq, base + p, host.data() + p * 2 * half);
  RopeTable t;
  t.owner = ctx.backend_ptr();
  t.backend = &backend;
  t.device = ctx.device().index;
  t.theta_bits = theta_bits;
  t.dim = dim;
  t.base = base;
  t.count = size;
  backend.make_current();
  void* data = nullptr;
  BS_CUDA_CHECK(cudaMalloc(&data, host.size() * sizeof(float)));
  t.data = static_cast<float*>(data);
  try {
    backend.copy_to_device(t.data, host.data(), host.size() * sizeof(float));  // stream-ordered, then synced
  } catch (...) {
    cudaFree(data);
    throw;
  }
  all.push_back(t);
  return all.back().data;
}

bool pack_aligned(const Tensor& t, int64_t pack) {
  return cuda::aligned16(t.data()) && t.stride(3) == 1 && t.stride(0) % pack == 0 && t.stride(1) % pack == 0 &&
         t.stride(2) % pack == 0;
}

}  // namespace

void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset, IndexView positions) {
  BS_CHECK(x.dim() == 4 && y.dim() == 4 && x.size(-1) % 2 == 0, "rope: x ", x.str(), " and y ", y.str(),
           " must be [B, H, S, D] with D even");
  const int64_t batch = x.size(0), heads = x.size(1), seq = x.size(2), dim = x.size(3), half = dim / 2;
  const int64_t rows = batch * heads * seq;
  if (rows == 0 || half == 0) return;
  // The positions the rows need: [first, last + seq), from the host copy of `positions` (a
  // bounded view's range: the table must hold whatever the device values are at replay).
  int64_t first = position_offset, last = position_offset;
  if (positions.defined()) {
    BS_CHECK(positions.count == batch && positions.device != nullptr, "rope: ", positions.count,
             " positions for B = ", batch);
    first = positions.lowest(0);
    last = positions[0];
    for (int64_t b = 1; b < batch; ++b) {
      first = std::min<int64_t>(first, positions.lowest(b));
      last = std::max<int64_t>(last, positions[b]);
    }
  }
  int64_t base = 0;
  const float* table = device_table(ctx, theta, dim, first, last - first + seq, base);
  const int64_t pos0 = position_offset - base;  // used without per-sequence positions only
  BS_CHECK(rows < (int64_t{1} << 31) && heads < (int64_t{1} << 31) && (last - base + seq) * dim < (int64_t{1} << 31),
           "rope: x ", x.str(), " is too large for the kernel's 32-bit index math");
  const kernels::Strides4 xs{x.stride(0), x.stride(1), x.stride(2), x.stride(3)};
  const kernels::Strides4 ys{y.stride(0), y.stride(1), y.stride(2), y.stride(3)};
  const int sms = cuda_backend(ctx).properties().multiProcessorCount;
  cuda::dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t pack = 16 / static_cast<int64_t>(sizeof(T));
    const bool vec = half % pack == 0 && pack_aligned(x, pack) && pack_aligned(y, pack);
    const int64_t chunks = vec ? half / pack : half;
    const cuda::RowChunkLaunch launch_shape = cuda::row_chunk_launch(rows, chunks, sms, "rope");
    const dim3 grid = launch_shape.grid, block = launch_shape.block;
    const auto args = std::make_tuple(x.data_as<const T>(), xs, y.data_as<T>(), ys, table,
                                      kernels::FastDivmod(static_cast<uint32_t>(seq)),
                                      kernels::FastDivmod(static_cast<uint32_t>(heads)),
                                      static_cast<uint32_t>(rows), static_cast<uint32_t>(half),
                                      static_cast<uint32_t>(chunks),
                                      static_cast<uint32_t>(positions.defined() ? 0 : pos0),
                                      positions.defined() ? positions.device : nullptr, static_cast<uint32_t>(base));
    std::apply(
        [&](auto... a) {
          if (vec) {
            cuda::launch(ctx, kernel_names::kRope, kernels::rope_kernel<T, true>, grid, block, 0, a...);
          } else {
            cuda::launch(ctx, kernel_names::kRope, kernels::rope_kernel<T, false>, grid, block, 0, a...);
          }
        },
        args);
  });
}

}  // namespace blockscope::ops::cuda
