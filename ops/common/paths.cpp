#include "ops/common/paths.h"

#include <stdexcept>

namespace blockscope::ops {

namespace {

// The rows, ops in PathOp order, each op's paths from naive to fused. The kernels each path
// launches are the op catalogue's (ops/catalogue: path_kernels), not stated here.
std::vector<PathInfo> make_table() {
  auto attention = [](AttentionPath p, const char* name, int buffers, const char* summary) {
    return PathInfo{PathOp::attention, static_cast<int>(p), name, buffers, true, true, summary};
  };
  auto linear = [](LinearPath p, const char* name, const char* summary) {
    return PathInfo{PathOp::linear, static_cast<int>(p), name, 0, true, true, summary};
  };
  auto mlp = [](MlpPath p, const char* name, bool plain, bool gated, const char* summary) {
    return PathInfo{PathOp::mlp, static_cast<int>(p), name, 0, plain, gated, summary};
  };
  return std::vector<PathInfo>{
      attention(AttentionPath::naive, "naive", 2,
                "QK^T GEMM, scale, out-of-place masked_fill (copy + fill), softmax, PV GEMM"),
      attention(AttentionPath::inplace, "inplace", 1, "as naive with in-place masking"),
      attention(AttentionPath::fused_softmax, "fused_softmax", 1,
                "QK^T GEMM with alpha = scale, one scale+mask+softmax kernel, PV GEMM"),
      attention(AttentionPath::flash, "flash", 0, "one kernel: tiled, online softmax, no S x S scores"),
      linear(LinearPath::naive, "naive", "GEMM, then a bias-add kernel"),
      linear(LinearPath::epilogue, "epilogue", "one GEMM with the bias (and GELU) in its epilogue"),
      linear(LinearPath::addmm, "addmm", "bias broadcast-copied into the output, one GEMM with beta = 1"),
      mlp(MlpPath::naive, "naive", true, true, "every GEMM, bias, activation and gate multiply its own kernel"),
      mlp(MlpPath::epilogue, "epilogue", true, false,
          "plain MLP: GELU_BIAS and BIAS epilogues (3 kernels with an activation other than tanh-GELU)"),
      mlp(MlpPath::fused, "fused", false, true,
          "gated MLP: one GEMM on concatenated gate|up weights, one act*mul kernel, down GEMM"),
  };
}

const PathInfo& find(PathOp op, int value) {
  for (const PathInfo& row : path_table())
    if (row.op == op && row.value == value) return row;
  throw std::logic_error("ops/common/paths.cpp: a path missing from path_table()");
}

template <class Path>
bool parse(PathOp op, const std::string& text, Path* out) {
  for (const PathInfo& row : path_table()) {
    if (row.op == op && text == row.name) {
      *out = static_cast<Path>(row.value);
      return true;
    }
  }
  return false;
}

}  // namespace

const std::vector<PathInfo>& path_table() {
  static const std::vector<PathInfo> table = make_table();
  return table;
}

std::vector<PathInfo> paths_of(PathOp op) {
  std::vector<PathInfo> rows;
  for (const PathInfo& row : path_table())
    if (row.op == op) rows.push_back(row);
  return rows;
}

std::vector<std::string> path_names(PathOp op) {
  std::vector<std::string> names;
  for (const PathInfo& row : paths_of(op)) names.push_back(row.name);
  return names;
}

const std::vector<PathOp>& path_ops() {
  static const std::vector<PathOp> ops = {PathOp::attention, PathOp::linear, PathOp::mlp};
  return ops;
}

const char* path_op_name(PathOp op) {
  switch (op) {
    case PathOp::attention: return "attention";
    case PathOp::linear: return "linear";
    case PathOp::mlp: return "mlp";
  }
  return "?";
}

const PathInfo& path_info(LinearPath path) { return find(PathOp::linear, static_cast<int>(path)); }
const PathInfo& path_info(AttentionPath path) { return find(PathOp::attention, static_cast<int>(path)); }
const PathInfo& path_info(MlpPath path) { return find(PathOp::mlp, static_cast<int>(path)); }

const char* path_name(LinearPath path) { return path_info(path).name; }
const char* path_name(AttentionPath path) { return path_info(path).name; }
const char* path_name(MlpPath path) { return path_info(path).name; }

bool parse_path(const std::string& text, LinearPath* out) { return parse(PathOp::linear, text, out); }
bool parse_path(const std::string& text, AttentionPath* out) { return parse(PathOp::attention, text, out); }
bool parse_path(const std::string& text, MlpPath* out) { return parse(PathOp::mlp, text, out); }

}  // namespace blockscope::ops
