#include "runtime/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope {

std::string input_file_problem(const std::string& path) {
  if (path == "-") return "";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return errno == ENOENT ? std::string("no such file") : std::string("cannot be read: ") + std::strerror(errno);
  }
  if (S_ISDIR(info.st_mode)) return "it is a directory";
  if (!S_ISREG(info.st_mode)) return "it is a FIFO or a device, not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return std::string("not readable: ") + std::strerror(errno);
  return "";
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const auto fail = [&](const std::string& problem) -> std::string {
    check_interrupted(("while reading " + path).c_str());  // a read a signal cut short (EINTR)
    throw InputError(what + " '" + path + "': " + problem);
  };
  const auto too_large = [&] {
    return fail("larger than " + std::to_string(max_bytes) + " bytes, the most a " + what + " may hold");
  };
  std::string text;
  if (path == "-") {
    // In chunks: a stream without end (`yes | blockscope run -`) stops at the limit, and an
    // interrupt is answered between chunks.
    char chunk[1 << 16];
    while (std::cin.read(chunk, sizeof(chunk)) || std::cin.gcount() > 0) {
      text.append(chunk, static_cast<size_t>(std::cin.gcount()));
      if (text.size() > max_bytes) too_large();
      check_interrupted(("while reading " + what + " from standard input").c_str());
    }
    // The loop also ends when a signal cuts a blocked read short (EINTR): never parse half a file.
    check_interrupted(("while reading " + what + " from standard input").c_str());
    if (std::cin.bad()) fail(std::string("standard input cannot be read: ") + std::strerror(errno));
    return text;
  }
  if (const std::string problem = input_file_problem(path); !problem.empty()) fail(problem);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(std::string("cannot be opened: ") + std::strerror(errno));
  const std::streamoff size = in.tellg();
  if (size < 0) fail("cannot determine its size");
  if (static_cast<uint64_t>(size) > max_bytes) too_large();
  text.resize(static_cast<size_t>(size));
  in.seekg(0);
  // In chunks, with an interrupt answered between them: a saved profile may hold gigabytes.
  constexpr std::streamoff kChunk = std::streamoff{1} << 20;
  for (std::streamoff done = 0; done < size; done += kChunk) {
    check_interrupted(("while reading " + path).c_str());
    const std::streamoff chunk = std::min(kChunk, size - done);
    if (!in.read(text.data() + done, chunk)) fail("cannot be read");
  }
  return text;
}

}  // namespace blockscope
