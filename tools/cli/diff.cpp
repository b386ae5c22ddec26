// blockscope diff: what changed between two saved profiles.
#include "tools/cli/commands.h"

#include <iostream>

#include "profiler/diff.h"
#include "profiler/profile_io.h"
#include "runtime/error.h"

namespace blockscope::cli {

int diff_command(Session& session, const std::string& before, const std::string& after) {
  const profiler::Format format = session.format();
  if (before == "-" && after == "-") {
    throw InputError("diff: '-' given twice: standard input can be read once (save one of the profiles to a file)");
  }
  const profiler::Profile a = profiler::load_profile_or_torch_trace(before);
  const profiler::Profile b = profiler::load_profile_or_torch_trace(after);
  // Said on stderr whatever the format (the text and JSON diffs also carry them).
  for (const std::string& line : profiler::profile_mismatches(a, b)) std::cerr << "blockscope: warning: " << line << "\n";
  profiler::TextLayout layout;
  layout.max_width = profiler::terminal_width();
  std::cout << profiler::diff_profiles(a, b, format, layout) << "\n";
  return 0;
}

}  // namespace blockscope::cli
