// blockscope run: warm-up forwards, then timed forwards per variant (base and compare:),
// summarised as median / min / max / mean and TFLOP/s at the median.
#include "tools/cli/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>

#include "profiler/session.h"
#include "profiler/render.h"
#include "profiler/summary.h"
#include "profiler/trace.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"
#include "tools/cli/decode_summary.h"
#include "tools/cli/progress.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "runtime/cuda/cuda_graph.h"
#endif

namespace blockscope::cli {

namespace {

// One variant's timing: median / min / max / mean over the timed forwards.
struct TimedVariant {
  std::string label;
  std::string paths;
  double median_ms, min_ms, max_ms, mean_ms;
};

// The warm-up forwards, then the timed ones: eager, or (run.cuda_graph on CUDA) each one launch
// of the forward captured after the warm-up. Device-side marks around each forward, resolved
// after one synchronise at the end.
TimedVariant time_variant(const WorkloadConfig& config, Context& ctx, Workload& workload, Progress& progress,
                          bool use_graph) {
  const int forwards = config.run.warmup + config.run.iters;
  for (int i = 0; i < config.run.warmup; ++i) {
    check_interrupted("during the warm-up");
    workload.forward();
    progress.step(i + 1, forwards, "forward");
  }
  ctx.synchronize();
  std::function<void()> step = [&] { workload.forward(); };
#ifdef BLOCKSCOPE_WITH_CUDA
  CudaGraph graph;
  if (use_graph) {
    graph.capture(ctx, [&] { workload.forward(); });
    step = [&] { graph.replay(); };
  }
#else
  (void)use_graph;
#endif
  std::vector<std::pair<TimeMark, TimeMark>> marks;
  for (int i = 0; i < config.run.iters; ++i) {
    check_interrupted("between timed forwards");
    const TimeMark start = ctx.backend().mark();
    step();
    marks.emplace_back(start, ctx.backend().mark());
    progress.step(config.run.warmup + i + 1, forwards, "forward");  // launched (on a GPU: queued)
  }
  ctx.synchronize();
  std::vector<double> times;
  for (const auto& [start, end] : marks) times.push_back(ctx.backend().elapsed_ms(start, end));
  ctx.backend().release_marks();
  const profiler::Spread spread = profiler::spread_of(times);
  progress.done(fmt::format("median {:.4f} ms per forward", spread.median));
  return {"", "", spread.median, spread.min, spread.max, spread.mean};
}

profiler::Rows timing_table(const std::vector<TimedVariant>& timed, double flops) {
  profiler::Rows table;
  table.columns = {{"variant", "variant", true, ""},        {"paths", "paths", true, ""},
                   {"median_ms", "median ms", false, "%.4f"}, {"min_ms", "min ms", false, "%.4f"},
                   {"max_ms", "max ms", false, "%.4f"},       {"mean_ms", "mean ms", false, "%.4f"},
                   {"tflops_at_median", "TFLOP/s", false, "%.3f"}};
  table.drop_order = {"paths", "mean_ms", "max_ms", "min_ms"};  // too wide for COLUMNS: these go first
  for (const TimedVariant& r : timed) {
    table.rows.push_back({r.label, r.paths, r.median_ms, r.min_ms, r.max_ms, r.mean_ms,
                          flops > 0 ? flops / (r.median_ms * 1e-3) / 1e12 : 0.0});
  }
  return table;
}

void print_timing_text(std::ostream& out, const profiler::Rows& table, const WorkloadConfig& config, Context& ctx,
                       const Workload& workload, bool use_graph) {
  const size_t width = profiler::terminal_width();
  out << profiler::wrap_line(workload_title(config, ctx), width);
  out << profiler::wrap_line("memory estimate " + profiler::format_bytes(static_cast<double>(workload.memory().total())) +
                                 ", " + std::to_string(config.run.warmup) + " warm-up + " +
                                 std::to_string(config.run.iters) + " timed forwards per variant",
                             width)
      << "\n";
  profiler::TextLayout layout;
  layout.max_width = width;
  layout.show_all = "a wider COLUMNS shows them";
  out << profiler::render(table, profiler::Format::table, layout);
  if (config.kind == WorkloadKind::decode && config.decode.cuda_graph) {
    out << "\n" << profiler::wrap_text(decode_graph_note(ctx.device().str()) + "\n", width);
  }
  if (use_graph) {
    out << "\nforwards replayed from a CUDA graph captured after the warm-up (run.cuda_graph)\n";
  } else if (config.run.cuda_graph) {
    out << "\nnote: run.cuda_graph applies to CUDA devices; on " << ctx.device().str() << " the forwards ran eagerly\n";
  }
}

void print_timing(std::ostream& out, profiler::Format format, const profiler::Rows& table,
                  const WorkloadConfig& config, Context& ctx, const Workload& workload, bool use_graph) {
  if (format == profiler::Format::json) {
    nlohmann::json document;
    document["workload"] = workload_title(config, ctx);
    document["device"] = ctx.device().str();
    document["dtype"] = dtype_name(config.dtype);
    document["warmup"] = config.run.warmup;
    document["iters"] = config.run.iters;
    document["memory_estimate_bytes"] = workload.memory().total();
    document["flops_per_forward"] = workload.flops_per_forward();
    document["variants"] = profiler::rows_json(table);
    out << document.dump(2) << "\n";
  } else if (format == profiler::Format::csv) {
    out << profiler::render(table, format);
  } else {
    print_timing_text(out, table, config, ctx, workload, use_graph);
  }
  out.flush();
}

// --trace: the base paths profiled on the config's schedule (every rank: the collectives need
// them all), rank 0's written by the reporting rank (`profile --trace` writes every rank's).
void write_run_trace(Session& session, const WorkloadConfig& config, Context& ctx, Workload& workload,
                     const Communicator* group, bool reports) {
  const std::string& path = session.options.trace;
  if (reports)
    session.set_activity("profiling " + paths_str(config.paths, config.kind) + " for --trace on " + ctx.device().str());
  workload.set_paths(config.paths);
  const profiler::Profile profile = profiler::profile_steps(ctx, "base " + paths_str(config.paths, config.kind),
                                                            config_schedule(config), [&](int) { workload.forward(); });
  if (!reports) return;
  profiler::write_chrome_trace(profile, path,
                               profiler::TraceRank{0, group != nullptr ? group->size() : 1, distributed_backend(group)});
  session.wrote(path);
  std::cerr << "wrote trace " << path << "\n";
}

// One rank's run of every variant (the only rank without tensor parallelism). `group`: the
// tensor-parallel group (MPI's world, or a GPU group's rank: then this runs on the rank's
// thread); only rank 0 prints and writes, the others run the same forwards silently.
void run_on(Session& session, const WorkloadConfig& config, Context& ctx, Communicator* group) {
  const profiler::Format format = session.format();  // a bad --format fails before any work
  RankOutput rank(group);
  session.apply_run_settings(ctx, config);
  if (rank.reports) announce_large_workload("run", config);
  Workload workload(ctx, config, all_variant_paths(config), group);
  std::vector<std::pair<std::string, PathConfig>> variants{{"base", config.paths}};
  for (const Variant& v : config.compare) variants.emplace_back(v.label, v.paths);
  const bool use_graph = config.run.cuda_graph && ctx.device().is_cuda();
  Progress progress("run", variants.size(), !rank.reports);
  std::vector<TimedVariant> timed;
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto& [label, paths] = variants[v];
    if (rank.reports) session.set_activity("running " + paths_str(paths, config.kind) + " on " + ctx.device().str());
    progress.start(v, label);
    workload.set_paths(paths);
    timed.push_back(time_variant(config, ctx, workload, progress, use_graph));
    timed.back().label = label;
    timed.back().paths = paths_str(paths, config.kind);
  }
  print_timing(rank.out(), format, timing_table(timed, workload.flops_per_forward()), config, ctx, workload,
               use_graph);
  if (!session.options.trace.empty()) write_run_trace(session, config, ctx, workload, group, rank.reports);
  if (!session.options.dump.empty()) session.write_dump(ctx, workload, session.options.dump, rank.reports);
}

}  // namespace

int run_command(Session& session) {
  const WorkloadConfig config = session.load_config();
  session.check_outputs(config, false);
  const Device device = resolve_device(config.device);
  // On a GPU a forward is queued whole: a signal is answered when it ends (the CPU stops between ops).
  if (device.is_cuda()) set_interrupt_point("after this forward");
  for_each_local_rank(config, device, [&](Context& ctx, Communicator* group) { run_on(session, config, ctx, group); });
  return 0;
}

}  // namespace blockscope::cli
