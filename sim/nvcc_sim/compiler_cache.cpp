#include "sim/nvcc_sim/compiler_cache.h"

#include <cstdlib>
#include <filesystem>

namespace blockscope::sim::nvcc {

namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

CompilerCache CompilerCache::from_environment() {
  std::error_code error;
  const fs::path cwd = fs::current_path(error);
  return CompilerCache(environment("NVCC_SIM_CCACHE"), environment("CCACHE_BASEDIR"), error ? "" : cwd.string());
}

CompilerCache::CompilerCache(std::string program, std::string base_dir, std::string working_dir)
    : program_(std::move(program)), base_dir_(std::move(base_dir)), working_dir_(std::move(working_dir)) {
  // ccache takes only an absolute base directory; a relative one means none.
  if (!base_dir_.empty() && base_dir_[0] != '/') base_dir_.clear();
  while (base_dir_.size() > 1 && base_dir_.back() == '/') base_dir_.pop_back();
}

std::vector<std::string> CompilerCache::wrap(std::vector<std::string> command) const {
  if (enabled()) command.insert(command.begin(), program_);
  return command;
}

std::string CompilerCache::relative(const std::string& path) const {
  if (!enabled() || base_dir_.empty() || working_dir_.empty() || path.empty() || path[0] != '/') return path;
  if (path != base_dir_ && !starts_with(path, base_dir_ == "/" ? "/" : base_dir_ + "/")) return path;
  const fs::path relative = fs::path(path).lexically_normal().lexically_relative(fs::path(working_dir_).lexically_normal());
  return relative.empty() ? path : relative.string();
}

std::vector<std::string> CompilerCache::relative_flags(const std::vector<std::string>& flags) const {
  std::vector<std::string> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    const bool takes_next = (f == "-I" || f == "-isystem" || f == "-include") && i + 1 < flags.size();
    if (takes_next) {
      out.push_back(f);
      out.push_back(relative(flags[++i]));
    } else if (starts_with(f, "-I") && f.size() > 2) {
      out.push_back("-I" + relative(f.substr(2)));
    } else {
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace blockscope::sim::nvcc
