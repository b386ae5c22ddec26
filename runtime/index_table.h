// IndexTable: a small int32 table on a device — sequence positions and lengths, a KV cache's
// block table — uploaded once from the host, which keeps its own copy. Kernels read the
// device copy; CPU code and the ops' validation read the host copy (so a position past a
// cache's capacity is refused before any work, with the sequence named).
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
  const int32_t* host = nullptr;
  int64_t count = 0;
  Device on = Device::cpu();  // where `device` points: ops refuse a table of another device
  bool defined() const { return host != nullptr; }
  int32_t operator[](int64_t i) const { return host[i]; }
};

class IndexTable {
 public:
  IndexTable() = default;
  // values: rows × cols, row-major. Copied to the context's device now (a synchronous copy:
  // make tables before a CUDA graph capture, never inside one).
  IndexTable(Context& ctx, std::vector<int32_t> values, int64_t rows, int64_t cols);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool defined() const { return storage_ != nullptr; }
  IndexView row(int64_t r) const;
  const std::vector<int32_t>& host() const { return host_; }
  size_t nbytes() const { return host_.size() * sizeof(int32_t); }

 private:
  std::shared_ptr<Storage> storage_;
  std::vector<int32_t> host_;
  int64_t rows_ = 0, cols_ = 0;
};

}  // namespace blockscope
