// The simulated GPU's side of the wmma API (nvcuda::wmma, sim/cuda_include/mma.h): the warp
// collectives behind load_matrix_sync, store_matrix_sync and mma_sync (sim/wmma.cpp).
//
// mma.h is compiled into the kernel (instrumented) and moves the elements itself, each lane its
// own with ordinary loads and stores, so memcheck, initcheck, race and the streams check see them
// as any other access; what it cannot see — the other lanes — is done here, outside the kernel.
//
// Fragments: the CUDA Programming Guide leaves the element-to-lane mapping unspecified. Here it
// is one rule for every fragment: the operand's tile (A m x k, B k x n, C/D m x n) numbered row by
// row, e = row * cols + col, element e is x[e / 32] of lane e % 32, whatever the layout in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace blockscope::sim::wmma {

constexpr int kWarpLanes = 32;

// The element formats of fragments, as fragment::x stores them.
enum class Format : uint8_t { f16, bf16, tf32, f32, f64, s8, u8, s32 };
enum class Use : uint8_t { matrix_a, matrix_b, accumulator };

// One fragment type: its role and the warp tile's shape m x n x k.
struct Tile {
  Use use;
  int m, n, k;
  Format format;
};
inline int tile_rows(const Tile& t) { return t.use == Use::matrix_b ? t.k : t.m; }
inline int tile_cols(const Tile& t) { return t.use == Use::matrix_a ? t.k : t.n; }

// A load_matrix_sync or store_matrix_sync by the calling lane, before it touches memory: a warp
// collective of all 32 lanes (.aligned: an exited lane is a Fault) at which every lane must pass
// the same pointer, ldm and layout (a Fault naming two lanes that differ). Then, as the guide
// asks, the pointer must be 256-bit (32-byte) aligned — cudaErrorMisalignedAddress otherwise —
// and ldm a multiple of 16 bytes (8 elements of 16 bits, 4 of 32, 16 of 8, 2 of 64). Returns the
// calling lane, whose elements the caller then reads or writes itself.
unsigned matrix_access(bool store, const Tile& tile, const void* pointer, unsigned ldm, bool col_major);

// mma_sync: D = A·B + C over the warp, a collective of all 32 lanes. `lane` points at the calling
// lane's fragments' x[] (stored in the tiles' formats); d_out receives its D elements after every
// lane's inputs were read (d may alias c). `satf` (int accumulators): clamp to int32 instead of
// wrapping. Numerics in sim/wmma.cpp.
struct MmaOperands {
  const void* a;
  const void* b;
  const void* c;
};
void mma(const Tile& a, const Tile& b, const Tile& c, const Tile& d, bool satf, const MmaOperands& lane,
         void* d_out);

// cvt.rna.tf32.f32 (__float_to_tf32): round to the nearest value with 10 mantissa bits, ties away
// from zero; the result is a float whose low 13 bits are zero. NaN and infinities stay as they are.
inline float round_to_tf32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;  // inf, NaN
  bits = (bits + 0x1000u) & ~0x1fffu;                       // on the magnitude: ties away from zero
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

}  // namespace blockscope::sim::wmma
