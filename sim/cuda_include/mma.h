// <mma.h> on the simulated GPU: the warp matrix functions (nvcuda::wmma) of the CUDA Programming
// Guide, "Warp Matrix Functions", for code that nvcc-sim compiles. It shadows the toolkit's
// <mma.h> (nvcc-sim puts sim/cuda_include before the toolkit's directory), whose crt/mma.hpp is
// made of nvcc's __hmma_*/__imma_* builtins.
//
//   fragment<Use, m, n, k, T, Layout>   matrix_a (m x k), matrix_b (k x n), accumulator (m x n):
//     __half, __nv_bfloat16     m16n16k16, m32n8k16, m8n32k16; accumulators float (or __half
//                               for __half inputs)
//     signed/unsigned char      the same three shapes; accumulators int
//     precision::tf32           m16n16k8 (x[] holds floats); accumulators float
//     double                    m8n8k4; accumulators double
//   num_elements and x[]: lane l holds the tile's elements l, l + 32, l + 64, … in row-major
//   numbering (sim/wmma.h), the same for every fragment of one type, so elementwise loops work.
//   fill_fragment, load_matrix_sync (a layout_t for accumulators), store_matrix_sync, mma_sync
//   (d may be c; satf for int accumulators), __float_to_tf32.
//
// As on a GPU: loads, stores and mma_sync are collectives of the whole warp (.aligned: a lane
// that exited, or a partial warp, is a fault); every lane must pass the same pointer, ldm and
// layout (a fault naming two lanes that do not); the pointer must be 32-byte aligned and ldm a
// multiple of 16 bytes (faults, sim/wmma.cpp). Each lane reads and writes its own elements here,
// with ordinary accesses of the kernel, so memcheck, initcheck, race and streams see them. Like
// a shuffle, a wmma call is no __syncwarp: a lane reading what another lane stored needs one.
// Not here: the experimental sub-byte types (nvcuda::wmma::experimental: u4, s4, b1).
#pragma once

// The toolkit's own guards: its crt/mma.h and crt/mma.hpp, included directly, add nothing.
#define __CUDA_MMA_H__
#define __CUDA_MMA_HPP__

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "sim/wmma.h"

namespace nvcuda {
namespace wmma {

// ---- Tags, layouts, traits -----------------------------------------------------------------------
struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}

enum layout_t { mem_row_major, mem_col_major };

template <typename T>
struct helper_traits {
  typedef T element_type;
  typedef T storage_element_type;
  typedef T fill_argument_type;
};
template <>
struct helper_traits<precision::tf32> {
  typedef precision::tf32 element_type;
  typedef float storage_element_type;
  typedef float fill_argument_type;
};

inline float __float_to_tf32(float in) { return ::blockscope::sim::wmma::round_to_tf32(in); }

namespace sim_detail {
namespace core = ::blockscope::sim::wmma;

template <class T>
constexpr core::Format format_of() {
  if constexpr (std::is_same<T, __half>::value) return core::Format::f16;
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return core::Format::bf16;
  else if constexpr (std::is_same<T, precision::tf32>::value) return core::Format::tf32;
  else if constexpr (std::is_same<T, float>::value) return core::Format::f32;
  else if constexpr (std::is_same<T, double>::value) return core::Format::f64;
  else if constexpr (std::is_same<T, signed char>::value) return core::Format::s8;
  else if constexpr (std::is_same<T, unsigned char>::value) return core::Format::u8;
  else {
    static_assert(std::is_same<T, int>::value, "nvcuda::wmma: no such element type");
    return core::Format::s32;
  }
}

template <class Use>
constexpr core::Use use_of() {
  return std::is_same<Use, matrix_a>::value   ? core::Use::matrix_a
         : std::is_same<Use, matrix_b>::value ? core::Use::matrix_b
                                              : core::Use::accumulator;
}

template <class T, class... Ts>
constexpr bool one_of() {
  return (std::is_same<T, Ts>::value || ...);
}

// The combinations the Programming Guide's table "Element Types and Matrix Sizes" lists.
template <class Use, int m, int n, int k, class T, class Layout>
constexpr bool supported() {
  constexpr bool operand = one_of<Use, matrix_a, matrix_b>();
  if (!operand && !std::is_same<Use, accumulator>::value) return false;
  if (operand ? !one_of<Layout, row_major, col_major>() : !std::is_void<Layout>::value) return false;
  const bool shape_16 = (m == 16 && n == 16 && k == 16) || (m == 32 && n == 8 && k == 16) || (m == 8 && n == 32 && k == 16);
  if (shape_16) {
    return operand ? one_of<T, __half, __nv_bfloat16, signed char, unsigned char>() : one_of<T, __half, float, int>();
  }
  if (m == 16 && n == 16 && k == 8) return operand ? std::is_same<T, precision::tf32>::value : std::is_same<T, float>::value;
  if (m == 8 && n == 8 && k == 4) return std::is_same<T, double>::value;
  return false;
}

// mma_sync's element types: inputs TA, accumulators TC in and TD out.
template <class TA, class TC, class TD>
constexpr bool mma_supported() {
  if (std::is_same<TA, __half>::value) return one_of<TC, __half, float>() && one_of<TD, __half, float>();
  if (one_of<TA, __nv_bfloat16, precision::tf32>()) return std::is_same<TC, float>::value && std::is_same<TD, float>::value;
  if (one_of<TA, signed char, unsigned char>()) return std::is_same<TC, int>::value && std::is_same<TD, int>::value;
  if (std::is_same<TA, double>::value) return std::is_same<TC, double>::value && std::is_same<TD, double>::value;
  return false;
}
}  // namespace sim_detail

// ---- Fragments -------------------------------------------------------------------------------------
template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
  static_assert(sim_detail::supported<Use, m, n, k, T, Layout>(),
                "nvcuda::wmma::fragment: no such combination of use, shape (m, n, k), element type and layout "
                "in CUDA (Programming Guide, Warp Matrix Functions; matrix_a/matrix_b take row_major or "
                "col_major, accumulators none; the sub-byte experimental types are not simulated)");
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? k : m;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? k : n;

 public:
  enum { num_elements = rows * cols / ::blockscope::sim::wmma::kWarpLanes };
  enum { num_storage_elements = num_elements };
  typedef T element_type;
  typedef typename helper_traits<T>::storage_element_type storage_element_type;
  storage_element_type x[num_storage_elements];

  static constexpr ::blockscope::sim::wmma::Tile sim_tile() {
    return {sim_detail::use_of<Use>(), m, n, k, sim_detail::format_of<T>()};
  }
};

namespace sim_detail {
// Lane `lane`'s elements of the tile at p (element e: row e / cols, column e % cols).
template <class Frag, class S>
inline void load_elements(Frag& f, const S* p, unsigned ldm, bool col_major) {
  constexpr core::Tile tile = Frag::sim_tile();
  const int cols = core::tile_cols(tile);
  const unsigned lane = core::matrix_access(false, tile, p, ldm, col_major);
  for (int i = 0; i < Frag::num_elements; ++i) {
    const int e = static_cast<int>(lane) + core::kWarpLanes * i;
    const size_t row = static_cast<size_t>(e / cols), col = static_cast<size_t>(e % cols);
    f.x[i] = p[col_major ? col * ldm + row : row * ldm + col];
  }
}
template <class Frag, class S>
inline void store_elements(S* p, const Frag& f, unsigned ldm, bool col_major) {
  constexpr core::Tile tile = Frag::sim_tile();
  const int cols = core::tile_cols(tile);
  const unsigned lane = core::matrix_access(true, tile, p, ldm, col_major);
  for (int i = 0; i < Frag::num_elements; ++i) {
    const int e = static_cast<int>(lane) + core::kWarpLanes * i;
    const size_t row = static_cast<size_t>(e / cols), col = static_cast<size_t>(e % cols);
    p[col_major ? col * ldm + row : row * ldm + col] = f.x[i];
  }
}
}  // namespace sim_detail

// ---- The functions ---------------------------------------------------------------------------------
template <typename Use, int m, int n, int k, typename T, typename Layout>
inline void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const typename helper_traits<T>::fill_argument_type& v) {
  for (int i = 0; i < f.num_storage_elements; ++i) f.x[i] = v;
}

// matrix_a / matrix_b: the layout is the fragment's.
template <typename Use, int m, int n, int k, typename T, typename Layout>
inline void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& f,
                             const typename helper_traits<T>::storage_element_type* p, unsigned ldm) {
  static_assert(!std::is_void<Layout>::value,
                "wmma::load_matrix_sync of an accumulator takes a layout (mem_row_major or mem_col_major)");
  sim_detail::load_elements(f, p, ldm, std::is_same<Layout, col_major>::value);
}

template <int m, int n, int k, typename T>
inline void load_matrix_sync(fragment<accumulator, m, n, k, T>& f, const typename helper_traits<T>::storage_element_type* p,
                             unsigned ldm, layout_t layout) {
  sim_detail::load_elements(f, p, ldm, layout == mem_col_major);
}

template <int m, int n, int k, typename T>
inline void store_matrix_sync(typename helper_traits<T>::storage_element_type* p, const fragment<accumulator, m, n, k, T>& f,
                              unsigned ldm, layout_t layout) {
  sim_detail::store_elements(p, f, ldm, layout == mem_col_major);
}

namespace sim_detail {
template <class FD, class FA, class FB, class FC>
inline void mma(FD& d, const FA& a, const FB& b, const FC& c, bool satf) {
  const core::MmaOperands mine{a.x, b.x, c.x};
  core::mma(FA::sim_tile(), FB::sim_tile(), FC::sim_tile(), FD::sim_tile(), satf, mine, d.x);
}
}  // namespace sim_detail

template <int m, int n, int k, typename TA, typename LA, typename LB, typename TC, typename TD>
inline void mma_sync(fragment<accumulator, m, n, k, TD>& d, const fragment<matrix_a, m, n, k, TA, LA>& a,
                     const fragment<matrix_b, m, n, k, TA, LB>& b, const fragment<accumulator, m, n, k, TC>& c) {
  static_assert(sim_detail::mma_supported<TA, TC, TD>(),
                "wmma::mma_sync: no such combination of input and accumulator types in CUDA");
  sim_detail::mma(d, a, b, c, false);
}

// satf (saturate to finite): the integer overloads; an overflowing sum is clamped to int32's range.
template <int m, int n, int k, typename TA, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, m, n, k, int>& d, const fragment<matrix_a, m, n, k, TA, LA>& a,
                     const fragment<matrix_b, m, n, k, TA, LB>& b, const fragment<accumulator, m, n, k, int>& c,
                     bool satf) {
  static_assert(sim_detail::mma_supported<TA, int, int>(), "wmma::mma_sync: no such combination of types in CUDA");
  sim_detail::mma(d, a, b, c, satf);
}

}  // namespace wmma
}  // namespace nvcuda
