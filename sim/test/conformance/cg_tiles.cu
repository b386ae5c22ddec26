// Cooperative groups: tiles of 16 threads (tiled_partition<16>) reduce their values through shared
// memory, with tile.sync(), then with cg::reduce; the block's sum comes from thread_block.sync().
// Blocks of 120 threads: the last warp has 24 lanes, its last tile 8 (its collectives must not
// wait for lanes that do not exist; cg::reduce over a tile with absent lanes is undefined, so only
// full tiles' reductions are kept).
// PLANT: no tile.sync() between writing the tile's shared slots and reading a neighbour's (a race
// within a warp, which only __syncwarp orders).
// EXPECT PLANTED: shared-memory race
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "conformance.h"

namespace cg = cooperative_groups;
const char* conformance::name = "cg_tiles";

__global__ void tiles(const int* in, int* tile_sums, int* reduced, int* block_sums) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  __shared__ int slots[128];
  __shared__ int block_total;
  const unsigned t = block.thread_rank();
  const int v = in[blockIdx.x * blockDim.x + t];
  if (t == 0) block_total = 0;
  slots[t] = v;
#ifndef PLANT
  tile.sync();
#endif
  // Each rank sums the tile's slots from its own position on (a rotating read of neighbours).
  int sum = 0;
  const unsigned first = t - tile.thread_rank();
  const unsigned size = min(16u, blockDim.x - first);
  for (unsigned i = 0; i < size; ++i) sum += slots[first + (tile.thread_rank() + i) % size];
  const int by_reduce = cg::reduce(tile, v, cg::plus<int>());
  block.sync();
  atomicAdd(&block_total, v);
  block.sync();
  const unsigned tile_index = blockIdx.x * ((blockDim.x + 15) / 16) + tile.meta_group_rank();
  if (tile.thread_rank() == 0) {
    tile_sums[tile_index] = sum;
    if (size == 16) reduced[tile_index] = by_reduce;
  }
  if (t == 0) block_sums[blockIdx.x] = block_total;
}

int main() {
  const int blocks = 3, threads = 120, tiles_per_block = (threads + 15) / 16;
  const std::vector<int> in = conformance::random_ints(blocks * threads, 50, 10);
  std::vector<int> expected(blocks * tiles_per_block * 2 + blocks, 0);
  for (int b = 0; b < blocks; ++b) expected[blocks * tiles_per_block + b * tiles_per_block + threads / 16] = -1;  // partial
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) {
      expected[b * tiles_per_block + t / 16] += in[b * threads + t];
      if (t / 16 * 16 + 16 <= threads) expected[blocks * tiles_per_block + b * tiles_per_block + t / 16] += in[b * threads + t];
      expected[2 * blocks * tiles_per_block + b] += in[b * threads + t];
    }
  }
  int* d_in = conformance::to_device(in);
  int* d_out = conformance::to_device(std::vector<int>(expected.size(), -1));
  tiles<<<blocks, threads>>>(d_in, d_out, d_out + blocks * tiles_per_block, d_out + 2 * blocks * tiles_per_block);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, expected.size()), expected);
}
