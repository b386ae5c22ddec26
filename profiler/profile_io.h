// A Profile saved as JSON and read back (for `blockscope diff A.json B.json`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "profiler/session.h"

namespace blockscope::profiler {

nlohmann::json profile_to_json(const Profile& profile);
// Throws InputError naming the file and the bad key when the JSON is not a blockscope profile.
Profile profile_from_json(const nlohmann::json& json, const std::string& source);
void save_profile(const Profile& profile, const std::string& path);  // temp file + rename
Profile load_profile(const std::string& path);

}  // namespace blockscope::profiler
