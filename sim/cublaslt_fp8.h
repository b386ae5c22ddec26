// The simulated cuBLASLt's FP8 matmul contract (cublaslt_fp8.cpp): which FP8 problems
// cublasLtMatmul takes, checked for cublaslt_matmul.cpp's check_problem. The FP8 element codes
// themselves are cublaslt_model.h's (fp8_to_double, double_to_fp8).
#pragma once

#include <cublasLt.h>

#include "sim/cublaslt_model.h"
#include "sim/cublaslt_state.h"

namespace blockscope::sim::cublaslt {

// True when any of the FP8-only attributes (A/B/C/D_SCALE_POINTER, AMAX_D_POINTER) is set: on
// a matmul that is not FP8 cublasLtMatmul answers CUBLAS_STATUS_INVALID_VALUE ("If set for an
// unsupported matrix data, scale, and compute type combination").
bool fp8_attributes_set(const DescState& desc);

// The FP8 part of check_problem, for a problem with an FP8 type among A, B, C, D (ea..ed: their
// types; p's shapes, transposes and batch already filled). NOT_SUPPORTED for every combination
// outside the documented FP8 table (types, compute type, layout "TN", the 16-byte dimension
// rules), INVALID_VALUE for a D scale with a D that is not FP8. On success fills p->fp8,
// p->fast_accum and p->bias_elem (the table's bias type for this row).
cublasStatus_t check_fp8_problem(const DescState& desc, const LayoutState& la, const LayoutState& lb,
                                 const LayoutState& lc, const LayoutState& ld, Elem ea, Elem eb, Elem ec, Elem ed,
                                 Problem* p);

}  // namespace blockscope::sim::cublaslt
