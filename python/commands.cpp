// The CLI's commands in-process: the same code as `blockscope run|profile|check|diff|report|info`
// (tools/cli/), given a Session filled from Python's arguments, with JSON on standard output
// and the lines for stderr captured and handed back (the package turns notes and warnings into
// Python warnings). No second implementation: what the program prints, Python parses.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <iostream>
#include <sstream>
#include <tuple>

#include "model/config.h"
#include "profiler/profile_io.h"
#include "profiler/session.h"
#include "profiler/table.h"
#include "python/bindings.h"
#include "runtime/device.h"
#include "runtime/cpu/gemm.h"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"

namespace blockscope::python {

namespace {

// Standard output and standard error captured while it lives (the commands print there).
class CapturedOutput {
 public:
  CapturedOutput() : out_(std::cout.rdbuf(out_text_.rdbuf())), err_(std::cerr.rdbuf(err_text_.rdbuf())) {}
  ~CapturedOutput() {
    std::cout.rdbuf(out_);
    std::cerr.rdbuf(err_);
  }
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  std::string out() const { return out_text_.str(); }
  std::string err() const { return err_text_.str(); }

 private:
  std::ostringstream out_text_, err_text_;
  std::streambuf* out_;
  std::streambuf* err_;
};

// Runs one command the way main.cpp does (threads first; on a failure the outputs it wrote are
// removed), returning (exit code, standard output, standard error). Without the GIL: the
// commands touch no Python object.
std::tuple<int, std::string, std::string> run_session(cli::Session& session,
                                                      const std::function<int(cli::Session&)>& command) {
  use_cpu_threads(session.options.threads);
  CapturedOutput captured;
  try {
    nb::gil_scoped_release released;  // other Python threads run meanwhile (a timer, a UI)
    const int code = command(session);
    return {code, captured.out(), captured.err()};
  } catch (...) {
    session.remove_outputs();
    throw;
  }
}

std::tuple<int, std::string, std::string> workload_command(const std::string& name, const cli::Options& options) {
  cli::Session session;
  session.options = options;
  session.options.format = "json";
  session.options_as_given = session.options;
  const cli::Options& args = session.options;
  // The config's own errors are a ConfigError, its device's a DeviceError; anything later an
  // InputError.
  guarded("DeviceError", [&] {
    Device device;
    if (!args.device.empty() && args.device != "auto" && !parse_device(args.device, &device))
      throw InputError("device='" + args.device + "': expected auto, cpu, cuda or cuda:N");
  });
  guarded("InputError", [&] {
    DType dtype;
    if (!args.dtype.empty() && (!parse_dtype(args.dtype, &dtype) || is_fp8(dtype)))
      throw InputError("dtype='" + args.dtype + "': expected f32, f16 or bf16 (FP8 is a storage type: docs/FP8.md)");
  });
  const WorkloadConfig config = guarded("ConfigError", [&] { return session.load_config(); });
  guarded("DeviceError", [&] { Context probe(resolve_device(config.device)); });
  return guarded("InputError", [&] {
    if (name == "run") return run_session(session.for_command("run"), cli::run_command);
    if (name == "profile") return run_session(session.for_command("profile"), cli::profile_command);
    if (name == "check") return run_session(session.for_command("check"), cli::check_command);
    throw InputError("no workload command '" + name + "' (run, profile, check)");
  });
}

}  // namespace

void define_commands(nb::module_& m) {
  cli::Progress::silence_process();  // no progress bars inside a notebook's cells

  m.def(
      "load_config",
      [](const std::string& path, const std::string& text, const std::string& source, const std::vector<std::string>& sets) {
        return guarded("ConfigError", [&] {
          const WorkloadConfig config = !text.empty() ? load_config_text(text, source, sets)
                                        : path.empty() ? load_default_config(sets)
                                                       : load_config_file(path, sets);
          return std::make_tuple(std::string(workload_kind_name(config.kind)), config.keys);
        });
      },
      nb::arg("path"), nb::arg("text"), nb::arg("source"), nb::arg("sets"),
      "Reads and validates a config (a file, YAML text, or the built-in default when both are empty) with "
      "'key=value' overrides; returns (workload kind, every key as read, in file order). ConfigError otherwise.");

  m.def(
      "workload_command",
      [](const std::string& name, const std::string& config_path, const std::string& config_text,
         const std::string& config_source, const std::vector<std::string>& sets, const std::string& device,
         const std::string& dtype, int threads, const std::string& save, const std::string& trace, bool counters,
         const std::string& predict, const std::string& dump) {
        cli::Options o;
        o.config_path = config_path;
        o.config_text = config_text;
        o.config_source = config_source;
        o.sets = sets;
        o.device = device;
        o.dtype = dtype;
        o.threads = threads;
        o.save = save;
        o.trace = trace;
        o.counters = counters;
        o.predict = predict;
        o.dump = dump;
        return workload_command(name, o);
      },
      nb::arg("name"), nb::arg("config_path"), nb::arg("config_text"), nb::arg("config_source"), nb::arg("sets"),
      nb::arg("device"), nb::arg("dtype"), nb::arg("threads"), nb::arg("save"), nb::arg("trace"), nb::arg("counters"),
      nb::arg("predict"), nb::arg("dump") = "",
      "`blockscope run|profile|check` with --format json: (exit code, standard output, standard error).");

  m.def(
      "diff",
      [](const std::string& before, const std::string& after) {
        return guarded("InputError", [&] {
          cli::Session session;
          session.options.format = "json";
          return run_session(session, [&](cli::Session& s) { return cli::diff_command(s, before, after); });
        });
      },
      nb::arg("before"), nb::arg("after"), "`blockscope diff BEFORE AFTER --format json`: (code, stdout, stderr).");

  m.def(
      "report",
      [](const std::vector<std::string>& inputs, const std::string& output, const std::string& title, bool force) {
        return guarded("InputError", [&] {
          cli::Session session;
          session.options.force = force;
          return run_session(session, [&](cli::Session& s) { return cli::report_command(s, inputs, output, title); });
        });
      },
      nb::arg("inputs"), nb::arg("output"), nb::arg("title"), nb::arg("force"),
      "`blockscope report INPUTS... -o OUTPUT --title TITLE`: (code, stdout, stderr).");

  m.def("variant_path", &cli::variant_path, nb::arg("path"), nb::arg("label"),
        "Where --save writes a compare variant's profile: FILE.json -> FILE.<label>.json.");

  m.def(
      "info",
      []() {
        return guarded("InputError", [&] {
          cli::Session session;
          session.options.format = "json";
          return std::get<1>(run_session(session, cli::info_command));
        });
      },
      "`blockscope info --format json`: the build, devices, peaks and path table.");

  // A step of ops called from Python, profiled (`with bs.profile():`).
  nb::class_<profiler::StepRecording>(m, "StepRecording")
      .def(
          "__init__",
          [](profiler::StepRecording* self, const std::string& label) {
            guarded("InputError", [&] {
              BS_CHECK_INPUT(cpu_context().recorder() == nullptr,
                             "a profile is already recording: bs.profile() blocks do not nest");
              new (self) profiler::StepRecording(cpu_context(), label);
            });
          },
          nb::arg("label"))
      .def(
          "finish",
          [](profiler::StepRecording& self, int row_limit) {
            return guarded("InputError", [&] {
              profiler::Profile profile = self.finish();
              profiler::TableOptions table;
              table.row_limit = row_limit;
              return std::make_tuple(profiler::profile_to_json(profile).dump(),
                                     profiler::op_table(profile, table, profiler::Format::json),
                                     profiler::kernel_table(profile, profiler::Format::json));
            });
          },
          nb::arg("row_limit"),
          "Ends the step: (the saved profile's JSON, the op table's JSON, the kernel table's JSON).");
}

}  // namespace blockscope::python
