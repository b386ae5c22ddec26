// Chrome Trace Event JSON (opens in Perfetto and chrome://tracing): a CPU track with op
// ranges, a device track per stream (pid = device, tid = stream), launch -> kernel flows.
#pragma once

#include <string>

#include "profiler/session.h"

namespace blockscope::profiler {

std::string chrome_trace_json(const Profile& profile);
// Written to a temporary file and renamed when complete.
void write_chrome_trace(const Profile& profile, const std::string& path);

}  // namespace blockscope::profiler
