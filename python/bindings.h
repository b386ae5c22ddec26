// The Python module blockscope._core (nanobind): what its parts share. module.cpp defines the
// module and the error mapping, commands.cpp the CLI's commands in-process, arrays.cpp the
// zero-copy bridge between arrays and tensors, ops.cpp the ops on arrays. The Python package
// around it (python/blockscope/) gives the user-facing API (docs/PYTHON.md).
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <functional>
#include <new>
#include <string>

#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope::python {

namespace nb = nanobind;

// An error on its way to Python: `python_class` names the class in blockscope/_errors.py that
// module.cpp's translator raises ("ConfigError", "InputError", "DeviceError", "RuntimeFailure",
// or "KeyboardInterrupt").
class PythonBoundError : public std::runtime_error {
 public:
  PythonBoundError(std::string python_class, const std::string& message)
      : std::runtime_error(message), python_class(std::move(python_class)) {}
  const std::string python_class;
};

// Python's main thread (where signals are handled), recorded when the module loads.
unsigned long main_thread_ident();

// Runs `work` with blockscope's errors turned into Python's: invalid input as `input_class`
// (the call decides what the input was: a config, an array, a device), a runtime failure as
// RuntimeFailure, a signal as KeyboardInterrupt. On Python's main thread, Ctrl-C and SIGTERM
// reach blockscope's handler meanwhile, so long work stops at its next check.
template <typename Work>
auto guarded(const char* input_class, Work&& work) -> decltype(work()) {
  try {
    const bool main_thread = PyGILState_Check() && PyThread_get_thread_ident() == main_thread_ident();
    if (!main_thread) return work();
    InterruptScope interrupts;
    return work();
  } catch (const Error& error) {
    switch (error.kind()) {
      case ErrorKind::invalid_input: throw PythonBoundError(input_class, error.message());
      case ErrorKind::interrupted: throw PythonBoundError("KeyboardInterrupt", error.message());
      case ErrorKind::runtime: break;
    }
    throw PythonBoundError("RuntimeFailure", error.what());
  } catch (const std::bad_alloc&) {
    throw PythonBoundError("RuntimeFailure", "out of host memory");
  } catch (const PythonBoundError&) {
    throw;
  } catch (const nb::python_error&) {
    throw;
  } catch (const nb::builtin_exception&) {
    throw;
  } catch (const std::exception& error) {
    throw PythonBoundError("RuntimeFailure", error.what());
  }
}

// The CPU context the ops on arrays run in (one per process, made on first use).
Context& cpu_context();
// bs.set_threads: the CPU thread count of every pool (threads > 0: that many; 0: blockscope's
// default, cpu::default_thread_count).
void set_cpu_threads(int threads);
// A call's `threads=`: that many when > 0, else what bs.set_threads set (the default if nothing).
void use_cpu_threads(int threads);

void define_commands(nb::module_& m);  // commands.cpp
void define_ops(nb::module_& m);       // ops.cpp

}  // namespace blockscope::python
