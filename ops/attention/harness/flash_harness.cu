// Standalone harness for the flash attention kernels, llm.c style: a float64 CPU reference, the
// kernels launched with <<<>>>, and a check. It includes only device code
// (ops/attention/flash_kernels.cuh, ops/common/cuda/split_combine.cuh): no runtime, no profiler,
// no blockscope library, so one command builds it —
//
//   nvcc-sim -O2 -I. ops/attention/harness/flash_harness.cu -o flash_harness && ./flash_harness
//   nvcc -O2 -arch=sm_90 -I. ops/attention/harness/flash_harness.cu -o flash_harness   (a GPU)
//
// and a kernel change can be tried without building the project. ctest runs it in SIM builds
// (sim/test/CMakeLists.txt: flash_harness). Cases:
//   1. bf16, D = 64, GQA (H = 2 over Hkv = 1), causal, Sq = 5 over Sk = 300 keys split 4 ways
//      (the last split sees no key tile: an empty partial) and merged by split_combine_kernel;
//   2. f16, D = 128, causal, Sq = 70 > one query tile, Sk = 90, no split;
//   3. f32, D = 40 (the FP32-core kernel), not causal, Sq = 20, Sk = 33.
// Each prints its largest error against the reference; exit status 1 if any is over its bound.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops/attention/flash_kernels.cuh"
#include "ops/common/cuda/split_combine.cuh"

namespace k = blockscope::ops::cuda::kernels;

#define CHECK_CUDA(call)                                                                             \
  do {                                                                                               \
    const cudaError_t err_ = (call);                                                                 \
    if (err_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(2);                                                                                  \
    }                                                                                                \
  } while (0)

template <typename T>
T to_t(float v);
template <>
float to_t<float>(float v) { return v; }
template <>
__half to_t<__half>(float v) { return __float2half_rn(v); }
template <>
__nv_bfloat16 to_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
float from_t(float v) { return v; }
float from_t(__half v) { return __half2float(v); }
float from_t(__nv_bfloat16 v) { return __bfloat162float(v); }

struct Case {
  const char* name;
  int batch, heads, kv_heads, sq, sk, d;
  bool causal;
  int splits;    // > 1: the tensor-core kernel over split keys, then split_combine_kernel
  double bound;  // largest |out − reference| allowed (outputs are means of values in [−1, 1])
};

// float64 attention of the rounded inputs, [B, H, S, D] contiguous, bottom-right causal mask.
std::vector<double> reference(const Case& c, const std::vector<float>& q, const std::vector<float>& kk,
                              const std::vector<float>& v, double scale) {
  std::vector<double> out(static_cast<size_t>(c.batch) * c.heads * c.sq * c.d, 0.0);
  const int group = c.heads / c.kv_heads;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.sq; ++i) {
        const float* qi = &q[((static_cast<size_t>(b) * c.heads + h) * c.sq + i) * c.d];
        const size_t kv = (static_cast<size_t>(b) * c.kv_heads + h / group) * c.sk;
        std::vector<double> s(c.sk, -INFINITY);
        double top = -INFINITY;
        for (int j = 0; j < c.sk; ++j) {
          if (c.causal && j > i + c.sk - c.sq) continue;
          double dot = 0;
          for (int e = 0; e < c.d; ++e) dot += static_cast<double>(qi[e]) * kk[(kv + j) * c.d + e];
          s[j] = dot * scale;
          top = std::max(top, s[j]);
        }
        if (top == -INFINITY) continue;  // no visible key: zeros
        double sum = 0;
        for (int j = 0; j < c.sk; ++j) sum += std::exp(s[j] - top);
        double* o = &out[((static_cast<size_t>(b) * c.heads + h) * c.sq + i) * c.d];
        for (int j = 0; j < c.sk; ++j) {
          const double w = std::exp(s[j] - top) / sum;
          for (int e = 0; e < c.d; ++e) o[e] += w * v[(kv + j) * c.d + e];
        }
      }
  return out;
}

template <typename T>
T* upload(const std::vector<float>& host, std::vector<float>& rounded) {
  std::vector<T> values(host.size());
  rounded.resize(host.size());
  for (size_t i = 0; i < host.size(); ++i) values[i] = to_t<T>(host[i]), rounded[i] = from_t(values[i]);
  T* device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, values.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(device, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <typename T, int D>
bool run(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = uniform(rng);
    return x;
  };
  const size_t q_elems = static_cast<size_t>(c.batch) * c.heads * c.sq * c.d;
  const size_t kv_elems = static_cast<size_t>(c.batch) * c.kv_heads * c.sk * c.d;
  std::vector<float> q_r, k_r, v_r;
  T* q = upload<T>(fill(q_elems), q_r);
  T* kk = upload<T>(fill(kv_elems), k_r);
  T* v = upload<T>(fill(kv_elems), v_r);
  T* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, q_elems * sizeof(T)));
  const double scale = 0.5;  // peaked rows: the splits' lse differ by several units

  k::FlashParams p{};
  p.q = q, p.k = kk, p.v = v, p.out = out;
  p.q_row_stride = c.d, p.q_head_stride = static_cast<int64_t>(c.sq) * c.d, p.q_batch_stride = p.q_head_stride * c.heads;
  p.k_row_stride = c.d, p.k_head_stride = static_cast<int64_t>(c.sk) * c.d, p.k_batch_stride = p.k_head_stride * c.kv_heads;
  p.v_row_stride = p.k_row_stride, p.v_head_stride = p.k_head_stride, p.v_batch_stride = p.k_batch_stride;
  p.o_row_stride = p.q_row_stride, p.o_head_stride = p.q_head_stride, p.o_batch_stride = p.q_batch_stride;
  p.sq = c.sq, p.sk = c.sk, p.group = c.heads / c.kv_heads, p.causal = c.causal;
  p.scale_log2 = static_cast<float>(scale) * k::kLog2e;
  p.splits = c.splits, p.heads = c.heads, p.batch = c.batch;

  float* partial_out = nullptr;
  float* partial_lse = nullptr;
  if constexpr (D > 0) {  // the tensor-core kernel
    const size_t smem = static_cast<size_t>(k::kFlashRows + 2 * k::kFlashKeys) * D * sizeof(T);
    CHECK_CUDA(cudaFuncSetAttribute(k::flash_attention_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    const int query_tiles = (c.sq + k::kFlashRows - 1) / k::kFlashRows;
    const int64_t rows = static_cast<int64_t>(c.batch) * c.heads * c.sq;
    if (c.splits > 1) {
      CHECK_CUDA(cudaMalloc(&partial_out, static_cast<size_t>(c.splits * rows * D) * sizeof(float)));
      CHECK_CUDA(cudaMalloc(&partial_lse, static_cast<size_t>(c.splits * rows) * sizeof(float)));
      p.partial_out = partial_out, p.partial_lse = partial_lse;
    }
    k::flash_attention_kernel<T, D><<<dim3(query_tiles * c.splits, c.heads, c.batch), k::kFlashThreads, smem>>>(p);
    CHECK_CUDA(cudaGetLastError());
    if (c.splits > 1) {
      k::SplitCombineParams combine{};
      combine.partial_out = partial_out, combine.partial_lse = partial_lse, combine.out = out;
      combine.batch_stride = p.o_batch_stride, combine.head_stride = p.o_head_stride, combine.row_stride = p.o_row_stride;
      combine.rows = rows, combine.heads = c.heads, combine.queries = c.sq, combine.d = D, combine.splits = c.splits;
      k::split_combine_kernel<T><<<k::split_combine_blocks(rows), k::split_combine_threads(D)>>>(combine);
      CHECK_CUDA(cudaGetLastError());
    }
  } else {  // the FP32-core kernel
    k::flash_attention_simple_kernel<T>
        <<<dim3((c.sq + k::kSimpleRows - 1) / k::kSimpleRows, c.heads, c.batch), k::kSimpleThreads>>>(p, c.d);
    CHECK_CUDA(cudaGetLastError());
  }
  CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<T> got(q_elems);
  CHECK_CUDA(cudaMemcpy(got.data(), out, q_elems * sizeof(T), cudaMemcpyDeviceToHost));
  const std::vector<double> want = reference(c, q_r, k_r, v_r, scale);
  double worst = 0;
  for (size_t i = 0; i < q_elems; ++i) {
    const double error = std::fabs(from_t(got[i]) - want[i]);
    if (!(error <= worst)) worst = error;  // NaN sticks
  }
  const bool ok = worst <= c.bound;
  std::printf("%-44s max |error| %.3e (bound %.1e)  %s\n", c.name, worst, c.bound, ok ? "ok" : "FAILED");
  for (void* ptr : {static_cast<void*>(q), static_cast<void*>(kk), static_cast<void*>(v), static_cast<void*>(out),
                    static_cast<void*>(partial_out), static_cast<void*>(partial_lse)})
    CHECK_CUDA(cudaFree(ptr));
  return ok;
}

int main() {
  bool ok = true;
  ok &= run<__nv_bfloat16, 64>({"bf16 D=64 GQA causal, 4 key splits + combine", 1, 2, 1, 5, 300, 64, true, 4, 3e-3}, 1);
  ok &= run<__half, 128>({"f16 D=128 causal, 2 query tiles", 2, 2, 2, 70, 90, 128, true, 1, 1e-3}, 2);
  ok &= run<float, 0>({"f32 D=40 (FP32 cores)", 1, 3, 3, 20, 33, 40, false, 1, 2e-6}, 3);
  std::printf(ok ? "flash_harness: all cases within their bounds\n" : "flash_harness: FAILED\n");
  return ok ? 0 : 1;
}
