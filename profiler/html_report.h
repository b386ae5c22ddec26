// The HTML report: one self-contained page (styles and scripts inline, charts as inline SVG,
// nothing fetched when it is viewed) drawn from the same aggregated data the text tables read:
// header, verdicts, roofline, breakdown by module (icicle), step times, host vs device
// timeline, memory over a step, diffs against the first profile, and the op and kernel tables
// (sortable), plus the tables' rows as JSON for scripts. Several profiles are variants of one
// report: one colour each, the first is the base the diffs compare against.
#pragma once

#include <string>
#include <vector>

#include "profiler/session.h"
#include "profiler/table.h"

namespace blockscope::profiler {

struct ReportOptions {
  std::string title;   // the page's title; empty: the first profile's workload
  TableOptions table;  // sort order of the op tables (every row is shown: row_limit is ignored)
};

std::string html_report(const std::vector<Profile>& profiles, const ReportOptions& options);
// Written like every other output (runtime/output_file.h): temporary, then rename.
void write_html_report(const std::vector<Profile>& profiles, const ReportOptions& options, const std::string& path);

}  // namespace blockscope::profiler
