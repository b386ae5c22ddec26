// Tensor: shape, strides (in elements), dtype, device and shared storage.
// Views (transpose, permute, reshape of a contiguous tensor, slice) never copy: they share the
// storage and change only metadata, as aten::t / view / narrow do.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/dtype.h"

namespace blockscope {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[8, 16, 1024, 64]"
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// A block of device memory, returned to its backend when the last tensor using it goes.
class Storage {
 public:
  Storage(std::shared_ptr<Backend> backend, size_t bytes);
  // Memory someone else allocated (a NumPy array, a torch tensor through DLPack): used in place,
  // never freed here; `owner` is held as long as the storage lives and keeps that memory valid.
  // Not counted in the backend's memory statistics, which are of what blockscope allocated.
  Storage(std::shared_ptr<Backend> backend, void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return backend_->device(); }
  Backend& backend() const { return *backend_; }

  // Weights are read-only once loaded (Workload): from_floats and fill_nan refuse them, and a
  // copy derived from them (a GEMM library's packed layout of a weight) stays valid for as long
  // as the storage lives. There is no way back.
  void set_read_only() { read_only_ = true; }
  bool read_only() const { return read_only_; }
  // A copy derived from this read-only storage under `key`: `bytes` on the same backend (so the
  // allocator statistics count it), written by `fill` on first use, kept and freed with this
  // storage.
  std::shared_ptr<Storage> derived(const std::string& key, size_t bytes, const std::function<void(void*)>& fill);

 private:
  std::shared_ptr<Backend> backend_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<void> borrowed_from_;  // set: the memory is someone else's
  bool read_only_ = false;
  std::mutex derived_mutex_;
  std::map<std::string, std::shared_ptr<Storage>> derived_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (defined() is false)
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype);
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  Backend& backend() const;

  // Address of element [0, 0, ...] (storage + offset).
  void* data() const;
  template <typename T>
  T* data_as() const { return static_cast<T*>(data()); }

  // Views (no copy).
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor reshape(const Shape& shape) const;  // needs a contiguous tensor; one -1 allowed
  Tensor slice(int64_t d, int64_t start, int64_t end) const;  // [start, end) along d
  Tensor select(int64_t d, int64_t index) const;               // drops dimension d

  // "bf16[8, 1024, 768]".
  std::string str() const;

 private:
  int64_t wrap_dim(int64_t d) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

// ---- Host helpers (any device; copies through the host where needed) ----

// Every element in logical (row-major) order, converted to float; follows strides.
std::vector<float> to_floats(const Tensor& t);
// Writes `values` (logical order, numel of them) into `t`, rounding to t's dtype. `t` may be
// strided and on any device.
void from_floats(Tensor& t, const std::vector<float>& values);
// Sets every element of `t` to NaN (tests poison outputs so unwritten elements show).
void fill_nan(Tensor& t);

}  // namespace blockscope
