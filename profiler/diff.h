// What changed between two profiles: ops and kernels added, removed, faster, slower, with
// counts per step and times — e.g. naive -> inplace attention shows the copy kernel gone.
#pragma once

#include <string>
#include <vector>

#include "profiler/session.h"
#include "profiler/table.h"

namespace blockscope::profiler {

// Status per row: added, removed, count changed, faster, slower, within noise (the change is
// larger than 5% but the two sides' per-step times overlap), same.
std::string diff_profiles(const Profile& before, const Profile& after, Format format, const TextLayout& layout = {});
// The diff's rows (kernels, then ops and regions; `kind` says which), as CSV prints them.
Rows diff_table_rows(const Profile& before, const Profile& after);

// What the two profiles measured differently — the workload, device, dtype, real or simulated
// GPU — one line each ("the profiles measured different dtypes: f32 and bf16"); empty when
// they are comparable. The text and JSON diffs include them; `blockscope diff` says them on
// stderr whatever the format.
std::vector<std::string> profile_mismatches(const Profile& before, const Profile& after);

}  // namespace blockscope::profiler
