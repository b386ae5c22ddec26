// The subcommands, one file each (tools/cli/<command>.cpp); main.cpp parses the command line
// and maps errors to exit codes: 0 ok, 1 check found a path outside the accuracy rule, 2 bad
// usage or input, 3 runtime failure.
#pragma once

#include <string>
#include <vector>

#include "tools/cli/session.h"

namespace blockscope::cli {

int run_command(Session& session);      // timing summary per variant
int profile_command(Session& session);  // op and kernel tables per variant, diffs to the base
int check_command(Session& session);    // every device and path mix against the float64 reference
int diff_command(Session& session, const std::string& before, const std::string& after);
// One HTML report of saved profiles (each a variant; the first the base of the diffs).
int report_command(Session& session, const std::vector<std::string>& inputs, const std::string& output,
                   const std::string& title);
int info_command(Session& session);     // build, devices, peaks, path table
// FLOPs, bytes and kernels of ops from the catalogue, one spec each: "op[/path]:name=value,...";
// with `predict_gpu` (a name of profiler/gpu_specs.h) also each call's predicted time there.
int info_costs_command(Session& session, const std::vector<std::string>& specs, const std::string& predict_gpu = "");

}  // namespace blockscope::cli
