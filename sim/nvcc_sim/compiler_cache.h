// nvcc-sim's own compiles through ccache (NVCC_SIM_CCACHE=path/to/ccache): nvcc's ptxas figures
// and the host compile of the rewritten source are cached as any other compile, so a rebuild, or
// a clone elsewhere on a machine that has built it before, skips them.
//
// A hit in another clone needs text without this checkout's path in it. ccache hashes the
// rewritten source as it is (it is already preprocessed), and its line markers name the files the
// preprocessor read; so the preprocessing step is given the paths under CCACHE_BASEDIR relative to
// the working directory, as ccache does with the commands it runs itself.
#pragma once

#include <string>
#include <vector>

namespace blockscope::sim::nvcc {

class CompilerCache {
 public:
  // From NVCC_SIM_CCACHE (empty or unset: no cache) and CCACHE_BASEDIR.
  static CompilerCache from_environment();
  CompilerCache(std::string program, std::string base_dir, std::string working_dir);

  bool enabled() const { return !program_.empty(); }
  // `command` run through ccache when enabled, unchanged otherwise.
  std::vector<std::string> wrap(std::vector<std::string> command) const;
  // `path` relative to the working directory when it is an absolute path under the base
  // directory; unchanged otherwise (and always when the cache is off).
  std::string relative(const std::string& path) const;
  // The same for the paths in compiler flags: -I DIR, -IDIR, -isystem DIR, -include FILE.
  std::vector<std::string> relative_flags(const std::vector<std::string>& flags) const;

 private:
  std::string program_, base_dir_, working_dir_;
};

}  // namespace blockscope::sim::nvcc
