#include "tools/cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "runtime/terminal_output.h"

namespace blockscope::cli {

namespace {

bool g_silent = false;  // Progress::silence_process

// Back to the line's start and erase it: on purpose, so past the filter that escapes the
// control characters of everything else (runtime/terminal_output.h).
void erase_line() { raw_stderr() << "\r\033[K" << std::flush; }

}  // namespace

void Progress::silence_process() { g_silent = true; }

Progress::Progress(std::string command, size_t variants, bool silent)
    : command_(std::move(command)), variants_(variants), terminal_(isatty(STDERR_FILENO) != 0), silent_(silent) {}

bool Progress::quiet() const { return silent_ || g_silent; }

double Progress::seconds_since(std::chrono::steady_clock::time_point start) const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Progress::prefix() const { return fmt::format("{}: [{}/{}] {}", command_, index_ + 1, variants_, label_); }

void Progress::note(const std::string& what) const {
  if (quiet()) return;
  if (terminal_) erase_line();
  std::cerr << command_ << ": " << what << "\n";
}

void Progress::start(size_t index, const std::string& label) {
  index_ = index;
  label_ = label;
  started_ = last_line_ = std::chrono::steady_clock::now();
  if (!terminal_ && !quiet()) std::cerr << prefix() << " ...\n";
}

void Progress::step(int done, int total, const char* unit) {
  if (quiet()) return;
  if (terminal_) {
    const int width = 20, filled = total > 0 ? width * done / total : width;
    erase_line();
    std::cerr << prefix() << " [" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << unit << " "
              << done << "/" << total << std::flush;
  } else if (seconds_since(last_line_) >= kQuietSeconds) {
    last_line_ = std::chrono::steady_clock::now();
    std::cerr << fmt::format("{}: {} {}/{} ({:.0f} s)\n", prefix(), unit, done, total, seconds_since(started_));
  }
}

void Progress::done(const std::string& summary) const {
  if (quiet()) return;
  if (terminal_) erase_line();
  std::cerr << fmt::format("{} done in {:.1f} s: {}\n", prefix(), seconds_since(started_), summary);
}

void Progress::clear() const {
  if (quiet()) return;
  if (terminal_) erase_line();
}

}  // namespace blockscope::cli
