#include "model/init.h"

#include <algorithm>
#include <cmath>

#include "runtime/interrupt.h"

namespace blockscope::init {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

namespace {
// A uniform in (0, 1] from counter `counter` of the keyed stream (never 0: log() below).
double uniform_at(uint64_t key, uint64_t counter) {
  const uint64_t bits = splitmix64(key ^ splitmix64(counter));
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}
}  // namespace

double normal_at(uint64_t seed, uint64_t stream, int64_t index) {
  const uint64_t key = splitmix64(seed ^ splitmix64(stream));
  const uint64_t counter = 2 * static_cast<uint64_t>(index);
  const double u1 = uniform_at(key, counter);
  const double u2 = uniform_at(key, counter + 1);
  constexpr double kTwoPi = 6.283185307179586476925;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

std::vector<float> normal_values(uint64_t seed, const std::string& name, int64_t count, float mean, float std) {
  std::vector<float> values(static_cast<size_t>(count));
  const uint64_t stream = name_hash(name);
  // Each element depends only on its index, so any split across threads gives the same numbers.
  // In chunks, Ctrl-C answered between them: gigabytes of weights take seconds to initialise.
  constexpr int64_t kChunk = int64_t{1} << 20;
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    check_interrupted("while initialising the weights");
    const int64_t end = std::min(count, begin + kChunk);
#pragma omp parallel for schedule(static)
    for (int64_t i = begin; i < end; ++i) {
      values[static_cast<size_t>(i)] = mean + std * static_cast<float>(normal_at(seed, stream, i));
    }
  }
  return values;
}

Tensor normal_tensor(Context& ctx, const std::string& name, const Shape& shape, DType dtype, uint64_t seed, float mean,
                     float std) {
  Tensor t = ctx.empty(shape, dtype);
  from_floats(t, normal_values(seed, name, t.numel(), mean, std));
  return t;
}

Tensor constant_tensor(Context& ctx, const Shape& shape, DType dtype, float value) {
  Tensor t = ctx.empty(shape, dtype);
  from_floats(t, std::vector<float>(static_cast<size_t>(t.numel()), value));
  return t;
}

}  // namespace blockscope::init
