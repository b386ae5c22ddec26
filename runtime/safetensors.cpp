#include "runtime/safetensors.h"

#include "runtime/error.h"

namespace blockscope {

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const auto& entry : tensors) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

SafetensorsFile read_safetensors(const std::string& path) {
  throw InputError("read_safetensors: not implemented yet (" + path + ")");
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  throw InputError("write_safetensors: not implemented yet (" + path + ")");
}

Tensor tensor_from_entry(Context& ctx, const SafetensorsEntry& entry) {
  throw InputError("tensor_from_entry: not implemented yet (" + entry.name + ")");
}

}  // namespace blockscope
