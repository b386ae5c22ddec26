// The communicators of runtime/communicator.h: one rank (every build) and MPI's world
// (BLOCKSCOPE_WITH_MPI). mpi.h is included here only: nothing else in the tree names MPI.
#include "runtime/communicator.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "runtime/error.h"
#include "runtime/interrupt.h"

#ifdef BLOCKSCOPE_WITH_MPI
#define OMPI_SKIP_MPICXX 1   // the C API only: no deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace blockscope {
namespace {

int64_t g_chunk_elements = 0;  // detail::set_all_reduce_chunk_elements

// The most elements of `element_bytes` one MPI call carries: INT_MAX bytes (MPI counts are int).
[[maybe_unused]] int64_t chunk_elements(size_t element_bytes) {
  const int64_t most = INT_MAX / static_cast<int64_t>(element_bytes);
  return g_chunk_elements > 0 ? std::min(g_chunk_elements, most) : most;
}

// Started by a launcher: Open MPI's mpirun, MPICH's (Hydra's) mpiexec and Slurm's PMI, or PMIx.
bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

void check_arguments(const char* engine, const char* what, const void* data, int64_t count) {
  BS_CHECK(count >= 0, engine, ": ", what, " of a negative count (", count, ")");
  BS_CHECK(count == 0 || data != nullptr, engine, ": ", what, " of ", count, " elements at a null address");
}

// One rank's reduce-scatter or all-gather: its block is the whole of `send`.
void copy_block(const char* what, const void* send, void* recv, int64_t count, DType dtype) {
  check_arguments("single rank", what, send, count);
  check_arguments("single rank", what, recv, count);
  if (count > 0) std::memcpy(recv, send, static_cast<size_t>(count) * dtype_size(dtype));
}

class SingleRank final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string engine() const override { return "single rank"; }
  void agree_on(const char* what, const void* data, int64_t count, DType) override {
    check_arguments("single rank", what, data, count);
  }
  void all_reduce_sum(void* data, int64_t count, DType) override {
    check_arguments("single rank", "all_reduce_sum", data, count);
  }
  void reduce_scatter_sum(const void* send, void* recv, int64_t count, DType dtype) override {
    copy_block("reduce_scatter_sum", send, recv, count, dtype);
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    copy_block("all_gather", send, recv, count, dtype);
  }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort_all(int exit_code, const std::string&) override {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
};

#ifdef BLOCKSCOPE_WITH_MPI

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

// MPI_COMM_WORLD returns its errors (MPI_ERRORS_RETURN, set by init_mpi): each becomes an Error.
void check_mpi(int code, const char* call, int rank) {
  if (code != MPI_SUCCESS)
    throw Error(ErrorKind::runtime, detail::concat(call, " failed on rank ", rank, ": ", mpi_error_text(code)));
}

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// BLOCKSCOPE_COLLECTIVE_TIMEOUT: seconds a rank waits in one collective, a positive decimal
// number (hex, "inf" and trailing text refused); 0 when unset (the default rule applies).
double collective_timeout_from_environment() {
  const char* text = std::getenv("BLOCKSCOPE_COLLECTIVE_TIMEOUT");
  if (text == nullptr || *text == '\0') return 0;
  const std::string value(text);
  const bool decimal = value.find_first_not_of("0123456789.") == std::string::npos;
  char* end = nullptr;
  const double seconds = decimal ? std::strtod(text, &end) : 0;
  if (!decimal || end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    throw InputError("BLOCKSCOPE_COLLECTIVE_TIMEOUT='" + value +
                     "': expected the seconds a rank waits in one collective, a positive decimal number such as 120");
  }
  return seconds;
}

// "Open MPI v4.1.4" from "Open MPI v4.1.4, package: Debian OpenMPI, ident: ...".
std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown version";
  std::string version(text, static_cast<size_t>(length));
  const size_t end = version.find_first_of(",\n");
  if (end != std::string::npos) version.resize(end);
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

// Every collective of the MPI engine is started non-blocking and waited for by wait(): it polls
// the request, this process's signals (SIGINT/SIGTERM under mpirun stop the rank here, not after
// the collective that may never end) and the failure notices of the other ranks (abort_all
// sends one before MPI_Abort, so the others stop at their next collective, clean up and end
// too), against a deadline: 60 s + 10 x the work this rank did since its previous collective
// (the ranks do the same work: a peer that takes ten times longer is gone, stuck or running
// other work), or BLOCKSCOPE_COLLECTIVE_TIMEOUT seconds.
class MpiCommunicator final : public Communicator {
 public:
  static constexpr int kNoticeTag = 1;
  static constexpr int kNoticeBytes = 1024;
  static constexpr double kDeadlineFloorSeconds = 60;
  static constexpr double kDeadlinePerWorkSecond = 10;
  static constexpr double kAbortGraceSeconds = 10;  // abort_all: how long the others get to clean up
  static constexpr size_t kStagingAlignment = 64;

  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", -1);
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", rank_);
    // The ranks sharing this machine's memory, ordered by world rank: this one's index there.
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type",
              rank_);
    check_mpi(MPI_Comm_rank(node, &node_rank_), "MPI_Comm_rank (node)", rank_);
    MPI_Comm_free(&node);
    engine_ = "MPI (" + library_version() + ")";
    // The failure notices travel on a communicator of their own, so no collective's traffic
    // can match them; one receive from any rank is always posted.
    check_mpi(MPI_Comm_dup(comm_, &notices_), "MPI_Comm_dup", rank_);
    post_notice_receive();
    last_collective_end_ = Clock::now();
  }
  ~MpiCommunicator() override {
    // Before MPI_Finalize: no receive left posted.
    if (notice_request_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&notice_request_);
      MPI_Wait(&notice_request_, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&notices_);
    std::free(staging_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node_rank() const override { return node_rank_; }
  std::string engine() const override { return engine_; }

  void all_reduce_sum(void* data, int64_t count, DType dtype) override {
    agree_on("all_reduce_sum", data, count, dtype);
    if (count == 0 || size_ == 1) return;
    if (dtype == DType::f32) {
      float* values = static_cast<float*>(data);
      const int64_t chunk = std::min(count, chunk_elements(sizeof(float)));
      float* staged = staging<float>(static_cast<size_t>(chunk));
      for (int64_t done = 0; done < count; done += chunk) {
        const int n = static_cast<int>(std::min(chunk, count - done));
        std::memcpy(staged, values + done, static_cast<size_t>(n) * sizeof(float));
        MPI_Request request;
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, staged, n, MPI_FLOAT, MPI_SUM, comm_, &request), "MPI_Iallreduce",
                  rank_);
        wait(request, "MPI_Allreduce");
        std::memcpy(values + done, staged, static_cast<size_t>(n) * sizeof(float));
      }
      return;
    }
    // f16 / bf16: widened to f32 a chunk at a time, summed in f32, rounded once on the way back.
    const int64_t chunk = std::min(count, chunk_elements(sizeof(float)));
    float* wide = staging<float>(static_cast<size_t>(chunk));
    char* bytes = static_cast<char*>(data);
    const size_t element = dtype_size(dtype);
    for (int64_t done = 0; done < count; done += chunk) {
      const int64_t n = std::min(chunk, count - done);
      void* part = bytes + static_cast<size_t>(done) * element;
      widen(part, n, dtype, wide);
      MPI_Request request;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, wide, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_, &request),
                "MPI_Iallreduce", rank_);
      wait(request, "MPI_Allreduce");
      narrow(wide, n, dtype, part);
    }
  }

  // One MPI call each (counts within MPI's int; sequence-parallel blocks are far below).
  void reduce_scatter_sum(const void* send, void* recv, int64_t count, DType dtype) override {
    agree_on("reduce_scatter_sum", recv, count, dtype);
    BS_CHECK(count * size_ <= INT_MAX, "reduce_scatter_sum: ", count, " elements per rank x ", size_,
             " ranks exceeds one MPI call (INT_MAX)");
    if (count == 0) return;
    float* wide = staging<float>(static_cast<size_t>(count * (size_ + 1)));  // every block, then this rank's sum
    float* mine = wide + count * size_;
    if (dtype == DType::f32) std::memcpy(wide, send, static_cast<size_t>(count * size_) * sizeof(float));
    else widen(send, count * size_, dtype, wide);
    MPI_Request request;
    check_mpi(MPI_Ireduce_scatter_block(wide, mine, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_, &request),
              "MPI_Ireduce_scatter_block", rank_);
    wait(request, "MPI_Reduce_scatter_block");
    if (dtype == DType::f32) std::memcpy(recv, mine, static_cast<size_t>(count) * sizeof(float));
    else narrow(mine, count, dtype, recv);
  }

  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    agree_on("all_gather", recv, count, dtype);
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    BS_CHECK(bytes * size_ <= INT_MAX, "all_gather: ", bytes, " bytes per rank x ", size_,
             " ranks exceeds one MPI call (INT_MAX)");
    if (count == 0) return;
    char* all = staging<char>(static_cast<size_t>(bytes * (size_ + 1)));  // every rank's part, then this rank's
    char* part = all + bytes * size_;
    std::memcpy(part, send, static_cast<size_t>(bytes));
    MPI_Request request;
    check_mpi(MPI_Iallgather(part, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE, comm_,
                             &request),
              "MPI_Iallgather", rank_);
    wait(request, "MPI_Allgather");
    std::memcpy(recv, all, static_cast<size_t>(bytes * size_));
  }

  std::vector<std::string> gather_to_root(const std::string& mine) override {
    BS_CHECK(mine.size() <= static_cast<size_t>(INT_MAX), "gather_to_root: a string of ", mine.size(),
             " bytes (at most INT_MAX)");
    const size_t ranks = rank_ == 0 ? static_cast<size_t>(size_) : 0;  // what this rank receives
    int* lengths = staging<int>(1 + ranks);  // this rank's length, then every rank's (rank 0)
    lengths[0] = static_cast<int>(mine.size());
    MPI_Request request;
    check_mpi(MPI_Igather(lengths, 1, MPI_INT, lengths + 1, 1, MPI_INT, 0, comm_, &request), "MPI_Igather", rank_);
    wait(request, "MPI_Gather");
    const std::vector<int> counts(lengths + 1, lengths + 1 + ranks);
    std::vector<int> offsets(ranks);
    int64_t total = 0;
    for (size_t r = 0; r < ranks; ++r) {
      offsets[r] = static_cast<int>(total);
      total += counts[r];
      BS_CHECK(total <= INT_MAX, "gather_to_root: the strings of every rank add up to more than INT_MAX bytes");
    }
    // Staged: the counts and offsets (rank 0), this rank's string, then every rank's (rank 0).
    const size_t text_bytes = mine.size() + static_cast<size_t>(total);
    int* staged_counts = staging<int>(2 * ranks + (text_bytes + sizeof(int) - 1) / sizeof(int));
    int* staged_offsets = staged_counts + ranks;
    char* text = reinterpret_cast<char*>(staged_offsets + ranks);
    std::memcpy(text, mine.data(), mine.size());
    std::copy(counts.begin(), counts.end(), staged_counts);
    std::copy(offsets.begin(), offsets.end(), staged_offsets);
    check_mpi(MPI_Igatherv(text, static_cast<int>(mine.size()), MPI_CHAR, text + mine.size(), staged_counts,
                           staged_offsets, MPI_CHAR, 0, comm_, &request),
              "MPI_Igatherv", rank_);
    wait(request, "MPI_Gatherv");
    std::vector<std::string> out;
    for (size_t r = 0; r < ranks; ++r)
      out.emplace_back(text + mine.size() + offsets[r], static_cast<size_t>(counts[r]));
    return out;
  }

  void barrier() override {
    MPI_Request request;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier", rank_);
    wait(request, "MPI_Barrier");
  }

  [[noreturn]] void abort_all(int exit_code, const std::string& why) override {
    std::fflush(nullptr);
    // Tell every other rank why (each stops at its next collective, removes what it wrote and
    // calls abort_all too), then wait until each has said it is done or the grace has passed:
    // MPI_Abort ends them all, so whoever calls it first must not cut another's cleaning short.
    // A rank that stops because of another's notice (a follower) leaves MPI_Abort to the ranks
    // that failed first, so mpirun ends with the first failure's exit status.
    const bool follower = poll_notices();
    std::string text = why.empty() ? "ended with exit status " + std::to_string(exit_code) : why;
    text = "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + text;
    text.resize(std::min<size_t>(text.size(), kNoticeBytes - 1));
    std::vector<MPI_Request> sends;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sends.emplace_back();
      if (MPI_Isend(text.c_str(), static_cast<int>(text.size() + 1), MPI_CHAR, r, kNoticeTag, notices_, &sends.back()) !=
          MPI_SUCCESS)
        sends.pop_back();
    }
    const Clock::time_point give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double>(kAbortGraceSeconds));
    while (Clock::now() < give_up) {
      poll_notices();
      int sent = 0;
      MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE);
      if (sent && !follower && static_cast<int>(heard_from_.size()) >= size_ - 1) break;
      pause(std::chrono::milliseconds(1));
    }
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; should it, end this rank at least
  }

  // One small allreduce before the data: no rank waits for data that never comes.
  void agree_on(const char* what, const void* data, int64_t count, DType dtype) override {
    // (count, dtype, -count, -dtype, -bad) under MPI_MIN: every rank learns the least and the
    // most of each, so all of them see a disagreement and all of them throw.
    const bool bad = count < 0 || (count > 0 && data == nullptr);
    long long* mine = staging<long long>(10);
    long long* agreed = mine + 5;
    const long long values[5] = {count, static_cast<long long>(dtype), -static_cast<long long>(count),
                                 -static_cast<long long>(dtype), bad ? -1 : 0};
    std::copy(values, values + 5, mine);
    MPI_Request request;
    check_mpi(MPI_Iallreduce(mine, agreed, 5, MPI_LONG_LONG, MPI_MIN, comm_, &request), "MPI_Iallreduce", rank_);
    wait(request, "MPI_Allreduce (count and dtype check)");
    const long long fewest = agreed[0], most = -agreed[2];
    const DType lowest = static_cast<DType>(agreed[1]), highest = static_cast<DType>(-agreed[3]);
    if (agreed[4] < 0) {
      check_arguments(engine_.c_str(), what, data, count);  // names this rank's problem, if it is this rank's
      throw Error(ErrorKind::runtime, detail::concat(what, " on rank ", rank_, " of ", size_,
                                                     ": another rank passed a negative count or a null address"));
    }
    if (fewest != most || lowest != highest) {
      throw Error(ErrorKind::runtime,
                  detail::concat(what, " on rank ", rank_, " of ", size_,
                                 ": the ranks passed different counts or dtypes (counts from ", fewest, " to ", most,
                                 ", dtypes ", dtype_name(lowest), " to ", dtype_name(highest), "; this rank: ", count,
                                 " ", dtype_name(dtype),
                                 "): every rank must pass the same number of elements of one dtype"));
    }
  }

 private:
  static void pause(std::chrono::nanoseconds how_long) {
    const timespec delay{0, static_cast<long>(how_long.count())};
    nanosleep(&delay, nullptr);
  }

  void post_notice_receive() {
    check_mpi(MPI_Irecv(notice_text_, kNoticeBytes, MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag, notices_, &notice_request_),
              "MPI_Irecv", rank_);
  }

  // Takes in the notices that have arrived; the first one's text is kept. Returns whether any
  // rank has failed.
  bool poll_notices() {
    while (notice_request_ != MPI_REQUEST_NULL) {
      int arrived = 0;
      MPI_Status status;
      if (MPI_Test(&notice_request_, &arrived, &status) != MPI_SUCCESS || !arrived) break;
      notice_text_[kNoticeBytes - 1] = '\0';
      if (first_notice_.empty()) first_notice_ = notice_text_;
      heard_from_.insert(status.MPI_SOURCE);
      post_notice_receive();
    }
    return !first_notice_.empty();
  }

  // Waits for a started collective (see the class comment); throws an Error naming `call` when
  // a signal arrives (interrupted), another rank failed, or the deadline passes (runtime).
  void wait(MPI_Request& request, const char* call) {
    try {
      wait_or_throw(request, call);
    } catch (...) {
      abandon_staging();  // the collective may still run on it
      throw;
    }
  }
  void wait_or_throw(MPI_Request& request, const char* call) {
    if (timeout_seconds_ < 0) timeout_seconds_ = collective_timeout_from_environment();
    const Clock::time_point started = Clock::now();
    const double work = seconds_between(last_collective_end_, started);
    const double limit =
        timeout_seconds_ > 0 ? timeout_seconds_ : kDeadlineFloorSeconds + kDeadlinePerWorkSecond * work;
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), call, rank_);
      if (done) break;
      // Spin first (a collective of ranks in step ends within microseconds; MPI_Test is what
      // progresses it), then sleep a millisecond at a time: a rank waiting for a slow peer
      // leaves the cores to it.
      if (polls % 64 != 0) continue;
      // Said only when the wait ends in an error: collectives that complete build no string.
      const auto in = [&] {
        return std::string("in ") + call + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
      };
      if (interrupt_signal() != 0) check_interrupted(("while waiting " + in() + " for the other ranks").c_str());
      if (poll_notices()) throw Error(ErrorKind::runtime, "stopped " + in() + ": " + first_notice_);
      const double waited = seconds_between(started, Clock::now());
      if (waited > limit) {
        char text[512];
        std::snprintf(text, sizeof text,
                      "waited %.0f s %s for the other ranks (after %.1f s of this rank's work since its previous "
                      "collective): a rank is gone, stuck, or running other work; every rank stops "
                      "(BLOCKSCOPE_COLLECTIVE_TIMEOUT=SECONDS sets the wait)",
                      waited, in().c_str(), work);
        throw Error(ErrorKind::runtime, text);
      }
      if (waited > 0.01) pause(std::chrono::milliseconds(1));
    }
    last_collective_end_ = Clock::now();
  }

  // The memory every collective runs on, the caller's data copied in and out. A started
  // collective cannot be cancelled, and MPI moves it on inside any later MPI call (abort_all's
  // notices included): after a wait that failed, it may still write its result or read its
  // input. So it never runs on the caller's buffers or the stack — those are freed as the error
  // unwinds — but here, and a failed wait leaves this memory allocated for good (the process ends
  // soon after, through abort_all). Kept between calls: a fresh buffer of a block's activations
  // (25 MB for GPT-2 small at B = 8) would cost its page faults on every call.
  template <typename T>
  T* staging(size_t elements) {
    static_assert(alignof(T) <= kStagingAlignment);
    const size_t bytes = std::max<size_t>(elements * sizeof(T), 1);
    if (staging_bytes_ < bytes) {
      std::free(staging_);
      const size_t rounded = (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
      staging_ = std::aligned_alloc(kStagingAlignment, rounded);
      staging_bytes_ = staging_ == nullptr ? 0 : bytes;
      BS_CHECK(staging_ != nullptr, "MPI communicator: cannot allocate ", bytes, " bytes of staging memory");
    }
    return static_cast<T*>(staging_);
  }
  // After a failed wait: MPI may still use the staging memory, so it is never freed.
  void abandon_staging() {
    staging_ = nullptr;
    staging_bytes_ = 0;
  }

  static void widen(const void* from, int64_t n, DType dtype, float* to) {
    if (dtype == DType::f16) {
      const f16* in = static_cast<const f16*>(from);
#pragma omp parallel for if (n >= (1 << 16)) schedule(static)
      for (int64_t i = 0; i < n; ++i) to[i] = f16_to_float(in[i]);
    } else {
      const bf16* in = static_cast<const bf16*>(from);
#pragma omp parallel for if (n >= (1 << 16)) schedule(static)
      for (int64_t i = 0; i < n; ++i) to[i] = bf16_to_float(in[i]);
    }
  }
  static void narrow(const float* from, int64_t n, DType dtype, void* to) {
    if (dtype == DType::f16) {
      f16* out = static_cast<f16*>(to);
#pragma omp parallel for if (n >= (1 << 16)) schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = float_to_f16(from[i]);
    } else {
      bf16* out = static_cast<bf16*>(to);
#pragma omp parallel for if (n >= (1 << 16)) schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(from[i]);
    }
  }

  MPI_Comm comm_;
  MPI_Comm notices_ = MPI_COMM_NULL;
  MPI_Request notice_request_ = MPI_REQUEST_NULL;
  char notice_text_[kNoticeBytes] = {};
  std::string first_notice_;  // the first failure notice received: what the others are told
  std::set<int> heard_from_;  // ranks whose notice has arrived
  Clock::time_point last_collective_end_;
  double timeout_seconds_ = -1;  // BLOCKSCOPE_COLLECTIVE_TIMEOUT, read at the first wait (0: the rule)
  int rank_ = 0, size_ = 1, node_rank_ = 0;
  void* staging_ = nullptr;  // see staging()
  size_t staging_bytes_ = 0;
  std::string engine_;
};

struct MpiState {
  std::unique_ptr<MpiCommunicator> world;
  bool initialised_here = false;  // MPI_Init_thread was ours: so is MPI_Finalize
  bool finalize_registered = false;
};

MpiState& mpi_state() {
  static MpiState state;
  return state;
}

#endif  // BLOCKSCOPE_WITH_MPI

}  // namespace

Communicator* init_mpi(int* argc, char*** argv) {
#ifdef BLOCKSCOPE_WITH_MPI
  MpiState& state = mpi_state();  // constructed before atexit below: destroyed after finalize_mpi
  if (state.world) return state.world.get();
  if (!launched_by_mpirun()) return nullptr;
  int finalized = 0, initialised = 0;
  MPI_Finalized(&finalized);
  if (finalized) return nullptr;  // MPI cannot start twice in one process
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;  // OpenMP threads never call MPI: the main thread's calls only
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread", -1);
    state.initialised_here = true;
  }
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
  state.world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  if (!state.finalize_registered) {
    std::atexit(finalize_mpi);
    state.finalize_registered = true;
  }
  return state.world.get();
#else
  (void)argc;
  (void)argv;
  static bool said = false;
  if (launched_by_mpirun() && !said) {
    std::fprintf(stderr, "blockscope: started by mpirun, but this build has no MPI (BLOCKSCOPE_WITH_MPI): this "
                         "process runs as a single rank\n");
    said = true;
  }
  return nullptr;
#endif
}

void finalize_mpi() {
#ifdef BLOCKSCOPE_WITH_MPI
  MpiState& state = mpi_state();
  state.world.reset();
  if (!state.initialised_here) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
#endif
}

Communicator* world_communicator() {
#ifdef BLOCKSCOPE_WITH_MPI
  return mpi_state().world.get();
#else
  return nullptr;
#endif
}

void Communicator::all_reduce_sum_on_device(Context&, void*, int64_t, DType) {
  throw Error(ErrorKind::runtime, engine() + " reduces host memory only: stage device tensors through the host");
}
void Communicator::reduce_scatter_sum_on_device(Context&, const void*, void*, int64_t, DType) {
  throw Error(ErrorKind::runtime, engine() + " reduces host memory only: stage device tensors through the host");
}
void Communicator::all_gather_on_device(Context&, const void*, void*, int64_t, DType) {
  throw Error(ErrorKind::runtime, engine() + " gathers host memory only: stage device tensors through the host");
}

#ifndef BLOCKSCOPE_WITH_NCCL
std::unique_ptr<CommunicatorGroup> nccl_group_in_process(int ranks) {
  throw InputError(detail::concat("tensor parallelism over ", ranks,
                                  " GPUs needs CUDA and NCCL: this blockscope was built without them"));
}
std::unique_ptr<Communicator> nccl_over_mpi(Communicator& world, int) {
  throw InputError(detail::concat("NCCL between ", world.size(),
                                  " processes needs CUDA and NCCL: this blockscope was built without them"));
}
#endif

Communicator& single_rank_communicator() {
  static SingleRank single;
  return single;
}

namespace detail {
void set_all_reduce_chunk_elements(int64_t elements) { g_chunk_elements = std::max<int64_t>(elements, 0); }
}  // namespace detail

}  // namespace blockscope
