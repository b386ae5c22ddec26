// Implementation paths, from naive to fused, and the one table that describes them: their
// names as configs spell them, kernels per forward, the S x S score buffers they allocate and
// where they apply. The config reader, the CLI's path mixes (`blockscope check`), the
// workload's memory estimate, the benchmarks and `blockscope info --format json` (which the
// Python tools read) all derive from path_table(); a new path is one row here.
#pragma once

#include <string>
#include <vector>

namespace blockscope::ops {

// linear / matmul_add:
//   naive     GEMM, then a separate bias-add kernel
//   epilogue  one GEMM with the bias (and GELU) in the epilogue
//   addmm     bias broadcast-copied into the output, then one GEMM with beta = 1 — what
//             torch.compile makes of matmul + add
enum class LinearPath { naive, epilogue, addmm };

// attention:
//   naive          QK^T GEMM, scale, out-of-place masked_fill (copy + fill), softmax, PV GEMM
//   inplace        as naive with in-place masking
//   fused_softmax  QK^T GEMM with alpha = scale, one scale+mask+softmax kernel, PV GEMM
//   flash          one kernel: tiled, online softmax, no S x S matrix in memory
enum class AttentionPath { naive, inplace, fused_softmax, flash };

// mlp:
//   naive     every GEMM, bias, activation (and gate multiply) its own kernel
//   epilogue  plain MLP: GELU_BIAS / BIAS epilogues
//   fused     gated MLP: one GEMM on concatenated gate|up weights, one act*mul kernel,
//             down GEMM
enum class MlpPath { naive, epilogue, fused };

// The ops that have paths: the keys of a config's `paths:` section.
enum class PathOp { attention, linear, mlp };

struct PathInfo {
  PathOp op;
  int value;          // the op's enum value: static_cast<int>(AttentionPath::flash)
  const char* name;   // as configs spell it
  // Attention: the [B, H, Sq, Sk] buffers a forward allocates (0 for flash).
  int score_buffers;
  // MLP paths: whether they apply to a plain (fc, act, proj) and to a gated MLP.
  bool plain_mlp;
  bool gated_mlp;
  const char* summary;
};

// Every path of every op, ops in PathOp order, paths from naive to fused.
const std::vector<PathInfo>& path_table();
// The rows of one op.
std::vector<PathInfo> paths_of(PathOp op);
// The names of one op's paths, for "expected one of ..." messages.
std::vector<std::string> path_names(PathOp op);
const char* path_op_name(PathOp op);
const std::vector<PathOp>& path_ops();

// Every path of one op as its enum, in table order: all_paths<AttentionPath>(PathOp::attention).
template <class Path>
std::vector<Path> all_paths(PathOp op) {
  std::vector<Path> paths;
  for (const PathInfo& row : paths_of(op)) paths.push_back(static_cast<Path>(row.value));
  return paths;
}

const PathInfo& path_info(LinearPath path);
const PathInfo& path_info(AttentionPath path);
const PathInfo& path_info(MlpPath path);

const char* path_name(LinearPath path);
const char* path_name(AttentionPath path);
const char* path_name(MlpPath path);

// Parse from config text; false when unknown.
bool parse_path(const std::string& text, LinearPath* out);
bool parse_path(const std::string& text, AttentionPath* out);
bool parse_path(const std::string& text, MlpPath* out);

}  // namespace blockscope::ops
