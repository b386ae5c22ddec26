// Internal to the simulated NCCL, what its two files share: nccl.cpp (the collectives: the
// calls checked, joined across ranks, gated on the streams, the data moved; groups; errors) and
// nccl_comms.cpp (the communicators: unique ids, the ranks' rendezvous, cliques, destroy and
// abort, the queries). The vocabulary of a call is nccl_calls.h, the transport between
// processes nccl_processes.h.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sim/nccl_calls.h"
#include "sim/nccl_processes.h"

namespace blockscope::sim::detail {
struct Clique;
}  // namespace blockscope::sim::detail

// The handle <nccl.h> names: one rank of a clique.
struct ncclComm {
  std::shared_ptr<blockscope::sim::detail::Clique> clique;
  int rank = 0;
  int device = 0;
};

namespace blockscope::sim::detail {

// ---- Errors (nccl.cpp) -------------------------------------------------------------------------
// NCCL keeps the last error's message per thread; a communicator's asynchronous error (a
// collective that failed on another thread's call) also has one. ncclGetLastError gives the newer.
struct ErrorNote {
  std::string message;
  uint64_t serial = 0;  // newer notes have higher serials
};
// Notes `message` as this thread's last error; returns `code`.
ncclResult_t fail(ncclResult_t code, const std::string& message);

// ---- Collectives and cliques (nccl.cpp) --------------------------------------------------------
// The k-th collective call of every rank of a clique.
struct Collective {
  uint64_t index = 0;  // k, from 1
  std::vector<nccl::Call> calls;
  std::vector<bool> arrived, reached;  // per rank: called it; its stream reached its part
  std::vector<std::thread::id> thread;  // per rank: the host thread that issued it
  std::vector<bool> outside_group;      // per rank: issued outside a group (NCCL may block in it)
  int arrivals = 0;
  int first = -1;        // the rank that called first: the others are compared with it
  bool moved = false;    // the data has moved for every rank
  std::string failure;   // non-empty: failed (mismatch, hang, abort); its parts fault with it
};

struct Clique {
  int nranks = 0;
  std::shared_ptr<nccl::ProcessLink> link;  // ranks in other processes (one each): they meet through it
  std::vector<int> devices;             // per rank (-1: in another process)
  std::vector<ncclComm*> comms;         // per rank; nullptr once destroyed (or in another process)
  std::vector<uint64_t> calls_made;     // per rank: collectives called so far
  std::map<uint64_t, std::shared_ptr<Collective>> open;  // by index, until every rank called
  ncclResult_t async_error = ncclSuccess;
  ErrorNote async_note;
};

// The communicators not destroyed (under the simulator's lock).
std::unordered_set<ncclComm*>& live_comms();
// ncclInvalidArgument (noted) unless `comm` is a live communicator.
ncclResult_t check_comm(const char* api, ncclComm_t comm);
// Fails a collective: every rank learns it (its communicator's asynchronous error and message;
// the parts still queued fault with it). Returns the devices of the ranks that had arrived.
std::vector<int> fail_collective(Clique& clique, Collective& c, ncclResult_t code, const std::string& message);

// ---- Groups (nccl.cpp) -------------------------------------------------------------------------
// Per host thread, as NCCL's: calls inside a group wait here until the outermost ncclGroupEnd.
struct GroupState {
  int depth = 0;
  std::vector<std::function<ncclResult_t()>> deferred;
};
extern thread_local GroupState t_group;

}  // namespace blockscope::sim::detail
