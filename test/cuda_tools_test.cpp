// The non-GPU parts of the CUDA tooling: tools/check_ptxas.sh (the CI spill gate) on synthetic
// build logs, and tools/device_check.sh failing cleanly, with "no GPU", where no GPU exists.
// Runs everywhere (no CUDA needed); skips only if bash is missing.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/support/test_support.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string output;
};

// Runs a shell command (stderr folded into stdout) and returns its exit status and output.
Result run(const std::string& command) {
  Result result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int raw = pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return result;
}

std::string tool(const char* name) { return std::string(BLOCKSCOPE_SOURCE_DIR) + "/tools/" + name; }

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run("command -v bash").status != 0) GTEST_SKIP() << "bash is not installed";
    dir_ = fs::temp_directory_path() /
           ("blockscope_cuda_tools_" + std::to_string(blockscope::testing::fresh_seed()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

using CheckPtxas = ScratchDir;

TEST_F(CheckPtxas, PassesACleanCudaBuildLog) {
  const std::string log = write("clean.log",
                                "[1/2] Building CUDA object CMakeFiles/blockscope.dir/ops/softmax/cuda.cu.o\n"
                                "[2/2] Linking CXX static library libblockscope.a\n");
  const Result r = run("bash " + tool("check_ptxas.sh") + " " + log);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no register spills"), std::string::npos) << r.output;
}

TEST_F(CheckPtxas, FailsOnASpillInOurKernelsAndNamesIt) {
  const std::string log =
      write("spill.log",
            "[1/1] Building CUDA object CMakeFiles/blockscope.dir/ops/norm/cuda.cu.o\n"
            "ptxas warning : Registers are spilled to local memory in function "
            "'_ZN10blockscope12cuda_kernels15rms_norm_kernelIfEEvPKT_S4_PS2_llfb', 16 bytes spill stores, "
            "16 bytes spill loads\n");
  const Result r = run("bash " + tool("check_ptxas.sh") + " " + log);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("rms_norm_kernel"), std::string::npos) << r.output;
}

TEST_F(CheckPtxas, IgnoresLibraryKernelsAndZeroCounts) {
  const std::string log = write("other.log",
                                "Building CUDA object x.cu.o\n"
                                "ptxas info    : Function properties for _ZN10blockscope12cuda_kernels3fooEv\n"
                                "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                                "ptxas warning : Registers are spilled to local memory in function "
                                "'_Z12someone_elsev', 8 bytes spill stores, 8 bytes spill loads\n");
  const Result r = run("bash " + tool("check_ptxas.sh") + " " + log);
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(CheckPtxas, BadUsageAndMissingLogExitTwo) {
  EXPECT_EQ(run("bash " + tool("check_ptxas.sh")).status, 2);
  const Result r = run("bash " + tool("check_ptxas.sh") + " " + (dir_ / "absent.log").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot read build log"), std::string::npos) << r.output;
}

using DeviceCheck = ScratchDir;

TEST_F(DeviceCheck, ParsesAsBash) {
  const Result r = run("bash -n " + tool("device_check.sh"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(DeviceCheck, FailsCleanlyWithNoGpuWhenNvidiaSmiIsAbsentOrFails) {
  // An nvidia-smi that fails as it does on a machine without a driver.
  const std::string fake = write("nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed'; exit 9\n");
  fs::permissions(fake, fs::perms::owner_all);
  const Result failing =
      run("NVIDIA_SMI=" + fake + " OUT=" + dir_.string() + " bash " + tool("device_check.sh"));
  EXPECT_EQ(failing.status, 3) << failing.output;
  EXPECT_NE(failing.output.find("no GPU: nvidia-smi found no usable device"), std::string::npos) << failing.output;

  // No nvidia-smi at all.
  const Result absent =
      run("NVIDIA_SMI=" + (dir_ / "absent-nvidia-smi").string() + " bash " + tool("device_check.sh"));
  EXPECT_EQ(absent.status, 3) << absent.output;
  EXPECT_NE(absent.output.find("no GPU: nvidia-smi is not installed"), std::string::npos) << absent.output;
}

TEST_F(DeviceCheck, UnknownArgumentIsBadUsage) {
  const Result r = run("bash " + tool("device_check.sh") + " --no-such-flag");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown argument"), std::string::npos) << r.output;
}

}  // namespace
