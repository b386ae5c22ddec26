// Shared test helpers: fresh random inputs (seed printed on failure), error metrics, the
// accuracy rule, and device parameters that skip CUDA cases with a reason when no GPU exists.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "reference/accuracy.h"
#include "runtime/context.h"
#include "runtime/tensor.h"

namespace blockscope::testing {

// Where the tests find this checkout and its CLI. Compiled into test_support.cpp alone, so no
// other test object holds a path of the checkout and ccache shares them between clones.
const char* source_dir();
const char* cli_path();

// A fresh seed per call (from std::random_device), recorded with SCOPED_TRACE by callers so a
// failing case can be replayed with BLOCKSCOPE_TEST_SEED=<seed>.
uint64_t fresh_seed();

// Files the tests write live under one directory per test process,
// $TMPDIR/blockscope_<binary>_<pid>, removed with its contents when the process ends —
// after failed tests too — so a test run leaves the temporary directory as it found it
// (`tests_leave_tmp_clean` checks that).
const std::filesystem::path& scratch_root();
// The running test's own directory under scratch_root() ("<Suite>.<Test>", created when
// missing): tests of one binary never share files, in one process or in parallel ones.
std::filesystem::path test_scratch_dir();

// A program run as a child process with `args` (each shell-quoted; `env`, e.g. "COLUMNS=80 ",
// goes before it), its stdout and stderr captured through files in test_scratch_dir(); OpenMP
// and OpenBLAS held to 2 and 1 threads (tests run many processes at once on small machines).
struct ProgramResult {
  int code = -1;         // the exit status
  bool crashed = false;  // ended by a signal
  std::string out, err;
};
ProgramResult run_program(const std::string& path, const std::vector<std::string>& args, const std::string& env = "");
// `arg` in single quotes for a POSIX shell.
std::string shell_quote(const std::string& arg);
// A file's whole contents ("" when it cannot be read).
std::string read_text_file(const std::filesystem::path& path);

// Uniform values in [lo, hi), never all zero; deterministic for a seed.
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// A new tensor on ctx's device filled with random values rounded to `dtype`.
Tensor random_tensor(Context& ctx, const Shape& shape, DType dtype, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// A new tensor on ctx's device filled with NaN (poisoned output).
Tensor poisoned_tensor(Context& ctx, const Shape& shape, DType dtype);
// A new tensor on ctx's device holding `values` (row-major, rounded to dtype).
Tensor tensor_of(Context& ctx, const Shape& shape, DType dtype, const std::vector<float>& values);

// Float values of a tensor as double (for the float64 references).
std::vector<double> to_doubles(const Tensor& t);

// Errors against a reference and the accuracy rule: reference/accuracy.h, shared with
// `blockscope check`.
using reference::accuracy_floor;
using reference::max_abs_error;
using reference::max_delta_error;
using reference::max_relative_error;
using reference::max_row_relative_error;
using reference::within_accuracy_rule;
// Index of the first NaN, or -1.
int64_t first_nan(const std::vector<float>& values);

// Prints "measured-error <what> <value>" when BLOCKSCOPE_TEST_ERRORS is set: how the bounds in
// docs/TESTING.md were measured (run a suite many times, take the largest per name).
void report_error(const std::string& what, double value);
// The same, and "measured-error <what>:of_bound <value / bound>": how close the worst error came
// to a derived bound (docs/TESTING.md's "share of the bound" column).
void report_error(const std::string& what, double value, double bound);


// Devices to run a parameterised test on: always cpu; cuda:0 when built with CUDA (the test
// then skips with a reason when no GPU is present).
std::vector<Device> test_devices();
// Call first in a test body: GTEST_SKIP()s with a reason when `device` cannot run here.
#define BS_SKIP_IF_UNAVAILABLE(device)                                                  \
  do {                                                                                  \
    std::string bs_reason_;                                                             \
    if (!::blockscope::testing::device_runnable(device, &bs_reason_)) GTEST_SKIP() << bs_reason_; \
  } while (0)
bool device_runnable(Device device, std::string* reason);

// Every element type (kDTypes: FP8 included) and the compute types ops take (kComputeDTypes).
std::vector<DType> all_dtypes();
std::vector<DType> compute_dtypes();

// Sets an environment variable for one scope, restoring what was there (the variables
// blockscope reads at each call: BLOCKSCOPE_LINEAR_WEIGHT_STREAMING, the CPU peak overrides).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace blockscope::testing
