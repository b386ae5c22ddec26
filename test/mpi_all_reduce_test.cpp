// The MPI communicator and the all_reduce op on real ranks: run under mpirun by ctest
// (test/CMakeLists.txt: mpi_all_reduce_2_ranks, `mpirun -np 2`); started alone it has one rank
// and skips. Every rank runs every test; a check between two collectives is an EXPECT (never an
// ASSERT that would leave the other ranks waiting in the next collective). The exit status is
// the same on every rank: a test that fails on any rank fails the run.
//
// The oracle: each rank's input comes from a seed (a base agreed over the ranks + the rank), so
// every rank regenerates every other rank's input and sums them in float64 — it shares nothing
// with the communicator but the seeds.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ops/all_reduce/all_reduce.h"
#include "ops/all_reduce/backends.h"
#include "ops/catalogue/catalogue.h"
#include "profiler/recorder.h"
#include "runtime/communicator.h"
#include "runtime/error.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;

Communicator* world() { return world_communicator(); }

#define SKIP_WITHOUT_RANKS()                                                                  \
  do {                                                                                        \
    if (world() == nullptr || world()->size() < 2)                                            \
      GTEST_SKIP() << "needs 2 or more ranks: run under mpirun (ctest mpi_all_reduce_2_ranks)"; \
  } while (0)

// Rank 0's fresh seed on every rank: its four 16-bit pieces as f32 (exact), the other ranks
// adding zeros.
uint64_t shared_seed(Communicator& comm) {
  const uint64_t mine = comm.rank() == 0 ? bt::fresh_seed() : 0;
  float pieces[4];
  for (int i = 0; i < 4; ++i) pieces[i] = static_cast<float>((mine >> (16 * i)) & 0xffffu);
  comm.all_reduce_sum(pieces, 4, DType::f32);
  uint64_t seed = 0;
  for (int i = 0; i < 4; ++i) seed |= static_cast<uint64_t>(pieces[i]) << (16 * i);
  return seed;
}

uint64_t rank_seed(uint64_t base, int rank) { return base + 7919u * static_cast<uint64_t>(rank + 1); }

// The bytes of a tensor (CPU) as a string, for gather_to_root.
std::string bytes_of(const Tensor& t) { return std::string(static_cast<const char*>(t.data()), t.nbytes()); }

// The largest |got - sum| over the elements, and its bound: the f32 sum of n addends is within
// (n - 1) u32 Σ|x| of the exact sum; a 16-bit result adds one rounding to the dtype (u of the
// dtype times the f32 sum; f16's subnormals are spaced 2^-24, so half of that absolutely).
struct SumCheck {
  double worst_excess = -1;  // max over elements of error - bound (<= 0 passes)
  int64_t worst_index = -1;
  double got = 0, want = 0, bound = 0;
};

SumCheck check_sum(const std::vector<float>& got, const std::vector<std::vector<float>>& addends, DType dtype) {
  const double u32 = std::ldexp(1.0, -24), ud = dtype_epsilon(dtype);
  const double n = static_cast<double>(addends.size());
  const double absolute = dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;
  SumCheck check;
  for (size_t i = 0; i < got.size(); ++i) {
    double sum = 0, magnitude = 0;
    for (const std::vector<float>& a : addends) {
      sum += a[i];
      magnitude += std::fabs(a[i]);
    }
    const double f32_error = (n - 1) * u32 * magnitude;
    const double bound = dtype == DType::f32 ? f32_error : f32_error + ud * (std::fabs(sum) + f32_error) + absolute;
    const double excess = std::fabs(got[i] - sum) - bound;  // NaN for a NaN result: kept, and fails
    if (check.worst_index < 0 || excess > check.worst_excess || std::isnan(excess))
      if (!std::isnan(check.worst_excess)) check = {excess, static_cast<int64_t>(i), got[i], sum, bound};
  }
  return check;
}

// ---- the communicator -----------------------------------------------------------------------

TEST(MpiCommunicator, KnowsItsRanksAndEngine) {
  SKIP_WITHOUT_RANKS();
  if (world()->rank() == 0) std::printf("%d ranks, engine %s\n", world()->size(), world()->engine().c_str());
  EXPECT_GE(world()->rank(), 0);
  EXPECT_LT(world()->rank(), world()->size());
  EXPECT_EQ(world()->engine().rfind("MPI (", 0), 0u) << world()->engine();
  EXPECT_EQ(single_rank_communicator().size(), 1);
  EXPECT_EQ(single_rank_communicator().engine(), "single rank");
}

// f32, f16 and bf16 at odd sizes: within the bound of the float64 sum of every rank's input,
// and the same bits on every rank (rank 0 compares the gathered results).
TEST(MpiCommunicator, SumsEveryDtypeWithinTheFloat64OracleAndTheSameBitsOnEveryRank) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  const uint64_t base = shared_seed(comm);
  Context cpu(Device::cpu());
  for (DType dtype : kComputeDTypes) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000003}}) {
      const uint64_t seed = base + static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(dtype);
      SCOPED_TRACE(::testing::Message() << "base seed " << seed << " " << dtype_name(dtype) << " n=" << n << " rank "
                                        << comm.rank());
      Tensor t = bt::random_tensor(cpu, {n}, dtype, rank_seed(seed, comm.rank()));
      comm.all_reduce_sum(t.data(), n, dtype);
      std::vector<std::vector<float>> addends;
      for (int r = 0; r < comm.size(); ++r)
        addends.push_back(to_floats(bt::random_tensor(cpu, {n}, dtype, rank_seed(seed, r))));
      const SumCheck check = check_sum(to_floats(t), addends, dtype);
      EXPECT_LE(check.worst_excess, 0.0) << "element " << check.worst_index << ": got " << check.got << ", the sum is "
                                         << check.want << ", bound " << check.bound;
      const std::vector<std::string> results = comm.gather_to_root(bytes_of(t));
      if (comm.rank() == 0) {
        EXPECT_EQ(results.size(), static_cast<size_t>(comm.size()));
        for (size_t r = 1; r < results.size(); ++r)
          EXPECT_TRUE(results[r] == results[0]) << "rank " << r << " has other bits than rank 0";
      } else {
        EXPECT_TRUE(results.empty());
      }
    }
  }
}

// Messages split in chunks (the path taken above INT_MAX bytes): within the oracle's bound and
// the same bits on every rank, as one message is. With 2 ranks also the bits of one message
// (fl(a + b) in any order); with more, MPI may pick another summation order per message size.
TEST(MpiCommunicator, ChunkedMessagesSumAsOneDoes) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  const uint64_t base = shared_seed(comm);
  Context cpu(Device::cpu());
  for (DType dtype : kComputeDTypes) {
    SCOPED_TRACE(::testing::Message() << "base seed " << base << " " << dtype_name(dtype) << " rank " << comm.rank());
    const Shape shape{100003};
    const Tensor input = bt::random_tensor(cpu, shape, dtype, rank_seed(base, comm.rank()));
    Tensor whole = cpu.copy_from(input), chunked = cpu.copy_from(input);
    comm.all_reduce_sum(whole.data(), whole.numel(), dtype);
    detail::set_all_reduce_chunk_elements(4099);
    comm.all_reduce_sum(chunked.data(), chunked.numel(), dtype);
    detail::set_all_reduce_chunk_elements(0);
    if (comm.size() == 2) {
      EXPECT_TRUE(bytes_of(whole) == bytes_of(chunked)) << "chunks of 4099 elements differ";
    }
    std::vector<std::vector<float>> addends;
    for (int r = 0; r < comm.size(); ++r) addends.push_back(to_floats(bt::random_tensor(cpu, shape, dtype, rank_seed(base, r))));
    const SumCheck check = check_sum(to_floats(chunked), addends, dtype);
    EXPECT_LE(check.worst_excess, 0.0) << "element " << check.worst_index << ": got " << check.got << ", the sum is "
                                       << check.want << ", bound " << check.bound;
    const std::vector<std::string> results = comm.gather_to_root(bytes_of(chunked));
    for (size_t r = 1; r < results.size(); ++r)
      EXPECT_TRUE(results[r] == results[0]) << "rank " << r << " has other bits than rank 0";
  }
}

TEST(MpiCommunicator, GatherToRootReturnsEveryRanksStringInRankOrder) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  // Different lengths, one empty, one with a NUL inside.
  auto string_of = [](int rank) {
    return rank == 0 ? std::string() : "rank " + std::to_string(rank) + std::string(1, '\0') + std::string(rank * 3, 'x');
  };
  const std::vector<std::string> all = comm.gather_to_root(string_of(comm.rank()));
  if (comm.rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(comm.size()));
    for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], string_of(r)) << "rank " << r;
  } else {
    EXPECT_TRUE(all.empty()) << "only rank 0 receives";
  }
  comm.barrier();
}

// A count or dtype that differs between ranks is an error on every rank, naming both, and not a
// hang; the communicator works afterwards.
// Sequence parallelism's pair: reduce_scatter_sum gives each rank the float64 oracle's sum of
// its block (same bound as all_reduce_sum); all_gather puts rank r's input at r·count, exactly.
TEST(MpiCommunicator, ReduceScatterAndAllGatherAgainstTheOracle) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  const uint64_t base = shared_seed(comm);
  Context cpu(Device::cpu());
  const int64_t ranks = comm.size();
  for (DType dtype : kComputeDTypes) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}}) {
      const uint64_t seed = base + static_cast<uint64_t>(n) * 17 + static_cast<uint64_t>(dtype);
      SCOPED_TRACE(::testing::Message() << "base seed " << seed << " " << dtype_name(dtype) << " n=" << n << " rank "
                                        << comm.rank());
      const Tensor send = bt::random_tensor(cpu, {ranks * n}, dtype, rank_seed(seed, comm.rank()));
      Tensor mine = bt::poisoned_tensor(cpu, {n}, dtype);
      comm.reduce_scatter_sum(send.data(), mine.data(), n, dtype);
      std::vector<std::vector<float>> addends;  // every rank's block comm.rank()
      for (int r = 0; r < comm.size(); ++r) {
        const std::vector<float> all = to_floats(bt::random_tensor(cpu, {ranks * n}, dtype, rank_seed(seed, r)));
        addends.emplace_back(all.begin() + comm.rank() * n, all.begin() + (comm.rank() + 1) * n);
      }
      const SumCheck check = check_sum(to_floats(mine), addends, dtype);
      EXPECT_LE(check.worst_excess, 0.0) << "element " << check.worst_index << ": got " << check.got << ", the sum is "
                                         << check.want << ", bound " << check.bound;
      Tensor gathered = bt::poisoned_tensor(cpu, {ranks * n}, dtype);
      comm.all_gather(mine.data(), gathered.data(), n, dtype);
      const std::vector<std::string> blocks = comm.gather_to_root(bytes_of(mine));
      if (comm.rank() == 0) {  // rank r's block of the gathered tensor is rank r's reduce-scattered block
        const std::string all = bytes_of(gathered);
        const size_t block = static_cast<size_t>(n) * dtype_size(dtype);
        for (size_t r = 0; r < blocks.size(); ++r)
          EXPECT_TRUE(all.compare(r * block, block, blocks[r]) == 0) << "block " << r << " of the all-gather";
      }
    }
  }
  // Counts that differ: an error on every rank, naming the collective.
  std::vector<float> send(static_cast<size_t>(ranks * 8), 1.0f), recv(static_cast<size_t>(ranks * 8));
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) comm.reduce_scatter_sum(send.data(), recv.data(), 3 + comm.rank(), DType::f32);
      else comm.all_gather(send.data(), recv.data(), 3 + comm.rank(), DType::f32);
      ADD_FAILURE() << "no error on rank " << comm.rank();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(which == 0 ? "reduce_scatter_sum on rank" : "all_gather on rank"),
                std::string::npos) << e.what();
    }
  }
}

TEST(MpiCommunicator, MismatchedCountsOrDtypesAreAnErrorOnEveryRank) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  const int rank = comm.rank(), last = comm.size() - 1;
  auto expect_error = [&](auto call, const std::vector<std::string>& needles) {
    try {
      call();
      ADD_FAILURE() << "no error on rank " << rank;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::runtime);
      for (const std::string& needle : needles)
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "'" << needle << "' not in: " << e.what();
    }
  };
  std::vector<float> values(8 + static_cast<size_t>(last), 1.0f);
  expect_error([&] { comm.all_reduce_sum(values.data(), 7 + rank, DType::f32); },
               {"all_reduce_sum on rank " + std::to_string(rank), "counts from 7 to " + std::to_string(7 + last),
                "dtypes f32 to f32", "this rank: " + std::to_string(7 + rank) + " f32"});
  expect_error([&] { comm.all_reduce_sum(values.data(), 4, rank == 0 ? DType::f32 : DType::bf16); },
               {"counts from 4 to 4", "dtypes f32 to bf16"});
  // No elements on one rank only: still checked (the op's empty tensors take part too).
  expect_error([&] { comm.all_reduce_sum(values.data(), rank == 0 ? 0 : 5, DType::f32); }, {"counts from 0 to 5"});
  // Through the op: refused the same way, on every rank.
  Context cpu(Device::cpu());
  Tensor t = cpu.empty({rank == 0 ? 0 : 3}, DType::f16);
  expect_error([&] { ops::all_reduce(cpu, t, comm); }, {"counts from 0 to 3"});
  // And then an ordinary sum still works.
  float one = 1.0f;
  comm.all_reduce_sum(&one, 1, DType::f32);
  EXPECT_EQ(one, static_cast<float>(comm.size()));
}

// ---- the op ---------------------------------------------------------------------------------

// One op event, family collective, FLOPs (n - 1) numel, the bus bytes nbytes 2(n - 1)/n and
// one all_reduce_sum kernel, as the catalogue says; the value is the sum.
TEST(MpiAllReduceOp, RecordsOneOpWithTheBusBytesAndSums) {
  SKIP_WITHOUT_RANKS();
  Communicator& comm = *world();
  const uint64_t base = shared_seed(comm);
  for (const Device& device : bt::test_devices()) {
    std::string reason;
    if (!bt::device_runnable(device, &reason)) continue;  // the same on every rank: one machine
    for (DType dtype : kComputeDTypes) {
      SCOPED_TRACE(::testing::Message() << "base seed " << base << " " << device.str() << " " << dtype_name(dtype));
      Context cpu(Device::cpu()), ctx(device);
      const Shape shape{37, 3, 5};
      const int64_t n = shape_numel(shape);
      Tensor t = ctx.copy_from(bt::random_tensor(cpu, shape, dtype, rank_seed(base, comm.rank())));
      profiler::Recorder recorder(ctx);
      ctx.set_recorder(&recorder);
      ops::all_reduce(ctx, t, comm);
      ctx.set_recorder(nullptr);

      ASSERT_EQ(recorder.ops().size(), 1u);
      const profiler::OpEvent& op = recorder.ops()[0];
      EXPECT_EQ(op.name, "all_reduce");
      const double ranks = comm.size(), nbytes = static_cast<double>(n) * static_cast<double>(dtype_size(dtype));
      EXPECT_DOUBLE_EQ(op.bytes, nbytes * 2 * (ranks - 1) / ranks);
      EXPECT_DOUBLE_EQ(op.flops, (ranks - 1) * static_cast<double>(n));
      EXPECT_EQ(bt::kernel_names(recorder), std::vector<std::string>{ops::kernel_names::kAllReduce});
      ops::OpCall call;
      call.sizes = {{"N", n}, {"ranks", comm.size()}};
      call.dtype = dtype;
      const ops::OpCost cost = ops::op_spec("all_reduce").cost(call);
      EXPECT_DOUBLE_EQ(op.bytes, cost.bytes);
      EXPECT_DOUBLE_EQ(op.flops, cost.flops);
      EXPECT_EQ(profiler::family_name(ops::op_spec("all_reduce").family), std::string("collective"));

      std::vector<std::vector<float>> addends;
      for (int r = 0; r < comm.size(); ++r)
        addends.push_back(to_floats(bt::random_tensor(cpu, shape, dtype, rank_seed(base, r))));
      const SumCheck check = check_sum(to_floats(t), addends, dtype);
      EXPECT_LE(check.worst_excess, 0.0) << "element " << check.worst_index << ": got " << check.got
                                         << ", the sum is " << check.want << ", bound " << check.bound;
    }
  }
}

// On rank != 0: prints only the failures, each line prefixed with the rank (rank 0 prints as
// usual), so the output of a run stays readable.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The name is kept here: UnitTest::current_test_info() inside OnTestPartResult would wait for
  // the lock gtest holds while it reports the result.
  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(), result.message());
  }

 private:
  int rank_;
  std::string test_;
};

// `--abort-demo` (ctest mpi_abort_all_ends_every_rank): the last rank calls abort_all(3) while
// the others wait in a barrier it never reaches; the others must learn why in that barrier (an
// Error naming the last rank), and mpirun must end them all with status 3.
// `--stuck-demo` (ctest mpi_stuck_rank_ends_every_rank, BLOCKSCOPE_COLLECTIVE_TIMEOUT=2): the
// last rank never reaches the barrier and never aborts; the others must give up at the
// deadline, and mpirun must end them all with status 3.
int abort_demo(Communicator* comm, bool stuck) {
  if (comm == nullptr || comm->size() < 2) {
    std::fprintf(stderr, "--abort-demo and --stuck-demo need 2 or more ranks under mpirun\n");
    return 2;
  }
  if (comm->rank() == comm->size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (stuck) {
      std::fprintf(stderr, "rank %d: stuck outside the barrier\n", comm->rank());
      std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    std::fprintf(stderr, "rank %d: abort_all(3)\n", comm->rank());
    comm->abort_all(3, "the abort demo");
  }
  try {
    comm->barrier();
  } catch (const Error& error) {
    std::fprintf(stderr, "rank %d: %s\n", comm->rank(), error.what());
    comm->abort_all(3, error.what());
  }
  std::fprintf(stderr, "rank %d: passed a barrier the last rank never reached\n", comm->rank());
  return 0;
}

}  // namespace
}  // namespace blockscope

int main(int argc, char** argv) {
  blockscope::Communicator* world = blockscope::init_mpi(&argc, &argv);
  if (argc > 1 && std::strcmp(argv[1], "--abort-demo") == 0) return blockscope::abort_demo(world, false);
  if (argc > 1 && std::strcmp(argv[1], "--stuck-demo") == 0) return blockscope::abort_demo(world, true);
  ::testing::InitGoogleTest(&argc, argv);
  if (world != nullptr && world->rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new blockscope::RankFailurePrinter(world->rank()));
  }
  int status = RUN_ALL_TESTS();
  if (world != nullptr) {  // the same status on every rank
    float failed = status != 0 ? 1.0f : 0.0f;
    world->all_reduce_sum(&failed, 1, blockscope::DType::f32);
    status = failed > 0 ? 1 : 0;
  }
  return status;
}
