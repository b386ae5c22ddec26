// nccl_group_in_process (runtime/communicator.h): NCCL between the GPUs of one process, ranks as
// host threads; nccl_over_mpi: NCCL between processes, one GPU each, started over MPI (at the
// end). nccl.h is included here only: nothing else in the tree names NCCL. In SIM builds the
// simulated GPU's NCCL subset (sim/) stands in for libnccl.
//
// In one process, two kinds of meeting:
//   device tensors: ncclAllReduce on the rank's stream (enqueued, no host wait) — NCCL moves
//     the data between GPUs; 16-bit values are summed by NCCL in their own type, rounded at each
//     step of its algorithm (as Megatron's and PyTorch's bf16 all-reduces are), where the MPI
//     engine sums in f32 and rounds once;
//   the host: the ranks' threads meet in HostMeeting (one slot per rank, a generation barrier)
//     for gather_to_root, barrier, all_reduce_sum of host memory, and the check before every
//     device all-reduce that each rank passes the same count and dtype (NCCL itself does not
//     check: a mismatch would hang or corrupt) — an error on every rank instead.
#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace blockscope {
namespace {

// An NCCL call's failure as an Error naming the call and NCCL's own explanation.
void check_nccl(ncclResult_t status, const char* call, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess) return;
  std::string detail = ncclGetLastError(comm);
  throw Error(ErrorKind::runtime, detail::concat("NCCL error ", ncclGetErrorString(status), " in ", call,
                                                 detail.empty() ? "" : ": ", detail));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::fp8_e4m3:  // collectives reduce in a compute type (the storage rule, runtime/dtype.h)
    case DType::fp8_e5m2: break;
  }
  throw Error(ErrorKind::runtime, "nccl_type: unknown dtype");
}

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "NCCL";
  // NCCL_VERSION(X, Y, Z) = X·10000 + Y·100 + Z from 2.9 on.
  return detail::concat("NCCL ", code / 10000, ".", code / 100 % 100, ".", code % 100);
}

// What one rank brings to a host meeting.
struct Slot {
  const void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::f32;
  std::string text;
};

// The ranks' threads meet here: each brings a Slot, and each leaves, once the last has come,
// with every rank's slot in rank order. abort() wakes every waiter (and every later comer) with
// an Error.
class HostMeeting {
 public:
  explicit HostMeeting(int ranks) : slots_(static_cast<size_t>(ranks)) {}

  std::vector<Slot> meet(int rank, Slot mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!aborted_.empty()) throw aborted_error(rank);
    slots_[static_cast<size_t>(rank)] = std::move(mine);
    if (++arrived_ == static_cast<int>(slots_.size())) {
      met_ = slots_;
      arrived_ = 0;
      ++generation_;
      all_here_.notify_all();
      return met_;
    }
    const uint64_t generation = generation_;
    all_here_.wait(lock, [&] { return generation_ != generation || !aborted_.empty(); });
    if (generation_ == generation) throw aborted_error(rank);
    return met_;  // the next meeting cannot complete before this rank comes to it
  }

  void abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.empty()) aborted_ = why.empty() ? "another rank failed" : why;
    all_here_.notify_all();
  }

 private:
  Error aborted_error(int rank) const {
    return Error(ErrorKind::runtime, detail::concat("rank ", rank, " of ", slots_.size(),
                                                    ": the tensor-parallel group was aborted (", aborted_, ")"));
  }

  mutable std::mutex mutex_;
  std::condition_variable all_here_;
  std::vector<Slot> slots_, met_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string aborted_;
};

// `count` elements at byte `offset` of every rank's slot, summed in f32 in rank order (the same
// bits on every rank).
std::vector<float> sum_over_ranks(const std::vector<Slot>& slots, size_t offset, int64_t count, DType dtype) {
  std::vector<float> sum(static_cast<size_t>(count), 0.0f);
  const size_t element = dtype_size(dtype);
  for (const Slot& slot : slots)
    for (int64_t i = 0; i < count; ++i)
      sum[i] += load_as_float(dtype, static_cast<const char*>(slot.data) + offset + static_cast<size_t>(i) * element);
  return sum;
}

// `values` rounded once to `dtype` at `to`.
void store(const std::vector<float>& values, DType dtype, void* to) {
  const size_t element = dtype_size(dtype);
  for (size_t i = 0; i < values.size(); ++i) store_from_float(dtype, static_cast<char*>(to) + i * element, values[i]);
}

// The device collectives of an NCCL rank, each enqueued on ctx's stream by the subclass's
// enqueue() once the ranks agree on count and dtype (how they meet is the subclass's).
class NcclDeviceCollectives : public Communicator {
 public:
  bool reduces_device_memory() const override { return true; }

  void all_reduce_sum_on_device(Context& ctx, void* data, int64_t count, DType dtype) override {
    enqueue(ctx, count, dtype, data, "all_reduce_sum_on_device", [&](ncclComm_t comm, cudaStream_t stream) {
      check_nccl(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm, stream),
                 "ncclAllReduce", comm);
    });
  }
  void reduce_scatter_sum_on_device(Context& ctx, const void* send, void* recv, int64_t count, DType dtype) override {
    enqueue(ctx, count, dtype, recv, "reduce_scatter_sum_on_device", [&](ncclComm_t comm, cudaStream_t stream) {
      check_nccl(ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm, stream),
                 "ncclReduceScatter", comm);
    });
  }
  void all_gather_on_device(Context& ctx, const void* send, void* recv, int64_t count, DType dtype) override {
    enqueue(ctx, count, dtype, recv, "all_gather_on_device", [&](ncclComm_t comm, cudaStream_t stream) {
      check_nccl(ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(dtype), comm, stream),
                 "ncclAllGather", comm);
    });
  }

 protected:
  using NcclCall = std::function<void(ncclComm_t comm, cudaStream_t stream)>;
  // Checks ctx is this rank's GPU and that the ranks agree on count and dtype (an Error on every
  // rank otherwise), then — unless there is nothing to move — calls `call` with this rank's
  // communicator and ctx's stream.
  virtual void enqueue(Context& ctx, int64_t count, DType dtype, const void* data, const char* what,
                       const NcclCall& call) = 0;
};

class NcclRank final : public NcclDeviceCollectives {
 public:
  NcclRank(int rank, int size, int device, ncclComm_t comm, HostMeeting& meeting, std::string engine)
      : rank_(rank), size_(size), device_(device), comm_(comm), meeting_(meeting), engine_(std::move(engine)) {}
  ~NcclRank() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return engine_; }

  // Host memory: every rank sums every rank's values in rank order in f32 (the same bits on
  // each), rounds once to the dtype, and writes its own copy after all have read.
  void all_reduce_sum(void* data, int64_t count, DType dtype) override {
    const std::vector<Slot> all = meet_and_compare(count, dtype, data, "all_reduce_sum");
    if (count == 0 || size_ == 1) return;
    const std::vector<float> sum = sum_over_ranks(all, 0, count, dtype);
    meeting_.meet(rank_, {});  // every rank has read every buffer
    store(sum, dtype, data);
  }


  // Host memory, as all_reduce_sum: every rank reads the others' buffers, then all meet again
  // before returning (no rank changes its `send` while another still reads it).
  void reduce_scatter_sum(const void* send, void* recv, int64_t count, DType dtype) override {
    BS_CHECK(count == 0 || recv != nullptr, "reduce_scatter_sum on rank ", rank_, ": a null recv");
    const std::vector<Slot> sends = meet_and_compare(count, dtype, send, "reduce_scatter_sum");
    const std::vector<float> sum = sum_over_ranks(sends, static_cast<size_t>(rank_ * count) * dtype_size(dtype), count, dtype);
    meeting_.meet(rank_, {});
    store(sum, dtype, recv);
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    BS_CHECK(count == 0 || recv != nullptr, "all_gather on rank ", rank_, ": a null recv");
    const std::vector<Slot> sends = meet_and_compare(count, dtype, send, "all_gather");
    const size_t block = static_cast<size_t>(count) * dtype_size(dtype);
    for (size_t r = 0; r < sends.size(); ++r)
      if (block > 0) std::memcpy(static_cast<char*>(recv) + r * block, sends[r].data, block);
    meeting_.meet(rank_, {});
  }

  void agree_on(const char* what, const void* data, int64_t count, DType dtype) override {
    meet_and_compare(count, dtype, data, what);
  }

  std::vector<std::string> gather_to_root(const std::string& mine) override {
    Slot slot;
    slot.text = mine;
    const std::vector<Slot> all = meeting_.meet(rank_, std::move(slot));
    std::vector<std::string> out;
    if (rank_ == 0)
      for (const Slot& s : all) out.push_back(s.text);
    return out;
  }

  void barrier() override { meeting_.meet(rank_, {}); }

  [[noreturn]] void abort_all(int exit_code, const std::string&) override {
    std::fflush(nullptr);
    std::_Exit(exit_code);  // every rank is a thread of this process
  }

  // The group's abort: NCCL's pending work on this communicator ends in an error.
  void abort_nccl() {
    std::lock_guard<std::mutex> lock(comm_mutex_);
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  // A device collective: the ranks agree on count and dtype first (on the host), then `call`
  // enqueues it on ctx's stream — unless there is nothing to move.
  void enqueue(Context& ctx, int64_t count, DType dtype, const void* data, const char* what,
               const NcclCall& call) override {
    BS_CHECK(ctx.device() == Device::cuda(device_), what, ": rank ", rank_, " runs on cuda:", device_, ", not ",
             ctx.device().str());
    meet_and_compare(count, dtype, data, what);
    if (count == 0) return;
    CudaBackend& backend = cuda_backend(ctx);
    std::lock_guard<std::mutex> lock(comm_mutex_);  // abort() cannot destroy the comm under the call
    BS_CHECK(comm_ != nullptr, "rank ", rank_, ": the tensor-parallel group was aborted");
    call(comm_, backend.stream());
  }

  // Every rank passes the same count and dtype (NCCL would hang or corrupt otherwise): an Error
  // on every rank naming them when they differ. Returns every rank's slot.
  std::vector<Slot> meet_and_compare(int64_t count, DType dtype, const void* data, const char* what) {
    BS_CHECK(count >= 0 && (count == 0 || data != nullptr), what, " on rank ", rank_, ": ", count,
             " elements at ", data);
    Slot mine;
    mine.data = data;
    mine.count = count;
    mine.dtype = dtype;
    const std::vector<Slot> all = meeting_.meet(rank_, mine);
    for (int r = 0; r < size_; ++r) {
      const Slot& other = all[static_cast<size_t>(r)];
      if (other.count != count || other.dtype != dtype) {
        throw Error(ErrorKind::runtime,
                    detail::concat(what, " on rank ", rank_, " of ", size_, ": rank ", r, " passed ", other.count, " ",
                                   dtype_name(other.dtype), ", this rank ", count, " ", dtype_name(dtype),
                                   ": every rank must reduce the same number of elements of one dtype"));
      }
    }
    return all;
  }

  int rank_, size_, device_;
  ncclComm_t comm_;
  std::mutex comm_mutex_;
  HostMeeting& meeting_;
  std::string engine_;
};

class NcclGroup final : public CommunicatorGroup {
 public:
  explicit NcclGroup(int ranks) : meeting_(ranks) {
    const int gpus = cuda_device_count();
    BS_CHECK_INPUT(ranks >= 1 && ranks <= gpus, "tensor parallelism over ", ranks, " GPUs in one process, but ", gpus,
                   " CUDA GPU(s) are present");
    std::vector<ncclComm_t> comms(static_cast<size_t>(ranks), nullptr);
    std::vector<int> devices(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) devices[static_cast<size_t>(r)] = r;
    check_nccl(ncclCommInitAll(comms.data(), ranks, devices.data()), "ncclCommInitAll");
    const std::string engine = detail::concat(nccl_version(), ", one process, ", ranks, " GPUs");
    for (int r = 0; r < ranks; ++r)
      ranks_.push_back(std::make_unique<NcclRank>(r, ranks, r, comms[static_cast<size_t>(r)], meeting_, engine));
  }

  int size() const override { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r) override {
    BS_CHECK(r >= 0 && r < size(), "rank ", r, " of a group of ", size());
    return *ranks_[static_cast<size_t>(r)];
  }
  void abort(const std::string& why) override {
    meeting_.abort(why);
    for (auto& rank : ranks_) rank->abort_nccl();
  }

 private:
  HostMeeting meeting_;  // outlives the ranks, which refer to it
  std::vector<std::unique_ptr<NcclRank>> ranks_;
};

// One process's rank of an NCCL communicator over the processes of an MPI world: NCCL for device
// memory, the world for the rest.
class NcclProcessRank final : public NcclDeviceCollectives {
 public:
  NcclProcessRank(Communicator& world, int device) : world_(world), device_(device) {
    // The unique id's bytes go from rank 0 to every rank: an all-gather of opaque 32-bit words
    // (copied, never summed), rank 0's block taken.
    static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0, "the id is moved as 32-bit words");
    constexpr int64_t kWords = sizeof(ncclUniqueId) / sizeof(float);
    ncclUniqueId id{};
    if (world_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::vector<ncclUniqueId> ids(static_cast<size_t>(world_.size()));
    world_.all_gather(&id, ids.data(), kWords, DType::f32);
    BS_CUDA_CHECK(cudaSetDevice(device_));
    check_nccl(ncclCommInitRank(&comm_, world_.size(), ids[0], world_.rank()), "ncclCommInitRank");
    engine_ = detail::concat(nccl_version(), " over ", world_.engine(), ", ", world_.size(), " processes");
  }
  ~NcclProcessRank() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }
  int node_rank() const override { return world_.node_rank(); }
  std::string engine() const override { return engine_; }

  void agree_on(const char* what, const void* data, int64_t count, DType dtype) override {
    world_.agree_on(what, data, count, dtype);
  }
  void all_reduce_sum(void* data, int64_t count, DType dtype) override { world_.all_reduce_sum(data, count, dtype); }
  void reduce_scatter_sum(const void* send, void* recv, int64_t count, DType dtype) override {
    world_.reduce_scatter_sum(send, recv, count, dtype);
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    world_.all_gather(send, recv, count, dtype);
  }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return world_.gather_to_root(mine); }
  void barrier() override { world_.barrier(); }
  [[noreturn]] void abort_all(int exit_code, const std::string& why) override {
    if (comm_ != nullptr) ncclCommAbort(comm_);  // this rank's pending NCCL work ends; MPI ends the others
    comm_ = nullptr;
    world_.abort_all(exit_code, why);
    std::_Exit(exit_code);  // the world's abort does not return; should it, end this rank at least
  }

 private:
  void enqueue(Context& ctx, int64_t count, DType dtype, const void* data, const char* what,
               const NcclCall& call) override {
    BS_CHECK(ctx.device() == Device::cuda(device_), what, ": rank ", rank(), " runs on cuda:", device_, ", not ",
             ctx.device().str());
    world_.agree_on(what, data, count, dtype);
    if (count == 0) return;
    call(comm_, cuda_backend(ctx).stream());
  }

  Communicator& world_;
  int device_;
  ncclComm_t comm_ = nullptr;
  std::string engine_;
};

}  // namespace

std::unique_ptr<CommunicatorGroup> nccl_group_in_process(int ranks) { return std::make_unique<NcclGroup>(ranks); }

std::unique_ptr<Communicator> nccl_over_mpi(Communicator& world, int device) {
  return std::make_unique<NcclProcessRank>(world, device);
}

}  // namespace blockscope
