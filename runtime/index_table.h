// IndexTable: a small int32 table on a device — sequence positions and lengths, a KV cache's
// block table — uploaded once from the host, which keeps its own copy. Kernels read the
// device copy; CPU code and the ops' validation read the host copy (so a position past a
// cache's capacity is refused before any work, with the sequence named).
//
// A bounded table is one whose device values a kernel rewrites — a decode step replayed from
// one CUDA graph selects its positions and lengths on the device (ops/decode_step). The host
// then cannot know the values, only their range: it keeps the largest (`host`) and smallest
// (`low`) value each entry will take, and ops validate and size their launches by those
// (a grid for the longest length, a RoPE table for every position in range). CPU kernels read
// `host` as the values, so ops refuse a bounded view on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/context.h"

namespace blockscope {

// One row of an IndexTable: `count` int32 values, on the device and on the host.
struct IndexView {
  const int32_t* device = nullptr;
  const int32_t* host = nullptr;  // the values; for a bounded view each entry's largest value
  const int32_t* low = nullptr;   // bounded views only: each entry's smallest value
  int64_t count = 0;
  Device on = Device::cpu();  // where `device` points: ops refuse a table of another device
  bool defined() const { return host != nullptr; }
  bool bounded() const { return low != nullptr; }
  // Entry i (bounded: its largest value) and its smallest value (the entry itself when exact).
  int32_t operator[](int64_t i) const { return host[i]; }
  int32_t lowest(int64_t i) const { return bounded() ? low[i] : host[i]; }
};

// For ops: refuses (invalid_input) an undefined view, a view on another device than ctx's, and
// a bounded view on the CPU (its kernels read `host` as the values). `what` names the view.
void check_index_view(const Context& ctx, const char* op, const char* what, IndexView view);

class IndexTable;
// The same for a whole table the op reads or writes: defined, on ctx's device, rows × cols.
void check_index_table(const Context& ctx, const char* op, const char* what, const IndexTable& table, int64_t rows,
                       int64_t cols);

class IndexTable {
 public:
  IndexTable() = default;
  // values: rows × cols, row-major. Copied to the context's device now (a synchronous copy:
  // make tables before a CUDA graph capture, never inside one).
  IndexTable(Context& ctx, std::vector<int32_t> values, int64_t rows, int64_t cols);
  // A bounded table: each entry between low and high (same sizes), the device copy starting
  // at `low`; a kernel rewrites it through mutable_device().
  static IndexTable bounded(Context& ctx, std::vector<int32_t> low, std::vector<int32_t> high, int64_t rows,
                            int64_t cols);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool defined() const { return storage_ != nullptr; }
  IndexView row(int64_t r) const;
  const std::vector<int32_t>& host() const { return host_; }
  size_t nbytes() const { return host_.size() * sizeof(int32_t); }
  bool is_bounded() const { return !low_.empty(); }
  // The device copy, rows × cols, for the kernels that write it (a bounded table's values).
  int32_t* mutable_device() { return storage_ ? static_cast<int32_t*>(storage_->data()) : nullptr; }
  Device device() const;

 private:
  std::shared_ptr<Storage> storage_;
  std::vector<int32_t> host_;
  std::vector<int32_t> low_;  // bounded tables only
  int64_t rows_ = 0, cols_ = 0;
};

}  // namespace blockscope
