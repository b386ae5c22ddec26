// cooperative_groups::reduce and its operators on the simulated GPU (see ../cooperative_groups.h).
#pragma once

#include <utility>

#include "../cooperative_groups.h"

namespace cooperative_groups {

template <class T>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T>
struct less {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T>
struct greater {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T>
struct bit_and {
  T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T>
struct bit_or {
  T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T>
struct bit_xor {
  T operator()(const T& a, const T& b) const { return a ^ b; }
};

// Every thread of the group gets op applied over all members' values (in rank order pairs).
template <class Group, class T, class Op>
T reduce(const Group& group, T value, Op op) {
  const unsigned n = group.size();
  // Gather by rank so that any group (tile or coalesced) reduces the same way.
  T total = group.shfl(value, 0);
  for (unsigned r = 1; r < n; ++r) total = op(total, group.shfl(value, r));
  return total;
}

}  // namespace cooperative_groups
