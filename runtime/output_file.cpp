#include "runtime/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope {

namespace fs = std::filesystem;

namespace {

enum class Kind { missing, regular, directory, other };

// What is at `path`, following symlinks.
Kind kind_of(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return Kind::missing;
  if (S_ISREG(info.st_mode)) return Kind::regular;
  if (S_ISDIR(info.st_mode)) return Kind::directory;
  return Kind::other;
}

bool is_symlink(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
}

// The file a path writes to: a symlink's target (resolved), else the path itself.
std::string resolved_target(const std::string& path) {
  if (!is_symlink(path)) return path;
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  // A dangling link: its target, relative to the link's directory.
  std::error_code error;
  const fs::path target = fs::read_symlink(path, error);
  if (error) return path;
  return target.is_absolute() ? target.string() : (fs::path(path).parent_path() / target).string();
}

std::string directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// A symlink that never reaches a file (a -> b -> a): writing "its target" would replace the
// other link.
bool is_symlink_loop(const std::string& path) {
  if (!is_symlink(path)) return false;
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) == nullptr && errno == ELOOP;
}

// Whether `path` is the process's standard output, which the tables are printed to (an output
// written there would be interleaved with them). /dev/null does not count: nothing is read
// from it.
bool is_standard_output(const std::string& path) {
  struct stat out, file;
  if (::fstat(STDOUT_FILENO, &out) != 0 || ::stat(path.c_str(), &file) != 0) return false;
  if (S_ISCHR(out.st_mode)) {
    struct stat null_device;
    if (::stat("/dev/null", &null_device) == 0 && out.st_rdev == null_device.st_rdev) return false;
  }
  return out.st_dev == file.st_dev && out.st_ino == file.st_ino;
}

// The temporary a file is written to before it is renamed over `target`: in the same directory,
// hidden, named after the file and the process — shortened so that it stays a legal name
// (NAME_MAX, 255 bytes) whatever the target's.
std::string temporary_for(const std::string& target) {
  const fs::path path(target);
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  std::string base = path.filename().string();
  if (base.size() + suffix.size() + 1 > NAME_MAX) base = base.substr(0, NAME_MAX - suffix.size() - 1);
  return (path.parent_path() / ("." + base + suffix)).string();
}

// Whether a new file can be made in `directory` — tried, not inferred from permission bits
// (root passes every access() check, yet cannot create files in /proc or on a read-only
// file system). The probe is removed at once.
std::string cannot_create_in(const std::string& directory) {
  const std::string probe = (fs::path(directory) / (".blockscope-probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return errno == EEXIST ? std::string() : std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// Why `path` cannot be an output, or "" when it can.
std::string refusal(const std::string& path) {
  if (path.empty()) return "the path is empty";
  if (path == "-") return "'-' is not a file here (standard output carries the tables): name a file";
  if (is_symlink_loop(path)) return "it is a symlink loop";
  if (is_standard_output(path)) return "it is standard output, where the tables go: name a file";
  const std::string target = resolved_target(path);
  if (fs::path(target).filename().string().size() > NAME_MAX) {
    return "its name is longer than " + std::to_string(NAME_MAX) + " bytes";
  }
  switch (kind_of(target)) {
    case Kind::directory: return "it is a directory";
    case Kind::other: {
      // A FIFO is not probed here: opening and closing it would be its reader's end of file.
      // OutputFile opens it once, without blocking, and refuses it then when no one reads it.
      if (::access(target.c_str(), W_OK) != 0) return std::string("it is not writable: ") + std::strerror(errno);
      return "";
    }
    case Kind::regular:
      if (::access(target.c_str(), W_OK) != 0) return std::string("it is not writable: ") + std::strerror(errno);
      [[fallthrough]];
    case Kind::missing: {
      // The temporary is made next to the target, so its directory must take new files.
      const std::string directory = directory_of(target);
      switch (kind_of(directory)) {
        case Kind::directory: break;
        case Kind::missing: return "its directory '" + directory + "' does not exist";
        default: return "'" + directory + "', where it would go, is not a directory";
      }
      if (::access(directory.c_str(), W_OK | X_OK) != 0) {
        return "its directory '" + directory + "' is not writable: " + std::strerror(errno);
      }
      if (const std::string why = cannot_create_in(directory); !why.empty()) {
        return "no file can be created in its directory '" + directory + "': " + why;
      }
      return "";
    }
  }
  return "";
}

}  // namespace

OutputFile::OutputFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  const std::string why = refusal(path_);
  if (!why.empty()) throw InputError("cannot write " + what_ + " '" + path_ + "': " + why);
  target_ = resolved_target(path_);
  if (kind_of(target_) == Kind::other) {
    // A device or FIFO: written in place. Opened without blocking, so a FIFO nobody reads is
    // refused (ENXIO) instead of holding the command (and Ctrl-C) in open(); then blocking
    // again, so the writes wait for a slow reader.
    const int fd = ::open(target_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO)
      throw InputError("cannot write " + what_ + " '" + path_ + "': it is a FIFO that no process is reading");
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || (file_ = ::fdopen(fd, "wb")) == nullptr) {
        const int error = errno;
        ::close(fd);
        errno = error;
      }
    }
  } else {
    temporary_ = temporary_for(target_);
    file_ = std::fopen(temporary_.c_str(), "wb");
  }
  if (file_ == nullptr) {
    const int error = errno;
    temporary_.clear();
    throw InputError("cannot write " + what_ + " '" + path_ + "': " + std::strerror(error));
  }
}

OutputFile::~OutputFile() {
  if (!committed_) discard();
}

void OutputFile::discard() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temporary_.empty()) std::remove(temporary_.c_str());
  temporary_.clear();
}

void OutputFile::write_failed(const std::string& during, int error) {
  discard();
  // A write a signal cut short (EINTR: a FIFO whose reader stalls) is the signal's, not a failure.
  check_interrupted(("while writing " + path_).c_str());
  throw Error(ErrorKind::runtime, "cannot write " + what_ + " '" + path_ + "': " + during + ": " + std::strerror(error));
}

void OutputFile::write(const void* data, size_t bytes) {
  BS_CHECK(file_ != nullptr && !committed_, "OutputFile::write after commit");
  // In chunks, with an interrupt answered between them: a report or dump of gigabytes is
  // seconds of writing.
  constexpr size_t kChunk = size_t{1} << 20;
  const char* bytes_left = static_cast<const char*>(data);
  do {
    if (interrupt_signal() != 0) {
      discard();
      check_interrupted(("while writing " + path_).c_str());
    }
    const size_t chunk = std::min(bytes, kChunk);
    if (temporary_.empty()) {
      write_in_place(bytes_left, chunk);
    } else if (chunk != 0 && std::fwrite(bytes_left, 1, chunk, file_) != chunk) {
      write_failed("write", errno);
    }
    bytes_left += chunk;
    bytes -= chunk;
  } while (bytes != 0);
}

// A device or FIFO: unbuffered write(2)s, so that a signal stops a write blocked on a reader
// that stalls. stdio would carry on after the signal's short write and block again.
void OutputFile::write_in_place(const char* data, size_t bytes) {
  const int fd = ::fileno(file_);
  while (bytes != 0) {
    const ssize_t written = ::write(fd, data, bytes);
    if (interrupt_signal() != 0) write_failed("write", EINTR);
    if (written < 0) {
      if (errno == EINTR) continue;
      write_failed("write", errno);
    }
    data += written;
    bytes -= static_cast<size_t>(written);
  }
}

void OutputFile::commit() {
  BS_CHECK(file_ != nullptr && !committed_, "OutputFile::commit twice");
  if (std::fflush(file_) != 0) write_failed("flush", errno);
  // fsync only what becomes a file: a device or FIFO may not support it.
  if (!temporary_.empty() && ::fsync(::fileno(file_)) != 0) write_failed("fsync", errno);
  // A file replaced keeps its permissions (a 0600 profile stays 0600), not the temporary's.
  struct stat replaced;
  if (!temporary_.empty() && ::stat(target_.c_str(), &replaced) == 0 && S_ISREG(replaced.st_mode) &&
      ::fchmod(::fileno(file_), replaced.st_mode & 07777) != 0)
    write_failed("chmod", errno);
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) write_failed("close", errno);
  if (!temporary_.empty() && std::rename(temporary_.c_str(), target_.c_str()) != 0) write_failed("rename", errno);
  temporary_.clear();
  committed_ = true;
}

std::string foreign_file_problem(const std::string& path) {
  const std::string target = resolved_target(path);
  struct stat info;
  if (::stat(target.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size == 0) return "";
  std::FILE* file = std::fopen(target.c_str(), "rb");
  if (file == nullptr) return "";  // unreadable: refusal() says whether it can be written
  // The head (and, for a trace, whose producer is in its last object, the tail) of the file.
  constexpr long kWindow = 64 * 1024;
  std::string head(static_cast<size_t>(std::min<long>(kWindow, static_cast<long>(info.st_size))), '\0');
  const size_t got = std::fread(head.data(), 1, head.size(), file);
  head.resize(got);
  std::string tail;
  if (info.st_size > kWindow && std::fseek(file, -kWindow, SEEK_END) == 0) {
    tail.resize(static_cast<size_t>(kWindow));
    tail.resize(std::fread(tail.data(), 1, tail.size(), file));
  }
  std::fclose(file);
  // A --dump of ours: safetensors (an 8-byte little-endian header length inside the file, then
  // the JSON header) whose header opens with blockscope's own metadata. Another safetensors file
  // (a model's weights) is not ours to replace.
  if (head.size() >= 9) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(head[static_cast<size_t>(i)]);
    if (header + 8 <= static_cast<uint64_t>(info.st_size) && head.compare(8, 30, "{\"__metadata__\":{\"blockscope\":") == 0)
      return "";
  }
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    const std::string json = head.substr(first, 256);
    // A Chrome trace (ours or another tool's: the same format).
    if (json.find("\"traceEvents\"") != std::string::npos) return "";
    // A saved profile: "format" a key of the top-level object, which save_profile indents by
    // one space on a line of its own (not a quote of it somewhere inside another document).
    const size_t format = head.find("\n \"format\": \"blockscope-profile\"");
    if (format != std::string::npos && format < 4096) return "";
    if (tail.find("\"producer\":\"blockscope\"") != std::string::npos ||
        head.find("\"producer\":\"blockscope\"") != std::string::npos)
      return "";
  }
  // An HTML report: its title ends with "blockscope report".
  if (head.rfind("<!DOCTYPE html>", 0) == 0 && head.find("blockscope report</title>") != std::string::npos) return "";
  return "it is a file blockscope did not write (not a trace, saved profile, HTML report or safetensors file)";
}

void check_output_path(const std::string& path, const std::string& flag, bool force) {
  const std::string why = refusal(path);
  if (!why.empty()) throw InputError(flag + " '" + path + "': cannot be written: " + why);
  if (force) return;
  if (const std::string foreign = foreign_file_problem(path); !foreign.empty()) {
    const std::string target = resolved_target(path);
    throw InputError(flag + " '" + path + "': refusing to replace " +
                     (target != path ? "'" + target + "' (the symlink's target): " : std::string("it: ")) + foreign +
                     "; name another file, or pass --force to replace it");
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat info_a, info_b;
  if (::stat(a.c_str(), &info_a) == 0 && ::stat(b.c_str(), &info_b) == 0) {
    return info_a.st_dev == info_b.st_dev && info_a.st_ino == info_b.st_ino;
  }
  std::error_code error_a, error_b;
  const fs::path normal_a = fs::weakly_canonical(fs::absolute(resolved_target(a)), error_a);
  const fs::path normal_b = fs::weakly_canonical(fs::absolute(resolved_target(b)), error_b);
  return !error_a && !error_b && normal_a == normal_b;
}

void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs, bool force) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [role, input] : inputs) {
      if (!input.empty() && same_file(path, input)) {
        throw InputError(flag + " '" + path + "' is the " + role + " '" + input + "': it would be overwritten");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].second.empty() && same_file(path, outputs[j].second)) {
        throw InputError(flag + " '" + path + "' is the same file as " + outputs[j].first + " '" + outputs[j].second +
                         "': one would overwrite the other");
      }
    }
    check_output_path(path, flag, force);
  }
}

}  // namespace blockscope
