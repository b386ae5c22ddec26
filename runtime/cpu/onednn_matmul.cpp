// fused_matmul on oneDNN's matmul primitive: bias as the primitive's bias argument, beta as a
// sum post-op, tanh-GELU as an eltwise post-op, alpha as the output scale -- one primitive,
// one pass over C, as cuBLASLt's epilogues do on CUDA. Primitives are created once per shape,
// strides, dtypes and epilogue and kept in a process-wide cache (creating one costs far more
// than running a small one).
//
// Weights are passed in their stored (plain row-major) layout, and oneDNN's brgemm matmul packs
// B panels itself per call. A read-only B (a loaded weight: Storage::read_only) has a plan
// instead, the CPU twin of cuBLASLt's heuristic + autotune: its candidates -- the stored layout,
// a copy reordered once into the blocked layout oneDNN picks (`format_tag::any`, kept with the
// weight's storage: Storage::derived, counted by the allocator), and in f32 each linked
// library's sgemm with the epilogue as a separate pass -- are timed on the first call and the
// fastest kept, on disk per machine (cpu::machine_key; the timing and the cache:
// runtime/cpu/matmul_plan.h). Packing gave +2–5 % in f32 and +8–26 %
// in bf16 on one Sapphire Rapids core and −1 % on one shape (bench/NOTES.md): measured, not fixed.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/cpu/gemm.h"
#include "runtime/cpu/matmul_plan.h"
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
    case DType::fp8_e4m3:  // FP8 GEMMs dequantise first (the storage rule, runtime/dtype.h)
    case DType::fp8_e5m2: break;
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
  std::string implementation;  // oneDNN's name for the kernel: "brg:avx512_core_amx"
  std::string ran;             // what fused_matmul reports: "onednn brg:avx512_core_amx[, packed weights]"
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
  std::string plan_gemm_choice;  // the cpu.gemm it was decided under
  std::string plan_ran;          // what the plan's choice reports (fused_matmul's result)
};

// A float as the shortest text that reads back to it ("0.125", "0.0883883").
std::string fmt_float(float value) {
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, written.ptr);
}

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

// The shape as the plan cache and `info` name it, the leading dimensions only where they are not
// the contiguous ones:
//   "f32 256x2304x768 B^T -> f32 +bias f32 +gelu_tanh"
// (a plan is made for a weight, one matrix: batched B is never a weight).
std::string shape_name(const Matmul& mm) {
  const int64_t lda = mm.a.trans ? mm.m : mm.k, ldb = mm.b.trans ? mm.k : mm.n;  // contiguous
  std::string name = std::string(dtype_name(mm.a.dtype)) +
                     (mm.b.dtype != mm.a.dtype ? std::string("*") + dtype_name(mm.b.dtype) : "") + " " +
                     std::to_string(mm.m) + "x" + std::to_string(mm.n) + "x" + std::to_string(mm.k);
  const bool strided = mm.a.ld != lda || mm.b.ld != ldb || mm.ldc != mm.n;
  if (strided) name += " lda=" + std::to_string(mm.a.ld) + " ldb=" + std::to_string(mm.b.ld);
  if (mm.a.trans) name += " A^T";
  if (mm.b.trans) name += " B^T";
  if (strided) name += " ldc=" + std::to_string(mm.ldc);
  name += std::string(" -> ") + dtype_name(mm.c_dtype);
  if (mm.bias != nullptr) name += std::string(" +bias ") + dtype_name(mm.bias_dtype);
  if (mm.gelu_tanh) name += " +gelu_tanh";
  if (mm.beta != 0.0f) name += " +beta " + fmt_float(mm.beta);
  if (mm.alpha != 1.0f) name += " *alpha " + fmt_float(mm.alpha);
  return name;
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
    entry.plain.ran = "onednn " + entry.plain.implementation;
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
        entry.packed.ran = "onednn " + packed.implementation + ", packed weights";
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

// Whether the sgemm candidates (f32 GEMM, then the epilogue as a pass) can run `mm`: f32
// throughout, one matrix (a weight), and a row function for its GELU.
bool sgemm_can_run(const Matmul& mm) {
  const bool f32 = mm.a.dtype == DType::f32 && mm.b.dtype == DType::f32 && mm.c_dtype == DType::f32 &&
                   (mm.bias == nullptr || mm.bias_dtype == DType::f32);
  return f32 && mm.batch == 1 && (!mm.gelu_tanh || mm.gelu_tanh_row != nullptr);
}

// C = act(alpha · op(A) · op(B) + bias + beta · C) with `library`'s sgemm into `c` (ldc), then
// bias and GELU as one pass over its rows.
void sgemm_then_epilogue(GemmLibrary library, const Matmul& mm, float* c) {
  sgemm_with(library, mm.a.trans, mm.b.trans, mm.m, mm.n, mm.k, mm.alpha, static_cast<const float*>(mm.a.data), mm.a.ld,
             static_cast<const float*>(mm.b.data), mm.b.ld, mm.beta, c, mm.ldc);
  if (mm.bias == nullptr && !mm.gelu_tanh) return;
  const float* bias = static_cast<const float*>(mm.bias);
#pragma omp parallel for schedule(static) if (mm.m * mm.n >= (int64_t{1} << 15))
  for (int64_t i = 0; i < mm.m; ++i) {
    float* row = c + i * mm.ldc;
    if (bias != nullptr)
      for (int64_t j = 0; j < mm.n; ++j) row[j] += bias[j];
    if (mm.gelu_tanh) mm.gelu_tanh_row(row, mm.n);
  }
}

// Whether a candidate is an sgemm form ("openblas.sgemm"): f32 GEMM, then the epilogue as a pass.
bool is_sgemm_form(const std::string& name) {
  return name.size() > 6 && name.compare(name.size() - 6, 6, ".sgemm") == 0;
}

// A candidate's name ("onednn.packed", "openblas.sgemm") to its library.
GemmLibrary library_of(const std::string& candidate) {
  for (GemmLibrary library : linked_gemm_libraries())
    if (candidate.rfind(std::string(gemm_library_name(library)) + ".", 0) == 0) return library;
  BS_CHECK(false, "unknown GEMM plan candidate ", candidate);
  return GemmLibrary::builtin;
}

// What a chosen candidate reports to the profiler (fused_matmul's result; kept in the entry).
std::string ran_by(const std::string& candidate, const Matmul& mm, const CacheEntry& entry) {
  if (candidate == "onednn.plain") return entry.plain.ran;
  if (candidate == "onednn.packed") return entry.packed.ran;
  return std::string(sgemm_implementation(library_of(candidate))) +
         (mm.bias != nullptr || mm.gelu_tanh ? ", epilogue as a separate pass" : "");
}

// The candidates for a read-only B of this shape, in the order they are timed (oneDNN's matmul
// first: a slow candidate after it is cut off early). BLOCKSCOPE_CPU_WEIGHTS=plain|packed leaves
// one oneDNN layout; cpu.gemm=onednn leaves oneDNN's; the sgemm forms only where they can run.
std::vector<std::string> candidates(const Matmul& mm, const CacheEntry& entry) {
  const char* forced = std::getenv("BLOCKSCOPE_CPU_WEIGHTS");
  const std::string force = forced == nullptr ? "auto" : forced;
  if (force != "auto" && force != "plain" && force != "packed") {
    throw InputError("BLOCKSCOPE_CPU_WEIGHTS='" + force + "': expected auto, plain or packed");
  }
  if (force == "packed" && entry.packs) return {"onednn.packed"};
  if (force != "auto") return {"onednn.plain"};
  std::vector<std::string> out = {"onednn.plain"};
  if (entry.packs) out.push_back("onednn.packed");
  if (!sgemm_can_run(mm)) return out;
  const std::optional<GemmLibrary> forced_library = forced_gemm_library();
  for (GemmLibrary library : {GemmLibrary::openblas, GemmLibrary::onednn, GemmLibrary::builtin}) {
    const std::vector<GemmLibrary>& linked = linked_gemm_libraries();
    if (std::find(linked.begin(), linked.end(), library) == linked.end()) continue;
    if (forced_library && *forced_library != library) continue;
    out.push_back(std::string(gemm_library_name(library)) + ".sgemm");
  }
  return out;
}

// Runs candidate `name` on mm's operands into `c` (C's layout); `packed`: B packed, for
// onednn.packed.
void run_candidate(const std::string& name, const Matmul& mm, const CacheEntry& entry, const void* packed, void* c) {
  if (name == "onednn.plain") return execute(mm, entry, entry.plain, mm.b.data, c);
  if (name == "onednn.packed") return execute(mm, entry, entry.packed, packed, c);
  sgemm_then_epilogue(library_of(name), mm, static_cast<float*>(c));
}

// The plan for a read-only B of this entry's shape: the only candidate where there is one; the
// plan cached on disk for this machine; else every candidate timed into scratch (never into C:
// a beta post-op would read what the timings wrote; plan::time_candidates) and the fastest
// written to the cache.
MatmulPlan decide(const Matmul& mm, const CacheEntry& entry) {
  MatmulPlan chosen;
  const std::vector<std::string> names = candidates(mm, entry);
  if (names.size() == 1) {
    chosen.choice = names[0];
    const char* forced = std::getenv("BLOCKSCOPE_CPU_WEIGHTS");
    chosen.reason = forced != nullptr && std::string(forced) != "auto" ? "BLOCKSCOPE_CPU_WEIGHTS=" + std::string(forced)
                                                                       : "the only candidate";
    return chosen;
  }
  // Timed once per machine, libraries, thread count and shape: a plan on disk for this machine
  // (cpu::machine_key) is used as it is; any other is ignored (timed anew and added beside it).
  const std::string shape = shape_name(mm) + (forced_gemm_library() ? " (cpu.gemm=" + gemm_choice() + ")" : "");
  if (plan::read_cached(shape, names, &chosen)) return chosen;
  const memory dst = zeroed(entry.plain.dst);
  const memory packed = entry.packs ? zeroed(entry.packed.weights) : memory();
  if (entry.packs) pack_weights(mm, entry, packed.get_data_handle());
  std::vector<plan::Candidate> timed;
  for (const std::string& name : names) {
    plan::Candidate candidate;
    candidate.name = name;
    candidate.run = [&, name] {
      run_candidate(name, mm, entry, entry.packs ? packed.get_data_handle() : nullptr, dst.get_data_handle());
    };
    if (is_sgemm_form(name) && mm.m >= 64) {  // probed on an eighth of the rows
      Matmul rows = mm;
      rows.m = mm.m / 8;
      candidate.probe = [&, name, rows] {
        sgemm_then_epilogue(library_of(name), rows, static_cast<float*>(dst.get_data_handle()));
      };
      candidate.probe_scale = static_cast<double>(mm.m) / static_cast<double>(rows.m);
    }
    timed.push_back(candidate);
  }
  chosen = plan::time_candidates(timed);
  const std::string kernel = chosen.choice == "onednn.packed" ? entry.packed.implementation
                             : chosen.choice == "onednn.plain" ? entry.plain.implementation
                                                               : ran_by(chosen.choice, mm, entry);
  plan::write_cached(shape, kernel, &chosen);
  return chosen;
}

// The entry's plan for a read-only B, decided on first use and again when cpu.gemm changes.
const MatmulPlan& plan_for(const Matmul& mm, CacheEntry& entry) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (entry.plan.choice.empty() || entry.plan_gemm_choice != gemm_choice()) {
    entry.plan = decide(mm, entry);
    entry.plan_gemm_choice = gemm_choice();
    entry.plan_ran = ran_by(entry.plan.choice, mm, entry);
  }
  return entry.plan;
}

}  // namespace

const char* fused_matmul(const Matmul& mm) {
  check_matmul(mm);
  // cpu.gemm=openblas or builtin: every GEMM is the caller's sgemm on that library.
  if (forced_gemm_library().value_or(GemmLibrary::onednn) != GemmLibrary::onednn) return nullptr;
  CacheEntry& entry = entry_for(mm);
  if (!entry.supported) return nullptr;
  // Activations' GEMMs (attention's batched products) run on oneDNN's primitive, unplanned: the
  // naive and fused-softmax attention paths are checked against each other's error, which a
  // per-machine library choice there would make depend on timings.
  if (mm.b_read_only == nullptr) {
    execute(mm, entry, entry.plain, mm.b.data, mm.c);
    return entry.plain.ran.c_str();
  }
  const MatmulPlan& chosen = plan_for(mm, entry);
  const void* packed = nullptr;
  if (chosen.choice == "onednn.packed") {
    // The packed copy of this B, made once and kept with its storage: keyed by where B starts in
    // the storage and by everything the layout depends on.
    const auto offset = static_cast<const char*>(mm.b.data) - static_cast<const char*>(mm.b_read_only->data());
    const std::string key = "onednn packed @" + std::to_string(offset) + " " + cache_key(mm);
    packed = mm.b_read_only->derived(key, entry.packed.weights.get_size(), [&](void* dst) { pack_weights(mm, entry, dst); })
                 ->data();
  }
  run_candidate(chosen.choice, mm, entry, packed, mm.c);
  return entry.plan_ran.c_str();
}

bool packs_weights() { return true; }

MatmulPlan matmul_plan(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  std::lock_guard<std::mutex> lock(cache().mutex);
  return entry.plan;
}

void set_matmul_plan_penalty_for_tests(const std::string& candidate, double microseconds) {
  plan::set_penalty_us(candidate, microseconds);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [key, entry] : c.entries) entry.plan = MatmulPlan{};
}

const char* matmul_implementation(const Matmul& mm) {
  check_matmul(mm);
  const CacheEntry& entry = entry_for(mm);
  if (!entry.supported) return "";
  return entry.plan.choice == "onednn.packed" ? entry.packed.implementation.c_str() : entry.plain.implementation.c_str();
}

MatmulCacheStats matmul_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

#else  // no oneDNN in this build: callers always take their f32 path

const char* fused_matmul(const Matmul&) { return nullptr; }
const char* matmul_implementation(const Matmul&) { return ""; }
MatmulCacheStats matmul_cache_stats() { return {}; }
MatmulPlan matmul_plan(const Matmul&) { return {}; }
bool packs_weights() { return false; }
void set_matmul_plan_penalty_for_tests(const std::string&, double) {}

#endif

}  // namespace blockscope::cpu
