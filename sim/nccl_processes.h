// The simulated NCCL's transport between processes, one rank per process (mpirun, one simulated
// GPU each): ranks meet in a POSIX shared-memory segment named by the unique id
// (/dev/shm/blockscope-sim-nccl-<id>), which every rank of ncclCommInitRank opens — also ranks of
// one process, so that the clique's kind is known once all have joined: all in this process (the
// in-process cliques of nccl.cpp) or each in its own.
//
// A collective across processes runs when its part comes up on the rank's stream (the queue is
// lazy: at the host's next synchronising call), and the host thread blocks there until every
// rank has done its part; each step posts a rank's bytes in its slot of the segment:
//   step 1: the call (kind, count, type, op, root), compared by every rank with rank 0's, so all
//           ranks fail with one message when they disagree;
//   then:   the data in chunks of at most kProcessSlotBytes / nranks per rank; every rank reads
//           every slot and writes its own output (reductions in f32 in rank order, rounded once:
//           the bits of the in-process cliques).
// A rank writes step s into its slot only after every rank has read step s-1. A rank that never
// posts (no call, or a process that hangs) fails the step after BLOCKSCOPE_SIM_NCCL_TIMEOUT_S
// without progress, naming the ranks missing; a process that exits is named at once; a failure on
// one rank (ncclCommAbort, a mismatch) is written into the segment and ends every rank's wait.
// Not modelled: several ranks per process in one clique, collectives overlapping host-side MPI
// calls that wait for another rank's device work (the host blocks where a GPU would not).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "sim/nccl_calls.h"

namespace blockscope::sim::detail::nccl {

constexpr int kMostProcessRanks = 64;  // the ranks one unique id's segment has slots for
struct ProcessSegment;                 // the shared segment's layout (nccl_processes.cpp)

// One rank's view of a segment (mapped until the last user lets go).
class ProcessLink {
 public:
  // Opens (or creates) the id's segment and takes slot `rank`. nullptr and `*problem` on failure.
  static std::shared_ptr<ProcessLink> join(const ncclUniqueId& id, int nranks, int rank, std::string* problem);
  ~ProcessLink();
  // Waits until every rank has joined (true), or the timeout (false, `*problem` names the missing).
  bool await_all(std::string* problem);
  // The ranks' processes: true when every rank is in this one, false when each is in its own;
  // "" or why neither.
  std::string layout(bool* in_this_process);
  // Ends every rank's wait with `why` (the first failure wins).
  void fail_all(const std::string& why);
  // This rank's part of a collective: blocks until every rank has done its part. Throws a Fault
  // (every rank's the same) when the ranks disagree, one fails, hangs or exits.
  void run(const Call& call, uint64_t index, void* my_recv);
  void abort(const std::string& why);
  int nranks();

 private:
  ProcessLink(std::string name, void* base, size_t bytes, int rank)
      : name_(std::move(name)), base_(base), bytes_(bytes), rank_(rank) {}
  ProcessSegment& segment();
  char* slot(int rank, int n);  // rank's part of the data area
  // Elements [first, first + elements) of every rank's posted input → this rank's output.
  void consume(const Call& call, int n, Elem elem, size_t first, size_t elements, char* recv);
  // Step s may be written once every rank has read step s-1.
  void begin_step(const std::string& what);
  void end_post(const std::string& what);
  void finish_step();
  void throw_if_failed();
  // Until ready(r) for every rank; a failure, an exited process or the timeout throw (the
  // timeout also fails the other ranks, naming the ranks not ready).
  void wait_or_throw(const std::string& what, const char* not_ready, const std::function<bool(int)>& ready);
  // Polls `done` until true; false on a failure in the segment, `*stop` set non-empty, or the
  // timeout without any rank's progress. Spins first, then sleeps, calling `while_sleeping`
  // (if any) before each sleep.
  bool wait_until(const std::function<bool()>& done, const std::string* stop,
                  const std::function<void()>& while_sleeping = nullptr);
  std::string name_;
  void* base_;
  size_t bytes_;
  int rank_;
  uint64_t step_ = 0;  // the last step this rank began
};

}  // namespace blockscope::sim::detail::nccl
