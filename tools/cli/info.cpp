// blockscope info: the build, the devices and their peaks, and the path table.
#include "tools/cli/commands.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fmt/format.h>

#include <iostream>
#include <set>
#include <sstream>

#include "ops/catalogue/catalogue.h"
#include "ops/common/paths.h"
#include "profiler/gpu_model.h"
#include "profiler/gpu_specs.h"
#include "profiler/render.h"
#include "model/workload.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "tools/cli/cost_prediction.h"

namespace blockscope::cli {

namespace {

// The build: version, compiler, backends, engines, GEMM libraries, threads, the path table,
// the op catalogue, the dtypes.
nlohmann::json build_info() {
  nlohmann::json info;
  info["version"] = kVersion;
#ifdef NDEBUG
  info["build"] = "release (NDEBUG)";
#else
  info["build"] = "debug";
#endif
  info["compiler"] = __VERSION__;
  info["cuda_built"] = cuda_built();
  info["cuda_available"] = cuda_available();
  info["cuda_simulated"] = cuda_simulated();
  // Tensor parallelism's engines: MPI between processes (CPU ranks), NCCL between GPUs.
#ifdef BLOCKSCOPE_WITH_MPI
  info["mpi_built"] = true;
#else
  info["mpi_built"] = false;
#endif
#ifdef BLOCKSCOPE_WITH_NCCL
  info["nccl_built"] = true;
#else
  info["nccl_built"] = false;
#endif
  info["gemm_library"] = cpu::gemm_library();  // the default
  info["gemm_libraries"] = nlohmann::json::array();
  for (cpu::GemmLibrary library : cpu::linked_gemm_libraries()) info["gemm_libraries"].push_back(cpu::gemm_library_name(library));
  info["openmp_threads"] = omp_get_max_threads();
  const cpu::DefaultThreads default_threads = cpu::default_thread_count();
  info["default_threads"] = {
      {"count", default_threads.count}, {"cores", default_threads.cores}, {"reason", default_threads.reason},
      {"note", default_threads.note}};
  // The path table (ops/common/paths.h): what the Python tools and benchmarks read.
  info["paths"] = nlohmann::json::array();
  for (const ops::PathInfo& row : ops::path_table()) {
    info["paths"].push_back({{"op", ops::path_op_name(row.op)},
                             {"name", row.name},
                             {"kernels", ops::path_kernels(row, true, DeviceType::cpu).size()},
                             {"kernels_without_mask", ops::path_kernels(row, false, DeviceType::cpu).size()},
                             {"score_buffers", row.score_buffers},
                             {"plain_mlp", row.plain_mlp},
                             {"gated_mlp", row.gated_mlp},
                             {"summary", row.summary}});
  }
  // The op catalogue (ops/catalogue/catalogue.h): each op's recorded name, family, paths and the
  // named sizes and flags its FLOP and byte formulas take.
  info["ops"] = nlohmann::json::array();
  for (const ops::OpSpec& spec : ops::op_catalogue()) {
    info["ops"].push_back({{"name", spec.name},
                           {"family", profiler::family_name(spec.family)},
                           {"path_op", spec.path_op ? ops::path_op_name(*spec.path_op) : ""},
                           {"paths", ops::op_paths(spec)},
                           {"sizes", spec.sizes},
                           {"flags", spec.flags},
                           {"takes_activation", spec.takes_activation},
                           {"summary", spec.summary}});
  }
  info["dtypes"] = nlohmann::json::array();
  for (DType dtype : kDTypes) {
    // compute: ops compute in it; FP8 is a storage type (runtime/dtype.h), taken by the precision ops.
    info["dtypes"].push_back({{"name", dtype_name(dtype)}, {"bytes", dtype_size(dtype)}, {"epsilon", dtype_epsilon(dtype)},
                              {"compute", !is_fp8(dtype)}});
  }
#ifdef BLOCKSCOPE_WITH_NVTX
  info["nvtx"] = true;
#else
  info["nvtx"] = false;
#endif
  return info;
}

// Each device's backend, memory and peaks (--remeasure-peaks measures them again): a row of
// `table` and an entry of info["devices"]; a 16-bit dtype no faster than f32 said in `dtype_notes`.
profiler::Rows device_table(const Session& session, profiler::Format format, nlohmann::json& info,
                            std::string& dtype_notes) {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_available())
    for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device::cuda(i));
  profiler::Rows table;
  table.columns = {{"device", "device", true, ""},
                   {"backend", "backend", true, ""},
                   {"memory_available_bytes", "memory available", false, ""},
                   {"f32_tflops", "f32 TFLOP/s", false, "%.2f"},
                   {"f32_gbps", "f32 GB/s", false, "%.1f"},
                   {"bf16_tflops", "bf16 TFLOP/s", false, "%.2f"},
                   {"bf16_gbps", "bf16 GB/s", false, "%.1f"},
                   {"peak_source", "peaks from", true, ""}};
  // Too wide for COLUMNS (a simulated GPU's long name): the bandwidths go first, then bf16.
  table.drop_order = {"bf16_gbps", "f32_gbps", "bf16_tflops", "memory_available_bytes"};
  for (const Device& device : devices) {
    Context ctx(device);
    nlohmann::json entry;
    entry["device"] = device.str();
    entry["backend"] = ctx.backend().name();
    entry["memory_available_bytes"] = ctx.backend().memory_available();
    if (session.options.remeasure_peaks) ctx.backend().remeasure_peaks();  // and rewrite the cache
    std::string source;
    entry["dtype_notes"] = nlohmann::json::array();
    for (DType dtype : {DType::f32, DType::bf16}) {
      const BackendInfo peaks = ctx.backend().info(dtype);
      entry["peaks"][dtype_name(dtype)] = {{"tflops", peaks.peak_tflops}, {"gbps", peaks.peak_gbps}};
      source = peaks.peak_source;
      if (!peaks.dtype_note.empty()) {
        entry["dtype_notes"].push_back(peaks.dtype_note);
        dtype_notes += "Note on " + device.str() + ": " + peaks.dtype_note + "\n";
      }
    }
    entry["peak_source"] = source;
    table.rows.push_back({device.str(), ctx.backend().name(),
                          format == profiler::Format::table
                              ? nlohmann::json(profiler::format_bytes(static_cast<double>(ctx.backend().memory_available())))
                              : nlohmann::json(ctx.backend().memory_available()),
                          entry["peaks"]["f32"]["tflops"], entry["peaks"]["f32"]["gbps"], entry["peaks"]["bf16"]["tflops"],
                          entry["peaks"]["bf16"]["gbps"], source});
    info["devices"].push_back(entry);
  }
  return table;
}

// The CPU's GEMM plans cached on disk (runtime/cpu/gemm.h): which weights run packed; also in
// info["gemm_plans"].
profiler::Rows gemm_plan_table(const cpu::CachedPlans& plans, nlohmann::json& info) {
  profiler::Rows plan_table;
  plan_table.columns = {{"shape", "GEMM (A x B -> C, epilogue)", true, ""},
                        {"choice", "runs as", true, ""},
                        {"timings", "timed (us, best of 3)", true, ""},
                        {"kernel", "kernel", true, ""}};
  plan_table.drop_order = {"kernel", "timings"};
  info["gemm_plans"] = {{"path", plans.path},
                        {"machine", plans.machine},
                        {"damaged", plans.damaged},
                        {"other_machines", plans.other_machines},
                        {"plans", nlohmann::json::array()}};
  for (const cpu::CachedPlan& row : plans.plans) {
    info["gemm_plans"]["plans"].push_back({{"shape", row.shape},
                                           {"choice", row.plan.choice},
                                           {"timings_us", row.plan.timings_us},
                                           {"cut_off", row.plan.cut_off},
                                           {"kernel", row.kernel}});
    std::string timings;  // "onednn.plain 812.4, onednn.packed 640.9, builtin.sgemm cut off"
    for (const auto& [name, us] : row.plan.timings_us) timings += (timings.empty() ? "" : ", ") + fmt::format("{} {:.1f}", name, us);
    for (const std::string& name : row.plan.cut_off) timings += (timings.empty() ? "" : ", ") + name + " cut off";
    plan_table.rows.push_back({row.shape, row.plan.choice, timings, row.kernel});
  }
  return plan_table;
}

// Text fitted to COLUMNS: the lines wrapped, the peaks' source (a sentence) under the table.
void print_info_text(const Session& session, const nlohmann::json& info, profiler::Rows& table,
                     const std::string& dtype_notes, const cpu::CachedPlans& plans, const profiler::Rows& plan_table) {
  const profiler::Format format = profiler::Format::table;
  const nlohmann::json& default_threads = info["default_threads"];
  const size_t width = profiler::terminal_width();
  std::ostringstream head;
  head << "blockscope version " << kVersion << " (" << info["build"].get<std::string>() << ", " << __VERSION__ << ")\n";
  head << "CUDA backend: " << (cuda_built() ? "built" : "not built");
  if (cuda_simulated()) {
    head << ", on the SIMULATED GPU (sim/: kernels run as CPU fibers; times are not GPU times)";
  } else if (cuda_built()) {
    head << (cuda_available() ? ", GPU available" : ", no GPU present");
  }
  head << "\nTensor parallelism: MPI " << (info["mpi_built"].get<bool>() ? "built" : "not built") << " (CPU ranks, mpirun), NCCL "
       << (info["nccl_built"].get<bool>() ? "built" : "not built") << " (GPUs of one process, or of mpirun's ranks)\n";
  std::string libraries;
  for (cpu::GemmLibrary library : cpu::linked_gemm_libraries())
    libraries += std::string(libraries.empty() ? "" : ", ") + cpu::gemm_library_name(library);
  head << "CPU GEMM libraries: " << libraries << " (cpu.gemm: auto plans loaded weights' GEMMs, a name forces one)"
       << ", OpenMP threads: " << omp_get_max_threads() << " (default "
       << default_threads["count"].get<int>() << ": " << default_threads["reason"].get<std::string>() << "; --threads or OMP_NUM_THREADS to change)"
       << ", NVTX: " << (info["nvtx"].get<bool>() ? "on" : "off") << "\n";
  std::string sources;
  for (profiler::Row& row : table.rows) {
    sources += "Peaks of " + row[0].get<std::string>() + ": " + row.back().get<std::string>() + "\n";
    row.pop_back();
  }
  table.columns.pop_back();
  profiler::TextLayout layout;
  layout.max_width = width;
  layout.show_all = "a wider COLUMNS shows them";
  std::cout << profiler::wrap_text(head.str(), width) << "\n" << profiler::render(table, format, layout)
            << profiler::wrap_text(sources + dtype_notes, width);
  // The plans: a line saying where they are kept and what else is there, then this machine's.
  std::ostringstream plan_head;
  plan_head << "\nCPU GEMM plans (how loaded weights' GEMMs run, timed once per machine and shape): ";
  if (plans.path.empty()) {
    plan_head << "not cached (BLOCKSCOPE_PLAN_CACHE=off)\n";
  } else {
    plan_head << plans.plans.size() << " for this machine in " << plans.path;
    if (plans.damaged > 0) plan_head << ", " << plans.damaged << " damaged (timed again when used)";
    if (plans.other_machines > 0)
      plan_head << "; " << plans.other_machines << " other machine key(s) ignored (another CPU, library or thread count)";
    plan_head << "\nThis machine: " << plans.machine << "\n";
    if (!session.options.list_plans && !plans.plans.empty()) plan_head << "(info --plans lists them)\n";
  }
  std::cout << profiler::wrap_text(plan_head.str(), width);
  if (session.options.list_plans && !plan_table.rows.empty()) std::cout << profiler::render(plan_table, format, layout);
}

}  // namespace

int info_command(Session& session) {
  const profiler::Format format = session.format();
  nlohmann::json info = build_info();
  std::string dtype_notes;
  profiler::Rows table = device_table(session, format, info, dtype_notes);
  const cpu::CachedPlans plans = cpu::cached_matmul_plans();
  const profiler::Rows plan_table = gemm_plan_table(plans, info);
  if (format == profiler::Format::json) {
    std::cout << info.dump(2) << "\n";
  } else if (format == profiler::Format::csv) {
    std::cout << profiler::render(table, format);
  } else {
    print_info_text(session, info, table, dtype_notes, plans, plan_table);
  }
  return 0;
}

namespace {

std::string join(const std::vector<std::string>& names, const char* separator) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

// "attention/flash:B=1,H=12,causal=1,dtype=bf16" -> the op's entry and its call; every name
// must be one the op takes, every size given, the path one of the op's.
ops::OpCall parse_cost_spec(const std::string& spec, const ops::OpSpec** op) {
  const auto fail = [&](const std::string& why) {
    throw InputError("--cost '" + spec + "': " + why + " (form: OP[/PATH]:NAME=VALUE,...)");
  };
  const size_t colon = spec.find(':');
  const std::string head = spec.substr(0, colon), body = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const size_t slash = head.find('/');
  const std::string name = head.substr(0, slash);
  try {
    *op = &ops::op_spec(name);
  } catch (const Error& error) {
    fail(error.what());
  }
  const ops::OpSpec& entry = **op;
  ops::OpCall call;
  if (slash != std::string::npos) call.path = head.substr(slash + 1);
  if (const std::vector<std::string> paths = ops::op_paths(entry); !paths.empty()) {
    if (std::find(paths.begin(), paths.end(), call.path) == paths.end())
      fail("op '" + name + "' needs a path, one of " + join(paths, ", "));
  } else if (!call.path.empty() && !entry.path_is_kernel_label) {
    fail("op '" + name + "' has no paths");
  }
  std::stringstream items(body);
  std::string item;
  std::set<std::string> given;
  while (std::getline(items, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) fail("'" + item + "' is not NAME=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!given.insert(key).second) fail("'" + key + "' is given twice (B=1,B=2 has no one meaning)");
    if (key == "dtype") {
      if (!parse_dtype(value, &call.dtype)) fail("unknown dtype '" + value + "'");
    } else if (key == "activation" && entry.takes_activation) {
      ops::Activation act{};
      if (!ops::parse_activation(value, &act)) fail("unknown activation '" + value + "'");
      call.activation = value;
    } else if (std::find(entry.flags.begin(), entry.flags.end(), key) != entry.flags.end()) {
      if (value != "0" && value != "1") fail("flag '" + key + "' must be 0 or 1, got '" + value + "'");
      call.flags[key] = value == "1";
    } else if (std::find(entry.sizes.begin(), entry.sizes.end(), key) != entry.sizes.end()) {
      int64_t size = -1;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), size);
      if (error == std::errc::result_out_of_range && end == value.data() + value.size() && value[0] != '-')
        fail("size '" + key + "' = " + value + " is over " + std::to_string(ops::kMaxCallSize) +
             " (2^31 - 1, what an int holds)");
      if (error != std::errc() || end != value.data() + value.size() || size < 0)
        fail("size '" + key + "' must be a non-negative integer, got '" + value + "'");
      call.sizes[key] = size;
    } else {
      std::vector<std::string> known = entry.sizes;
      known.insert(known.end(), entry.flags.begin(), entry.flags.end());
      known.push_back("dtype");
      if (entry.takes_activation) known.push_back("activation");
      fail("op '" + name + "' takes no '" + key + "' (it takes " + join(known, ", ") + ")");
    }
  }
  for (const std::string& size : entry.sizes)
    if (!call.sizes.count(size)) fail("size '" + size + "' is missing");
  if (entry.takes_activation && call.activation.empty()) fail("activation= is missing");
  // Sizes no call could have (2^32, products past 2^50 elements, Hkv not dividing H, ranks < 1).
  try {
    ops::check_call(entry, call);
  } catch (const Error& error) {
    fail(error.what());
  }
  return call;
}

}  // namespace

int info_costs_command(Session& session, const std::vector<std::string>& specs, const std::string& predict_gpu) {
  if (session.format() != profiler::Format::json && session.options.format != "table")
    throw InputError("info --cost writes JSON only; drop --format or give --format json");
  // --predict: the GPU first, so a wrong name fails before any spec is read.
  const profiler::GpuSpec* gpu = predict_gpu.empty() ? nullptr : &profiler::gpu_spec(predict_gpu);
  nlohmann::json costs = nlohmann::json::array();
  for (const std::string& spec : specs) {
    const ops::OpSpec* op = nullptr;
    const ops::OpCall call = parse_cost_spec(spec, &op);
    const ops::OpCost cost = op->cost(call);
    costs.push_back({{"spec", spec},
                     {"op", ops::recorded_name(*op, call)},
                     {"path", ops::recorded_path(*op, call)},
                     {"flops", cost.flops},
                     {"bytes", cost.bytes},
                     // A call with no output elements launches none (its kernels: []).
                     {"kernels",
                      {{"cpu", ops::launched_kernels(*op, call, DeviceType::cpu)},
                       {"cuda", ops::launched_kernels(*op, call, DeviceType::cuda)}}}});
    if (gpu != nullptr) costs.back().update(predict_op_cost(*gpu, *op, call));
  }
  nlohmann::json out{{"costs", costs}};
  if (gpu != nullptr)
    out["prediction"] = {{"target", gpu->name},
                         {"description", gpu->description},
                         {"model_version", profiler::predict::kModelVersion},
                         {"note", "predicted, not measured (docs/PREDICTION.md)"}};
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace blockscope::cli
