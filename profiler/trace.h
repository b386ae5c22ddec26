// Chrome Trace Event JSON (opens in Perfetto and chrome://tracing): a CPU track with op
// ranges, a device track per stream (pid = device, tid = stream), launch -> kernel flows, and
// the device memory peak as a counter track. A trace may hold several profiles (the variants
// of one run): each is its own pair of processes, labelled and sorted in order, laid one after
// another in time as they ran. One file is one rank's: it carries what Kineto's traces carry
// for Holistic Trace Analysis (distributedInfo, deviceProperties, Kineto's event categories,
// correlation ids), so HTA's analyses read it (docs/PROFILING.md, "Analyse with HTA").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/session.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

namespace detail {
struct TraceState;  // trace.cpp
}

// The process a trace is of, as Kineto's "distributedInfo" says it: its rank of the tensor-
// parallel group, the group's size and the collectives' engine ("nccl", "mpi"; "none" alone).
struct TraceRank {
  int rank = 0;
  int world_size = 1;
  std::string backend = "none";
};

std::string chrome_trace_json(const Profile& profile, const TraceRank& rank = {});
// One profile, written to a temporary file and renamed when complete.
void write_chrome_trace(const Profile& profile, const std::string& path, const TraceRank& rank = {});

// A trace written as the run goes: add() each profile as soon as it is measured (only its
// events are in memory, streamed in ~1 MiB writes), finish() when all are in. The file is a
// temporary until finish() renames it into place; destroyed unfinished, nothing is left.
class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path, TraceRank rank = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void add(const Profile& profile);
  void finish();

 private:
  void write(const std::string& piece);

  OutputFile out_;
  std::string buffer_;
  std::unique_ptr<detail::TraceState> state_;  // the rank, device, ids and time so far
};

}  // namespace blockscope::profiler
