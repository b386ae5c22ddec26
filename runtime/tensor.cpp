#include "runtime/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "runtime/error.h"

namespace blockscope {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  }
  return strides;
}

Storage::Storage(std::shared_ptr<Backend> backend, size_t bytes)
    : backend_(std::move(backend)), bytes_(bytes) {
  data_ = backend_->allocate(bytes);
}

Storage::Storage(std::shared_ptr<Backend> backend, void* data, size_t bytes, std::shared_ptr<void> owner)
    : backend_(std::move(backend)), data_(data), bytes_(bytes), borrowed_from_(std::move(owner)) {
  BS_CHECK(borrowed_from_ != nullptr, "borrowed memory needs an owner that keeps it alive");
}

Storage::~Storage() {
  if (!borrowed_from_) backend_->deallocate(data_, bytes_);
}

std::shared_ptr<Storage> Storage::derived(const std::string& key, size_t bytes, const std::function<void(void*)>& fill) {
  BS_CHECK(read_only_, "a copy derived from a writable storage could go stale");
  std::lock_guard<std::mutex> lock(derived_mutex_);
  std::shared_ptr<Storage>& slot = derived_[key];
  if (!slot) {
    auto copy = std::make_shared<Storage>(backend_, bytes);
    fill(copy->data());
    slot = std::move(copy);
  }
  BS_CHECK(slot->bytes() == bytes, "derived copy '", key, "' has ", slot->bytes(), " bytes, asked for ", bytes);
  return slot;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype)
    : Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype) {}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset), dtype_(dtype) {
  BS_CHECK(shape_.size() == strides_.size(), "shape ", shape_str(shape_), " vs strides ", shape_str(strides_));
  for (int64_t s : shape_) BS_CHECK(s >= 0, "negative dimension in ", shape_str(shape_));
}

int64_t Tensor::wrap_dim(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  BS_CHECK(d >= 0 && d < n, "dimension ", d, " out of range for ", str());
  return d;
}

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d)]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d)]; }
Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }
Backend& Tensor::backend() const {
  BS_CHECK(storage_ != nullptr, "undefined tensor has no backend");
  return storage_->backend();
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to misplace (strides of empty tensors are arbitrary)
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;  // a size-1 dimension's stride does not matter
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data() const {
  BS_CHECK(storage_ != nullptr, "data() of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0);
  d1 = wrap_dim(d1);
  Shape shape = shape_, strides = strides_;
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  BS_CHECK(static_cast<int64_t>(order.size()) == dim(), "permute order has ", order.size(), " dims, tensor ", str());
  std::vector<bool> seen(order.size(), false);
  Shape shape(order.size()), strides(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t d = wrap_dim(order[i]);
    BS_CHECK(!seen[d], "permute order repeats dimension ", d);
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& requested) const {
  BS_CHECK(is_contiguous(), "reshape of a non-contiguous tensor ", str(), " would need a copy");
  Shape shape = requested;
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      BS_CHECK(inferred < 0, "reshape ", shape_str(requested), " has more than one -1");
      inferred = static_cast<int64_t>(i);
    } else {
      BS_CHECK(shape[i] >= 0, "reshape to ", shape_str(requested));
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    BS_CHECK(known > 0 && numel() % known == 0, "cannot reshape ", str(), " to ", shape_str(requested));
    shape[inferred] = numel() / known;
  }
  BS_CHECK(shape_numel(shape) == numel(), "cannot reshape ", str(), " to ", shape_str(requested));
  return Tensor(storage_, shape, contiguous_strides(shape), offset_, dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  d = wrap_dim(d);
  BS_CHECK(0 <= start && start <= end && end <= shape_[d], "slice [", start, ", ", end, ") of dim ", d, " of ", str());
  Shape shape = shape_;
  shape[d] = end - start;
  return Tensor(storage_, shape, strides_, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d);
  BS_CHECK(0 <= index && index < shape_[d], "select index ", index, " of dim ", d, " of ", str());
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, shape, strides, offset_ + index * strides_[d], dtype_);
}

std::string Tensor::str() const { return std::string(dtype_name(dtype_)) + shape_str(shape_); }

namespace {

// Calls fn(element_offset, logical_index) for every element in row-major logical order.
template <typename Fn>
void for_each_offset(const Tensor& t, Fn fn) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int64_t nd = t.dim();
  std::vector<int64_t> index(nd, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(offset, i);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++index[d] < t.shape()[d]) {
        offset += t.strides()[d];
        break;
      }
      offset -= (t.shape()[d] - 1) * t.strides()[d];
      index[d] = 0;
    }
  }
}

// [lowest, highest] element offsets (relative to t.offset()) that t touches.
std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.shape()[d] - 1) * t.strides()[d];
    if (reach < 0) lo += reach; else hi += reach;
  }
  return {lo, hi};
}

}  // namespace

std::vector<float> to_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (out.empty()) return out;
  const size_t esize = dtype_size(t.dtype());
  const auto [lo, hi] = element_span(t);
  const char* base = static_cast<const char*>(t.data());
  std::vector<char> host;
  if (!t.device().is_cpu()) {  // bring the touched byte range to the host once
    host.resize(static_cast<size_t>(hi - lo + 1) * esize);
    t.backend().copy_to_host(host.data(), base + lo * static_cast<int64_t>(esize), host.size());
    base = host.data() - lo * static_cast<int64_t>(esize);
  }
  for_each_offset(t, [&](int64_t offset, int64_t i) {
    out[i] = load_as_float(t.dtype(), base + offset * static_cast<int64_t>(esize));
  });
  return out;
}

void from_floats(Tensor& t, const std::vector<float>& values) {
  BS_CHECK(static_cast<int64_t>(values.size()) == t.numel(), values.size(), " values for ", t.str());
  BS_CHECK(!t.defined() || !t.storage()->read_only(), "writing into ", t.str(),
           ", which is read-only (a loaded weight: copies derived from it would go stale)");
  if (values.empty()) return;
  const size_t esize = dtype_size(t.dtype());
  const auto [lo, hi] = element_span(t);
  char* base = static_cast<char*>(t.data());
  std::vector<char> host;
  char* target = base;
  if (!t.device().is_cpu()) {  // read-modify-write the touched range so gaps keep their bytes
    host.resize(static_cast<size_t>(hi - lo + 1) * esize);
    t.backend().copy_to_host(host.data(), base + lo * static_cast<int64_t>(esize), host.size());
    target = host.data() - lo * static_cast<int64_t>(esize);
  }
  for_each_offset(t, [&](int64_t offset, int64_t i) {
    store_from_float(t.dtype(), target + offset * static_cast<int64_t>(esize), values[i]);
  });
  if (!t.device().is_cpu()) {
    t.backend().copy_to_device(base + lo * static_cast<int64_t>(esize), host.data(), host.size());
  }
}

void fill_nan(Tensor& t) {
  from_floats(t, std::vector<float>(static_cast<size_t>(t.numel()), std::numeric_limits<float>::quiet_NaN()));
}

}  // namespace blockscope
