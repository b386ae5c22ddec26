// libFuzzer targets for every reader of untrusted input (preset `fuzz`, clang): each must turn
// any byte string into a result or a blockscope::Error (bad input) — never a crash, a
// sanitizer report, another exception, a hang or a memory blow-up. One binary per target:
// BLOCKSCOPE_FUZZ_TARGET selects the body below (test/fuzz/CMakeLists.txt).
//   config       a workload YAML, validated (model/config_parser.cpp)
//   set          --set overrides (one per line) on the built-in default config
//   safetensors  a .safetensors file (model/safetensors.cpp)
//   hf_config    a Hugging Face config.json given as weights.config (model/config_hf.cpp)
//   profile      a saved profile as `blockscope diff` and `report` read it, then diffed with
//                itself, tabled and made an HTML report of
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/safetensors.h"
#include "profiler/diff.h"
#include "profiler/html_report.h"
#include "profiler/profile_io.h"
#include "profiler/table.h"
#include "runtime/error.h"

namespace {

// A file holding `bytes`, for the readers that take a path (one per process and extension,
// rewritten for every input, removed when the process exits).
std::string as_file(const std::string& bytes, const char* extension) {
  static struct Written {
    std::set<std::string> paths;
    ~Written() {
      for (const std::string& path : paths) std::remove(path.c_str());
    }
  } written;
  const char* directory = std::getenv("TMPDIR");
  const std::string path = std::string(directory != nullptr && *directory != '\0' ? directory : "/tmp") +
                           "/blockscope_fuzz_" + std::to_string(::getpid()) + extension;
  written.paths.insert(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

void run(const std::string& input) {
  namespace bs = blockscope;
  const std::string target = BLOCKSCOPE_FUZZ_TARGET;
  try {
    if (target == "config") {
      bs::load_config_text(input, "fuzz.yaml");
    } else if (target == "set") {
      std::vector<std::string> sets;
      size_t start = 0;
      while (start <= input.size()) {
        const size_t end = input.find('\n', start);
        sets.push_back(input.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
      }
      bs::load_default_config(sets);
    } else if (target == "safetensors") {
      const bs::SafetensorsFile file = bs::read_safetensors(as_file(input, ".safetensors"));
      for (const bs::SafetensorsEntry& entry : file.tensors) (void)file.find(entry.name);
    } else if (target == "hf_config") {
      const std::string path = as_file(input, ".json");
      bs::load_config_text("workload: block\nweights: {config: " + path + "}\ninput: {batch: 1, seq_len: 4}\n",
                           "fuzz.yaml");
    } else if (target == "profile") {
      const nlohmann::json json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
      if (json.is_discarded()) return;  // not JSON: load_profile refuses it before this reader
      const bs::profiler::Profile profile = bs::profiler::profile_from_json(json, "fuzz.json");
      (void)bs::profiler::diff_profiles(profile, profile, bs::profiler::Format::table);
      (void)bs::profiler::diff_profiles(profile, profile, bs::profiler::Format::json);
      (void)bs::profiler::op_table(profile, {}, bs::profiler::Format::table);
      (void)bs::profiler::html_report({profile, profile}, {});
    }
  } catch (const bs::Error& error) {
    // Bad input, refused with a message: what every reader must do with garbage.
    if (error.kind() != bs::ErrorKind::invalid_input) throw;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
