// Shared by the conformance programs: plain CUDA and C++, built with nvcc-sim for the simulated GPU
// (and run in CI under every schedule) and with nvcc in CUDA builds (run by tools/device/device_check.sh
// on a GPU). Each program checks its kernel against a CPU result computed here and prints one line:
//   "ok <name>"                       exit 0
//   "MISMATCH <name>: …"              exit 1 (a wrong result)
//   "CUDA error in <name>: <message>" exit 2 (a fault: what the simulator reports)
// Built with -DPLANT, each carries one planted hazard (see the comment at its top) that the
// simulated GPU must report — as a fault or as a wrong result — under every schedule.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CONFORMANCE_CHECK(call)                                                                     \
  do {                                                                                              \
    const cudaError_t conformance_error = (call);                                                   \
    if (conformance_error != cudaSuccess) {                                                         \
      std::printf("CUDA error in %s: %s: %s\n", conformance::name, cudaGetErrorName(conformance_error), \
                  cudaGetErrorString(conformance_error));                                           \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

namespace conformance {

extern const char* name;

// Deterministic inputs: a small LCG, so a mismatch reproduces.
inline std::vector<int> random_ints(size_t n, int modulo, uint32_t seed) {
  std::vector<int> out(n);
  for (auto& v : out) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<int>((seed >> 8) % static_cast<uint32_t>(modulo));
  }
  return out;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  for (auto& v : out) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>((seed >> 8) % 2001u) / 1000.0f - 1.0f;
  }
  return out;
}

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* p = nullptr;
  CONFORMANCE_CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
  CONFORMANCE_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <typename T>
std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> host(n);
  CONFORMANCE_CHECK(cudaDeviceSynchronize());
  CONFORMANCE_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Compares element by element (floats within `tolerance`, relative); prints the verdict.
template <typename T>
int verdict(const std::vector<T>& got, const std::vector<T>& expected, double tolerance = 0.0) {
  if (got.size() != expected.size()) {
    std::printf("MISMATCH %s: %zu results, expected %zu\n", name, got.size(), expected.size());
    return 1;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), e = static_cast<double>(expected[i]);
    const bool same = tolerance == 0.0 ? g == e : std::fabs(g - e) <= tolerance * (1.0 + std::fabs(e));
    if (!same) {
      std::printf("MISMATCH %s at %zu: got %.9g, expected %.9g\n", name, i, g, e);
      return 1;
    }
  }
  std::printf("ok %s\n", name);
  return 0;
}

}  // namespace conformance
