#include "ops/common/cuda/cublaslt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/scope.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace blockscope::ops::cuda::cublaslt {

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none: return "DEFAULT";
    case Epilogue::bias: return "BIAS";
    case Epilogue::gelu_bias: return "GELU_BIAS";
    case Epilogue::gelu: return "GELU";
  }
  return "?";
}

namespace {

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp8_e4m3: return CUDA_R_8F_E4M3;
    case DType::fp8_e5m2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t cublas_epilogue(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(Epilogue epilogue) { return epilogue == Epilogue::bias || epilogue == Epilogue::gelu_bias; }

// The largest power of two up to 16 dividing every value: the alignment, in bytes, that every
// column (and batch entry) of an operand keeps, given its base address, leading dimension and
// batch stride in bytes. cuBLASLt is told this real alignment (MIN_ALIGNMENT_*), so a row
// slice that starts mid-pack still finds an algorithm instead of being refused.
uint32_t alignment_bytes(std::initializer_list<int64_t> byte_offsets) {
  uint32_t alignment = 16;
  for (int64_t offset : byte_offsets) {
    while (alignment > 1 && offset % alignment != 0) alignment /= 2;
  }
  return alignment;
}

// Everything that decides the descriptors and the algorithm (no pointers).
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t,  // dtype, m, n, k
                           int64_t, int64_t, int64_t,       // lda, ldb, ldd
                           int64_t, int64_t, int64_t,       // strides a, b, d
                           int64_t, bool, int, bool,        // batch, trans_b, epilogue, accumulate (beta != 0)
                           uint32_t, uint32_t, uint32_t,    // alignments a, b, d
                           uint32_t, int,                   // alignment of the bias, compute type
                           int, int, int, bool, bool>;      // types of B, D, bias; fast accumulation, amax of D

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_b = nullptr;  // cuBLAS's first operand: our B
  cublasLtMatrixLayout_t layout_a = nullptr;  // cuBLAS's second operand: our A
  cublasLtMatrixLayout_t layout_d = nullptr;  // C and D share it (C is D) but in FP8 GEMMs
  // FP8 GEMMs: C's layout, of the bias's type (an FP8 D takes a 16-bit C; beta is 0 and C null,
  // as PyTorch's scaled_mm passes it).
  cublasLtMatrixLayout_t layout_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // Made with GemmSettings::autotune on, outside a graph capture (its candidates were timed when
  // the heuristic offered more than one). A plan made before autotune was turned on, or during
  // a capture, is re-planned by the first call that may autotune.
  bool autotuned = false;
};

void destroy(Plan& plan) {
  // Called from destructors: errors are ignored on purpose.
  if (plan.layout_c) cublasLtMatrixLayoutDestroy(plan.layout_c);
  if (plan.layout_d) cublasLtMatrixLayoutDestroy(plan.layout_d);
  if (plan.layout_a) cublasLtMatrixLayoutDestroy(plan.layout_a);
  if (plan.layout_b) cublasLtMatrixLayoutDestroy(plan.layout_b);
  if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
  plan = Plan{};
}

cublasLtMatrixLayout_t make_layout(DType dtype, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  BS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, cuda_type(dtype), rows, cols, ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    BS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    BS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                     sizeof stride));
  }
  return layout;
}

std::string describe(const RowMajorGemm& g) {
  const std::string types = g.fp8() ? std::string(dtype_name(g.dtype)) + " x " + dtype_name(g.b_type()) + " -> " +
                                          dtype_name(g.d_type())
                                    : std::string(dtype_name(g.dtype));
  return std::string(g.name) + " (" + types + ", m=" + std::to_string(g.m) +
         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) + ", batch " + std::to_string(g.batch) +
         ", B " + (g.trans_b ? "[n, k]" : "[k, n]") + ", epilogue " + epilogue_name(g.epilogue) + ")";
}

int64_t address_of(const void* ptr) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr) % 256); }

// Every operand must at least be aligned to its element: a tensor's data always is.
void check_element_aligned(const RowMajorGemm& g, const char* operand, const void* ptr, DType dtype) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  BS_CHECK(address % dtype_size(dtype) == 0, "cuBLASLt GEMM ", describe(g), ": operand ", operand,
           " at address 0x", std::hex, address, std::dec, " is not aligned to its ", dtype_size(dtype),
           "-byte elements");
}

// The attributes a call sets on its plan's shared descriptor: the bias and, in FP8 GEMMs, the
// scales and the amax (cuBLAS's A is our B, its B our A). Set before any run of the plan,
// autotuning's included, so no run sees another call's pointers.
void set_call_pointers(const Plan& plan, const RowMajorGemm& g) {
  if (uses_bias(g.epilogue)) {
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                   sizeof g.bias));
  }
  if (!g.fp8()) return;
  BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.scale_b,
                                                 sizeof g.scale_b));
  BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.scale_a,
                                                 sizeof g.scale_a));
  if (is_fp8(g.d_type())) {
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &g.scale_d,
                                                   sizeof g.scale_d));
  }
  if (g.amax_d != nullptr) {
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &g.amax_d,
                                                   sizeof g.amax_d));
  }
}

class PlanCache {
 public:
  ~PlanCache() {
    for (auto& entry : plans_) destroy(entry.second);
  }
  std::map<PlanKey, Plan>& plans() { return plans_; }
  // Keys for which cuBLASLt has no algorithm (asked once: epilogue_available() falls back).
  std::set<PlanKey>& refused() { return refused_; }
  // Keys whose epilogue fallback was already said on stderr (once per shape and backend).
  std::set<PlanKey>& noted() { return noted_; }

 private:
  std::map<PlanKey, Plan> plans_;
  std::set<PlanKey> refused_;
  std::set<PlanKey> noted_;
};

// The backend's descriptor and algorithm cache, destroyed with it (before its cuBLASLt handle).
PlanCache& plan_cache(CudaBackend& backend) { return backend.attachment<PlanCache>(); }
const GemmSettings& backend_settings(CudaBackend& backend) { return backend.attachment<GemmSettings>(); }

}  // namespace

GemmSettings& settings(Context& ctx) { return cuda_backend(ctx).attachment<GemmSettings>(); }

size_t cached_plans(Context& ctx) { return plan_cache(cuda_backend(ctx)).plans().size(); }

size_t autotuned_plans(Context& ctx) {
  size_t count = 0;
  for (const auto& entry : plan_cache(cuda_backend(ctx)).plans()) count += entry.second.autotuned ? 1 : 0;
  return count;
}

namespace {

void run_matmul(CudaBackend& backend, const Plan& plan, const RowMajorGemm& g, void* d, float beta,
                const cublasLtMatmulAlgo_t& algo) {
  const bool separate_c = plan.layout_c != nullptr;  // FP8: C unused (beta 0) and null
  BS_CUBLAS_CHECK(cublasLtMatmul(backend.cublaslt(), plan.desc, &g.alpha, g.b, plan.layout_b, g.a, plan.layout_a,
                                 &beta, separate_c ? nullptr : d, separate_c ? plan.layout_c : plan.layout_d, d,
                                 plan.layout_d, &algo, backend.workspace(), backend.workspace_bytes(),
                                 backend.stream()));
}

// Times each candidate on a scratch output (beta = 0, so D's contents, e.g. addmm's bias copy,
// are untouched) and returns the index of the fastest.
size_t autotune(CudaBackend& backend, const Plan& plan, const RowMajorGemm& g,
                const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) {
  const int64_t extent = (g.batch - 1) * g.stride_d + (g.m - 1) * g.ldd + g.n;  // elements D spans
  const size_t scratch_bytes = static_cast<size_t>(extent) * dtype_size(g.d_type());
  void* scratch = backend.allocate(scratch_bytes);
  cudaEvent_t start = nullptr, stop = nullptr;
  size_t best = 0;
  float best_ms = 0;
  try {
    BS_CUDA_CHECK(cudaEventCreate(&start));
    BS_CUDA_CHECK(cudaEventCreate(&stop));
    const int iterations = std::max(1, backend_settings(backend).autotune_iterations);
    for (size_t i = 0; i < candidates.size(); ++i) {
      run_matmul(backend, plan, g, scratch, 0.0f, candidates[i].algo);  // warm-up
      BS_CUDA_CHECK(cudaEventRecord(start, backend.stream()));
      for (int it = 0; it < iterations; ++it) run_matmul(backend, plan, g, scratch, 0.0f, candidates[i].algo);
      BS_CUDA_CHECK(cudaEventRecord(stop, backend.stream()));
      BS_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      BS_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (i == 0 || ms < best_ms) {
        best = i;
        best_ms = ms;
      }
    }
  } catch (...) {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    backend.deallocate(scratch, scratch_bytes);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  backend.deallocate(scratch, scratch_bytes);
  return best;
}

struct KeyedGemm {
  PlanKey key;
  uint32_t align_a, align_b, align_d;
  cublasComputeType_t compute;
};

KeyedGemm plan_key(CudaBackend& backend, const RowMajorGemm& g) {
  const GemmSettings& settings = backend_settings(backend);
  const int64_t es_a = static_cast<int64_t>(dtype_size(g.dtype)), es_b = static_cast<int64_t>(dtype_size(g.b_type())),
                es_d = static_cast<int64_t>(dtype_size(g.d_type()));
  const bool batched = g.batch > 1;
  const uint32_t align_a = alignment_bytes({address_of(g.a), g.lda * es_a, batched ? g.stride_a * es_a : 0});
  const uint32_t align_b = alignment_bytes({address_of(g.b), g.ldb * es_b, batched ? g.stride_b * es_b : 0});
  const uint32_t align_d = alignment_bytes({address_of(g.d), g.ldd * es_d, batched ? g.stride_d * es_d : 0});
  // The heuristic reads the bias pointer's alignment from the descriptor, so a plan made for an
  // aligned bias must not serve a less aligned one.
  const uint32_t align_bias = uses_bias(g.epilogue) ? alignment_bytes({address_of(g.bias)}) : 16;
  const cublasComputeType_t compute =
      g.dtype == DType::f32 && settings.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const PlanKey key{static_cast<int>(g.dtype), g.m, g.n, g.k, g.lda, g.ldb, g.ldd,
                    batched ? g.stride_a : 0, batched ? g.stride_b : 0, batched ? g.stride_d : 0,
                    g.batch, g.trans_b, static_cast<int>(g.epilogue), g.beta != 0.0f,
                    align_a, align_b, align_d, align_bias, static_cast<int>(compute),
                    static_cast<int>(g.b_type()), static_cast<int>(g.d_type()), static_cast<int>(g.bias_type()),
                    g.fp8() && g.fast_accum, g.fp8() && g.amax_d != nullptr};
  return KeyedGemm{key, align_a, align_b, align_d, compute};
}

std::string no_algorithm_message(const RowMajorGemm& g, const KeyedGemm& keyed) {
  return "cuBLASLt has no algorithm for GEMM " + describe(g) + " with alignments A " + std::to_string(keyed.align_a) +
         ", B " + std::to_string(keyed.align_b) + ", D " + std::to_string(keyed.align_d) +
         " bytes (leading dimensions lda " + std::to_string(g.lda) + ", ldb " + std::to_string(g.ldb) + ", ldd " +
         std::to_string(g.ldd) + " elements; rows that are a multiple of 16 bytes give 16-byte alignment)";
}

// The cached plan of g, made (and with autotune, timed) on first use. When cuBLASLt has no
// algorithm: an error naming the shape and alignments, or, with may_refuse, nullptr (and the
// refusal is cached, so the heuristic is asked once per shape).
Plan* plan_for(CudaBackend& backend, const RowMajorGemm& g, bool may_refuse = false) {
  const GemmSettings& settings = backend_settings(backend);
  const KeyedGemm keyed = plan_key(backend, g);
  const PlanKey& key = keyed.key;
  const uint32_t align_a = keyed.align_a, align_b = keyed.align_b, align_d = keyed.align_d;
  const cublasComputeType_t compute = keyed.compute;
  if (plan_cache(backend).refused().count(key) != 0) {
    if (may_refuse) return nullptr;
    throw Error(ErrorKind::runtime, no_algorithm_message(g, keyed));
  }
  auto& plans = plan_cache(backend).plans();
  auto found = plans.find(key);
  // A cached plan serves every later call, except that one made without autotuning (autotune
  // was off then, or a graph capture was open) is made again once autotuning may run.
  if (found != plans.end() && (found->second.autotuned || !settings.autotune || backend.capturing())) {
    return &found->second;
  }

  Plan plan;
  try {
    BS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F));
    const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = CUBLAS_OP_N;
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
    const cublasLtEpilogue_t epilogue = cublas_epilogue(g.epilogue);
    BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (g.fp8()) {
      const int8_t fast = g.fast_accum ? 1 : 0;
      BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
      if (uses_bias(g.epilogue)) {
        const int32_t bias_type = cuda_type(g.bias_type());
        BS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                       sizeof bias_type));
      }
    }
    set_call_pointers(plan, g);
    // Column-major views (see the header): B is [n, k] (op N) or [k, n] (op T); A is [k, m]; D is [n, m].
    plan.layout_b = g.trans_b ? make_layout(g.b_type(), g.k, g.n, g.ldb, g.batch, g.stride_b)
                              : make_layout(g.b_type(), g.n, g.k, g.ldb, g.batch, g.stride_b);
    plan.layout_a = make_layout(g.dtype, g.k, g.m, g.lda, g.batch, g.stride_a);
    plan.layout_d = make_layout(g.d_type(), g.n, g.m, g.ldd, g.batch, g.stride_d);
    if (g.fp8()) {
      const DType c_type = is_fp8(g.d_type()) ? g.bias_type() : g.d_type();
      plan.layout_c = make_layout(c_type, g.n, g.m, g.ldd, g.batch, g.stride_d);
    }

    cublasLtMatmulPreference_t preference = nullptr;
    BS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    std::vector<cublasLtMatmulHeuristicResult_t> results(
        static_cast<size_t>(settings.autotune ? std::max(1, settings.autotune_candidates) : 1));
    int found_count = 0;
    try {
      const size_t workspace = backend.workspace_bytes();
      BS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace, sizeof workspace));
      // cuBLAS's A is our B, its B is our A; C and D are our D.
      BS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                           &align_b, sizeof align_b));
      BS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                           &align_a, sizeof align_a));
      BS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                           &align_d, sizeof align_d));
      BS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                           &align_d, sizeof align_d));
      // cuBLASLt says "no algorithm" in two ways: success with a count of 0, or (documented as
      // "no heuristic function available for current configuration", and what it returns in
      // practice for e.g. alignments or epilogues no kernel accepts) CUBLAS_STATUS_NOT_SUPPORTED.
      // Both must reach the explicit error below, which names the shape and the alignments;
      // BS_CUBLAS_CHECK alone turned the second into a bare status name.
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          backend.cublaslt(), plan.desc, plan.layout_b, plan.layout_a,
          plan.layout_c != nullptr ? plan.layout_c : plan.layout_d, plan.layout_d, preference,
          static_cast<int>(results.size()), results.data(), &found_count);
      if (status == CUBLAS_STATUS_NOT_SUPPORTED) found_count = 0;
      else BS_CUBLAS_CHECK(status);
    } catch (...) {
      cublasLtMatmulPreferenceDestroy(preference);
      throw;
    }
    cublasLtMatmulPreferenceDestroy(preference);
    if (found_count <= 0) {
      if (may_refuse) {
        destroy(plan);
        plan_cache(backend).refused().insert(key);
        return nullptr;
      }
      throw Error(ErrorKind::runtime, no_algorithm_message(g, keyed));
    }
    results.resize(static_cast<size_t>(found_count));
    size_t chosen = 0;
    if (settings.autotune && !backend.capturing()) {
      if (results.size() > 1) chosen = autotune(backend, plan, g, results);
      plan.autotuned = true;
    }
    plan.algo = results[chosen].algo;
    plan.workspace = results[chosen].workspaceSize;
  } catch (...) {
    destroy(plan);
    throw;
  }
  if (found != plans.end()) {  // re-planned for autotuning: the new plan replaces the old one
    destroy(found->second);
    found->second = plan;
    return &found->second;
  }
  return &plans.emplace(key, plan).first->second;
}

}  // namespace

bool epilogue_available(Context& ctx, const RowMajorGemm& g) {
  if (g.epilogue == Epilogue::none) return true;
  CudaBackend& backend = cuda_backend(ctx);
  std::string why;
  if (backend_settings(backend).force_epilogue_fallback) {
    why = "GemmSettings::force_epilogue_fallback is set (a test and diagnostic knob)";
  } else if (g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0 && plan_for(backend, g, /*may_refuse=*/true) == nullptr) {
    why = "cuBLASLt's heuristic has no algorithm for it";
  } else {
    return true;
  }
  const PlanKey key = plan_key(backend, g).key;
  if (plan_cache(backend).noted().insert(key).second) {
    std::fprintf(stderr,
                 "blockscope: note: GEMM %s: the %s epilogue is not used: %s; running the DEFAULT epilogue and "
                 "separate bias/GELU kernels instead (they show in the kernel table)\n",
                 describe(g).c_str(), epilogue_name(g.epilogue), why.c_str());
  }
  return false;
}

void gemm(Context& ctx, const RowMajorGemm& g) {
  CudaBackend& backend = cuda_backend(ctx);
  BS_CHECK(g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0, "empty GEMM ", describe(g), " must be skipped by the caller");
  BS_CHECK(g.lda >= g.k && g.ldd >= g.n && g.ldb >= (g.trans_b ? g.k : g.n), "leading dimensions too small for ",
           describe(g), ": lda ", g.lda, " ldb ", g.ldb, " ldd ", g.ldd);
  BS_CHECK(!uses_bias(g.epilogue) || g.bias != nullptr, "epilogue ", epilogue_name(g.epilogue), " needs a bias");
  BS_CHECK(!g.fp8() || (g.trans_b && g.beta == 0.0f && g.batch == 1), "FP8 GEMM ", describe(g),
           ": the weight must be [n, k], beta 0, one batch entry");
  check_element_aligned(g, "A", g.a, g.dtype);
  check_element_aligned(g, "B", g.b, g.b_type());
  check_element_aligned(g, "D", g.d, g.d_type());
  if (uses_bias(g.epilogue)) check_element_aligned(g, "bias", g.bias, g.bias_type());

  // The plan (heuristic query, and with GemmSettings::autotune the timed candidate runs) is
  // made before the kernel scope opens: inside it, the first call's kernel event would span
  // every autotune launch (device time, and the CUPTI name joined from all of their kernels).
  Plan& plan = *plan_for(backend, g);
  profiler::KernelScope scope(ctx, g.name);
  set_call_pointers(plan, g);  // the descriptor is shared by every call of this shape
  try {
    run_matmul(backend, plan, g, g.d, g.beta, plan.algo);
  } catch (const Error& error) {
    throw Error(error.kind(), std::string("GEMM ") + describe(g) + " in op '" + ctx.scope_path() +
                                  "' failed: " + error.what());
  }
}

}  // namespace blockscope::ops::cuda::cublaslt
