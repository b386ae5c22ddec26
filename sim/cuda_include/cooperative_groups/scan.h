// cooperative_groups::inclusive_scan / exclusive_scan on the simulated GPU.
#pragma once

#include "reduce.h"

namespace cooperative_groups {

template <class Group, class T, class Op>
T inclusive_scan(const Group& group, T value, Op op) {
  const unsigned rank = group.thread_rank();
  T total = group.shfl(value, 0);
  for (unsigned r = 1; r < group.size(); ++r) {
    const T v = group.shfl(value, r);
    if (r <= rank) total = op(total, v);
  }
  return total;
}

template <class Group, class T>
T inclusive_scan(const Group& group, T value) {
  return inclusive_scan(group, value, plus<T>());
}

template <class Group, class T, class Op>
T exclusive_scan(const Group& group, T value, Op op) {
  const unsigned rank = group.thread_rank();
  T total{};
  bool first = true;
  for (unsigned r = 0; r < group.size(); ++r) {
    const T v = group.shfl(value, r);
    if (r < rank) {
      total = first ? v : op(total, v);
      first = false;
    }
  }
  return total;
}

template <class Group, class T>
T exclusive_scan(const Group& group, T value) {
  return exclusive_scan(group, value, plus<T>());
}

}  // namespace cooperative_groups
