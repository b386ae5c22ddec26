// NVTX ranges in the `blockscope` domain, for Nsight Systems (`nsys profile -t cuda,nvtx`).
// Compiled out when BLOCKSCOPE_WITH_NVTX is not defined. With no tool attached, an nvtx3
// push/pop is a call through a null function pointer: near-zero cost.
#pragma once

namespace blockscope::profiler {

// Op families decide the colour of a range in the Nsight timeline.
// collective: communication between ranks (tensor parallelism's all_reduce).
// `precision`: the FP8 casts and scaling kernels (ops/precision/).
enum class Family { region, linear, attention, softmax, norm, activation, elementwise, rope, copy, collective, precision };

// "linear", "softmax", ... (the op catalogue in `blockscope info --format json`).
const char* family_name(Family family);

void nvtx_push(const char* name, Family family);
void nvtx_pop();

// Tensor parallelism: the calling thread's ranges are named "rank.N/<name>" from now on (N ≥ 0;
// -1 goes back to plain names), so Nsight shows which rank a range belongs to when ranks are
// threads of one process (run_on_gpus) or processes of one report (mpirun).
void set_nvtx_rank(int rank);

}  // namespace blockscope::profiler
