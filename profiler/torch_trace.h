// PyTorch profiler traces read as a Profile, so a PyTorch module sits beside blockscope's
// paths in one report and one diff. The input is what torch.profiler's export_chrome_trace
// writes: Kineto's Chrome trace (an object with "traceEvents": cpu_op, user_annotation,
// kernel / gpu_memcpy / gpu_memset and cuda_runtime events), or, from a PyTorch built without
// Kineto (Debian's 1.13), the legacy profiler's array of "X" events with no categories.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/session.h"

namespace blockscope::profiler {

// One row of the aten -> blockscope op table.
struct AtenOpName {
  const char* aten;        // "aten::_softmax"
  const char* blockscope;  // "softmax": the op name blockscope's profiles record
};

// The table (torch_trace.cpp), the one place an aten op gets a blockscope name; the aten name
// stays the event's path, so nothing is renamed out of sight.
const std::vector<AtenOpName>& aten_op_table();
// The blockscope name of an aten op: its table entry, else the aten name itself.
std::string blockscope_op_name(const std::string& aten);

// True when `document` has a Chrome trace's shape: an array of events, or an object holding
// a "traceEvents" array.
bool is_chrome_trace(const nlohmann::json& document);

// The PyTorch trace as a Profile (Profile::host_ops_only when it holds no kernels). Steps are
// its ProfilerStep#N ranges ("step N" regions; without any, the whole trace is step 0, said in
// the profile's notes); ops nest by time on their thread, as blockscope's op tree does, so a
// child (aten::linear's aten::addmm) is counted once, in its own row and its parent's total;
// a kernel belongs to the op around the launch its "correlation" names. InputError naming
// `source` and the problem: no ops, no ops inside the steps, a field of the wrong type, or
// blockscope's own Chrome trace (--trace).
Profile profile_from_torch_trace(const nlohmann::json& document, const std::string& source);

}  // namespace blockscope::profiler
