// Warp shuffles and votes on top of warp_collective (device.h): the semantics of PTX shfl.sync
// and vote.sync, including the width segments of the shuffles.
#include <cstring>
#include <string>

#include "runtime/sim/device.h"

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
  warp_collective(what, mask, &in, sizeof in, out, bytes, [mode, bytes](const WarpCollectiveArgs& args) {
    for (int lane = 0; lane < 32; ++lane) {
      if ((args.mask >> lane & 1u) == 0) continue;
      const auto& mine = *static_cast<const ShuffleOperand*>(args.in[lane]);
      int source = source_lane(mode, lane, mine.b, mine.width);
      if (source < 0) source = lane;
      if (args.mask >> source & 1u) {
        std::memcpy(args.out[lane], static_cast<const ShuffleOperand*>(args.in[source])->value, bytes);
      } else {
        std::memset(args.out[lane], 0xFF, bytes);  // undefined on a GPU: a NaN pattern here
      }
    }
  });
}

unsigned warp_vote(const char* what, unsigned mask, int predicate) {
  const int in = predicate != 0;
  unsigned out = 0;
  warp_collective(what, mask, &in, sizeof in, &out, sizeof out, [](const WarpCollectiveArgs& args) {
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if ((args.mask >> lane & 1u) && *static_cast<const int*>(args.in[lane])) ballot |= 1u << lane;
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (args.mask >> lane & 1u) *static_cast<unsigned*>(args.out[lane]) = ballot;
    }
  });
  return out;
}

}  // namespace blockscope::sim
