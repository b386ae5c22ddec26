// blockscope report: one HTML report from saved profiles (blockscope profile --save), each a
// variant; the first is the base every diff compares against.
#include "tools/cli/commands.h"

#include <algorithm>
#include <iostream>

#include "profiler/html_report.h"
#include "profiler/profile_io.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace blockscope::cli {

int report_command(Session& session, const std::vector<std::string>& inputs, const std::string& output,
                   const std::string& title) {
  // Under mpirun every rank was given this report (main.cpp's agreement compared them): rank 0
  // alone reads the profiles and writes it, as for profile's outputs (every rank used to write
  // the same file and say "wrote report" once each). An error on rank 0 still ends every rank.
  if (session.rank != 0) return 0;
  // The output is checked before anything is read: not one of the inputs, writable.
  if (std::count(inputs.begin(), inputs.end(), "-") > 1) {
    throw InputError("report: '-' given more than once: standard input can be read once");
  }
  std::vector<std::pair<std::string, std::string>> named_inputs;
  for (const std::string& input : inputs) named_inputs.push_back({"profile", input == "-" ? "" : input});
  blockscope::check_outputs({{"--output", output}}, named_inputs, session.options.force);
  std::vector<profiler::Profile> profiles;
  for (const std::string& input : inputs) {
    session.set_activity("reading " + input);
    profiles.push_back(profiler::load_profile_or_torch_trace(input));
  }
  profiler::ReportOptions options;
  options.title = title;
  session.set_activity("writing " + output);
  profiler::write_html_report(profiles, options, output);
  session.wrote(output);
  std::cerr << "wrote report " << output << " (" << profiles.size() << " variant" << (profiles.size() == 1 ? "" : "s")
            << "; open it in a browser, it needs nothing else)\n";
  return 0;
}

}  // namespace blockscope::cli
