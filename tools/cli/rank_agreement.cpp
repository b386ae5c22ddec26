#include "tools/cli/rank_agreement.h"

#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

#include "runtime/communicator.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "tools/cli/session.h"

namespace blockscope::cli {
namespace {

using Fingerprint = std::vector<std::pair<std::string, std::string>>;

std::string build_description() {
  std::string build = std::string("blockscope ") + kVersion + ", " + __VERSION__;
#ifdef NDEBUG
  build += ", release";
#else
  build += ", debug";
#endif
#ifdef BLOCKSCOPE_CUDA_SIM
  build += ", simulated GPU";
#elif defined(BLOCKSCOPE_WITH_CUDA)
  build += ", CUDA";
#endif
#ifdef BLOCKSCOPE_WITH_NCCL
  build += ", NCCL";
#endif
  for (cpu::GemmLibrary library : cpu::linked_gemm_libraries()) build += std::string(", ") + cpu::gemm_library_name(library);
  return build;
}

// Rank 0's text to every rank: all_reduce_sum of its characters as f32 (exact for 0..255),
// which every other rank contributes zeros to; the length first.
std::string broadcast_from_rank0(Communicator& world, const std::string& text) {
  float length = world.rank() == 0 ? static_cast<float>(text.size()) : 0.0f;
  world.all_reduce_sum(&length, 1, DType::f32);
  std::vector<float> chars(static_cast<size_t>(length), 0.0f);
  if (world.rank() == 0)
    for (size_t i = 0; i < text.size(); ++i) chars[i] = static_cast<unsigned char>(text[i]);
  world.all_reduce_sum(chars.data(), static_cast<int64_t>(chars.size()), DType::f32);
  std::string out(chars.size(), '\0');
  for (size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<char>(static_cast<unsigned char>(chars[i]));
  return out;
}

}  // namespace

Fingerprint command_fingerprint(const Session& session, const std::string& command) {
  const Options& o = session.options_as_given;
  return {{"command", command},
          {"build", build_description()},
          {"--dump", o.dump},
          {"--trace", o.trace},
          {"--save", o.save},
          {"--report", o.report},
          {"--format", o.format},
          {"--table", o.table},
          {"--columns", o.columns},
          {"--counters", o.counters ? "on" : "off"},
          {"--predict", o.predict},
          {"--threads", std::to_string(o.threads)},
          // What the rank runs with (main.cpp's prepare_rank set it): OMP_NUM_THREADS differing
          // between ranks gives different counts as --threads does (issue 43, hostile round F13).
          {"threads (--threads, else OMP_NUM_THREADS, else the cores less one)", std::to_string(omp_get_max_threads())},
          {"--cold-step", o.cold_step ? "on" : "off"},
          {"--sync-each-op", o.sync_each_op ? "on" : "off"},
          {"--group-by-phase", o.group_by_phase ? "on" : "off"}};
}

Fingerprint rank_fingerprint(const Session& session, const WorkloadConfig& config) {
  Fingerprint out = command_fingerprint(session, session.command);
  out.emplace_back("device (config or --device)", config.device);
  out.emplace_back("dtype (config or --dtype)", dtype_name(config.dtype));
  for (const auto& [key, value] : config.keys) out.emplace_back(key, value);
  return out;
}

std::string fingerprint_differences(const std::vector<Fingerprint>& ranks) {
  if (ranks.size() < 2) return "";
  constexpr size_t kShown = 8;
  std::vector<std::string> differences;
  const auto as_map = [](const Fingerprint& fingerprint) {
    return std::map<std::string, std::string>(fingerprint.begin(), fingerprint.end());
  };
  const std::map<std::string, std::string> first = as_map(ranks.front());
  for (size_t r = 1; r < ranks.size(); ++r) {
    const std::map<std::string, std::string> other = as_map(ranks[r]);
    // Rank 0's keys in its order, then the keys only this rank has.
    std::vector<std::string> keys;
    for (const auto& entry : ranks.front()) keys.push_back(entry.first);
    for (const auto& entry : ranks[r])
      if (first.count(entry.first) == 0) keys.push_back(entry.first);
    std::set<std::string> said;
    for (const std::string& key : keys) {
      if (!said.insert(key).second) continue;
      const auto a = first.find(key), b = other.find(key);
      const std::string va = a == first.end() ? "(not set)" : "'" + a->second + "'";
      const std::string vb = b == other.end() ? "(not set)" : "'" + b->second + "'";
      if (va != vb)
        differences.push_back(key + ": rank 0 has " + va + ", rank " + std::to_string(r) + " has " + vb);
    }
  }
  if (differences.empty()) return "";
  std::string message = "the ranks of this mpirun were not given the same work (every rank must run the same "
                        "command, config and build): ";
  for (size_t i = 0; i < differences.size() && i < kShown; ++i) message += (i ? "; " : "") + differences[i];
  if (differences.size() > kShown) message += "; and " + std::to_string(differences.size() - kShown) + " more";
  return message;
}

namespace {

// Rank 0 gathers every rank's fingerprint, judges them with `verdict_of` (rank order, rank 0
// first; "" when they agree) and tells every rank; a verdict is an InputError on every rank.
void agree(Communicator& world, const Fingerprint& fingerprint,
           const std::function<std::string(const std::vector<Fingerprint>&)>& verdict_of) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& [key, value] : fingerprint) mine.push_back({key, value});
  const std::vector<std::string> all = world.gather_to_root(mine.dump());
  std::string verdict;
  if (world.rank() == 0) {
    std::vector<Fingerprint> ranks;
    for (const std::string& text : all) {
      Fingerprint theirs;
      for (const auto& pair : nlohmann::json::parse(text)) theirs.emplace_back(pair[0], pair[1]);
      ranks.push_back(std::move(theirs));
    }
    verdict = verdict_of(ranks);
  }
  verdict = broadcast_from_rank0(world, verdict);
  if (!verdict.empty()) throw InputError(verdict);
}

// The key under which a rank says which of its inputs are standard input.
constexpr const char* kStdinKey = "standard input";

}  // namespace

void agree_on_command(const Session& session, const std::string& command, const std::vector<std::string>& inputs) {
  Communicator* world = session.world;
  if (world == nullptr || world->size() < 2) return;
  Fingerprint mine = command_fingerprint(session, command);
  const bool reads_stdin = std::find(inputs.begin(), inputs.end(), "-") != inputs.end();
  mine.emplace_back(kStdinKey, reads_stdin ? "'-'" : "");
  const int ranks = world->size();
  agree(*world, mine, [&](const std::vector<Fingerprint>& all) {
    // Standard input first: a rank without it fails reading its config, which says nothing of why.
    std::string readers;
    for (size_t r = 0; r < all.size(); ++r) {
      for (const auto& [key, value] : all[r])
        if (key == kStdinKey && !value.empty()) readers += (readers.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!readers.empty()) {
      return "'-' (standard input) as an input under mpirun with " + std::to_string(ranks) + " ranks (given on rank" +
             (readers.find(',') == std::string::npos ? " " : "s ") + readers +
             "): Open MPI passes standard input to rank 0 only, so the other ranks would read nothing; save it to a "
             "file and pass the file's path instead";
    }
    std::vector<Fingerprint> compared = all;
    for (Fingerprint& fingerprint : compared)
      fingerprint.erase(std::remove_if(fingerprint.begin(), fingerprint.end(),
                                       [](const auto& entry) { return entry.first == kStdinKey; }),
                        fingerprint.end());
    return fingerprint_differences(compared);
  });
}

void agree_across_ranks(const Session& session, const WorkloadConfig& config) {
  Communicator* world = session.world;
  if (world == nullptr || world->size() < 2) return;
  agree(*world, rank_fingerprint(session, config), fingerprint_differences);
  BS_CHECK_INPUT(config.parallel.tensor > 1, "mpirun started ", world->size(),
                 " ranks but parallel.tensor is 1: every rank would run the whole workload alone on shared cores "
                 "(and only rank 0's contended timings would be printed); split it with --set parallel.tensor=",
                 world->size(), ", or run without mpirun");
}

}  // namespace blockscope::cli
