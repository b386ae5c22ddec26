// fused_matmul on oneDNN's matmul primitive: bias as the primitive's bias argument, beta as a
// sum post-op, tanh-GELU as an eltwise post-op, alpha as the output scale -- one primitive,
// one pass over C, as cuBLASLt's epilogues do on CUDA. Primitives are created once per shape,
// strides, dtypes and epilogue and kept in a process-wide cache (creating one costs far more
// than running a small one).
//
// Weights are passed in their stored (plain row-major) layout; oneDNN's brgemm matmul packs B
// panels itself per call. Weights reordered once into the blocked layout it would choose
// (`format_tag::any`) ran −2 … +11 % faster in bf16 and −3 … +5 % in f32 on this project's
// shapes (bench/linear_bench.cpp `onednn_raw_matmul`, bench/NOTES.md): not done, since it
// needs a second copy of every weight and a handle tying that copy to the weight it came from.
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/cpu/gemm.h"
#include "runtime/error.h"

#ifdef BLOCKSCOPE_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace blockscope::cpu {

#ifdef BLOCKSCOPE_WITH_ONEDNN
namespace {

using dnnl::memory;

memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return memory::data_type::f32;
    case DType::f16: return memory::data_type::f16;
    case DType::bf16: return memory::data_type::bf16;
  }
  return memory::data_type::undef;
}

// [batch, rows, cols] view of a row-major operand; `trans` swaps the two inner strides.
memory::desc operand_desc(DType dtype, int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t batch_stride,
                          bool trans) {
  // A batch of one has no meaningful batch stride; give oneDNN a consistent one.
  const int64_t bs = batch == 1 ? rows * cols : batch_stride;
  const memory::dims strides = trans ? memory::dims{bs, 1, ld} : memory::dims{bs, ld, 1};
  return memory::desc({batch, rows, cols}, dnnl_type(dtype), strides);
}

struct CacheEntry {
  bool supported = false;
  std::string implementation;
  dnnl::matmul primitive;
  memory::desc src, weights, bias, dst;  // as the primitive wants them
  bool has_bias = false;
};

// Everything a primitive depends on (not the pointers).
std::string cache_key(const Matmul& mm) {
  const int64_t fields[] = {mm.batch,
                            mm.m,
                            mm.n,
                            mm.k,
                            static_cast<int64_t>(mm.a.dtype),
                            mm.a.ld,
                            mm.batch == 1 ? 0 : mm.a.batch_stride,
                            mm.a.trans,
                            static_cast<int64_t>(mm.b.dtype),
                            mm.b.ld,
                            mm.batch == 1 ? 0 : mm.b.batch_stride,
                            mm.b.trans,
                            static_cast<int64_t>(mm.c_dtype),
                            mm.ldc,
                            mm.batch == 1 ? 0 : mm.c_batch_stride,
                            mm.bias != nullptr,
                            static_cast<int64_t>(mm.bias_dtype),
                            mm.gelu_tanh};
  std::string key(reinterpret_cast<const char*>(fields), sizeof(fields));
  key.append(reinterpret_cast<const char*>(&mm.alpha), sizeof(float));
  key.append(reinterpret_cast<const char*>(&mm.beta), sizeof(float));
  return key;
}

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Engine& onednn() {
  static Engine e;
  return e;
}

CacheEntry create(const Matmul& mm) {
  CacheEntry entry;
  const memory::desc a = operand_desc(mm.a.dtype, mm.batch, mm.m, mm.k, mm.a.ld, mm.a.batch_stride, mm.a.trans);
  const memory::desc b = operand_desc(mm.b.dtype, mm.batch, mm.k, mm.n, mm.b.ld, mm.b.batch_stride, mm.b.trans);
  const memory::desc c = operand_desc(mm.c_dtype, mm.batch, mm.m, mm.n, mm.ldc, mm.c_batch_stride, false);
  dnnl::primitive_attr attr;
  if (mm.alpha != 1.0f) attr.set_output_scales(0, {mm.alpha});
  dnnl::post_ops ops;
  if (mm.beta != 0.0f) ops.append_sum(mm.beta);
  if (mm.gelu_tanh) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  try {
    dnnl::matmul::primitive_desc pd;
    if (mm.bias != nullptr) {
      const memory::desc bias({1, 1, mm.n}, dnnl_type(mm.bias_dtype), memory::dims{mm.n, mm.n, 1});
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, bias, c), attr, onednn().engine);
    } else {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, onednn().engine);
    }
    entry.implementation = pd.impl_info_str();
    // oneDNN's reference kernels are plain loops, far slower than widening to f32 for sgemm.
    if (entry.implementation.rfind("ref", 0) == 0) return entry;
    entry.primitive = dnnl::matmul(pd);
    entry.src = pd.src_desc();
    entry.weights = pd.weights_desc();
    entry.dst = pd.dst_desc();
    entry.has_bias = mm.bias != nullptr;
    if (entry.has_bias) entry.bias = pd.bias_desc();
    entry.supported = true;
  } catch (const dnnl::error&) {
    entry.implementation.clear();  // no kernel for these dtypes on this CPU
  }
  return entry;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, CacheEntry> entries;
  MatmulCacheStats stats;
};
Cache& cache() {
  static Cache c;
  return c;
}

// The cached entry for mm (created on first use). Entries are never removed, so the reference
// stays valid after the lock is released.
const CacheEntry& entry_for(const Matmul& mm) {
  Cache& c = cache();
  const std::string key = cache_key(mm);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  if (it != c.entries.end()) {
    ++c.stats.hits;
    return it->second;
  }
  ++c.stats.misses;
  CacheEntry& entry = c.entries.emplace(key, create(mm)).first->second;
  ++(entry.supported ? c.stats.primitives : c.stats.unsupported);
  return entry;
}

void check_matmul(const Matmul& mm) {
  BS_CHECK(mm.batch >= 1 && mm.m >= 1 && mm.n >= 1 && mm.k >= 1, "fused_matmul: empty matmul ", mm.batch, "x", mm.m,
           "x", mm.n, "x", mm.k);
  BS_CHECK(mm.alpha == 1.0f || mm.bias == nullptr, "fused_matmul: alpha ", mm.alpha,
           " with a bias is not supported (the output scale would scale the bias too)");
}

}  // namespace

bool fused_matmul(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  if (!entry.supported) return false;
  Engine& e = onednn();
  // memory objects wrap the caller's pointers; oneDNN does not write A, B or the bias.
  memory a(entry.src, e.engine, const_cast<void*>(mm.a.data));
  memory b(entry.weights, e.engine, const_cast<void*>(mm.b.data));
  memory c(entry.dst, e.engine, mm.c);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (entry.has_bias) args.emplace(DNNL_ARG_BIAS, memory(entry.bias, e.engine, const_cast<void*>(mm.bias)));
  try {
    entry.primitive.execute(e.stream, args);
    e.stream.wait();
  } catch (const dnnl::error& err) {
    BS_CHECK(false, "oneDNN matmul ", mm.batch, "x", mm.m, "x", mm.n, "x", mm.k, " failed: ", err.what());
  }
  return true;
}

const char* matmul_implementation(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  return entry.supported ? entry.implementation.c_str() : "";
}

MatmulCacheStats matmul_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

#else  // no oneDNN in this build: callers always take their f32 path

bool fused_matmul(const Matmul&) { return false; }
const char* matmul_implementation(const Matmul&) { return ""; }
MatmulCacheStats matmul_cache_stats() { return {}; }

#endif

}  // namespace blockscope::cpu
