// Internal to the simulated cuBLASLt (cublaslt.cpp: handles, descriptors and their attributes;
// cublaslt_matmul.cpp: the heuristic and the matmul): the state it keeps inside the library's
// semi-opaque structs, each stamped with its kind's magic number, and how a live one is read.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <cstring>

// The handle's opaque type, declared (not defined) by <cublasLt.h>.
struct cublasLtContext {
  uint64_t magic;
};

namespace blockscope::sim::cublaslt {

constexpr uint64_t kHandleMagic = 0x53494d4c54484e44ull;  // "SIMLTHND"
constexpr uint32_t kLayoutMagic = 0x4c41594fu;
constexpr uint32_t kDescMagic = 0x44455343u;
constexpr uint32_t kPrefMagic = 0x50524546u;
constexpr uint32_t kAlgoMagic = 0x414c474fu;

// ---- Descriptor state, kept inside the library's semi-opaque structs ------------------------
struct LayoutState {
  uint32_t magic;
  uint32_t type;  // cudaDataType
  int32_t order;
  int32_t batch_count;
  uint64_t rows, cols;
  int64_t ld;
  int64_t batch_stride;
  int64_t plane_offset;
  uint32_t batch_mode;
};
static_assert(sizeof(LayoutState) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout state too big");

struct DescState {
  uint32_t magic;
  int32_t compute_type;  // cublasComputeType_t
  int32_t scale_type;    // cudaDataType
  int32_t pointer_mode;
  int32_t transa, transb, transc;
  uint32_t epilogue;
  int32_t bias_type;  // -1: Dtype
  const void* bias;
  int64_t bias_batch_stride;
  // FP8 (cublaslt_fp8.cpp): A/B/C/D_SCALE_POINTER (each a device float; null: 1), AMAX_D_POINTER
  // (a device float; null: not computed), A/B/C/D_SCALE_MODE (SCALAR_32F only), FAST_ACCUM.
  const void* scale[4];  // A, B, C, D
  void* amax_d;
  int32_t scale_mode[4];  // A, B, C, D
  int8_t fast_accum;
};
static_assert(sizeof(DescState) <= sizeof(cublasLtMatmulDescOpaque_t), "desc state too big");

struct PrefState {
  uint32_t magic;
  uint32_t search_mode;
  uint64_t max_workspace;
  uint32_t min_alignment[4];  // A, B, C, D
  uint32_t reduction_mask;
  float max_waves;
  uint64_t impl_mask;
};
static_assert(sizeof(PrefState) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref state too big");

struct AlgoState {
  uint32_t magic;
  uint32_t promised_alignment[4];  // A, B, C, D, from the preference the heuristic was given
};
static_assert(sizeof(AlgoState) <= sizeof(cublasLtMatmulAlgo_t), "algo state too big");

template <typename State, typename Opaque>
State load(const Opaque* opaque) {
  State s;
  std::memcpy(&s, opaque, sizeof(State));
  return s;
}
template <typename State, typename Opaque>
void store(Opaque* opaque, const State& s) {
  std::memcpy(opaque, &s, sizeof(State));
}

// The state of a live object of the kind `magic` names; false for null or anything else.
template <typename State, typename Opaque>
bool load_live(const Opaque* opaque, uint32_t magic, State* out) {
  if (opaque == nullptr) return false;
  *out = load<State>(opaque);
  return out->magic == magic;
}

inline bool is_handle(cublasLtHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

inline bool load_layout(cublasLtMatrixLayout_t l, LayoutState* out) { return load_live(l, kLayoutMagic, out); }
inline bool load_desc(cublasLtMatmulDesc_t d, DescState* out) { return load_live(d, kDescMagic, out); }
inline bool load_pref(cublasLtMatmulPreference_t p, PrefState* out) { return load_live(p, kPrefMagic, out); }

// A preference as cublasLtMatmulPreferenceCreate makes it (the heuristic's, when given none).
inline PrefState default_pref() {
  PrefState s{};
  s.magic = kPrefMagic;
  s.search_mode = CUBLASLT_SEARCH_BEST_FIT;
  s.max_workspace = 0;
  for (auto& a : s.min_alignment) a = 256;  // documented default of MIN_ALIGNMENT_*_BYTES
  s.reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  s.max_waves = 0.0f;
  s.impl_mask = ~uint64_t{0};
  return s;
}

}  // namespace blockscope::sim::cublaslt
