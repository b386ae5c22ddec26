// Whole blocks and stacks, registered at run time from YAML configs (model/config.h,
// model/workload.h): any config is a benchmark. One benchmark per config, path mix (the
// config's `paths` and each `compare:` variant) and device.
//
//   block_bench [CONFIG.yaml ...] [--set=key.sub=value ...] [--smoke] [benchmark flags]
//
// Without files: configs/blocks/*.yaml (with --smoke only the tiny-*.yaml ones). On CPU,
// configs that are not tiny run with input.batch=1, input.seq_len=128 unless --set says
// otherwise, so a laptop finishes; on CUDA they run as written.
//
// Key (label): `<kind>/<paths>/<dtype>/<config name>,B=<batch>,S=<seq_len>`. FLOPs and bytes
// are the sums the block's ops record (no single formula covers a block).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/support/bench_support.h"
#include "model/config.h"
#include "runtime/error.h"
#include "model/workload.h"
#include "runtime/cpu/gemm.h"

#ifndef BLOCKSCOPE_SOURCE_DIR
#define BLOCKSCOPE_SOURCE_DIR "."
#endif

namespace blockscope::bench {
namespace {

std::vector<std::string> default_configs(bool smoke) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const fs::path dir = fs::path(BLOCKSCOPE_SOURCE_DIR) / "configs" / "blocks";
  BS_CHECK_INPUT(fs::is_directory(dir), "block_bench: no config files given and ", dir.string(), " does not exist");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml") continue;
    if (smoke && name.rfind("tiny-", 0) != 0) continue;
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool is_tiny(const std::string& file) { return std::filesystem::path(file).filename().string().rfind("tiny-", 0) == 0; }

// Devices a config may run on: its explicit device, or every benchmark device for "auto".
std::vector<Device> config_devices(const WorkloadConfig& config) {
  std::vector<Device> out;
  for (const Device& device : devices()) {
    if (config.device == "auto") {
      out.push_back(device);
    } else {
      Device wanted;
      if (parse_device(config.device, &wanted) && wanted.type == device.type) out.push_back(device);
    }
  }
  return out;
}

void register_config(const std::string& file, Device device) {
  std::vector<std::string> sets;
  if (device.is_cpu() && !is_tiny(file) && !options().smoke) sets = {"input.batch=1", "input.seq_len=128"};
  for (const std::string& set : options().sets) sets.push_back(set);  // the user's overrides win
  const WorkloadConfig config = load_config_file(file, sets);

  std::vector<std::pair<std::string, PathConfig>> variants = {{paths_str(config.paths), config.paths}};
  for (const Variant& variant : config.compare) variants.emplace_back(paths_str(variant.paths), variant.paths);
  std::vector<PathConfig> all_paths;
  for (const auto& v : variants) all_paths.push_back(v.second);

  const std::string name = config.name.empty() ? std::filesystem::path(file).stem().string() : config.name;
  const std::string shape = name + ",B=" + std::to_string(config.input.batch) + ",S=" + std::to_string(config.input.seq_len);
  for (const auto& [label, paths] : variants) {
    Case c;
    c.key = std::string(workload_kind_name(config.kind)) + "/" + label + "/" + dtype_name(config.dtype) + "/" + shape;
    c.device = device;
    c.dtype = config.dtype;
    c.warmup = std::max(1, config.run.warmup);
    register_case(c, [config, all_paths, paths = paths](Context& ctx) -> std::function<void()> {
      cpu::set_gemm_choice(config.cpu.gemm);  // process-wide, like the CLI's (--set cpu.gemm=...)
      auto workload = std::make_shared<Workload>(ctx, config, all_paths);
      workload->set_paths(paths);
      return [workload]() { workload->forward(); };
    });
  }
}

void register_all() {
  std::vector<std::string> files = options().positional;
  if (files.empty()) files = default_configs(options().smoke);
  BS_CHECK_INPUT(!files.empty(), "block_bench: no config files to benchmark");
  for (const std::string& file : files) {
    const WorkloadConfig probe = load_config_file(file, options().sets);  // named errors before any run
    for (const Device& device : config_devices(probe)) register_config(file, device);
  }
}

}  // namespace
}  // namespace blockscope::bench

BLOCKSCOPE_BENCH_MAIN(blockscope::bench::register_all)
