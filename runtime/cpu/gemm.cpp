#include "runtime/cpu/gemm.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#ifdef BLOCKSCOPE_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#endif
#ifdef BLOCKSCOPE_WITH_OPENBLAS
#include <cblas.h>
#endif

#include "runtime/error.h"

namespace blockscope::cpu {

void sgemm_builtin(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // Blocks of rows of C in parallel; within a block, k is tiled so a panel of B stays in cache.
  // B is first packed as [k, n] row-major so the inner loop is a contiguous axpy over n.
  // Each depth block is summed on its own and then added to the running total, as a blocked
  // BLAS kernel adds its register tile to C per k panel: one f32 accumulator over all of k
  // would round k times in a row, and on attention's P·V over 4097 keys that doubled the error
  // of the libraries' GEMMs (and made the naive path miss its bound now and then).
  constexpr int64_t kRowBlock = 32, kDepthBlock = 256;
  std::vector<float> packed_b;
  const float* bk = b;
  int64_t ldbk = ldb;
  if (trans_b) {
    packed_b.resize(static_cast<size_t>(k * n));
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) packed_b[p * n + j] = b[j * ldb + p];
    bk = packed_b.data();
    ldbk = n;
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i1 = std::min(m, i0 + kRowBlock);
    std::vector<float> acc(static_cast<size_t>((i1 - i0) * n), 0.0f);    // [rows, n] over all of k
    std::vector<float> block(static_cast<size_t>((i1 - i0) * n), 0.0f);  // [rows, n] one depth block
    for (int64_t p0 = 0; p0 < k; p0 += kDepthBlock) {
      const int64_t p1 = std::min(k, p0 + kDepthBlock);
      std::fill(block.begin(), block.end(), 0.0f);
      for (int64_t i = i0; i < i1; ++i) {
        float* row = block.data() + (i - i0) * n;
        for (int64_t p = p0; p < p1; ++p) {
          const float av = trans_a ? a[p * lda + i] : a[i * lda + p];
          const float* brow = bk + p * ldbk;
          for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
        }
      }
      for (size_t e = 0; e < acc.size(); ++e) acc[e] += block[e];
    }
    for (int64_t i = i0; i < i1; ++i) {
      const float* row = acc.data() + (i - i0) * n;
      float* crow = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) crow[j] = alpha * row[j] + (beta == 0.0f ? 0.0f : beta * crow[j]);
    }
  }
}

const std::vector<GemmLibrary>& linked_gemm_libraries() {
  static const std::vector<GemmLibrary> linked = {
#ifdef BLOCKSCOPE_WITH_ONEDNN
      GemmLibrary::onednn,
#endif
#ifdef BLOCKSCOPE_WITH_OPENBLAS
      GemmLibrary::openblas,
#endif
      GemmLibrary::builtin,
  };
  return linked;
}

const char* gemm_library_name(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::onednn: return "onednn";
    case GemmLibrary::openblas: return "openblas";
    case GemmLibrary::builtin: return "builtin";
  }
  return "?";
}

namespace {
// The run's cpu.gemm: a GemmLibrary's value, or -1 for "auto".
std::atomic<int> g_forced{-1};
}  // namespace

void set_gemm_choice(const std::string& choice) {
  if (choice == "auto") {
    g_forced = -1;
    return;
  }
  std::string names = "auto";
  for (GemmLibrary library : linked_gemm_libraries()) {
    names += std::string(", ") + gemm_library_name(library);
    if (choice == gemm_library_name(library)) {
      g_forced = static_cast<int>(library);
      return;
    }
  }
  throw InputError("cpu.gemm: '" + choice + "' is not a GEMM library of this build (it has " + names + ")");
}

std::optional<GemmLibrary> forced_gemm_library() {
  const int forced = g_forced;
  if (forced < 0) return std::nullopt;
  return static_cast<GemmLibrary>(forced);
}

std::string gemm_choice() {
  const std::optional<GemmLibrary> forced = forced_gemm_library();
  return forced ? gemm_library_name(*forced) : "auto";
}

GemmLibrary sgemm_library() { return forced_gemm_library().value_or(linked_gemm_libraries().front()); }

void sgemm_with(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS convention: C = beta * C (and beta == 0 writes zeros)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (library != GemmLibrary::builtin && beta == 0.0f) {
    // BLAS may read C when beta == 0 in some kernels; clear NaN poison first.
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  }
  switch (library) {
    case GemmLibrary::onednn: {
#ifdef BLOCKSCOPE_WITH_ONEDNN
      // dnnl_sgemm is row-major; inside an OpenMP parallel region (flash's tiles) it runs on the
      // calling thread.
      const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                              beta, c, ldc);
      BS_CHECK(status == dnnl_success, "dnnl_sgemm ", m, "x", n, "x", k, " failed with status ", static_cast<int>(status));
      return;
#else
      break;
#endif
    }
    case GemmLibrary::openblas: {
#ifdef BLOCKSCOPE_WITH_OPENBLAS
      cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                  static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                  static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
      return;
#else
      break;
#endif
    }
    case GemmLibrary::builtin:
      sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
  }
  BS_CHECK(false, "sgemm_with: ", gemm_library_name(library), " is not linked into this build");
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_with(sgemm_library(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* sgemm_implementation() { return sgemm_implementation(sgemm_library()); }

const char* sgemm_implementation(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::onednn: return "onednn dnnl_sgemm";
    case GemmLibrary::openblas: return "openblas cblas_sgemm";
    case GemmLibrary::builtin: return "builtin sgemm";
  }
  return "?";
}

void set_thread_count(int n) {
  omp_set_num_threads(n);
#ifdef BLOCKSCOPE_WITH_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

namespace {

// Physical cores among the CPUs this process may run on: CPUs that share a
// thread_siblings_list are one core (a CPU without topology information counts as one).
int physical_cores_in_affinity_mask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int fallback = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return fallback;
  std::set<std::string> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    std::ifstream file("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string siblings;
    if (!(file >> siblings)) siblings = "cpu" + std::to_string(cpu);
    cores.insert(siblings);
  }
  return cores.empty() ? fallback : static_cast<int>(cores.size());
}

}  // namespace

DefaultThreads default_thread_count() {
  DefaultThreads d;
  d.cores = physical_cores_in_affinity_mask();
  // OpenMP's own variable wins, as it would for any OpenMP program ("4" or a nested list "4,2":
  // each level a count from 1 to 4096, digits only). Anything else (abc, 0, -1, " 4") is not a
  // thread count: the cores rule applies and `note` says so, naming the value.
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && *env != '\0') {
    const std::string text = env;
    bool valid = true;
    int first = 0;
    for (size_t start = 0; valid && start <= text.size();) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string level = text.substr(start, comma - start);
      valid = !level.empty() && level.size() <= 4 && level.find_first_not_of("0123456789") == std::string::npos &&
              std::stoi(level) >= 1 && std::stoi(level) <= 4096;
      if (valid && start == 0) first = std::stoi(level);
      start = comma + 1;
    }
    if (valid) {
      d.count = first;
      d.reason = "OMP_NUM_THREADS=" + text;
      return d;
    }
    d.note = "OMP_NUM_THREADS='" + text + "' is not a thread count (a number from 1 to 4096, or a list like 4,2): ignored";
  }
  d.count = std::max(1, d.cores - 1);
  d.reason = d.cores == 1 ? std::string("1 core") : std::to_string(d.cores) + " cores less one for the system";
  return d;
}

const char* gemm_library() { return gemm_library_name(linked_gemm_libraries().front()); }

std::string gemm_library_version() {
  std::string out;
#ifdef BLOCKSCOPE_WITH_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  out += "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
         (v->hash != nullptr ? v->hash : "") + ") + ";
#endif
#ifdef BLOCKSCOPE_WITH_OPENBLAS
  // The config names the version and build; the core is the kernel set it picked on this CPU.
  out += std::string("openblas (") + openblas_get_config() + ", core " + openblas_get_corename() + ") + ";
#endif
  return out + "builtin";
}

}  // namespace blockscope::cpu
