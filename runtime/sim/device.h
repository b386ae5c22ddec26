// Kernel-side interface of the simulated GPU: what a running GPU thread (a fiber) sees.
// Used by runtime/sim/kernel_prelude.h (threadIdx, __syncthreads, __shfl_*_sync, …) and by the
// sim versions of the tensor-core wrappers (ops/common/cuda/tensor_core.cuh).
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace blockscope::sim {

struct ThreadState {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
  unsigned lane = 0;        // thread's lane in its warp (linear thread index % 32)
  unsigned warp = 0;        // warp index in the block
};

// The calling GPU thread's state; a Fault (sim.h) when called outside a kernel.
const ThreadState& current_thread();

// __syncthreads: every thread of the block must arrive at the same barrier; a thread that
// exits, or waits at another barrier, while others wait here is a Fault.
void sync_block();

// Start of the block's dynamic shared memory (extern __shared__), exactly the launch's size,
// filled with 0xFF bytes (NaN in f32/f16/bf16) at the start of every block.
void* dynamic_shared_memory();
size_t dynamic_shared_bytes();

// One warp-wide collective (shuffles, votes, __syncwarp, mma.sync, ldmatrix): every lane named
// in `mask` calls it with the same `what` and mask; a lane that arrives with another mask, or a
// mask lane that exits or waits elsewhere, is a Fault. The calling lane is blocked until all
// mask lanes have arrived; then `combine` runs once (the last arriver's copy) with every lane's
// input and writes every lane's output.
//   in[l]  = lane l's `in_bytes` bytes (nullptr for lanes outside the mask)
//   out[l] = lane l's `out_bytes` bytes to fill (nullptr for lanes outside the mask)
struct WarpCollectiveArgs {
  unsigned mask;
  const void* const* in;  // [32]
  void* const* out;       // [32]
};
void warp_collective(const char* what, unsigned mask, const void* in, size_t in_bytes, void* out,
                     size_t out_bytes, const std::function<void(const WarpCollectiveArgs&)>& combine);

// Throws a Fault naming the kernel, block and thread, with `message`.
[[noreturn]] void fault(const char* message);

// ---- Additions (executor core) ----------------------------------------------------------------
// A block-wide barrier identified by its source site (what __syncthreads* expands to): every
// thread of the block must arrive at the same `what` and file:line (file == nullptr matches any
// site, as sync_block() does). Returns the number of threads that arrived with a non-zero
// predicate (__syncthreads_count/_and/_or are built on it).
int sync_block_at(const char* what, const char* file, int line, int predicate);

// __activemask: the calling lane waits until no lane of its warp can run on (each has exited,
// blocked at a barrier or collective, or reached __activemask); the lanes waiting in
// __activemask then are the result. On a GPU it is the lanes converged with the caller; here
// lanes at different __activemask calls in divergent code count together.
unsigned active_lanes();

// Lanes that exist in the calling thread's warp (0xffffffff except in a partial last warp).
unsigned warp_lanes();

// Warp shuffles and votes as warp collectives (runtime/sim/warp_intrinsics.cpp). `mode`:
// kShuffleIdx/Up/Down/Xor; `b` the source lane, delta or lane mask; width a power of 2 in
// [1, 32] (else a Fault). Semantics as PTX shfl.sync: a source outside the lane's width segment
// (up/down/xor) gives the lane its own value; a source lane outside `mask` (undefined on a GPU)
// gives 0xFF bytes. Every lane must shuffle the same number of bytes.
enum ShuffleMode : int { kShuffleIdx = 0, kShuffleUp = 1, kShuffleDown = 2, kShuffleXor = 3 };
void warp_shuffle(const char* what, ShuffleMode mode, unsigned mask, const void* value, void* out, size_t bytes,
                  int b, int width);
// The ballot over `mask` of the lanes' predicates (bit l set: lane l's predicate is non-zero).
unsigned warp_vote(const char* what, unsigned mask, int predicate);

// Lets the other threads of the block run before the caller continues (__nanosleep): spin-waits
// on shared memory written by another thread of the same block make progress.
void yield_thread();

}  // namespace blockscope::sim
