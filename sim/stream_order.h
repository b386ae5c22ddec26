// Internal to the simulated GPU: the streams check's record of what one queued op touched
// (streams_check.cpp keeps the history and the ordering; checks.cpp records kernels' accesses
// into it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace blockscope::sim::detail {

// A vector clock: per stream (CUstream_st::id), how many of its ops are ordered before this point.
using Clock = std::map<uint64_t, uint64_t>;

// One op queued on a stream.
struct OpOrder {
  uint64_t stream = 0;  // its stream's id
  uint64_t tick = 0;    // its place on its stream: clock[stream] == tick
  int device = 0;
  bool legacy = false;
  std::string name;     // the op's name (a kernel's name for a launch)
  Clock clock;          // the ops ordered before it, itself included
};

// Byte ranges an op read or wrote in one allocation, each with its first access for messages.
// Kept to kMaxSpans: beyond that a span grows to take in the nearest (a coarser record).
struct Span {
  uintptr_t lo, hi;
  const void* pc;     // the instrumented access (kernels), or null
  uint64_t block;     // linear block index of that access
  unsigned thread;    // linear thread index in the block; UINT32_MAX: not a kernel thread
};
struct SpanSet {
  static constexpr size_t kMaxSpans = 16;
  std::vector<Span> spans;
  size_t last = 0;
  void add(uintptr_t lo, uintptr_t hi, const void* pc, uint64_t block, unsigned thread) {
    if (!spans.empty()) {
      Span& s = spans[last];
      if (lo <= s.hi && hi >= s.lo) {
        s.lo = lo < s.lo ? lo : s.lo;
        s.hi = hi > s.hi ? hi : s.hi;
        return;
      }
    }
    size_t nearest = 0;
    uintptr_t distance = UINTPTR_MAX;
    for (size_t i = 0; i < spans.size(); ++i) {
      Span& s = spans[i];
      if (lo <= s.hi && hi >= s.lo) {
        s.lo = lo < s.lo ? lo : s.lo;
        s.hi = hi > s.hi ? hi : s.hi;
        last = i;
        return;
      }
      const uintptr_t d = lo > s.hi ? lo - s.hi : s.lo - hi;
      if (d < distance) distance = d, nearest = i;
    }
    if (spans.size() < kMaxSpans) {
      spans.push_back(Span{lo, hi, pc, block, thread});
      last = spans.size() - 1;
      return;
    }
    Span& s = spans[nearest];
    s.lo = lo < s.lo ? lo : s.lo;
    s.hi = hi > s.hi ? hi : s.hi;
    last = nearest;
  }
};
struct OpAccesses {
  SpanSet reads, writes;
};

// What the running op touched, by allocation base.
struct OpLog {
  std::shared_ptr<const OpOrder> order;
  std::unordered_map<uintptr_t, OpAccesses> by_allocation;
};

// The running op's log; null when no op runs or the streams check is off.
OpLog* current_op_log();

}  // namespace blockscope::sim::detail
