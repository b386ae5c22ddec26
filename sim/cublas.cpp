// The cuBLAS (v2 API) GEMMs for the simulated GPU: the real <cublas_v2.h> signatures, linked in
// place of libcublas. Written from NVIDIA's cuBLAS documentation (the library guide's "cuBLAS
// Helper Function Reference", cublas<t>gemm, cublas<t>gemmBatched, cublas<t>gemmStridedBatched,
// cublasGemmEx and its batched forms), not from any caller. Each GEMM is the cuBLASLt model's
// (cublaslt_model.h), queued on the handle's stream, so it runs in stream order with the sim's
// kernels and its numerics are the sim's cuBLASLt's.
//
// What it computes: C = alpha * op(A) * op(B) + beta * C, column-major; op(A) is m x k (A is
// lda x k with lda >= max(1, m) when transa = N, lda x m with lda >= max(1, k) otherwise), op(B)
// k x n likewise, C m x n with ldc >= max(1, m). CUBLAS_OP_C is CUBLAS_OP_T for real types. When
// beta is 0, C is not read ("C does not have to be a valid input").
//
// Supported:
//   Sgemm / SgemmBatched / SgemmStridedBatched: f32, summed in f32; TF32 when the math mode is
//     CUBLAS_TF32_TENSOR_OP_MATH (inputs rounded to TF32, as the tensor cores take them).
//   Hgemm and its batched forms: f16, summed in f32 and rounded once to f16 (cuBLAS may
//     accumulate in f16: the sim's results are at least as accurate, never less).
//   GemmEx and its batched forms: compute CUBLAS_COMPUTE_32F (TF32 under the TF32 math mode),
//     _32F_PEDANTIC, _32F_FAST_TF32; A and B of one type; f32 -> f32, f16 -> f16 or f32,
//     bf16 -> bf16 or f32; scale type f32. Everything else is CUBLAS_STATUS_NOT_SUPPORTED: the
//     16F and FAST_16F/16BF compute types (their down-conversions are not modelled), integer
//     and complex types, the deprecated CUBLAS_TENSOR_OP_MATH mode on f32 (FAST_16F).
// Pointer mode: host (alpha, beta read at the call) or device (read when the GEMM runs, in
// stream order). Batched forms read their pointer arrays when the GEMM runs, too.
// Status codes, as the documentation lists them: CUBLAS_STATUS_NOT_INITIALIZED for a handle
// that was never created or was destroyed; CUBLAS_STATUS_INVALID_VALUE for m, n, k or
// batchCount < 0, a transa/transb other than N/T/C, lda/ldb/ldc below the minimum above, null
// alpha or beta, an unknown pointer or math mode; CUBLAS_STATUS_EXECUTION_FAILED when the stream
// refuses work.
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "sim/cublaslt_model.h"
#include "sim/sim.h"

// The handle's opaque type, declared (not defined) by <cublas_api.h>.
struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

using blockscope::sim::cublaslt::Elem;
using blockscope::sim::cublaslt::Gemm;
using blockscope::sim::cublaslt::Problem;

// The live handles: a destroyed or never-created handle is CUBLAS_STATUS_NOT_INITIALIZED, not
// a read of freed memory.
std::mutex g_handles_mutex;
std::set<const cublasContext*> g_handles;

bool is_handle(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  return handle != nullptr && g_handles.count(handle) != 0;
}

bool transposes(cublasOperation_t op, bool* out) {
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C) return false;
  *out = op != CUBLAS_OP_N;  // real types: conjugate-transpose is transpose
  return true;
}

// One GEMM call as the v2 API states it; the batched forms add a count and strides or arrays.
struct GemmCall {
  cublasOperation_t transa, transb;
  int m, n, k;
  const void* alpha;
  const void* beta;
  Elem ab, c;
  int lda, ldb, ldc;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;
  bool tf32 = false;
  Elem scale = Elem::F32;  // alpha's and beta's type
};

// The documented argument checks, and the Problem they describe.
cublasStatus_t check(const GemmCall& call, Problem* p) {
  bool ta = false, tb = false;
  if (!transposes(call.transa, &ta) || !transposes(call.transb, &tb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (call.m < 0 || call.n < 0 || call.k < 0 || call.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (call.lda < std::max(1, ta ? call.k : call.m) || call.ldb < std::max(1, tb ? call.n : call.k) ||
      call.ldc < std::max(1, call.m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (call.alpha == nullptr || call.beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  p->m = static_cast<uint64_t>(call.m);
  p->n = static_cast<uint64_t>(call.n);
  p->k = static_cast<uint64_t>(call.k);
  p->batch = call.batch;
  p->ta = ta;
  p->tb = tb;
  p->tf32 = call.tf32;
  p->a = {call.ab, call.lda, call.stride_a};
  p->b = {call.ab, call.ldb, call.stride_b};
  p->c = {call.c, call.ldc, call.stride_c};
  p->d = p->c;  // in place: C is read and written
  return CUBLAS_STATUS_SUCCESS;
}

double scalar(const void* value, Elem type) { return blockscope::sim::cublaslt::load_elem(value, 0, type); }

// Queues the GEMMs of one call on the handle's stream: `operands(i, &gemm)` fills batch entry
// i's A, B and C (all of them at once, i = -1, for a strided call) when the GEMM runs.
template <typename Operands>
cublasStatus_t queue(cublasHandle_t handle, const GemmCall& call, const Problem& p, bool per_batch, Operands operands) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to launch
  Problem one = p;
  if (per_batch) one.batch = 1;
  const char* name = blockscope::sim::cublaslt::intern_name(blockscope::sim::cublaslt::gemm_name(p));
  const bool device_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  // Host pointer mode: the scalars are read now, at the call.
  const double alpha_now = device_scalars ? 0.0 : scalar(call.alpha, call.scale);
  const double beta_now = device_scalars ? 0.0 : scalar(call.beta, call.scale);
  const void* alpha = call.alpha;
  const void* beta = call.beta;
  const Elem scale = call.scale;
  const int batches = p.batch;
  auto op = [=] {
    Gemm gemm;
    gemm.p = one;
    gemm.name = name;
    gemm.alpha = device_scalars ? scalar(alpha, scale) : alpha_now;
    gemm.beta = device_scalars ? scalar(beta, scale) : beta_now;
    for (int i = 0; i < (per_batch ? batches : 1); ++i) {
      operands(per_batch ? i : -1, &gemm);
      gemm();
    }
  };
  if (blockscope::sim::try_enqueue(handle->stream, name, op) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  blockscope::sim::set_last_kernel_name(name);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t strided(cublasHandle_t handle, const GemmCall& call, const void* A, const void* B, void* C) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  Problem p;
  if (const cublasStatus_t status = check(call, &p); status != CUBLAS_STATUS_SUCCESS) return status;
  return queue(handle, call, p, false, [=](int, Gemm* gemm) {
    gemm->A = A;
    gemm->B = B;
    gemm->C = C;
    gemm->D = C;
  });
}

// Pointer arrays in device memory: read when the GEMM runs (a kernel before it may write them).
cublasStatus_t arrays(cublasHandle_t handle, const GemmCall& call, const void* const* A, const void* const* B,
                      void* const* C) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  Problem p;
  if (const cublasStatus_t status = check(call, &p); status != CUBLAS_STATUS_SUCCESS) return status;
  if (p.m > 0 && p.n > 0 && p.batch > 0 && (A == nullptr || B == nullptr || C == nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  return queue(handle, call, p, true, [=](int i, Gemm* gemm) {
    gemm->A = A[i];
    gemm->B = B[i];
    gemm->C = C[i];
    gemm->D = C[i];
  });
}

// f32 GEMMs: TF32 under CUBLAS_TF32_TENSOR_OP_MATH; the deprecated CUBLAS_TENSOR_OP_MATH means
// FAST_16F for f32, which the sim does not model.
cublasStatus_t f32_math(cublasHandle_t handle, bool* tf32) {
  const int mode = handle->math_mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (mode == CUBLAS_TENSOR_OP_MATH) return CUBLAS_STATUS_NOT_SUPPORTED;
  *tf32 = mode == CUBLAS_TF32_TENSOR_OP_MATH;
  return CUBLAS_STATUS_SUCCESS;
}

// GemmEx's types: A and B alike, C f32 or A's type, compute 32F in one of its forms.
cublasStatus_t ex_types(cublasHandle_t handle, cudaDataType a, cudaDataType b, cudaDataType c,
                        cublasComputeType_t compute, GemmCall* call) {
  Elem ea, ec;
  if (a != b || !blockscope::sim::cublaslt::elem_of(a, &ea) || !blockscope::sim::cublaslt::elem_of(c, &ec))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ec != Elem::F32 && ec != ea) return CUBLAS_STATUS_NOT_SUPPORTED;
  bool tf32 = false;
  switch (compute) {
    case CUBLAS_COMPUTE_32F:
      if (ea == Elem::F32) {
        if (const cublasStatus_t status = f32_math(handle, &tf32); status != CUBLAS_STATUS_SUCCESS) return status;
      }
      break;
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      break;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      if (ea != Elem::F32) return CUBLAS_STATUS_NOT_SUPPORTED;
      tf32 = true;
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  call->ab = ea;
  call->c = ec;
  call->tf32 = tf32;
  call->scale = Elem::F32;
  return CUBLAS_STATUS_SUCCESS;
}

bool known_algo(cublasGemmAlgo_t algo) {
  return (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
         (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

GemmCall call_of(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha, int lda,
             int ldb, const void* beta, int ldc, Elem ab, Elem c) {
  GemmCall call{transa, transb, m, n, k, alpha, beta, ab, c, lda, ldb, ldc};
  call.scale = ab == Elem::F16 && c == Elem::F16 ? Elem::F16 : Elem::F32;
  return call;
}

}  // namespace

extern "C" {

// ---- Handles and their settings --------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  cublasContext* made = new cublasContext;
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  g_handles.insert(made);
  *handle = made;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  {
    std::lock_guard<std::mutex> lock(g_handles_mutex);
    if (handle == nullptr || g_handles.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  // "This function implicitly calls cudaDeviceSynchronize()".
  cudaDeviceSynchronize();
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// The sim's GEMMs need no workspace: any buffer (or none) is accepted.
cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void*, size_t) {
  return is_handle(handle) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
      base != CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// The same names and sentences as the sim's cuBLASLt (the two libraries share cublasStatus_t).
const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) { return cublasLtGetStatusName(status); }
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) { return cublasLtGetStatusString(status); }

// ---- f32 -------------------------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  if (const cublasStatus_t status = f32_math(handle, &call.tf32); status != CUBLAS_STATUS_SUCCESS) return status;
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                      cublasOperation_t transb, int m, int n, int k,
                                                      const float* alpha, const float* A, int lda,
                                                      long long int strideA, const float* B, int ldb,
                                                      long long int strideB, const float* beta, float* C, int ldc,
                                                      long long int strideC, int batchCount) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  call.stride_a = strideA, call.stride_b = strideB, call.stride_c = strideC, call.batch = batchCount;
  if (const cublasStatus_t status = f32_math(handle, &call.tf32); status != CUBLAS_STATUS_SUCCESS) return status;
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasSgemmBatched(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                               const float* const Aarray[], int lda, const float* const Barray[],
                                               int ldb, const float* beta, float* const Carray[], int ldc,
                                               int batchCount) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  call.batch = batchCount;
  if (const cublasStatus_t status = f32_math(handle, &call.tf32); status != CUBLAS_STATUS_SUCCESS) return status;
  return arrays(handle, call, reinterpret_cast<const void* const*>(Aarray),
                reinterpret_cast<const void* const*>(Barray), reinterpret_cast<void* const*>(Carray));
}

// ---- f16 -------------------------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasHgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                        int m, int n, int k, const __half* alpha, const __half* A, int lda,
                                        const __half* B, int ldb, const __half* beta, __half* C, int ldc) {
  const GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F16, Elem::F16);
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                      cublasOperation_t transb, int m, int n, int k,
                                                      const __half* alpha, const __half* A, int lda,
                                                      long long int strideA, const __half* B, int ldb,
                                                      long long int strideB, const __half* beta, __half* C, int ldc,
                                                      long long int strideC, int batchCount) {
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F16, Elem::F16);
  call.stride_a = strideA, call.stride_b = strideB, call.stride_c = strideC, call.batch = batchCount;
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasHgemmBatched(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k, const __half* alpha,
                                               const __half* const Aarray[], int lda, const __half* const Barray[],
                                               int ldb, const __half* beta, __half* const Carray[], int ldc,
                                               int batchCount) {
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F16, Elem::F16);
  call.batch = batchCount;
  return arrays(handle, call, reinterpret_cast<const void* const*>(Aarray),
                reinterpret_cast<const void* const*>(Barray), reinterpret_cast<void* const*>(Carray));
}

// ---- Mixed types -----------------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb, const void* beta,
                                         void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!known_algo(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  if (const cublasStatus_t status = ex_types(handle, Atype, Btype, Ctype, computeType, &call);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                       cublasOperation_t transb, int m, int n, int k,
                                                       const void* alpha, const void* A, cudaDataType Atype, int lda,
                                                       long long int strideA, const void* B, cudaDataType Btype,
                                                       int ldb, long long int strideB, const void* beta, void* C,
                                                       cudaDataType Ctype, int ldc, long long int strideC,
                                                       int batchCount, cublasComputeType_t computeType,
                                                       cublasGemmAlgo_t algo) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!known_algo(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  call.stride_a = strideA, call.stride_b = strideB, call.stride_c = strideC, call.batch = batchCount;
  if (const cublasStatus_t status = ex_types(handle, Atype, Btype, Ctype, computeType, &call);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  return strided(handle, call, A, B, C);
}

cublasStatus_t CUBLASWINAPI cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                const void* const Aarray[], cudaDataType Atype, int lda,
                                                const void* const Barray[], cudaDataType Btype, int ldb,
                                                const void* beta, void* const Carray[], cudaDataType Ctype, int ldc,
                                                int batchCount, cublasComputeType_t computeType,
                                                cublasGemmAlgo_t algo) {
  if (!is_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!known_algo(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  GemmCall call = call_of(transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, Elem::F32, Elem::F32);
  call.batch = batchCount;
  if (const cublasStatus_t status = ex_types(handle, Atype, Btype, Ctype, computeType, &call);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  return arrays(handle, call, Aarray, Barray, Carray);
}

}  // extern "C"
