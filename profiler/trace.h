// Chrome Trace Event JSON (opens in Perfetto and chrome://tracing): a CPU track with op
// ranges, a device track per stream (pid = device, tid = stream), launch -> kernel flows, and
// the device memory peak as a counter track. A trace may hold several profiles (the variants
// of one run): each is its own pair of processes, labelled and sorted in order.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/session.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

std::string chrome_trace_json(const Profile& profile);
// One profile, written to a temporary file and renamed when complete.
void write_chrome_trace(const Profile& profile, const std::string& path);

// A trace written as the run goes: add() each profile as soon as it is measured (only its
// events are in memory, streamed in ~1 MiB writes), finish() when all are in. The file is a
// temporary until finish() renames it into place; destroyed unfinished, nothing is left.
class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void add(const Profile& profile);
  void finish();

 private:
  void write(const std::string& piece);

  OutputFile out_;
  std::string buffer_;
  size_t events_ = 0;
  std::vector<nlohmann::json> profiles_;  // each added profile's label, device, dtype, steps
};

}  // namespace blockscope::profiler
