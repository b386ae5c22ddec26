// Implementation paths, from naive to fused (DESIGN.md "Ops and paths"), and their names as
// configs spell them. Kernel counts per forward on CUDA are in docs/ARCHITECTURE.md.
#pragma once

#include <string>

namespace blockscope::ops {

// linear / matmul_add:
//   naive     GEMM, then a separate bias-add kernel (2 kernels)
//   epilogue  one GEMM with the bias (and GELU) in the epilogue (1)
//   addmm     bias broadcast-copied into the output, then one GEMM with beta = 1 — what
//             torch.compile makes of matmul + add (a copy kernel + GEMM)
enum class LinearPath { naive, epilogue, addmm };

// attention:
//   naive          QK^T GEMM, scale, out-of-place masked_fill (copy + fill), softmax, PV GEMM (6)
//   inplace        as naive with in-place masking (5)
//   fused_softmax  QK^T GEMM with alpha = scale, one scale+mask+softmax kernel, PV GEMM (3)
//   flash          one kernel: tiled, online softmax, no S x S matrix in memory (1)
enum class AttentionPath { naive, inplace, fused_softmax, flash };

// mlp:
//   naive     every GEMM, bias, activation (and gate multiply) its own kernel
//   epilogue  plain MLP: GELU_BIAS / BIAS epilogues (2 kernels)
//   fused     gated MLP: one GEMM on concatenated gate|up weights, one act*mul kernel,
//             down GEMM (3)
enum class MlpPath { naive, epilogue, fused };

enum class Activation { gelu_erf, gelu_tanh, silu, relu };

const char* path_name(LinearPath path);
const char* path_name(AttentionPath path);
const char* path_name(MlpPath path);
const char* activation_name(Activation act);

// Parse from config text; false when unknown.
bool parse_path(const std::string& text, LinearPath* out);
bool parse_path(const std::string& text, AttentionPath* out);
bool parse_path(const std::string& text, MlpPath* out);
bool parse_activation(const std::string& text, Activation* out);

}  // namespace blockscope::ops
