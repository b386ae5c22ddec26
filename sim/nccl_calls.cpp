#include "sim/nccl_calls.h"

namespace blockscope::sim::detail::nccl {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::all_gather: return "ncclAllGather";
    case Kind::broadcast: return "ncclBroadcast";
  }
  return "?";
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
    default: return nullptr;
  }
}

const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "ncclSum";
    case ncclProd: return "ncclProd";
    case ncclMax: return "ncclMax";
    case ncclMin: return "ncclMin";
    case ncclAvg: return "ncclAvg";
    default: return nullptr;
  }
}

bool elem_of(ncclDataType_t type, Elem* elem) {
  switch (type) {
    case ncclFloat32: *elem = Elem::F32; return true;
    case ncclFloat16: *elem = Elem::F16; return true;
    case ncclBfloat16: *elem = Elem::BF16; return true;
    default: return false;
  }
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string disagreement(const Call& a, int rank_a, const Call& b, int rank_b) {
  const std::string ra = "rank " + std::to_string(rank_a), rb = "rank " + std::to_string(rank_b);
  if (a.kind != b.kind) {
    return "ranks disagree on the collective: " + ra + " called " + kind_name(a.kind) + ", " + rb + " called " +
           kind_name(b.kind);
  }
  const std::string api = kind_name(a.kind);
  if (a.count != b.count) {
    return api + ": " + ra + " has count " + std::to_string(a.count) + ", " + rb + " has " + std::to_string(b.count);
  }
  if (a.type != b.type) {
    return api + ": " + ra + " has datatype " + type_name(a.type) + ", " + rb + " has " + type_name(b.type);
  }
  if (reduces(a.kind) && a.op != b.op) {
    return api + ": " + ra + " has op " + op_name(a.op) + ", " + rb + " has " + op_name(b.op);
  }
  if (a.kind == Kind::broadcast && a.root != b.root) {
    return api + ": " + ra + " has root " + std::to_string(a.root) + ", " + rb + " has " + std::to_string(b.root);
  }
  return "";
}

}  // namespace blockscope::sim::detail::nccl
