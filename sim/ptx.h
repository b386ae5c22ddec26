// The PTX instructions the simulated GPU emulates for kernels that would use inline assembly on a
// GPU: mma.sync.aligned.m16n8k16 (f16/bf16 in, f32 accumulate), ldmatrix.sync.aligned.m8n8.b16
// (.x1/.x2/.x4, plain and .trans) and cp.async 16-byte copies with commit/wait groups.
// ops/common/cuda/tensor_core.cuh calls these in place of its inline PTX on the simulated GPU.
//
// Semantics (the PTX ISA's; violations are Faults naming kernel, block and thread):
//   * mma and ldmatrix are warp collectives of all 32 lanes (.aligned); fragment layouts follow
//     the PTX ISA's figures (sim/ptx_model.h). ldmatrix reads the row addresses of lanes
//     0-7 (.x1), 0-15 (.x2) or 0-31 (.x4): each must be 16-byte aligned shared memory inside the
//     dynamic region or one __shared__ variable; the reads are checked (memcheck, race) as reads
//     of the lane that supplied the address.
//   * cp_async reads its source when issued (16-byte aligned global memory, src_bytes of it; the
//     rest of the 16 destination bytes are zeros) and writes the 16-byte aligned shared
//     destination only at the cp_async_wait that covers its group: reading before then sees the
//     old contents (the 0xFF poison at block start), as it can on a GPU. __syncthreads does not
//     wait for cp.async. Copies a thread never waited for are dropped when it exits.
#pragma once

#include <cstdint>

namespace blockscope::sim::ptx {

// The .shared address of a pointer into the block's shared memory (an offset from its start:
// differences and alignment bits are meaningful, as on a GPU).
uint32_t shared_address(const void* smem_ptr);

// D = A·B + C, A 16x16 row-major, B 16x8 column-major, C/D 16x8 f32 (d may alias c).
void mma_m16n8k16(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);

// `num` (1, 2 or 4) 8x8 b16 matrices into r[0..num).
void ldmatrix(int num, bool trans, uint32_t* r, const void* smem_row_ptr);

void cp_async(void* smem, const void* gmem, int src_bytes);
void cp_async_commit();
void cp_async_wait(int pending);  // at most `pending` of the newest committed groups left
void cp_async_wait_all();        // commits and waits for everything

// Two floats rounded to nearest-even into one .bf16x2 / .f16x2 register, `lo` in bits 0-15.
uint32_t pack_bf16x2(float lo, float hi);
uint32_t pack_f16x2(float lo, float hi);

}  // namespace blockscope::sim::ptx
