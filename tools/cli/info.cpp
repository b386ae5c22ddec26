// blockscope info: the build, the devices and their peaks, and the path table.
#include "tools/cli/commands.h"

#include <omp.h>

#include <cstdio>
#include <iostream>

#include "ops/catalogue/catalogue.h"
#include "ops/common/paths.h"
#include "profiler/render.h"
#include "model/workload.h"
#include "runtime/cpu/gemm.h"

namespace blockscope::cli {

int info_command(Session& session) {
  const profiler::Format format = session.format();
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
  info["gemm_library"] = cpu::gemm_library();
  info["openmp_threads"] = omp_get_max_threads();
  const cpu::DefaultThreads default_threads = cpu::default_thread_count();
  info["default_threads"] = {
      {"count", default_threads.count}, {"cores", default_threads.cores}, {"reason", default_threads.reason}};
  // The path table (ops/common/paths.h): what the Python tools and benchmarks read.
  info["paths"] = nlohmann::json::array();
  for (const ops::PathInfo& row : ops::path_table()) {
    info["paths"].push_back({{"op", ops::path_op_name(row.op)},
                             {"name", row.name},
                             {"kernels", row.kernels},
                             {"kernels_without_mask", row.kernels_without_mask},
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
                           {"sizes", spec.sizes},
                           {"flags", spec.flags},
                           {"takes_activation", spec.takes_activation},
                           {"summary", spec.summary}});
  }
  info["dtypes"] = nlohmann::json::array();
  for (DType dtype : kDTypes) {
    info["dtypes"].push_back({{"name", dtype_name(dtype)}, {"bytes", dtype_size(dtype)}, {"epsilon", dtype_epsilon(dtype)}});
  }
#ifdef BLOCKSCOPE_WITH_NVTX
  info["nvtx"] = true;
#else
  info["nvtx"] = false;
#endif
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
  for (const Device& device : devices) {
    Context ctx(device);
    nlohmann::json entry;
    entry["device"] = device.str();
    entry["backend"] = ctx.backend().name();
    entry["memory_available_bytes"] = ctx.backend().memory_available();
    std::string source;
    for (DType dtype : {DType::f32, DType::bf16}) {
      const BackendInfo peaks = ctx.backend().info(dtype);
      entry["peaks"][dtype_name(dtype)] = {{"tflops", peaks.peak_tflops}, {"gbps", peaks.peak_gbps}};
      source = peaks.peak_source;
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
  if (format == profiler::Format::json) {
    std::cout << info.dump(2) << "\n";
    return 0;
  }
  if (format == profiler::Format::csv) {
    std::cout << profiler::render(table, format);
    return 0;
  }
  std::cout << "blockscope version " << kVersion << " (" << info["build"].get<std::string>() << ", " << __VERSION__
            << ")\n";
  std::cout << "CUDA backend: " << (cuda_built() ? "built" : "not built");
  if (cuda_simulated()) {
    std::cout << ", on the SIMULATED GPU (sim/: kernels run as CPU fibers; times are not GPU times)";
  } else if (cuda_built()) {
    std::cout << (cuda_available() ? ", GPU available" : ", no GPU present");
  }
  std::cout << "\n";
  std::cout << "CPU GEMM: " << cpu::gemm_library() << ", OpenMP threads: " << omp_get_max_threads() << " (default "
            << default_threads.count << ": " << default_threads.reason << "; --threads or OMP_NUM_THREADS to change)"
            << ", NVTX: " << (info["nvtx"].get<bool>() ? "on" : "off") << "\n\n";
  std::cout << profiler::render(table, format);
  return 0;
}

}  // namespace blockscope::cli
