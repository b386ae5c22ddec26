// Ctrl-C (SIGINT), SIGTERM, SIGHUP and SIGPIPE: the handler records the signal and says on
// stderr that the command stops after this step (not for SIGPIPE); long work polls
// check_interrupted() between steps (the profiler's schedule, the CLI's timing and check
// loops, output writers between writes), which throws an Error of kind `interrupted`. The
// exception unwinds normally — temporaries are removed by their destructors, the CLI removes
// what the command already wrote — and the CLI exits 128 + the signal (130, 143, 129, 141). A second
// signal while the first is handled ends the process at once.
#pragma once

namespace blockscope {

void install_interrupt_handlers();
// The signal received (SIGINT, SIGTERM), 0 when none.
int interrupt_signal();
// Throws Error(ErrorKind::interrupted) naming the signal and `where` when one was received.
void check_interrupted(const char* where);

}  // namespace blockscope
