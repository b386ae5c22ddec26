#include "runtime/cpu/machine_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

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

bool is_machine_key(const std::string& key) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t bar = key.find(" | ", start);
    parts.push_back(key.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 3;
  }
  // model, isa, library, threads, then NAME=VALUE parts only
  if (parts.size() < 4 || parts[0].empty() || parts[1].rfind("isa ", 0) != 0 || parts[2].empty()) return false;
  const std::string& threads = parts[3];
  const size_t space = threads.find(' ');
  if (space == 0 || space == std::string::npos || threads.substr(space) != " threads") return false;
  for (size_t i = 0; i < space; ++i)
    if (!std::isdigit(static_cast<unsigned char>(threads[i]))) return false;
  for (size_t i = 4; i < parts.size(); ++i)
    if (parts[i].find('=') == std::string::npos || parts[i].front() == '=') return false;
  return true;
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
nlohmann::json parse_cache(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(text, nullptr, false);
}

// "1073741824 bytes (1.0 GiB)".
std::string size_words(uint64_t bytes) {
  std::ostringstream out;
  out << bytes << " bytes";
  out.precision(1);
  out << std::fixed;
  if (bytes >= (uint64_t{1} << 30)) {
    out << " (" << static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30) << " GiB)";
  } else if (bytes >= (uint64_t{1} << 20)) {
    out << " (" << static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 20) << " MiB)";
  }
  return out.str();
}

// What identifies one version of a file: a rewrite in place or a rename over it changes one of these.
struct Identity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const Identity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

int64_t nanoseconds(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

// The process's memory of the cache files: what it read (to read an unchanged file once), the
// notes it gave (each said once) and the directories it gave up on (their lock held elsewhere).
struct Remembered {
  std::mutex mutex;
  std::map<std::string, std::pair<Identity, nlohmann::json>> read;
  std::set<std::string> said;
  std::set<std::string> locked_out;
};
Remembered& remembered() {
  static Remembered* state = new Remembered;  // never destroyed: used until the process ends
  return *state;
}

// Says `line` on stderr unless this process said it before.
void note_once(const std::string& line) {
  {
    std::lock_guard<std::mutex> lock(remembered().mutex);
    if (!remembered().said.insert(line).second) return;
  }
  std::cerr << "blockscope: note: " << line << "\n";
}

// The cache file at `path`: its JSON, or a discarded value where it is not a regular file, cannot
// be read or is not JSON; *too_large (and nothing read) where it holds over kMaxMachineCacheBytes.
// A file read before and unchanged since (its Identity) is not read again; one modified within
// the last second is not remembered (a rewrite within the file system's timestamp granularity
// could keep its Identity).
nlohmann::json load_cache(const std::string& path, uint64_t* too_large) {
  *too_large = 0;
  const nlohmann::json none(nlohmann::json::value_t::discarded);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return none;
  if (static_cast<uint64_t>(info.st_size) > kMaxMachineCacheBytes) {
    *too_large = static_cast<uint64_t>(info.st_size);
    return none;
  }
  const Identity identity{info.st_dev, info.st_ino, info.st_size, nanoseconds(info.st_mtim), nanoseconds(info.st_ctim)};
  {
    std::lock_guard<std::mutex> lock(remembered().mutex);
    const auto known = remembered().read.find(path);
    if (known != remembered().read.end() && known->second.first == identity) return known->second.second;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return none;
  // At most one byte over the limit: a file that grew since the stat is not read whole either.
  std::string text(static_cast<size_t>(kMaxMachineCacheBytes) + 1, '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxMachineCacheBytes) {
    *too_large = text.size();
    return none;
  }
  nlohmann::json cache = parse_cache(text);
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  if (nanoseconds(now) - identity.mtime_ns > 1000000000) {
    std::lock_guard<std::mutex> lock(remembered().mutex);
    remembered().read[path] = {identity, cache};
  }
  return cache;
}

std::string too_large_words(uint64_t bytes) {
  return "it holds " + size_words(bytes) + ", more than a cache ever does (at most " +
         std::to_string(kMaxMachineCacheBytes >> 20) + " MiB): not a cache, not read, left as it is";
}

// An exclusive flock on the directory the cache is renamed into, held while a writer reads,
// merges and renames: writers in other processes (concurrent runs, tensor-parallel ranks) wait
// their turn and merge into what the last one wrote instead of overwriting it. A directory lock
// leaves no lock file behind. Waits at most ~10 s (a stopped process holding it must not hang
// every other run): timed_out() then, and the caller writes nothing there.
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
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      ::usleep(10000);
    }
    timed_out_ = true;
  }
  ~DirectoryLock() {
    if (fd_ < 0) return;
    if (locked_) ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  bool locked() const { return locked_; }
  // Another process held the lock for the whole wait.
  bool timed_out() const { return timed_out_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
  bool timed_out_ = false;
};

}  // namespace

nlohmann::json read_machine_cache(const std::string& path) {
  if (path.empty() || !input_file_problem(path).empty()) return nlohmann::json(nlohmann::json::value_t::discarded);
  uint64_t too_large = 0;
  nlohmann::json cache = load_cache(path, &too_large);
  if (too_large > 0) note_once("not cached in '" + path + "': " + too_large_words(too_large));
  return cache;
}

bool update_machine_cache(const std::string& path, const std::string& what,
                          const std::function<bool(const nlohmann::json&)>& is_cache,
                          const std::function<void(nlohmann::json&)>& update) {
  const auto skip = [&](const std::string& why) {
    note_once("not cached in '" + path + "': " + why);
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
  const std::string directory = (resolve_error ? std::filesystem::path(path) : target).parent_path().string();
  {
    std::lock_guard<std::mutex> lock(remembered().mutex);
    if (remembered().locked_out.count(directory) > 0) return false;  // said when it happened
  }
  const DirectoryLock lock(directory);
  if (lock.timed_out()) {
    {
      std::lock_guard<std::mutex> guard(remembered().mutex);
      remembered().locked_out.insert(directory);
    }
    return skip("another process held the lock on its directory '" + (directory.empty() ? "." : directory) +
                "' for 10 s; no cache there is written by this run (its results are unaffected)");
  }
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
    uint64_t too_large = 0;
    cache = load_cache(path, &too_large);
    if (too_large > 0) return skip(too_large_words(too_large));
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
