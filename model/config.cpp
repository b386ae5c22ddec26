// The config's names and small helpers; reading a config is model/config_parser.cpp.
#include "model/config.h"

#include <algorithm>
#include <vector>

#include "blockscope_default_config.h"  // generated from configs/default.yaml (CMakeLists.txt)
#include "runtime/context.h"
#include "runtime/error.h"

namespace blockscope {

namespace {

const std::vector<WorkloadTraits>& traits_table() {
  using S = WorkloadSizes;
  using K = WorkloadKind;
  static const std::vector<WorkloadTraits> table = {
      {K::block, "block", S::model_and_input, true, ops::path_ops()},
      {K::stack, "stack", S::model_and_input, true, ops::path_ops()},
      {K::matmul_add, "matmul_add", S::gemm_shape, false, {ops::PathOp::linear}},
      {K::linear, "linear", S::gemm_shape, false, {ops::PathOp::linear}},
      {K::mlp, "mlp", S::model_and_input, false, {ops::PathOp::mlp}},
      {K::attention, "attention", S::model_and_input, false, {ops::PathOp::attention}},
      {K::softmax, "softmax", S::rows_shape, false, {}},
      {K::decode, "decode", S::decode, true, ops::path_ops()},
  };
  return table;
}

}  // namespace

int64_t DecodeConfig::longest_prompt() const {
  int64_t longest = 0;
  for (int64_t p : prompt_lens) longest = std::max(longest, p);
  return longest;
}

int64_t DecodeConfig::attended(int64_t t) const {
  int64_t total = 0;
  for (int64_t p : prompt_lens) total += p + t + 1;
  return total;
}

bool DecodeConfig::ragged() const {
  for (int64_t p : prompt_lens)
    if (p != prompt_lens.front()) return true;
  return false;
}

const WorkloadTraits& workload_traits(WorkloadKind kind) {
  for (const WorkloadTraits& row : traits_table())
    if (row.kind == kind) return row;
  throw Error(ErrorKind::runtime, "workload_traits: a workload kind without a row");
}

const char* workload_kind_name(WorkloadKind kind) { return workload_traits(kind).name; }

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> all = [] {
    std::vector<WorkloadKind> kinds;
    for (const WorkloadTraits& row : traits_table()) kinds.push_back(row.kind);
    return kinds;
  }();
  return all;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (WorkloadKind kind : workload_kinds()) names.push_back(workload_kind_name(kind));
  return names;
}

bool parse_workload_kind(const std::string& text, WorkloadKind* out) {
  for (WorkloadKind kind : workload_kinds()) {
    if (text == workload_kind_name(kind)) {
      *out = kind;
      return true;
    }
  }
  return false;
}

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::gpt2: return "gpt2";
    case ModelFamily::llama: return "llama";
    case ModelFamily::custom: return "custom";
  }
  return "?";
}

const char* fp8_recipe_name(Fp8Recipe recipe) { return recipe == Fp8Recipe::current ? "current" : "delayed"; }

const char* norm_name(NormKind norm) { return norm == NormKind::layernorm ? "layernorm" : "rmsnorm"; }

const char* weight_init_name(WeightInit init) {
  switch (init) {
    case WeightInit::random: return "random";
    case WeightInit::perturbed: return "perturbed";
    case WeightInit::scaled: return "scaled";
    case WeightInit::file: return "file";
  }
  return "?";
}

bool is_block_workload(WorkloadKind kind) { return workload_traits(kind).whole_block; }

int64_t layers_run(const WorkloadConfig& config) {
  if (!is_block_workload(config.kind)) return 0;
  return config.kind == WorkloadKind::block ? 1 : config.model.n_layers;
}

const char* PathConfig::name(ops::PathOp op) const {
  switch (op) {
    case ops::PathOp::attention: return ops::path_name(attention);
    case ops::PathOp::linear: return ops::path_name(linear);
    case ops::PathOp::mlp: return ops::path_name(mlp);
  }
  return "?";
}

bool PathConfig::set(ops::PathOp op, const std::string& name) {
  switch (op) {
    case ops::PathOp::attention: return ops::parse_path(name, &attention);
    case ops::PathOp::linear: return ops::parse_path(name, &linear);
    case ops::PathOp::mlp: return ops::parse_path(name, &mlp);
  }
  return false;
}

std::string paths_str(const PathConfig& paths, const std::vector<ops::PathOp>& ops) {
  std::string text;
  for (ops::PathOp op : ops) text += (text.empty() ? "" : ",") + std::string(ops::path_op_name(op)) + "=" + paths.name(op);
  return text;
}

std::string paths_str(const PathConfig& paths) { return paths_str(paths, ops::path_ops()); }
std::string paths_str(const PathConfig& paths, WorkloadKind kind) {
  const std::string text = paths_str(paths, path_ops_for(kind));
  return text.empty() ? workload_kind_name(kind) : text;  // softmax: one path, named by the workload
}

std::vector<ops::PathOp> path_ops_for(WorkloadKind kind) { return workload_traits(kind).path_ops; }

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

Device resolve_device(const std::string& text) {
  if (text == "auto") return cuda_available() ? Device::cuda(0) : Device::cpu();
  Device device;
  if (!parse_device(text, &device)) {
    throw InputError("unknown device '" + text + "' (expected auto, cpu, cuda or cuda:N)");
  }
  return device;
}

const char* default_config_yaml() { return kBlockscopeDefaultConfigYaml; }

}  // namespace blockscope
