#include "sim/nccl_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim::detail::nccl {

namespace {

constexpr size_t kProcessSlotBytes = size_t{16} << 20;  // the data area, shared by the ranks' slots

struct ProcessCallNote {
  int32_t kind = 0, type = 0, op = 0, root = 0;
  uint64_t count = 0;
};

struct ProcessRankSlot {
  std::atomic<int32_t> pid;         // 0 until the rank joins
  std::atomic<uint64_t> posted;     // the last step whose note or data this rank has posted
  std::atomic<uint64_t> consumed;   // the last step this rank has finished reading
  ProcessCallNote note;
};

}  // namespace

// The segment's head; the data area follows it. ftruncate fills it with zeros: atomics at 0.
struct ProcessSegment {
  std::atomic<int32_t> nranks;  // set by the first rank to join
  std::atomic<int32_t> joined;
  std::atomic<int32_t> failed;  // 1: `failure` says why; set once
  char failure[1024];
  ProcessRankSlot ranks[kMostProcessRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free to work across processes");

namespace {

std::string segment_name(const ncclUniqueId& id) {
  uint64_t words[2];
  std::memcpy(words, id.internal, sizeof words);
  char name[64];
  std::snprintf(name, sizeof name, "/blockscope-sim-nccl-%016llx%016llx", static_cast<unsigned long long>(words[0]),
                static_cast<unsigned long long>(words[1]));
  return name;
}

// False once the process has exited (gone, or a zombie its parent has not reaped yet).
bool process_alive(int32_t pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* stat_file = std::fopen(path, "r");
  if (stat_file == nullptr) return true;  // no /proc: only kill's answer
  char text[512] = {};
  const size_t got = std::fread(text, 1, sizeof text - 1, stat_file);
  std::fclose(stat_file);
  const char* after_name = std::strrchr(text, ')');  // "pid (name) state ..."
  return got == 0 || after_name == nullptr || (after_name[2] != 'Z' && after_name[2] != 'X');
}

void note_to_call(const ProcessCallNote& note, Call* call) {
  call->kind = static_cast<Kind>(note.kind);
  call->type = static_cast<ncclDataType_t>(note.type);
  call->op = static_cast<ncclRedOp_t>(note.op);
  call->root = note.root;
  call->count = note.count;
}

}  // namespace

std::shared_ptr<ProcessLink> ProcessLink::join(const ncclUniqueId& id, int nranks, int rank, std::string* problem) {
  const std::string name = segment_name(id);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    *problem = "ncclCommInitRank: shm_open(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  const size_t bytes = sizeof(ProcessSegment) + kProcessSlotBytes;
  struct stat info {};
  const bool sized = fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) >= bytes;
  if (!sized && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *problem = "ncclCommInitRank: ftruncate(" + name + "): " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *problem = "ncclCommInitRank: mmap(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  auto link = std::shared_ptr<ProcessLink>(new ProcessLink(name, base, bytes, rank));
  ProcessSegment& seg = link->segment();
  int32_t expected = 0;
  if (!seg.nranks.compare_exchange_strong(expected, nranks) && expected != nranks) {
    *problem = "ncclCommInitRank: rank " + std::to_string(rank) + " has nranks " + std::to_string(nranks) +
               ", an earlier rank of this unique id has " + std::to_string(expected);
    return nullptr;
  }
  int32_t free_slot = 0;
  if (!seg.ranks[rank].pid.compare_exchange_strong(free_slot, static_cast<int32_t>(getpid()))) {
    *problem = "ncclCommInitRank: rank " + std::to_string(rank) + " joined this unique id twice";
    return nullptr;
  }
  if (seg.joined.fetch_add(1) + 1 == nranks) shm_unlink(name.c_str());  // all mapped it: no file left
  return link;
}

ProcessLink::~ProcessLink() { munmap(base_, bytes_); }

bool ProcessLink::await_all(std::string* problem) {
  ProcessSegment& seg = segment();
  const int n = seg.nranks.load();
  const bool complete = wait_until([&] { return seg.joined.load() == n; }, nullptr);
  if (complete) return true;
  std::vector<int> joined, missing;
  for (int r = 0; r < n; ++r) (seg.ranks[r].pid.load() != 0 ? joined : missing).push_back(r);
  *problem = "ncclCommInitRank: only ranks " + rank_list(joined) + " of " + std::to_string(n) + " joined within " +
             std::to_string(static_cast<int>(nccl_timeout_seconds())) +
             " s (BLOCKSCOPE_SIM_NCCL_TIMEOUT_S); missing ranks " + rank_list(missing) +
             " (in this process, or one process per rank)";
  shm_unlink(name_.c_str());
  return false;
}

std::string ProcessLink::layout(bool* in_this_process) {
  ProcessSegment& seg = segment();
  const int n = seg.nranks.load();
  std::vector<int32_t> pids;
  for (int r = 0; r < n; ++r) pids.push_back(seg.ranks[r].pid.load());
  const auto mine = static_cast<int32_t>(getpid());
  *in_this_process = std::all_of(pids.begin(), pids.end(), [&](int32_t pid) { return pid == mine; });
  if (*in_this_process) return "";
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (pids[a] == pids[b]) {
        return "ncclCommInitRank: ranks " + std::to_string(a) + " and " + std::to_string(b) + " are in one process (" +
               std::to_string(pids[a]) + "), other ranks in others: the simulated NCCL joins the ranks of a "
               "communicator all in one process, or one per process";
      }
  return "";
}

void ProcessLink::fail_all(const std::string& why) {
  ProcessSegment& seg = segment();
  int32_t expected = 0;
  if (seg.failed.compare_exchange_strong(expected, 2)) {  // 2: writing the message
    std::snprintf(seg.failure, sizeof seg.failure, "%s", why.c_str());
    seg.failed.store(1, std::memory_order_release);
  }
}

void ProcessLink::run(const Call& call, uint64_t index, void* my_recv) {
  ProcessSegment& seg = segment();
  const int n = seg.nranks.load();
  const std::string what = std::string(kind_name(call.kind)) + " #" + std::to_string(index) +
                           " of a communicator of " + std::to_string(n) + " processes";
  // Step 1: the calls.
  begin_step(what);
  seg.ranks[rank_].note = ProcessCallNote{static_cast<int32_t>(call.kind), static_cast<int32_t>(call.type),
                                          static_cast<int32_t>(call.op), call.root, call.count};
  end_post(what);
  Call reference = call;
  note_to_call(seg.ranks[0].note, &reference);
  for (int r = 1; r < n; ++r) {
    Call theirs = call;
    note_to_call(seg.ranks[r].note, &theirs);
    if (const std::string problem = disagreement(theirs, r, reference, 0); !problem.empty()) {
      fail_all(what + ": " + problem);
      break;
    }
  }
  throw_if_failed();
  finish_step();
  // Then the data, chunk by chunk: each rank posts part of its send buffer.
  Elem elem = Elem::F32;
  elem_of(call.type, &elem);
  const size_t size = cublaslt::elem_size(elem);
  const size_t total = send_elements(call, n);  // what each rank posts
  const size_t chunk = std::max<size_t>(1, kProcessSlotBytes / static_cast<size_t>(n) / size);
  const auto* send = static_cast<const char*>(call.send);
  auto* recv = static_cast<char*>(my_recv);
  for (size_t first = 0; first < total; first += chunk) {
    const size_t elements = std::min(chunk, total - first);
    begin_step(what);
    if (call.kind != Kind::broadcast || call.root == rank_) {
      std::memcpy(slot(rank_, n), send + first * size, elements * size);
    }
    end_post(what);
    throw_if_failed();
    consume(call, n, elem, first, elements, recv);
    finish_step();
  }
  note_written(recv, recv_elements(call, n) * size);  // initcheck: the whole receive buffer
}

void ProcessLink::abort(const std::string& why) { fail_all(why); }

int ProcessLink::nranks() { return segment().nranks.load(); }

ProcessSegment& ProcessLink::segment() { return *static_cast<ProcessSegment*>(base_); }

char* ProcessLink::slot(int rank, int n) {
  return static_cast<char*>(base_) + sizeof(ProcessSegment) + static_cast<size_t>(rank) * (kProcessSlotBytes / n);
}

void ProcessLink::consume(const Call& call, int n, Elem elem, size_t first, size_t elements, char* recv) {
  const size_t size = cublaslt::elem_size(elem);
  switch (call.kind) {
    case Kind::all_reduce:
    case Kind::reduce_scatter: {
      // reduce_scatter: this rank's block is [rank·count, (rank+1)·count) of the inputs.
      const size_t begin = call.kind == Kind::reduce_scatter ? static_cast<size_t>(rank_) * call.count : 0;
      const size_t end = call.kind == Kind::reduce_scatter ? begin + call.count : elements + first;
      for (size_t i = std::max(first, begin); i < std::min(first + elements, end); ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) {
          const auto value = static_cast<float>(cublaslt::load_elem(slot(r, n), static_cast<int64_t>(i - first), elem));
          sum = r == 0 ? value : combine(call.op, sum, value);
        }
        cublaslt::store_elem(recv, static_cast<int64_t>(i - begin), elem, sum);  // rounded once
      }
      return;
    }
    case Kind::all_gather:
      for (int r = 0; r < n; ++r) {
        std::memcpy(recv + (static_cast<size_t>(r) * call.count + first) * size, slot(r, n), elements * size);
      }
      return;
    case Kind::broadcast: std::memcpy(recv + first * size, slot(call.root, n), elements * size); return;
  }
}

void ProcessLink::begin_step(const std::string& what) {
  ++step_;
  ProcessSegment& seg = segment();
  wait_or_throw(what, "still reading the previous step", [&](int r) {
    return seg.ranks[r].consumed.load(std::memory_order_acquire) + 1 >= step_;
  });
}

void ProcessLink::end_post(const std::string& what) {
  ProcessSegment& seg = segment();
  seg.ranks[rank_].posted.store(step_, std::memory_order_release);
  wait_or_throw(what, "not arrived", [&](int r) { return seg.ranks[r].posted.load(std::memory_order_acquire) >= step_; });
}

void ProcessLink::finish_step() { segment().ranks[rank_].consumed.store(step_, std::memory_order_release); }

void ProcessLink::throw_if_failed() {
  ProcessSegment& seg = segment();
  if (seg.failed.load(std::memory_order_acquire) == 1) throw Fault(seg.failure);
}

void ProcessLink::wait_or_throw(const std::string& what, const char* not_ready, const std::function<bool(int)>& ready) {
  ProcessSegment& seg = segment();
  const int n = seg.nranks.load();
  std::string gone;
  const auto all_ready = [&] {
    for (int r = 0; r < n; ++r)
      if (!ready(r)) return false;
    return true;
  };
  // Once the wait is long enough to sleep: has a rank not ready exited? (/proc, not every spin)
  const auto look_for_exits = [&] {
    for (int r = 0; r < n; ++r) {
      if (!ready(r) && !process_alive(seg.ranks[r].pid.load())) {
        gone = what + ": rank " + std::to_string(r) + "'s process (" + std::to_string(seg.ranks[r].pid.load()) +
               ") exited";
      }
    }
  };
  const bool all = wait_until(all_ready, &gone, look_for_exits);
  if (all) return;
  if (gone.empty() && seg.failed.load() != 1) {
    std::vector<int> late;
    for (int r = 0; r < n; ++r)
      if (!ready(r)) late.push_back(r);
    gone = what + " hung: ranks " + rank_list(late) + " " + not_ready + " after " +
           std::to_string(static_cast<int>(nccl_timeout_seconds())) + " s (BLOCKSCOPE_SIM_NCCL_TIMEOUT_S)";
  }
  if (!gone.empty()) fail_all(gone);
  throw_if_failed();
  throw Fault(gone);
}

bool ProcessLink::wait_until(const std::function<bool()>& done, const std::string* stop,
                const std::function<void()>& while_sleeping) {
  using Clock = std::chrono::steady_clock;
  ProcessSegment& seg = segment();
  const auto timeout = std::chrono::duration<double>(nccl_timeout_seconds());
  auto since = Clock::now();
  uint64_t progress = 0;
  for (int spins = 0;; ++spins) {
    if (done()) return true;
    if (seg.failed.load(std::memory_order_acquire) == 1 || (stop != nullptr && !stop->empty())) return false;
    uint64_t now_progress = static_cast<uint64_t>(seg.joined.load());
    for (int r = 0; r < seg.nranks.load(); ++r) now_progress += seg.ranks[r].posted.load() + seg.ranks[r].consumed.load();
    if (now_progress != progress) {
      progress = now_progress;
      since = Clock::now();
    } else if (Clock::now() - since > timeout) {
      return false;
    }
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      if (while_sleeping) while_sleeping();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

}  // namespace blockscope::sim::detail::nccl
