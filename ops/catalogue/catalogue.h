// The op catalogue: every public op described once — the name the profiler records, its
// family, its paths (ops/common/paths.h), the named sizes its formulas take, the kernels one
// call launches on each path, and its FLOPs and bytes. `blockscope info --format json` exports
// it for the Python tools (bench_gate.py, the PyTorch peer), and the op-case harness
// (test/op_cases.cpp, test/op_harness_test.cpp) checks every op against it on every device:
// what a call records must be what its entry says. Adding an op: docs/ADDING_AN_OP.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/common/paths.h"
#include "profiler/nvtx.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace blockscope::ops {

// One call as the catalogue's formulas see it: named sizes ("R" rows, "N" row length; an op's
// entry lists the names it reads), flags ("causal", "bias"), the activation and the path by
// their config names.
struct OpCall {
  std::string path;        // "" for an op with one path
  std::string activation;  // "gelu", "silu", ... where the op takes one
  std::map<std::string, int64_t> sizes;
  std::map<std::string, bool> flags;
  DType dtype = DType::f32;

  // The size by name (an invalid_input error naming it when the call lacks it); a flag the
  // call does not set is false.
  int64_t size(const std::string& name) const;
  bool flag(const std::string& name) const;
};

struct OpCost {
  double flops = 0;
  double bytes = 0;  // the least traffic: every input read once, every output written once
};

struct OpSpec {
  const char* name;               // the catalogue's key and, unless event_name says otherwise, the op event's name
  profiler::Family family;
  std::optional<PathOp> path_op;  // the ops of the path table
  std::vector<std::string> sizes; // the sizes an OpCall must give, in the order keys spell them
  // The tensors one call reads or writes, each the product of the named sizes, the output first:
  // a call whose output has no elements launches no kernel (launched_kernels), and none may
  // hold more than kMaxCallElements (check_call).
  std::vector<std::vector<std::string>> tensors;
  std::vector<std::string> flags;
  bool takes_activation;
  const char* summary;            // one line: shapes and what it computes
  OpCost (*cost)(const OpCall&);
  // Kernels of one call, in launch order, on `device` (the CPU records its work items under the
  // CUDA kernels' names, so the lists agree but where a device launches more). A call with no
  // output elements launches none (recorded as an op with no work, ops/common/dispatch.h).
  std::vector<std::string> (*kernels)(const OpCall&, DeviceType device);
  // The op event's name and path, when they are not (name, call.path): activation() is
  // recorded under the activation's name, gated_activation with the activation as its path.
  std::string (*event_name)(const OpCall&) = nullptr;
  std::string (*event_path)(const OpCall&) = nullptr;
  // An op without paths whose call.path is instead the label its kernel is recorded under
  // (batched_matmul: "gemm_qk", "gemm_pv"); any text is valid there.
  bool path_is_kernel_label = false;
  // An op outside the path table whose calls still name a path of its own, from a fixed list
  // (decode_attention: the attention paths with a decode form, "naive" and "flash").
  std::vector<std::string> own_paths = {};
};

// The paths a call of `spec` may name: the path table's for its path_op, else its own_paths
// (none for an op with one path).
std::vector<std::string> op_paths(const OpSpec& spec);

// Every public op, by family.
const std::vector<OpSpec>& op_catalogue();
// The entry of `name`; an invalid_input error listing the names when there is none.
const OpSpec& op_spec(const std::string& name);
std::vector<std::string> op_names();

// The largest size check_call takes (what an int holds: the config's limit, model/config_reader.h)
// and the most elements one tensor of a call may have (2^50: more than any device holds, as
// the config's size check).
constexpr int64_t kMaxCallSize = 2147483647;
constexpr double kMaxCallElements = 1125899906842624.0;

// Refuses (invalid_input, naming the size and its value) a call no op could run: a size over
// kMaxCallSize (2^32, say), a tensor over kMaxCallElements (sizes whose product overflows), Hkv
// of 0 or not dividing H, G of 0 or not dividing batch, ranks < 1, a collective's N not a
// multiple of ranks, decode lengths summing to less than one per sequence, more rows written than
// the sources hold. Sizes of 0 are valid: such a call has no work (launched_kernels).
void check_call(const OpSpec& spec, const OpCall& call);

// The output's elements: the product of spec.tensors' first entry.
double output_elements(const OpSpec& spec, const OpCall& call);

// The kernels one call launches on `device`: spec.kernels, or none when its output has no
// elements (the op records a call with no work, ops/common/dispatch.h).
std::vector<std::string> launched_kernels(const OpSpec& spec, const OpCall& call, DeviceType device);

// The kernels one forward of a path-table row launches on `device`, from its op's entry: with a
// bias (linear), tanh-GELU (MLP), and the causal mask when `causal` (attention); the MLP rows
// as the plain MLP where they apply to one, else the gated one. What `info --format json` lists
// per path (the path table itself states no kernels).
std::vector<std::string> path_kernels(const PathInfo& row, bool causal, DeviceType device);

// The op event one call of `spec` records: (name, path).
std::string recorded_name(const OpSpec& spec, const OpCall& call);
std::string recorded_path(const OpSpec& spec, const OpCall& call);

}  // namespace blockscope::ops
