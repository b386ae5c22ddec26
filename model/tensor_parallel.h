// Tensor parallelism of a block, Megatron-LM's layout (Shoeybi et al., 2019): the attention
// heads and the MLP's hidden units are split over N ranks, so each rank computes whole heads
// and 1/N of d_ff with no communication until the two row-parallel GEMMs, whose partial sums
// one all-reduce each adds up:
//
//   column-parallel (output features split): q, k, v (GPT-2's fused c_attn: its q, k and v
//     column blocks each split by heads), fc / gate / up — and their biases;
//   row-parallel (input features split): the attention output projection (o_proj, c_proj) and
//     the MLP's second projection (down, mlp.c_proj) — their biases on rank 0 only (zeros on
//     the others: the all-reduce adds them once);
//   replicated: the norms.
//
// Every rank holds the whole weights it was given (seeded or loaded identically on each rank)
// and keeps contiguous copies of its share; the block then runs unchanged on the shard's
// model (shard_model) except for the all-reduces (Block::set_communicator).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "model/config.h"
#include "model/weights.h"
#include "runtime/communicator.h"
#include "runtime/context.h"

namespace blockscope {

// The group a tensor-parallel workload of `ranks` ranks runs on: the MPI world when this process
// is one of exactly `ranks` ranks started by mpirun (runtime/communicator.h); otherwise an
// InputError saying how to launch it.
Communicator& tensor_parallel_group(int ranks);

// Tensor parallelism between the GPUs of this process: fn(ctx, comm) on `ranks` host threads,
// rank r's with a Context on cuda:r and its NCCL communicator (nccl_group_in_process). Returns
// when every thread has. When a rank throws, the group is aborted (no rank waits for it in a
// collective) and, after every thread has ended, the first rank's error to happen is rethrown.
void run_on_gpus(int ranks, const std::function<void(Context& ctx, Communicator& comm)>& fn);

// Under mpirun, the device a rank of `group` runs on when `requested` is given to every rank: a
// CUDA device is the rank's own GPU, cuda:(node_rank mod the machine's GPUs) — one GPU per
// process (gpu_group_over); the CPU stays the CPU.
Device rank_device(const Device& requested, const Communicator& group);

// The group of the ranks' GPUs under mpirun: NCCL between them started over `world`
// (nccl_over_mpi) when `device` (this rank's) is a GPU, `world` has more than one rank and NCCL
// is built; otherwise null, and `world` itself reduces (device tensors staged through host
// memory). Every rank of `world` must call it, in the same order.
std::unique_ptr<Communicator> gpu_group_over(Communicator& world, const Device& device);

// The model one of `ranks` ranks computes: n_heads / ranks heads, n_kv_heads / ranks kv heads,
// d_ff / ranks hidden units (the config reader has refused ranks that do not divide them).
ModelConfig shard_model(const ModelConfig& model, int ranks);

// Rank `rank`'s share of layers [0, layers) of `full` (the names of block_weight_specs, shapes
// of `model`), as contiguous tensors on ctx's device with the same names and dtype (replicated
// tensors shared with `full` where it is on ctx's device, else copied).
void shard_weights(Context& ctx, const ModelConfig& model, int64_t layers, const WeightSet& full, int rank, int ranks,
                   WeightSet& out);

}  // namespace blockscope
