// The simulated GPU's NCCL subset: the functions of the real <nccl.h> (NCCL 2.28, from the CUDA
// toolkit's include directory) that tensor-parallel code calls, linked in place of libnccl in SIM
// builds, written from NCCL's API documentation.
//
// What it models
//   - Communicators of one process: ncclCommInitAll (one thread, every rank), or ncclCommInitRank
//     from one host thread per rank (or in a group), ranks joined by their ncclUniqueId; each rank
//     on the device current when it joined. InitRank blocks until all nranks joined, as NCCL's.
//   - Communicators across processes, one rank per process (mpirun; the unique id passed on by
//     MPI, as NCCL's examples do): ranks meet in shared memory (see "across processes" below),
//     with the same sums, checks and errors; a process that exits is named.
//   - AllReduce, ReduceScatter, AllGather, Broadcast (and Bcast) on a cudaStream_t, ops ncclSum
//     and ncclMax, types ncclFloat32, ncclFloat16, ncclBfloat16. A reduction reads every rank's
//     input exactly, combines them in f32 in rank order 0, 1, … and rounds the f32 result once, to
//     nearest even, to the type: every rank receives the same bits. In-place calls work (all
//     inputs are read before any output is written).
//   - The stream semantics of a GPU: the k-th collective call of every rank of a communicator
//     forms one collective; each rank's part is an op on its stream that waits at a gate (see the
//     queue in runtime_state.h) until every rank has called it and every rank's stream has reached
//     its part. Then the data moves for every rank at once and the streams go on; until then the
//     rank's later ops wait, events recorded after it are not complete, and streams waiting for
//     those events wait too. A host thread synchronising on such work waits (the simulator's lock
//     released, so the other ranks' threads can call) up to BLOCKSCOPE_SIM_NCCL_TIMEOUT_S
//     (default 20 s) without any rank arriving, then the collective fails: cudaErrorLaunchTimeout
//     on every arrived rank's device, the message naming the collective and the ranks that
//     arrived, were stuck behind other work, or never called.
//   - Checks NCCL leaves to the user: ranks disagreeing on a collective (kind, count, type, op,
//     root) fail it on every rank (the late rank's call returns ncclInvalidUsage; the others'
//     streams fault with the same message, and ncclCommGetAsyncError says ncclInvalidUsage);
//     buffers must lie inside device (or managed) allocations of the communicator's device or of
//     a peer with access enabled, with room for the call's count; one host thread calling for two
//     ranks of a collective outside a group (a deadlock on NCCL: "every NCCL call may have to
//     block, waiting for other threads/ranks to arrive") is ncclInvalidUsage; a destroyed
//     communicator is an invalid argument, not a use after free.
//   - Group calls (ncclGroupStart/End, nested): calls inside a group are checked at once and
//     issued at the outermost ncclGroupEnd, in order; ncclCommInitRank in a group waits there.
// What it does not model
//   - Time: no link bandwidth or latency; a collective takes what the queue gives it.
//   - Processes: one communicator's ranks all in one process or one per process (a mix is
//     ncclInvalidUsage); no network (the processes share this machine's memory). A rank that never
//     joins makes ncclCommInitRank fail with ncclSystemError after the timeout.
//   - CUDA graph capture of NCCL calls: refused (ncclInvalidUsage) — a captured collective would
//     need its gate replayed with the graph, which the sim's graphs (replayed op lists) lack.
//   - Nonblocking communicators (ncclConfig_t), point-to-point, ncclReduce, other types and ops,
//     user-defined ops, communicator splitting, buffer registration.
//
// The communicators (set-up, rendezvous, destroy, abort, queries) are nccl_comms.cpp; what the
// two files share, nccl_state.h.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sim/cublaslt_model.h"
#include "sim/nccl_calls.h"
#include "sim/nccl_processes.h"
#include "sim/nccl_state.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail {

// ---- Errors ------------------------------------------------------------------------------------
namespace {
std::atomic<uint64_t> g_error_serial{0};  // ErrorNote::serial
thread_local ErrorNote t_nccl_error;
}  // namespace

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  t_nccl_error = {message, ++g_error_serial};
  return code;
}

// ---- Collectives and cliques -------------------------------------------------------------------
std::unordered_set<ncclComm*>& live_comms() {
  static std::unordered_set<ncclComm*> comms;
  return comms;
}

ncclResult_t check_comm(const char* api, ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(api) + ": comm is NULL");
  if (live_comms().count(comm) == 0) {
    return fail(ncclInvalidArgument, std::string(api) + ": comm is not a live communicator (destroyed, or never made)");
  }
  return ncclSuccess;
}

std::vector<int> fail_collective(Clique& clique, Collective& c, ncclResult_t code, const std::string& message) {
  std::vector<int> devices;
  if (!c.failure.empty()) return devices;
  c.failure = message;
  if (clique.async_error == ncclSuccess) clique.async_error = code;
  clique.async_note = {message, ++g_error_serial};
  for (int r = 0; r < clique.nranks; ++r)
    if (c.arrived[r]) devices.push_back(clique.devices[r]);
  return devices;
}

thread_local GroupState t_group;

namespace {

using namespace nccl;  // the calls' vocabulary (nccl_calls.h) and the process transport

std::string describe(const Clique& clique, const Collective& c) {
  std::string devices;
  for (int r = 0; r < clique.nranks; ++r) devices += (r ? "," : "") + std::to_string(clique.devices[r]);
  const Call& call = c.calls[c.first];
  std::string text = std::string(kind_name(call.kind)) + " #" + std::to_string(c.index) + " of a communicator of " +
                     std::to_string(clique.nranks) + " ranks (devices " + devices + "), " +
                     std::to_string(call.count) + " x " + type_name(call.type);
  if (reduces(call.kind)) text += std::string(", ") + op_name(call.op);
  if (call.kind == Kind::broadcast) text += ", root " + std::to_string(call.root);
  return text;
}

// ---- Moving the data ---------------------------------------------------------------------------
// Every input is read before any output is written: in-place calls alias them.
void move_data(const Clique& clique, const Collective& c) {
  const int n = clique.nranks;
  const Call& first = c.calls[c.first];
  Elem elem = Elem::F32;
  elem_of(first.type, &elem);
  const size_t size = cublaslt::elem_size(elem);
  switch (first.kind) {
    case Kind::all_reduce:
    case Kind::reduce_scatter: {
      const size_t total = send_elements(first, n);
      std::vector<float> sum(total);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < total; ++i) {
          const auto value = static_cast<float>(cublaslt::load_elem(c.calls[r].send, static_cast<int64_t>(i), elem));
          sum[i] = r == 0 ? value : combine(first.op, sum[i], value);
        }
      }
      std::vector<char> rounded(total * size);  // rounded once: the same bits for every rank
      for (size_t i = 0; i < total; ++i) cublaslt::store_elem(rounded.data(), static_cast<int64_t>(i), elem, sum[i]);
      const size_t bytes = first.count * size;
      for (int r = 0; r < n; ++r) {
        const size_t offset = first.kind == Kind::reduce_scatter ? static_cast<size_t>(r) * bytes : 0;
        std::memcpy(c.calls[r].recv, rounded.data() + offset, bytes);
        note_written(c.calls[r].recv, bytes);  // initcheck
      }
      return;
    }
    case Kind::all_gather: {
      const size_t bytes = first.count * size;
      std::vector<char> gathered(bytes * n);
      for (int r = 0; r < n; ++r) std::memcpy(gathered.data() + static_cast<size_t>(r) * bytes, c.calls[r].send, bytes);
      for (int r = 0; r < n; ++r) {
        std::memcpy(c.calls[r].recv, gathered.data(), gathered.size());
        note_written(c.calls[r].recv, gathered.size());  // initcheck
      }
      return;
    }
    case Kind::broadcast: {
      const size_t bytes = first.count * size;
      const auto* root = static_cast<const char*>(c.calls[first.root].send);
      const std::vector<char> data(root, root + bytes);
      for (int r = 0; r < n; ++r) {
        std::memcpy(c.calls[r].recv, data.data(), bytes);
        note_written(c.calls[r].recv, bytes);  // initcheck
      }
      return;
    }
  }
}

// One rank's part of a collective, at the gate of the queue: open once every rank called and
// every rank's stream reached its part (or once it failed: the part then faults).
class CollectiveGate : public Gate {
 public:
  CollectiveGate(std::shared_ptr<Clique> clique, std::shared_ptr<Collective> collective, int rank)
      : clique_(std::move(clique)), c_(std::move(collective)), rank_(rank) {}

  bool open() override {
    c_->reached[rank_] = true;
    if (!c_->failure.empty() || c_->moved) return true;
    return c_->arrivals == clique_->nranks &&
           std::all_of(c_->reached.begin(), c_->reached.end(), [](bool reached) { return reached; });
  }

  std::string waiting_for() const override {
    std::vector<int> waiting, behind, missing;
    for (int r = 0; r < clique_->nranks; ++r) {
      (!c_->arrived[r] ? missing : c_->reached[r] ? waiting : behind).push_back(r);
    }
    std::string text = describe(*clique_, *c_) + ": ";
    if (!waiting.empty()) text += "ranks " + rank_list(waiting) + " arrived";
    if (!behind.empty()) {
      text += "; ranks " + rank_list(behind) + " called it but their streams never reached it (stuck behind other work)";
    }
    if (!missing.empty()) text += "; ranks " + rank_list(missing) + " missing (never called it)";
    return text;
  }

  std::vector<int> abandon(const std::string& why) override {
    return fail_collective(*clique_, *c_, ncclInvalidUsage, why);
  }

  // The op: moves the data for every rank (the first part to run does), or faults.
  void run() {
    if (!c_->failure.empty()) {
      post_device_fault(clique_->devices[rank_], cudaErrorLaunchFailure);  // every rank's device hears
      throw Fault(c_->failure);
    }
    if (c_->moved) return;
    c_->moved = true;
    move_data(*clique_, *c_);
  }

 private:
  std::shared_ptr<Clique> clique_;
  std::shared_ptr<Collective> c_;
  int rank_;
};

// ---- Argument checks ---------------------------------------------------------------------------

// A buffer of `elements` x `size` bytes the rank's device may access: inside one device, pool,
// graph or managed allocation of that device or of a peer whose memory it may access.
ncclResult_t check_buffer(const char* api, const char* what, const void* p, size_t elements, size_t size,
                          const ncclComm& comm) {
  const std::string where = std::string(api) + ": rank " + std::to_string(comm.rank) + "'s " + what + " ";
  if (p == nullptr) return fail(ncclInvalidArgument, where + "is NULL");
  AllocationInfo info;
  char address[32];
  std::snprintf(address, sizeof address, "%p", p);
  if (!find_allocation(p, &info) || info.kind == AllocationInfo::Kind::pinned_host ||
      info.kind == AllocationInfo::Kind::registered_host) {
    return fail(ncclInvalidArgument, where + address + " is not device memory");
  }
  const size_t offset = static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(info.base));
  if (elements * size > info.size - offset) {
    return fail(ncclInvalidArgument, where + address + " holds " + std::to_string((info.size - offset) / size) +
                                         " elements past it; the call needs " + std::to_string(elements));
  }
  if (info.kind != AllocationInfo::Kind::managed && !peer_access_enabled(comm.device, info.device)) {
    return fail(ncclInvalidArgument, where + address + " is memory of device " + std::to_string(info.device) +
                                         ", which rank " + std::to_string(comm.rank) + "'s device " +
                                         std::to_string(comm.device) + " may not access (no peer access)");
  }
  return ncclSuccess;
}

// The call's own arguments; the ranks' agreement is checked when they meet.
ncclResult_t check_call(const char* api, const Call& call, const ncclComm& comm, CUstream_st** stream_out,
                        cudaStream_t stream) {
  Elem elem;
  if (!elem_of(call.type, &elem)) {
    const char* name = type_name(call.type);
    if (name == nullptr) {
      return fail(ncclInvalidArgument, std::string(api) + ": datatype " + std::to_string(call.type) +
                                           " is not an ncclDataType_t");
    }
    return fail(ncclInvalidArgument, std::string(api) + ": datatype " + name +
                                         " is not in the simulated NCCL (ncclFloat32, ncclFloat16, ncclBfloat16)");
  }
  if (reduces(call.kind) && call.op != ncclSum && call.op != ncclMax) {
    const char* name = op_name(call.op);
    return fail(ncclInvalidArgument, std::string(api) + ": reduction op " +
                                         (name ? std::string(name) : std::to_string(call.op)) +
                                         " is not in the simulated NCCL (ncclSum, ncclMax)");
  }
  const int n = comm.clique->nranks;
  if (call.kind == Kind::broadcast && (call.root < 0 || call.root >= n)) {
    return fail(ncclInvalidArgument, std::string(api) + ": root " + std::to_string(call.root) +
                                         " is not a rank of this communicator (0.." + std::to_string(n - 1) + ")");
  }
  const size_t size = cublaslt::elem_size(elem);
  if (call.count > SIZE_MAX / size / static_cast<size_t>(n)) {  // the largest buffer: count x nranks
    return fail(ncclInvalidArgument, std::string(api) + ": count " + std::to_string(call.count) + " x " +
                                         std::to_string(n) + " ranks overflows the buffer size");
  }
  // NCCL sets the communicator's device itself: the legacy and per-thread handles name that
  // device's default stream.
  CUstream_st* s = nullptr;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    s = legacy_stream(comm.device);
  } else {
    s = resolve_stream(stream);
    if (s == nullptr) return fail(ncclInvalidArgument, std::string(api) + ": stream is not a live stream");
    if (s->device != comm.device) {
      return fail(ncclInvalidArgument, std::string(api) + ": the stream is on device " + std::to_string(s->device) +
                                           ", rank " + std::to_string(comm.rank) + "'s communicator on device " +
                                           std::to_string(comm.device));
    }
  }
  if (s->capture != nullptr) {
    s->capture->invalidated = true;
    return fail(ncclInvalidUsage, std::string(api) + ": CUDA graph capture of NCCL calls is not supported by the "
                                                     "simulated NCCL (the capture is invalidated)");
  }
  *stream_out = s;
  if (call.count == 0) return ncclSuccess;
  const bool in_place_only = call.kind == Kind::broadcast && call.root != comm.rank;  // send unused
  if (!in_place_only) {
    if (const ncclResult_t r = check_buffer(api, "sendbuff", call.send, send_elements(call, n), size, comm)) return r;
  }
  return check_buffer(api, "recvbuff", call.recv, recv_elements(call, n), size, comm);
}

// ---- Groups ------------------------------------------------------------------------------------

// A clique across processes: the part meets the other processes' when the stream runs it; a
// failure there is the communicator's asynchronous error too.
ncclResult_t issue_across_processes(ncclComm& comm, const Call& call, CUstream_st* stream) {
  const std::shared_ptr<Clique> clique = comm.clique;
  const uint64_t index = ++clique->calls_made[comm.rank];
  const cudaError_t error = submit(stream, kind_name(call.kind), [clique, call, index] {
    try {
      clique->link->run(call, index, call.recv);
    } catch (const Fault& fault) {
      if (clique->async_error == ncclSuccess) clique->async_error = ncclRemoteError;
      clique->async_note = {fault.what(), ++g_error_serial};
      throw;
    }
  });
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, std::string(kind_name(call.kind)) + ": queuing on the stream failed: " +
                                            cudaGetErrorString(error));
  }
  return ncclSuccess;
}

// Joins rank `rank`'s call to its collective and queues its part; the ranks are compared here.
ncclResult_t issue(ncclComm& comm, const Call& call, CUstream_st* stream, bool in_group) {
  Lock lock(state_mutex());
  Clique& clique = *comm.clique;
  const int rank = comm.rank;
  if (clique.link != nullptr) return issue_across_processes(comm, call, stream);
  const uint64_t index = ++clique.calls_made[rank];
  std::shared_ptr<Collective>& slot = clique.open[index];
  if (slot == nullptr) {
    slot = std::make_shared<Collective>();
    slot->index = index;
    slot->calls.resize(clique.nranks);
    slot->arrived.assign(clique.nranks, false);
    slot->reached.assign(clique.nranks, false);
    slot->thread.resize(clique.nranks);
    slot->outside_group.assign(clique.nranks, false);
  }
  const std::shared_ptr<Collective> c = slot;
  c->calls[rank] = call;
  c->arrived[rank] = true;
  c->thread[rank] = std::this_thread::get_id();
  c->outside_group[rank] = !in_group;
  if (c->first < 0) c->first = rank;
  if (++c->arrivals == clique.nranks) clique.open.erase(index);
  if (c->failure.empty()) {
    std::string problem = disagreement(call, rank, c->calls[c->first], c->first);
    for (int r = 0; r < clique.nranks && problem.empty(); ++r) {
      if (r != rank && c->arrived[r] && c->thread[r] == std::this_thread::get_id() && c->outside_group[r]) {
        problem = std::string(kind_name(call.kind)) + ": one host thread called it for rank " + std::to_string(r) +
                  " outside a group, then for rank " + std::to_string(rank) +
                  ": NCCL may block in the first call waiting for the other ranks (a deadlock); wrap the calls "
                  "in ncclGroupStart/ncclGroupEnd";
      }
    }
    if (!problem.empty()) {
      set_fault(cudaErrorLaunchFailure, problem);  // what the other ranks' synchronising calls say
      for (const int device : fail_collective(clique, *c, ncclInvalidUsage, problem)) {
        if (device != comm.device) post_device_fault(device, cudaErrorLaunchFailure);
      }
      // The part of a rank already queued faults with it; this rank's call reports it here.
      notify_gates_changed();
      return fail(ncclInvalidUsage, problem);
    }
  } else {
    return fail(ncclInvalidUsage, c->failure);
  }
  auto gate = std::make_shared<CollectiveGate>(comm.clique, c, rank);
  const cudaError_t error = submit(stream, kind_name(call.kind), [gate] { gate->run(); }, false, gate);
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, std::string(kind_name(call.kind)) + ": queuing on the stream failed: " +
                                            cudaGetErrorString(error));
  }
  return ncclSuccess;
}

ncclResult_t collective(const Call& call, ncclComm_t comm, cudaStream_t stream) {
  const char* api = kind_name(call.kind);
  Lock lock(state_mutex());
  if (const ncclResult_t r = check_comm(api, comm)) return r;
  CUstream_st* s = nullptr;
  if (const ncclResult_t r = check_call(api, call, *comm, &s, stream)) return r;
  if (call.count == 0) return ncclSuccess;  // nothing to move: NCCL returns at once
  if (t_group.depth > 0) {
    // Issued at ncclGroupEnd: the stream is looked up again then (it may be gone by then).
    const uint64_t stream_id = s->id;
    t_group.deferred.push_back([comm, call, stream_id, stream]() -> ncclResult_t {
      Lock relock(state_mutex());
      const std::string api = kind_name(call.kind);
      if (live_comms().count(comm) == 0) return fail(ncclInvalidArgument, api + ": comm destroyed inside the group");
      CUstream_st* target = (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
                                ? legacy_stream(comm->device)
                                : resolve_stream(stream);
      if (target == nullptr || target->id != stream_id) {
        return fail(ncclInvalidArgument, api + ": stream destroyed inside the group");
      }
      return issue(*comm, call, target, true);
    });
    return ncclSuccess;
  }
  return issue(*comm, call, s, false);
}

}  // namespace
}  // namespace blockscope::sim::detail

using namespace blockscope::sim;
using namespace blockscope::sim::detail;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The newer of this thread's last error and, with a communicator, its asynchronous error (a
// collective another thread's call failed). Not cleared by reading, as NCCL's.
const char* ncclGetLastError(ncclComm_t comm) {
  thread_local std::string text;
  Lock lock(state_mutex());
  text = t_nccl_error.message;
  if (comm != nullptr && live_comms().count(comm) != 0) {
    const ErrorNote& note = comm->clique->async_note;
    if (note.serial > t_nccl_error.serial) text = note.message;
  }
  return text.c_str();
}

ncclResult_t ncclGroupStart() {
  ++t_group.depth;
  return ncclSuccess;
}

// The outermost end issues the group's calls in order; the first error is returned (the others
// are still issued, so the ranks that did call stay matched).
ncclResult_t ncclGroupEnd() {
  if (t_group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  if (--t_group.depth > 0) return ncclSuccess;
  std::vector<std::function<ncclResult_t()>> calls = std::move(t_group.deferred);
  t_group.deferred.clear();
  ncclResult_t first_error = ncclSuccess;
  for (const auto& call : calls) {
    const ncclResult_t r = call();
    if (first_error == ncclSuccess) first_error = r;
  }
  return first_error;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Call{Kind::all_reduce, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Call{Kind::reduce_scatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Call{Kind::all_gather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Call{Kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

}  // extern "C"
