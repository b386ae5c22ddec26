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

IndexTable IndexTable::bounded(Context& ctx, std::vector<int32_t> low, std::vector<int32_t> high, int64_t rows,
                               int64_t cols) {
  BS_CHECK(low.size() == high.size(), "IndexTable::bounded: ", low.size(), " lowest and ", high.size(),
           " highest values");
  for (size_t i = 0; i < low.size(); ++i)
    BS_CHECK(low[i] <= high[i], "IndexTable::bounded: entry ", i, " has lowest ", low[i], " above highest ", high[i]);
  IndexTable table(ctx, low, rows, cols);  // the device starts at the lowest values
  table.low_ = std::move(low);
  table.host_ = std::move(high);
  return table;
}

IndexView IndexTable::row(int64_t r) const {
  BS_CHECK(r >= 0 && r < rows_, "IndexTable: row ", r, " of ", rows_);
  const int64_t at = r * cols_;
  return IndexView{static_cast<const int32_t*>(storage_->data()) + at, host_.data() + at,
                   low_.empty() ? nullptr : low_.data() + at, cols_, storage_->device()};
}

void check_index_view(const Context& ctx, const char* op, const char* what, IndexView view) {
  BS_CHECK_INPUT(view.defined(), op, ": ", what, " is undefined");
  BS_CHECK_INPUT(view.on == ctx.device(), op, ": ", what, " is on ", view.on.str(), " but the context runs on ",
                 ctx.device().str(), " (make IndexTables with the context that runs the op)");
  BS_CHECK_INPUT(!view.bounded() || !ctx.device().is_cpu(), op, ": ", what,
                 " is a bounded table (values chosen on the device, e.g. a decode step replayed from a CUDA "
                 "graph); the CPU kernels need its values");
}

void check_index_table(const Context& ctx, const char* op, const char* what, const IndexTable& table, int64_t rows,
                       int64_t cols) {
  BS_CHECK_INPUT(table.defined(), op, ": ", what, " is undefined");
  BS_CHECK_INPUT(table.device() == ctx.device(), op, ": ", what, " is on ", table.device().str(),
                 " but the context runs on ", ctx.device().str(), " (make IndexTables with the context that runs the op)");
  BS_CHECK_INPUT(table.rows() == rows && table.cols() == cols, op, ": ", what, " is [", table.rows(), ", ",
                 table.cols(), "], expected [", rows, ", ", cols, "]");
}

Device IndexTable::device() const {
  BS_CHECK(storage_ != nullptr, "IndexTable::device() of an empty table");
  return storage_->device();
}

}  // namespace blockscope
