// The HTML report's pieces below the page (html_report.cpp assembles the page): the escaping
// and number formats every piece uses, and the inline SVG charts — roofline, breakdown by
// module (icicle), step times, host vs device timeline, memory over a step. Each chart takes
// the profiles (or one profile and its variant's index, for its colour) and returns markup.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "profiler/session.h"

namespace blockscope::profiler::report {

// Everything from a profile (labels, op names, paths) is escaped: a name is never markup.
std::string esc(const std::string& text);
// Coordinates with one decimal, never NaN or infinite (0 instead); extent() also never negative
// (a browser refuses a negative width), whatever a saved profile holds.
std::string px(double value);
std::string extent(double value);
// A value for a data-* attribute: shortest round trip, so scripts read back what was written.
std::string datum(double value);
// Variant i's colour, and a swatch of it for a legend or a table row.
std::string colour(size_t variant);
std::string swatch(size_t variant);

std::string roofline_svg(const std::vector<Profile>& profiles);
std::string icicle_svg(const Profile& profile, size_t variant);
std::string steps_svg(const std::vector<Profile>& profiles);
std::string timeline_svg(const Profile& profile, size_t variant);
std::string memory_svg(const Profile& profile, size_t variant);

}  // namespace blockscope::profiler::report
