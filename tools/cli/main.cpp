// blockscope: run, profile and check YAML-described transformer workloads.
//
//   blockscope run [CONFIG]       timing summary (warm-up, then median/min per forward)
//   blockscope profile [CONFIG]   op and kernel tables per variant, and diffs between them
//   blockscope check [CONFIG]     every device and path against the float64 reference
//   blockscope diff A.json B.json what changed between two saved profiles (or PyTorch traces)
//   blockscope report A.json... -o R.html   an HTML report of saved profiles (or PyTorch traces)
//   blockscope info               build, devices, peaks, GEMM library, path table
//
// Each subcommand is its own file (tools/cli/commands.h); this one parses the command line
// and maps errors to exit codes: 0 ok, 1 check found a path outside the accuracy rule, 2 bad
// usage or input, 3 runtime failure. Output files (--dump, --trace, --save) are written only
// after the work succeeded, each to a temporary name then renamed; after a failure none of
// them exists (Session::remove_outputs).
//
// Under mpirun (tensor parallelism, parallel.tensor) every process is one rank: the ranks first
// agree on the command, the effective config and the build (tools/cli/rank_agreement.h); rank 0
// prints and writes the output files, the others only compute and record; an error on any rank
// is said with its rank, reaches the others at their next collective (each removes what it
// wrote) and ends every rank with its exit code (no rank left waiting in a collective).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "profiler/gpu_specs.h"
#include "profiler/nvtx.h"
#include "runtime/communicator.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"
#include "runtime/terminal_output.h"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"
#include "tools/cli/rank_agreement.h"

namespace blockscope::cli {
namespace {

// A flag given an empty value (--dtype "") is a mistake, not "unset": refused by name.
const CLI::Validator kNonEmpty(
    [](std::string& value) {
      return value.empty() ? std::string("an empty value (leave the flag out instead)") : std::string();
    },
    "NONEMPTY");

void add_common(CLI::App* app, Options& options, bool with_dump, bool with_trace) {
  app->add_option("config", options.config_path, "Workload YAML; '-' reads standard input (default: the config compiled into the binary)")
      ->check(kNonEmpty);
  app->add_option("--device", options.device, "auto | cpu | cuda | cuda:N (overrides the config's device)")
      ->check(kNonEmpty);
  app->add_option("--dtype", options.dtype, "f32 | f16 | bf16 (overrides the config's dtype)")->check(kNonEmpty);
  app->add_option("--set", options.sets, "Override a config key, validated like the file: --set model.d_model=256 "
                                         "(repeatable)")
      ->allow_extra_args(false)
      ->check(kNonEmpty);
  app->add_option("--format", options.format, "Output format: table | csv | json")->check(kNonEmpty);
  if (with_dump) {
    app->add_option("--dump", options.dump,
                    "Write input, output and every weight (Hugging Face names) to a .safetensors file")
        ->check(kNonEmpty);
  }
  if (with_trace) {
    app->add_option("--trace", options.trace, "Write one Chrome trace JSON holding every variant (a process pair each)")
        ->check(kNonEmpty);
    app->add_option("--save", options.save, "Save each profile as JSON for `blockscope diff` (variants: FILE.<variant>.json)")
        ->check(kNonEmpty);
    app->add_flag("--cold", options.cold_step, "Also keep the cold first step in the profile");
    app->add_option("--report", options.report,
                    "Write one self-contained HTML report of every variant: roofline, breakdown by module, steps, "
                    "host vs device, memory, diffs, sortable tables")
        ->check(kNonEmpty);
  }
  app->add_flag("--force", options.force,
                "Let outputs replace an existing file that blockscope did not write (without it such a file, or a "
                "symlink's target that is one, is refused before any work)");
  app->add_flag("--sync-each-op", options.sync_each_op,
                "Debug: synchronise after every op, so an asynchronous device failure names the op");
  app->add_option("--threads", options.threads,
                  "CPU threads for every pool the backend uses (OpenMP, oneDNN on it, OpenBLAS); default: "
                  "OMP_NUM_THREADS, else the physical cores less one (a core left for the system keeps steps "
                  "steady)")
      ->check(CLI::Range(1, 1024));
}

// The op table's flags (the same as the config's profile keys, which they override).
void add_table_flags(CLI::App* app, Options& options) {
  app->add_option("--sort-by", options.sort_by,
                  "Sort the op table by a column key (self_device, device_total, self_cpu, cpu_total, calls, flops, "
                  "memory, ...; torch's names work too); overrides profile.sort_by")
      ->check(kNonEmpty);
  app->add_option("--row-limit", options.row_limit, "Rows of the op table (0: all); overrides profile.row_limit")
      ->check(CLI::Range(0, 1000000));
  app->add_flag("--group-by-shape", options.group_by_shape,
                "One op-table row per (op, input shapes), as torch's group_by_input_shape; or profile.group_by_shape");
  app->add_option("--columns", options.columns,
                  "The op table's columns to show, by key or title, comma-separated (name,path,self_device_us,...); "
                  "'all' shows every column without fitting the terminal")
      ->check(kNonEmpty);
  app->add_option("--table", options.table,
                  "With --format csv: the one tidy table to print, every variant's rows with a variant column: "
                  "ops | kernels | steps | diffs | counters (with --counters) | predicted (with --predict)")
      ->check(CLI::IsMember({"ops", "kernels", "steps", "diffs", "counters", "predicted"}));
}

// The command line: every subcommand's flags, and what the parse fills beyond Options.
struct CommandLine {
  CLI::App* run = nullptr;
  CLI::App* profile = nullptr;
  CLI::App* check = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* report = nullptr;
  CLI::App* info = nullptr;
  std::string diff_before, diff_after;
  std::vector<std::string> report_inputs;
  std::string report_output, report_title;
  std::vector<std::string> cost_specs;
  std::string predict_gpu;  // info --predict
};

void describe_app(CLI::App& app) {
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  blockscope profile                                  # the default tiny GPT-2 block\n"
      "  blockscope profile configs/series/04_attention.yaml --set input.seq_len=256\n"
      "  blockscope run configs/blocks/llama-3-8b.yaml --set model.d_model=512 --set model.n_heads=8 \\\n"
      "      --set model.n_kv_heads=2 --set model.head_dim=64 --set model.d_ff=1024 --set input.seq_len=64\n"
      "  blockscope check configs/blocks/tiny-llama.yaml\n"
      "  blockscope diff before.json after.json\n"
      "  blockscope profile configs/series/04_attention.yaml --report attention.html\n"
      "Exit codes: 0 ok, 1 check failed the accuracy rule, 2 bad usage or input, 3 runtime failure,\n"
      "130 / 143 / 129 / 141 interrupted by SIGINT / SIGTERM / SIGHUP / SIGPIPE (stopped within a second on\n"
      "the CPU, after the queued step on a GPU; no output kept).");
}

void add_run_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* run = line.run =
      app.add_subcommand("run", "Run the workload and print a timing summary (median/min per forward)");
  add_common(run, options, true, false);
  run->add_option("--trace", options.trace,
                  "After timing, profile the base variant (profile.schedule) and write its Chrome trace JSON")
      ->check(kNonEmpty);
  run->footer(
      "Warm-up forwards first (run.warmup), then run.iters timed forwards per variant (base and compare:).\n"
      "Examples:\n"
      "  blockscope run\n"
      "  blockscope run configs/series/02_linear.yaml --device cpu --format csv\n"
      "  blockscope run configs/blocks/tiny-gpt2.yaml --dump block.safetensors");

}

void add_profile_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* profile = line.profile =
      app.add_subcommand("profile", "Profile each variant: op table, kernel table, diffs to the base");
  add_common(profile, options, true, true);
  add_table_flags(profile, options);
  profile->add_flag("--group-by-phase", options.group_by_phase,
                    "Decode workloads: the CSV op and kernel tables split by phase (prefill, decode) with a phase "
                    "column (text and JSON always split them)");
  profile->add_flag("--counters", options.counters,
                    "After each variant, one more forward with every kernel launch's hardware counters (Nsight "
                    "Compute's names: sectors, bank conflicts, occupancy...): a table per variant; the simulated GPU "
                    "counts them");
  profile->add_option("--predict", options.predict,
                      "Also predict each variant's step on a GPU with the performance model: h100-sxm (h100), h200, "
                      "a100-sxm (a100); a table per variant, labelled predicted (docs/PREDICTION.md). Any build, no GPU "
                      "needed; on the simulated GPU the kernels' counters refine it")
      ->check(kNonEmpty);
  profile->footer(
      "Schedule from profile.schedule (wait, warmup, active), like torch.profiler.\n"
      "Examples:\n"
      "  blockscope profile\n"
      "  blockscope profile configs/series/04_attention.yaml --set input.seq_len=256 --trace attn.json\n"
      "  blockscope profile configs/series/03_mlp_geglu.yaml --save mlp.json --format csv");

}

void add_check_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* check = line.check =
      app.add_subcommand("check", "Compare every device and path with the float64 reference");
  add_common(check, options, true, false);
  check->footer(
      "Rule: the all-naive paths' max relative error is under a bound derived from the workload's sum\n"
      "depths and dtype (docs/TESTING.md), and every other path mix is within 2x the naive error\n"
      "plus a floor of four units of the dtype's roundoff.\n"
      "Exit code 1 when any path breaks it.\n"
      "Examples:\n"
      "  blockscope check\n"
      "  blockscope check configs/blocks/tiny-llama.yaml --dtype bf16");

}

void add_diff_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* diff = line.diff =
      app.add_subcommand("diff", "What changed between two saved profiles (blockscope profile --save) or PyTorch "
                                 "profiler traces (export_chrome_trace)");
  diff->add_option("before", line.diff_before, "Profile JSON or PyTorch trace (the baseline); '-' reads standard input")
      ->required();
  diff->add_option("after", line.diff_after, "Profile JSON or PyTorch trace (the change); '-' reads standard input")
      ->required();
  diff->add_option("--format", options.format, "Output format: table | csv | json")->check(kNonEmpty);
  diff->footer("Example:\n  blockscope profile a.yaml --save a.json && blockscope profile b.yaml --save b.json\n"
               "  blockscope diff a.json b.json\n"
               "  blockscope diff torch_trace.json a.json   # a PyTorch module (tools/peers/torch_profile_peer.py) vs a path");

}

void add_report_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* report = line.report =
      app.add_subcommand("report", "One HTML report of saved profiles (blockscope profile --save) and PyTorch "
                                   "profiler traces (export_chrome_trace)");
  report->add_option("profiles", line.report_inputs,
                     "Saved profiles or PyTorch traces, each a variant; the first is the base of the diffs")
      ->required()
      ->check(kNonEmpty);
  report->add_option("-o,--output", line.report_output, "The HTML file to write")->required()->check(kNonEmpty);
  report->add_option("--title", line.report_title, "The report's title (default: the first profile's workload)");
  report->add_flag("--force", options.force, "Let -o replace an existing file that blockscope did not write");
  report->footer("Example:\n  blockscope profile configs/series/04_attention.yaml --save attn.json\n"
                 "  blockscope report attn.json attn.attention-flash.json -o attn.html\n"
                 "  (or in one go: blockscope profile configs/series/04_attention.yaml --report attn.html)");

}

void add_info_command(CLI::App& app, Options& options, CommandLine& line) {
  CLI::App* info = line.info =
      app.add_subcommand("info", "Build, CUDA, devices, peaks, GEMM library");
  info->add_option("--format", options.format, "Output format: table | csv | json")->check(kNonEmpty);
  info->add_flag("--remeasure-peaks", options.remeasure_peaks,
                 "Measure the CPU peaks again and rewrite the cache (a peak measured while the machine was busy "
                 "is too low; profile re-measures by itself when an op beats the cached FLOP/s)");
  info->add_flag("--plans", options.list_plans,
                 "List this machine's CPU GEMM plans (shape, choice, every candidate's time, kernel); "
                 "without it, their count (JSON: always listed, gemm_plans)");
  info->add_option("--cost", line.cost_specs,
                   "FLOPs, bytes and kernels of one op call from the op catalogue, as JSON (repeatable):\n"
                   "OP[/PATH]:NAME=VALUE,... with the op's sizes, its flags (0 or 1), dtype= and activation=, each "
                   "name once; sizes from 0 (a call with no output elements launches no kernel) to 2^31 - 1, no tensor "
                   "over 2^50 elements, Hkv dividing H, ranks >= 1 (else exit 2 naming the size)")
      ->check(kNonEmpty);
  info->add_option("--predict", line.predict_gpu,
                   "With --cost: each call's predicted time on a GPU without one (docs/PREDICTION.md): " +
                       profiler::gpu_spec_names())
      ->check(kNonEmpty);
  info->footer("Examples:\n  blockscope info --format json\n"
               "  blockscope info --cost attention/flash:B=1,H=12,Hkv=12,Sq=256,Sk=256,D=64,causal=1,dtype=bf16\n"
               "  blockscope info --predict h100 --cost linear/epilogue:M=4096,K=4096,N=4096,bias=1,dtype=bf16");

}

// After the parse, before any work.
void prepare_rank(Session& session) {
  // Tensor parallelism (mpirun -np N): rank 0 prints and writes the outputs; the others compute
  // and record only (their tables reach rank 0 through the communicator). --dump stays: its
  // forward's collectives need every rank (Session::write_dump writes on rank 0 only).
  session.options_as_given = session.options;
  if (session.rank != 0) {
    Options& o = session.options;
    o.trace.clear();
    o.save.clear();
    o.report.clear();
  }
  // One thread count for every CPU pool, before any work: --threads, else the default
  // (OMP_NUM_THREADS, else the physical cores less one: cpu::default_thread_count).
  const cpu::DefaultThreads defaults = cpu::default_thread_count();
  const int threads = session.options.threads > 0 ? session.options.threads : defaults.count;
  if (!defaults.note.empty() && session.rank == 0)  // OMP_NUM_THREADS=abc|0|-1: said, not taken as 1
    std::cerr << "blockscope: note: " << defaults.note << "; using " << threads << " thread(s)"
              << (session.options.threads > 0 ? " (--threads)" : " (" + defaults.reason + ")")
              << "\n";
  cpu::set_thread_count(threads);
}

int run_cli(Session& session, int argc, char** argv) {
  CLI::App app{"blockscope: run, profile and check transformer workloads described in YAML"};
  describe_app(app);
  CommandLine line;
  Options& options = session.options;
  add_run_command(app, options, line);
  add_profile_command(app, options, line);
  add_check_command(app, options, line);
  add_diff_command(app, options, line);
  add_report_command(app, options, line);
  add_info_command(app, options, line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help / --version print and succeed
    // A usage error, said like every other error: exit 2 (thrown, so that under mpirun the other
    // ranks are told instead of waiting for this one in a collective).
    throw InputError(std::string(error.what()) + "\nRun with --help for more information.");
  }

  prepare_rank(session);
  // mpirun: every command (info, diff, report too) agrees across ranks first, and none reads '-'.
  std::vector<std::string> inputs = line.report_inputs;
  inputs.insert(inputs.end(), {options.config_path, line.diff_before, line.diff_after});
  agree_on_command(session, app.get_subcommands().front()->get_name(), inputs);
  if (line.run->parsed()) return run_command(session.for_command("run"));
  if (line.profile->parsed()) return profile_command(session.for_command("profile"));
  if (line.check->parsed()) return check_command(session.for_command("check"));
  if (line.diff->parsed()) return diff_command(session, line.diff_before, line.diff_after);
  if (line.report->parsed()) return report_command(session, line.report_inputs, line.report_output, line.report_title);
  if (line.info->parsed() && !line.predict_gpu.empty() && line.cost_specs.empty())
    throw InputError("info --predict needs --cost SPEC: the op calls to predict");
  if (line.info->parsed())
    return line.cost_specs.empty() ? info_command(session) : info_costs_command(session, line.cost_specs, line.predict_gpu);
  return 2;
}

}  // namespace
}  // namespace blockscope::cli

namespace blockscope::cli {
namespace {

// One line on stderr in one write (std::cerr's terminal-safe filter writes byte by byte): under
// mpirun the ranks' lines never interleave mid-line.
void say(const std::string& line) {
  const std::string safe = terminal_safe(line);
  raw_stderr().write(safe.data(), static_cast<std::streamsize>(safe.size()));
  raw_stderr().flush();
}

// The command with its errors said on stderr and mapped to exit codes; *failed: an error ended
// it (not a result such as check's 1); *why: the error's message, for the other ranks under
// mpirun. `who` names the process ("blockscope", or with its rank).
// The tables go to standard output: a write that failed there (a full disk, a closed
// descriptor) fails the command like a failed output file, and a signal that cut a blocked
// write short (a reader that stalls) is answered as one (before: exit 0, every table lost).
void finish_standard_output() {
  std::cout.flush();
  errno = 0;
  const bool failed = std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout);
  const int error = errno;  // set by the flush above, when it is what failed
  check_interrupted("while writing to standard output");
  if (failed) {
    throw Error(ErrorKind::runtime, std::string("cannot write the tables to standard output: ") +
                                        (error != 0 ? std::strerror(error) : "the stream failed"));
  }
}

int run_guarded(Session& session, int argc, char** argv, const std::string& who, bool* failed, std::string* why) {
  *failed = true;
  const auto failure = [&](const std::string& what) {
    *why = what;
    const std::vector<std::string> removed = session.remove_outputs();
    std::string line = who + ": runtime failure" + (session.activity().empty() ? "" : " while " + session.activity()) +
                       ": " + what + "\n";
    // An earlier "wrote ..." line announced what is now gone again (a full disk on a later
    // file): said, so no message stays a lie.
    if (!removed.empty()) {
      line += who + ": removed the " + std::to_string(removed.size()) + " output(s) written before the failure:";
      for (const std::string& path : removed) line += " " + path;
      line += "\n";
    }
    say(line);
    return 3;
  };
  try {
    const int code = run_cli(session, argc, argv);
    finish_standard_output();
    // Under mpirun, one last meeting: a rank that finished must not sit in MPI_Finalize while
    // another still waits in a collective, and a failure elsewhere reaches this rank here.
    if (session.world != nullptr && session.world->size() > 1) session.world->barrier();
    *failed = false;
    return code;
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::interrupted) {
      // Stopped between steps: what the command had finished writing goes too (a command
      // that did not finish leaves no output), and the temporaries are gone with their writers.
      *why = error.message();
      const std::vector<std::string> removed = session.remove_outputs();
      std::string line = who + ": " + error.message() + (session.activity().empty() ? "" : " (" + session.activity() + ")");
      if (removed.empty()) {
        line += "; no output was kept\n";
      } else {
        line += "; removed the " + std::to_string(removed.size()) + " output(s) already written:";
        for (const std::string& path : removed) line += " " + path;
        line += "\n";
      }
      say(line);
      return 128 + interrupt_signal();
    }
    if (error.kind() == ErrorKind::invalid_input) {
      *why = error.message();
      session.remove_outputs();
      say(who + ": error: " + error.message() + "\n");
      return 2;
    }
    return failure(error.what());
  } catch (const std::bad_alloc&) {
    return failure("out of host memory");
  } catch (const std::exception& error) {
    return failure(error.what());
  }
}

}  // namespace
}  // namespace blockscope::cli

int main(int argc, char** argv) {
  namespace bs = blockscope;
  bs::install_terminal_safe_output();  // names from input never reach the terminal as control characters
  // Started by mpirun (tensor parallelism): one rank of the world communicator.
  bs::Communicator* world = bs::init_mpi(&argc, &argv);
  bs::cli::Session session;
  std::string who = "blockscope";
  if (world != nullptr) {
    session.world = world;
    session.rank = world->rank();
    bs::profiler::set_nvtx_rank(world->rank());  // Nsight: rank.N/... on every rank's ranges
    who += " (rank " + std::to_string(world->rank()) + " of " + std::to_string(world->size()) + ")";
    if (world->rank() != 0) {  // rank 0 prints; the others say only their errors
      std::freopen("/dev/null", "w", stdout);
      bs::cli::Progress::silence_process();
    }
  }
  bs::install_interrupt_handlers();
  bool failed = false;
  std::string why;
  const int code = bs::cli::run_guarded(session, argc, argv, who, &failed, &why);
  // An error on one rank while the others may wait in a collective: tell them why and end every
  // rank with this code, rather than hang. A finished command (check's 1 included) ends normally.
  bs::restore_standard_output();
  if (world != nullptr && world->size() > 1 && failed) world->abort_all(code, why);
  bs::finalize_mpi();
  return code;
}
