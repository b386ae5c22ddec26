#include "runtime/cpu/machine_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <iostream>

#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/input_file.h"
#include "runtime/output_file.h"

namespace blockscope::cpu {

namespace {

// The first /proc/cpuinfo line starting with `field`, after its colon ("" when absent).
std::string cpuinfo_field(const std::string& field) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const size_t colon = line.find(':');
    if (line.rfind(field, 0) == 0 && colon != std::string::npos) {
      return line.substr(std::min(line.size(), colon + 2));
    }
  }
  return "";
}

// 64-bit FNV-1a, as hex: a short, stable name for a long string (the CPU's feature flags).
std::string short_hash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// "off" in any case (OFF, Off): no cache -- never a file named OFF.
bool means_off(const std::string& value) {
  std::string lower;
  for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "off";
}

}  // namespace

std::string machine_key(int threads) {
  std::string model = cpuinfo_field("model name");
  if (model.empty()) model = "unknown cpu";
  const std::string flags = cpuinfo_field("flags");
  std::string key = model + " | isa " + (flags.empty() ? std::string("unknown") : short_hash(flags)) + " | " +
                    gemm_library_version() + " | " + std::to_string(threads) + " threads";
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') key += std::string(" | ") + name + "=" + value;
  }
  return key;
}

std::string machine_cache_path(const char* env_variable, const char* file_name) {
  if (const char* path = std::getenv(env_variable); path && *path) return means_off(path) ? "" : path;
  // The XDG base directory spec: a relative XDG_CACHE_HOME is invalid and ignored (it would
  // put the cache wherever the command happens to run).
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/')
    return std::string(xdg) + "/blockscope/" + file_name;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/blockscope/" + file_name;
  return "";
}

namespace {

// The file's JSON; an empty file (or only white space: one created and not yet written, a
// truncation) is an empty cache, not "something else than a cache" for good.
nlohmann::json parse_cache(std::istream& in) {
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(text, nullptr, false);
}

// An exclusive flock on the directory the cache is renamed into, held while a writer reads,
// merges and renames: writers in other processes (concurrent runs, tensor-parallel ranks) wait
// their turn and merge into what the last one wrote instead of overwriting it. A directory lock
// leaves no lock file behind. Waits at most ~10 s (a stopped process holding it must not hang
// every other run); the cache is then written unlocked, as before.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory) {
    fd_ = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) return;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        locked_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) break;
      ::usleep(10000);
    }
  }
  ~DirectoryLock() {
    if (fd_ < 0) return;
    if (locked_) ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  bool locked() const { return locked_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
};

}  // namespace

nlohmann::json read_machine_cache(const std::string& path) {
  if (path.empty() || !input_file_problem(path).empty()) return nlohmann::json(nlohmann::json::value_t::discarded);
  std::ifstream in(path);
  if (!in) return nlohmann::json(nlohmann::json::value_t::discarded);
  return parse_cache(in);
}

bool update_machine_cache(const std::string& path, const std::string& what,
                          const std::function<bool(const nlohmann::json&)>& is_cache,
                          const std::function<void(nlohmann::json&)>& update) {
  const auto skip = [&](const std::string& why) {
    std::cerr << "blockscope: note: not cached in '" << path << "': " << why << "\n";
    return false;
  };
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found)
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  // Read, merge and rename under the lock of the directory the file is renamed in (a symlink's
  // target's): another process's entry written meanwhile is read here and kept.
  std::error_code resolve_error;
  const std::filesystem::path target = std::filesystem::weakly_canonical(path, resolve_error);
  const DirectoryLock lock((resolve_error ? std::filesystem::path(path) : target).parent_path().string());
  error.clear();
  status = std::filesystem::status(path, error);
  nlohmann::json cache = nlohmann::json::object();
  if (status.type() == std::filesystem::file_type::not_found) {
    // a new cache
  } else if (error) {
    return skip(error.message() + " (the " + what + ")");  // a symlink loop, a directory that cannot be searched
  } else if (!std::filesystem::is_regular_file(status)) {
    return skip("it is not a regular file (the " + what + ")");
  } else {
    std::ifstream in(path);
    cache = parse_cache(in);
    if (!cache.is_object() || !is_cache(cache)) return skip("it holds something else than a " + what + " (each cache needs a file of its own)");
  }
  update(cache);
  try {
    OutputFile out(path, what);
    out.write(cache.dump(2) + "\n");
    out.commit();
  } catch (const Error& failure) {
    if (failure.kind() == ErrorKind::interrupted) throw;
    return skip(std::string(failure.what()) + " (the " + what + ")");
  }
  return true;
}

}  // namespace blockscope::cpu
