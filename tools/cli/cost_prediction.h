// `blockscope info --predict GPU --cost SPEC`: one op call's CUDA kernels (the op catalogue's
// list for the path, one launch each) mapped onto the GPU performance model
// (profiler/gpu_model.h): GEMMs through predict_gemm from their sizes, flash attention through
// predict_attention_flash, collectives through predict_collective, the rest through
// predict_kernel with the catalogue's FLOPs and bytes.
#pragma once

#include <nlohmann/json.hpp>

#include "ops/catalogue/catalogue.h"
#include "profiler/gpu_specs.h"

namespace blockscope::cli {

// {"target", "model_version", "predicted_us", "compute_us", "memory_us", "launch_us", "waves",
//  "predicted_kernels": [{"name", "predicted_us", "compute_us", "memory_us", "launch_us", "waves", "bound",
//  "tile"?}]}: the op's terms are its kernels' sums, its waves those of its longest kernel.
nlohmann::json predict_op_cost(const profiler::GpuSpec& gpu, const ops::OpSpec& op, const ops::OpCall& call);

}  // namespace blockscope::cli
