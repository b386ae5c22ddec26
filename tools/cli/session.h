// What every subcommand of the CLI shares: the parsed flags, the output files written so far
// (removed again when the command fails, so a failed command leaves no output behind), what
// the command is doing (for runtime failure messages), and the steps every workload command
// starts with.
#pragma once

#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/workload.h"
#include "profiler/render.h"
#include "profiler/session.h"
#include "runtime/context.h"

namespace blockscope {
class Communicator;
}

namespace blockscope::cli {

inline constexpr const char* kVersion = "0.1.0";

// Flags the workload commands take (run, profile, check; diff and info use format only).
struct Options {
  std::string config_path;  // empty: the default config compiled in
  // The config's YAML itself (the Python module's bs.load of text), named config_source in
  // messages; takes the place of config_path when set.
  std::string config_text, config_source;
  std::string device;
  std::string dtype;
  std::vector<std::string> sets;
  std::string dump;
  std::string trace;
  std::string save;
  std::string report;  // --report: one HTML report of every variant
  std::string format = "table";
  bool cold_step = false;
  // --force: outputs may replace an existing file blockscope did not write (runtime/output_file.h).
  bool force = false;
  bool remeasure_peaks = false;  // info --remeasure-peaks: measure the CPU peaks again, rewrite the cache
  bool list_plans = false;       // info --plans: list this machine's CPU GEMM plans (else their count)
  bool sync_each_op = false;  // debug: synchronise after every op so a failure names its op
  int threads = 0;            // --threads: CPU threads for every pool; 0 = cpu::default_thread_count()
  // profile's table flags (override profile.sort_by / row_limit / group_by_shape); empty or
  // negative: the config's.
  std::string sort_by;
  int row_limit = -1;
  bool group_by_shape = false;
  // profile, decode workloads: the CSV op and kernel tables split by phase (a phase column); the
  // text and JSON outputs always split a decode's phases.
  bool group_by_phase = false;
  // profile --counters: one more forward per variant with every kernel launch counted (the
  // simulated GPU; Nsight Compute's metric names), printed as a table per variant.
  bool counters = false;
  // profile --predict GPU: each variant's step as the GPU performance model predicts it on that
  // GPU (profile_prediction.h), labelled as predicted; empty: none.
  std::string predict;
  std::string columns;  // --columns: the op table's columns to show ("all": every one, unfitted)
  // --table: which tidy table --format csv prints (ops, kernels, steps, diffs); empty: not given (ops)
  std::string table;
};

class Session {
 public:
  Options options;
  // This process's rank under mpirun (tensor parallelism; 0 otherwise): only rank 0 prints and
  // writes output files (main.cpp clears the others' --trace, --save, --report).
  int rank = 0;
  // MPI's world under mpirun (null otherwise), and the flags as typed before main.cpp cleared
  // the other ranks' outputs: what the ranks compare before any work (rank_agreement.h).
  Communicator* world = nullptr;
  Options options_as_given;
  // The subcommand ("run", "profile", "check"), set before it starts.
  std::string command;
  Session& for_command(const char* name) {
    command = name;
    return *this;
  }

  // --format, or an InputError naming the flag.
  profiler::Format format() const;
  // The config with the command line's overrides: --set first (validated like the file),
  // then --device and --dtype. Under mpirun, the ranks then agree on it (rank_agreement.h).
  WorkloadConfig load_config() const;
  // Before any work: every output the command will write (--dump, --trace or profile.trace,
  // --save, and their FILE.<variant>.json for each compare: label when `per_variant`, --report) can be
  // written, is none of the inputs (the config, input.file, weights.file, weights.config)
  // and is not another output. InputError otherwise.
  void check_outputs(const WorkloadConfig& config, bool per_variant) const;
  // A context on the config's device with the run: settings (debug sync, TF32 on CUDA).
  void apply_run_settings(Context& ctx, const WorkloadConfig& config) const;

  // "profiling attention=naive on cpu": said by a runtime failure.
  void set_activity(std::string activity) { activity_ = std::move(activity); }
  const std::string& activity() const { return activity_; }

  // An output file is complete; after a failure, remove_outputs() deletes every one and
  // returns their paths.
  void wrote(const std::string& path) { outputs_.push_back(path); }
  std::vector<std::string> remove_outputs();

  // --dump: one forward of the base paths, then input, output and every weight (Hugging Face
  // names) to a .safetensors file. Tensor parallelism: every rank runs the forward (its
  // collectives need them all), only the one with `writes` writes.
  void write_dump(Context& ctx, Workload& workload, const std::string& path, bool writes = true);

 private:
  std::string activity_;
  std::vector<std::string> outputs_;
};

// What one rank of a command prints: the only rank without tensor parallelism, or rank 0 of
// its group, reports (prints and writes the files); the others run the same work and
// collectives and print nowhere.
class RankOutput {
 public:
  explicit RankOutput(const Communicator* group);
  const bool reports;
  std::ostream& out() { return reports ? std::cout : discarded_; }

 private:
  std::ostringstream discarded_;
};

// A trace's "distributedInfo" backend, Kineto's names for torch.distributed's: "nccl" or "mpi"
// for a tensor-parallel group's collectives, "none" for one rank alone.
std::string distributed_backend(const Communicator* group);

// The profiler's schedule from the config's profile: section.
profiler::Schedule config_schedule(const WorkloadConfig& config);

// Before a workload with weights of 256 MiB or more is built (seconds of initialising or
// reading), a line on stderr saying so: "profile: building the workload: 14.96 GiB of weights".
void announce_large_workload(const std::string& command, const WorkloadConfig& config);

// The ranks of the workload this process runs on `device`, each given its Context and
// tensor-parallel group: one call (group null without parallel.tensor; MPI's world under
// mpirun — on CUDA each rank on its own GPU (rank_device), with NCCL between them started over
// MPI where NCCL is built (nccl_over_mpi), else staged through host memory), or — --device cuda
// with parallel.tensor = N and no mpirun — one per GPU of
// cuda:0 .. cuda:N-1, each on its own thread (run_on_gpus: an error on one rank ends them all
// and is rethrown). Only the call whose group is null or of rank 0 reports.
void for_each_local_rank(const WorkloadConfig& config, const Device& device,
                         const std::function<void(Context&, Communicator*)>& rank);
// parallel.tensor > 1 without mpirun: the ranks are GPUs of this process (cuda:0 .. N-1).
bool ranks_are_local_gpus(const WorkloadConfig& config);

// The paths of the base variant, then of every compare: entry.
std::vector<PathConfig> all_variant_paths(const WorkloadConfig& config);
// "tiny-gpt2: block gpt2 d_model=64 heads=4/4 ... f32 on cpu".
std::string workload_title(const WorkloadConfig& config, const Context& ctx);
// FILE.json -> FILE.<label>.json for a variant's output file (the base keeps FILE).
std::string variant_path(const std::string& path, const std::string& label);
// Tensor parallelism: where rank `rank`'s output file goes beside rank 0's (PATH.rankN.json, as
// --save and --trace write them); rank 0 keeps PATH.
std::string rank_path(const std::string& path, int64_t rank);

}  // namespace blockscope::cli
