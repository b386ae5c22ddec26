// blockscope profile: each variant profiled on the schedule, its op and kernel tables, and the
// diff of every variant to the base; traces and saved profiles on request.
#include "tools/cli/commands.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "ops/precision/scale_rule.h"
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

// Profiles never freed, still reachable (a leak checker does not report them): see ~ProfileRun.
void keep_until_exit(std::vector<profiler::Profile>&& profiles) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::vector<profiler::Profile>>();
  const std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(profiles));
}

// precision.gemm FP8 with delayed scaling: each cast input's saturation over a variant's steps
// (Workload::fp8_saturation), as rows {tensor, casts, saturated, largest_ratio}; empty otherwise.
nlohmann::json saturation_rows(const Workload& workload) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [name, counts] : workload.fp8_saturation()) {
    const std::vector<float> c = to_floats(counts);
    rows.push_back({{"tensor", name}, {"casts", c[0]}, {"saturated", c[1]}, {"largest_ratio", c[2]}});
  }
  return rows;
}

// The rows as one line: the inputs that saturated, how often and how far, the others counted.
std::string saturation_line(const nlohmann::json& rows, DType format) {
  const std::string range = fmt::format("{:g}, where {} starts clipping to its largest value {:g}",
                                        ops::scale_rule::clip_threshold(format == DType::fp8_e5m2), dtype_name(format),
                                        dtype_max_finite(format));
  std::vector<std::string> saturated;
  int quiet = 0;
  double quiet_casts = 0;
  for (const nlohmann::json& r : rows) {
    const double casts = r["casts"].get<double>(), n = r["saturated"].get<double>();
    if (n > 0) {
      saturated.push_back(fmt::format("{} {:g} of {:g} casts, up to {:.3g}x", r["tensor"].get<std::string>(), n, casts,
                                      r["largest_ratio"].get<double>()));
    } else {
      ++quiet;
      quiet_casts += casts;
    }
  }
  const std::string rule = "delayed scaling: a cast saturates when its step's amax times the scale it used passes " +
                           range + "; the ratios are to the largest value";
  if (saturated.empty())
    return fmt::format("FP8 saturation: none of {} inputs' {:g} casts ({}).", quiet, quiet_casts, rule);
  std::string line = "FP8 saturation (" + rule + "): ";
  for (size_t i = 0; i < saturated.size(); ++i) line += (i > 0 ? "; " : "") + saturated[i];
  if (quiet > 0) line += fmt::format("; the other {} inputs' {:g} casts never", quiet, quiet_casts);
  return line + ".";
}

// One rank's profile of every variant (the only rank without tensor parallelism), as named
// steps: check what was asked of this device, print the header, measure each variant (its
// tables, counters, prediction, ranks and trace as soon as it is done), then the summary
// (JSON, CSV or diffs) and the files. `group`: the tensor-parallel group (MPI's world, or a GPU
// group's rank: then this runs on the rank's thread); only rank 0 prints and writes, the others
// run the same steps and collectives silently.
class ProfileRun {
 public:
  ProfileRun(Session& session, const WorkloadConfig& config, Context& ctx, Communicator* group)
      : session_(session),
        options_(session.options),
        config_(config),
        ctx_(ctx),
        group_(group),
        format_(session.format()),
        rank_(group),
        out_(rank_.out()) {}
  ~ProfileRun() {
    // Stopped by a signal: the profiles are left to the process's end rather than freed event
    // by event (a profile of 100 000 steps is millions of events: 5.8 s to stop, 0.9 s without
    // freeing them), so the command stops within its second; the process exits right after.
    if (interrupt_signal() != 0) {
      keep_until_exit(std::move(profiles_));
      for (std::vector<profiler::Profile>& ranks : other_ranks_) keep_until_exit(std::move(ranks));
    }
  }

  void run() {
    session_.apply_run_settings(ctx_, config_);
    check_requests();
    if (rank_.reports) announce_large_workload("profile", config_);
    Workload workload(ctx_, config_, all_variant_paths(config_), group_);
    set_up_tables();
    variants_ = {{"base " + paths_str(config_.paths, config_.kind), config_.paths}};
    for (const Variant& v : config_.compare) variants_.emplace_back(v.label, v.paths);
    note_inert_keys();
    print_header();
    const std::string trace = !options_.trace.empty() ? options_.trace : config_.profile.trace;
    if (!trace.empty() && rank_.reports) open_traces(trace);
    Progress progress("profile", variants_.size(), !rank_.reports);
    for (size_t v = 0; v < variants_.size(); ++v) measure_variant(workload, progress, v);
    remeasure_a_beaten_peak(ctx_, config_.dtype, profiles_);
    if (format_ == profiler::Format::json) print_json_document();
    else if (format_ == profiler::Format::csv) print_csv_table();
    else print_diffs();
    out_.flush();
    write_files();
    if (!options_.dump.empty()) session_.write_dump(ctx_, workload, options_.dump, rank_.reports);
  }

 private:
  // --counters and --predict on this device and group: refused before any work.
  void check_requests() {
    if (options_.counters && !ctx_.backend().counters_unavailable().empty()) {
      throw InputError("--counters on " + ctx_.device().str() + ": " + ctx_.backend().counters_unavailable());
    }
    // The simulator counts the whole process's launches: ranks on threads of one process would
    // take each other's.
    if (options_.counters && group_ != nullptr && group_->size() > 1) {
      throw InputError("--counters counts one rank's kernels; with parallel.tensor > 1 it is not supported yet "
                       "(profile one rank: parallel.tensor: 1)");
    }
    // --predict: the GPU first (a wrong name fails before any work); where the backend counts
    // (the simulated GPU), the counted forward refines the prediction even without --counters.
    predict_gpu_ = options_.predict.empty() ? nullptr : &profiler::gpu_spec(options_.predict);
    count_ = options_.counters || (predict_gpu_ != nullptr && group_ == nullptr &&
                                   ctx_.backend().counters_unavailable().empty());
  }

  void set_up_tables() {
    schedule_ = config_schedule(config_);
    schedule_.keep_cold_step = options_.cold_step;
    table_.sort_by = config_.profile.sort_by;
    table_.row_limit = config_.profile.row_limit;
    table_.group_by_shape = config_.profile.group_by_shape;
    // Text tables fit the terminal ($COLUMNS, or its width when stdout is one); --columns picks
    // the op table's columns.
    table_.layout = profiler::parse_columns(options_.columns, profiler::terminal_width());
    fitted_.max_width = table_.layout.max_width;  // the kernel table and the diffs: every column
    // Text and CSV print each variant as soon as it is done; JSON is one document at the end.
    // CSV: section headers as comment lines, so each table stays parseable.
    open_ = format_ == profiler::Format::csv ? "# " : "\n== ";
    close_ = format_ == profiler::Format::csv ? "" : " ==";
  }

  // Keys that change nothing on this device: said in the header and kept in every profile, so
  // a diff of a run with the key against one without says why nothing changed.
  void note_inert_keys() {
    if (ctx_.device().is_cuda()) return;
    if (config_.kind == WorkloadKind::decode && config_.decode.cuda_graph)
      inert_notes_.push_back("decode.cuda_graph: true has no effect on " + ctx_.device().str() +
                             " (CUDA devices only): the decode steps ran eagerly");
    if (config_.run.cuda_graph)
      inert_notes_.push_back("run.cuda_graph: true has no effect on " + ctx_.device().str() +
                             " (CUDA devices only): the forwards ran eagerly");
  }

  void print_header() {
    if (format_ != profiler::Format::table) return;
    const size_t width = profiler::terminal_width();
    out_ << workload_title(config_, ctx_) << "\n";
    const profiler::Peaks peaks = profiler::device_peaks(ctx_, config_.dtype);
    const BackendInfo info = ctx_.backend().info(config_.dtype);
    std::string device = "Device: " + info.description;
    if (peaks.tflops > 0) {
      device += fmt::format("; peaks {:.3g} TFLOP/s, {:.3g} GB/s ({})", peaks.tflops, peaks.gbps, peaks.source);
    }
    out_ << profiler::wrap_line(device, width);
    if (!info.dtype_note.empty()) out_ << profiler::wrap_line("Note: " + info.dtype_note, width);
    out_ << fmt::format("Schedule: wait {}, warmup {}, active {}{} per variant\n", schedule_.wait, schedule_.warmup,
                        schedule_.active, schedule_.keep_cold_step ? " (+ the cold step)" : "");
    for (const std::string& note : inert_notes_) out_ << profiler::wrap_line("Note: " + note, width);
    out_.flush();
  }

  // One variant: its steps, then everything that is printed or traced as soon as it is done.
  // A compare: variant this device cannot run (its op refuses the inputs before launching
  // anything: invalid_input) is skipped, said with the reason, and the others still print and
  // save. The base variant, and any runtime failure, stays an error.
  void measure_variant(Workload& workload, Progress& progress, size_t v) {
    const auto& [label, paths] = variants_[v];
    if (rank_.reports) session_.set_activity("profiling " + paths_str(paths, config_.kind) + " on " + ctx_.device().str());
    workload.set_paths(paths);
    workload.reset_fp8_saturation();  // counted over this variant's steps
    progress.start(v, label);
    try {
      profiles_.push_back(profiler::profile_steps(
          ctx_, label, schedule_, [&](int) { workload.forward(); },
          [&](int done, int total) { progress.step(done, total); }));
      saturation_.push_back(saturation_rows(workload));
      profiler::Profile& profile = profiles_.back();
      profile.workload = workload_title(config_, ctx_);
      profile.notes = inert_notes_;
      if (group_ != nullptr) {
        profile.rank = group_->rank();
        profile.ranks = group_->size();
      }
      profiled_.push_back(v);
      const profiler::Spread s = profiler::spread_of(profiler::step_times_us(profile));
      progress.done(fmt::format("median {} per step, CV {:.1f}%", profiler::format_time_us(s.median), 100.0 * s.cv()));
      print_variant(profile);
      if (format_ == profiler::Format::table && !saturation_.back().empty())
        out_ << profiler::wrap_line(saturation_line(saturation_.back(), config_.precision.gemm), profiler::terminal_width());
      std::vector<KernelCounterRecord> counted;
      if (count_) counted = profiler::count_kernels(ctx_, [&] { workload.forward(); });
      if (options_.counters) add_counters(label, counted);
      if (predict_gpu_ != nullptr) add_prediction(profile, counted);
      std::vector<profiler::Profile> ranks;  // every rank's, on rank 0 under tensor parallelism
      if (group_ != nullptr) {
        ranks = gather_ranks(profile);
        print_ranks(ranks);
      }
      other_ranks_.emplace_back(ranks.size() > 1 ? ranks.begin() + 1 : ranks.end(), ranks.end());
      add_to_trace(profile, ranks);
    } catch (const Error& error) {
      progress.clear();
      if (v == 0 || error.kind() != ErrorKind::invalid_input) throw;
      out_.flush();
      if (rank_.reports)
        std::cerr << "blockscope: profile: variant '" << label << "' skipped on " << ctx_.device().str() << ": "
                  << error.what() << "\n";
    }
  }

  void print_variant(const profiler::Profile& p) {
    if (format_ != profiler::Format::table) return;  // CSV: one tidy table at the end
    if (config_.kind == WorkloadKind::decode) {
      // Prefill and decode are two workloads in one: each phase has its own tables.
      for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
        const profiler::Profile part = profiler::phase_profile(p, phase);
        out_ << open_ << part.label << close_ << "\n";
        out_ << profiler::op_table(part, table_, format_) << "\n";
        out_ << profiler::kernel_table(part, format_, fitted_) << "\n";
      }
      out_ << profiler::wrap_text(decode_summary_text(config_, p), profiler::terminal_width());
    } else {
      out_ << open_ << p.label << close_ << "\n";
      out_ << profiler::op_table(p, table_, format_) << "\n";
      out_ << profiler::kernel_table(p, format_, fitted_) << "\n";
    }
    out_.flush();
  }

  void add_counters(const std::string& label, const std::vector<KernelCounterRecord>& counted) {
    counter_tables_.push_back(profiler::counter_table_rows(counted));
    if (format_ != profiler::Format::table) return;
    const bool simulated = ctx_.backend().info(config_.dtype).simulated;
    out_ << open_ << label << " / kernel counters (one forward" << (simulated ? ", counted on the simulated GPU" : "")
         << ")" << close_ << "\n"
         << profiler::render(counter_tables_.back(), format_, fitted_) << "\n";
    out_.flush();
  }

  void add_prediction(profiler::Profile& profile, const std::vector<KernelCounterRecord>& counted) {
    predictions_.push_back(predict_step(*predict_gpu_, profile, counted, config_.run.cuda_graph));
    profile.prediction = predicted_step_json(predictions_.back());  // saved, and in the diffs
    if (format_ != profiler::Format::table) return;
    out_ << open_ << profile.label << " / predicted on " << predict_gpu_->description << close_ << "\n"
         << profiler::render(predicted_op_rows(predictions_.back()), format_, fitted_)
         << profiler::wrap_line(predicted_step_line(predictions_.back()), profiler::terminal_width());
    out_.flush();
  }

  // Tensor parallelism: every rank profiles every variant; rank 0 gathers their profiles (empty
  // on the other ranks). Rank 0 sends nothing: its own profile is at hand (a profile of
  // thousands of steps is seconds of JSON each way).
  std::vector<profiler::Profile> gather_ranks(const profiler::Profile& mine) {
    const std::vector<std::string> all =
        group_->gather_to_root(group_->rank() == 0 ? std::string() : profiler::profile_to_text(mine));
    std::vector<profiler::Profile> ranks;
    for (size_t r = 0; r < all.size(); ++r)
      ranks.push_back(r == 0 ? mine : profiler::profile_from_text(all[r], "rank " + std::to_string(r) + "'s profile"));
    return ranks;
  }

  // Rank 0: each other rank's op table, the per-rank summary and the merged op table.
  void print_ranks(const std::vector<profiler::Profile>& ranks) {
    if (ranks.empty()) return;
    const std::string label = ranks.front().label;
    rank_summaries_.push_back({{"label", label},
                               {"engine", group_->engine()},
                               {"ranks", profiler::rows_json(rank_rows(ranks))},
                               {"merged_ops", profiler::rows_json(merged_op_rows(ranks))},
                               {"slowest", slowest_rank_line(ranks)}});
    if (format_ != profiler::Format::table) return;
    for (size_t r = 1; r < ranks.size(); ++r) {
      out_ << open_ << label << " / rank " << r << close_ << "\n" << profiler::op_table(ranks[r], table_, format_) << "\n";
    }
    out_ << open_ << label << " / ranks (tensor parallel over " << ranks.size() << ", " << group_->engine() << ")"
         << close_ << "\n";
    out_ << profiler::render(rank_rows(ranks), format_, fitted_) << slowest_rank_line(ranks) << "\n\n";
    out_ << open_ << label << " / merged across ranks" << close_ << "\n";
    out_ << profiler::render(merged_op_rows(ranks), format_, fitted_) << "\n";
    out_.flush();
  }

  // One trace file per rank, as Kineto writes them and HTA reads them: rank 0's at PATH, every
  // other rank's beside it (PATH.rankN.json, as --save names them).
  void open_traces(const std::string& path) {
    const int ranks = group_ != nullptr ? group_->size() : 1;
    const std::string backend = distributed_backend(group_);
    for (int r = 0; r < ranks; ++r) {
      trace_paths_.push_back(rank_path(path, r));
      trace_writers_.push_back(std::make_unique<profiler::TraceWriter>(trace_paths_.back(), profiler::TraceRank{r, ranks, backend}));
    }
  }

  // One pair of processes (host, device) per variant in each rank's trace.
  void add_to_trace(const profiler::Profile& profile, const std::vector<profiler::Profile>& ranks) {
    if (trace_writers_.empty()) return;
    if (ranks.empty()) trace_writers_.front()->add(profile);
    for (profiler::Profile rank : ranks) {
      rank.label += " / rank " + std::to_string(rank.rank);
      trace_writers_.at(static_cast<size_t>(rank.rank))->add(rank);
    }
  }

  // --format json: one document, the tables' own JSON per variant, then the diffs.
  void print_json_document() {
    json document;
    document["workload"] = workload_title(config_, ctx_);
    document["device"] = ctx_.device().str();
    document["device_name"] = ctx_.backend().info(config_.dtype).description;
    document["dtype"] = dtype_name(config_.dtype);
    document["schedule"] = {{"wait", schedule_.wait}, {"warmup", schedule_.warmup}, {"active", schedule_.active},
                            {"cold_step", schedule_.keep_cold_step}};
    document["notes"] = inert_notes_;
    for (size_t i = 0; i < profiles_.size(); ++i) document["variants"].push_back(variant_json(i));
    if (!rank_summaries_.empty()) document["tensor_parallel"] = rank_summaries_;
    for (size_t i = 1; i < profiles_.size(); ++i) {
      document["diffs"].push_back({{"before", profiles_[0].label},
                                   {"after", profiles_[i].label},
                                   {"diff", parsed(profiler::diff_profiles(profiles_[0], profiles_[i], format_))}});
    }
    out_ << document.dump(2) << "\n";
  }

  json variant_json(size_t i) const {
    const profiler::Profile& p = profiles_[i];
    json variant = {{"label", p.label},
                    {"ops", parsed(profiler::op_table(p, table_, format_))},
                    {"kernels", parsed(profiler::kernel_table(p, format_))}};
    if (i < counter_tables_.size()) variant["counters"] = parsed(profiler::render(counter_tables_[i], format_));
    if (!p.prediction.is_null()) variant["prediction"] = p.prediction;
    if (i < saturation_.size() && !saturation_[i].empty()) variant["fp8_saturation"] = saturation_[i];
    if (config_.kind == WorkloadKind::decode) {
      for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
        const profiler::Profile part = profiler::phase_profile(p, phase);
        variant["phases"][phase] = {{"ops", parsed(profiler::op_table(part, table_, format_))},
                                    {"kernels", parsed(profiler::kernel_table(part, format_))}};
      }
      variant["decode"] = decode_summary_json(config_, p);
    }
    return variant;
  }

  static json parsed(const std::string& text) {
    json value = json::parse(text, nullptr, false);
    return value.is_discarded() ? json(text) : value;
  }

  // --format csv: one tidy table (--table), every variant's rows, a variant column first.
  void print_csv_table() {
    const std::string which = options_.table.empty() ? "ops" : options_.table;
    profiler::Rows all;
    const auto append = [&](profiler::Rows part) {
      if (all.columns.empty()) all.columns = part.columns;
      all.rows.insert(all.rows.end(), part.rows.begin(), part.rows.end());
    };
    for (size_t i = 0; i < profiles_.size(); ++i) {
      const profiler::Profile& p = profiles_[i];
      if (options_.group_by_phase && (which == "ops" || which == "kernels")) {
        // --group-by-phase: each phase's rows (a decode's prefill, then its decode), a phase column.
        for (const char* phase : {kPrefillRegion, kDecodeRegion}) {
          const profiler::Profile part = profiler::phase_profile(p, phase);
          append(profiler::with_variant_column(
              profiler::with_first_column(which == "ops" ? profiler::op_table_rows(part, table_)
                                                         : profiler::kernel_table_rows(part),
                                          "phase", "Phase", phase),
              p.label));
        }
      } else if (which != "diffs" || i > 0) {  // diffs: each variant against the base
        append(profiler::with_variant_column(csv_rows(which, i), p.label));
      }
    }
    if (all.columns.empty()) {  // diffs of a run without compare: the header alone
      all = profiler::with_variant_column(profiler::diff_table_rows(profiles_[0], profiles_[0]), "");
      all.rows.clear();
    }
    // --columns picks the op table's columns (what check_columns validated them against).
    out_ << profiler::render(all, format_, which == "ops" ? table_.layout : profiler::TextLayout{});
  }

  profiler::Rows csv_rows(const std::string& which, size_t i) const {
    const profiler::Profile& p = profiles_[i];
    if (which == "ops") return profiler::op_table_rows(p, table_);
    if (which == "kernels") return profiler::kernel_table_rows(p);
    if (which == "steps") return profiler::step_table_rows(p);
    if (which == "counters") return counter_tables_.at(i);
    if (which == "predicted") return predicted_op_rows(predictions_.at(i));
    return profiler::diff_table_rows(profiles_[0], p);
  }

  void print_diffs() {
    for (size_t i = 1; i < profiles_.size(); ++i) {
      out_ << "\n" << profiler::diff_profiles(profiles_[0], profiles_[i], format_, fitted_) << "\n";
    }
  }

  // The trace (written as each variant was measured), the report, the saved profiles.
  void write_files() {
    const std::string variants = std::to_string(profiles_.size()) + " variant" + (profiles_.size() == 1 ? "" : "s");
    for (size_t r = 0; r < trace_writers_.size(); ++r) {
      trace_writers_[r]->finish();
      session_.wrote(trace_paths_[r]);
      std::cerr << "wrote trace " << trace_paths_[r] << " ("
                << (trace_writers_.size() > 1 ? "rank " + std::to_string(r) + ", " : std::string()) << variants
                << "; open in https://ui.perfetto.dev or chrome://tracing)\n";
    }
    if (!options_.report.empty() && rank_.reports) {
      profiler::ReportOptions report;
      report.title = workload_title(config_, ctx_);
      report.table = table_;
      profiler::write_html_report(profiles_, report, options_.report);
      session_.wrote(options_.report);
      std::cerr << "wrote report " << options_.report << " (" << variants
                << "; open it in a browser, it needs nothing else)\n";
    }
    if (!options_.save.empty() && rank_.reports) save_profiles();
  }

  void save_profiles() {
    for (size_t i = 0; i < profiles_.size(); ++i) {
      const std::string path = i == 0 ? options_.save : variant_path(options_.save, variants_[profiled_[i]].first);
      profiler::save_profile(profiles_[i], path);
      session_.wrote(path);
      std::cerr << "saved profile " << path << "\n";
      // Tensor parallelism: every other rank's beside it (PATH.rankN.json), each keeping its rank.
      for (const profiler::Profile& rank : other_ranks_[i]) {
        const std::string saved = rank_path(path, rank.rank);
        profiler::save_profile(rank, saved);
        session_.wrote(saved);
        std::cerr << "saved profile " << saved << " (rank " << rank.rank << " of " << rank.ranks << ")\n";
      }
    }
  }

  Session& session_;
  const Options& options_;
  const WorkloadConfig& config_;
  Context& ctx_;
  Communicator* group_;
  const profiler::Format format_;
  RankOutput rank_;
  std::ostream& out_;
  const profiler::GpuSpec* predict_gpu_ = nullptr;  // --predict
  bool count_ = false;                              // one counted forward per variant
  profiler::Schedule schedule_;
  profiler::TableOptions table_;
  profiler::TextLayout fitted_;
  const char* open_ = "";
  const char* close_ = "";
  std::vector<std::pair<std::string, PathConfig>> variants_;  // label, paths: the base first
  std::vector<std::string> inert_notes_;
  std::vector<std::unique_ptr<profiler::TraceWriter>> trace_writers_;  // per rank (rank 0 writes them all)
  std::vector<std::string> trace_paths_;
  // Per profile (a skipped variant has none): the profile, its variant's index, its counter
  // table and prediction, ranks 1.. (gathered by rank 0); per variant, the ranks' summary.
  std::vector<profiler::Profile> profiles_;
  std::vector<nlohmann::json> saturation_;  // per profile: saturation_rows (empty without delayed FP8)
  std::vector<size_t> profiled_;
  std::vector<profiler::Rows> counter_tables_;
  std::vector<PredictedStep> predictions_;
  std::vector<std::vector<profiler::Profile>> other_ranks_;
  std::vector<json> rank_summaries_;
};

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
  for_each_local_rank(config, device,
                      [&](Context& ctx, Communicator* group) { ProfileRun(session, config, ctx, group).run(); });
  return 0;
}

}  // namespace blockscope::cli
