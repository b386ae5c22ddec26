// libFuzzer targets for every reader of untrusted input (preset `fuzz`, clang): each must turn
// any byte string into a result or a blockscope::Error (bad input) — never a crash, a
// sanitizer report, another exception, a hang or a memory blow-up. One binary per target, all
// linking this file compiled once: each defines `blockscope_fuzz_target`, the name that selects
// the body below (test/fuzz/CMakeLists.txt writes the one-line definition).
//   config       a workload YAML, validated (model/config_parser.cpp)
//   set          --set overrides (one per line) on the built-in default config
//   safetensors  a .safetensors file (model/safetensors.cpp)
//   hf_config    a Hugging Face config.json given as weights.config (model/config_hf.cpp)
//   profile      a saved profile as `blockscope diff` and `report` read it, then diffed with
//                itself, tabled and made an HTML report of
//   outputs      the CLI's output paths and environment: lines VARIABLE=value (the variables
//                blockscope reads) and paths, checked and written inside a sandbox holding the
//                awkward things an output meets (symlink loop, dangling link, FIFO, directory)
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
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
#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

// The target's name, defined by each fuzz_<target> binary's own one-line source.
extern const char* const blockscope_fuzz_target;

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

// A directory of the things an output path can meet; kept across inputs, reset after each.
struct Sandbox {
  std::string dir;
  std::set<std::string> fixtures;
  Sandbox() {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/blockscope_fuzz_outputs_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir + "/directory");
    std::ofstream(dir + "/file") << "a file";
    std::ofstream(dir + "/config.yaml") << "workload: block\n";
    std::filesystem::create_symlink(dir + "/loop_b", dir + "/loop_a");
    std::filesystem::create_symlink(dir + "/loop_a", dir + "/loop_b");
    std::filesystem::create_symlink(dir + "/file", dir + "/link");
    std::filesystem::create_symlink(dir + "/missing", dir + "/dangling");
    ::mkfifo((dir + "/fifo").c_str(), 0600);
    for (const char* name : {"directory", "file", "config.yaml", "loop_a", "loop_b", "link", "dangling", "fifo"}) {
      fixtures.insert(name);
    }
  }
  ~Sandbox() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  // Removes what an input wrote (a dangling link's target included) and restores the file —
  // after checking that nothing that must never be replaced was: the links are still links,
  // the FIFO a FIFO, the directory a directory (a finding otherwise).
  void reset() const {
    std::error_code ignored;
    const auto type = [&](const char* name) { return std::filesystem::symlink_status(dir + "/" + name, ignored).type(); };
    using T = std::filesystem::file_type;
    if (type("loop_a") != T::symlink || type("loop_b") != T::symlink || type("link") != T::symlink ||
        type("dangling") != T::symlink || type("fifo") != T::fifo || type("directory") != T::directory) {
      std::fprintf(stderr, "fuzz_outputs: an output replaced a link, the FIFO or the directory\n");
      std::abort();
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
      if (fixtures.count(entry.path().filename().string()) == 0) std::filesystem::remove_all(entry.path(), ignored);
    }
    std::ofstream(dir + "/file") << "a file";
  }
};

void fuzz_outputs(const std::string& input) {
  namespace bs = blockscope;
  static const Sandbox sandbox;
  const struct ResetAfter {
    const Sandbox& sandbox;
    ~ResetAfter() { sandbox.reset(); }  // whether the input was refused or written
  } reset_after{sandbox};
  static const std::set<std::string> variables = {"COLUMNS", "OMP_NUM_THREADS", "BLOCKSCOPE_CPU_PEAK_TFLOPS",
                                                  "BLOCKSCOPE_CPU_PEAK_GBPS", "BLOCKSCOPE_PEAK_CACHE"};
  // Both peaks set (an empty value is "1"): with either unset the backend would measure them.
  ::setenv("BLOCKSCOPE_CPU_PEAK_TFLOPS", "1", 1);
  ::setenv("BLOCKSCOPE_CPU_PEAK_GBPS", "10", 1);
  ::unsetenv("COLUMNS");
  ::unsetenv("OMP_NUM_THREADS");
  std::vector<std::pair<std::string, std::string>> outputs;
  size_t start = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    const std::string line = input.substr(start, end - start);
    start = end + 1;
    const size_t equals = line.find('=');
    if (equals != std::string::npos && variables.count(line.substr(0, equals)) > 0) {
      const std::string value = line.substr(equals + 1);
      if (value.find('\0') == std::string::npos) ::setenv(line.substr(0, equals).c_str(), value.empty() ? "1" : value.c_str(), 1);
      continue;
    }
    // A path inside the sandbox: no NUL, no climbing out of it.
    std::string path = line.substr(0, line.find('\0'));
    for (size_t dots = path.find(".."); dots != std::string::npos; dots = path.find("..")) path.replace(dots, 2, "_.");
    outputs.emplace_back("--output-" + std::to_string(outputs.size()), sandbox.dir + "/" + path);
  }
  (void)bs::profiler::terminal_width();
  (void)bs::cpu::default_thread_count();
  {
    bs::Context ctx(bs::Device::cpu());
    (void)ctx.backend().info(bs::DType::f32);
  }
  bs::check_outputs(outputs, {{"config", sandbox.dir + "/config.yaml"}});
  for (const auto& [flag, path] : outputs) {
    bs::OutputFile out(path, flag);
    out.write("fuzz");
    out.commit();
  }
}

void run(const std::string& input) {
  namespace bs = blockscope;
  const std::string target = blockscope_fuzz_target;
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
    } else if (target == "outputs") {
      fuzz_outputs(input);
    } else if (target == "profile") {
      const nlohmann::json json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
      if (json.is_discarded()) return;  // not JSON: load_profile refuses it before this reader
      const bs::profiler::Profile profile = bs::profiler::profile_from_json(json, "fuzz.json");
      (void)bs::profiler::diff_profiles(profile, profile, bs::profiler::Format::table);
      (void)bs::profiler::diff_profiles(profile, profile, bs::profiler::Format::json);
      (void)bs::profiler::op_table(profile, {}, bs::profiler::Format::table);
      (void)bs::profiler::html_report({profile, profile}, {});
    } else {
      // A binary that fuzzes nothing would pass every run: a misspelt target is a crash.
      std::fprintf(stderr, "fuzz_targets.cpp: no fuzz target named '%s'\n", target.c_str());
      std::abort();
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
