// Tensor parallelism (Megatron-style: one block split over ranks): the ranks of a group and the
// collectives between them. Two engines: MPI (built when CMake finds MPI: BLOCKSCOPE_WITH_MPI;
// a process started by mpirun joins MPI_COMM_WORLD through init_mpi) and a single rank (every
// build: single-process runs and tests). The op that reduces a tensor and records it for the
// profiler is ops::all_reduce (ops/all_reduce/all_reduce.h); this layer knows no profiler.
//
// Every collective is blocking and must be called by every rank of the group in the same order
// (as with MPI itself): a rank that calls another collective, or none, is not detected and
// hangs the others. What is detected: all_reduce_sum with counts or dtypes that differ between
// ranks (an error on every rank, below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace blockscope {

// The ranks of a tensor-parallel group and the collectives between them (engine(): which one).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
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
  // Rank 0 receives every rank's string, in rank order (its own first); other ranks get {}.
  virtual std::vector<std::string> gather_to_root(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // After an error on this rank: ends every rank now with `exit_code` (MPI_Abort), no hang.
  [[noreturn]] virtual void abort_all(int exit_code) = 0;
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

namespace detail {
// Tests only: the most elements one MPI call of all_reduce_sum carries (0: the default, INT_MAX
// bytes' worth), so the chunked path can be exercised without gigabytes.
void set_all_reduce_chunk_elements(int64_t elements);
}  // namespace detail

}  // namespace blockscope
