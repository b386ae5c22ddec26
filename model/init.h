// Seeded, counter-based initialisation: element i of the tensor named `name` is a pure function
// of (seed, name, i). The numbers are therefore the same whatever the device, the thread count
// or the order of generation; they are generated on the host and copied to the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/tensor.h"

namespace blockscope::init {

// SplitMix64 finaliser: a bijective 64-bit mixer (Steele, Lea, Flood 2014).
uint64_t splitmix64(uint64_t x);
// FNV-1a of the name: gives each tensor its own stream.
uint64_t name_hash(const std::string& name);

// Standard normal number `index` of stream (seed, stream): Box-Muller on two uniforms drawn
// from counters 2·index and 2·index + 1.
double normal_at(uint64_t seed, uint64_t stream, int64_t index);

// `count` values mean + std · N(0, 1) of the stream (seed, name_hash(name)).
std::vector<float> normal_values(uint64_t seed, const std::string& name, int64_t count, float mean, float std);

// Tensors on ctx's device, rounded to `dtype`.
Tensor normal_tensor(Context& ctx, const std::string& name, const Shape& shape, DType dtype, uint64_t seed,
                     float mean, float std);
Tensor constant_tensor(Context& ctx, const Shape& shape, DType dtype, float value);

}  // namespace blockscope::init
