#include "runtime/interrupt.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <string>

#include "runtime/error.h"

namespace blockscope {

namespace {

volatile std::sig_atomic_t g_signal = 0;
// What the first signal's acknowledgement says stops ("after this step"): a string literal,
// set by the command before its work (set_interrupt_point); read by the handler.
std::atomic<const char*> g_point{"within a second"};

// The thread that installed the handlers (main): the one whose blocked reads and writes a
// signal must cut short.
pthread_t g_main_thread;
// Standard output's file status flags before the signal made it non-blocking (-1: untouched).
volatile std::sig_atomic_t g_stdout_flags = -1;

// A pipe or FIFO on standard output whose reader stalls would hold a blocked write of the
// tables past the signal: stdio carries on after the signal's short write and blocks again.
// Non-blocking from now on, the next write fails (EAGAIN) and the command stops at its next
// check. (fstat and fcntl are async-signal-safe; restore_standard_output undoes it.)
void stop_blocking_standard_output() {
  struct stat info;
  if (::fstat(STDOUT_FILENO, &info) != 0 || !S_ISFIFO(info.st_mode)) return;
  const int flags = ::fcntl(STDOUT_FILENO, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK) != 0) return;
  if (::fcntl(STDOUT_FILENO, F_SETFL, flags | O_NONBLOCK) == 0) g_stdout_flags = flags;
}

extern "C" void on_interrupt(int signal) {
  // Delivered to a worker thread (OpenMP's, MPI's): passed on to the main thread, whose blocked
  // read or write it must interrupt (EINTR) — a worker has none to cut short.
  if (!pthread_equal(pthread_self(), g_main_thread)) {
    pthread_kill(g_main_thread, signal);
    return;
  }
  if (signal == SIGPIPE) {
    // Every later write to the closed pipe would raise it again: from now on those writes just
    // fail, and the command stops at its next check like after a Ctrl-C.
    std::signal(SIGPIPE, SIG_IGN);
    if (g_signal == 0) g_signal = signal;
    return;
  }
  if (g_signal != 0) {  // the second one: no more waiting for a step to end
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_signal = signal;
  stop_blocking_standard_output();
  // Said at once (write(2) is async-signal-safe), so the first Ctrl-C is never met with
  // silence while a step finishes.
  static const char kHead[] = "\nblockscope: stopping ", kTail[] = " (send it again to stop at once)\n";
  const char* point = g_point.load();
  ssize_t ignored = ::write(STDERR_FILENO, kHead, sizeof(kHead) - 1);
  ignored = ::write(STDERR_FILENO, point, std::strlen(point));
  ignored = ::write(STDERR_FILENO, kTail, sizeof(kTail) - 1);
  (void)ignored;
}

}  // namespace

void install_interrupt_handlers() {
  // SIGHUP (the terminal closed) and SIGPIPE (`blockscope profile ... | head -1`) stop the
  // command like SIGINT: temporaries and partial outputs removed, exit 128 + the signal.
  // Without SA_RESTART: a read or write blocked on a pipe, a FIFO or a terminal returns EINTR
  // at the signal instead of waiting on (`(sleep 30; cat cfg) | blockscope run -` stopped only
  // when the data came); every reader and writer answers that with check_interrupted.
  g_main_thread = pthread_self();
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaction(signal, &action, nullptr);
}

void set_interrupt_point(const char* point) { g_point = point; }

namespace {
constexpr int kHostSignals[] = {SIGINT, SIGTERM};
}

InterruptScope::InterruptScope() {
  g_signal = 0;
  g_main_thread = pthread_self();
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  for (int i = 0; i < 2; ++i) sigaction(kHostSignals[i], &action, &saved_[i]);
}

InterruptScope::~InterruptScope() {
  for (int i = 0; i < 2; ++i) sigaction(kHostSignals[i], &saved_[i], nullptr);
  restore_standard_output();
  g_signal = 0;
}

void restore_standard_output() {
  if (g_stdout_flags >= 0) ::fcntl(STDOUT_FILENO, F_SETFL, static_cast<int>(g_stdout_flags));
}

int interrupt_signal() { return g_signal; }

void check_interrupted(const char* where) {
  const int signal = g_signal;
  if (signal == 0) return;
  const std::string name = signal == SIGINT    ? "SIGINT"
                           : signal == SIGTERM ? "SIGTERM"
                           : signal == SIGHUP  ? "SIGHUP"
                           : signal == SIGPIPE ? "SIGPIPE"
                                               : std::to_string(signal);
  throw Error(ErrorKind::interrupted, "interrupted by " + name + " " + where);
}

}  // namespace blockscope
