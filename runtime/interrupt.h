// Ctrl-C (SIGINT), SIGTERM, SIGHUP and SIGPIPE: the handler records the signal and says on
// stderr what stops when (set_interrupt_point; not for SIGPIPE); long work polls
// check_interrupted() — between steps (the profiler's schedule, the CLI's timing and check
// loops), between CPU ops and decode tokens, in the float64 reference between blocks of rows,
// and in readers and writers between chunks of 1 MiB —, which throws an Error of kind `interrupted`. The
// exception unwinds normally — temporaries are removed by their destructors, the CLI removes
// what the command already wrote — and the CLI exits 128 + the signal (130, 143, 129, 141). A second
// signal while the first is handled ends the process at once.
#pragma once

#include <signal.h>

namespace blockscope {

void install_interrupt_handlers();
// A signal makes a pipe on standard output non-blocking (so a stalled reader cannot hold the
// command); this puts its flags back, before the process exits.
void restore_standard_output();
// What the acknowledgement of the first signal says will stop: "blockscope: stopping <point>
// (send it again ...)". A string literal: "after this step" where a command waits for a GPU's
// queued step; the default, "within a second", is what the polling below gives on the CPU.
void set_interrupt_point(const char* point);
// The signal received (SIGINT, SIGTERM), 0 when none.
int interrupt_signal();

// For a host process that owns the signals (the Python module, python/): while the scope lives
// SIGINT and SIGTERM reach the handler above (long work stops at its next check, as in the
// CLI), then the host's handlers are back and the signal received is forgotten — the host says
// it its own way (Python: KeyboardInterrupt). Made on the thread that receives the host's
// signals (Python's main thread).
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  struct sigaction saved_[2];  // the host's SIGINT and SIGTERM actions
};
// Throws Error(ErrorKind::interrupted) naming the signal and `where` when one was received.
void check_interrupted(const char* where);
// check_interrupted for loops over many small items (a profile's events, a JSON document's
// values): one load when no signal came, so it can be called per item.
inline void poll_interrupted(const char* where) {
  if (interrupt_signal() != 0) check_interrupted(where);
}

}  // namespace blockscope
