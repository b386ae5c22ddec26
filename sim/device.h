// Kernel-side interface of the simulated GPU: what a running GPU thread (a fiber) sees. Used by
// sim/kernel_prelude.h (threadIdx, __syncthreads, __shfl_*_sync, atomics, shared memory …), by
// sim/cuda_include/cooperative_groups.h and by the sim's own parts.
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
// The built-in variables, by value, for the sim's own code (kernels read the variables
// sim/kernel_prelude.h declares, which the executor sets as it switches threads).
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();

// Throws a Fault naming the kernel, block and thread, with `message`.
[[noreturn]] void fault(const char* message);
// nvcc-sim puts a call to it first in every __global__ body: a Fault when no GPU thread runs it
// (the kernel called as a host function, as C++ allows of a function pointer).
void kernel_body_entered(const char* kernel);

// ---- Barriers ---------------------------------------------------------------------------------
// A block-wide barrier identified by its source site (what __syncthreads* expands to): every
// thread of the block must arrive at the same `what` and file:line (file == nullptr matches any
// site). Returns the number of threads that arrived with a non-zero predicate
// (__syncthreads_count/_and/_or are built on it). A thread that exits, or waits at another
// barrier, while others wait here is a Fault. Starts a new race-check epoch for the block.
int sync_block_at(const char* what, const char* file, int line, int predicate);
void sync_block();
// this_grid().sync(): every thread of every block; a Fault unless the grid was launched with
// cudaLaunchCooperativeKernel (then every block is resident at once).
void sync_grid();
bool grid_is_cooperative();

// ---- Shared memory ----------------------------------------------------------------------------
// The block's dynamic shared memory (extern __shared__), exactly the launch's size, 16-byte
// aligned (and no more), filled with 0xFF bytes (NaN in f32/f16/bf16) at every block start.
void* dynamic_shared_memory();
size_t dynamic_shared_bytes();

// One __shared__ variable declaration (nvcc-sim emits a static SharedSite per declaration and
// per template instantiation). Its storage lives in the block's shared memory: placed at first
// use in each block, aligned to `align` and no more (so an undeclared wider vector access
// faults), fenced by redzones, filled with 0xFF at every block start. More than 48 KiB of them
// in one kernel is a Fault, as ptxas refuses it.
struct SharedSite {
  const char* name;
  const char* file;
  int line;
  size_t size;
  size_t align;
};
void* shared_variable(const SharedSite* site);

// ---- __device__, __constant__ and __managed__ variables ----------------------------------------
// nvcc-sim registers every namespace-scope definition (a static DeviceVariable after it). Each
// simulated device has its own copy of __device__ and __constant__ variables (swapped in when a
// grid of that device runs; cudaMemcpyToSymbol writes the current device's); kernels may not
// write __constant__ ones; memcheck accepts kernel accesses to all three.
enum class VariableKind { device, constant, managed };
struct DeviceVariable {
  DeviceVariable(void* address, size_t bytes, const char* name, VariableKind kind);
};

// ---- Warp collectives -------------------------------------------------------------------------
// One warp-wide collective (shuffles, votes, reductions, match, __syncwarp, mma.sync, ldmatrix):
// every lane named in `mask` calls it with the same `what`, mask and operand sizes; a lane that
// arrives with another mask, or at another collective, is a Fault. Lanes of the mask that have
// exited (or do not exist: a partial last warp) count as arrived, as PTX's *.sync instructions
// wait only for non-exited threads; their in[]/out[] are nullptr. A collective with `all_lanes`
// (mma, ldmatrix: .aligned) is a Fault when any lane of the warp has exited.
// The calling lane is blocked until all mask lanes have arrived; then `combine` runs once (on the
// last arriver) with every lane's input and writes every lane's output.
//   in[l]  = lane l's `in_bytes` bytes (nullptr for lanes outside the mask or exited)
//   out[l] = lane l's `out_bytes` bytes to fill (nullptr likewise)
struct WarpCollectiveArgs {
  unsigned mask;
  const void* const* in;  // [32]
  void* const* out;       // [32]
};
// A reference to the combine step (a callable of the caller's frame): no allocation, so nothing to
// leak when a fault abandons a thread inside a collective.
class CombineStep {
 public:
  template <class F>
  CombineStep(const F& f)  // NOLINT: implicit, from any callable of WarpCollectiveArgs
      : object_(&f), call_([](const void* o, const WarpCollectiveArgs& a) { (*static_cast<const F*>(o))(a); }) {}
  void operator()(const WarpCollectiveArgs& args) const { call_(object_, args); }

 private:
  const void* object_;
  void (*call_)(const void*, const WarpCollectiveArgs&);
};
void warp_collective(const char* what, unsigned mask, const void* in, size_t in_bytes, void* out,
                     size_t out_bytes, CombineStep combine, bool all_lanes = false);

// __activemask: the calling lane waits until no lane of its warp can run on (each has exited,
// blocked at a barrier or collective, or reached __activemask); the lanes waiting in
// __activemask then are the result. On a GPU it is the lanes converged with the caller; here
// lanes at different __activemask calls in divergent code count together.
unsigned active_lanes();

// Lanes that exist in the calling thread's warp (0xffffffff except in a partial last warp).
unsigned warp_lanes();

// Warp shuffles and votes as warp collectives (sim/warp_intrinsics.cpp). `mode`:
// kShuffleIdx/Up/Down/Xor; `b` the source lane, delta or lane mask; width a power of 2 in
// [1, 32] (else a Fault). Semantics as PTX shfl.sync: a source outside the lane's width segment
// (up/down/xor) gives the lane its own value; a source lane outside `mask` or exited (undefined
// on a GPU) gives 0xFF bytes. Every lane must shuffle the same number of bytes.
enum ShuffleMode : int { kShuffleIdx = 0, kShuffleUp = 1, kShuffleDown = 2, kShuffleXor = 3 };
void warp_shuffle(const char* what, ShuffleMode mode, unsigned mask, const void* value, void* out, size_t bytes,
                  int b, int width);
// The ballot over `mask` of the lanes' predicates (bit l set: lane l's predicate is non-zero).
unsigned warp_vote(const char* what, unsigned mask, int predicate);
// __match_any_sync: the lanes of `mask` whose `bytes`-byte value equals the caller's.
// __match_all_sync: `mask` when every lane's value is equal (*all = 1), else 0 (*all = 0).
unsigned warp_match_any(unsigned mask, const void* value, size_t bytes);
unsigned warp_match_all(unsigned mask, const void* value, size_t bytes, int* all);
// __reduce_*_sync over the unsigned (or, for min/max, signed) 32-bit values of `mask`'s lanes.
enum class WarpReduce { add, min, max, umin, umax, and_, or_, xor_ };
unsigned warp_reduce(const char* what, unsigned mask, WarpReduce op, unsigned value);

// ---- Memory accesses the kernel reports -------------------------------------------------------
// Compiler-instrumented loads and stores arrive in sim/access_hooks.cpp on their own; these are the
// explicit ones. An atomic: its address is checked (bounds, alignment, device) and the thread
// may be switched out before it (a poll: see yield_thread); between atomic_begin and atomic_end
// the instrumentation is ignored, so the read-modify-write in between is one indivisible step
// of the simulated GPU and never a race. `changed`: whether it wrote a new value (progress).
void atomic_begin(const void* address, size_t bytes);
void atomic_end(bool changed);
// Pauses and resumes the access checks of the calling GPU thread (for the simulator's own code
// that runs in instrumented translation units, e.g. copying a launch's arguments).
void checks_pause();
void checks_resume();
// __threadfence*: a poll (other threads may run; a spin loop with a fence makes progress).
void fence();

// Lets the other threads of the grid run before the caller continues (__nanosleep and every
// poll: atomics, volatile accesses, fences). A grid whose threads only poll, with nothing else
// left to run, cannot finish (on the sim a block cannot wait on a block that is not resident):
// after BLOCKSCOPE_SIM_SPIN_BUDGET polls (default 2^20) without progress it is a Fault.
void yield_thread();

// ---- Clocks -------------------------------------------------------------------------------------
// The SM cycle counter of clock64() (and, in a kernel, clock()): the steady clock at the
// 1980 MHz cudaDevAttrClockRate reports, so code that turns a time into cycles with that rate
// (spin for N ms) waits that long.
long long sm_cycles();

}  // namespace blockscope::sim
