// Compile check of the real-GPU path of ops/common/cuda/tensor_core.cuh (not built by CMake:
// sim/test/CMakeLists.txt globs *_test.cpp only). Run from the repository root, no GPU needed:
//
//   for arch in 80 90; do
//     nvcc -std=c++17 -arch=sm_$arch -I. -c sim/test/tensor_core_compile_check.cu -o /tmp/tc_sm$arch.o
//     cuobjdump -sass /tmp/tc_sm$arch.o | grep -oE 'HMMA[.A-Z0-9]*|LDSM[.A-Z0-9]*|LDGSTS[.A-Z0-9]*|LDGDEPBAR|DEPBAR[.A-Z0-9]*' | sort | uniq -c
//   done
//
// Expected SASS: HMMA.16816.F32.BF16 and HMMA.16816.F32 (mma), LDSM.16.M88.{1,2,4} and
// LDSM.16.MT88.{1,2,4} (ldmatrix, .trans), LDGSTS.E.BYPASS.128 (+ .ZFILL) (cp.async.cg 16 bytes),
// LDGDEPBAR (commit_group) and DEPBAR.LE SB0, N (wait_group N).
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/common/cuda/tensor_core.cuh"

namespace tc = blockscope::ops::cuda::tensor_core;

// One warp: a 16x16 (row-major, bf16 or f16) times 16x16 (row-major K x N, so B is loaded with
// ldmatrix .trans) tile product through cp.async → ldmatrix → two mma.m16n8k16 → global store.
template <bool kBf16>
__global__ void tile_16x16x16(const uint16_t* a, const uint16_t* b, float* d, int valid_rows) {
  __shared__ alignas(16) uint16_t sa[16 * 16];
  __shared__ alignas(16) uint16_t sb[16 * 16];
  const int lane = threadIdx.x;
  // 16 rows x 32 bytes per matrix = 32 chunks of 16 bytes: one chunk of A and one of B per lane.
  const int row = lane / 2, half = lane % 2;
  tc::cp_async_16(&sa[row * 16 + half * 8], &a[row * 16 + half * 8], row < valid_rows);
  tc::cp_async_16_zfill(&sb[row * 16 + half * 8], &b[row * 16 + half * 8], row < valid_rows ? 16 : 4);
  tc::cp_async_commit();
  tc::cp_async_wait<0>();
  __syncwarp();

  uint32_t af[4], bf[4];
  // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
  tc::ldmatrix_x4(af, &sa[(lane % 16) * 16 + (lane / 16) * 8]);
  // B (K x N row-major): lanes 0-15 point at k rows 0-15 for n 0-7, lanes 16-31 for n 8-15.
  tc::ldmatrix_x4_trans(bf, &sb[(lane % 16) * 16 + (lane / 16) * 8]);
  float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
  const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
  if constexpr (kBf16) {
    tc::mma_m16n8k16_bf16(acc0, af, b0, acc0);
    tc::mma_m16n8k16_bf16(acc1, af, b1, acc1);
  } else {
    tc::mma_m16n8k16_f16(acc0, af, b0, acc0);
    tc::mma_m16n8k16_f16(acc1, af, b1, acc1);
  }
  const int g = lane >> 2, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), c = t * 2 + (i & 1);
    d[r * 16 + c] = acc0[i];
    d[r * 16 + 8 + c] = acc1[i];
  }
}

// The remaining variants: x1/x2 (plain and .trans), wait_group N > 0, wait_all, packing.
__global__ void other_variants(uint32_t* out, const uint16_t* g) {
  __shared__ alignas(16) uint16_t s[4][64];
  const int lane = threadIdx.x;
  tc::cp_async_16(&s[lane / 8][(lane % 8) * 8], &g[lane * 8]);
  tc::cp_async_commit();
  tc::cp_async_16(&s[(lane / 8 + 1) % 4][(lane % 8) * 8], &g[256 + lane * 8]);
  tc::cp_async_commit();
  tc::cp_async_wait<1>();
  tc::cp_async_wait_all();
  __syncwarp();
  uint32_t r1[1], r2[2], t1[1], t2[2];
  tc::ldmatrix_x1(r1, &s[0][(lane % 8) * 8]);
  tc::ldmatrix_x2(r2, &s[lane / 8 % 2][(lane % 8) * 8]);
  tc::ldmatrix_x1_trans(t1, &s[0][(lane % 8) * 8]);
  tc::ldmatrix_x2_trans(t2, &s[lane / 8 % 2][(lane % 8) * 8]);
  uint32_t t4[4];
  tc::ldmatrix_x4_trans(t4, &s[lane / 8][(lane % 8) * 8]);
  out[lane] = r1[0] ^ r2[0] ^ r2[1] ^ t1[0] ^ t2[0] ^ t2[1] ^ t4[3] ^ tc::pack_bf16x2(1.0f, 2.0f) ^
              tc::pack_f16x2(3.0f, 4.0f) ^ tc::shared_address(&s[1][0]);
}

template __global__ void tile_16x16x16<true>(const uint16_t*, const uint16_t*, float*, int);
template __global__ void tile_16x16x16<false>(const uint16_t*, const uint16_t*, float*, int);
