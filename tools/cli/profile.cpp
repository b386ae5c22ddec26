// blockscope profile: each variant profiled on the schedule, its op and kernel tables, and the
// diff of every variant to the base; traces and saved profiles on request.
#include "tools/cli/commands.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>

#include "profiler/counters.h"
#include "profiler/diff.h"
#include "profiler/gpu_specs.h"
#include "profiler/html_report.h"
#include "profiler/profile_io.h"
#include "profiler/session.h"
#include "profiler/summary.h"
#include "profiler/table.h"
#include "profiler/trace.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"
#include "tools/cli/decode_summary.h"
#include "tools/cli/profile_prediction.h"
#include "tools/cli/progress.h"
#include "tools/cli/rank_summary.h"

namespace blockscope::cli {

using nlohmann::json;

namespace {

// A cached CPU peak that this run's own ops beat was measured while the machine was busy (or
// on another setting): measure again, so the next runs divide by a real peak, and say so.
void remeasure_a_beaten_peak(Context& ctx, DType dtype, const std::vector<profiler::Profile>& profiles) {
  if (profiles.empty() || !profiles[0].peaks.cached || profiles[0].peaks.tflops <= 0) return;
  double fastest = 0;  // TFLOP/s
  std::string op;
  for (const profiler::Profile& p : profiles) {
    for (const profiler::OpStats& s : profiler::op_stats(p, false)) {
      const double us = s.device_total_us > 0 ? s.device_total_us : s.cpu_total_us;
      if (s.is_region || us <= 0 || s.flops <= 0 || s.flops / us / 1e6 <= fastest) continue;
      fastest = s.flops / us / 1e6;
      op = s.name;
    }
  }
  const double cached = profiles[0].peaks.tflops;
  if (fastest <= cached) return;
  ctx.backend().remeasure_peaks();
  const profiler::Peaks now = profiler::device_peaks(ctx, dtype);
  std::cerr << fmt::format("blockscope: note: {} ran at {:.3g} TFLOP/s, above the cached peak of {:.3g}: the peaks were "
                           "measured again ({:.3g} TFLOP/s, {:.3g} GB/s) for the next runs; this run's % of peak used "
                           "the cached figure\n",
                           op, fastest, cached, now.tflops, now.gbps);
}

// One rank's profile of every variant (the only rank without tensor parallelism). `group`: the
// tensor-parallel group (MPI's world, or a GPU group's rank: then this runs on the rank's thread);
// only rank 0 prints and writes, the others run the same steps and collectives silently.
void profile_on(Session& session, const WorkloadConfig& config, Context& ctx, Communicator* group) {
  const Options& options = session.options;
  const profiler::Format format = session.format();
  const bool reports = group == nullptr || group->rank() == 0;
  std::ostringstream discarded;  // what a silent rank would have printed
  std::ostream& out = reports ? std::cout : discarded;
  session.apply_run_settings(ctx, config);
  if (options.counters && !ctx.backend().counters_unavailable().empty()) {
    throw InputError("--counters on " + ctx.device().str() + ": " + ctx.backend().counters_unavailable());
  }
  // The simulator counts the whole process's launches: ranks on threads of one process would
  // take each other's.
  if (options.counters && group != nullptr && group->size() > 1) {
    throw InputError("--counters counts one rank's kernels; with parallel.tensor > 1 it is not supported yet "
                     "(profile one rank: parallel.tensor: 1)");
  }
  // --predict: the GPU first (a wrong name fails before any work); where the backend counts
  // (the simulated GPU), the counted forward refines the prediction even without --counters.
  const profiler::GpuSpec* predict_gpu = options.predict.empty() ? nullptr : &profiler::gpu_spec(options.predict);
  const bool count = options.counters || (predict_gpu != nullptr && group == nullptr &&
                                          ctx.backend().counters_unavailable().empty());
  if (reports) announce_large_workload("profile", config);
  Workload workload(ctx, config, all_variant_paths(config), group);

  profiler::Schedule schedule;
  schedule.wait = config.profile.wait;
  schedule.warmup = config.profile.warmup;
  schedule.active = config.profile.active;
  schedule.keep_cold_step = options.cold_step;
  profiler::TableOptions table;
  table.sort_by = config.profile.sort_by;
  table.row_limit = config.profile.row_limit;
  table.group_by_shape = config.profile.group_by_shape;
  // Text tables fit the terminal ($COLUMNS, or its width when stdout is one); --columns picks
  // the op table's columns.
  table.layout = profiler::parse_columns(options.columns, profiler::terminal_width());
  profiler::TextLayout fitted;  // the kernel table and the diffs: fitted, every column
  fitted.max_width = table.layout.max_width;

  std::vector<std::pair<std::string, PathConfig>> variants{{"base " + paths_str(config.paths, config.kind), config.paths}};
  for (const Variant& v : config.compare) variants.emplace_back(v.label, v.paths);
  // Keys that change nothing on this device: said in the header and kept in every profile, so
  // a diff of a run with the key against one without says why nothing changed.
  std::vector<std::string> inert_notes;
  if (!ctx.device().is_cuda()) {
    if (config.kind == WorkloadKind::decode && config.decode.cuda_graph)
      inert_notes.push_back("decode.cuda_graph: true has no effect on " + ctx.device().str() +
                            " (CUDA devices only): the decode steps ran eagerly");
    if (config.run.cuda_graph)
      inert_notes.push_back("run.cuda_graph: true has no effect on " + ctx.device().str() +
                            " (CUDA devices only): the forwards ran eagerly");
  }

  if (format == profiler::Format::table) {
    out << workload_title(config, ctx) << "\n";
    const profiler::Peaks peaks = profiler::device_peaks(ctx, config.dtype);
    const BackendInfo info = ctx.backend().info(config.dtype);
    std::string device = "Device: " + info.description;
    if (peaks.tflops > 0) {
      device += fmt::format("; peaks {:.3g} TFLOP/s, {:.3g} GB/s ({})", peaks.tflops, peaks.gbps, peaks.source);
    }
    out << profiler::wrap_line(device, profiler::terminal_width());
    if (!info.dtype_note.empty()) out << profiler::wrap_line("Note: " + info.dtype_note, profiler::terminal_width());
    out << fmt::format("Schedule: wait {}, warmup {}, active {}{} per variant\n", schedule.wait, schedule.warmup,
                       schedule.active, schedule.keep_cold_step ? " (+ the cold step)" : "");
    for (const std::string& note : inert_notes) out << profiler::wrap_line("Note: " + note, profiler::terminal_width());
    out.flush();
  }
  // Text and CSV print each variant as soon as it is done; JSON is one document at the end.
  // CSV: section headers as comment lines, so each table stays parseable.
  const char* open = format == profiler::Format::csv ? "# " : "\n== ";
  const char* close = format == profiler::Format::csv ? "" : " ==";
  const auto print_variant = [&](const profiler::Profile& p) {
    if (format != profiler::Format::table) return;  // CSV: one tidy table at the end
    if (config.kind == WorkloadKind::decode) {
      // Prefill and decode are two workloads in one: each phase has its own tables.
      for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
        const profiler::Profile part = profiler::phase_profile(p, phase);
        out << open << part.label << close << "\n";
        out << profiler::op_table(part, table, format) << "\n";
        out << profiler::kernel_table(part, format, fitted) << "\n";
      }
      out << profiler::wrap_text(decode_summary_text(config, p), profiler::terminal_width());
      out.flush();
      return;
    }
    out << open << p.label << close << "\n";
    out << profiler::op_table(p, table, format) << "\n";
    out << profiler::kernel_table(p, format, fitted) << "\n";
    out.flush();
  };

  // Tensor parallelism: every rank profiles every variant; rank 0 gathers their profiles and
  // prints each rank's op table, the per-rank summary and the merged op table.
  std::vector<nlohmann::json> rank_summaries;  // --format json: per variant
  const auto gather_ranks = [&](const profiler::Profile& mine) {
    // Rank 0 sends nothing: its own profile is at hand (a profile of thousands of steps is
    // seconds of JSON each way).
    const std::vector<std::string> all =
        group->gather_to_root(group->rank() == 0 ? std::string() : profiler::profile_to_text(mine));
    std::vector<profiler::Profile> ranks;
    for (size_t r = 0; r < all.size(); ++r)
      ranks.push_back(r == 0 ? mine : profiler::profile_from_text(all[r], "rank " + std::to_string(r) + "'s profile"));
    return ranks;  // empty on ranks other than 0
  };
  const auto print_ranks = [&](const std::vector<profiler::Profile>& ranks) {
    if (ranks.empty()) return;
    const std::string label = ranks.front().label;
    nlohmann::json summary = {{"label", label},
                              {"engine", group->engine()},
                              {"ranks", profiler::rows_json(rank_rows(ranks))},
                              {"merged_ops", profiler::rows_json(merged_op_rows(ranks))},
                              {"slowest", slowest_rank_line(ranks)}};
    rank_summaries.push_back(summary);
    if (format != profiler::Format::table) return;
    for (size_t r = 1; r < ranks.size(); ++r) {
      out << open << label << " / rank " << r << close << "\n" << profiler::op_table(ranks[r], table, format) << "\n";
    }
    out << open << label << " / ranks (tensor parallel over " << ranks.size() << ", " << group->engine() << ")"
        << close << "\n";
    out << profiler::render(rank_rows(ranks), format, fitted) << slowest_rank_line(ranks) << "\n\n";
    out << open << label << " / merged across ranks" << close << "\n";
    out << profiler::render(merged_op_rows(ranks), format, fitted) << "\n";
    out.flush();
  };

  // One trace for every variant, written as each is measured.
  const std::string trace = !options.trace.empty() ? options.trace : config.profile.trace;
  std::unique_ptr<profiler::TraceWriter> trace_writer;
  if (!trace.empty() && reports) trace_writer = std::make_unique<profiler::TraceWriter>(trace);

  std::vector<profiler::Profile> profiles;
  std::vector<profiler::Rows> counter_tables;  // --counters: per profile
  std::vector<PredictedStep> predictions;      // --predict: per profile
  std::vector<size_t> profiled;  // index into variants of each profile
  std::vector<std::vector<profiler::Profile>> other_ranks;  // per profile: ranks 1.. (rank 0 gathers them)
  Progress progress("profile", variants.size(), !reports);
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto& [label, paths] = variants[v];
    if (reports) session.set_activity("profiling " + paths_str(paths, config.kind) + " on " + ctx.device().str());
    workload.set_paths(paths);
    progress.start(v, label);
    try {
      profiles.push_back(profiler::profile_steps(
          ctx, label, schedule, [&](int) { workload.forward(); },
          [&](int done, int total) { progress.step(done, total); }));
      profiles.back().workload = workload_title(config, ctx);
      profiles.back().notes = inert_notes;
      if (group != nullptr) {
        profiles.back().rank = group->rank();
        profiles.back().ranks = group->size();
      }
      profiled.push_back(v);
      const profiler::Spread s = profiler::spread_of(profiler::step_times_us(profiles.back()));
      progress.done(fmt::format("median {} per step, CV {:.1f}%", profiler::format_time_us(s.median), 100.0 * s.cv()));
      print_variant(profiles.back());
      std::vector<KernelCounterRecord> counted;
      if (count) counted = profiler::count_kernels(ctx, [&] { workload.forward(); });
      if (options.counters) {
        counter_tables.push_back(profiler::counter_table_rows(counted));
        if (format == profiler::Format::table) {
          out << open << label << " / kernel counters (one forward" << (ctx.backend().info(config.dtype).simulated
                                                                            ? ", counted on the simulated GPU"
                                                                            : "")
              << ")" << close << "\n"
              << profiler::render(counter_tables.back(), format, fitted) << "\n";
          out.flush();
        }
      }
      if (predict_gpu != nullptr) {
        predictions.push_back(predict_step(*predict_gpu, profiles.back(), counted, config.run.cuda_graph));
        profiles.back().prediction = predicted_step_json(predictions.back());  // saved, and in the diffs
        if (format == profiler::Format::table) {
          out << open << label << " / predicted on " << predict_gpu->description << close << "\n"
              << profiler::render(predicted_op_rows(predictions.back()), format, fitted)
              << profiler::wrap_line(predicted_step_line(predictions.back()), profiler::terminal_width());
          out.flush();
        }
      }
      std::vector<profiler::Profile> ranks;  // every rank's, on rank 0 under tensor parallelism
      if (group != nullptr) {
        ranks = gather_ranks(profiles.back());
        print_ranks(ranks);
      }
      other_ranks.emplace_back(ranks.size() > 1 ? ranks.begin() + 1 : ranks.end(), ranks.end());
      // The trace: one pair of processes (host, device) per variant, and per rank of a variant.
      if (trace_writer && ranks.empty()) trace_writer->add(profiles.back());
      for (profiler::Profile rank : ranks) {
        if (!trace_writer) break;
        rank.label += " / rank " + std::to_string(rank.rank);
        trace_writer->add(rank);
      }
    } catch (const Error& error) {
      progress.clear();
      // A compare: variant this device cannot run (its op refuses the inputs before launching
      // anything: invalid_input) is skipped, said with the reason, and the others still print
      // and save. The base variant, and any runtime failure, stays an error.
      if (v == 0 || error.kind() != ErrorKind::invalid_input) throw;
      out.flush();
      if (reports)
        std::cerr << "blockscope: profile: variant '" << label << "' skipped on " << ctx.device().str() << ": "
                  << error.what() << "\n";
    }
  }

  remeasure_a_beaten_peak(ctx, config.dtype, profiles);

  if (format == profiler::Format::json) {
    // One JSON document: the tables' own JSON, per variant, then the diffs.
    auto parsed = [](const std::string& text) {
      json value = json::parse(text, nullptr, false);
      return value.is_discarded() ? json(text) : value;
    };
    json document;
    document["workload"] = workload_title(config, ctx);
    document["device"] = ctx.device().str();
    document["device_name"] = ctx.backend().info(config.dtype).description;
    document["dtype"] = dtype_name(config.dtype);
    document["schedule"] = {{"wait", schedule.wait}, {"warmup", schedule.warmup}, {"active", schedule.active},
                       {"cold_step", schedule.keep_cold_step}};
    document["notes"] = inert_notes;
    for (size_t i = 0; i < profiles.size(); ++i) {
      const profiler::Profile& p = profiles[i];
      json variant = {{"label", p.label},
                      {"ops", parsed(profiler::op_table(p, table, format))},
                      {"kernels", parsed(profiler::kernel_table(p, format))}};
      if (i < counter_tables.size()) variant["counters"] = parsed(profiler::render(counter_tables[i], format));
      if (!p.prediction.is_null()) variant["prediction"] = p.prediction;
      if (config.kind == WorkloadKind::decode) {
        for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
          const profiler::Profile part = profiler::phase_profile(p, phase);
          variant["phases"][phase] = {{"ops", parsed(profiler::op_table(part, table, format))},
                                      {"kernels", parsed(profiler::kernel_table(part, format))}};
        }
        variant["decode"] = decode_summary_json(config, p);
      }
      document["variants"].push_back(variant);
    }
    if (!rank_summaries.empty()) document["tensor_parallel"] = rank_summaries;
    for (size_t i = 1; i < profiles.size(); ++i) {
      document["diffs"].push_back({{"before", profiles[0].label},
                              {"after", profiles[i].label},
                              {"diff", parsed(profiler::diff_profiles(profiles[0], profiles[i], format))}});
    }
    out << document.dump(2) << "\n";
  } else if (format == profiler::Format::csv) {
    // One tidy table (--table): every variant's rows, a variant column first, one header.
    const std::string which = options.table.empty() ? "ops" : options.table;
    profiler::Rows all;
    const auto append = [&](profiler::Rows part) {
      if (all.columns.empty()) all.columns = part.columns;
      all.rows.insert(all.rows.end(), part.rows.begin(), part.rows.end());
    };
    for (size_t i = 0; i < profiles.size(); ++i) {
      const profiler::Profile& p = profiles[i];
      if (options.group_by_phase && (which == "ops" || which == "kernels")) {
        // --group-by-phase: each phase's rows (a decode's prefill, then its decode), a phase column.
        for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
          const profiler::Profile part = profiler::phase_profile(p, phase);
          append(profiler::with_variant_column(
              profiler::with_first_column(which == "ops" ? profiler::op_table_rows(part, table)
                                                         : profiler::kernel_table_rows(part),
                                          "phase", "Phase", phase),
              p.label));
        }
        continue;
      }
      profiler::Rows part;
      if (which == "ops") part = profiler::op_table_rows(p, table);
      else if (which == "kernels") part = profiler::kernel_table_rows(p);
      else if (which == "steps") part = profiler::step_table_rows(p);
      else if (which == "counters") part = counter_tables.at(i);
      else if (which == "predicted") part = predicted_op_rows(predictions.at(i));
      else if (i > 0) part = profiler::diff_table_rows(profiles[0], p);  // diffs: each variant against the base
      else continue;
      append(profiler::with_variant_column(part, p.label));
    }
    if (all.columns.empty()) {  // diffs of a run without compare: the header alone
      all = profiler::with_variant_column(profiler::diff_table_rows(profiles[0], profiles[0]), "");
      all.rows.clear();
    }
    // --columns picks the op table's columns (what check_columns validated them against).
    out << profiler::render(all, format, which == "ops" ? table.layout : profiler::TextLayout{});
  } else {
    for (size_t i = 1; i < profiles.size(); ++i) {
      out << "\n" << profiler::diff_profiles(profiles[0], profiles[i], format, fitted) << "\n";
    }
  }
  out.flush();

  if (trace_writer) {
    trace_writer->finish();
    session.wrote(trace);
    std::cerr << "wrote trace " << trace << " (" << profiles.size() << " variant" << (profiles.size() == 1 ? "" : "s")
              << "; open in https://ui.perfetto.dev or chrome://tracing)\n";
  }
  if (!options.report.empty() && reports) {
    profiler::ReportOptions report;
    report.title = workload_title(config, ctx);
    report.table = table;
    profiler::write_html_report(profiles, report, options.report);
    session.wrote(options.report);
    std::cerr << "wrote report " << options.report << " (" << profiles.size() << " variant"
              << (profiles.size() == 1 ? "" : "s") << "; open it in a browser, it needs nothing else)\n";
  }
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (!options.save.empty() && reports) {
      const std::string path = i == 0 ? options.save : variant_path(options.save, variants[profiled[i]].first);
      profiler::save_profile(profiles[i], path);
      session.wrote(path);
      std::cerr << "saved profile " << path << "\n";
      // Tensor parallelism: every other rank's beside it (PATH.rankN.json), each keeping its rank.
      for (const profiler::Profile& rank : other_ranks[i]) {
        const std::string rank_path = variant_path(path, "rank" + std::to_string(rank.rank));
        profiler::save_profile(rank, rank_path);
        session.wrote(rank_path);
        std::cerr << "saved profile " << rank_path << " (rank " << rank.rank << " of " << rank.ranks << ")\n";
      }
    }
  }
  if (!options.dump.empty()) session.write_dump(ctx, workload, options.dump, reports);
}

}  // namespace

int profile_command(Session& session) {
  const Options& options = session.options;
  const profiler::Format format = session.format();
  if (!options.table.empty() && format != profiler::Format::csv) {
    throw InputError("--table " + options.table + " picks the one table --format csv prints; with --format " + options.format +
                     " it would be ignored (add --format csv)");
  }
  if (options.table == "counters" && !options.counters) {
    throw InputError("--table counters prints the kernel counters, which --counters measures (add --counters)");
  }
  if (options.table == "predicted" && options.predict.empty()) {
    throw InputError("--table predicted prints the predicted op table, which --predict GPU makes (add --predict h100)");
  }
  const WorkloadConfig config = session.load_config();
  if (options.group_by_phase && config.kind != WorkloadKind::decode) {
    throw InputError(std::string("--group-by-phase splits a decode's prefill and decode phases; workload ") +
                     workload_kind_name(config.kind) + " has one phase");
  }
  session.check_outputs(config, true);
  const Device device = resolve_device(config.device);
  // On a GPU a step is queued whole: a signal is answered when it ends (the CPU stops between ops).
  if (device.is_cuda()) set_interrupt_point("after this step");
  for_each_local_rank(config, device, [&](Context& ctx, Communicator* group) { profile_on(session, config, ctx, group); });
  return 0;
}

}  // namespace blockscope::cli
