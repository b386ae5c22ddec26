// CUDA contexts: ops launch on their own context's GPU when there are two, the recorder stays
// with its context, and a tensor of another context's stream on the same GPU is refused.
// (Each op's CUDA-against-CPU cases are in that op's test file: test/cuda_vs_cpu.h.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/batched_matmul.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "runtime/error.h"
#include "test/op_test_helpers.h"
#include "test/cuda_vs_cpu.h"
#include "test/support/test_support.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cuda_backend.h"
#endif

namespace blockscope {
namespace {



// Two contexts on two GPUs in one thread: creating the second makes its GPU current, and ops on
// the first must still launch on the first (cuda_backend(ctx) selects the device). Launching on
// the wrong GPU with the first GPU's pointers fails or leaves the poisoned output unwritten.
TEST(CudaMultiDevice, OpsLaunchOnTheirContextsGpu) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs, found " << cuda_device_count();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context first(Device::cuda(0));
  Context second(Device::cuda(1));  // now the current device
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x0 = first.copy_from(host), x1 = second.copy_from(host);
  Tensor y0 = testing::poisoned_tensor(first, host.shape(), DType::f32);
  Tensor y1 = testing::poisoned_tensor(second, host.shape(), DType::f32);
  ops::scale(first, x0, 2.0f, y0);
  ops::softmax(second, x1, y1);
  first.synchronize();
  second.synchronize();
  const std::vector<float> in = to_floats(host), got0 = to_floats(y0);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got0[i], 2.0f * in[i]) << "element " << i;
  EXPECT_EQ(testing::first_nan(to_floats(y1)), -1);
}

// The backend's own entry points (timing marks, synchronize, memory_available, copies) must
// select the context's GPU like the ops do: the recorder takes its first mark before the op
// reaches cuda_backend(ctx), with the other context's GPU still current. An event recorded on
// another device's stream is cudaErrorInvalidResourceHandle, so without the fix the first mark
// (or resolve) throws.
TEST(CudaMultiDevice, RecorderOnTheFirstContextAfterTheSecondWasCreated) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs, found " << cuda_device_count();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context first(Device::cuda(0));
  Context second(Device::cuda(1));  // now the current device
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x0 = first.copy_from(host);
  Tensor y0 = testing::poisoned_tensor(first, host.shape(), DType::f32);
  Tensor x1 = second.copy_from(host);  // the second context's GPU is current again
  EXPECT_GT(first.backend().memory_available(), 0u);
  profiler::Recorder recorder(first);
  first.set_recorder(&recorder);
  ops::scale(first, x0, 2.0f, y0);
  first.set_recorder(nullptr);
  Tensor y1 = testing::poisoned_tensor(second, host.shape(), DType::f32);  // second current again
  ops::softmax(second, x1, y1);
  ASSERT_NO_THROW(recorder.resolve());
  ASSERT_EQ(recorder.ops().size(), 1u);
  const profiler::OpEvent& op = recorder.ops()[0];
  EXPECT_TRUE(std::isfinite(op.device_start_us) && std::isfinite(op.device_end_us));
  EXPECT_GE(op.device_end_us, op.device_start_us);
  first.synchronize();
  second.synchronize();
  const std::vector<float> in = to_floats(host), got0 = to_floats(y0);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got0[i], 2.0f * in[i]) << "element " << i;
}

// Two contexts on one GPU have two streams and nothing orders them: an op on context B reading
// a tensor that context A's stream wrote could run before A's kernels finish. Ops refuse such
// an input (InputError naming the fix) and ctx.copy_from, which synchronises A's stream first,
// is the hand-over. The simulated GPU cannot show the race itself (it runs every queue lazily
// in enqueue order, so B's kernels always see A's finished results): this tests the mechanism.
TEST(CudaMultiContext, OpsRefuseAnInputFromAnotherContextsStreamOnTheSameGpu) {
  BS_SKIP_IF_UNAVAILABLE(Device::cuda(0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  Context cpu(Device::cpu());
  Context a(Device::cuda(0)), b(Device::cuda(0));
  const Tensor host = random_tensor(cpu, {37, 65}, DType::f32, seed);
  Tensor x = a.copy_from(host);
  Tensor produced = testing::poisoned_tensor(a, host.shape(), DType::f32);
  ops::scale(a, x, 2.0f, produced);  // queued on a's stream, not synchronised
  Tensor y = testing::poisoned_tensor(b, host.shape(), DType::f32);
  profiler::Recorder recorder(b);
  b.set_recorder(&recorder);
  testing::expect_input_error([&] { ops::scale(b, produced, 3.0f, y); },
                              {"scale", "another context", "cuda:0", "copy_from"});
  b.set_recorder(nullptr);
  EXPECT_TRUE(recorder.ops().empty()) << "a refused call records no op";
  // The hand-over: copy_from synchronises a's stream, then the op runs on b's.
  const Tensor handed = b.copy_from(produced);
  ops::scale(b, handed, 3.0f, y);
  const std::vector<float> in = to_floats(host), got = to_floats(y);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got[i], 6.0f * in[i]) << "element " << i;
  // The same tensors on their own context are fine.
  ops::scale(a, produced, 0.5f, produced);
  const std::vector<float> halved = to_floats(produced);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(halved[i], in[i]) << "element " << i;  // produced was 2 · host
}

}  // namespace
}  // namespace blockscope
