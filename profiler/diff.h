// What changed between two profiles: ops and kernels added, removed, faster, slower, with
// counts per step and times — e.g. naive -> inplace attention shows the copy kernel gone.
#pragma once

#include <string>

#include "profiler/session.h"
#include "profiler/table.h"

namespace blockscope::profiler {

std::string diff_profiles(const Profile& before, const Profile& after, Format format);

}  // namespace blockscope::profiler
