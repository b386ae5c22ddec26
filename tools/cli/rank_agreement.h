// Under mpirun, before any work: the ranks agree on what they were asked to do. Ranks given
// different configs, commands or builds would otherwise run mismatched collectives (a hang, or
// a table made of mismatched numbers); each difference is named instead.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace blockscope::cli {

class Session;

// What one rank was asked to do, as (key, value) pairs: the command, its flags (outputs
// included, as typed), the build, the device and dtype, and every key of the effective config
// (after --set).
std::vector<std::pair<std::string, std::string>> rank_fingerprint(const Session& session, const WorkloadConfig& config);

// Rank 0's view of every rank's fingerprint (in rank order, rank 0 first): "" when they all
// agree, else one message naming each differing key with rank 0's and the other rank's value
// (the first 8 differences, then how many more).
std::string fingerprint_differences(const std::vector<std::vector<std::pair<std::string, std::string>>>& ranks);

// Under mpirun with more than one rank: rank 0 gathers every rank's fingerprint and tells every
// rank the differences; any is an InputError on every rank (exit 2), before any work. Then
// refused, also before any work: parallel.tensor = 1 (every rank would run the whole workload
// alone on shared cores, and only rank 0's contended timings would be printed). Nothing
// without mpirun.
void agree_across_ranks(const Session& session, const WorkloadConfig& config);

}  // namespace blockscope::cli
