// The non-GPU parts of the CUDA tooling: tools/ci/check_ptxas.sh (the CI spill gate) on synthetic
// build logs, and tools/device/device_check.sh failing cleanly, with "no GPU", where no GPU exists.
// Runs everywhere (no CUDA needed); skips only if bash is missing.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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

std::string tool(const char* name) { return std::string(blockscope::testing::source_dir()) + "/tools/" + name; }

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run("command -v bash").status != 0) GTEST_SKIP() << "bash is not installed";
    dir_ = blockscope::testing::scratch_root() /
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
  const Result r = run("bash " + tool("ci/check_ptxas.sh") + " " + log);
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
  const Result r = run("bash " + tool("ci/check_ptxas.sh") + " " + log);
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
  const Result r = run("bash " + tool("ci/check_ptxas.sh") + " " + log);
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(CheckPtxas, BadUsageAndMissingLogExitTwo) {
  EXPECT_EQ(run("bash " + tool("ci/check_ptxas.sh")).status, 2);
  const Result r = run("bash " + tool("ci/check_ptxas.sh") + " " + (dir_ / "absent.log").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot read build log"), std::string::npos) << r.output;
}

using DeviceCheck = ScratchDir;

TEST_F(DeviceCheck, ParsesAsBash) {
  const Result r = run("bash -n " + tool("device/device_check.sh"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(DeviceCheck, FailsCleanlyWithNoGpuWhenNvidiaSmiIsAbsentOrFails) {
  // An nvidia-smi that fails as it does on a machine without a driver.
  const std::string fake = write("nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed'; exit 9\n");
  fs::permissions(fake, fs::perms::owner_all);
  const Result failing =
      run("NVIDIA_SMI=" + fake + " OUT=" + dir_.string() + " bash " + tool("device/device_check.sh"));
  EXPECT_EQ(failing.status, 3) << failing.output;
  EXPECT_NE(failing.output.find("no GPU: nvidia-smi found no usable device"), std::string::npos) << failing.output;

  // No nvidia-smi at all.
  const Result absent =
      run("NVIDIA_SMI=" + (dir_ / "absent-nvidia-smi").string() + " bash " + tool("device/device_check.sh"));
  EXPECT_EQ(absent.status, 3) << absent.output;
  EXPECT_NE(absent.output.find("no GPU: nvidia-smi is not installed"), std::string::npos) << absent.output;
}

// A fake GPU (nvidia-smi answering like an H200's) and a fake kit (shell scripts standing in
// for the test, CLI and benchmark binaries), so the whole run can be dry-run here.
class FakeGpu : public ScratchDir {
 protected:
  void SetUp() override {
    ScratchDir::SetUp();
    if (IsSkipped()) return;
    if (run("command -v python3").status != 0) GTEST_SKIP() << "python3 is not installed";
    args_log_ = (dir_ / "bench_args.log").string();
    fs::create_directories(dir_ / "kit" / "bin");
    write("kit/COMMIT", "deadbeefdeadbeefdeadbeefdeadbeefdeadbeef\n");
    write("kit/CUDA_VERSION", "13.0\n");
    write("kit/CUDA_ARCHS", "90\n");
    const std::string gtest =
        "#!/bin/sh\ncase \"$*\" in *--gtest_list_tests*) echo 'Fake.'; echo '  Test';; "
        "*) echo '[  PASSED  ] 3 tests.';; esac\n";
    executable("kit/bin/softmax_test", gtest);
    executable("kit/bin/core_test", gtest);
    // The CLI: 04_attention's flash variant "cannot run on this device"; 01_matmul_add_64 is
    // host-bound, as on a GPU.
    executable("kit/bin/blockscope",
               "#!/bin/sh\ncase \"$*\" in *04_attention*) echo '== base =='; echo \"blockscope: profile: variant "
               "'flash' skipped on cuda:0: attention: the flash path is not supported here (fake)\" >&2;; "
               "*01_matmul_add_64*) echo 'Step verdict: host-bound: the device is busy 9% of the step (fake)';; esac\n"
               "exit 0\n");
    // A suite with CUDA cases (it records its arguments) and one with none (CPU only).
    executable("kit/bin/linear_bench",
               "#!/bin/sh\necho \"$@\" >> '" + args_log_ +
                   "'\nout=''\nfor a in \"$@\"; do case \"$a\" in --benchmark_list_tests*) "
                   "echo 'linear/naive/f32/M=8/cuda:0/manual_time'; exit 0;; --benchmark_out=*) "
                   "out=\"${a#--benchmark_out=}\";; esac; done\n"
                   "echo '{\"benchmarks\": [{\"name\": \"linear/naive/f32/M=8/cuda:0/manual_time\"}]}' > \"$out\"\n");
    executable("kit/bin/profiler_bench", "#!/bin/sh\necho \"$@\" >> '" + args_log_ + "'\nexit 0\n");
    kit_ = (dir_ / "device-kit.tar.xz").string();
    const Result packed = run("python3 -c \"import tarfile; t = tarfile.open('" + kit_ + "', 'w:xz'); t.add('" +
                              (dir_ / "kit").string() + "', arcname='kit'); t.close()\"");
    ASSERT_EQ(packed.status, 0) << packed.output;
    // A sanitizer that outlives any limit: its step must say "timeout", not "FAIL".
    sanitizer_ = executable("compute-sanitizer", "#!/bin/sh\nexec sleep 30\n");
  }
  std::string executable(const std::string& name, const std::string& text) {
    const std::string path = write(name, text);
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }
  // nvidia-smi of a GPU with this compute capability, under a driver supporting this CUDA.
  std::string smi(const std::string& compute_cap, const std::string& driver_cuda) {
    return executable("nvidia-smi-" + compute_cap + "-" + driver_cuda,
                      "#!/bin/sh\ncase \"$*\" in *compute_cap*) echo '" + compute_cap +
                          "';; *query-gpu*) echo 'NVIDIA H200, 580.65, 143771 MiB';; *) echo '| NVIDIA-SMI 580.65 "
                          "Driver Version: 580.65  CUDA Version: " + driver_cuda + " |';; esac\n");
  }
  Result device_check(const std::string& nvidia_smi, const std::string& extra = "") {
    const fs::path out = dir_ / "out";
    fs::create_directories(out);
    return run("NVIDIA_SMI=" + nvidia_smi + " DEVICE_CHECK_KIT=" + kit_ + " OUT=" + out.string() +
               " COMPUTE_SANITIZER=" + sanitizer_ + " NCU=" + (dir_ / "absent-ncu").string() +
               " DEVICE_CHECK_MIN_STEP_S=1 DEVICE_CHECK_SANITIZERS_S=2 " + extra +
               " bash " + tool("device/device_check.sh"));
  }
  std::string args_log_, kit_, sanitizer_;
};

// Every phase on the fake GPU: the kit unpacked by Python (no xz), the skipped profile variant
// reported with its reason while the other configs still run, the benchmark filter, a suite
// without CUDA cases skipped, the sanitizer's timeout, the kit's commit compared with the tree.
TEST_F(FakeGpu, DryRunReportsEveryPhase) {
  const Result r = device_check(smi("9.0", "13.0"), "DEVICE_CHECK_XZ=" + (dir_ / "no-xz").string());
  EXPECT_EQ(r.status, 0) << r.output;  // a sanitizer timeout is no failure
  const std::string& o = r.output;
  EXPECT_NE(o.find("unpacking the kit with Python's lzma/tarfile"), std::string::npos) << o;
  EXPECT_NE(o.find("driver CUDA 13.0, kit runtime 13.0; compute capability 9.0, kit architectures 90"),
            std::string::npos) << o;
  for (const char* phase : {"phase tests", "phase sanitizers", "phase benchmarks", "phase counters", "phase pytorch"}) {
    EXPECT_NE(o.find(phase), std::string::npos) << phase << "\n" << o;
  }
  EXPECT_LT(o.find("phase tests"), o.find("phase sanitizers")) << o;
  EXPECT_LT(o.find("phase sanitizers"), o.find("phase benchmarks")) << o;
  EXPECT_LT(o.find("phase benchmarks"), o.find("phase counters")) << o;
  EXPECT_LT(o.find("phase counters"), o.find("phase pytorch")) << o;
  // No Nsight Compute on the fake machine: the comparison is one skip row saying so.
  EXPECT_NE(o.find("Nsight Compute (ncu) not installed"), std::string::npos) << o;
  // The kit's commit (deadbeef) against the tree's: a warning when git knows the tree's.
  EXPECT_TRUE(o.find("kit deadbeefdead but this tree is at") != std::string::npos ||
              o.find("this tree's commit is unknown") != std::string::npos) << o;
  // (a) the variant the device cannot run: skipped with the reason; the configs all ran.
  EXPECT_NE(o.find("profile 04_attention [flash]"), std::string::npos) << o;
  EXPECT_NE(o.find("the flash path is not supported here (fake)"), std::string::npos) << o;
  const size_t attention_row = o.find("device_check: profile 04_attention  ");
  ASSERT_NE(attention_row, std::string::npos) << o;
  EXPECT_EQ(o.compare(o.find_first_not_of(' ', attention_row + 34), 2, "ok"), 0) << o.substr(attention_row, 80);
  EXPECT_NE(o.find("profile 02_linear"), std::string::npos) << o;
  // The small-size lesson read from the GPU's timeline.
  EXPECT_NE(o.find("verdict 01_matmul_add_64"), std::string::npos) << o;
  EXPECT_NE(o.find("host-bound: the device is busy 9% of the step (fake)"), std::string::npos) << o;
  // Tensor parallelism needs 2 GPUs: the fake has one, so its rows are one skip with the reason.
  EXPECT_NE(o.find("1 GPU: tensor parallelism needs 2 or more"), std::string::npos) << o;
  // (b) the benchmark filter, and a suite without CUDA cases skipped.
  std::ifstream args(args_log_);
  const std::string bench_args((std::istreambuf_iterator<char>(args)), std::istreambuf_iterator<char>());
  EXPECT_NE(bench_args.find("--benchmark_filter=/cuda:[0-9]+ --benchmark_min_time"), std::string::npos) << bench_args;
  EXPECT_NE(o.find("1 results of 1 CUDA cases"), std::string::npos) << o;
  EXPECT_NE(o.find("no CUDA cases (--benchmark_filter='/cuda:[0-9]+')"), std::string::npos) << o;
  // (d) the sanitizer cut by its (phase) limit: "timeout", and the next steps skipped.
  const size_t memcheck = o.find("device_check: memcheck softmax_test");
  ASSERT_NE(memcheck, std::string::npos) << o;
  EXPECT_NE(o.substr(memcheck, 60).find("timeout"), std::string::npos) << o.substr(memcheck, 120);
  EXPECT_EQ(o.substr(memcheck, 60).find("FAIL"), std::string::npos) << o.substr(memcheck, 120);
  EXPECT_NE(o.find("no time left in the sanitizers phase's 2s budget"), std::string::npos) << o;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "summary.md"));
}

// Up-front checks: a driver older than the kit's CUDA runtime, or a GPU the kit has no code
// for, stop the run (exit 4) with the reason before any binary runs.
TEST_F(FakeGpu, RefusesAKitTheGpuCannotRun) {
  const Result old_driver = device_check(smi("9.0", "12.4"));
  EXPECT_EQ(old_driver.status, 4) << old_driver.output;
  EXPECT_NE(old_driver.output.find("its CUDA runtime is 13.0 but the driver supports CUDA 12.4 only"),
            std::string::npos) << old_driver.output;
  const Result old_gpu = device_check(smi("8.0", "13.0"));
  EXPECT_EQ(old_gpu.status, 4) << old_gpu.output;
  EXPECT_NE(old_gpu.output.find("compute capability 8.0 but the kit was built for CUDA architectures 90"),
            std::string::npos) << old_gpu.output;
  // A later GPU runs the kit's compute_90 PTX: no refusal there.
  const Result newer = device_check(smi("10.0", "13.1"), "DEVICE_CHECK_BUDGET_S=1");
  EXPECT_NE(newer.status, 4) << newer.output;
  EXPECT_EQ(newer.output.find("cannot run here"), std::string::npos) << newer.output;
}

TEST_F(DeviceCheck, UnknownArgumentIsBadUsage) {
  const Result r = run("bash " + tool("device/device_check.sh") + " --no-such-flag");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown argument"), std::string::npos) << r.output;
}

}  // namespace
