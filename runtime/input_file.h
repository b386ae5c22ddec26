// Files blockscope reads as input — configs, Hugging Face config.json, saved profiles,
// safetensors — are regular files: a device (/dev/zero, /dev/urandom) would be read until memory
// runs out, a FIFO would block until something writes to it (and Ctrl-C would wait with it), a
// directory is a mistake. Each reader also has a size limit, checked before a byte is read.
// Standard input ("-", where a reader takes it) is read in chunks up to the same limit.
#pragma once

#include <cstdint>
#include <string>

namespace blockscope {

// What is wrong with `path` as an input file ("it is a directory", "it is a FIFO or a device
// (not a regular file)", "no such file", "not readable: ..."), or "" when it is a readable
// regular file. `path` "-" is fine (standard input).
std::string input_file_problem(const std::string& path);
// The whole of `path` (standard input for "-"). InputError "<what> '<path>': <problem>" when it
// is not a readable regular file or holds more than `max_bytes`.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace blockscope
