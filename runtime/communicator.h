// Tensor parallelism (Megatron-style: one block split over ranks): the ranks of a group and the
// collectives between them. Two engines: MPI (built when CMake finds MPI: BLOCKSCOPE_WITH_MPI;
// a process started by mpirun joins MPI_COMM_WORLD through init_mpi) and a single rank (every
// build: single-process runs and tests). The op that reduces a tensor and records it for the
// profiler is ops::all_reduce (ops/all_reduce/all_reduce.h); this layer knows no profiler.
//
// Every collective is blocking and must be called by every rank of the group in the same order
// (as with MPI itself). What is detected: all_reduce_sum with counts or dtypes that differ
// between ranks (an error on every rank, below). MPI's engine never waits forever: a rank in a
// collective stops with an Error when a signal arrives (SIGINT/SIGTERM: interrupted), when
// another rank failed (its abort_all notice names it), or after a deadline of 60 s + 10 x the
// work it did since its previous collective (BLOCKSCOPE_COLLECTIVE_TIMEOUT=SECONDS instead): a
// rank that is gone, stuck, or calls another collective, or none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace blockscope {

class Context;

// The ranks of a tensor-parallel group and the collectives between them (engine(): which one).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks on its machine (MPI: the shared-memory split of the
  // world): which of the machine's GPUs it takes. One process: rank().
  virtual int node_rank() const { return rank(); }
  virtual std::string engine() const = 0;  // "MPI (Open MPI v4.1.4)", "single rank"

  // In place, blocking: `count` elements of `dtype` at host address `data` become their sum over
  // every rank. f32 is summed in f32 (MPI_Allreduce, MPI_FLOAT, MPI_SUM). f16 and bf16 are
  // widened to f32, summed in f32 and rounded to the dtype once (not once per addition). Every
  // rank gets the same bits: MPI's reduction order is the library's, but Open MPI's allreduce
  // algorithms combine each element once and hand the one result to every rank (or add the same
  // pairs on both sides, and float addition is commutative); the 16-bit rounding is the same
  // function of those f32 bits everywhere (test/mpi_all_reduce_test.cpp checks it on 2 ranks).
  // Before the data, one small allreduce compares (count, dtype) over the ranks (their min and
  // max): where they differ, every rank throws a runtime Error naming both counts and dtypes —
  // no rank waits for data that never comes. Messages above INT_MAX bytes are sent in chunks.
  virtual void all_reduce_sum(void* data, int64_t count, DType dtype) = 0;
  // Whether all_reduce_sum_on_device reduces device memory itself (NCCL). Otherwise a CUDA
  // tensor is staged through host memory and all_reduce_sum (ops/all_reduce).
  virtual bool reduces_device_memory() const { return false; }
  // `count` elements of `dtype` at `data`, device memory of ctx's GPU, become their sum over
  // every rank, in place: enqueued on ctx's stream (no host wait), the same sum and rounding
  // rules as all_reduce_sum. Only where reduces_device_memory(); others throw.
  virtual void all_reduce_sum_on_device(Context& ctx, void* data, int64_t count, DType dtype);

  // Sequence parallelism's pair, blocking, on host memory, with all_reduce_sum's agreement
  // check and sum rules; `send` and `recv` must not overlap.
  //   reduce_scatter_sum: `send` holds size()·count elements, block r at r·count; `recv` (count
  //     elements) becomes the sum over the ranks of their block rank().
  //   all_gather: `send` holds count elements; `recv` (size()·count) gets rank r's at r·count.
  virtual void reduce_scatter_sum(const void* send, void* recv, int64_t count, DType dtype) = 0;
  virtual void all_gather(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // The same on device memory of ctx's GPU, enqueued on its stream: only where
  // reduces_device_memory() (others throw).
  virtual void reduce_scatter_sum_on_device(Context& ctx, const void* send, void* recv, int64_t count, DType dtype);
  virtual void all_gather_on_device(Context& ctx, const void* send, void* recv, int64_t count, DType dtype);
  // Every rank passes the same count and dtype, and none a negative count or a null address
  // with elements: otherwise a runtime Error on every rank, naming them. The collectives above
  // call it first; an engine that moves device memory over this one (nccl_over_mpi) calls it
  // before each enqueue, since NCCL does not check and would hang or corrupt.
  virtual void agree_on(const char* what, const void* data, int64_t count, DType dtype) = 0;
  // Rank 0 receives every rank's string, in rank order (its own first); other ranks get {}.
  virtual std::vector<std::string> gather_to_root(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // After an error on this rank: tells every other rank `why` (MPI: each stops at its next
  // collective with an Error naming this rank and `why`, removes what it wrote and calls
  // abort_all too), gives them up to 10 s to do so, then ends every rank with `exit_code`
  // (MPI_Abort). No hang.
  [[noreturn]] virtual void abort_all(int exit_code, const std::string& why) = 0;
};

// MPI: call first thing in main() — initialises MPI when this process was started by mpirun
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment), else does nothing. Returns
// the world communicator when initialised, nullptr otherwise (and in a build without MPI, where
// a process started by mpirun says once on stderr that it runs alone). Registers finalize_mpi
// with atexit; calling it again returns the same communicator.
Communicator* init_mpi(int* argc, char*** argv);
// Finalises MPI if init_mpi initialised it (idempotent); world_communicator() is null after.
void finalize_mpi();
// The world communicator after init_mpi, or nullptr when not launched by mpirun / no MPI built.
Communicator* world_communicator();
// A communicator of one rank (all_reduce_sum does nothing): single-process runs and tests.
Communicator& single_rank_communicator();

// The ranks of a group inside one process, each used by its own host thread (one at a time),
// and what ends them all when one fails.
class CommunicatorGroup {
 public:
  virtual ~CommunicatorGroup() = default;
  virtual int size() const = 0;
  virtual Communicator& rank(int r) = 0;
  // After an error on one rank's thread: every rank waiting in a collective of the group, or
  // entering one later, gets an Error naming `why` instead of waiting for it forever.
  virtual void abort(const std::string& why) = 0;
};

// NCCL between the GPUs of this process (runtime/cuda/nccl_group.cpp): `ranks` communicators
// from ncclCommInitAll, rank r on CUDA device r (run_on_gpus in model/tensor_parallel.h gives
// each its thread). Device tensors are reduced by NCCL on the rank's stream
// (reduces_device_memory); the host collectives (gather_to_root, barrier, all_reduce_sum of
// host memory) meet in this process. An InputError without CUDA or with fewer than `ranks`
// GPUs; a runtime Error when NCCL cannot start (its message).
std::unique_ptr<CommunicatorGroup> nccl_group_in_process(int ranks);

// NCCL between the processes of `world` (mpirun), one GPU each: rank 0's ncclGetUniqueId goes to
// every rank over `world`, and each joins with ncclCommInitRank on CUDA device `device` (its GPU).
// Device tensors are reduced by NCCL on the rank's stream once `world` has checked that the ranks
// agree on count and dtype; host collectives, gather_to_root, barrier and abort_all are `world`'s
// (which must outlive it). An InputError in a build without NCCL; a runtime Error when NCCL
// cannot start (its message).
std::unique_ptr<Communicator> nccl_over_mpi(Communicator& world, int device);

namespace detail {
// Tests only: the most elements one MPI call of all_reduce_sum carries (0: the default, INT_MAX
// bytes' worth), so the chunked path can be exercised without gigabytes.
void set_all_reduce_chunk_elements(int64_t elements);
}  // namespace detail

}  // namespace blockscope
