// blockscope: run, profile and check YAML-described transformer workloads.
//
//   blockscope run [CONFIG]       timing summary (warm-up, then median/min per forward)
//   blockscope profile [CONFIG]   op and kernel tables per variant, and diffs between them
//   blockscope check [CONFIG]     every device and path against the float64 reference
//   blockscope diff A.json B.json what changed between two saved profiles
//   blockscope info               build, devices, peaks, GEMM library
//
// Exit codes: 0 ok, 1 check found a path outside the accuracy rule, 2 bad usage or input,
// 3 runtime failure. Output files (--dump, --trace, --save) are written only after the work
// succeeded, each to a temporary name then renamed; after a failure none of them exists.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "profiler/diff.h"
#include "profiler/profile_io.h"
#include "profiler/session.h"
#include "profiler/table.h"
#include "profiler/trace.h"
#include "model/config.h"
#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "model/safetensors.h"
#include "model/workload.h"
#include "reference/block_reference.h"

#ifdef BLOCKSCOPE_WITH_CUDA
#include "ops/common/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_graph.h"
#endif

namespace bs = blockscope;
using nlohmann::json;

namespace {

const char* kVersion = "0.1.0";

// Flags every workload command takes.
struct CommonOptions {
  std::string config_path;  // empty: the default config compiled in
  std::string device;
  std::string dtype;
  std::vector<std::string> sets;
  std::string dump;
  std::string trace;
  std::string save;
  std::string format = "table";
  bool cold_step = false;
  bool sync_each_op = false;  // debug: synchronise after every op so a failure names its op
};

// Files this invocation wrote; removed again if a later step fails, so a failed command
// leaves no output behind.
class OutputFiles {
 public:
  void written(const std::string& path) { paths_.push_back(path); }
  void remove_all() {
    for (const std::string& path : paths_) std::remove(path.c_str());
    paths_.clear();
  }

 private:
  std::vector<std::string> paths_;
};

OutputFiles g_outputs;

// What the command is doing, for runtime failure messages ("profiling attention=naive on cpu").
std::string g_activity;

bs::profiler::Format parse_format_flag(const std::string& text) {
  bs::profiler::Format format;
  if (!bs::profiler::parse_format(text, &format)) {
    throw bs::InputError("--format '" + text + "': expected table, csv or json");
  }
  return format;
}

// The config with the command line's overrides: --set first (validated like the file), then
// --device and --dtype.
bs::WorkloadConfig load_config(const CommonOptions& options) {
  bs::WorkloadConfig config = options.config_path.empty() ? bs::load_default_config(options.sets)
                                                          : bs::load_config_file(options.config_path, options.sets);
  if (!options.device.empty()) {
    bs::Device device;
    if (options.device != "auto" && !bs::parse_device(options.device, &device)) {
      throw bs::InputError("--device '" + options.device + "': expected auto, cpu, cuda or cuda:N");
    }
    config.device = options.device;
  }
  if (!options.dtype.empty() && !bs::parse_dtype(options.dtype, &config.dtype)) {
    throw bs::InputError("--dtype '" + options.dtype + "': expected f32, f16 or bf16");
  }
  return config;
}

std::vector<bs::PathConfig> all_variant_paths(const bs::WorkloadConfig& config) {
  std::vector<bs::PathConfig> paths{config.paths};
  for (const bs::Variant& variant : config.compare) paths.push_back(variant.paths);
  return paths;
}

std::string workload_title(const bs::WorkloadConfig& config, const bs::Context& ctx) {
  std::ostringstream out;
  out << (config.name.empty() ? config.source : config.name) << ": " << bs::workload_kind_name(config.kind);
  if (bs::is_block_workload(config.kind)) {
    const bs::ModelConfig& m = config.model;
    out << " " << bs::family_name(m.family) << " d_model=" << m.d_model << " heads=" << m.n_heads << "/"
        << m.n_kv_heads << " head_dim=" << m.head_dim << " d_ff=" << m.d_ff;
    if (config.kind == bs::WorkloadKind::stack) out << " layers=" << m.n_layers;
  }
  if (config.kind == bs::WorkloadKind::matmul_add || config.kind == bs::WorkloadKind::linear ||
      config.kind == bs::WorkloadKind::softmax) {
    out << " m=" << config.shape.m << " n=" << config.shape.n;
    if (config.kind != bs::WorkloadKind::softmax) out << " k=" << config.shape.k;
  } else {
    out << " batch=" << config.input.batch << " seq_len=" << config.input.seq_len;
  }
  out << " " << bs::dtype_name(config.dtype) << " on " << ctx.device().str();
  return out.str();
}

// "attention=naive,mlp=fused" -> "attention-naive_mlp-fused" (file-name safe).
std::string file_safe(const std::string& label) {
  std::string out;
  for (char c : label) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : (c == '=' ? '-' : '_');
  return out;
}

// FILE.json -> FILE.<label>.json for the i-th variant (the base keeps FILE).
std::string variant_path(const std::string& path, const std::string& label) {
  const size_t dot = path.find_last_of('.');
  const size_t slash = path.find_last_of('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_ext ? path.substr(0, dot) : path;
  const std::string ext = has_ext ? path.substr(dot) : std::string();
  return stem + "." + file_safe(label) + ext;
}

void write_dump(bs::Context& ctx, bs::Workload& workload, const std::string& path) {
  workload.set_paths(workload.config().paths);
  workload.forward();
  ctx.synchronize();
  bs::write_safetensors(path, workload.dump_tensors(), workload.dump_metadata());
  g_outputs.written(path);
  std::cerr << "wrote " << path << " (input, output and " << workload.inputs_and_weights().size() - 1
            << " weights under their Hugging Face names)\n";
}

// Device settings from the config's run: section (TF32 for f32 GEMMs on CUDA).
bool g_sync_each_op = false;

void apply_run_settings(bs::Context& ctx, const bs::WorkloadConfig& config) {
  ctx.set_sync_after_each_op(g_sync_each_op);
#ifdef BLOCKSCOPE_WITH_CUDA
  if (ctx.device().is_cuda()) bs::ops::cuda::cublaslt::settings(ctx).allow_tf32 = config.run.allow_tf32;
#else
  (void)ctx;
  (void)config;
#endif
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// ---- run -----------------------------------------------------------------------------------

int cmd_run(const CommonOptions& options) {
  const bs::profiler::Format format = parse_format_flag(options.format);
  const bs::WorkloadConfig config = load_config(options);
  bs::Context ctx(bs::resolve_device(config.device));
  apply_run_settings(ctx, config);
  bs::Workload workload(ctx, config, all_variant_paths(config));

  struct Row {
    std::string label;
    std::string paths;
    double median_ms, min_ms, max_ms, mean_ms;
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, bs::PathConfig>> variants{{"base", config.paths}};
  for (const bs::Variant& v : config.compare) variants.emplace_back(v.label, v.paths);
  const bool use_graph = config.run.cuda_graph && ctx.device().is_cuda();
  for (const auto& [label, paths] : variants) {
    g_activity = "running " + bs::paths_str(paths, config.kind) + " on " + ctx.device().str();
    workload.set_paths(paths);
    for (int i = 0; i < config.run.warmup; ++i) workload.forward();
    ctx.synchronize();
    // One forward: eager, or (run.cuda_graph on CUDA) one launch of the captured forward.
    std::function<void()> step = [&] { workload.forward(); };
#ifdef BLOCKSCOPE_WITH_CUDA
    bs::CudaGraph graph;
    if (use_graph) {
      graph.capture(ctx, [&] { workload.forward(); });
      step = [&] { graph.replay(); };
    }
#endif
    // Device-side marks around each forward; resolved after one synchronise at the end.
    std::vector<std::pair<bs::TimeMark, bs::TimeMark>> marks;
    for (int i = 0; i < config.run.iters; ++i) {
      const bs::TimeMark start = ctx.backend().mark();
      step();
      marks.emplace_back(start, ctx.backend().mark());
    }
    ctx.synchronize();
    std::vector<double> times;
    for (const auto& [start, end] : marks) times.push_back(ctx.backend().elapsed_ms(start, end));
    ctx.backend().release_marks();
    double sum = 0;
    for (double t : times) sum += t;
    rows.push_back({label, bs::paths_str(paths, config.kind), median(times), *std::min_element(times.begin(), times.end()),
                    *std::max_element(times.begin(), times.end()), sum / static_cast<double>(times.size())});
  }

  const double flops = workload.flops_per_forward();
  if (format == bs::profiler::Format::json) {
    json out;
    out["workload"] = workload_title(config, ctx);
    out["device"] = ctx.device().str();
    out["dtype"] = bs::dtype_name(config.dtype);
    out["warmup"] = config.run.warmup;
    out["iters"] = config.run.iters;
    out["memory_estimate_bytes"] = workload.memory().total();
    out["flops_per_forward"] = flops;
    for (const Row& r : rows) {
      out["variants"].push_back({{"label", r.label},
                                 {"paths", r.paths},
                                 {"median_ms", r.median_ms},
                                 {"min_ms", r.min_ms},
                                 {"max_ms", r.max_ms},
                                 {"mean_ms", r.mean_ms},
                                 {"tflops_at_median", flops > 0 ? flops / (r.median_ms * 1e-3) / 1e12 : 0.0}});
    }
    std::cout << out.dump(2) << "\n";
  } else if (format == bs::profiler::Format::csv) {
    std::cout << "variant,paths,median_ms,min_ms,max_ms,mean_ms,tflops_at_median\n";
    for (const Row& r : rows) {
      std::cout << r.label << ",\"" << r.paths << "\"," << r.median_ms << "," << r.min_ms << "," << r.max_ms << ","
                << r.mean_ms << "," << (flops > 0 ? flops / (r.median_ms * 1e-3) / 1e12 : 0.0) << "\n";
    }
  } else {
    std::cout << workload_title(config, ctx) << "\n";
    std::cout << "memory estimate " << bs::format_bytes(static_cast<double>(workload.memory().total()))
              << ", " << config.run.warmup << " warm-up + " << config.run.iters << " timed forwards per variant\n\n";
    std::printf("%-32s %-48s %12s %12s %12s %10s\n", "variant", "paths", "median ms", "min ms", "max ms", "TFLOP/s");
    for (const Row& r : rows) {
      std::printf("%-32s %-48s %12.4f %12.4f %12.4f %10.3f\n", r.label.c_str(), r.paths.c_str(), r.median_ms,
                  r.min_ms, r.max_ms, flops > 0 ? flops / (r.median_ms * 1e-3) / 1e12 : 0.0);
    }
    if (use_graph) {
      std::printf("\nforwards replayed from a CUDA graph captured after the warm-up (run.cuda_graph)\n");
    } else if (config.run.cuda_graph) {
      std::printf("\nnote: run.cuda_graph applies to CUDA devices; on %s the forwards ran eagerly\n",
                  ctx.device().str().c_str());
    }
  }
  std::fflush(stdout);
  if (!options.trace.empty()) {
    g_activity = "profiling " + bs::paths_str(config.paths, config.kind) + " for --trace on " + ctx.device().str();
    workload.set_paths(config.paths);
    bs::profiler::Schedule schedule;
    schedule.wait = config.profile.wait;
    schedule.warmup = config.profile.warmup;
    schedule.active = config.profile.active;
    const bs::profiler::Profile profile = bs::profiler::profile_steps(
        ctx, "base " + bs::paths_str(config.paths, config.kind), schedule, [&](int) { workload.forward(); });
    bs::profiler::write_chrome_trace(profile, options.trace);
    g_outputs.written(options.trace);
    std::cerr << "wrote trace " << options.trace << "\n";
  }
  if (!options.dump.empty()) write_dump(ctx, workload, options.dump);
  return 0;
}

// ---- profile -------------------------------------------------------------------------------

int cmd_profile(const CommonOptions& options) {
  const bs::profiler::Format format = parse_format_flag(options.format);
  const bs::WorkloadConfig config = load_config(options);
  bs::Context ctx(bs::resolve_device(config.device));
  apply_run_settings(ctx, config);
  bs::Workload workload(ctx, config, all_variant_paths(config));

  bs::profiler::Schedule schedule;
  schedule.wait = config.profile.wait;
  schedule.warmup = config.profile.warmup;
  schedule.active = config.profile.active;
  schedule.keep_cold_step = options.cold_step;
  bs::profiler::TableOptions table;
  table.sort_by = config.profile.sort_by;
  table.row_limit = config.profile.row_limit;

  std::vector<std::pair<std::string, bs::PathConfig>> variants{{"base " + bs::paths_str(config.paths, config.kind), config.paths}};
  for (const bs::Variant& v : config.compare) variants.emplace_back(v.label, v.paths);
  std::vector<bs::profiler::Profile> profiles;
  std::vector<size_t> profiled;  // index into variants of each profile
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto& [label, paths] = variants[v];
    g_activity = "profiling " + bs::paths_str(paths, config.kind) + " on " + ctx.device().str();
    workload.set_paths(paths);
    try {
      profiles.push_back(bs::profiler::profile_steps(ctx, label, schedule, [&](int) { workload.forward(); }));
      profiled.push_back(v);
    } catch (const bs::Error& error) {
      // A compare: variant this device cannot run (its op refuses the inputs before launching
      // anything: invalid_input) is skipped, said with the reason, and the others still print
      // and save. The base variant, and any runtime failure, stays an error.
      if (v == 0 || error.kind() != bs::ErrorKind::invalid_input) throw;
      std::cout.flush();
      std::cerr << "blockscope: profile: variant '" << label << "' skipped on " << ctx.device().str() << ": "
                << error.what() << "\n";
    }
  }

  if (format == bs::profiler::Format::json) {
    // One JSON document: the tables' own JSON, per variant, then the diffs.
    auto parsed = [](const std::string& text) {
      json value = json::parse(text, nullptr, false);
      return value.is_discarded() ? json(text) : value;
    };
    json out;
    out["workload"] = workload_title(config, ctx);
    for (const bs::profiler::Profile& p : profiles) {
      out["variants"].push_back({{"label", p.label},
                                 {"ops", parsed(bs::profiler::op_table(p, table, format))},
                                 {"kernels", parsed(bs::profiler::kernel_table(p, format))}});
    }
    for (size_t i = 1; i < profiles.size(); ++i) {
      out["diffs"].push_back({{"before", profiles[0].label},
                              {"after", profiles[i].label},
                              {"diff", parsed(bs::profiler::diff_profiles(profiles[0], profiles[i], format))}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    if (format == bs::profiler::Format::table) std::cout << workload_title(config, ctx) << "\n";
    // CSV: section headers as comment lines, so each table stays parseable.
    const char* open = format == bs::profiler::Format::csv ? "# " : "\n== ";
    const char* close = format == bs::profiler::Format::csv ? "" : " ==";
    for (const bs::profiler::Profile& p : profiles) {
      std::cout << open << p.label << close << "\n";
      std::cout << bs::profiler::op_table(p, table, format) << "\n";
      std::cout << bs::profiler::kernel_table(p, format) << "\n";
    }
    for (size_t i = 1; i < profiles.size(); ++i) {
      std::cout << open << "diff: " << profiles[0].label << "  ->  " << profiles[i].label << close << "\n";
      std::cout << bs::profiler::diff_profiles(profiles[0], profiles[i], format) << "\n";
    }
  }
  std::cout.flush();

  const std::string trace = !options.trace.empty() ? options.trace : config.profile.trace;
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (!trace.empty()) {
      const std::string path = i == 0 ? trace : variant_path(trace, variants[profiled[i]].first);
      bs::profiler::write_chrome_trace(profiles[i], path);
      g_outputs.written(path);
      std::cerr << "wrote trace " << path << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
    }
    if (!options.save.empty()) {
      const std::string path = i == 0 ? options.save : variant_path(options.save, variants[profiled[i]].first);
      bs::profiler::save_profile(profiles[i], path);
      g_outputs.written(path);
      std::cerr << "saved profile " << path << "\n";
    }
  }
  if (!options.dump.empty()) write_dump(ctx, workload, options.dump);
  return 0;
}

// ---- diff ----------------------------------------------------------------------------------

int cmd_diff(const std::string& before, const std::string& after, const std::string& format_text) {
  const bs::profiler::Format format = parse_format_flag(format_text);
  const bs::profiler::Profile a = bs::profiler::load_profile(before);
  const bs::profiler::Profile b = bs::profiler::load_profile(after);
  std::cout << bs::profiler::diff_profiles(a, b, format) << "\n";
  return 0;
}

// ---- check ---------------------------------------------------------------------------------

// The accuracy rule for a whole workload (DESIGN.md, after FlashAttention's tests): every path
// mix's max relative error against the float64 reference is at most 2x the all-naive mix's
// error in the same dtype and device, plus a floor of a few units of roundoff. The naive mix
// itself must stay under a sanity bound, so a reference mismatch cannot hide behind the rule.
double check_floor(bs::DType dtype) { return 8.0 * bs::dtype_epsilon(dtype); }
double naive_bound(bs::DType dtype) {
  switch (dtype) {
    case bs::DType::f32: return 1e-4;
    case bs::DType::f16: return 2e-2;
    case bs::DType::bf16: return 6e-2;
  }
  return 1e-4;
}

double max_relative_error(const std::vector<float>& actual, const std::vector<double>& reference) {
  if (actual.size() != reference.size()) return NAN;
  double scale = 1e-30, worst = 0;
  for (double r : reference) scale = std::max(scale, std::abs(r));
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!std::isfinite(actual[i])) return NAN;
    worst = std::max(worst, std::abs(static_cast<double>(actual[i]) - reference[i]));
  }
  return worst / scale;
}

// Every path mix that applies to the workload, the all-naive one first (the first op's path
// varying fastest), from the path table; MLP paths only where they apply (plain or gated).
std::vector<bs::PathConfig> path_mixes(const bs::WorkloadConfig& config) {
  bs::PathConfig naive = config.paths;
  for (bs::ops::PathOp op : bs::ops::path_ops()) naive.set(op, bs::ops::paths_of(op).front().name);
  std::vector<bs::PathConfig> mixes{naive};
  for (bs::ops::PathOp op : bs::path_ops_for(config.kind)) {
    std::vector<bs::PathConfig> grown;
    for (const bs::ops::PathInfo& row : bs::ops::paths_of(op)) {
      if (op == bs::ops::PathOp::mlp && !(config.model.gated ? row.gated_mlp : row.plain_mlp)) continue;
      for (bs::PathConfig mix : mixes) {
        mix.set(op, row.name);
        grown.push_back(mix);
      }
    }
    mixes = grown;
  }
  return mixes;
}

int cmd_check(const CommonOptions& options) {
  const bs::profiler::Format format = parse_format_flag(options.format);
  const bs::WorkloadConfig config = load_config(options);
  std::vector<bs::Device> devices;
  if (!options.device.empty() && options.device != "auto") {
    devices.push_back(bs::resolve_device(options.device));
  } else {
    devices.push_back(bs::Device::cpu());
    if (bs::cuda_available())
      for (int i = 0; i < bs::cuda_device_count(); ++i) devices.push_back(bs::Device::cuda(i));
  }
  const std::vector<bs::PathConfig> mixes = path_mixes(config);

  struct Row {
    std::string device, paths;
    double error, bound;
    bool ok;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  std::vector<double> reference;
  for (const bs::Device& device : devices) {
    bs::Context ctx(device);
    apply_run_settings(ctx, config);
    bs::Workload workload(ctx, config, mixes);
    if (reference.empty()) {
      // Inputs and weights are identical on every device (seeded init), so one reference serves all.
      bs::reference::blockref::Named named;
      for (const auto& [name, tensor] : workload.inputs_and_weights()) named[name] = bs::reference::from_tensor(tensor);
      reference = bs::reference::blockref::workload_output(config, named).data;
    }
    double naive_error = 0;
    for (size_t i = 0; i < mixes.size(); ++i) {
      g_activity = "checking " + bs::paths_str(mixes[i], config.kind) + " on " + device.str();
      workload.set_paths(mixes[i]);
      bs::Tensor out = workload.output();
      bs::fill_nan(out);  // an element the path forgets to write shows up as NaN
      workload.forward();
      ctx.synchronize();
      const double error = max_relative_error(bs::to_floats(workload.output()), reference);
      double bound;
      if (i == 0) {
        naive_error = error;
        bound = naive_bound(config.dtype);
      } else {
        bound = 2.0 * naive_error + check_floor(config.dtype);
      }
      const bool ok = std::isfinite(error) && error <= bound;
      all_ok = all_ok && ok;
      rows.push_back({device.str(), bs::paths_str(mixes[i], config.kind), error, bound, ok});
    }
    if (!options.dump.empty() && device == devices.front()) write_dump(ctx, workload, options.dump);
  }

  if (format == bs::profiler::Format::json) {
    json out;
    out["workload"] = config.name.empty() ? config.source : config.name;
    out["dtype"] = bs::dtype_name(config.dtype);
    out["ok"] = all_ok;
    for (const Row& r : rows)
      out["results"].push_back({{"device", r.device}, {"paths", r.paths}, {"max_rel_error", r.error},
                                {"bound", r.bound}, {"ok", r.ok}});
    std::cout << out.dump(2) << "\n";
  } else if (format == bs::profiler::Format::csv) {
    std::cout << "device,paths,max_rel_error,bound,ok\n";
    for (const Row& r : rows)
      std::cout << r.device << ",\"" << r.paths << "\"," << r.error << "," << r.bound << "," << (r.ok ? 1 : 0) << "\n";
  } else {
    std::cout << "check " << (config.name.empty() ? config.source : config.name) << " ("
              << bs::workload_kind_name(config.kind) << ", " << bs::dtype_name(config.dtype)
              << ") against the float64 reference\n";
    std::cout << "rule: naive error <= " << naive_bound(config.dtype) << "; every other path <= 2 x naive + "
              << check_floor(config.dtype) << " (max |out - ref| / max |ref|)\n\n";
    std::printf("%-8s %-48s %14s %14s  %s\n", "device", "paths", "max rel error", "bound", "result");
    for (const Row& r : rows)
      std::printf("%-8s %-48s %14.3e %14.3e  %s\n", r.device.c_str(), r.paths.c_str(), r.error, r.bound,
                  r.ok ? "ok" : "FAIL");
    if (devices.size() == 1 && devices[0].is_cpu() && options.device.empty()) {
      std::printf("\n(no CUDA GPU available: checked the CPU only)\n");
    }
    std::printf("\n%s\n", all_ok ? "all paths within the accuracy rule" : "some paths break the accuracy rule");
  }
  return all_ok ? 0 : 1;
}

// ---- info ----------------------------------------------------------------------------------

int cmd_info(const std::string& format_text) {
  const bs::profiler::Format format = parse_format_flag(format_text);
  json info;
  info["version"] = kVersion;
#ifdef NDEBUG
  info["build"] = "release (NDEBUG)";
#else
  info["build"] = "debug";
#endif
  info["compiler"] = __VERSION__;
  info["cuda_built"] = bs::cuda_built();
  info["cuda_available"] = bs::cuda_available();
  info["cuda_simulated"] = bs::cuda_simulated();
  info["gemm_library"] = bs::cpu::gemm_library();
  info["openmp_threads"] = omp_get_max_threads();
  // The path table (ops/common/paths.h): what the Python tools and benchmarks read.
  info["paths"] = json::array();
  for (const bs::ops::PathInfo& row : bs::ops::path_table()) {
    info["paths"].push_back({{"op", bs::ops::path_op_name(row.op)},
                             {"name", row.name},
                             {"kernels", row.kernels},
                             {"kernels_without_mask", row.kernels_without_mask},
                             {"score_buffers", row.score_buffers},
                             {"plain_mlp", row.plain_mlp},
                             {"gated_mlp", row.gated_mlp},
                             {"summary", row.summary}});
  }
#ifdef BLOCKSCOPE_WITH_NVTX
  info["nvtx"] = true;
#else
  info["nvtx"] = false;
#endif
  std::vector<bs::Device> devices{bs::Device::cpu()};
  if (bs::cuda_available())
    for (int i = 0; i < bs::cuda_device_count(); ++i) devices.push_back(bs::Device::cuda(i));
  for (const bs::Device& device : devices) {
    bs::Context ctx(device);
    json entry;
    entry["device"] = device.str();
    entry["backend"] = ctx.backend().name();
    entry["memory_available_bytes"] = ctx.backend().memory_available();
    for (bs::DType dtype : {bs::DType::f32, bs::DType::bf16}) {
      const bs::profiler::Peaks peaks = bs::profiler::device_peaks(ctx, dtype);
      entry["peaks"][bs::dtype_name(dtype)] = {{"tflops", peaks.tflops}, {"gbps", peaks.gbps}};
    }
    info["devices"].push_back(entry);
  }
  if (format == bs::profiler::Format::json) {
    std::cout << info.dump(2) << "\n";
    return 0;
  }
  if (format == bs::profiler::Format::csv) {
    std::cout << "device,backend,memory_available_bytes,f32_tflops,f32_gbps,bf16_tflops,bf16_gbps\n";
    for (const json& d : info["devices"]) {
      std::cout << d["device"].get<std::string>() << ",\"" << d["backend"].get<std::string>() << "\","
                << d["memory_available_bytes"] << "," << d["peaks"]["f32"]["tflops"] << ","
                << d["peaks"]["f32"]["gbps"] << "," << d["peaks"]["bf16"]["tflops"] << ","
                << d["peaks"]["bf16"]["gbps"] << "\n";
    }
    return 0;
  }
  std::cout << "blockscope " << kVersion << " (" << info["build"].get<std::string>() << ", " << __VERSION__ << ")\n";
  std::cout << "CUDA backend: " << (bs::cuda_built() ? "built" : "not built");
  if (bs::cuda_simulated()) {
    std::cout << ", on the SIMULATED GPU (runtime/sim: kernels run as CPU fibers; times are not GPU times)";
  } else if (bs::cuda_built()) {
    std::cout << (bs::cuda_available() ? ", GPU available" : ", no GPU present");
  }
  std::cout << "\n";
  std::cout << "CPU GEMM: " << bs::cpu::gemm_library() << ", OpenMP threads: " << omp_get_max_threads()
            << ", NVTX: " << (info["nvtx"].get<bool>() ? "on" : "off") << "\n\n";
  for (const json& d : info["devices"]) {
    std::printf("%-8s %s\n", d["device"].get<std::string>().c_str(), d["backend"].get<std::string>().c_str());
    std::printf("         memory available %s\n",
                bs::format_bytes(d["memory_available_bytes"].get<double>()).c_str());
    for (const char* dtype : {"f32", "bf16"}) {
      std::printf("         peak %-4s %8.2f TFLOP/s %8.1f GB/s\n", dtype, d["peaks"][dtype]["tflops"].get<double>(),
                  d["peaks"][dtype]["gbps"].get<double>());
    }
  }
  return 0;
}

// ---- command line --------------------------------------------------------------------------

void add_common(CLI::App* app, CommonOptions& options, bool with_dump, bool with_trace) {
  app->add_option("config", options.config_path, "Workload YAML (default: the config compiled into the binary)");
  app->add_option("--device", options.device, "auto | cpu | cuda | cuda:N (overrides the config's device)");
  app->add_option("--dtype", options.dtype, "f32 | f16 | bf16 (overrides the config's dtype)");
  app->add_option("--set", options.sets, "Override a config key, validated like the file: --set model.d_model=256 "
                                         "(repeatable)")
      ->allow_extra_args(false);
  app->add_option("--format", options.format, "Output format: table | csv | json");
  if (with_dump) {
    app->add_option("--dump", options.dump,
                    "Write input, output and every weight (Hugging Face names) to a .safetensors file");
  }
  if (with_trace) {
    app->add_option("--trace", options.trace, "Write the base variant's Chrome trace JSON (variants: FILE.<variant>.json)");
    app->add_option("--save", options.save, "Save each profile as JSON for `blockscope diff` (variants: FILE.<variant>.json)");
    app->add_flag("--cold", options.cold_step, "Also keep the cold first step in the profile");
  }
  app->add_flag("--sync-each-op", options.sync_each_op,
                "Debug: synchronise after every op, so an asynchronous device failure names the op");
}

int run_cli(int argc, char** argv) {
  CLI::App app{"blockscope: run, profile and check transformer workloads described in YAML"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  blockscope profile                                  # the default tiny GPT-2 block\n"
      "  blockscope profile configs/series/04_attention.yaml --set input.seq_len=256\n"
      "  blockscope run configs/blocks/llama-3-8b.yaml --set model.d_model=512 --set model.n_heads=8 \\\n"
      "      --set model.n_kv_heads=2 --set model.d_ff=1024 --set input.seq_len=64\n"
      "  blockscope check configs/blocks/tiny-llama.yaml\n"
      "  blockscope diff before.json after.json\n"
      "Exit codes: 0 ok, 1 check failed the accuracy rule, 2 bad usage or input, 3 runtime failure.");

  CommonOptions options;
  std::string diff_before, diff_after;

  CLI::App* run = app.add_subcommand("run", "Run the workload and print a timing summary (median/min per forward)");
  add_common(run, options, true, false);
  run->add_option("--trace", options.trace,
                  "After timing, profile the base variant (profile.schedule) and write its Chrome trace JSON");
  run->footer(
      "Warm-up forwards first (run.warmup), then run.iters timed forwards per variant (base and compare:).\n"
      "Examples:\n"
      "  blockscope run\n"
      "  blockscope run configs/series/02_linear.yaml --device cpu --format csv\n"
      "  blockscope run configs/blocks/tiny-gpt2.yaml --dump block.safetensors");

  CLI::App* profile = app.add_subcommand("profile", "Profile each variant: op table, kernel table, diffs to the base");
  add_common(profile, options, true, true);
  profile->footer(
      "Schedule from profile.schedule (wait, warmup, active), like torch.profiler.\n"
      "Examples:\n"
      "  blockscope profile\n"
      "  blockscope profile configs/series/04_attention.yaml --set input.seq_len=256 --trace attn.json\n"
      "  blockscope profile configs/series/03_mlp_geglu.yaml --save mlp.json --format csv");

  CLI::App* check = app.add_subcommand("check", "Compare every device and path with the float64 reference");
  add_common(check, options, true, false);
  check->footer(
      "Rule: the all-naive paths' max relative error is under a sanity bound for the dtype, and every\n"
      "other path mix is within 2x the naive error plus a floor of a few units of roundoff.\n"
      "Exit code 1 when any path breaks it.\n"
      "Examples:\n"
      "  blockscope check\n"
      "  blockscope check configs/blocks/tiny-llama.yaml --dtype bf16");

  CLI::App* diff = app.add_subcommand("diff", "What changed between two saved profiles (blockscope profile --save)");
  diff->add_option("before", diff_before, "Profile JSON (the baseline)")->required();
  diff->add_option("after", diff_after, "Profile JSON (the change)")->required();
  diff->add_option("--format", options.format, "Output format: table | csv | json");
  diff->footer("Example:\n  blockscope profile a.yaml --save a.json && blockscope profile b.yaml --save b.json\n"
               "  blockscope diff a.json b.json");

  CLI::App* info = app.add_subcommand("info", "Build, CUDA, devices, peaks, GEMM library");
  info->add_option("--format", options.format, "Output format: table | csv | json");
  info->footer("Example:\n  blockscope info --format json");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;  // --help / --version print and succeed; any usage error is 2
  }

  g_sync_each_op = options.sync_each_op;
  if (run->parsed()) return cmd_run(options);
  if (profile->parsed()) return cmd_profile(options);
  if (check->parsed()) return cmd_check(options);
  if (diff->parsed()) return cmd_diff(diff_before, diff_after, options.format);
  if (info->parsed()) return cmd_info(options.format);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_cli(argc, argv);
  } catch (const bs::Error& error) {
    g_outputs.remove_all();
    if (error.kind() == bs::ErrorKind::invalid_input) {
      std::cerr << "blockscope: error: " << error.message() << "\n";
      return 2;
    }
    std::cerr << "blockscope: runtime failure" << (g_activity.empty() ? "" : " while " + g_activity) << ": "
              << error.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {
    g_outputs.remove_all();
    std::cerr << "blockscope: runtime failure" << (g_activity.empty() ? "" : " while " + g_activity)
              << ": out of host memory\n";
    return 3;
  } catch (const std::exception& error) {
    g_outputs.remove_all();
    std::cerr << "blockscope: runtime failure" << (g_activity.empty() ? "" : " while " + g_activity) << ": "
              << error.what() << "\n";
    return 3;
  }
}
