// Decode with a KV cache: the decode attention op against float64 loops written here (every
// layout, GQA group, path, dtype and device, lengths off the page and tile sizes, pages
// shuffled, the cache poisoned past each length), the cache writes, refused calls; then the
// decode workload against the whole-sequence forward (reference/block_reference.h: step t is
// row prompt + t of one causal pass, no cache), and the profile's prefill/decode phases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/workload.h"
#include "ops/decode_attention/decode_attention.h"
#include "ops/decode_step/decode_step.h"
#include "ops/rope/rope.h"
#include "ops/kv_cache/kv_cache.h"
#include "profiler/recorder.h"
#include "profiler/session.h"
#include "profiler/summary.h"
#include "reference/accuracy.h"
#include "reference/attention_reference.h"
#include "reference/block_reference.h"
#include "reference/error_model.h"
#include "runtime/error.h"
#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_graph.h"
#endif
#include "test/accuracy_bounds.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
using ops::AttentionPath;
using ops::KvLayout;

class DecodeAttention : public ::testing::TestWithParam<std::tuple<Device, DType>> {};

Tensor random_tensor(Context& ctx, const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = ctx.empty(shape, dtype);
  from_floats(t, bt::random_floats(static_cast<size_t>(shape_numel(shape)), seed));
  return t;
}

// Softmax(q·kᵀ · scale) · v over positions [0, length), in float64: keys[p], values[p] are D
// doubles each.
std::vector<double> attend(const std::vector<double>& q, const std::vector<std::vector<double>>& keys,
                           const std::vector<std::vector<double>>& values, double scale) {
  const size_t D = q.size();
  std::vector<double> scores(keys.size()), out(D, 0.0);
  double top = -std::numeric_limits<double>::infinity(), sum = 0;
  for (size_t p = 0; p < keys.size(); ++p) {
    double dot = 0;
    for (size_t d = 0; d < D; ++d) dot += q[d] * keys[p][d];
    scores[p] = dot * scale;
    top = std::max(top, scores[p]);
  }
  for (double& s : scores) sum += (s = std::exp(s - top));
  for (size_t p = 0; p < keys.size(); ++p)
    for (size_t d = 0; d < D; ++d) out[d] += scores[p] / sum * values[p][d];
  return out;
}

// Every layout, group size and path: prompts written with one call (starts 0), the new
// token's key and value appended from a strided view with a second, then each sequence's
// query attends to its own length. The pages are poisoned with NaN first, so reading a
// position past a length (or a page the table does not give) shows.
TEST_P(DecodeAttention, MatchesFloat64OnEveryLayoutGroupAndPath) {
  const auto [device, dtype] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(device);
  Context ctx(device);
  const int64_t B = 3, Hkv = 2, D = 16;
  const std::vector<int32_t> lengths = {1, 19, 37};  // 1 token; off the page (8) and tile sizes
  const int64_t S = 37;
  for (int64_t group : {1, 4, 8}) {
    const int64_t H = Hkv * group;
    for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
      SCOPED_TRACE("group " + std::to_string(group) + ", " + ops::kv_layout_name(layout));
      const uint64_t seed = bt::fresh_seed();
      ops::KvCacheShape shape;
      shape.layout = layout;
      shape.kv_heads = Hkv;
      shape.head_dim = D;
      shape.page_size = layout == KvLayout::paged ? 8 : 40;
      for (int32_t length : lengths) shape.positions.push_back(layout == KvLayout::paged ? length : 40);
      ops::KvCache cache = ops::make_kv_cache(ctx, shape, dtype, layout == KvLayout::paged ? seed | 1 : 0);
      fill_nan(cache.k);
      fill_nan(cache.v);
      // The prompts: rows [0, length - 1) of k, v [B, Hkv, S, D].
      const Tensor k = random_tensor(ctx, {B, Hkv, S, D}, dtype, seed + 1);
      const Tensor v = random_tensor(ctx, {B, Hkv, S, D}, dtype, seed + 2);
      std::vector<int32_t> prompt_counts, last;
      for (int32_t length : lengths) prompt_counts.push_back(length - 1), last.push_back(length - 1);
      const IndexTable zeros(ctx, std::vector<int32_t>(B, 0), 1, B), counts(ctx, prompt_counts, 1, B),
          ones(ctx, std::vector<int32_t>(B, 1), 1, B), positions(ctx, last, 1, B), lens(ctx, lengths, 1, B);
      ops::kv_cache_write(ctx, k, v, cache, zeros.row(0), counts.row(0));
      // The new tokens: [B, 1, 2, Hkv, D] (k | v side by side, as a fused projection) viewed as
      // [B, Hkv, 1, D] strided.
      const Tensor kv_new = random_tensor(ctx, {B, 1, 2, Hkv, D}, dtype, seed + 3);
      const Tensor k_new = kv_new.select(2, 0).permute({0, 2, 1, 3}), v_new = kv_new.select(2, 1).permute({0, 2, 1, 3});
      ops::kv_cache_write(ctx, k_new, v_new, cache, positions.row(0), ones.row(0));
      const Tensor q = random_tensor(ctx, {B, H, D}, dtype, seed + 4);
      const double scale = 1.0 / std::sqrt(double(D));

      // The reference from the host values of what was written.
      const std::vector<double> kh = bt::to_doubles(k), vh = bt::to_doubles(v), nh = bt::to_doubles(kv_new),
                                qh = bt::to_doubles(q);
      std::vector<double> want;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h / group;
          std::vector<std::vector<double>> keys, values;
          for (int64_t p = 0; p < lengths[b]; ++p) {
            std::vector<double> key(D), value(D);
            for (int64_t d = 0; d < D; ++d) {
              const bool is_new = p == lengths[b] - 1;
              key[d] = is_new ? nh[((b * 2 + 0) * Hkv + g) * D + d] : kh[((b * Hkv + g) * S + p) * D + d];
              value[d] = is_new ? nh[((b * 2 + 1) * Hkv + g) * D + d] : vh[((b * Hkv + g) * S + p) * D + d];
            }
            keys.push_back(key);
            values.push_back(value);
          }
          const std::vector<double> qv(qh.begin() + (b * H + h) * D, qh.begin() + (b * H + h + 1) * D);
          const std::vector<double> o = attend(qv, keys, values, scale);
          want.insert(want.end(), o.begin(), o.end());
        }
      }
      for (AttentionPath path : {AttentionPath::naive, AttentionPath::flash}) {
        Tensor out = ctx.empty({B, H, D}, dtype);
        fill_nan(out);
        ops::decode_attention(ctx, q, cache, lens.row(0), out, path, static_cast<float>(scale));
        const double error = bt::max_row_relative_error(to_floats(out), want, static_cast<size_t>(D));
        const double bound = bt::attention_bound(dtype, D, 37);
        bt::report_error(std::string("decode_attention.") + ops::path_name(path) + "." + dtype_name(dtype), error, bound);
        EXPECT_LE(error, bound) << ops::path_name(path);
      }
    }
  }
}

// Long caches on few (sequence, kv head) pairs: CUDA's flash path splits each sequence's keys
// over blocks and combines the splits (a 1-position sequence beside long ones leaves splits
// empty); both paths still match float64, and the combine kernel is recorded.
TEST_P(DecodeAttention, LongCachesSplitTheKeys) {
  const auto [device, dtype] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(device);
  Context ctx(device);
  const int64_t B = 3, Hkv = 1, H = 4, D = 64;
  const std::vector<int64_t> lengths = {1, 700, 301};
  const int64_t S = 700;
  const uint64_t seed = bt::fresh_seed();
  const Tensor k = random_tensor(ctx, {B, Hkv, S, D}, dtype, seed + 1), v = random_tensor(ctx, {B, Hkv, S, D}, dtype, seed + 2);
  const Tensor q = random_tensor(ctx, {B, H, D}, dtype, seed + 3);
  const std::vector<int32_t> lens32(lengths.begin(), lengths.end());
  const IndexTable zeros(ctx, std::vector<int32_t>(B, 0), 1, B), lens(ctx, lens32, 1, B);
  const double scale = 0.125;
  const reference::RefTensor want = reference::decode_attention(reference::from_tensor(q), reference::from_tensor(k),
                                                                reference::from_tensor(v), lengths, scale);
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
    ops::KvCacheShape shape{layout, Hkv, D, layout == KvLayout::paged ? 16 : S, {}};
    for (int64_t length : lengths) shape.positions.push_back(layout == KvLayout::paged ? length : S);
    ops::KvCache cache = ops::make_kv_cache(ctx, shape, dtype, layout == KvLayout::paged ? seed | 1 : 0);
    fill_nan(cache.k);
    fill_nan(cache.v);
    ops::kv_cache_write(ctx, k, v, cache, zeros.row(0), lens.row(0));
    for (AttentionPath path : {AttentionPath::naive, AttentionPath::flash}) {
      SCOPED_TRACE(std::string(ops::kv_layout_name(layout)) + " " + ops::path_name(path));
      Tensor out = ctx.empty({B, H, D}, dtype);
      fill_nan(out);
      profiler::Recorder recorder(ctx);
      ctx.set_recorder(&recorder);
      ops::decode_attention(ctx, q, cache, lens.row(0), out, path, static_cast<float>(scale));
      ctx.set_recorder(nullptr);
      const double error = bt::max_row_relative_error(to_floats(out), want.data, static_cast<size_t>(D));
      EXPECT_LE(error, bt::attention_bound(dtype, D, S));
      if (device.is_cuda() && path == AttentionPath::flash) {
        EXPECT_EQ(bt::kernel_names(recorder),
                  (std::vector<std::string>{"flash_decode_kernel", "split_combine_kernel"}));
      }
    }
  }
}

// Each call records its kernels: naive three, flash one (two where the keys are split).
TEST_P(DecodeAttention, RecordsItsKernels) {
  const auto [device, dtype] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(device);
  Context ctx(device);
  profiler::Recorder recorder(ctx);
  ops::KvCacheShape shape{KvLayout::paged, 2, 16, 4, {5, 9}};
  ops::KvCache cache = ops::make_kv_cache(ctx, shape, dtype, 7);
  const Tensor k = random_tensor(ctx, {2, 2, 9, 16}, dtype, 1), v = random_tensor(ctx, {2, 2, 9, 16}, dtype, 2);
  const IndexTable zeros(ctx, {0, 0}, 1, 2), lengths(ctx, {5, 9}, 1, 2);
  ops::kv_cache_write(ctx, k, v, cache, zeros.row(0), lengths.row(0));
  const Tensor q = random_tensor(ctx, {2, 4, 16}, dtype, 3);
  Tensor out = ctx.empty({2, 4, 16}, dtype);
  ctx.set_recorder(&recorder);
  ops::decode_attention(ctx, q, cache, lengths.row(0), out, AttentionPath::naive, 0.25f);
  EXPECT_EQ(bt::kernel_names(recorder),
            (std::vector<std::string>{"decode_qk_kernel", "decode_softmax_kernel", "decode_pv_kernel"}));
  recorder.clear();
  ops::decode_attention(ctx, q, cache, lengths.row(0), out, AttentionPath::flash, 0.25f);
  const std::vector<std::string> flash = bt::kernel_names(recorder);
  ASSERT_FALSE(flash.empty());
  EXPECT_EQ(flash.front(), "flash_decode_kernel");
  EXPECT_LE(flash.size(), 2u);
  if (flash.size() == 2) {
    EXPECT_EQ(flash.back(), "split_combine_kernel");
  }
  ctx.set_recorder(nullptr);
}

// Refused before any work, naming the sequence, the sizes or the path.
TEST_P(DecodeAttention, RefusesWhatDoesNotFit) {
  const auto [device, dtype] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(device);
  Context ctx(device);
  ops::KvCacheShape shape{KvLayout::paged, 2, 16, 4, {5, 9}};
  ops::KvCache cache = ops::make_kv_cache(ctx, shape, dtype);
  const Tensor q = random_tensor(ctx, {2, 4, 16}, dtype, 3);
  Tensor out = ctx.empty({2, 4, 16}, dtype);
  const IndexTable past(ctx, {8, 9}, 1, 2), zero(ctx, {0, 9}, 1, 2), fine(ctx, {5, 9}, 1, 2);
  // Sequence 0 has 2 pages of 4: 8 positions.
  bt::expect_input_error([&] { ops::decode_attention(ctx, q, cache, zero.row(0), out, AttentionPath::flash, 1.0f); },
                         {"sequence 0 has length 0", "[1, 8]"});
  const IndexTable too_long(ctx, {9, 9}, 1, 2);
  bt::expect_input_error([&] { ops::decode_attention(ctx, q, cache, too_long.row(0), out, AttentionPath::naive, 1.0f); },
                         {"sequence 0 has length 9"});
  bt::expect_input_error(
      [&] { ops::decode_attention(ctx, q, cache, fine.row(0), out, AttentionPath::fused_softmax, 1.0f); },
      {"fused_softmax", "no decode form"});
  const Tensor q5 = random_tensor(ctx, {2, 5, 16}, dtype, 3);
  Tensor out5 = ctx.empty({2, 5, 16}, dtype);
  bt::expect_input_error([&] { ops::decode_attention(ctx, q5, cache, fine.row(0), out5, AttentionPath::flash, 1.0f); },
                         {"H = 5", "Hkv = 2"});
  const Tensor k = random_tensor(ctx, {2, 2, 2, 16}, dtype, 1);
  const IndexTable ones(ctx, {1, 1}, 1, 2);
  bt::expect_input_error([&] { ops::kv_cache_write(ctx, k, k, cache, past.row(0), ones.row(0)); },
                         {"sequence 0 would write positions [8, 9)", "holds 8 (2 pages of 4)"});
  bt::expect_input_error([&] { ops::make_kv_cache(ctx, ops::KvCacheShape{KvLayout::contiguous, 2, 16, 8, {5, 9}}, dtype); },
                         {"sequence 1 needs 9 positions", "max_len = 8"});
}

INSTANTIATE_TEST_SUITE_P(DevicesDtypes, DecodeAttention, bt::device_dtype_values(), bt::device_dtype_name);

// ---------------------------------------------------------------------------------------
// The decode workload against the whole-sequence forward.

class DecodeWorkload : public ::testing::TestWithParam<std::tuple<Device, DType>> {};

std::string llama_yaml(const std::string& decode, DType dtype, uint64_t seed) {
  return "workload: decode\ndtype: " + std::string(dtype_name(dtype)) + "\nseed: " + std::to_string(seed % 1000000) +
         "\nmodel: {family: llama, d_model: 64, n_heads: 8, n_kv_heads: 2, head_dim: 16, d_ff: 96, n_layers: 2}\n"
         "decode: " + decode + "\nweights: {init: scaled}\n";
}

std::string gpt2_yaml(const std::string& decode, DType dtype, uint64_t seed) {
  return "workload: decode\ndtype: " + std::string(dtype_name(dtype)) + "\nseed: " + std::to_string(seed % 1000000) +
         "\nmodel: {family: gpt2, d_model: 48, n_heads: 3, d_ff: 96, n_layers: 1}\ndecode: " + decode +
         "\nweights: {init: scaled}\n";
}

// Every decode path on ragged and uniform batches, paged (4- and 8-position pages, shuffled)
// and contiguous, 1-token prompts, Llama (GQA 4:1, RoPE at each sequence's position) and
// GPT-2: step t of sequence b equals row prompt_b + t of one causal pass over the whole
// sequence. The output is poisoned first; a second forward gives the same bits (the prefill
// rewrites the cache).
TEST_P(DecodeWorkload, EveryPathEqualsTheWholeSequenceForward) {
  const auto [device, dtype] = GetParam();
  BS_SKIP_IF_UNAVAILABLE(device);
  const uint64_t seed = bt::fresh_seed();
  const std::vector<std::string> yamls = {
      llama_yaml("{prompt_lens: [6, 1, 13], new_tokens: 5, kv_cache: {layout: paged, page_size: 4}}", dtype, seed),
      llama_yaml("{batch: 2, prompt_len: 1, new_tokens: 4, kv_cache: {layout: contiguous, max_len: 9}}", dtype, seed),
      gpt2_yaml("{batch: 2, prompt_len: 7, new_tokens: 3, kv_cache: {layout: paged, page_size: 8}}", dtype, seed),
      gpt2_yaml("{prompt_lens: [2, 9], new_tokens: 3}", dtype, seed),
      // Issue 43: a paged cache honours max_len (every sequence's pages cover 30 positions).
      llama_yaml("{prompt_lens: [6, 1, 13], new_tokens: 5, kv_cache: {layout: paged, page_size: 4, max_len: 30}}",
                 dtype, seed),
  };
  for (const std::string& yaml : yamls) {
    SCOPED_TRACE(yaml);
    const WorkloadConfig config = load_config_text(yaml, "decode-test");
    Context ctx(device);
    std::vector<PathConfig> mixes;
    for (AttentionPath a : {AttentionPath::naive, AttentionPath::flash}) {
      PathConfig p = config.paths;
      p.attention = a;
      mixes.push_back(p);
    }
    Workload workload(ctx, config, mixes);
    reference::blockref::Named named;
    for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = reference::from_tensor(tensor);
    const std::vector<double> want = reference::blockref::workload_output(config, named).data;
    double naive_error = 0;
    for (const PathConfig& paths : mixes) {
      workload.set_paths(paths);
      Tensor out = workload.output();
      fill_nan(out);
      workload.forward();
      ctx.synchronize();
      const std::vector<float> got = to_floats(workload.output());
      const double error = reference::max_relative_error(got, want);
      const double bound = paths.attention == AttentionPath::naive ? reference::workload_error_bound(config)
                                                                   : reference::accuracy_bound(naive_error, dtype);
      if (paths.attention == AttentionPath::naive) naive_error = error;
      EXPECT_LE(error, bound) << paths_str(paths);
      workload.forward();
      ctx.synchronize();
      EXPECT_EQ(to_floats(workload.output()), got) << "a second forward differs: the cache is not reset by the prefill";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DevicesDtypes, DecodeWorkload, bt::device_dtype_values(), bt::device_dtype_name);

// A planted error the oracle must see: the decode output of a workload whose weights are
// changed after the reference read them is far outside the bound (the comparison can fail).
// Issue 43: a paged cache honours decode.kv_cache.max_len -- each sequence's pages cover it, as
// the contiguous layout allocates it (before: validated, then ignored); without it a paged
// sequence gets the pages its own prompt and new tokens need. A contiguous cache refuses
// page_size, which it would ignore (before: validated, then ignored).
TEST(DecodeConfig, APagedCacheHonoursMaxLenAndAContiguousOneRefusesPageSize) {
  const auto shape_of = [](const std::string& decode) {
    return decode_cache_shape(load_config_text(llama_yaml(decode, DType::f32, 1), "decode-test"));
  };
  const ops::KvCacheShape needed = shape_of("{prompt_lens: [6, 1, 13], new_tokens: 5, kv_cache: {layout: paged, page_size: 4}}");
  EXPECT_EQ(needed.positions, (std::vector<int64_t>{11, 6, 18}));
  EXPECT_EQ(needed.pages(), 3 + 2 + 5);
  const ops::KvCacheShape reserved =
      shape_of("{prompt_lens: [6, 1, 13], new_tokens: 5, kv_cache: {layout: paged, page_size: 4, max_len: 30}}");
  EXPECT_EQ(reserved.positions, (std::vector<int64_t>{30, 30, 30}));
  EXPECT_EQ(reserved.pages(), 3 * 8);
  EXPECT_GT(reserved.bytes(DType::f32), needed.bytes(DType::f32));
  const ops::KvCacheShape contiguous = shape_of("{prompt_lens: [6, 1, 13], new_tokens: 5, kv_cache: {max_len: 30}}");
  EXPECT_EQ(contiguous.page_size, 30);
  EXPECT_EQ(contiguous.bytes(DType::f32), 3 * 30 * 2 * 16 * 2 * 4.0);
  bt::expect_input_error(
      [&] { shape_of("{batch: 2, prompt_len: 4, new_tokens: 2, kv_cache: {layout: contiguous, page_size: 8}}"); },
      {"decode.kv_cache.page_size", "applies to the paged layout only"});
  bt::expect_input_error([&] { shape_of("{batch: 2, prompt_len: 4, new_tokens: 2, kv_cache: {page_size: 8}}"); },
                         {"decode.kv_cache.page_size", "applies to the paged layout only"});
  bt::expect_input_error(
      [&] { shape_of("{batch: 2, prompt_len: 4, new_tokens: 2, kv_cache: {layout: paged, page_size: 4, max_len: 5}}"); },
      {"decode.kv_cache.max_len", "need 6"});
}

TEST(DecodeWorkloadCpu, TheOracleSeesAChangedWeight) {
  const WorkloadConfig config =
      load_config_text(llama_yaml("{prompt_lens: [3, 5], new_tokens: 2, kv_cache: {layout: paged, page_size: 4}}",
                                  DType::f32, 11),
                       "decode-test");
  Context ctx(Device::cpu());
  Workload workload(ctx, config, {config.paths});
  reference::blockref::Named named;
  for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = reference::from_tensor(tensor);
  // Step 0 of sequence 1 sees its whole prompt: perturb one of its prompt rows in the reference.
  named.at("input").data[static_cast<size_t>((1 * 5 + 2) * 64)] += 1.0;
  const std::vector<double> want = reference::blockref::workload_output(config, named).data;
  workload.forward();
  ctx.synchronize();
  EXPECT_GT(reference::max_relative_error(to_floats(workload.output()), want), 100 * reference::workload_error_bound(config));
}

#ifdef BLOCKSCOPE_WITH_CUDA
// run.cuda_graph: the whole generation (prefill and every step: their positions and lengths
// were uploaded at allocation, so nothing moves from the host) captured once and replayed
// gives the eager forward's bits.
TEST(DecodeWorkloadCuda, AGraphOfTheWholeGenerationReplaysTheEagerOutput) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  const WorkloadConfig config = load_config_text(
      llama_yaml("{prompt_lens: [5, 2], new_tokens: 3, kv_cache: {layout: paged, page_size: 4}}", DType::bf16, 9),
      "decode-test");
  Context ctx(Device::cuda(0));
  Workload workload(ctx, config, {config.paths});
  workload.forward();
  ctx.synchronize();
  const std::vector<float> eager = to_floats(workload.output());
  CudaGraph graph;
  graph.capture(ctx, [&] { workload.forward(); });
  Tensor out = workload.output();
  fill_nan(out);
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(to_floats(workload.output()), eager);
}
#endif

// decode.cuda_graph: one step captured on the first token and replayed for every token — its
// positions, lengths and input row picked on the device (ops/decode_step) — gives the eager
// steps' bits: on a ragged paged Llama long enough that flash splits the keys (the graph's grid
// is sized for the last step; lengths 301..303 and 4..6 need 2 splits at every step, so eager
// and graph split alike, and the short sequence leaves a split empty), and on a contiguous
// GPT-2; a second forward too (the counter restarts at the prefill).
TEST(DecodeWorkloadCuda, AStepGraphReplaysTheEagerSteps) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  const std::vector<std::string> yamls = {
      llama_yaml("{prompt_lens: [300, 3], new_tokens: 3, kv_cache: {layout: paged, page_size: 16}}", DType::bf16, 21),
      gpt2_yaml("{batch: 2, prompt_len: 5, new_tokens: 4}", DType::f16, 22)};
  for (const std::string& yaml : yamls) {
    for (AttentionPath attention : {AttentionPath::naive, AttentionPath::flash}) {
      SCOPED_TRACE(yaml + ops::path_name(attention));
      WorkloadConfig config = load_config_text(yaml, "decode-test");
      config.paths.attention = attention;
      Context ctx(Device::cuda(0));
      Workload eager(ctx, config, {config.paths});
      eager.forward();
      ctx.synchronize();
      const std::vector<float> want = to_floats(eager.output());
      config.decode.cuda_graph = true;
      Workload graphed(ctx, config, {config.paths});
      for (int round = 0; round < 2; ++round) {
        Tensor out = graphed.output();
        fill_nan(out);
        graphed.forward();
        ctx.synchronize();
        EXPECT_EQ(to_floats(graphed.output()), want) << "forward " << round;
      }
    }
  }
}

// The profile of a step graph: the decode phase holds the counter's reset and one graph launch
// per step — none of the step's own kernels (they ran inside the graph) — and the summary says so.
TEST(DecodeWorkloadCuda, AStepGraphIsOneLaunchPerToken) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  WorkloadConfig config = load_config_text(
      llama_yaml("{prompt_lens: [4, 7], new_tokens: 3, kv_cache: {layout: paged, page_size: 4}, cuda_graph: true}",
                 DType::bf16, 5),
      "decode-test");
  Context ctx(Device::cuda(0));
  Workload workload(ctx, config, {config.paths});
  const profiler::Profile profile =
      profiler::profile_steps(ctx, "decode", profiler::Schedule{0, 1, 2, false}, [&](int) { workload.forward(); });
  const profiler::Profile decode = profiler::phase_profile(profile, kDecodeRegion);
  std::vector<std::string> names;
  for (const profiler::KernelEvent& k : decode.kernels) names.push_back(k.name);
  const std::vector<std::string> per_forward = {"decode_step_reset_kernel", "cuda_graph_launch", "cuda_graph_launch",
                                                "cuda_graph_launch"};
  std::vector<std::string> want = per_forward;
  want.insert(want.end(), per_forward.begin(), per_forward.end());  // two active steps
  EXPECT_EQ(names, want);
  EXPECT_EQ(profiler::region_times_us(profile, kDecodeStepRegion).size(), 6u);
}

// The step graph's plumbing refuses what would make it wrong, before any work: a CPU context (its
// kernels read the host's values, which a bounded table does not have), and a step whose
// positions fall outside the bounds the step's ops were sized for.
TEST(DecodeStep, RefusesTheCpuAndValuesOutsideTheBounds) {
  Context cpu(Device::cpu());
  IndexTable step(cpu, {0}, 1, 1);
  bt::expect_input_error([&] { ops::decode_step_reset(cpu, step); }, {"decode_step_reset", "CUDA devices only"});
  const IndexTable bounded = IndexTable::bounded(cpu, {3, 1}, {5, 2}, 1, 2);
  const Tensor x = random_tensor(cpu, {2, 1, 1, 8}, DType::f32, 1);
  Tensor y = cpu.empty({2, 1, 1, 8}, DType::f32);
  bt::expect_input_error([&] { ops::rope(cpu, x, y, 10000.0f, bounded.row(0)); }, {"rope", "bounded table"});
  std::string reason;
  if (!bt::device_runnable(Device::cuda(0), &reason)) GTEST_SKIP() << "the CUDA half: " << reason;
  Context ctx(Device::cuda(0));
  IndexTable at(ctx, {0}, 1, 1);
  const IndexTable all_positions(ctx, {3, 1, 4, 2, 6, 3}, 3, 2), all_lengths(ctx, {4, 2, 5, 3, 7, 4}, 3, 2);
  IndexTable positions = IndexTable::bounded(ctx, {3, 1}, {5, 3}, 1, 2);  // step 2's 6 is above 5
  IndexTable lengths = IndexTable::bounded(ctx, {4, 2}, {7, 4}, 1, 2);
  const Tensor inputs = ctx.empty({3, 2, 1, 8}, DType::bf16);
  Tensor row = ctx.empty({2, 1, 8}, DType::bf16);
  bt::expect_input_error(
      [&] { ops::decode_step_select(ctx, at, all_positions, all_lengths, inputs, positions, lengths, row); },
      {"step 2 sequence 0 has positions 6, outside the bounds [3, 5]"});
}

// The profile of a decode: a "prefill" region, then "decode" holding one "decode_step" per
// new token; each phase's profile has only its own ops and kernels.
TEST(DecodeWorkloadCpu, ProfileHasPrefillAndDecodePhases) {
  const WorkloadConfig config = load_config_text(
      llama_yaml("{prompt_lens: [4, 7], new_tokens: 3, kv_cache: {layout: paged, page_size: 4}}", DType::f32, 5),
      "decode-test");
  Context ctx(Device::cpu());
  Workload workload(ctx, config, {config.paths});
  const profiler::Profile profile =
      profiler::profile_steps(ctx, "decode", profiler::Schedule{0, 1, 2, false}, [&](int) { workload.forward(); });
  EXPECT_EQ(profiler::region_times_us(profile, kPrefillRegion).size(), 2u);
  EXPECT_EQ(profiler::region_times_us(profile, kDecodeStepRegion).size(), 6u);
  const profiler::Profile prefill = profiler::phase_profile(profile, kPrefillRegion);
  const profiler::Profile decode = profiler::phase_profile(profile, kDecodeRegion);
  const auto has_op = [](const profiler::Profile& p, const std::string& name) {
    for (const profiler::OpEvent& e : p.ops)
      if (e.name == name) return true;
    return false;
  };
  EXPECT_TRUE(has_op(prefill, "attention"));
  EXPECT_FALSE(has_op(prefill, "decode_attention"));
  EXPECT_TRUE(has_op(decode, "decode_attention"));
  EXPECT_FALSE(has_op(decode, "attention"));
  EXPECT_FALSE(has_op(decode, kPrefillRegion));
  // Every kernel lands in exactly one phase; the phases' step times add up to the steps'.
  EXPECT_EQ(prefill.kernels.size() + decode.kernels.size(), profile.kernels.size());
  const std::vector<double> whole = profiler::step_times_us(profile), a = profiler::step_times_us(prefill),
                            b = profiler::step_times_us(decode);
  ASSERT_EQ(whole.size(), 2u);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(a[i] + b[i], whole[i], 1e-6 * whole[i] + 1e-3);
}

}  // namespace
}  // namespace blockscope
