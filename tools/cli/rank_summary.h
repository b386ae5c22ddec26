// Tensor parallelism under mpirun: what rank 0 says about every rank's profile of a variant —
// per rank, the step, its collectives and the compute around them; per op, the median and the
// largest device time across ranks and the rank that took longest (the one the others wait
// for at the next all-reduce).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/render.h"
#include "profiler/session.h"

namespace blockscope::cli {

// An op of family collective in the op catalogue (all_reduce, reduce_scatter, all_gather):
// its device time is communication.
bool is_collective_op(const std::string& name);

// One row per rank: step median, collective and compute time per step, the collectives' share,
// and their bus bandwidth (bytes recorded as nccl-tests' bus bytes over their time).
profiler::Rows rank_rows(const std::vector<profiler::Profile>& ranks);
// One row per op (name and path, regions left out): its calls per step and device time per step
// as the median and the maximum across ranks, and the slowest rank.
profiler::Rows merged_op_rows(const std::vector<profiler::Profile>& ranks);
// "slowest rank: 1 (step median 4.1 ms, 3% above the fastest, rank 0)".
std::string slowest_rank_line(const std::vector<profiler::Profile>& ranks);

}  // namespace blockscope::cli
