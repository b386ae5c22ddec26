// The simulated NCCL's vocabulary, shared by its in-process cliques (nccl.cpp) and its transport
// between processes (nccl_processes.cpp): one rank's call of a collective, the elements its
// buffers hold, the reduction, and the names its messages use.
#pragma once

#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "sim/cublaslt_model.h"

namespace blockscope::sim::detail::nccl {

using cublaslt::Elem;

enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast };

const char* kind_name(Kind kind);  // "ncclAllReduce", …

inline bool reduces(Kind kind) { return kind == Kind::all_reduce || kind == Kind::reduce_scatter; }

// One rank's call, as it was made. `count` is NCCL's: AllReduce/Broadcast the whole buffer,
// ReduceScatter the recvcount, AllGather the sendcount.
struct Call {
  Kind kind = Kind::all_reduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
};

// Elements a rank's send and receive buffers hold for a call over `nranks` ranks.
inline size_t send_elements(const Call& c, int nranks) {
  return c.kind == Kind::reduce_scatter ? c.count * nranks : c.count;
}
inline size_t recv_elements(const Call& c, int nranks) { return c.kind == Kind::all_gather ? c.count * nranks : c.count; }

// The reduction the subset takes (ncclSum or ncclMax), in f32: a rank's inputs are combined in
// rank order and the result rounded once to the type.
inline float combine(ncclRedOp_t op, float a, float b) { return op == ncclMax ? std::max(a, b) : a + b; }

// NCCL's names, for messages; nullptr for a value that is not one.
const char* type_name(ncclDataType_t type);
const char* op_name(ncclRedOp_t op);
// The element type of an ncclDataType_t the subset moves (f32, f16, bf16); false otherwise.
bool elem_of(ncclDataType_t type, Elem* elem);

// "0, 2, 3".
std::string rank_list(const std::vector<int>& ranks);
// The first difference between two ranks' calls of one collective, or "".
std::string disagreement(const Call& a, int rank_a, const Call& b, int rank_b);

}  // namespace blockscope::sim::detail::nccl
