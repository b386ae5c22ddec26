// CPU GEMMs. The libraries a build links (CMake BLOCKSCOPE_CPU_GEMM): oneDNN and OpenBLAS where
// found, and a built-in cache-blocked kernel parallelised with OpenMP, always. Row-major throughout.
//
// Two entry points:
//   sgemm         f32 BLAS-style C = alpha·op(A)·op(B) + beta·C on the run's library (cpu.gemm:
//                 oneDNN's dnnl_sgemm, OpenBLAS's cblas_sgemm, or the built-in kernel);
//   fused_matmul  a batched matmul with its epilogue (bias, tanh-GELU, beta) in one oneDNN
//                 matmul primitive, on the operands' own dtypes (bf16 natively on AVX512_BF16 /
//                 AMX CPUs) -- the CPU twin of a cuBLASLt epilogue -- or, for a loaded weight, the
//                 candidate its plan timed fastest (below). Builds without oneDNN, a cpu.gemm
//                 other than auto or onednn, and dtypes oneDNN has no kernel for on this CPU
//                 report null and the caller widens to f32 and uses sgemm.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace blockscope::cpu {

// C[m, n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m, k] (A stored [m, k] with
// leading dimension lda, or [k, m] when trans_a) and op(B) is [k, n] (B stored [k, n], or
// [n, k] when trans_b). When beta == 0, C is not read (NaN in C does not propagate).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

enum class GemmLibrary { onednn, openblas, builtin };
const char* gemm_library_name(GemmLibrary library);  // "onednn", "openblas", "builtin"
// The libraries this build links, the default first: oneDNN, OpenBLAS (where found), built-in.
const std::vector<GemmLibrary>& linked_gemm_libraries();
// The same sgemm on one library (InternalError where it is not linked).
void sgemm_with(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The run's `cpu.gemm`: "auto" (the default library's sgemm; weights planned per shape) or a
// linked library's name, used for every GEMM. An InputError naming the linked ones otherwise.
// Process-wide, like the thread count.
void set_gemm_choice(const std::string& choice);
std::string gemm_choice();
std::optional<GemmLibrary> forced_gemm_library();  // cpu.gemm's library; nullopt for auto
// Sets cpu.gemm for a scope and puts the run's choice back (the peak measurement runs the default
// library whatever the run forces). Not for code that runs while other threads run GEMMs.
class ScopedGemmChoice {
 public:
  explicit ScopedGemmChoice(const std::string& choice) : previous_(gemm_choice()) { set_gemm_choice(choice); }
  ~ScopedGemmChoice() { set_gemm_choice(previous_); }
  ScopedGemmChoice(const ScopedGemmChoice&) = delete;
  ScopedGemmChoice& operator=(const ScopedGemmChoice&) = delete;

 private:
  std::string previous_;
};
// The library sgemm runs: cpu.gemm's, else the default.
GemmLibrary sgemm_library();
// What sgemm runs on `library`, for the profiler: "onednn dnnl_sgemm", "openblas cblas_sgemm",
// "builtin sgemm"; without an argument, on the run's library (sgemm_library()).
const char* sgemm_implementation(GemmLibrary library);
const char* sgemm_implementation();

// The same with the built-in kernel only (tests compare it with the library's).
void sgemm_builtin(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// One operand of a fused matmul: `batch` row-major matrices `batch_stride` elements apart,
// rows `ld` elements apart. `trans` reads the stored matrix transposed (A stored [k, m], B
// stored [n, k]).
struct MatmulOperand {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool trans = false;
};

// For every b < batch, with op(A[b]) [m, k], op(B[b]) [k, n], C[b] [m, n]:
//   C[b] = act(alpha · op(A[b]) · op(B[b]) + bias + beta · C[b])
// accumulated and finished in f32, rounded once into C's dtype. bias is [n] (broadcast over
// rows and batches) or null; act is tanh-GELU or the identity. alpha != 1 with a bias is not
// supported (oneDNN would scale the bias too). When beta == 0, C is not read.
struct Matmul {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatmulOperand a, b;
  void* c = nullptr;
  DType c_dtype = DType::f32;
  int64_t ldc = 0;
  int64_t c_batch_stride = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* bias = nullptr;
  DType bias_dtype = DType::f32;
  bool gelu_tanh = false;
  // The same tanh-GELU as a function over one f32 row, for candidates that apply the epilogue as
  // a pass over C after an sgemm (the ops' vectorised one); null: such candidates are not tried
  // on a GELU epilogue.
  void (*gelu_tanh_row)(float* row, int64_t n) = nullptr;
  // B's storage when it is read-only (a loaded weight), else null. Such a B may run from a copy
  // packed once into oneDNN's blocked layout, kept with the storage, where that measured faster
  // for this shape (the plan, below).
  Storage* b_read_only = nullptr;
};

// Runs `mm` and returns what ran, for the profiler ("onednn brg:avx512_core_amx", "..., packed
// weights", "openblas cblas_sgemm, epilogue as a separate pass"; valid until this shape's plan is
// made again -- a cpu.gemm change --, so callers copy it): one oneDNN matmul primitive, cached per
// shape, strides, dtypes and epilogue, or for a read-only B the candidate its plan chose (below).
// Returns null -- having done nothing -- when the build has no oneDNN, cpu.gemm names another
// library, or oneDNN has no kernel for these dtypes on this CPU (f16 without AVX512-FP16, say).
const char* fused_matmul(const Matmul& mm);

// How fused_matmul runs a read-only B (a loaded weight) of one shape: the plan's choice among
//   "onednn.plain"    oneDNN's matmul on the weights as stored, the epilogue as post-ops;
//   "onednn.packed"   the same on a copy packed once into the layout oneDNN picks (where that is
//                     not the stored one), kept with the weight's storage;
//   "<library>.sgemm" in f32, each linked library's sgemm (openblas, onednn, builtin; cpu.gemm
//                     may name one) with bias and GELU as a separate pass over C.
// Decided on the first call: BLOCKSCOPE_CPU_WEIGHTS=plain|packed forces a oneDNN layout; a single
// candidate is taken as it is; else the plan cached on disk for this machine (cpu::machine_key:
// CPU, feature flags, library versions, threads) and shape, when it holds together and names
// this run's candidates; else every candidate timed into scratch (after a warm-up, best of 3 runs
// or of those that fit in 100 ms; one over 4x the best so far is cut off, an sgemm form judged
// first on an eighth of the rows) and the fastest cached.
struct MatmulPlan {
  std::string choice;  // a candidate's name; "" before the first call with a read-only B
  std::map<std::string, double> timings_us;  // the candidates timed, microseconds (empty: not timed)
  std::vector<std::string> cut_off;          // candidates dropped after their warm-up run
  // "timed", "cached" (timed by an earlier run on this machine), "the only candidate",
  // "BLOCKSCOPE_CPU_WEIGHTS=packed"
  std::string reason;
  std::string cache_path;  // the plan cache it was read from or written to; "" for neither
};
MatmulPlan matmul_plan(const Matmul& mm);
// Whether this build may keep packed copies of read-only weights (oneDNN builds): what a
// workload's memory estimate must leave room for.
bool packs_weights();
// The plans cached on disk (BLOCKSCOPE_PLAN_CACHE, else cpu-gemm-plans.json beside the peak
// cache), for `blockscope info`: this machine's, by shape, and how many other machines have some.
struct CachedPlan {
  std::string shape;  // "f32 256x2304x768 lda=768 ldb=768 B^T ldc=2304 -> f32 +bias f32"
  MatmulPlan plan;
  std::string kernel;  // the kernel the choice runs ("brg:avx512_core_amx", "openblas cblas_sgemm, ...")
};
struct CachedPlans {
  std::string path;     // "" where plans are not cached (BLOCKSCOPE_PLAN_CACHE=off)
  std::string machine;  // this machine's key
  std::vector<CachedPlan> plans;
  int damaged = 0;         // this machine's entries that do not hold together (measured anew when used)
  int other_machines = 0;  // keys for other CPUs, libraries or thread counts (ignored here)
};
CachedPlans cached_matmul_plans();

// Tests: microseconds added to each timing of one candidate ("onednn.packed"), to show a slow
// candidate is never chosen. Plans made so far are forgotten.
void set_matmul_plan_penalty_for_tests(const std::string& candidate, double microseconds);

// The fused-matmul primitive cache (oneDNN builds; zeros otherwise).
struct MatmulCacheStats {
  int64_t primitives = 0;   // shapes with a primitive
  int64_t unsupported = 0;  // shapes oneDNN has no kernel for (remembered, not retried)
  int64_t hits = 0, misses = 0;
};
MatmulCacheStats matmul_cache_stats();

// What fused_matmul's primitive for `mm` runs, as oneDNN names it ("brg:avx512_core_bf16"),
// or "" when it would return false. Creates (and caches) the primitive.
const char* matmul_implementation(const Matmul& mm);

// The default library's name (the first linked): "onednn", "openblas" or "builtin".
const char* gemm_library();
// The linked libraries and their versions as they report them at run time, what a measurement
// cached on disk depends on (cpu::machine_key): "onednn 2.6.3 (N/A) + openblas (OpenBLAS 0.3.21
// NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64, core SkylakeX) + builtin".
std::string gemm_library_version();

// Sets every CPU thread pool the backend uses to n threads: OpenMP's (the ops' loops, the
// built-in GEMM, and oneDNN, which runs on the same OpenMP team) and OpenBLAS's own pool,
// which omp_set_num_threads does not reach.
void set_thread_count(int n);

// The thread count a run uses when it asks for none (the CLI's and the benchmarks' default):
// OMP_NUM_THREADS when it is set to a positive number (any other value is named in `note` and
// ignored); else the physical cores this process
// may run on (its affinity mask, hyperthread siblings counted once) less one, and at least 1.
// The core left free is for the system and whatever else shares the machine: on a 2-core VM
// with one other busy process, two threads made a profile's steps vary by 27–46 % and run
// slower than one thread, which held within a few per cent (bench/NOTES.md has the figures).
struct DefaultThreads {
  int count = 1;
  int cores = 1;           // physical cores in the affinity mask
  std::string reason;      // "OMP_NUM_THREADS=4", "2 cores less one for the system"
  std::string note;        // OMP_NUM_THREADS set to what is not a thread count ("abc", "0"): said, then ignored
};
DefaultThreads default_thread_count();

}  // namespace blockscope::cpu
