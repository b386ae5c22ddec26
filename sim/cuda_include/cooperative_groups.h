// Cooperative groups on the simulated GPU: the subset of the toolkit's <cooperative_groups.h>
// that sim-compiled code gets in its place (nvcc-sim puts this directory before the toolkit's; the
// toolkit's header needs nvcc's device mode). Built on the intrinsics of sim/kernel_prelude.h,
// with the CUDA Programming Guide's semantics:
//   thread_block       this_thread_block(): sync(), thread_rank(), size()/num_threads(),
//                      group_index(), thread_index(), group_dim()/dim_threads()
//   grid_group         this_grid(): sync() (only in a cudaLaunchCooperativeKernel grid; otherwise a
//                      fault that says so), is_valid(), thread_rank(), size(), block_rank(), …
//   thread_block_tile<N>  tiled_partition<N>(block or tile), N a power of 2 up to 32: sync(),
//                      thread_rank(), size(), meta_group_rank/size(), shfl, shfl_up/down/xor,
//                      any, all, ballot (bits by rank in the tile), match_any, match_all
//   coalesced_group    coalesced_threads(): the same on the lanes active together
//   thread_group       the base of them all, as in CUDA: any group passed by value as a
//                      thread_group keeps what it is (sync(), thread_rank(), size(), by a tag);
//                      tiled_partition(group, n) at run time, n a power of 2 up to 32
//   cooperative_groups::sync(group)
// Lanes of a tile that exited or do not exist (a partial last warp) count as arrived.
#pragma once

#include <cstdint>
#include <type_traits>

namespace cooperative_groups {

namespace details {
inline unsigned block_rank_of_thread() {
  const dim3 b = blockDim;
  const uint3 t = threadIdx;
  return t.x + b.x * (t.y + b.y * t.z);
}
inline unsigned block_threads() {
  const dim3 b = blockDim;
  return b.x * b.y * b.z;
}
inline unsigned lane() { return block_rank_of_thread() % 32u; }
// The n-th set bit of mask (n counted from 0).
inline int nth_lane(unsigned mask, unsigned n) {
  for (int l = 0; l < 32; ++l) {
    if ((mask >> l & 1u) && n-- == 0) return l;
  }
  return -1;
}
}  // namespace details

// Every group is a thread_group (CUDA's base class, also passed by value): what it is travels in
// a tag, so sync(), thread_rank() and size() of a sliced copy still do the right thing.
class thread_group {
 public:
  void sync() const;
  unsigned long long thread_rank() const;
  unsigned long long size() const;
  unsigned long long num_threads() const { return size(); }
  bool is_valid() const { return true; }

 protected:
  enum class Kind { block, lanes, grid };
  explicit thread_group(Kind kind, unsigned lanes = 0) : kind_(kind), lanes_(lanes) {}
  Kind kind_;
  unsigned lanes_;  // Kind::lanes: the warp's lanes in the group
  friend thread_group tiled_partition(const thread_group& parent, unsigned tile);
};

namespace details {
// One barrier site for every way of syncing a block (a barrier is identified by its site).
inline void block_sync() { ::blockscope::sim::sync_block_at("thread_block::sync", __FILE__, __LINE__, 0); }
inline unsigned rank_in(unsigned lanes) { return static_cast<unsigned>(__popc(lanes & ((1u << lane()) - 1u))); }
}  // namespace details

class thread_block : public thread_group {
 public:
  thread_block() : thread_group(Kind::block) {}
  void sync() const { details::block_sync(); }
  unsigned thread_rank() const { return details::block_rank_of_thread(); }
  unsigned size() const { return details::block_threads(); }
  unsigned num_threads() const { return details::block_threads(); }
  dim3 group_index() const {
    const uint3 b = blockIdx;
    return dim3(b.x, b.y, b.z);
  }
  dim3 thread_index() const {
    const uint3 t = threadIdx;
    return dim3(t.x, t.y, t.z);
  }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

class grid_group : public thread_group {
 public:
  grid_group() : thread_group(Kind::grid) {}
  void sync() const { ::blockscope::sim::sync_grid(); }
  bool is_valid() const { return ::blockscope::sim::grid_is_cooperative(); }
  unsigned long long block_rank() const {
    const dim3 g = gridDim;
    const uint3 b = blockIdx;
    return b.x + static_cast<unsigned long long>(g.x) * (b.y + static_cast<unsigned long long>(g.y) * b.z);
  }
  unsigned long long num_blocks() const {
    const dim3 g = gridDim;
    return static_cast<unsigned long long>(g.x) * g.y * g.z;
  }
  unsigned long long thread_rank() const { return block_rank() * details::block_threads() + details::block_rank_of_thread(); }
  unsigned long long size() const { return num_blocks() * details::block_threads(); }
  unsigned long long num_threads() const { return size(); }
  dim3 group_dim() const { return gridDim; }
  dim3 dim_blocks() const { return gridDim; }
  dim3 block_index() const {
    const uint3 b = blockIdx;
    return dim3(b.x, b.y, b.z);
  }
};

inline grid_group this_grid() { return grid_group(); }

// A group of lanes of one warp, given by its mask: what tiles and coalesced groups share.
class warp_lanes_group : public thread_group {
 public:
  explicit warp_lanes_group(unsigned mask) : thread_group(Kind::lanes, mask), mask_(mask) {}
  void sync() const { __syncwarp(mask_); }
  unsigned thread_rank() const { return details::rank_in(mask_); }
  unsigned size() const { return static_cast<unsigned>(__popc(mask_)); }
  unsigned num_threads() const { return size(); }
  template <class T>
  T shfl(T value, unsigned rank) const {
    return __shfl_sync(mask_, value, details::nth_lane(mask_, rank));
  }
  int any(int predicate) const { return __any_sync(mask_, predicate); }
  int all(int predicate) const { return __all_sync(mask_, predicate); }
  // Bit r set: the thread of rank r voted yes.
  unsigned ballot(int predicate) const { return compress(__ballot_sync(mask_, predicate)); }
  template <class T>
  unsigned match_any(T value) const {
    return compress(__match_any_sync(mask_, value));
  }
  template <class T>
  unsigned match_all(T value, int& pred) const {
    return compress(__match_all_sync(mask_, value, &pred));
  }

 protected:
  unsigned compress(unsigned lanes) const {
    unsigned out = 0, rank = 0;
    for (int l = 0; l < 32; ++l) {
      if ((mask_ >> l & 1u) == 0) continue;
      if (lanes >> l & 1u) out |= 1u << rank;
      ++rank;
    }
    return out;
  }
  unsigned mask_;
};

class coalesced_group : public warp_lanes_group {
 public:
  explicit coalesced_group(unsigned mask) : warp_lanes_group(mask) {}
  template <class T>
  T shfl_down(T value, unsigned delta) const {
    const unsigned rank = thread_rank() + delta;
    const int source = rank < size() ? details::nth_lane(mask_, rank) : static_cast<int>(details::lane());
    return __shfl_sync(mask_, value, source);
  }
  template <class T>
  T shfl_up(T value, unsigned delta) const {
    const unsigned rank = thread_rank();
    const int source = rank >= delta ? details::nth_lane(mask_, rank - delta) : static_cast<int>(details::lane());
    return __shfl_sync(mask_, value, source);
  }
  unsigned meta_group_rank() const { return 0; }
  unsigned meta_group_size() const { return 1; }
};

inline coalesced_group coalesced_threads() { return coalesced_group(__activemask()); }

// A tile of Size consecutive threads (Size a power of 2, at most 32): lanes of one warp.
// thread_block_tile<N, Parent> (what tiled_partition returns) converts to thread_block_tile<N>.
template <unsigned Size, class Parent = void>
class thread_block_tile;

template <unsigned Size>
class thread_block_tile<Size, void> : public warp_lanes_group {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "thread_block_tile: the simulator supports tiles of 1, 2, 4, 8, 16 or 32 threads");

 public:
  thread_block_tile() : warp_lanes_group(tile_mask()) {}
  static constexpr unsigned size() { return Size; }
  static constexpr unsigned num_threads() { return Size; }
  unsigned thread_rank() const { return details::lane() % Size; }
  unsigned meta_group_rank() const { return details::block_rank_of_thread() / Size; }
  unsigned meta_group_size() const { return (details::block_threads() + Size - 1) / Size; }
  template <class T>
  T shfl(T value, int src_rank) const {
    return __shfl_sync(mask_, value, src_rank, static_cast<int>(Size));
  }
  template <class T>
  T shfl_down(T value, unsigned delta) const {
    return __shfl_down_sync(mask_, value, delta, static_cast<int>(Size));
  }
  template <class T>
  T shfl_up(T value, unsigned delta) const {
    return __shfl_up_sync(mask_, value, delta, static_cast<int>(Size));
  }
  template <class T>
  T shfl_xor(T value, unsigned lane_mask) const {
    return __shfl_xor_sync(mask_, value, static_cast<int>(lane_mask), static_cast<int>(Size));
  }

 private:
  static unsigned tile_mask() {
    const unsigned first = details::lane() / Size * Size;
    return Size == 32 ? 0xffffffffu : ((1u << Size) - 1u) << first;
  }
};

template <unsigned Size, class Parent>
class thread_block_tile : public thread_block_tile<Size, void> {};

template <unsigned Size, class ParentT>
thread_block_tile<Size, ParentT> tiled_partition(const ParentT&) {
  return thread_block_tile<Size, ParentT>();
}

inline void thread_group::sync() const {
  switch (kind_) {
    case Kind::block: details::block_sync(); break;
    case Kind::lanes: __syncwarp(lanes_); break;
    case Kind::grid: ::blockscope::sim::sync_grid(); break;
  }
}
inline unsigned long long thread_group::thread_rank() const {
  switch (kind_) {
    case Kind::block: return details::block_rank_of_thread();
    case Kind::lanes: return details::rank_in(lanes_);
    case Kind::grid: return grid_group().thread_rank();
  }
  return 0;
}
inline unsigned long long thread_group::size() const {
  switch (kind_) {
    case Kind::block: return details::block_threads();
    case Kind::lanes: return static_cast<unsigned>(__popc(lanes_));
    case Kind::grid: return grid_group().size();
  }
  return 0;
}

// tiled_partition(parent, n) at run time: the n consecutive threads of the parent (a block or a
// tile of it) this thread is in, n a power of 2 up to 32 (the simulator's limit).
inline thread_group tiled_partition(const thread_group& parent, unsigned tile) {
  if (tile == 0 || tile > 32 || (tile & (tile - 1)) != 0) {
    ::blockscope::sim::fault("tiled_partition(group, n): n must be a power of 2 up to 32 on the simulator");
  }
  unsigned parent_lanes = 0xffffffffu;
  if (parent.kind_ == thread_group::Kind::lanes) {
    parent_lanes = parent.lanes_;
    if (static_cast<unsigned>(__popc(parent_lanes)) < tile) {
      ::blockscope::sim::fault("tiled_partition(group, n): n is larger than the group");
    }
  } else if (parent.kind_ == thread_group::Kind::grid) {
    ::blockscope::sim::fault("tiled_partition of a grid_group is not supported");
  }
  const unsigned first = details::lane() / tile * tile;
  const unsigned lanes = (tile == 32 ? 0xffffffffu : ((1u << tile) - 1u) << first) & parent_lanes;
  return thread_group(thread_group::Kind::lanes, lanes);
}

template <class Group>
void sync(const Group& group) {
  group.sync();
}

}  // namespace cooperative_groups
