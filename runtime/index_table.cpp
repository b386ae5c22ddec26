#include "runtime/index_table.h"

#include "runtime/error.h"

namespace blockscope {

IndexTable::IndexTable(Context& ctx, std::vector<int32_t> values, int64_t rows, int64_t cols)
    : host_(std::move(values)), rows_(rows), cols_(cols) {
  BS_CHECK(rows >= 0 && cols >= 0 && static_cast<int64_t>(host_.size()) == rows * cols, "IndexTable: ",
           host_.size(), " values for [", rows, ", ", cols, "]");
  storage_ = std::make_shared<Storage>(ctx.backend_ptr(), nbytes());
  if (!host_.empty()) ctx.backend().copy_to_device(storage_->data(), host_.data(), nbytes());
}

IndexView IndexTable::row(int64_t r) const {
  BS_CHECK(r >= 0 && r < rows_, "IndexTable: row ", r, " of ", rows_);
  const int64_t at = r * cols_;
  return IndexView{static_cast<const int32_t*>(storage_->data()) + at, host_.data() + at, cols_, storage_->device()};
}

}  // namespace blockscope
