// Progress on stderr while a command works through its variants (profile, run): on a terminal
// one line redrawn per step; otherwise a line when each variant starts and one when it is done,
// and one at least every kQuietSeconds in between, so a long run is never silent and a log
// stays short. Stages before the variants (building gigabytes of weights) are said too.
#pragma once

#include <chrono>
#include <string>

namespace blockscope::cli {

class Progress {
 public:
  // Every Progress of this process says nothing (tensor parallelism: ranks other than 0, whose
  // lines would repeat rank 0's).
  static void silence_process();

  // A line at least this often while a variant runs and stderr is not a terminal.
  static constexpr double kQuietSeconds = 5.0;

  // `command` prefixes every line ("profile", "run"). A `silent` one says nothing (the ranks
  // other than 0 of a GPU group, threads of this process).
  Progress(std::string command, size_t variants, bool silent = false);

  // A stage before the variants: "building the workload: 16.00 GiB of weights".
  void note(const std::string& what) const;
  void start(size_t index, const std::string& label);
  // `done` of `total` units ("step", "forward") finished.
  void step(int done, int total, const char* unit = "step");
  // The variant is finished: "done in 2.1 s: <summary>".
  void done(const std::string& summary) const;
  // Removes the redrawn line (before an error message).
  void clear() const;

 private:
  double seconds_since(std::chrono::steady_clock::time_point start) const;
  std::string prefix() const;

  bool quiet() const;  // silent, or the process silenced

  std::string command_;
  size_t variants_;
  bool terminal_, silent_;
  size_t index_ = 0;
  std::string label_;
  std::chrono::steady_clock::time_point started_, last_line_;
};

}  // namespace blockscope::cli
