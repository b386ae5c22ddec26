// Output files (--dump, --trace, --save) written so that a reader never sees half of one, a
// failure leaves nothing behind, and nothing already at the path is damaged:
//   - a new path, or an existing regular file: the bytes go to a temporary in the same
//     directory, are flushed to disk, and commit() renames the temporary over the path;
//   - a symlink: the same at the file it points to (the link stays a link);
//   - any other existing file — a character device such as /dev/null, a FIFO: written in
//     place (renaming a file over /dev/null would replace the device);
//   - a directory, a missing or unwritable directory: refused (InputError) before anything
//     is written.
// A problem with the path itself is bad input (exit 2); a failure while writing — no space
// left, an I/O error — is a runtime failure (exit 3). Either way the message names the file.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace blockscope {

class OutputFile {
 public:
  // `what` names the file in messages: "trace", "profile", "safetensors file".
  OutputFile(std::string path, std::string what);
  ~OutputFile();  // before commit(): the temporary is removed, the path untouched
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Flushes (and for files, fsyncs), closes and puts the file in place.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void write_failed(const std::string& during, int error);
  void write_in_place(const char* data, size_t bytes);
  void discard();

  std::string path_, what_;
  std::string target_;     // the file written: path_, or a symlink's target
  std::string temporary_;  // empty when written in place
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// Checks, before any work, that `path` can be written as an output (the rules above) and
// names `flag` ("--trace") in the error. Does not create anything. Without `force`, an existing
// non-empty regular file — or a symlink's target — is replaced only when it is a file of
// blockscope's output formats (foreign_file_problem): a config, a system file or a source
// file named by mistake stays as it was.
void check_output_path(const std::string& path, const std::string& flag, bool force = false);

// Why replacing what `path` names would lose a file blockscope did not write, or "" when it is
// missing, empty, not a regular file (a device, a FIFO), or one of blockscope's outputs: a
// Chrome trace, a saved profile ("format": "blockscope-profile" a key of its top-level object),
// a file with blockscope as its producer, an HTML report of blockscope, a --dump (safetensors
// whose header opens with blockscope's metadata; a model's weights are not ours).
std::string foreign_file_problem(const std::string& path);

// True when a and b name the same file: the same device and inode when both exist, else the
// same absolute, normalised path.
bool same_file(const std::string& a, const std::string& b);

// Refuses (InputError) an output that is an input or the same file as another output, and
// checks each with check_output_path. outputs/inputs: {flag or role, path}; empty paths are
// skipped.
void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs, bool force = false);

}  // namespace blockscope
