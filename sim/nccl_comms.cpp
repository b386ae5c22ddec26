// The simulated NCCL's communicators: unique ids; ncclCommInitRank's ranks meeting by their id
// (in this process, or one per process through the shared-memory segment of nccl_processes.cpp)
// and ncclCommInitAll's; the cliques they form; destroy, abort (the clique's open collectives
// fail) and the queries. Apart from nccl.cpp, the collectives that run on these cliques; what
// they share is nccl_state.h. What is modelled, and what not: nccl.cpp's opening comment.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "sim/nccl_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {
namespace {

using namespace nccl;  // the process transport (nccl_processes.h)

// ---- Communicator set-up -----------------------------------------------------------------------
// Ranks of ncclCommInitRank meet here, by unique id, without the simulator's lock (a joining
// thread waits for the others).
struct Rendezvous {
  int nranks = 0;
  std::vector<ncclComm*> comms;  // per rank, as they join
  int joined = 0;
  std::shared_ptr<Clique> clique;  // made by the last to join
  std::string failure;
};
std::mutex g_rendezvous_mutex;
std::condition_variable g_rendezvous_changed;
std::map<std::string, std::shared_ptr<Rendezvous>> g_rendezvous;  // by unique id bytes

std::shared_ptr<Clique> make_clique(const std::vector<ncclComm*>& comms) {
  auto clique = std::make_shared<Clique>();
  clique->nranks = static_cast<int>(comms.size());
  clique->calls_made.assign(comms.size(), 0);
  for (ncclComm* comm : comms) {
    clique->devices.push_back(comm->device);
    clique->comms.push_back(comm);
  }
  return clique;
}

// Several ranks on one device: NCCL refuses ("Duplicate GPU detected").
std::string duplicate_device(const std::vector<ncclComm*>& comms) {
  for (size_t a = 0; a < comms.size(); ++a)
    for (size_t b = a + 1; b < comms.size(); ++b)
      if (comms[a]->device == comms[b]->device) {
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) + " are both on device " +
               std::to_string(comms[a]->device) + " (NCCL: duplicate GPU)";
      }
  return "";
}

// A clique of one rank per process, from this process's side: only its own rank is here.
std::shared_ptr<Clique> make_process_clique(ncclComm* comm, int nranks, std::shared_ptr<ProcessLink> link) {
  auto clique = std::make_shared<Clique>();
  clique->nranks = nranks;
  clique->link = std::move(link);
  clique->calls_made.assign(nranks, 0);
  clique->devices.assign(nranks, -1);
  clique->comms.assign(nranks, nullptr);
  clique->devices[comm->rank] = comm->device;
  clique->comms[comm->rank] = comm;
  return clique;
}

// Leaves the rendezvous of this process (failed, or the clique spans processes).
void leave_rendezvous(const std::shared_ptr<Rendezvous>& meeting, const std::string& key, const std::string& failure) {
  std::lock_guard<std::mutex> guard(g_rendezvous_mutex);
  if (!failure.empty() && meeting->failure.empty()) meeting->failure = failure;
  const auto found = g_rendezvous.find(key);
  if (found != g_rendezvous.end() && found->second == meeting) g_rendezvous.erase(found);
  g_rendezvous_changed.notify_all();
}

// Waits until every rank of the comm's unique id has joined (in this process or others), or the
// timeout; then makes its clique.
ncclResult_t await_clique(ncclComm* comm, const std::shared_ptr<Rendezvous>& meeting, const std::string& key,
                          const std::shared_ptr<ProcessLink>& link) {
  std::string problem;
  bool in_this_process = false;
  if (!link->await_all(&problem)) {
    leave_rendezvous(meeting, key, problem);
    delete comm;
    return fail(ncclSystemError, problem);
  }
  if (problem = link->layout(&in_this_process); !problem.empty()) {
    leave_rendezvous(meeting, key, problem);
    delete comm;
    return fail(ncclInvalidUsage, problem);
  }
  if (!in_this_process) {
    leave_rendezvous(meeting, key, "");
    Lock lock(state_mutex());
    comm->clique = make_process_clique(comm, link->nranks(), link);
    live_comms().insert(comm);
    return ncclSuccess;
  }
  std::unique_lock<std::mutex> wait(g_rendezvous_mutex);  // the last of this process's ranks makes the clique
  const auto timeout = std::chrono::duration<double>(nccl_timeout_seconds());
  g_rendezvous_changed.wait_for(wait, timeout, [&] { return meeting->clique != nullptr || !meeting->failure.empty(); });
  if (meeting->clique == nullptr) {
    const std::string failure = meeting->failure.empty() ? "ncclCommInitRank: the clique was never made" : meeting->failure;
    wait.unlock();
    delete comm;
    return fail(ncclInvalidUsage, failure);
  }
  wait.unlock();
  Lock lock(state_mutex());
  comm->clique = meeting->clique;
  live_comms().insert(comm);
  return ncclSuccess;
}

}  // namespace
}  // namespace blockscope::sim::detail

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static std::mutex mutex;
  static std::mt19937_64 random{std::random_device{}()};
  static uint64_t counter = 0;
  std::lock_guard<std::mutex> guard(mutex);
  std::memset(unique_id->internal, 0, sizeof unique_id->internal);
  const uint64_t words[2] = {++counter, random()};
  std::memcpy(unique_id->internal, words, sizeof words);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  if (nranks < 1) return fail(ncclInvalidArgument, "ncclCommInitRank: nranks " + std::to_string(nranks) + " < 1");
  if (rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " is not in 0.." +
                                         std::to_string(nranks - 1));
  }
  if (nranks > kMostProcessRanks) {
    return fail(ncclInvalidUsage, "ncclCommInitRank: " + std::to_string(nranks) + " ranks, but the simulated NCCL joins " +
                                      "at most " + std::to_string(kMostProcessRanks));
  }
  // The segment first: it sees every rank of the id, in this process or another.
  std::string problem;
  const std::shared_ptr<ProcessLink> link = ProcessLink::join(comm_id, nranks, rank, &problem);
  if (link == nullptr) return fail(ncclInvalidUsage, problem);
  const std::string key(comm_id.internal, sizeof comm_id.internal);
  auto* handle = new ncclComm;
  handle->rank = rank;
  handle->device = current_device();
  std::shared_ptr<Rendezvous> meeting;
  {
    std::lock_guard<std::mutex> guard(g_rendezvous_mutex);
    std::shared_ptr<Rendezvous>& slot = g_rendezvous[key];
    if (slot == nullptr) {
      slot = std::make_shared<Rendezvous>();
      slot->nranks = nranks;
      slot->comms.assign(nranks, nullptr);
    }
    meeting = slot;
    meeting->comms[rank] = handle;
    if (++meeting->joined == nranks) {  // every rank in this process: the clique is made here
      const std::string duplicate = duplicate_device(meeting->comms);
      if (duplicate.empty()) {
        meeting->clique = make_clique(meeting->comms);
      } else {
        meeting->failure = "ncclCommInitRank: " + duplicate;
      }
      g_rendezvous.erase(key);  // the id may be used again for a new communicator
      g_rendezvous_changed.notify_all();
    }
  }
  *comm = handle;
  if (t_group.depth > 0) {  // joins at ncclGroupEnd, with the other ranks this thread adds
    t_group.deferred.push_back([handle, meeting, key, link] { return await_clique(handle, meeting, key, link); });
    return ncclSuccess;
  }
  const ncclResult_t result = await_clique(handle, meeting, key, link);
  if (result != ncclSuccess) *comm = nullptr;
  return result;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev " + std::to_string(ndev) + " < 1");
  std::vector<ncclComm*> made;
  for (int r = 0; r < ndev; ++r) {
    const int device = devlist != nullptr ? devlist[r] : r;
    if (!valid_device(device)) {
      for (ncclComm* comm : made) delete comm;
      return fail(ncclInvalidArgument, "ncclCommInitAll: device " + std::to_string(device) + " of rank " +
                                           std::to_string(r) + " is not a device (" + std::to_string(device_count()) +
                                           " simulated, BLOCKSCOPE_SIM_DEVICES)");
    }
    auto* comm = new ncclComm;
    comm->rank = r;
    comm->device = device;
    made.push_back(comm);
  }
  if (const std::string duplicate = duplicate_device(made); !duplicate.empty()) {
    for (ncclComm* comm : made) delete comm;
    return fail(ncclInvalidUsage, "ncclCommInitAll: " + duplicate);
  }
  const std::shared_ptr<Clique> clique = make_clique(made);
  Lock lock(state_mutex());
  for (int r = 0; r < ndev; ++r) {
    made[r]->clique = clique;
    live_comms().insert(made[r]);
    comms[r] = made[r];
  }
  return ncclSuccess;
}

// Operations already queued keep what they need (the clique is shared): destroying a rank's
// handle does not disturb them.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommDestroy", comm)) return r;
  live_comms().erase(comm);
  comm->clique->comms[comm->rank] = nullptr;
  delete comm;
  return ncclSuccess;
}

// Destroys the handle and fails the clique's collectives that are still open or queued: their
// parts fault instead of waiting for a rank that will not come.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommAbort", comm)) return r;
  Clique& clique = *comm->clique;
  const std::string message = "ncclCommAbort: rank " + std::to_string(comm->rank) + " aborted the communicator";
  if (clique.link != nullptr) clique.link->abort(message);  // ends the other processes' waits
  if (!clique.open.empty()) set_fault(cudaErrorLaunchFailure, message);
  for (auto& [index, open] : clique.open) {
    for (const int device : fail_collective(clique, *open, ncclRemoteError, message)) {
      post_device_fault(device, cudaErrorLaunchFailure);
    }
  }
  clique.open.clear();
  notify_gates_changed();
  return ncclCommDestroy(comm);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  Lock lock(state_mutex());
  return check_comm("ncclCommFinalize", comm);  // blocking communicators: nothing left to flush
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommCount", comm)) return r;
  if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->clique->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommCuDevice", comm)) return r;
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommUserRank", comm)) return r;
  if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm("ncclCommGetAsyncError", comm)) return r;
  if (async_error == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  *async_error = comm->clique->async_error;
  return ncclSuccess;
}

}  // extern "C"
