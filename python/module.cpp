// blockscope._core: the module, its error mapping and the CPU context the ops on arrays share.
#include <nanobind/stl/string.h>

#include <memory>
#include <mutex>

#include "python/bindings.h"
#include "runtime/cpu/gemm.h"
#include "runtime/device.h"

namespace blockscope::python {

namespace {
unsigned long g_main_thread_ident = 0;
int g_cpu_threads = -1;  // what set_cpu_threads last set (-1: nothing yet)
}  // namespace

unsigned long main_thread_ident() { return g_main_thread_ident; }

Context& cpu_context() {
  // Made on first use and never destroyed: Python may hold arrays that borrow its storage
  // until the interpreter's very end, after static destructors would have run.
  static Context* context = [] {
    use_cpu_threads(0);  // blockscope's default, unless bs.set_threads came first
    return new Context(Device::cpu());
  }();
  return *context;
}

void set_cpu_threads(int threads) {
  if (threads < 0) throw InputError("threads=" + std::to_string(threads) + ": expected 0 (the default) or more");
  const int count = threads > 0 ? threads : cpu::default_thread_count().count;
  if (count != g_cpu_threads) cpu::set_thread_count(count);
  g_cpu_threads = count;
}

void use_cpu_threads(int threads) {
  if (threads != 0 || g_cpu_threads < 0) set_cpu_threads(threads);
}

}  // namespace blockscope::python

NB_MODULE(_core, m) {
  namespace bp = blockscope::python;
  namespace nb = nanobind;
  bp::g_main_thread_ident = PyThread_get_thread_ident();  // the module loads on the main thread (import)
  m.doc() = "blockscope's C++ core: the CLI's commands in-process and the ops on arrays (docs/PYTHON.md)";

  // Each error becomes the class of blockscope/_errors.py that the call named, with the message
  // as blockscope says it (the CLI's words, without its source location).
  nb::register_exception_translator([](const std::exception_ptr& error, void*) {
    try {
      std::rethrow_exception(error);
    } catch (const bp::PythonBoundError& e) {
      if (e.python_class == "KeyboardInterrupt") {
        PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
        return;
      }
      nb::object cls = nb::module_::import_("blockscope._errors").attr(e.python_class.c_str());
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  m.def("set_threads", [](int threads) { bp::guarded("InputError", [&] { bp::set_cpu_threads(threads); }); },
        nb::arg("threads"), "CPU threads for every pool (0: blockscope's default).");
  bp::define_commands(m);
  bp::define_ops(m);
}
