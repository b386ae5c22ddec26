// The cuBLASLt subset blockscope calls, for the simulated GPU: the real <cublasLt.h> signatures,
// linked in place of libcublasLt. Written from NVIDIA's cuBLASLt documentation (the cuBLAS
// library guide's cuBLASLt chapter and the doc comments of <cublasLt.h>), not from any caller.
// This file is the API's objects: handles, matrix layouts, matmul descriptors and preferences
// with their attributes, the status names. The heuristic and the matmul, with what they compute,
// are cublaslt_matmul.cpp; the GEMM it queues, and its numerics, cublaslt_model.cpp's; the
// state inside the opaque structs, cublaslt_state.h.
#include <cublasLt.h>

#include "sim/cublaslt_state.h"

#include <cstdint>
#include <cstring>

namespace {

using blockscope::sim::cublaslt::DescState;
using blockscope::sim::cublaslt::LayoutState;
using blockscope::sim::cublaslt::PrefState;
using blockscope::sim::cublaslt::default_pref;
using blockscope::sim::cublaslt::is_handle;
using blockscope::sim::cublaslt::load_desc;
using blockscope::sim::cublaslt::load_layout;
using blockscope::sim::cublaslt::load_pref;
using blockscope::sim::cublaslt::store;
using blockscope::sim::cublaslt::kDescMagic;
using blockscope::sim::cublaslt::kHandleMagic;
using blockscope::sim::cublaslt::kLayoutMagic;

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
  for (int i = 0; i < 4; ++i) {
    s.scale[i] = nullptr;
    s.scale_mode[i] = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  }
  s.amax_d = nullptr;
  s.fast_accum = 0;
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
    // FP8 (what they do: cublaslt_matmul.cpp's header, cublaslt_fp8.cpp).
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: status = set_value(s.scale[0], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: status = set_value(s.scale[1], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: status = set_value(s.scale[2], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: status = set_value(s.scale[3], buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: status = set_value(s.amax_d, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: status = set_value(s.fast_accum, buf, sizeInBytes); break;
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: {
      int32_t mode = 0;
      status = set_value(mode, buf, sizeInBytes);
      if (status != CUBLAS_STATUS_SUCCESS) break;
      // Only tensor-wide scalars; the vector and block scaling modes are not modelled.
      if (mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
      s.scale_mode[attr - CUBLASLT_MATMUL_DESC_A_SCALE_MODE] = mode;
      break;
    }
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
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return get_value(s.scale[0], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return get_value(s.scale[1], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return get_value(s.scale[2], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return get_value(s.scale[3], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return get_value(s.amax_d, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return get_value(s.fast_accum, buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return get_value(s.scale_mode[0], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return get_value(s.scale_mode[1], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: return get_value(s.scale_mode[2], buf, sizeInBytes, sizeWritten);
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: return get_value(s.scale_mode[3], buf, sizeInBytes, sizeWritten);
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

}  // extern "C"
