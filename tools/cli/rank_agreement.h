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

// What one rank was asked to do before any config is read, as (key, value) pairs: `command`,
// the build, the flags (outputs included, as typed) and the effective thread count (--threads,
// else OMP_NUM_THREADS, else the cores less one: what the rank runs with, as set).
std::vector<std::pair<std::string, std::string>> command_fingerprint(const Session& session, const std::string& command);

// What one rank was asked to do, as (key, value) pairs: command_fingerprint of session.command,
// then the device and dtype, and every key of the effective config (after --set).
std::vector<std::pair<std::string, std::string>> rank_fingerprint(const Session& session, const WorkloadConfig& config);

// Rank 0's view of every rank's fingerprint (in rank order, rank 0 first): "" when they all
// agree, else one message naming each differing key with rank 0's and the other rank's value
// (the first 8 differences, then how many more).
std::string fingerprint_differences(const std::vector<std::vector<std::pair<std::string, std::string>>>& ranks);

// Under mpirun with more than one rank, for every command (info, diff and report too: main.cpp's
// run_cli calls it once the command line is parsed, before any input is read): rank 0 gathers
// every rank's command_fingerprint and tells every rank the differences ("command: rank 0 has
// 'run', rank 1 has 'info'") -- an InputError on every rank (exit 2) at once, where a rank given
// another command used to leave the others waiting 60 s in a collective. Also refused on every
// rank: '-' (standard input) among `inputs` on any rank (the config, diff's and report's
// profiles), as Open MPI gives standard input to rank 0 only. Nothing without mpirun.
void agree_on_command(const Session& session, const std::string& command, const std::vector<std::string>& inputs);

// Under mpirun with more than one rank: rank 0 gathers every rank's fingerprint and tells every
// rank the differences; any is an InputError on every rank (exit 2), before any work. Then
// refused, also before any work: parallel.tensor = 1 (every rank would run the whole workload
// alone on shared cores, and only rank 0's contended timings would be printed). Nothing
// without mpirun.
void agree_across_ranks(const Session& session, const WorkloadConfig& config);

}  // namespace blockscope::cli
