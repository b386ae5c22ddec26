// fused_matmul on oneDNN's matmul primitive: bias as the primitive's bias argument, beta as a
// sum post-op, tanh-GELU as an eltwise post-op, alpha as the output scale -- one primitive,
// one pass over C, as cuBLASLt's epilogues do on CUDA. Primitives are created once per shape,
// strides, dtypes and epilogue and kept in a process-wide cache (creating one costs far more
// than running a small one).
//
// Weights are passed in their stored (plain row-major) layout, and oneDNN's brgemm matmul packs
// B panels itself per call. A read-only B (a loaded weight: Storage::read_only) may instead run
// from a copy reordered once into the blocked layout oneDNN picks for it (`format_tag::any`),
// kept with the weight's storage (Storage::derived, counted by the allocator): +2–5 % in f32
// and +8–26 % in bf16 on one Sapphire Rapids core, −1 % on one shape (bench/NOTES.md), so the
// choice is measured per shape on its first call (the plan), not fixed.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
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

// [rows, cols] view of a row-major operand; `trans` swaps the strides.
memory::desc operand_desc(DType dtype, int64_t rows, int64_t cols, int64_t ld, bool trans) {
  return memory::desc({rows, cols}, dnnl_type(dtype), trans ? memory::dims{1, ld} : memory::dims{ld, 1});
}

// [batch, rows, cols] view of a row-major operand; `trans` swaps the two inner strides.
memory::desc operand_desc(DType dtype, int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t batch_stride,
                          bool trans) {
  // A batch of one has no meaningful batch stride; give oneDNN a consistent one.
  const int64_t bs = batch == 1 ? rows * cols : batch_stride;
  const memory::dims strides = trans ? memory::dims{bs, 1, ld} : memory::dims{bs, ld, 1};
  return memory::desc({batch, rows, cols}, dnnl_type(dtype), strides);
}

// One primitive and the memory descs it wants.
struct Variant {
  dnnl::matmul primitive;
  memory::desc src, weights, bias, dst;
  std::string implementation;
};

struct CacheEntry {
  bool supported = false;
  bool has_bias = false;
  Variant plain;  // on the operands as stored
  // The packed candidate, for a read-only B (batch 1): the same matmul as 2-D descs, on weights
  // in the layout oneDNN picks for them (format_tag::any), where that differs from the stored
  // one; `stored_weights` is B as stored, what pack_weights reorders from.
  bool packs = false;
  Variant packed;
  memory::desc stored_weights;
  MatmulPlan plan;  // decided on the first call with a read-only B
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

Variant variant(const dnnl::matmul::primitive_desc& pd) {
  Variant v;
  v.implementation = pd.impl_info_str();
  if (v.implementation.rfind("ref", 0) == 0) return v;
  v.primitive = dnnl::matmul(pd);
  v.src = pd.src_desc();
  v.weights = pd.weights_desc();
  v.bias = pd.bias_desc();
  v.dst = pd.dst_desc();
  return v;
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
    entry.plain = variant(pd);
    // oneDNN's reference kernels are plain loops, far slower than widening to f32 for sgemm.
    if (entry.plain.implementation.rfind("ref", 0) == 0) return entry;
    entry.has_bias = mm.bias != nullptr;
    entry.supported = true;
    if (mm.batch == 1) try {  // weights are one matrix; batched B (attention) is never a weight
      // 2-D: oneDNN 2.6 keeps 3-D weights asked as `any` in the plain layout.
      const memory::desc a2 = operand_desc(mm.a.dtype, mm.m, mm.k, mm.a.ld, mm.a.trans);
      const memory::desc c2 = operand_desc(mm.c_dtype, mm.m, mm.n, mm.ldc, false);
      const memory::desc any({mm.k, mm.n}, dnnl_type(mm.b.dtype), memory::format_tag::any);
      dnnl::matmul::primitive_desc packed_pd;
      if (mm.bias != nullptr) {
        const memory::desc bias({1, mm.n}, dnnl_type(mm.bias_dtype), memory::dims{mm.n, 1});
        packed_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a2, any, bias, c2), attr, onednn().engine);
      } else {
        packed_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a2, any, c2), attr, onednn().engine);
      }
      entry.stored_weights = operand_desc(mm.b.dtype, mm.k, mm.n, mm.b.ld, mm.b.trans);
      const Variant packed = variant(packed_pd);
      if (packed.weights != entry.stored_weights && packed.implementation.rfind("ref", 0) != 0) {
        entry.packs = true;
        entry.packed = packed;
      }
    } catch (const dnnl::error&) {
      entry.packs = false;  // no packed form: the stored layout runs
    }
  } catch (const dnnl::error&) {
    entry.plain.implementation.clear();  // no kernel for these dtypes on this CPU
    entry.supported = false;
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
// stays valid after the lock is released; only its plan changes later, under the lock.
CacheEntry& entry_for(const Matmul& mm) {
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

// Runs variant `v` on mm's operands with B at `weights` (as v wants it) into `dst`.
void execute(const Matmul& mm, const CacheEntry& entry, const Variant& v, const void* weights, void* dst) {
  Engine& e = onednn();
  // memory objects wrap the caller's pointers; oneDNN does not write A, B or the bias.
  memory a(v.src, e.engine, const_cast<void*>(mm.a.data));
  memory b(v.weights, e.engine, const_cast<void*>(weights));
  memory c(v.dst, e.engine, dst);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (entry.has_bias) args.emplace(DNNL_ARG_BIAS, memory(v.bias, e.engine, const_cast<void*>(mm.bias)));
  try {
    v.primitive.execute(e.stream, args);
    e.stream.wait();
  } catch (const dnnl::error& err) {
    BS_CHECK(false, "oneDNN matmul ", mm.batch, "x", mm.m, "x", mm.n, "x", mm.k, " failed: ", err.what());
  }
}

// Writes B, as stored, into `packed` in the entry's packed layout.
void pack_weights(const Matmul& mm, const CacheEntry& entry, void* packed) {
  Engine& e = onednn();
  memory plain(entry.stored_weights, e.engine, const_cast<void*>(mm.b.data));
  memory blocked(entry.packed.weights, e.engine, packed);
  dnnl::reorder(plain, blocked).execute(e.stream, plain, blocked);
  e.stream.wait();
}

// Zeroed memory for `desc`, allocated by oneDNN (timing scratch).
memory zeroed(const memory::desc& desc) {
  memory m(desc, onednn().engine);
  std::memset(m.get_data_handle(), 0, desc.get_size());
  return m;
}

double g_penalty_us[2] = {0, 0};  // tests: added to the plain and packed timings

// Best of 3 (after one warm-up) of `run`, in microseconds, plus the test penalty.
template <typename Run>
double best_us(Run run, double penalty_us) {
  run();
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return best + penalty_us;
}

// The plan for a read-only B of this entry's shape: forced by BLOCKSCOPE_CPU_WEIGHTS, plain where
// there is nothing to pack, else the faster of the two timed into scratch (never into C: its
// beta post-op would read what the timings wrote).
MatmulPlan decide(const Matmul& mm, const CacheEntry& entry) {
  MatmulPlan plan;
  const char* forced = std::getenv("BLOCKSCOPE_CPU_WEIGHTS");
  const std::string force = forced == nullptr ? "auto" : forced;
  if (force != "auto" && force != "plain" && force != "packed") {
    throw InputError("BLOCKSCOPE_CPU_WEIGHTS='" + force + "': expected auto, plain or packed");
  }
  if (!entry.packs) {
    plan.layout = "plain";
    plan.reason = "the stored layout is the one oneDNN picks";
    return plan;
  }
  if (force != "auto") {
    plan.layout = force;
    plan.reason = "BLOCKSCOPE_CPU_WEIGHTS=" + force;
    return plan;
  }
  const memory dst = zeroed(entry.plain.dst), packed = zeroed(entry.packed.weights);
  pack_weights(mm, entry, packed.get_data_handle());
  plan.plain_us = best_us([&] { execute(mm, entry, entry.plain, mm.b.data, dst.get_data_handle()); }, g_penalty_us[0]);
  plan.packed_us =
      best_us([&] { execute(mm, entry, entry.packed, packed.get_data_handle(), dst.get_data_handle()); }, g_penalty_us[1]);
  plan.layout = plan.packed_us < plan.plain_us ? "packed" : "plain";
  plan.reason = "timed";
  return plan;
}

// The entry's plan for a read-only B, decided on first use.
const MatmulPlan& plan_for(const Matmul& mm, CacheEntry& entry) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (entry.plan.layout.empty()) entry.plan = decide(mm, entry);
  return entry.plan;
}

}  // namespace

bool fused_matmul(const Matmul& mm) {
  check_matmul(mm);
  CacheEntry& entry = entry_for(mm);
  if (!entry.supported) return false;
  if (mm.b_read_only != nullptr && entry.packs && plan_for(mm, entry).layout == "packed") {
    // The packed copy of this B, made once and kept with its storage: keyed by where B starts in
    // the storage and by everything the layout depends on.
    const auto offset = static_cast<const char*>(mm.b.data) - static_cast<const char*>(mm.b_read_only->data());
    const std::string key = "onednn packed @" + std::to_string(offset) + " " + cache_key(mm);
    const std::shared_ptr<Storage> packed = mm.b_read_only->derived(
        key, entry.packed.weights.get_size(), [&](void* dst) { pack_weights(mm, entry, dst); });
    execute(mm, entry, entry.packed, packed->data(), mm.c);
    return true;
  }
  execute(mm, entry, entry.plain, mm.b.data, mm.c);
  return true;
}

bool packs_weights() { return true; }

MatmulPlan matmul_plan(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  std::lock_guard<std::mutex> lock(cache().mutex);
  return entry.plan;
}

void set_matmul_plan_penalty_for_tests(const std::string& layout, double microseconds) {
  BS_CHECK(layout == "plain" || layout == "packed", "set_matmul_plan_penalty_for_tests: unknown layout ", layout);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  g_penalty_us[layout == "plain" ? 0 : 1] = microseconds;
  for (auto& [key, entry] : c.entries) entry.plan = MatmulPlan{};
}

const char* matmul_implementation(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  if (!entry.supported) return "";
  return entry.plan.layout == "packed" ? entry.packed.implementation.c_str() : entry.plain.implementation.c_str();
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
MatmulPlan matmul_plan(const Matmul&) { return {}; }
bool packs_weights() { return false; }
void set_matmul_plan_penalty_for_tests(const std::string&, double) {}

#endif

}  // namespace blockscope::cpu
