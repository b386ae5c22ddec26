#include "test/support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>

namespace blockscope::testing {

namespace {

// The test binary's name, for the scratch directory's ("cli_test").
std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? std::string("test") : name;
}

// Owns the process's scratch directory: removed when static objects are destroyed at exit,
// which gtest_main reaches after failed tests as after passed ones.
struct ScratchRoot {
  std::filesystem::path path;
  ScratchRoot() : path(std::filesystem::temp_directory_path() / ("blockscope_" + program_name() + "_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchRoot() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

const char* source_dir() { return BLOCKSCOPE_SOURCE_DIR; }
const char* cli_path() { return BLOCKSCOPE_CLI_PATH; }

const std::filesystem::path& scratch_root() {
  static ScratchRoot root;
  return root.path;
}

std::filesystem::path test_scratch_dir() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test == nullptr ? std::string("outside_tests")
                                     : std::string(test->test_suite_name()) + "." + test->name();
  for (char& ch : name)
    if (ch == '/') ch = '_';  // parameterised names: "Ops/OpHarness.X/add_cpu_f32"
  const std::filesystem::path dir = scratch_root() / name;
  std::filesystem::create_directories(dir);
  return dir;
}

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ProgramResult run_program(const std::string& path, const std::vector<std::string>& args, const std::string& env) {
  const std::filesystem::path dir = test_scratch_dir();
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string command = shell_quote(path);
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  command = "OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 " + env + command + " >" + shell_quote(out.string()) + " 2>" +
            shell_quote(err.string());
  const int status = std::system(command.c_str());
  ProgramResult result;
  if (WIFEXITED(status)) {
    result.code = WEXITSTATUS(status);
  } else {
    result.crashed = true;
  }
  result.out = read_text_file(out);
  result.err = read_text_file(err);
  return result;
}

uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("BLOCKSCOPE_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(engine);
  if (n > 0 && lo < 0.5f * (lo + hi) && values[0] == 0.0f) values[0] = 0.5f * (lo + hi) + 1e-3f;
  return values;
}

Tensor random_tensor(Context& ctx, const Shape& shape, DType dtype, uint64_t seed, float lo, float hi) {
  Tensor t = ctx.empty(shape, dtype);
  from_floats(t, random_floats(static_cast<size_t>(t.numel()), seed, lo, hi));
  return t;
}

Tensor poisoned_tensor(Context& ctx, const Shape& shape, DType dtype) {
  Tensor t = ctx.empty(shape, dtype);
  fill_nan(t);
  return t;
}

Tensor tensor_of(Context& ctx, const Shape& shape, DType dtype, const std::vector<float>& values) {
  Tensor t = ctx.empty(shape, dtype);
  from_floats(t, values);
  return t;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<float> f = to_floats(t);
  return std::vector<double>(f.begin(), f.end());
}

int64_t first_nan(const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (std::isnan(values[i])) return static_cast<int64_t>(i);
  return -1;
}

void report_error(const std::string& what, double value) {
  static const bool enabled = std::getenv("BLOCKSCOPE_TEST_ERRORS") != nullptr;
  if (enabled) std::printf("measured-error %s %.3e\n", what.c_str(), value);
}

void report_error(const std::string& what, double value, double bound) {
  report_error(what, value);
  report_error(what + ":of_bound", value / bound);
}

std::vector<Device> test_devices() {
  std::vector<Device> devices{Device::cpu()};
  if (cuda_built()) devices.push_back(Device::cuda(0));
  return devices;
}

bool device_runnable(Device device, std::string* reason) {
  if (device.is_cpu()) return true;
  if (!cuda_built()) {
    *reason = "built without CUDA";
    return false;
  }
  if (!cuda_available()) {
    *reason = "no CUDA GPU present on this machine (CUDA code compiled, not run)";
    return false;
  }
  return true;
}

std::vector<DType> all_dtypes() { return {std::begin(kDTypes), std::end(kDTypes)}; }
std::vector<DType> compute_dtypes() { return {std::begin(kComputeDTypes), std::end(kComputeDTypes)}; }

}  // namespace blockscope::testing
