// The simulated GPU's run settings: the schedule (BLOCKSCOPE_SIM_SCHEDULE, set_schedule) and the
// checks (BLOCKSCOPE_SIM_CHECKS, set_checks), their parsing and their names.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/executor_state.h"

namespace blockscope::sim {

bool parse_schedule(const std::string& text, Schedule* schedule, std::string* error) {
  Schedule s;
  if (text == "inorder") {
    s.order = Order::inorder;
  } else if (text == "reverse") {
    s.order = Order::reverse;
  } else if (text == "random" || text.rfind("random:", 0) == 0) {
    s.order = Order::random;
    if (text == "random") {
      s.seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000007ull;
    } else {
      const std::string digits = text.substr(7);
      char* end = nullptr;
      s.seed = std::strtoull(digits.c_str(), &end, 10);
      if (digits.empty() || *end != '\0') {
        *error = "schedule '" + text + "': the seed after 'random:' must be a non-negative integer";
        return false;
      }
    }
  } else {
    *error = "schedule '" + text + "' is not inorder, reverse, random or random:<seed>";
    return false;
  }
  *schedule = s;
  return true;
}

std::string schedule_name(const Schedule& schedule) {
  switch (schedule.order) {
    case Order::inorder: return "inorder";
    case Order::reverse: return "reverse";
    case Order::random: return "random:" + std::to_string(schedule.seed);
  }
  return "?";
}

namespace {
// The setting in environment variable `name`, parsed by `parse`; the default when it is unset. A
// bad value ends the process (exit 2) naming the variable, before any kernel runs.
template <class Setting>
Setting from_env(const char* name, bool (*parse)(const std::string&, Setting*, std::string*)) {
  Setting setting;
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return setting;
  std::string error;
  if (!parse(env, &setting, &error)) {
    std::fprintf(stderr, "blockscope sim: %s: %s\n", name, error.c_str());
    std::exit(2);
  }
  return setting;
}
}  // namespace

namespace exec {
Schedule& schedule_setting() {
  static Schedule schedule = [] {
    const Schedule s = from_env("BLOCKSCOPE_SIM_SCHEDULE", parse_schedule);
    const char* env = std::getenv("BLOCKSCOPE_SIM_SCHEDULE");
    if (env != nullptr && std::strcmp(env, "random") == 0) {  // a fresh seed: say how to replay it
      std::fprintf(stderr, "blockscope sim: schedule %s (BLOCKSCOPE_SIM_SCHEDULE=%s replays it)\n",
                   schedule_name(s).c_str(), schedule_name(s).c_str());
    }
    return s;
  }();
  return schedule;
}

Checks& checks_setting() {
  static Checks checks = from_env("BLOCKSCOPE_SIM_CHECKS", parse_checks);
  return checks;
}
}  // namespace exec

Schedule current_schedule() { return exec::schedule_setting(); }

bool parse_checks(const std::string& text, Checks* checks, std::string* error) {
  Checks c{false, false, false, false, false, false};
  if (text == "all") {
    c = Checks{};
  } else if (text != "none") {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item == "race") {
        c.race = true;
      } else if (item == "memcheck") {
        c.memcheck = true;
      } else if (item == "initcheck") {
        c.initcheck = true;
      } else if (item == "synccheck") {
        c.synccheck = true;
      } else if (item == "streams") {
        c.streams = true;
      } else if (item == "strictsync") {
        c.strictsync = true;
      } else if (item == "all") {
        const bool strict = c.strictsync;
        c = Checks{};
        c.strictsync = strict;
      } else {
        *error = "'" + item + "' is not a check (all, none, or a comma list of race, memcheck, initcheck, "
                 "synccheck, streams, strictsync)";
        return false;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  *checks = c;
  return true;
}

Checks current_checks() { return exec::checks_setting(); }
void set_checks(const Checks& checks) { exec::checks_setting() = checks; }

}  // namespace blockscope::sim
