// --set key.sub=value overrides, applied to the YAML tree before it is read.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <sstream>

#include "model/config_reader.h"
#include "runtime/error.h"

namespace blockscope::config_reader {

void apply_set(YAML::Node& root, const std::string& text, Reader& reader) {
  const std::string label = "--set " + text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(label + ": expected key.sub=value, e.g. --set model.d_model=256");
  }
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream stream(key);
  for (std::string part; std::getline(stream, part, '.');) {
    if (part.empty()) throw InputError(label + ": empty name in key '" + key + "'");
    parts.push_back(part);
  }
  if (key.back() == '.') throw InputError(label + ": empty name in key '" + key + "'");
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw InputError(label + ": the value is not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) throw InputError(label + ": the config is not a map of keys");
  YAML::Node current(root);
  std::string walked;
  std::vector<std::string> created;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked = child_path(walked, parts[i]);
    if (current.IsSequence()) {
      char* end = nullptr;
      const long index = std::strtol(parts[i].c_str(), &end, 10);
      if (*end != '\0' || index < 0 || static_cast<size_t>(index) >= current.size()) {
        throw InputError(label + ": '" + walked + "' is not an index of the list (it has " +
                         std::to_string(current.size()) + " entries)");
      }
      YAML::Node next = current[static_cast<size_t>(index)];
      current.reset(next);
      continue;
    }
    if (!current.IsMap()) throw InputError(label + ": '" + walked + "' is inside a value that is not a map");
    YAML::Node next = current[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      current[parts[i]] = YAML::Node(YAML::NodeType::Map);
      created.push_back(walked);  // a map made by this --set: errors about it name the --set
    } else if (!next.IsMap() && !next.IsSequence()) {
      throw InputError(label + ": '" + walked + "' is a value (" + describe_node(next) + "), not a map of keys");
    }
    YAML::Node child = current[parts[i]];
    current.reset(child);
  }
  if (current.IsSequence()) throw InputError(label + ": cannot set a key inside a list; set the whole list instead");
  current[parts.back()] = value;
  // Later overrides of a parent replace earlier ones of its children.
  auto& origins = reader.origins();
  for (auto it = origins.begin(); it != origins.end();) {
    if (it->first.rfind(key + ".", 0) == 0) it = origins.erase(it);
    else ++it;
  }
  origins[key] = Origin{label, false};
  for (const std::string& path : created) origins[path] = Origin{label, false};
}

}  // namespace blockscope::config_reader
