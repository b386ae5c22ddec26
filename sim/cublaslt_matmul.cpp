// The simulated cuBLASLt's heuristic and matmul: the problem a descriptor and four layouts
// describe, validated, and the GEMM queued on the stream. The handles and descriptors are
// cublaslt.cpp (their state: cublaslt_state.h); the GEMM's numerics, cublaslt_model.cpp.
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
// FP8 (cublaslt_fp8.cpp; the documentation's FP8 requirements and its FP8 data-type table, "When
// A, B, C, and D Use Layouts for FP8"): compute CUBLAS_COMPUTE_32F only (not _PEDANTIC), scale
// CUDA_R_32F, host pointer mode, TRANSA = T and TRANSB = N ("TN", the rule on Ada and Hopper;
// the sim is compute capability 9.0), column-major. The rows supported, all of the table's:
//   AType  BType  CType  DType  bias          table rows
//   E4M3   E4M3   16BF   16BF   16BF          E4M3 x E4M3, Ctype 16BF
//   E4M3   E4M3   16BF   E4M3   16BF          E4M3 x E4M3, Ctype 16BF
//   E4M3   E4M3   16F    E4M3   16F           E4M3 x E4M3, Ctype 16F
//   E4M3   E4M3   16F    16F    16F           E4M3 x E4M3, Ctype 16F
//   E4M3   E4M3   32F    32F    16BF          E4M3 x E4M3, Ctype 32F
//   E4M3   E5M2   16BF   16BF, E4M3 or E5M2   16BF   E4M3 x E5M2, Ctype 16BF
//   E4M3   E5M2   16F    16F, E4M3 or E5M2    16F    E4M3 x E5M2, Ctype 16F
//   E4M3   E5M2   32F    32F    16BF          E4M3 x E5M2, Ctype 32F
//   E5M2   E4M3   (the E4M3 x E5M2 rows again)       E5M2 x E4M3
// E5M2 x E5M2 is not in the table, nor is an E5M2 D from two E4M3 inputs, nor any row with only
// one FP8 input: CUBLAS_STATUS_NOT_SUPPORTED. The bias type is the table's (BIAS_DATA_TYPE, when
// set, must name it: "fp8 kernels with an output type of CUDA_R_32F, CUDA_R_8F_E4M3 or
// CUDA_R_8F_E5M2" are the exceptions to "bias of D's type"). Dimensions ("pointers and matrix
// dimension must support 16-byte alignment", the Tensor Core usage rules): k a multiple of 16,
// m * sizeof(Ctype) and every LD * its element size (D's included) multiples of 16 bytes, and
// so the strided-batch offsets where BATCH_COUNT > 1, else NOT_SUPPORTED from the heuristic and
// the matmul; n is free. Pointers: A, B, C and D 16-byte aligned, else NOT_SUPPORTED from the
// matmul (INVALID_VALUE first where the heuristic's algorithm was promised more), and the
// heuristic answers NOT_SUPPORTED to MIN_ALIGNMENT_*_BYTES below 16.
//   What it computes (the documentation's scaling, with the epilogue):
//     T = epilogue(alpha * scale_A * scale_B * op(A) op(B) + beta * scale_C * C [+ bias])
//     amax_D = max |T| (AMAX_D_POINTER, set: before scale_D and the conversion to D's type)
//     D = scale_D * T for an FP8 D, else T; rounded to nearest even, saturating for FP8
//   A/B/C/D_SCALE_POINTER are device pointers to one float each (null: 1), read when the GEMM
//   runs, like AMAX_D_POINTER's float written then. A D scale with a D that is not FP8, and any
//   scale or amax pointer on a matmul that is not FP8, is CUBLAS_STATUS_INVALID_VALUE ("If set
//   for an unsupported matrix data, scale, and compute type combination"). *_SCALE_MODE other
//   than CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F (vector, block scaling) is refused by
//   cublasLtMatmulDescSetAttribute with NOT_SUPPORTED. FAST_ACCUM is accepted and changes
//   nothing: the sim sums in f32 either way, where a Hopper GPU's fast accumulation keeps
//   partial sums in the tensor cores' narrower accumulator without promoting them to f32 every
//   so many k-steps, so results with it set can differ from a GPU's by more than f32 rounding.
//   Epilogues: as above (DEFAULT, RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS; no AUX).
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

#include "sim/cublaslt_fp8.h"
#include "sim/cublaslt_model.h"
#include "sim/cublaslt_state.h"
#include "sim/sim.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace {

using blockscope::sim::cublaslt::Elem;
using blockscope::sim::cublaslt::check_fp8_problem;
using blockscope::sim::cublaslt::fp8_attributes_set;
using blockscope::sim::cublaslt::is_fp8;
using blockscope::sim::cublaslt::lt_elem_of;
using blockscope::sim::cublaslt::elem_size;
using blockscope::sim::cublaslt::Gemm;
using blockscope::sim::cublaslt::gemm_name;
using blockscope::sim::cublaslt::Problem;
using blockscope::sim::cublaslt::AlgoState;
using blockscope::sim::cublaslt::DescState;
using blockscope::sim::cublaslt::LayoutState;
using blockscope::sim::cublaslt::PrefState;
using blockscope::sim::cublaslt::default_pref;
using blockscope::sim::cublaslt::is_handle;
using blockscope::sim::cublaslt::load_desc;
using blockscope::sim::cublaslt::load_layout;
using blockscope::sim::cublaslt::load_live;
using blockscope::sim::cublaslt::load_pref;
using blockscope::sim::cublaslt::store;
using blockscope::sim::cublaslt::kAlgoMagic;

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
  if (!lt_elem_of(la.type, &ea) || !lt_elem_of(lb.type, &eb) || !lt_elem_of(lc.type, &ec) || !lt_elem_of(ld.type, &ed))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.scale_type != CUDA_R_32F || desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST || desc.transc != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (is_fp8(ea) || is_fp8(eb) || is_fp8(ec) || is_fp8(ed)) {
    const cublasStatus_t fp8 = check_fp8_problem(desc, la, lb, lc, ld, ea, eb, ec, ed, p);
    if (fp8 != CUBLAS_STATUS_SUCCESS) return fp8;
  } else if (ea != eb || ec != ed) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  } else if (fp8_attributes_set(desc)) {
    return CUBLAS_STATUS_INVALID_VALUE;  // scales and amax are for FP8 matmuls only
  }
  if (!p->fp8) {  // (FP8's compute type was checked with its types)
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
    const Elem want = p->fp8 ? p->bias_elem : ed;  // FP8: the table's bias type
    Elem eb_bias = want;
    if (desc.bias_type != -1 && (!lt_elem_of(static_cast<uint32_t>(desc.bias_type), &eb_bias) || eb_bias != want))
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

}  // namespace

extern "C" {

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
    // FP8: "pointers ... must support 16-byte alignment".
    const uint32_t need = p.fp8 ? 16u : static_cast<uint32_t>(elem_size(elems[i]));
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
  if (p.fp8) {
    gemm.scale_a = static_cast<const float*>(desc.scale[0]);
    gemm.scale_b = static_cast<const float*>(desc.scale[1]);
    gemm.scale_c = static_cast<const float*>(desc.scale[2]);
    gemm.scale_d = static_cast<const float*>(desc.scale[3]);
    gemm.amax_d = static_cast<float*>(desc.amax_d);
  }

  const bool empty = p.m == 0 || p.n == 0;
  if (!empty) {
    if (D == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.k > 0 && (A == nullptr || B == nullptr)) return CUBLAS_STATUS_INVALID_VALUE;
    if (gemm.beta != 0.0 && C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.has_bias && desc.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  }
  // In place (C == D): "C and D" share memory, so they must share the layout too (and the type:
  // an FP8 D with a 16-bit C cannot be in place).
  if (C != nullptr && C == D && (lc.ld != ld.ld || lc.batch_stride != ld.batch_stride || lc.type != ld.type))
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
  if (p.fp8) {
    // The scale factors and amax are floats.
    for (const void* s : {desc.scale[0], desc.scale[1], desc.scale[2], desc.scale[3], static_cast<const void*>(desc.amax_d)})
      if (!aligned(s, sizeof(float))) return CUBLAS_STATUS_INVALID_VALUE;
    // The FP8 kernels need every matrix 16-byte aligned: a configuration no kernel has.
    for (int i = 0; i < 4; ++i)
      if (ptrs[i] != nullptr && !aligned(ptrs[i], 16)) return CUBLAS_STATUS_NOT_SUPPORTED;
  }

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
