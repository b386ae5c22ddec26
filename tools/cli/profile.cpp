// blockscope profile: each variant profiled on the schedule, its op and kernel tables, and the
// diff of every variant to the base; traces and saved profiles on request.
#include "tools/cli/commands.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "profiler/diff.h"
#include "profiler/profile_io.h"
#include "profiler/session.h"
#include "profiler/table.h"
#include "profiler/trace.h"
#include "runtime/error.h"

namespace blockscope::cli {

using nlohmann::json;

int profile_command(Session& session) {
  const Options& options = session.options;
  const profiler::Format format = session.format();
  const WorkloadConfig config = session.load_config();
  session.check_outputs(config, true);
  Context ctx(resolve_device(config.device));
  session.apply_run_settings(ctx, config);
  Workload workload(ctx, config, all_variant_paths(config));

  profiler::Schedule schedule;
  schedule.wait = config.profile.wait;
  schedule.warmup = config.profile.warmup;
  schedule.active = config.profile.active;
  schedule.keep_cold_step = options.cold_step;
  profiler::TableOptions table;
  table.sort_by = config.profile.sort_by;
  table.row_limit = config.profile.row_limit;

  std::vector<std::pair<std::string, PathConfig>> variants{{"base " + paths_str(config.paths, config.kind), config.paths}};
  for (const Variant& v : config.compare) variants.emplace_back(v.label, v.paths);
  std::vector<profiler::Profile> profiles;
  std::vector<size_t> profiled;  // index into variants of each profile
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto& [label, paths] = variants[v];
    session.set_activity("profiling " + paths_str(paths, config.kind) + " on " + ctx.device().str());
    workload.set_paths(paths);
    try {
      profiles.push_back(profiler::profile_steps(ctx, label, schedule, [&](int) { workload.forward(); }));
      profiles.back().workload = workload_title(config, ctx);
      profiled.push_back(v);
    } catch (const Error& error) {
      // A compare: variant this device cannot run (its op refuses the inputs before launching
      // anything: invalid_input) is skipped, said with the reason, and the others still print
      // and save. The base variant, and any runtime failure, stays an error.
      if (v == 0 || error.kind() != ErrorKind::invalid_input) throw;
      std::cout.flush();
      std::cerr << "blockscope: profile: variant '" << label << "' skipped on " << ctx.device().str() << ": "
                << error.what() << "\n";
    }
  }

  if (format == profiler::Format::json) {
    // One JSON document: the tables' own JSON, per variant, then the diffs.
    auto parsed = [](const std::string& text) {
      json value = json::parse(text, nullptr, false);
      return value.is_discarded() ? json(text) : value;
    };
    json out;
    out["workload"] = workload_title(config, ctx);
    for (const profiler::Profile& p : profiles) {
      out["variants"].push_back({{"label", p.label},
                                 {"ops", parsed(profiler::op_table(p, table, format))},
                                 {"kernels", parsed(profiler::kernel_table(p, format))}});
    }
    for (size_t i = 1; i < profiles.size(); ++i) {
      out["diffs"].push_back({{"before", profiles[0].label},
                              {"after", profiles[i].label},
                              {"diff", parsed(profiler::diff_profiles(profiles[0], profiles[i], format))}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    if (format == profiler::Format::table) std::cout << workload_title(config, ctx) << "\n";
    // CSV: section headers as comment lines, so each table stays parseable.
    const char* open = format == profiler::Format::csv ? "# " : "\n== ";
    const char* close = format == profiler::Format::csv ? "" : " ==";
    for (const profiler::Profile& p : profiles) {
      std::cout << open << p.label << close << "\n";
      std::cout << profiler::op_table(p, table, format) << "\n";
      std::cout << profiler::kernel_table(p, format) << "\n";
    }
    for (size_t i = 1; i < profiles.size(); ++i) {
      // The text diff starts with its own "diff: A → B" line; CSV gets it as a comment.
      if (format == profiler::Format::csv) std::cout << "# diff: " << profiles[0].label << " -> " << profiles[i].label << "\n";
      else std::cout << "\n";
      std::cout << profiler::diff_profiles(profiles[0], profiles[i], format) << "\n";
    }
  }
  std::cout.flush();

  const std::string trace = !options.trace.empty() ? options.trace : config.profile.trace;
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (!trace.empty()) {
      const std::string path = i == 0 ? trace : variant_path(trace, variants[profiled[i]].first);
      profiler::write_chrome_trace(profiles[i], path);
      session.wrote(path);
      std::cerr << "wrote trace " << path << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
    }
    if (!options.save.empty()) {
      const std::string path = i == 0 ? options.save : variant_path(options.save, variants[profiled[i]].first);
      profiler::save_profile(profiles[i], path);
      session.wrote(path);
      std::cerr << "saved profile " << path << "\n";
    }
  }
  if (!options.dump.empty()) session.write_dump(ctx, workload, options.dump);
  return 0;
}

}  // namespace blockscope::cli
