// A Profile saved as JSON and read back (for `blockscope diff A.json B.json`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "profiler/session.h"

namespace blockscope::profiler {

nlohmann::json profile_to_json(const Profile& profile);
// The JSON text save_profile writes: the same document, one event per line.
std::string profile_to_text(const Profile& profile);
// Throws InputError naming the file and the bad key when the JSON is not a blockscope profile.
Profile profile_from_json(const nlohmann::json& json, const std::string& source);
void save_profile(const Profile& profile, const std::string& path);  // temp file + rename
Profile load_profile(const std::string& path);
// A profile's JSON text (a file's, or a rank's gathered one): InputError naming `source` when it
// is not valid JSON or not a profile. Answers a signal while it parses.
Profile profile_from_text(const std::string& text, const std::string& source);
// What diff and report read: a saved profile, or a PyTorch profiler trace
// (profiler/torch_trace.h), told apart by their content. InputError naming `path` for a file
// that is neither, a truncated one, or a trace with no ops.
Profile load_profile_or_torch_trace(const std::string& path);

}  // namespace blockscope::profiler
