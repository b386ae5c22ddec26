// Standalone oneDNN matmul benchmark for comparing oneDNN versions (2.x vs 3.x) on the
// linear-layer shapes of a GPT-2-small block. No project headers: compile it directly
// against whichever oneDNN you want to measure, e.g.
//
//   g++ -O2 -std=c++17 -fopenmp onednn_matmul_versions.cpp -ldnnl -o mm_v2            # system 2.6
//   g++ -O2 -std=c++17 -fopenmp -I$ROOT/include onednn_matmul_versions.cpp
//       -L$ROOT/lib -Wl,-rpath,$ROOT/lib -ldnnl -o mm_v3                               # wheel 3.2
//
// bench/tools/onednn_versions.sh does both builds and runs them interleaved.
//
// Each case: Y[M,N] = X[M,K] * W^T + bias[N], W stored [N,K] row-major.
//   dtype  f32 | bf16    (src, weights, bias and dst all in dtype; accumulation in f32)
//   layout plain         weights md {K,N} with strides {1,K} (W used transposed in place)
//          blocked       weights md format_tag::any, reordered once from plain, untimed
// One primitive per case, 3 warm-up runs, then timed runs (execute + stream.wait()) until at
// least --min-time seconds (default 0.5, --quick: 0.05 and only the first shape) have passed.
// Inputs and weights stay the same across iterations, so they are cache-warm where they fit.
//
// Output: '#' comment lines (oneDNN version, OpenMP threads), a CSV column header line
// (unless --no-header), then one CSV row per case:
//   onednn_version,dtype,layout,M,N,K,implementation,best_us,median_us,gflops
// gflops = 2*M*N*K / best time. A case oneDNN cannot create is printed with implementation
// "unimplemented" and empty timing fields.

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using dnnl::memory;
using dims = memory::dims;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Shape {
  int64_t m, n, k;
};

struct Options {
  bool quick = false;
  bool header = true;
  double min_time_s = 0.5;
};

const char* dtype_name(dt d) { return d == dt::f32 ? "f32" : "bf16"; }

std::string version_string() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

// Plain f32 host data wrapped as a oneDNN memory, converted by reorder into `dst_md` (which may be
// bf16 and/or a blocked layout). Using reorder keeps the code free of any bf16 bit twiddling.
memory make_filled(const dnnl::engine& eng, dnnl::stream& s, const memory::desc& plain_f32_md,
                   const memory::desc& dst_md, std::mt19937& rng) {
  memory src(plain_f32_md, eng);
  float* p = static_cast<float*>(src.get_data_handle());
  const size_t count = plain_f32_md.get_size() / sizeof(float);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (size_t i = 0; i < count; ++i) p[i] = dist(rng);
  memory dst(dst_md, eng);
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  return dst;
}

dnnl::matmul::primitive_desc make_pd(const dnnl::engine& eng, const memory::desc& src_md,
                                     const memory::desc& wei_md, const memory::desc& bias_md,
                                     const memory::desc& dst_md) {
  dnnl::primitive_attr attr;  // no scales / post-ops: plain matmul + bias
#if DNNL_VERSION_MAJOR >= 3
  // 3.x: operation descriptors are gone; primitive_desc takes the engine and mds directly.
  return dnnl::matmul::primitive_desc(eng, src_md, wei_md, bias_md, dst_md, attr);
#else
  // 2.x: build a matmul::desc first, then primitive_desc(desc, attr, engine).
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), attr, eng);
#endif
}

void run_case(const dnnl::engine& eng, dnnl::stream& s, const Shape& sh, dt dtype, bool blocked,
              const Options& opt, const std::string& ver) {
  const int64_t M = sh.m, N = sh.n, K = sh.k;
  std::mt19937 rng(static_cast<unsigned>(M * 131 + N * 17 + K));

  const memory::desc src_md({M, K}, dtype, tag::ab);
  const memory::desc wei_plain_md({K, N}, dtype, dims{1, K});  // W[N,K] row-major seen as Wt[K,N]
  const memory::desc wei_req_md = blocked ? memory::desc({K, N}, dtype, tag::any) : wei_plain_md;
  const memory::desc bias_md({1, N}, dtype, tag::ab);
  const memory::desc dst_md({M, N}, dtype, tag::ab);

  const char* layout = blocked ? "blocked" : "plain";
  dnnl::matmul::primitive_desc pd;
  try {
    pd = make_pd(eng, src_md, wei_req_md, bias_md, dst_md);
  } catch (const dnnl::error& e) {
    std::printf("%s,%s,%s,%lld,%lld,%lld,unimplemented,,,\n", ver.c_str(), dtype_name(dtype), layout,
                (long long)M, (long long)N, (long long)K);
    std::fflush(stdout);
    return;
  }
  const std::string impl = pd.impl_info_str();

  // Inputs from f32 random data; weights go plain f32 [N,K] -> (dtype, chosen layout) once here.
  memory x = make_filled(eng, s, memory::desc({M, K}, dt::f32, tag::ab), src_md, rng);
  memory w = make_filled(eng, s, memory::desc({K, N}, dt::f32, dims{1, K}), pd.weights_desc(), rng);
  memory b = make_filled(eng, s, memory::desc({1, N}, dt::f32, tag::ab), bias_md, rng);
  memory y(pd.dst_desc(), eng);

  dnnl::matmul mm(pd);
  const std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}};

  for (int i = 0; i < 3; ++i) mm.execute(s, args);
  s.wait();

  using clock = std::chrono::steady_clock;
  std::vector<double> us;
  const auto t_start = clock::now();
  const double min_time = opt.quick ? 0.05 : opt.min_time_s;
  for (;;) {
    const auto t0 = clock::now();
    mm.execute(s, args);
    s.wait();
    const auto t1 = clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (std::chrono::duration<double>(t1 - t_start).count() >= min_time && us.size() >= 3) break;
  }
  std::sort(us.begin(), us.end());
  const double best = us.front();
  const size_t n = us.size();
  const double median = (n % 2) ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  const double gflops = 2.0 * double(M) * double(N) * double(K) / (best * 1e3);

  std::printf("%s,%s,%s,%lld,%lld,%lld,%s,%.2f,%.2f,%.2f\n", ver.c_str(), dtype_name(dtype), layout,
              (long long)M, (long long)N, (long long)K, impl.c_str(), best, median, gflops);
  std::fflush(stdout);
}

void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--quick] [--min-time SECONDS] [--no-header]\n", argv0);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      opt.quick = true;
    } else if (!std::strcmp(argv[i], "--no-header")) {
      opt.header = false;
    } else if (!std::strcmp(argv[i], "--min-time") && i + 1 < argc) {
      opt.min_time_s = std::atof(argv[++i]);
    } else {
      usage(argv[0]);
      return 2;
    }
  }

  const std::vector<Shape> shapes = {
      {512, 3072, 768},  // MLP up, 2 x 256 tokens
      {256, 2304, 768},  // QKV projection
      {256, 768, 768},   // attention output projection
      {256, 3072, 768},  // MLP up
      {256, 768, 3072},  // MLP down
  };

  const dnnl_version_t* v = dnnl_version();
  const std::string ver = version_string();
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = -1;  // built without -fopenmp: unknown
#endif
  std::printf("# onednn %s (hash %s, cpu_runtime %u) built against headers %d.%d.%d, omp_threads %d%s\n",
              ver.c_str(), v->hash ? v->hash : "?", v->cpu_runtime, DNNL_VERSION_MAJOR,
              DNNL_VERSION_MINOR, DNNL_VERSION_PATCH, threads, opt.quick ? ", quick" : "");
  if (opt.header)
    std::printf("onednn_version,dtype,layout,M,N,K,implementation,best_us,median_us,gflops\n");
  std::fflush(stdout);

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);

  const size_t n_shapes = opt.quick ? 1 : shapes.size();
  for (size_t i = 0; i < n_shapes; ++i)
    for (dt dtype : {dt::f32, dt::bf16})
      for (bool blocked : {false, true}) run_case(eng, s, shapes[i], dtype, blocked, opt, ver);
  return 0;
}
