// The wmma API's warp collectives on the simulated GPU (sim/wmma.h; the kernel side is
// sim/cuda_include/mma.h): the agreement and alignment checks of load/store_matrix_sync, and
// mma_sync's D = A·B + C computed once for the warp from every lane's fragments.
#include "sim/wmma.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>

#include "sim/executor_state.h"
#include "sim/ptx_model.h"

namespace blockscope::sim::wmma {
namespace {

const char* format_name(Format f) {
  switch (f) {
    case Format::f16: return "f16";
    case Format::bf16: return "bf16";
    case Format::tf32: return "tf32";
    case Format::f32: return "f32";
    case Format::f64: return "f64";
    case Format::s8: return "s8";
    case Format::u8: return "u8";
    case Format::s32: return "s32";
  }
  return "?";
}

size_t format_bytes(Format f) {
  switch (f) {
    case Format::f16:
    case Format::bf16: return 2;
    case Format::s8:
    case Format::u8: return 1;
    case Format::f64: return 8;
    default: return 4;
  }
}

const char* use_name(Use u) {
  return u == Use::matrix_a ? "matrix_a" : u == Use::matrix_b ? "matrix_b" : "accumulator";
}

std::string shape_name(const Tile& t) {
  return "m" + std::to_string(t.m) + "n" + std::to_string(t.n) + "k" + std::to_string(t.k);
}

// A collective's name lives as long as the process: a fault abandons the lanes waiting on it, and
// the warp compares names across lanes. One copy per distinct text.
const char* interned(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(text).first->c_str();
}

struct AccessRequest {
  const void* pointer;
  unsigned ldm;
  bool col_major;
};

const char* layout_name(bool col_major) { return col_major ? "mem_col_major" : "mem_row_major"; }

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// The address bits a GPU would see for alignment. Global memory: the address. Shared memory: the
// dynamic region starts the block's shared window on a GPU (a kernel without static variables
// has it at offset 0), so offsets into it count from its start (here it sits at an offset of 16
// mod 32, to catch code assuming more than 16 bytes of a `float4`'s kind); a __shared__ variable
// is aligned here exactly as declared, so its addresses count as they are.
uintptr_t alignment_bits(const exec::BlockRun& block, const void* p) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(block.smem);
  const size_t dynamic_bytes = block.grid->launch->dynamic_smem;
  if (offset >= block.dynamic_offset && offset < block.dynamic_offset + dynamic_bytes) return offset - block.dynamic_offset;
  return reinterpret_cast<uintptr_t>(p);
}

// Element i of lane `lane`'s fragment x[] (at `x`, in `format`) as a double (exact for every format).
double element(const void* x, Format format, int i) {
  const unsigned char* p = static_cast<const unsigned char*>(x) + static_cast<size_t>(i) * format_bytes(format);
  switch (format) {
    case Format::f16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return ptx_model::f16_bits_to_float(bits);
    }
    case Format::bf16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return ptx_model::bf16_bits_to_float(bits);
    }
    case Format::tf32:  // inputs not yet rounded (__float_to_tf32) are rounded here, as cvt.rna does
    case Format::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return format == Format::tf32 ? round_to_tf32(v) : v;
    }
    case Format::f64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case Format::s8: return static_cast<double>(static_cast<int8_t>(*p));
    case Format::u8: return static_cast<double>(*p);
    case Format::s32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

// The largest operand: 32 x 16 (A of m32n8k16, B of m8n32k16).
constexpr int kMaxTileElements = 512;

// Gathers a tile from every lane's fragment: M[row * cols + col].
void gather(const Tile& t, const void* const* lane_x, double* M) {
  const int elements = tile_rows(t) * tile_cols(t);
  for (int e = 0; e < elements; ++e) M[e] = element(lane_x[e % kWarpLanes], t.format, e / kWarpLanes);
}

}  // namespace

unsigned matrix_access(bool store, const Tile& tile, const void* pointer, unsigned ldm, bool col_major) {
  exec::SimThread* me = exec::current_sim_thread();
  if (me == nullptr) throw Fault("wmma::load_matrix_sync/store_matrix_sync called outside a kernel running on the simulated GPU");
  const char* what = interned(std::string(store ? "wmma::store_matrix_sync " : "wmma::load_matrix_sync ") +
                              use_name(tile.use) + " " + shape_name(tile) + " " + format_name(tile.format));
  const AccessRequest mine{pointer, ldm, col_major};
  const exec::BlockRun* block = me->block;
  warp_collective(
      what, 0xffffffffu, &mine, sizeof mine, nullptr, 0,
      [what, block, &tile](const WarpCollectiveArgs& args) {
        AccessRequest lanes[kWarpLanes];
        for (int l = 0; l < kWarpLanes; ++l) std::memcpy(&lanes[l], args.in[l], sizeof lanes[l]);
        for (int l = 1; l < kWarpLanes; ++l) {
          const AccessRequest& first = lanes[0];
          const AccessRequest& other = lanes[l];
          std::string differs;
          if (other.pointer != first.pointer) {
            differs = "the pointer: lane 0 passed " + pointer_text(first.pointer) + ", lane " + std::to_string(l) +
                      " " + pointer_text(other.pointer);
          } else if (other.ldm != first.ldm) {
            differs = "ldm: lane 0 passed " + std::to_string(first.ldm) + ", lane " + std::to_string(l) + " " +
                      std::to_string(other.ldm);
          } else if (other.col_major != first.col_major) {
            differs = std::string("the layout: lane 0 passed ") + layout_name(first.col_major) + ", lane " +
                      std::to_string(l) + " " + layout_name(other.col_major);
          }
          if (!differs.empty()) {
            exec::fault_with_code(std::string(what) + ": the lanes of the warp disagree on " + differs +
                                      " (every lane must pass the same pointer, ldm and layout)",
                                  cudaErrorLaunchFailure);
          }
        }
        const AccessRequest& r = lanes[0];
        const size_t bytes = format_bytes(tile.format);
        if (r.pointer == nullptr) exec::fault_with_code(std::string(what) + ": null pointer", cudaErrorIllegalAddress);
        if (alignment_bits(*block, r.pointer) % 32 != 0) {
          exec::fault_with_code(std::string(what) + ": pointer " + exec::describe_address(*block, r.pointer) +
                                    " is not 256-bit (32-byte) aligned, as the wmma loads and stores require",
                                cudaErrorMisalignedAddress);
        }
        if (r.ldm * bytes % 16 != 0) {
          exec::fault_with_code(std::string(what) + ": ldm " + std::to_string(r.ldm) + " (of " + std::to_string(bytes) +
                                    "-byte elements) is not a multiple of 16 bytes (" +
                                    std::to_string(16 / bytes) + " elements)",
                                cudaErrorMisalignedAddress);
        }
      },
      true);
  return me->state.lane;
}

void mma(const Tile& a, const Tile& b, const Tile& c, const Tile& d, bool satf, const MmaOperands& lane,
         void* d_out) {
  if (exec::current_sim_thread() == nullptr) throw Fault("wmma::mma_sync called outside a kernel running on the simulated GPU");
  const char* what = interned("wmma::mma_sync " + shape_name(a) + " " + format_name(d.format) + "." +
                              format_name(a.format) + "." + format_name(b.format) + "." + format_name(c.format) +
                              (satf ? ".satfinite" : ""));
  const size_t out_bytes = static_cast<size_t>(d.m * d.n / kWarpLanes) * format_bytes(d.format);
  warp_collective(
      what, 0xffffffffu, &lane, sizeof lane, d_out, out_bytes,
      [&](const WarpCollectiveArgs& args) {
        const void* ax[kWarpLanes];
        const void* bx[kWarpLanes];
        const void* cx[kWarpLanes];
        for (int l = 0; l < kWarpLanes; ++l) {
          MmaOperands ops;
          std::memcpy(&ops, args.in[l], sizeof ops);
          ax[l] = ops.a;
          bx[l] = ops.b;
          cx[l] = ops.c;
        }
        // Every input is read before any output is written: d may be c.
        double A[kMaxTileElements], B[kMaxTileElements], C[kMaxTileElements], D[kMaxTileElements];
        gather(a, ax, A);
        gather(b, bx, B);
        gather(c, cx, C);
        const int M = a.m, N = a.n, K = a.k;
        for (int row = 0; row < M; ++row) {
          for (int col = 0; col < N; ++col) {
            const double c_value = C[row * N + col];
            if (d.format == Format::s32) {
              // Integer: exact, then wrapped to 32 bits (two's complement) or, satf, clamped.
              int64_t sum = static_cast<int64_t>(c_value);
              for (int kk = 0; kk < K; ++kk) sum += static_cast<int64_t>(A[row * K + kk]) * static_cast<int64_t>(B[kk * N + col]);
              if (satf) {
                sum = std::min<int64_t>(std::max<int64_t>(sum, std::numeric_limits<int32_t>::min()),
                                        std::numeric_limits<int32_t>::max());
              }
              D[row * N + col] = static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(sum)));
            } else if (d.format == Format::f64) {
              // f64: one fused multiply-add per k, in k order.
              double acc = c_value;
              for (int kk = 0; kk < K; ++kk) acc = std::fma(A[row * K + kk], B[kk * N + col], acc);
              D[row * N + col] = acc;
            } else {
              // f16/bf16/tf32 inputs: every product is exact in f32 (at most 11 + 11 significant
              // bits); f32 accumulation from C, rounded after each addition, in k order.
              float acc = static_cast<float>(c_value);
              for (int kk = 0; kk < K; ++kk) {
                const float product = static_cast<float>(A[row * K + kk]) * static_cast<float>(B[kk * N + col]);
                acc += product;
              }
              D[row * N + col] = acc;
            }
          }
        }
        const size_t bytes = format_bytes(d.format);
        for (int e = 0; e < M * N; ++e) {
          unsigned char* out = static_cast<unsigned char*>(args.out[e % kWarpLanes]) + static_cast<size_t>(e / kWarpLanes) * bytes;
          const double v = D[e];
          switch (d.format) {
            case Format::f16: {  // an f16 accumulator: the f32 sum rounded to nearest even
              const uint16_t bits = ptx_model::float_to_f16_bits_rn(static_cast<float>(v));
              std::memcpy(out, &bits, 2);
              break;
            }
            case Format::f32: {
              const float f = static_cast<float>(v);
              std::memcpy(out, &f, 4);
              break;
            }
            case Format::f64: std::memcpy(out, &v, 8); break;
            case Format::s32: {
              const int32_t i = static_cast<int32_t>(v);
              std::memcpy(out, &i, 4);
              break;
            }
            default: break;  // not an accumulator format (mma.h refuses it at compile time)
          }
        }
      },
      true);
}

}  // namespace blockscope::sim::wmma
