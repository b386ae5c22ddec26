#include "runtime/interrupt.h"

#include <csignal>
#include <string>

#include "runtime/error.h"

namespace blockscope {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_interrupt(int signal) {
  if (g_signal != 0) {  // the second one: no more waiting for a step to end
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_signal = signal;
}

}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

int interrupt_signal() { return g_signal; }

void check_interrupted(const char* where) {
  const int signal = g_signal;
  if (signal == 0) return;
  const std::string name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : std::to_string(signal);
  throw Error(ErrorKind::interrupted, "interrupted by " + name + " " + where);
}

}  // namespace blockscope
