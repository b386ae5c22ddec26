// The cuBLASLt subset blockscope calls, for the simulated GPU: the real <cublasLt.h> signatures,
// linked in place of libcublasLt. Written from NVIDIA's cuBLASLt documentation (the cuBLAS
// library guide's cuBLASLt chapter and the doc comments of <cublasLt.h>), not from any caller.
// This file is the API: handles, descriptors and their attributes, validation, the heuristic;
// the GEMM it queues, and its numerics, are cublaslt_model.cpp's.
//
// What it computes (cublasLtMatmul): D = epilogue(alpha * op(A) * op(B) + beta * C [+ bias]),
// column-major (CUBLASLT_ORDER_COL only), per batch of a strided batch, on the host, as one op on
// the sim's queue (blockscope::sim::enqueue), so it runs in stream order with the sim's kernels.
//
// Shapes, as the cublasLtMatmul documentation defines them: D and C are m x n (their layouts'
// ROWS = m, COLS = n); op(A) is m x k, so A's layout is m x k when TRANSA = N and k x m when
// TRANSA = T; op(B) is k x n, so B's layout is k x n when TRANSB = N and n x k when TRANSB = T.
// Element (r, c) of a layout lives at r + c * LD (+ batch * STRIDED_BATCH_OFFSET), in elements.
//
// Supported (everything else is CUBLAS_STATUS_NOT_SUPPORTED from the heuristic and the matmul):
//   compute CUBLAS_COMPUTE_32F (or _PEDANTIC), scale CUDA_R_32F, host pointer mode:
//     A/B CUDA_R_32F  -> C/D CUDA_R_32F,  bias CUDA_R_32F
//     A/B CUDA_R_16F  -> C/D CUDA_R_16F or CUDA_R_32F, bias of D's type
//     A/B CUDA_R_16BF -> C/D CUDA_R_16BF or CUDA_R_32F, bias of D's type
//   compute CUBLAS_COMPUTE_32F_FAST_TF32, scale CUDA_R_32F: A/B/C/D/bias CUDA_R_32F only
//   These are the rows of the documentation's cublasLtMatmul "regular, non-IMMA" data-type table
//   for these types (that table lists the FAST_16F/16BF/TF32 compute types only with 32F
//   A/B/C, so FAST_TF32 with 16F/16BF inputs is refused; FAST_16F and FAST_16BF are refused
//   because the sim does not model their down-conversion). The table has one column for C and D
//   ("Ctype"), so C and D must have the same type. Bias: "Bias vector elements are the same type
//   as the elements of output matrix (Dtype)" (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), the
//   exceptions being IMMA and fp8 kernels, which the sim does not have.
//   Epilogues: DEFAULT, RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS (no AUX outputs, no gradients).
//
// Status codes: cublasLtMatmulAlgoGetHeuristic answers CUBLAS_STATUS_INVALID_VALUE only where its
// documentation says so (requestedAlgoCount <= 0; here also null pointers) and
// CUBLAS_STATUS_NOT_SUPPORTED for every configuration it has no algorithm for, conflicting
// shapes included ("if no heuristic function available for current configuration").
// cublasLtMatmul answers CUBLAS_STATUS_NOT_INITIALIZED for a null handle, INVALID_VALUE when
// "parameters are in conflict or in an impossible configuration" (shapes that do not agree, LD
// below ROWS, batch counts that differ, overlapping batches of D, null operands, pointers less
// aligned than the preference promised), NOT_SUPPORTED for type/epilogue/compute combinations
// outside the list above.
#include <cublasLt.h>

#include "sim/cublaslt_model.h"
#include "sim/sim.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>

// The handle's opaque type, declared (not defined) by <cublasLt.h>.
struct cublasLtContext {
  uint64_t magic;
};

namespace {

using blockscope::sim::cublaslt::Elem;
using blockscope::sim::cublaslt::elem_of;
using blockscope::sim::cublaslt::elem_size;
using blockscope::sim::cublaslt::Gemm;
using blockscope::sim::cublaslt::gemm_name;
using blockscope::sim::cublaslt::Operand;
using blockscope::sim::cublaslt::Problem;

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

// ---- The opaque objects' lifecycle ------------------------------------------------------------
// One pattern for matrix layouts, matmul descriptors and preferences: the state lives in the
// opaque struct itself (which callers may allocate: the *_Init_internal calls), stamped with its
// kind's magic number, so a handle of another kind, or one Destroy wiped, is refused.
template <typename Opaque, typename State>
cublasStatus_t init_opaque(Opaque* opaque, size_t size, const State& state) {
  if (opaque == nullptr || size < sizeof(Opaque)) return CUBLAS_STATUS_ALLOC_FAILED;
  store(opaque, state);
  return CUBLAS_STATUS_SUCCESS;
}
template <typename Opaque, typename State>
cublasStatus_t create_opaque(Opaque** out, const State& state) {
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new Opaque{};
  store(opaque, state);
  *out = opaque;
  return CUBLAS_STATUS_SUCCESS;
}
template <typename Opaque>
cublasStatus_t destroy_opaque(Opaque* opaque) {
  if (opaque == nullptr) return CUBLAS_STATUS_SUCCESS;
  std::memset(opaque, 0, sizeof(*opaque));
  delete opaque;
  return CUBLAS_STATUS_SUCCESS;
}
// The state of a live object of the kind `magic` names; false for null or anything else.
template <typename State, typename Opaque>
bool load_live(const Opaque* opaque, uint32_t magic, State* out) {
  if (opaque == nullptr) return false;
  *out = load<State>(opaque);
  return out->magic == magic;
}

LayoutState default_layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  LayoutState s{};
  s.magic = kLayoutMagic;
  s.type = static_cast<uint32_t>(type);
  s.order = CUBLASLT_ORDER_COL;
  s.batch_count = 1;
  s.rows = rows;
  s.cols = cols;
  s.ld = ld;
  return s;
}

DescState default_desc(cublasComputeType_t compute, cudaDataType_t scale) {
  DescState s{};
  s.magic = kDescMagic;
  s.compute_type = compute;
  s.scale_type = scale;
  s.pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  s.transa = s.transb = s.transc = CUBLAS_OP_N;
  s.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  s.bias_type = -1;
  s.bias = nullptr;
  s.bias_batch_stride = 0;
  return s;
}

PrefState default_pref() {
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

// ---- Attribute plumbing ----------------------------------------------------------------------
template <typename T>
cublasStatus_t set_value(T& field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// The documented GetAttribute contract: size 0 asks for the needed size in *sizeWritten.
template <typename T>
cublasStatus_t get_value(const T& field, void* buf, size_t size, size_t* written) {
  if (size == 0) {
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}

bool valid_op(int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }
// For real data CUBLAS_OP_C (conjugate transpose) is the transpose.
bool transposed(int32_t op) { return op != CUBLAS_OP_N; }

// ---- The problem, validated ------------------------------------------------------------------
// Checks the descriptor and layouts. Returns INVALID_VALUE for conflicts and impossible
// configurations, NOT_SUPPORTED for combinations outside the supported list.
cublasStatus_t check_problem(const DescState& desc, const LayoutState& la, const LayoutState& lb,
                             const LayoutState& lc, const LayoutState& ld, Problem* p) {
  // Shapes (the cublasLtMatmul documentation's m, n, k).
  p->ta = transposed(desc.transa);
  p->tb = transposed(desc.transb);
  p->m = ld.rows;
  p->n = ld.cols;
  p->k = p->ta ? la.rows : la.cols;
  const uint64_t a_m = p->ta ? la.cols : la.rows;
  const uint64_t b_k = p->tb ? lb.cols : lb.rows;
  const uint64_t b_n = p->tb ? lb.rows : lb.cols;
  if (a_m != p->m || b_k != p->k || b_n != p->n) return CUBLAS_STATUS_INVALID_VALUE;
  if (lc.rows != p->m || lc.cols != p->n) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t int_max = static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
  for (const LayoutState* l : {&la, &lb, &lc, &ld}) {
    // LD: "must be large enough so that matrix memory locations are not overlapping (e.g. greater
    // or equal to CUBLASLT_MATRIX_LAYOUT_ROWS in case of CUBLASLT_ORDER_COL)".
    if (l->ld < 0 || static_cast<uint64_t>(l->ld) < l->rows) return CUBLAS_STATUS_INVALID_VALUE;
    if (l->batch_count < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if (l->batch_count != ld.batch_count) return CUBLAS_STATUS_INVALID_VALUE;
    // "Usually only values that can be expressed as int32_t are supported."
    if (l->rows > int_max || l->cols > int_max) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->order != CUBLASLT_ORDER_COL || l->plane_offset != 0 || l->batch_mode != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->batch_stride < 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p->batch = ld.batch_count;
  if (p->batch > 1 && p->m > 0 && p->n > 0) {
    // Batches of D must not overlap (they would race on a GPU).
    const uint64_t span = (p->n - 1) * static_cast<uint64_t>(ld.ld) + p->m;
    if (static_cast<uint64_t>(ld.batch_stride) < span) return CUBLAS_STATUS_INVALID_VALUE;
  }

  // Types.
  Elem ea, eb, ec, ed;
  if (!elem_of(la.type, &ea) || !elem_of(lb.type, &eb) || !elem_of(lc.type, &ec) || !elem_of(ld.type, &ed))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ea != eb || ec != ed) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.scale_type != CUDA_R_32F || desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST || desc.transc != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (desc.compute_type) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      if (ea != Elem::F32 && ed != ea && ed != Elem::F32) return CUBLAS_STATUS_NOT_SUPPORTED;
      if (ea == Elem::F32 && ed != Elem::F32) return CUBLAS_STATUS_NOT_SUPPORTED;
      p->tf32 = false;
      break;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      if (ea != Elem::F32 || ed != Elem::F32) return CUBLAS_STATUS_NOT_SUPPORTED;
      p->tf32 = true;
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p->a = {ea, la.ld, la.batch_stride};
  p->b = {eb, lb.ld, lb.batch_stride};
  p->c = {ec, lc.ld, lc.batch_stride};
  p->d = {ed, ld.ld, ld.batch_stride};

  // Epilogue.
  switch (desc.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_RELU: p->relu = true; break;
    case CUBLASLT_EPILOGUE_BIAS: p->has_bias = true; break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: p->relu = p->has_bias = true; break;
    case CUBLASLT_EPILOGUE_GELU: p->gelu = true; break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: p->gelu = p->has_bias = true; break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (p->has_bias) {
    Elem eb_bias = ed;
    if (desc.bias_type != -1 && (!elem_of(static_cast<uint32_t>(desc.bias_type), &eb_bias) || eb_bias != ed))
      return CUBLAS_STATUS_NOT_SUPPORTED;
    p->bias_elem = eb_bias;
    if (desc.bias_batch_stride < 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    p->bias_batch_stride = desc.bias_batch_stride;
  }
  return CUBLAS_STATUS_SUCCESS;
}

bool aligned(const void* ptr, uint64_t alignment) {
  return alignment == 0 || reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

bool is_handle(cublasLtHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

bool load_layout(cublasLtMatrixLayout_t l, LayoutState* out) { return load_live(l, kLayoutMagic, out); }
bool load_desc(cublasLtMatmulDesc_t d, DescState* out) { return load_live(d, kDescMagic, out); }
bool load_pref(cublasLtMatmulPreference_t p, PrefState* out) { return load_live(p, kPrefMagic, out); }

const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* status_string(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown cuBLAS status";
}

}  // namespace

extern "C" {

// ---- Handle and status -----------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{kHandleMagic};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!is_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  lightHandle->magic = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) { return status_name(status); }
const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) { return status_string(status); }

// ---- Matrix layouts --------------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size,
                                                              cudaDataType type, uint64_t rows, uint64_t cols,
                                                              int64_t ld) {
  return init_opaque(matLayout, size, default_layout(type, rows, cols, ld));
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  return create_opaque(matLayout, default_layout(type, rows, cols, ld));
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return destroy_opaque(matLayout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                             size_t sizeInBytes) {
  LayoutState s;
  if (!load_layout(matLayout, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: status = set_value(s.type, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: {
      int32_t order = 0;
      status = set_value(order, buf, sizeInBytes);
      if (status == CUBLAS_STATUS_SUCCESS && order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
      s.order = order;
      break;
    }
    case CUBLASLT_MATRIX_LAYOUT_ROWS: status = set_value(s.rows, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: status = set_value(s.cols, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: status = set_value(s.ld, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: status = set_value(s.batch_count, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: status = set_value(s.batch_stride, buf, sizeInBytes); break;
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: {
      int64_t v = 0;
      status = set_value(v, buf, sizeInBytes);
      if (status == CUBLAS_STATUS_SUCCESS && v != 0) return CUBLAS_STATUS_NOT_SUPPORTED;  // no complex types
      break;
    }
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: {
      uint32_t v = 0;
      status = set_value(v, buf, sizeInBytes);
      if (status == CUBLAS_STATUS_SUCCESS && v != 0) return CUBLAS_STATUS_NOT_SUPPORTED;  // strided only
      break;
    }
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (status == CUBLAS_STATUS_SUCCESS) store(matLayout, s);
  return status;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                             size_t sizeInBytes, size_t* sizeWritten) {
  LayoutState s;
  if (!load_layout(matLayout, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return get_value(s.type, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return get_value(s.order, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return get_value(s.rows, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return get_value(s.cols, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_LD: return get_value(s.ld, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return get_value(s.batch_count, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return get_value(s.batch_stride, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return get_value(s.plane_offset, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return get_value(s.batch_mode, buf, sizeInBytes, sizeWritten);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// ---- Matmul descriptors ----------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                                            cublasComputeType_t computeType, cudaDataType_t scaleType) {
  return init_opaque(matmulDesc, size, default_desc(computeType, scaleType));
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  return create_opaque(matmulDesc, default_desc(computeType, scaleType));
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return destroy_opaque(matmulDesc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
  DescState s;
  if (!load_desc(matmulDesc, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: status = set_value(s.compute_type, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: status = set_value(s.scale_type, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: {
      int32_t mode = 0;
      status = set_value(mode, buf, sizeInBytes);
      if (status == CUBLAS_STATUS_SUCCESS && mode != CUBLASLT_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
      s.pointer_mode = mode;
      break;
    }
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
    case CUBLASLT_MATMUL_DESC_TRANSC: {
      int32_t op = 0;
      status = set_value(op, buf, sizeInBytes);
      if (status != CUBLAS_STATUS_SUCCESS) break;
      if (!valid_op(op)) return CUBLAS_STATUS_INVALID_VALUE;
      // TRANSC: "Currently only CUBLAS_OP_N is supported."
      if (attr == CUBLASLT_MATMUL_DESC_TRANSC && op != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? s.transa : attr == CUBLASLT_MATMUL_DESC_TRANSB ? s.transb : s.transc) = op;
      break;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: status = set_value(s.epilogue, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: status = set_value(s.bias, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: status = set_value(s.bias_type, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: status = set_value(s.bias_batch_stride, buf, sizeInBytes); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (status == CUBLAS_STATUS_SUCCESS) store(matmulDesc, s);
  return status;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, void* buf,
                                                           size_t sizeInBytes, size_t* sizeWritten) {
  DescState s;
  if (!load_desc(matmulDesc, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return get_value(s.compute_type, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return get_value(s.scale_type, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return get_value(s.pointer_mode, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_TRANSA: return get_value(s.transa, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_TRANSB: return get_value(s.transb, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_TRANSC: return get_value(s.transc, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return get_value(s.epilogue, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return get_value(s.bias, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return get_value(s.bias_type, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return get_value(s.bias_batch_stride, buf, sizeInBytes, sizeWritten);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// ---- Heuristic preferences -------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
  return init_opaque(pref, size, default_pref());
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create_opaque(pref, default_pref());
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return destroy_opaque(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t sizeInBytes) {
  PrefState s;
  if (!load_pref(pref, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: {
      uint32_t mode = 0;
      status = set_value(mode, buf, sizeInBytes);
      if (status == CUBLAS_STATUS_SUCCESS && mode != CUBLASLT_SEARCH_BEST_FIT) return CUBLAS_STATUS_NOT_SUPPORTED;
      s.search_mode = mode;
      break;
    }
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: status = set_value(s.max_workspace, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: status = set_value(s.reduction_mask, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: status = set_value(s.min_alignment[0], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: status = set_value(s.min_alignment[1], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: status = set_value(s.min_alignment[2], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: status = set_value(s.min_alignment[3], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: status = set_value(s.max_waves, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: status = set_value(s.impl_mask, buf, sizeInBytes); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (status == CUBLAS_STATUS_SUCCESS) store(pref, s);
  return status;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                                 size_t sizeInBytes, size_t* sizeWritten) {
  PrefState s;
  if (!load_pref(pref, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return get_value(s.search_mode, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return get_value(s.max_workspace, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return get_value(s.reduction_mask, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return get_value(s.min_alignment[0], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return get_value(s.min_alignment[1], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return get_value(s.min_alignment[2], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return get_value(s.min_alignment[3], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return get_value(s.max_waves, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return get_value(s.impl_mask, buf, sizeInBytes, sizeWritten);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// ---- Heuristic -------------------------------------------------------------------------------
// One algorithm (workspace 0) when the configuration is supported. The MIN_ALIGNMENT_*
// preferences say how aligned the caller's buffers will be ("Selecting a smaller value will
// exclude algorithms that can not work with matrix A that is not as strictly aligned as they
// need"); the sim's algorithm needs each operand aligned to its element size, so a preference
// below that (or not a multiple of it) excludes it. The bias pointer, which the heuristic does
// not dereference but uses "to determine expected pointer alignment", must be aligned to its
// element size. The returned algorithm remembers the promised alignments; cublasLtMatmul checks
// the pointers against them.
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                           cublasLtMatmulDesc_t operationDesc,
                                                           cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t preference,
                                                           int requestedAlgoCount,
                                                           cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                           int* returnAlgoCount) {
  if (!is_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  DescState desc;
  LayoutState la, lb, lc, ld;
  if (!load_desc(operationDesc, &desc) || !load_layout(Adesc, &la) || !load_layout(Bdesc, &lb) ||
      !load_layout(Cdesc, &lc) || !load_layout(Ddesc, &ld))
    return CUBLAS_STATUS_INVALID_VALUE;
  PrefState pref = default_pref();
  if (preference != nullptr && !load_pref(preference, &pref)) return CUBLAS_STATUS_INVALID_VALUE;
  Problem p;
  if (check_problem(desc, la, lb, lc, ld, &p) != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Elem elems[4] = {p.a.elem, p.b.elem, p.c.elem, p.d.elem};
  for (int i = 0; i < 4; ++i) {
    const uint32_t need = static_cast<uint32_t>(elem_size(elems[i]));
    if (pref.min_alignment[i] < need || pref.min_alignment[i] % need != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (p.has_bias && !aligned(desc.bias, elem_size(p.bias_elem))) return CUBLAS_STATUS_NOT_SUPPORTED;

  cublasLtMatmulHeuristicResult_t result;
  std::memset(&result, 0, sizeof(result));
  AlgoState algo{};
  algo.magic = kAlgoMagic;
  for (int i = 0; i < 4; ++i) algo.promised_alignment[i] = pref.min_alignment[i];
  store(&result.algo, algo);
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  heuristicResultsArray[0] = result;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- The matmul ------------------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                           const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                           const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                           const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                           cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                                           void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!is_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  DescState desc;
  LayoutState la, lb, lc, ld;
  if (!load_desc(computeDesc, &desc) || !load_layout(Adesc, &la) || !load_layout(Bdesc, &lb) ||
      !load_layout(Cdesc, &lc) || !load_layout(Ddesc, &ld))
    return CUBLAS_STATUS_INVALID_VALUE;
  Problem p;
  const cublasStatus_t checked = check_problem(desc, la, lb, lc, ld, &p);
  if (checked != CUBLAS_STATUS_SUCCESS) return checked;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;

  Gemm gemm;
  gemm.p = p;
  // Host pointer mode, scale type f32: the scalars are read now, at the call.
  gemm.alpha = *static_cast<const float*>(alpha);
  gemm.beta = *static_cast<const float*>(beta);
  gemm.A = A;
  gemm.B = B;
  gemm.C = C;
  gemm.D = D;
  gemm.bias = desc.bias;

  const bool empty = p.m == 0 || p.n == 0;
  if (!empty) {
    if (D == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.k > 0 && (A == nullptr || B == nullptr)) return CUBLAS_STATUS_INVALID_VALUE;
    if (gemm.beta != 0.0 && C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.has_bias && desc.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  }
  // In place (C == D): "C and D" share memory, so they must share the layout too.
  if (C != nullptr && C == D && (lc.ld != ld.ld || lc.batch_stride != ld.batch_stride))
    return CUBLAS_STATUS_INVALID_VALUE;

  // Alignment: every operand to its element size; with an algorithm from the heuristic, to the
  // alignment its preference promised as well.
  const void* ptrs[4] = {A, B, C, D};
  const Elem elems[4] = {p.a.elem, p.b.elem, p.c.elem, p.d.elem};
  uint32_t promised[4] = {0, 0, 0, 0};
  if (algo != nullptr) {
    AlgoState a;
    if (!load_live(algo, kAlgoMagic, &a)) return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < 4; ++i) promised[i] = a.promised_alignment[i];
  }
  for (int i = 0; i < 4; ++i) {
    if (ptrs[i] == nullptr) continue;
    if (!aligned(ptrs[i], elem_size(elems[i])) || !aligned(ptrs[i], promised[i])) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (p.has_bias && !aligned(desc.bias, elem_size(p.bias_elem))) return CUBLAS_STATUS_INVALID_VALUE;

  if (empty) return CUBLAS_STATUS_SUCCESS;  // nothing to launch
  const std::string name = gemm_name(p);
  gemm.name = blockscope::sim::cublaslt::intern_name(name);
  // A stream the runtime would refuse work on (destroyed, capture invalidated, …): the GEMM's
  // kernel launch fails, which cublasLtMatmul documents as "CUBLAS_STATUS_EXECUTION_FAILED if
  // cuda reported execution error from the device".
  if (blockscope::sim::try_enqueue(stream, gemm.name, gemm) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  blockscope::sim::set_last_kernel_name(name);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
