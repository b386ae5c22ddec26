// Warp shuffles, votes, match and reductions on top of warp_collective (device.h): the semantics
// of PTX shfl.sync, vote.sync, match.sync and redux.sync, including the width segments of the
// shuffles. Lanes of the mask that exited take no part (in[]/out[] are nullptr for them); a lane
// reading one of them gets 0xFF bytes and, with the synccheck check, a fault naming both lanes.
#include <cstdio>
#include <cstring>
#include <string>

#include "sim/device.h"
#include "sim/executor_state.h"

namespace blockscope::sim {
namespace {

constexpr size_t kMaxShuffleBytes = 16;

// What each lane hands in; every lane carries its own b and width (srcLane usually differs).
struct ShuffleOperand {
  unsigned char value[kMaxShuffleBytes];
  int b, width;
};

// PTX shfl.sync: the lane to read, or -1 for "keep your own value".
int source_lane(ShuffleMode mode, int lane, int b, int width) {
  const int segment = lane & ~(width - 1);  // first lane of the caller's width segment
  const int last = segment + width - 1;
  b &= 31;  // PTX takes the low 5 bits of the operand
  switch (mode) {
    case kShuffleIdx: return segment | (b & (width - 1));
    case kShuffleUp: return lane - b >= segment ? lane - b : -1;
    case kShuffleDown: return lane + b <= last ? lane + b : -1;
    case kShuffleXor: return (lane ^ b) <= last ? lane ^ b : -1;  // earlier segments are readable
  }
  return -1;
}

// What each lane gets back: the value, and the lane of its mask it read that had exited (-1: none).
struct ShuffleResult {
  unsigned char value[kMaxShuffleBytes];
  int exited_source;
};

struct MatchOperand {
  unsigned char value[8];
};

}  // namespace

void warp_shuffle(const char* what, ShuffleMode mode, unsigned mask, const void* value, void* out, size_t bytes,
                  int b, int width) {
  if (bytes == 0 || bytes > kMaxShuffleBytes) fault((std::string(what) + ": unsupported operand size " + std::to_string(bytes)).c_str());
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    fault((std::string(what) + ": width " + std::to_string(width) + " is not a power of 2 in [1, 32]").c_str());
  }
  ShuffleOperand in;
  std::memcpy(in.value, value, bytes);
  in.b = b;
  in.width = width;
  ShuffleResult result;
  std::memcpy(result.value, out, bytes);
  result.exited_source = -1;
  warp_collective(what, mask, &in, sizeof in, &result, sizeof result, [mode, bytes](const WarpCollectiveArgs& args) {
    for (int lane = 0; lane < 32; ++lane) {
      if (args.out[lane] == nullptr) continue;  // outside the mask, or exited
      const auto& mine = *static_cast<const ShuffleOperand*>(args.in[lane]);
      auto& got = *static_cast<ShuffleResult*>(args.out[lane]);
      int source = source_lane(mode, lane, mine.b, mine.width);
      if (source < 0) source = lane;
      if (args.in[source] != nullptr) {
        std::memcpy(got.value, static_cast<const ShuffleOperand*>(args.in[source])->value, bytes);
      } else {
        std::memset(got.value, 0xFF, bytes);  // outside the mask or exited: undefined on a GPU
        if ((args.mask >> source & 1u) != 0) got.exited_source = source;
      }
    }
  });
  std::memcpy(out, result.value, bytes);
  // Lanes that do not exist (a block ending in a partial warp) are not reported: cooperative
  // groups' tiles there name them in their masks, and programs discard what such a tile computes.
  const exec::SimThread* me = exec::current_sim_thread();
  const unsigned source = me->state.warp * exec::kWarpSize + static_cast<unsigned>(result.exited_source);
  if (result.exited_source >= 0 && source < me->block->threads.size() && current_checks().synccheck) {
    const std::string line = exec::source_line(__builtin_return_address(0));
    char mask_text[16];
    std::snprintf(mask_text, sizeof mask_text, "0x%08x", mask);
    fault((std::string(what) + (line.empty() ? "" : " at " + line) + " (synccheck): lane " +
           std::to_string(me->state.lane) + " reads the value of lane " + std::to_string(result.exited_source) + " (" +
           exec::thread_name(*me->block, source) + ", which has exited) although the mask " + mask_text +
           " names it: the value is undefined on a GPU (0xFF bytes here)")
              .c_str());
  }
}

unsigned warp_vote(const char* what, unsigned mask, int predicate) {
  const int in = predicate != 0;
  unsigned out = 0;
  warp_collective(what, mask, &in, sizeof in, &out, sizeof out, [](const WarpCollectiveArgs& args) {
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (args.in[lane] != nullptr && *static_cast<const int*>(args.in[lane])) ballot |= 1u << lane;
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (args.out[lane] != nullptr) *static_cast<unsigned*>(args.out[lane]) = ballot;
    }
  });
  return out;
}

unsigned warp_match_any(unsigned mask, const void* value, size_t bytes) {
  if (bytes != 4 && bytes != 8) fault("__match_any_sync: the value must be 4 or 8 bytes");
  MatchOperand in{};
  std::memcpy(in.value, value, bytes);
  unsigned out = 0;
  warp_collective("__match_any_sync", mask, &in, sizeof in, &out, sizeof out, [bytes](const WarpCollectiveArgs& args) {
    for (int lane = 0; lane < 32; ++lane) {
      if (args.out[lane] == nullptr) continue;
      const auto* mine = static_cast<const MatchOperand*>(args.in[lane]);
      unsigned same = 0;
      for (int other = 0; other < 32; ++other) {
        const auto* theirs = static_cast<const MatchOperand*>(args.in[other]);
        if (theirs != nullptr && std::memcmp(mine->value, theirs->value, bytes) == 0) same |= 1u << other;
      }
      *static_cast<unsigned*>(args.out[lane]) = same;
    }
  });
  return out;
}

unsigned warp_match_all(unsigned mask, const void* value, size_t bytes, int* all) {
  if (bytes != 4 && bytes != 8) fault("__match_all_sync: the value must be 4 or 8 bytes");
  MatchOperand in{};
  std::memcpy(in.value, value, bytes);
  unsigned out = 0;
  warp_collective("__match_all_sync", mask, &in, sizeof in, &out, sizeof out, [bytes](const WarpCollectiveArgs& args) {
    const MatchOperand* first = nullptr;
    bool equal = true;
    for (int lane = 0; lane < 32; ++lane) {
      const auto* theirs = static_cast<const MatchOperand*>(args.in[lane]);
      if (theirs == nullptr) continue;
      if (first == nullptr) first = theirs;
      equal = equal && std::memcmp(first->value, theirs->value, bytes) == 0;
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (args.out[lane] != nullptr) *static_cast<unsigned*>(args.out[lane]) = equal ? args.mask : 0u;
    }
  });
  *all = out != 0;
  return out;
}

unsigned warp_reduce(const char* what, unsigned mask, WarpReduce op, unsigned value) {
  unsigned out = 0;
  warp_collective(what, mask, &value, sizeof value, &out, sizeof out, [op](const WarpCollectiveArgs& args) {
    bool first = true;
    unsigned acc = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (args.in[lane] == nullptr) continue;
      const unsigned v = *static_cast<const unsigned*>(args.in[lane]);
      if (first) {
        acc = v;
        first = false;
        continue;
      }
      switch (op) {
        case WarpReduce::add: acc += v; break;
        case WarpReduce::umin: acc = v < acc ? v : acc; break;
        case WarpReduce::umax: acc = v > acc ? v : acc; break;
        case WarpReduce::min: acc = static_cast<int>(v) < static_cast<int>(acc) ? v : acc; break;
        case WarpReduce::max: acc = static_cast<int>(v) > static_cast<int>(acc) ? v : acc; break;
        case WarpReduce::and_: acc &= v; break;
        case WarpReduce::or_: acc |= v; break;
        case WarpReduce::xor_: acc ^= v; break;
      }
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (args.out[lane] != nullptr) *static_cast<unsigned*>(args.out[lane]) = acc;
    }
  });
  return out;
}

}  // namespace blockscope::sim
