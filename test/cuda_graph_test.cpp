// CUDA graphs: a captured forward replays bit for bit like eager execution, also after new
// inputs are written in place; uncapturable work is an error at capture time (never a silent
// fallback), and the stream stays usable afterwards. Skips with the reason without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "test/support/test_support.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_graph.h"
#endif

namespace blockscope {
namespace {

#ifdef BLOCKSCOPE_WITH_CUDA

// Bitwise equality of two tensors' values (NaN-safe, unlike ==).
void expect_bit_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  const std::vector<float> a = to_floats(actual), e = to_floats(expected);
  ASSERT_EQ(a.size(), e.size()) << what;
  ASSERT_EQ(testing::first_nan(e), -1) << what << ": eager output has NaN";
  EXPECT_EQ(std::memcmp(a.data(), e.data(), a.size() * sizeof(float)), 0) << what << ": replay differs from eager";
}

// A small transformer-ish forward with every kind of work: GEMMs with epilogues, custom
// kernels, a Memcpy DtoD, and temporaries allocated and freed inside (attention scores).
struct Forward {
  Tensor x, w_qkv, b_qkv, ln_w, ln_b, out;
  int64_t batch = 2, seq = 17, heads = 4, head_dim = 64;

  Forward(Context& ctx, DType dtype, uint64_t seed) {
    const int64_t d_model = heads * head_dim;
    x = testing::random_tensor(ctx, {batch * seq, d_model}, dtype, seed);
    w_qkv = testing::random_tensor(ctx, {3 * d_model, d_model}, dtype, seed + 1, -0.1f, 0.1f);
    b_qkv = testing::random_tensor(ctx, {3 * d_model}, dtype, seed + 2);
    ln_w = testing::random_tensor(ctx, {d_model}, dtype, seed + 3, 0.5f, 1.5f);
    ln_b = testing::random_tensor(ctx, {d_model}, dtype, seed + 4);
    out = testing::poisoned_tensor(ctx, {batch * seq, d_model}, dtype);
  }

  void operator()(Context& ctx) {
    const int64_t d_model = heads * head_dim;
    Tensor normed = ctx.empty(x.shape(), x.dtype());
    ops::layer_norm(ctx, x, ln_w, ln_b, 1e-5f, normed);
    Tensor qkv = ctx.empty({batch * seq, 3 * d_model}, x.dtype());
    ops::linear(ctx, normed, w_qkv, b_qkv, qkv, ops::LinearPath::epilogue);
    // [B·S, 3·D] -> three contiguous [B, H, S, hd] tensors (gather copies).
    Tensor parts = qkv.reshape({batch, seq, 3, heads, head_dim});
    Tensor q = ctx.empty({batch, heads, seq, head_dim}, x.dtype());
    Tensor k = ctx.empty(q.shape(), x.dtype());
    Tensor v = ctx.empty(q.shape(), x.dtype());
    ops::copy(ctx, parts.select(2, 0).permute({0, 2, 1, 3}), q);
    ops::copy(ctx, parts.select(2, 1).permute({0, 2, 1, 3}), k);
    ops::copy(ctx, parts.select(2, 2).permute({0, 2, 1, 3}), v);
    Tensor attn = ctx.empty(q.shape(), x.dtype());
    ops::attention(ctx, q, k, v, attn, ops::AttentionPath::naive, true, 0.125f);
    Tensor merged = ctx.empty({batch, seq, heads, head_dim}, x.dtype());
    ops::copy(ctx, attn.permute({0, 2, 1, 3}), merged);
    ops::add(ctx, x, merged.reshape({batch * seq, d_model}), out);  // residual
  }
};

class CudaGraphTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { BS_SKIP_IF_UNAVAILABLE(Device::cuda(0)); }
};

TEST_P(CudaGraphTest, ReplayIsBitIdenticalToEagerAlsoWithNewInputs) {
  Context ctx(Device::cuda(0));
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Forward forward(ctx, GetParam(), seed);
  forward(ctx);
  Tensor eager = ctx.copy_from(forward.out);

  fill_nan(forward.out);
  CudaGraph graph;
  graph.capture(ctx, [&] { forward(ctx); });
  ASSERT_TRUE(graph.captured());
  EXPECT_GE(graph.node_count(), 10u);  // every kernel, copy and GEMM of the forward
  graph.replay();
  ctx.synchronize();
  expect_bit_identical(forward.out, eager, "first replay");

  // New input values written in place (outside the graph), then replay and eager again.
  from_floats(forward.x, testing::random_floats(static_cast<size_t>(forward.x.numel()), seed + 10));
  fill_nan(forward.out);
  graph.replay();
  graph.replay();  // twice: replays must not depend on leftovers of the previous one
  ctx.synchronize();
  Tensor replayed = ctx.copy_from(forward.out);
  fill_nan(forward.out);
  forward(ctx);
  expect_bit_identical(replayed, forward.out, "replay with new inputs");
}

TEST_P(CudaGraphTest, UncapturableWorkIsAnErrorAtCaptureTime) {
  Context ctx(Device::cuda(0));
  Tensor t = testing::poisoned_tensor(ctx, {64, 64}, GetParam());
  CudaGraph graph;
  try {
    // A host-to-device copy synchronises: it cannot be part of a graph.
    graph.capture(ctx, [&] { from_floats(t, std::vector<float>(64 * 64, 1.0f)); });
    ADD_FAILURE() << "capture of a host copy did not fail";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("CUDA graph capture failed"), std::string::npos) << message;
    EXPECT_NE(message.find("host transfers"), std::string::npos) << message;
  }
  EXPECT_FALSE(graph.captured());
  // The stream is usable again: eager work runs and finishes.
  Tensor u = testing::random_tensor(ctx, {64, 64}, GetParam(), testing::fresh_seed());
  ops::scale(ctx, u, 2.0f, t);
  ctx.synchronize();
  EXPECT_EQ(testing::first_nan(to_floats(t)), -1);
}

// Device marks taken inside a capture time nothing (cudaEventElapsedTime on them fails when the
// recorder resolves): a recorder attached at capture is refused up front, and the stream,
// the capture without the recorder and a later resolve all still work.
TEST_P(CudaGraphTest, CaptureWithARecorderAttachedIsRefused) {
  Context ctx(Device::cuda(0));
  Tensor u = testing::random_tensor(ctx, {64, 64}, GetParam(), testing::fresh_seed());
  Tensor t = testing::poisoned_tensor(ctx, {64, 64}, GetParam());
  profiler::Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  CudaGraph graph;
  try {
    graph.capture(ctx, [&] { ops::scale(ctx, u, 2.0f, t); });
    ADD_FAILURE() << "capture with a recorder attached did not fail";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("recorder"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(graph.captured());
  ctx.set_recorder(nullptr);
  graph.capture(ctx, [&] { ops::scale(ctx, u, 2.0f, t); });
  ctx.set_recorder(&recorder);
  graph.replay();
  ctx.set_recorder(nullptr);
  recorder.resolve();  // no marks were taken inside the capture: resolves without error
  EXPECT_EQ(testing::first_nan(to_floats(t)), -1);
}

TEST_P(CudaGraphTest, ReplayWithoutCaptureIsAnError) {
  CudaGraph graph;
  EXPECT_THROW(graph.replay(), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGraphTest, ::testing::ValuesIn(kComputeDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

#else

TEST(CudaGraphTest, NeedsCuda) { GTEST_SKIP() << "built without CUDA: CUDA graphs are not available"; }

#endif

}  // namespace
}  // namespace blockscope
