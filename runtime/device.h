// Where a tensor lives and where work runs.
#pragma once

#include <string>

namespace blockscope {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return Device{DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return Device{DeviceType::cuda, index}; }

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }

  // "cpu", "cuda:0".
  std::string str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }
};

// Parses "cpu", "cuda", "cuda:N". ("auto" is resolved by the caller.) False if malformed.
bool parse_device(const std::string& text, Device* out);

}  // namespace blockscope
