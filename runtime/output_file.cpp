#include "runtime/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

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

// Why `path` cannot be an output, or "" when it can.
std::string refusal(const std::string& path) {
  if (path.empty()) return "the path is empty";
  const std::string target = resolved_target(path);
  switch (kind_of(target)) {
    case Kind::directory: return "it is a directory";
    case Kind::other:
      return ::access(target.c_str(), W_OK) == 0 ? "" : std::string("it is not writable: ") + std::strerror(errno);
    case Kind::regular:
      if (::access(target.c_str(), W_OK) != 0) return std::string("it is not writable: ") + std::strerror(errno);
      [[fallthrough]];
    case Kind::missing: {
      // The temporary is made next to the target, so its directory must take new files.
      const std::string directory = directory_of(target);
      if (kind_of(directory) != Kind::directory) return "its directory '" + directory + "' does not exist";
      if (::access(directory.c_str(), W_OK | X_OK) != 0) {
        return "its directory '" + directory + "' is not writable: " + std::strerror(errno);
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
    file_ = std::fopen(target_.c_str(), "wb");  // a device or FIFO: in place
  } else {
    const fs::path target(target_);
    temporary_ = (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid())))
                     .string();
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
  throw Error(ErrorKind::runtime, "cannot write " + what_ + " '" + path_ + "': " + during + ": " + std::strerror(error));
}

void OutputFile::write(const void* data, size_t bytes) {
  BS_CHECK(file_ != nullptr && !committed_, "OutputFile::write after commit");
  if (interrupt_signal() != 0) {
    discard();
    check_interrupted(("while writing " + path_).c_str());
  }
  if (bytes != 0 && std::fwrite(data, 1, bytes, file_) != bytes) write_failed("write", errno);
}

void OutputFile::commit() {
  BS_CHECK(file_ != nullptr && !committed_, "OutputFile::commit twice");
  if (std::fflush(file_) != 0) write_failed("flush", errno);
  // fsync only what becomes a file: a device or FIFO may not support it.
  if (!temporary_.empty() && ::fsync(::fileno(file_)) != 0) write_failed("fsync", errno);
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) write_failed("close", errno);
  if (!temporary_.empty() && std::rename(temporary_.c_str(), target_.c_str()) != 0) write_failed("rename", errno);
  temporary_.clear();
  committed_ = true;
}

void check_output_path(const std::string& path, const std::string& flag) {
  const std::string why = refusal(path);
  if (!why.empty()) throw InputError(flag + " '" + path + "': cannot be written: " + why);
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
                   const std::vector<std::pair<std::string, std::string>>& inputs) {
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
    check_output_path(path, flag);
  }
}

}  // namespace blockscope
