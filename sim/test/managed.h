// Managed memory for the simulator's own tests: kernels and the test read and write it directly
// (host memory is not GPU memory: a kernel touching it faults on the simulated GPU too).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace blockscope::sim::test {

template <typename T>
class Managed {
 public:
  explicit Managed(size_t n = 1, const T& fill = T{}) : n_(n) {
    void* p = nullptr;
    cudaMallocManaged(&p, n * sizeof(T));
    data_ = static_cast<T*>(p);
    for (size_t i = 0; i < n; ++i) data_[i] = fill;
  }
  ~Managed() { cudaFree(data_); }
  Managed(const Managed&) = delete;
  Managed& operator=(const Managed&) = delete;

  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }
  T& operator*() const { return *data_; }
  size_t size() const { return n_; }
  std::vector<T> vector() const { return std::vector<T>(data_, data_ + n_); }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace blockscope::sim::test
