// Bad inputs a hostile or careless user gives, one class per test: each must be refused with a
// message naming the problem and the documented exit code, before any work, leaving nothing
// behind — never a crash, a truncated value, a silently different run or a damaged file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/support/test_support.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "runtime/terminal_output.h"

namespace fs = std::filesystem;
namespace bs = blockscope;

namespace {

fs::path scratch() {
  return bs::testing::test_scratch_dir();
}

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The config error for `yaml` (with --set `sets`): an InputError, whose message must hold `expected`.
void expect_config_error(const std::string& yaml, const std::string& expected, const std::vector<std::string>& sets = {}) {
  const std::string path = write(scratch() / "case.yaml", yaml);
  try {
    bs::load_config_file(path, sets);
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input) << error.what();
    EXPECT_NE(error.message().find(expected), std::string::npos) << "message: " << error.message()
                                                                  << "\nexpected: " << expected;
  }
}

const char* kTinyBlock =
    "workload: block\n"
    "model: {family: llama, d_model: 32, n_heads: 4, n_kv_heads: 2, d_ff: 48}\n"
    "input: {batch: 1, seq_len: 8}\n";

struct CliResult {
  int code = -1;
  std::string out, err;
};

// `env`: assignments put before the command ("BLOCKSCOPE_PEAK_CACHE=/x ").
CliResult run_cli(const std::vector<std::string>& args, const std::string& env = "") {
  const fs::path dir = scratch();
  std::string command = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 " + env + "'" + std::string(blockscope::testing::cli_path()) + "'";
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " >'" + (dir / "out.txt").string() + "' 2>'" + (dir / "err.txt").string() + "'";
  const int status = std::system(command.c_str());
  CliResult run;
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read(dir / "out.txt");
  run.err = read(dir / "err.txt");
  return run;
}

size_t entries_in(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// ---- numbers beyond int, and sizes whose products overflow --------------------------------

TEST(BadInputs, IntegersBeyondTheirRangeAreRefusedNotTruncated) {
  const std::string block = kTinyBlock;
  // 2^32 would have been truncated to 0 ("must be at least 1") or to another value.
  expect_config_error(block + "run: {iters: 4294967296}\n", "run.iters: must be at most 2147483647, got 4294967296");
  expect_config_error(block + "run: {warmup: 4294967297}\n", "run.warmup: must be at most 2147483647");
  expect_config_error(block + "profile: {schedule: {active: 4294967296}}\n", "profile.schedule.active: must be at most");
  expect_config_error(block + "profile: {schedule: {wait: 99999999999999999999}}\n", "must be at most");
  expect_config_error(block + "profile: {row_limit: 2147483648}\n", "profile.row_limit: must be at most");
  expect_config_error(block, "model.d_model: must be at most", {"model.d_model=8589934592"});
  expect_config_error(block, "input.seq_len: must be at most", {"input.seq_len=3000000000"});
  expect_config_error(block, "seed: must be at most", {"seed=99999999999999999999"});
}

TEST(BadInputs, ImpossibleSizesAreRefusedNamingTheirKeys) {
  const std::string block = kTinyBlock;
  expect_config_error(block, "impossible size: input.batch x input.seq_len x model.d_model",
                      {"input={batch: 2000000000, seq_len: 2000000000}"});
  expect_config_error(block, "input.seq_len^2 (the attention scores)", {"input={batch: 4, seq_len: 2000000000}"});
  expect_config_error(block, "model.d_model x model.d_ff", {"model.d_model=1000000000", "model.d_ff=2000000000",
                                                           "model.n_heads=1", "model.n_kv_heads=1"});
  expect_config_error("workload: linear\nshape: {m: 2000000000, n: 2000000000, k: 8}\n",
                      "impossible size: shape.m x shape.n");
  expect_config_error("workload: softmax\nshape: {m: 2147483647, n: 2147483647}\n", "impossible size: shape.m x shape.n");
  expect_config_error("workload: attention\nmodel: {n_heads: 2000, head_dim: 64}\ninput: {batch: 2000000, seq_len: 65536}\n",
                      "impossible size");
}

// ---- inputs that would run another model, or part of the file -------------------------------

TEST(BadInputs, HuggingFaceFeaturesWeDoNotImplementAreRefused) {
  const fs::path dir = scratch();
  const auto hf_error = [&](const std::string& json, const std::string& expected) {
    const std::string config = write(dir / "config.json", json);
    expect_config_error(std::string("workload: block\nweights: {config: ") + config + "}\ninput: {batch: 1, seq_len: 8}\n",
                        expected);
  };
  const std::string llama =
      "\"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 48";
  hf_error("{\"model_type\": \"qwen2\", " + llama + "}", "model_type: 'qwen2' is not implemented");
  hf_error("{\"model_type\": \"gemma\", " + llama + "}", "model_type: 'gemma' is not implemented");
  hf_error("{\"model_type\": \"llama\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}, " + llama + "}",
           "rope_scaling: set to");
  hf_error("{\"model_type\": \"mistral\", \"sliding_window\": 4096, " + llama + "}", "sliding_window: set to");
  hf_error("{\"model_type\": \"llama\", \"attention_bias\": true, " + llama + "}", "attention_bias: true is not implemented");
  hf_error("{\"model_type\": \"llama\", \"mlp_bias\": true, " + llama + "}", "mlp_bias: true is not implemented");
  hf_error("{\"model_type\": \"llama\", \"hidden_act\": \"gelu\", " + llama + "}", "hidden_act: 'gelu', but the llama block uses SiLU");
  hf_error("{\"model_type\": \"gpt2\", \"activation_function\": \"relu\", \"n_embd\": 32, \"n_head\": 4}",
           "activation_function: 'relu'");
  hf_error("{\"model_type\": \"gpt2\", \"scale_attn_by_inverse_layer_idx\": true, \"n_embd\": 32, \"n_head\": 4}",
           "scale_attn_by_inverse_layer_idx: true is not implemented");
  // Round 3: settings that ran silently as another model.
  hf_error("{\"model_type\": \"gpt2\", \"scale_attn_weights\": false, \"n_embd\": 32, \"n_head\": 4}",
           "scale_attn_weights: false is not implemented");
  hf_error("{\"model_type\": \"llama\", \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\", "
           "\"factor\": 8.0}, " + llama + "}",
           "rope_parameters.rope_type: 'llama3' (RoPE scaling) is not implemented");
  hf_error("{\"model_type\": \"llama\", \"hidden_size\": 64, " + llama + "}",
           "key 'hidden_size' appears twice in one object");
  hf_error("{\"model_type\": \"llama\", " + llama, "weights.config: not valid JSON");
  // transformers v5's rope_parameters with the default type: its theta is the model's.
  const std::string v5 = write(dir / "v5.json", "{\"model_type\": \"llama\", \"rope_parameters\": {\"rope_theta\": 500000.0, "
                                                "\"rope_type\": \"default\"}, " + llama + "}");
  const bs::WorkloadConfig loaded = bs::load_config_text(
      std::string("workload: block\nweights: {config: ") + v5 + "}\ninput: {batch: 1, seq_len: 8}\n", "v5.yaml");
  EXPECT_EQ(loaded.model.rope_theta, 500000.0) << "before: ran with 10000";
}

TEST(BadInputs, ConfigsThatWouldBeReadOnlyInPartAreRefused) {
  // A second YAML document would be dropped.
  expect_config_error(std::string(kTinyBlock) + "---\nworkload: mlp\n", "a second YAML document starts here");
  expect_config_error(std::string(kTinyBlock) + std::string("# a NUL\0", 8), "is a NUL byte");
  // A marker before the content only opens the (one) document.
  EXPECT_EQ(bs::load_config_text(std::string("---\n") + kTinyBlock, "leading-marker.yaml").kind,
            bs::load_config_text(kTinyBlock, "plain.yaml").kind);
  // Content after a document end marker would be dropped (before: silently).
  expect_config_error(std::string(kTinyBlock) + "...\nseed: 7\n", ":5: content after the document end marker '...'");
  EXPECT_EQ(bs::load_config_text(std::string(kTinyBlock) + "...\n# only a comment after it\n", "end.yaml").kind,
            bs::WorkloadKind::block);
  // Text that is not UTF-8 is refused where it is (before: exit 3 after the run, from the JSON
  // library, when the name was written).
  expect_config_error(std::string("name: \"caf\xe9\"\n") + kTinyBlock, ":1:11: not valid UTF-8 text");
  expect_config_error(kTinyBlock, "--set 'name=\xff': not valid UTF-8", {"name=\xff"});
  // Values outside what a model can mean, with file, line and key (before: 1e-300 refused
  // later without them, 1e-40 accepted and failed `check`).
  for (const char* theta : {"1e-300", "1e-40", "0.5", "1e20"}) {
    expect_config_error(std::string(kTinyBlock) + "", std::string("model.rope_theta: must be from 1 to 1e+12, got ") + theta,
                        {std::string("model.rope_theta=") + theta});
  }
  expect_config_error(kTinyBlock, "model.norm_eps: must be from 1e-30 to 1, got 1e-40", {"model.norm_eps=1e-40"});
  // weights.layer picks a layer of weights.file: with random init it would mean nothing.
  expect_config_error(std::string(kTinyBlock) + "weights: {init: random, layer: 3}\n", "weights.layer: picks the first layer");
  // A directory is not an empty config.
  try {
    bs::load_config_file(scratch().string());
    ADD_FAILURE() << "a directory was accepted as a config";
  } catch (const bs::Error& error) {
    EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
    EXPECT_NE(error.message().find("is a directory"), std::string::npos) << error.message();
  }
}

// ---- output paths ------------------------------------------------------------------------------

TEST(OutputFile, WritesAFileWholeOrNotAtAll) {
  const fs::path dir = scratch();
  const fs::path path = dir / "out.txt";
  write(path, "old");
  {
    bs::OutputFile out(path.string(), "test file");
    out.write("new content");
    EXPECT_EQ(read(path), "old") << "the path changes only at commit";
  }  // destroyed without commit: nothing changes, no temporary is left
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left behind";
  bs::OutputFile out(path.string(), "test file");
  out.write("new content");
  out.commit();
  EXPECT_EQ(read(path), "new content");
}

TEST(OutputFile, ASymlinkStaysALinkAndADeviceIsWrittenInPlace) {
  const fs::path dir = scratch();
  const fs::path target = dir / "target.json", link = dir / "link.json";
  write(target, "old");
  fs::create_symlink(target, link);
  bs::OutputFile out(link.string(), "test file");
  out.write("through the link");
  out.commit();
  EXPECT_TRUE(fs::is_symlink(link)) << "the link was replaced by a file";
  EXPECT_EQ(read(target), "through the link");
  // /dev/null is a character device: written in place, never replaced by a regular file.
  bs::OutputFile null("/dev/null", "test file");
  null.write("discarded");
  null.commit();
  struct stat info;
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode)) << "/dev/null is no longer a character device";
}

TEST(OutputFile, PathsThatCannotBeWrittenAreRefusedUpFront) {
  const fs::path dir = scratch();
  for (const std::string& path : {dir.string(), (dir / "missing" / "out.json").string(), std::string()}) {
    try {
      bs::check_output_path(path, "--trace");
      ADD_FAILURE() << "accepted: '" << path << "'";
    } catch (const bs::Error& error) {
      EXPECT_EQ(error.kind(), bs::ErrorKind::invalid_input);
      EXPECT_NE(error.message().find("--trace"), std::string::npos) << error.message();
    }
  }
  EXPECT_TRUE(bs::same_file((dir / "a.json").string(), (dir / "." / "a.json").string()));
  EXPECT_FALSE(bs::same_file((dir / "a.json").string(), (dir / "b.json").string()));
}

TEST(BadInputs, OutputsThatWouldOverwriteAnInputOrEachOtherAreRefusedBeforeAnyWork) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string before = read(config);
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"profile", config, "--trace", config}, "--trace '" + config + "' is the config"},
      {{"run", config, "--dump", config}, "--dump '" + config + "' is the config"},
      {{"profile", config, "--trace", (dir / "x.json").string(), "--save", (dir / "x.json").string()},
       "is the same file as --trace"},
      {{"profile", config, "--save", (dir / "no" / "such" / "dir.json").string()}, "does not exist"},
      {{"run", config, "--dump", dir.string()}, "is a directory"},
      {{"run", config, "--dtype", ""}, "empty value"},
      {{"run", config, "--device", ""}, "empty value"},
      {{"profile", config, "--format", ""}, "empty value"},
  };
  for (const Case& c : cases) {
    const CliResult run = run_cli(c.args);
    std::string joined;
    for (const std::string& arg : c.args) joined += arg + " ";
    EXPECT_EQ(run.code, 2) << joined << "\n" << run.err;
    EXPECT_NE(run.err.find(c.expected), std::string::npos) << joined << "\nstderr: " << run.err;
    EXPECT_EQ(run.out.find("Self CPU"), std::string::npos) << joined << ": the work ran before the refusal";
  }
  EXPECT_EQ(read(config), before) << "the config was overwritten";
  EXPECT_FALSE(fs::exists(dir / "x.json"));
}

// A full disk (/dev/full: every write fails with ENOSPC) is a runtime failure, exit 3, for
// every output alike, and the message names the file and the reason.
TEST(BadInputs, AFullDiskIsExitThreeForEveryOutput) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", std::string(kTinyBlock) + "profile: {schedule: {active: 1}}\n");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"run", config, "--dump", "/dev/full"},
                                               std::vector<std::string>{"run", config, "--trace", "/dev/full"},
                                               std::vector<std::string>{"profile", config, "--save", "/dev/full"}}) {
    const CliResult run = run_cli(args);
    EXPECT_EQ(run.code, 3) << args[2] << ": " << run.err;
    EXPECT_NE(run.err.find("'/dev/full'"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("No space left on device"), std::string::npos) << run.err;
  }
}

TEST(BadInputs, TraceToDevNullKeepsTheDevice) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const CliResult run = run_cli({"run", config, "--trace", "/dev/null"});
  EXPECT_EQ(run.code, 0) << run.err;
  struct stat info;
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode)) << "/dev/null was replaced by a regular file";
}

// '-' is standard input, for a config and for a saved profile; the first line of an error names it.
TEST(BadInputs, StandardInputIsAConfigAndAProfile) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", std::string(kTinyBlock) + "profile: {schedule: {active: 1}}\n");
  const std::string cli = "'" + std::string(blockscope::testing::cli_path()) + "'";
  const std::string profile = (dir / "p.json").string();
  ASSERT_EQ(std::system((cli + " profile - --save '" + profile + "' < '" + config + "' > /dev/null 2>&1").c_str()), 0);
  EXPECT_TRUE(fs::exists(profile));
  const std::string diffed = (dir / "diff.txt").string();
  ASSERT_EQ(std::system((cli + " diff - '" + profile + "' < '" + profile + "' > '" + diffed + "' 2>&1").c_str()), 0);
  EXPECT_NE(read(diffed).find("kernels per step"), std::string::npos) << read(diffed);
  const std::string error = (dir / "err.txt").string();
  const int status = std::system(("echo 'workload: blok' | " + cli + " run - 2> '" + error + "'").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(read(error).rfind("blockscope: error: <stdin>:1:", 0), 0u) << read(error);
}

// Usage errors carry the same prefix as every other error.
TEST(BadInputs, UsageErrorsSayBlockscopeError) {
  const CliResult run = run_cli({"run", "--no-such-flag"});
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.rfind("blockscope: error: ", 0), 0u) << run.err;
}

// ---- signals --------------------------------------------------------------------------------

// Ctrl-C during a long profile: the command stops after the current step, exits 130, and
// leaves neither its outputs nor any temporary in the output directory.
TEST(BadInputs, InterruptStopsBetweenStepsAndLeavesNothing) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", std::string(kTinyBlock) + "profile: {schedule: {active: 1000000}}\n");
  const fs::path out = dir / "out";
  fs::create_directories(out);
  for (const char* signal : {"INT", "TERM", "HUP"}) {
    const std::string command = "timeout --foreground --preserve-status -s " + std::string(signal) + " 1.5 '" +
                                std::string(blockscope::testing::cli_path()) + "' profile '" + config + "' --trace '" +
                                (out / "t.json").string() + "' --save '" + (out / "p.json").string() + "' >/dev/null 2>'" +
                                (dir / "err.txt").string() + "'";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    const std::string name = signal;
    EXPECT_EQ(WEXITSTATUS(status), name == "INT" ? 130 : name == "TERM" ? 143 : 129) << read(dir / "err.txt");
    EXPECT_NE(read(dir / "err.txt").find("interrupted by SIG" + name), std::string::npos) << read(dir / "err.txt");
    // Acknowledged when it arrives, not only when the step ends ("within a second" on the CPU,
    // "after this step" where a GPU's queued step must finish: the simulated GPU's preset).
    const std::string err = read(dir / "err.txt");
    EXPECT_TRUE(err.find("blockscope: stopping within a second") != std::string::npos ||
                (err.find("on cuda:") != std::string::npos && err.find("blockscope: stopping after this step") != std::string::npos))
        << err;
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 0) << "files left in " << out;
  }
}

// ---- files that must never be replaced -------------------------------------------------------

// The peak cache is written like any output, and only over a peak cache: a config, a FIFO or a
// device named by BLOCKSCOPE_PEAK_CACHE stays what it was (before: replaced by the cache, even
// /dev/null as root); a symlink keeps pointing at the cache it names.
TEST(BadInputs, ThePeakCacheReplacesOnlyAPeakCache) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string cache_env = "BLOCKSCOPE_PEAK_CACHE=";
  CliResult r = run_cli({"info"}, cache_env + config + " ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read(dir / "block.yaml"), kTinyBlock) << "the config is not a cache";
  EXPECT_NE(r.err.find("not cached in '" + config + "': it holds something else than a peak cache"), std::string::npos)
      << r.err;
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = run_cli({"info"}, cache_env + fifo + " timeout 60 ");  // a regression would block on the FIFO: fail, not hang
  EXPECT_EQ(r.code, 0) << r.err;
  struct stat info;
  ASSERT_EQ(::stat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode)) << "still a FIFO";
  // A symlink to a cache: the cache is written, the link stays.
  const fs::path real = dir / "real-cache.json", link = dir / "link.json";
  fs::create_symlink(real, link);
  r = run_cli({"info"}, cache_env + link.string() + " ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  const nlohmann::json cache = nlohmann::json::parse(read(real), nullptr, false);
  ASSERT_TRUE(cache.is_object()) << read(real);
  EXPECT_GE(cache.size(), 1u) << "an entry per dtype info asked for";
  // A damaged figure (1e-300 TFLOP/s) is measured anew, never printed as a 300-digit %.
  nlohmann::json damaged = cache;
  for (auto& [key, entry] : damaged.items()) entry["tflops"] = 1e-300;
  write(real, damaged.dump());
  r = run_cli({"info"}, cache_env + real.string() + " ");
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json remeasured = nlohmann::json::parse(read(real));
  EXPECT_EQ(remeasured.size(), damaged.size());
  for (const auto& [key, entry] : remeasured.items()) EXPECT_GT(entry["tflops"].get<double>(), 1e-6) << key;
  // A cached peak this run's own ops beat (measured on a busy machine) is measured again and
  // rewritten (before: cached for good); `info --remeasure-peaks` does it on request.
  nlohmann::json low = nlohmann::json::parse(read(real));
  for (auto& [key, entry] : low.items()) entry["tflops"] = 1e-5;
  write(real, low.dump());
  r = run_cli({"profile", config, "--device", "cpu"}, cache_env + real.string() + " ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("above the cached peak of 1e-05: the peaks were measured again"), std::string::npos) << r.err;
  const nlohmann::json raised = nlohmann::json::parse(read(real));
  for (const auto& [key, entry] : raised.items()) {
    if (key.find("| f32") != std::string::npos) {
      EXPECT_GT(entry["tflops"].get<double>(), 1e-5) << key;
    }
  }
  write(real, low.dump());
  r = run_cli({"info", "--remeasure-peaks"}, cache_env + real.string() + " ");
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json refreshed = nlohmann::json::parse(read(real));
  for (const auto& [key, entry] : refreshed.items()) EXPECT_GT(entry["tflops"].get<double>(), 1e-5) << key;
  // Overrides outside what a machine can have are refused by name; so is anything but a decimal
  // number (issue 43: 0x10 was read as 16 by strtod).
  for (const char* value : {"inf", "1e400", "nan", "-1", "0", "2e9", "0x10", "' 5'", "infinity", "5f"}) {
    r = run_cli({"info"}, std::string("BLOCKSCOPE_CPU_PEAK_TFLOPS=") + value + " BLOCKSCOPE_CPU_PEAK_GBPS=10 ");
    EXPECT_EQ(r.code, 2) << value << ": " << r.err;
    EXPECT_NE(r.err.find("BLOCKSCOPE_CPU_PEAK_TFLOPS must be a decimal number from"), std::string::npos) << r.err;
  }
  r = run_cli({"info", "--format", "json"}, "BLOCKSCOPE_CPU_PEAK_TFLOPS=1.5e1 BLOCKSCOPE_CPU_PEAK_GBPS=.5e2 ");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["devices"][0]["peaks"]["f32"]["tflops"], 15.0);
}

// Issue 43, the caches through the CLI: BLOCKSCOPE_PLAN_CACHE / _PEAK_CACHE = OFF (any case) is
// no cache (before: a file named OFF in the working directory); an empty peak cache file is an
// empty cache and gets written (before: "holds something else than a peak cache", for good); a
// relative XDG_CACHE_HOME is ignored as the XDG spec says (before: a cache under the working
// directory) and the cache goes under $HOME.
TEST(BadInputs, CacheLocationsFromTheEnvironmentAreStrict) {
  const fs::path dir = scratch() / "cache-env";
  fs::remove_all(dir);
  fs::create_directories(dir / "home");
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string in_dir = "env -C '" + dir.string() + "' ";
  CliResult r = run_cli({"profile", config, "--device", "cpu", "--set", "cpu.gemm=auto"},
                        "BLOCKSCOPE_PLAN_CACHE=OFF BLOCKSCOPE_PEAK_CACHE=Off " + in_dir);
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* name : {"OFF", "Off", "off"}) EXPECT_FALSE(fs::exists(dir / name)) << name << " was created";

  const std::string empty = write(dir / "peaks.json", "");
  r = run_cli({"info"}, "BLOCKSCOPE_PEAK_CACHE='" + empty + "' ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("not cached"), std::string::npos) << r.err;
  const nlohmann::json peaks = nlohmann::json::parse(read(dir / "peaks.json"), nullptr, false);
  EXPECT_TRUE(peaks.is_object() && !peaks.empty()) << read(dir / "peaks.json");

  r = run_cli({"info"}, "env -u BLOCKSCOPE_PEAK_CACHE HOME='" + (dir / "home").string() + "' XDG_CACHE_HOME=rel " + in_dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "rel")) << "a relative XDG_CACHE_HOME was used";
  EXPECT_TRUE(fs::exists(dir / "home" / ".cache" / "blockscope" / "cpu-peaks.json"));
  fs::remove_all(dir);
}

// Hostile round F6 (K10): a cache file over the size limit (4 MiB) is no cache: said once, never
// read and left as it is (before: a 1 GiB sparse plan cache was read whole per GEMM shape and
// again per update, 47 s and 2 GB of memory, five notes).
TEST(BadInputs, AnOverSizeCacheFileIsNeverRead) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const fs::path plans = dir / "plans.json", peaks = dir / "peaks.json";
  for (const fs::path& big : {plans, peaks}) {
    std::ofstream(big).close();
    fs::resize_file(big, uintmax_t{1} << 30);  // sparse: no disk used
  }
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = run_cli({"profile", config, "--device", "cpu", "--set", "cpu.gemm=auto", "--set",
                               "profile.schedule.active=1"},
                              "BLOCKSCOPE_PLAN_CACHE='" + plans.string() + "' BLOCKSCOPE_PEAK_CACHE='" + peaks.string() +
                                  "' timeout 30 ");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(seconds, 15.0) << "a cache over the limit was read";
  // The plan cache is consulted only where loaded weights' GEMMs are planned (oneDNN builds:
  // plain or packed); the built-in GEMM or OpenBLAS alone, as in the simulated GPU's presets,
  // has nothing to plan.
  std::vector<fs::path> consulted{peaks};
  if (bs::cpu::packs_weights()) consulted.push_back(plans);
  for (const fs::path& big : consulted) {
    const std::string note = "not cached in '" + big.string() + "': it holds 1073741824 bytes (1.0 GiB), more than a "
                             "cache ever does (at most 4 MiB)";
    const size_t first = r.err.find(note);
    EXPECT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(note, first + 1), std::string::npos) << "said once: " << r.err;
    EXPECT_EQ(fs::file_size(big), uintmax_t{1} << 30) << "left as it is";
  }
  EXPECT_EQ(r.err.find("something else"), std::string::npos) << r.err;
}

// Hostile round F7 (K34): another process holding the cache directory's lock costs one wait of
// ~10 s for the whole run, said once; no cache is written there and the run succeeds (before:
// ~10 s per cache entry, 51 s for tiny-llama's GEMM shapes, nothing said).
TEST(BadInputs, AHeldCacheLockCostsOneWait) {
  const fs::path dir = scratch() / "locked";
  fs::create_directories(dir);
  const std::string config = write(scratch() / "block.yaml", kTinyBlock);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {  // another process holding the directory's lock until it is killed
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = run_cli({"profile", config, "--device", "cpu", "--set", "cpu.gemm=auto", "--set",
                               "profile.schedule.active=1"},
                              "BLOCKSCOPE_PLAN_CACHE='" + (dir / "plans.json").string() + "' BLOCKSCOPE_PEAK_CACHE='" +
                                  (dir / "peaks.json").string() + "' timeout 45 ");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(seconds, 25.0) << "more than one wait for the lock";
  const std::string note = "held the lock on its directory '" + fs::weakly_canonical(dir).string() + "' for 10 s";
  const size_t first = r.err.find(note);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note, first + 1), std::string::npos) << "said once: " << r.err;
  EXPECT_EQ(entries_in(dir), 0u) << "nothing written while another process held the lock";
}

// Hostile round F8 (K46, K18) and K23: the plan cache is written only over a plan cache as it
// writes one (machine keys, objects of shapes): a user's tsconfig.json, made only of objects, is
// left as it was with a note (before: rewritten with plans), and with the plan and peak caches
// pointed at one file, one kind is kept and the other said (before: merged into one file, then
// refused by the peak writer for good). Our own peak cache with a damaged entry is repaired:
// the entry re-measured and replaced (before: refused as "something else" on every run).
TEST(BadInputs, EachCacheIsWrittenOnlyOverACacheOfItsKind) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::vector<std::string> profile = {"profile", config, "--device", "cpu", "--set", "cpu.gemm=auto", "--set",
                                            "profile.schedule.active=1"};
  const std::string tsconfig_text = "{\"compilerOptions\": {\"strict\": true}}\n";
  const std::string tsconfig = write(dir / "tsconfig.json", tsconfig_text);
  CliResult r = run_cli(profile, "BLOCKSCOPE_PLAN_CACHE='" + tsconfig + "' BLOCKSCOPE_PEAK_CACHE='" + tsconfig + "' ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read(dir / "tsconfig.json"), tsconfig_text) << "not a cache: left as it was";
  EXPECT_NE(r.err.find("not cached in '" + tsconfig + "': it holds something else than a peak cache"), std::string::npos)
      << r.err;

  // Whether this build plans its GEMMs (oneDNN and another library: plans are timed and cached).
  const fs::path plans_only = dir / "plans-only.json";
  ASSERT_EQ(run_cli(profile, "BLOCKSCOPE_PLAN_CACHE='" + plans_only.string() + "' ").code, 0);
  const bool planned = fs::exists(plans_only);
  const std::string both = (dir / "both.json").string();
  r = run_cli(profile, "BLOCKSCOPE_PLAN_CACHE='" + both + "' BLOCKSCOPE_PEAK_CACHE='" + both + "' ");
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json mixed = nlohmann::json::parse(read(both), nullptr, false);
  ASSERT_TRUE(mixed.is_object() && !mixed.empty()) << read(both);
  size_t peak_keys = 0;
  for (const auto& [key, entry] : mixed.items()) peak_keys += entry.contains("tflops") ? 1 : 0;
  EXPECT_TRUE(peak_keys == 0 || peak_keys == mixed.size()) << "one kind of cache in one file: " << mixed.dump(1);
  if (planned) {  // else no plan is written, and nothing is refused
    EXPECT_NE(r.err.find("not cached in '" + both + "': it holds something else than a"), std::string::npos) << r.err;
  }

  const fs::path peaks = dir / "peaks.json";
  const std::string env = "BLOCKSCOPE_PEAK_CACHE='" + peaks.string() + "' ";
  ASSERT_EQ(run_cli({"info"}, env).code, 0);
  nlohmann::json cache = nlohmann::json::parse(read(peaks));
  ASSERT_FALSE(cache.empty());
  const std::string damaged_key = cache.begin().key();
  cache[damaged_key]["tflops"] = "abc";
  cache[damaged_key]["gbps"] = -5;
  write(peaks, cache.dump(2));
  r = run_cli({"info"}, env);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("not cached"), std::string::npos) << "our own cache, repaired: " << r.err;
  const nlohmann::json repaired = nlohmann::json::parse(read(peaks));
  EXPECT_EQ(repaired.size(), cache.size());
  ASSERT_TRUE(repaired[damaged_key]["tflops"].is_number()) << repaired.dump(1);
  EXPECT_GT(repaired[damaged_key]["tflops"].get<double>(), 0);
  EXPECT_GT(repaired[damaged_key]["gbps"].get<double>(), 0);
}

// Issue 43: a workload too large for memory is refused with advice about its largest part
// (before: the attention scores were blamed whenever a path materialised them, 42 KiB of them
// beside 23.7 GiB of weights).
TEST(BadInputs, MemoryAdviceBlamesTheLargestPart) {
  const fs::path dir = scratch();
  const std::string weights = write(dir / "heavy.yaml",
                                    "workload: stack\nmodel: {family: llama, d_model: 4096, n_heads: 32, n_kv_heads: 8, "
                                    "d_ff: 14336, n_layers: 4000}\ninput: {batch: 1, seq_len: 4}\n"
                                    "paths: {attention: naive}\n");
  CliResult r = run_cli({"run", weights, "--device", "cpu"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the weights alone take"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a smaller model"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("use paths.attention: flash"), std::string::npos) << r.err;
  const std::string scores = write(dir / "scores.yaml",
                                   "workload: attention\nmodel: {n_heads: 64, n_kv_heads: 64, head_dim: 64}\n"
                                   "input: {batch: 64, seq_len: 65536}\npaths: {attention: naive}\n");
  r = run_cli({"run", scores, "--device", "cpu"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the attention scores [B, H, S, S] alone take"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use paths.attention: flash"), std::string::npos) << r.err;
}

// Output paths refused before any work: a symlink loop (before: the other link was replaced),
// standard output (before: swallowed the tables), '-' (before: a file named '-'), a name whose
// temporary would be too long (before: failed after the whole profile), a directory no file can
// be created in (/proc: before, failed after the run).
TEST(BadInputs, OutputsThatCannotBeWrittenAreRefusedBeforeAnyWork) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  fs::create_symlink(dir / "b.json", dir / "a.json");
  fs::create_symlink(dir / "a.json", dir / "b.json");
  CliResult r = run_cli({"profile", config, "--trace", (dir / "a.json").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("it is a symlink loop"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "a.json") && fs::is_symlink(dir / "b.json")) << "both links stay links";
  EXPECT_EQ(r.out.find("Step verdict"), std::string::npos) << "refused before the run";
  r = run_cli({"profile", config, "--trace", "-"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'-' is not a file here"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists("-"));
  // A 250-byte name is legal; its temporary (".name.tmp.PID") is shortened to stay legal.
  const std::string long_name = (dir / (std::string(245, 'p') + ".json")).string();
  r = run_cli({"profile", config, "--save", long_name});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(long_name));
  r = run_cli({"profile", config, "--save", (dir / (std::string(256, 'p'))).string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("its name is longer than 255 bytes"), std::string::npos) << r.err;
  r = run_cli({"profile", config, "--trace", "/proc/blockscope-test.json"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("its directory '/proc'"), std::string::npos) << r.err;  // not writable, or (root) no file made
  EXPECT_EQ(r.out.find("Step verdict"), std::string::npos) << "refused before the run";
  // Standard output as an output file, with the tables going there too.
  const std::string command = std::string("'") + blockscope::testing::cli_path() + "' profile '" + config + "' --trace /dev/stdout > '" +
                              (dir / "tables.txt").string() + "' 2> '" + (dir / "err.txt").string() + "'";
  const int status = std::system(command.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2) << read(dir / "err.txt");
  EXPECT_NE(read(dir / "err.txt").find("it is standard output, where the tables go"), std::string::npos)
      << read(dir / "err.txt");
}

// `check` answers a signal within its float64 reference too (before: 58 s after SIGTERM on a
// GPT-2 small block, the reference's GEMMs finishing first).
TEST(BadInputs, CheckStopsPromptlyOnASignal) {
  const fs::path dir = scratch();
  const std::string command = "timeout --preserve-status -s TERM 2 '" + std::string(blockscope::testing::cli_path()) + "' check '" +
                              std::string(blockscope::testing::source_dir()) + "/configs/blocks/gpt2-small.yaml' --device cpu >/dev/null 2>'" +
                              (dir / "err.txt").string() + "'";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143) << read(dir / "err.txt");
  EXPECT_LT(seconds, 20.0) << "stopped " << seconds - 2 << " s after SIGTERM";
}

// A reader closing the pipe (`| head -1`) stops the command like Ctrl-C: exit 141, and no
// temporary or partial output left (before: killed by SIGPIPE, `.t.json.tmp.PID` left behind).
TEST(BadInputs, ABrokenPipeStopsTheCommandAndLeavesNothing) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", std::string(kTinyBlock) + "profile: {schedule: {active: 200}}\n"
                                                      "compare: [{attention: naive}, {attention: inplace}]\n");
  const fs::path out = dir / "out";
  fs::create_directories(out);
  const std::string command = "bash -c \"'" + std::string(blockscope::testing::cli_path()) + "' profile '" + config + "' --trace '" +
                              (out / "t.json").string() + "' 2>'" + (dir / "err.txt").string() +
                              "' | head -c 1 >/dev/null; exit \\${PIPESTATUS[0]}\"";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 141) << read(dir / "err.txt");
  EXPECT_NE(read(dir / "err.txt").find("interrupted by SIGPIPE"), std::string::npos) << read(dir / "err.txt");
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 0) << "files left in " << out;
}

// Inputs that are not regular files are refused at once: a device is not read until memory
// runs out (before: `run /dev/urandom` took 24 GB in 10 s), a FIFO does not block the run with
// Ctrl-C ignored; standard input cannot be read twice.
TEST(BadInputs, InputsThatAreNotRegularFilesAreRefused) {
  const fs::path dir = scratch();
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string profile = (dir / "p.json").string();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  ASSERT_EQ(run_cli({"profile", config, "--save", profile}).code, 0);
  const std::string limit = "timeout 60 ";  // a regression would block: fail, not hang
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"run", "/dev/urandom"}, "config '/dev/urandom': it is a FIFO or a device, not a regular file"},
      {{"run", fifo}, "it is a FIFO or a device, not a regular file"},
      {{"diff", "/dev/zero", profile}, "profile '/dev/zero': it is a FIFO or a device, not a regular file"},
      {{"diff", fifo, profile}, "it is a FIFO or a device, not a regular file"},
      {{"diff", dir.string(), profile}, "it is a directory"},
      {{"diff", "-", "-"}, "'-' given twice"},
      {{"report", "-", "-", "-o", (dir / "r.html").string()}, "'-' given more than once"},
      {{"run", config, "--set", "weights={init: file, file: " + fifo + "}"}, "weights.file: cannot read '" + fifo + "': it is a FIFO"},
      {{"run", config, "--set", "input.file=" + fifo}, "input.file: cannot read '" + fifo + "': it is a FIFO"},
      {{"run", config, "--set", "weights={init: file, file: /dev/zero}"}, "it is a FIFO or a device"},
      {{"run", config, "--set", "weights={config: " + dir.string() + "}"}, "weights.config: cannot read Hugging Face config"},
      {{"profile", config, "--trace", fifo}, "it is a FIFO that no process is reading"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0] + " " + c.args[1]);
    const CliResult r = run_cli(c.args, limit);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
}

// Messages that name what the user typed (round 3: each blamed something else before), and
// flags that applied to less than they said.
TEST(BadInputs, MessagesNameWhatWasTyped) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  CliResult r = run_cli({"profile", config, "--sort-by", "speed"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sort-by 'speed': unknown sort column"), std::string::npos) << "not --set profile.sort_by: " << r.err;
  r = run_cli({"profile", config, "--set", "compare=[{attention: naive}, {attention: naive}]", "--save", (dir / "s.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("compare[1]: duplicates compare[0] (attention=naive)"), std::string::npos) << r.err;
  r = run_cli({"profile", config, "--table", "kernels"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--table kernels picks the one table --format csv prints"), std::string::npos) << r.err;
  const std::string deep = write(dir / "deep.yaml", "workload: block\nmodel: " + std::string(500, '[') + std::string(500, ']') + "\n");
  r = run_cli({"run", deep});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("deep.yaml:2:72: [ ] and { } nest more than 64 deep here"), std::string::npos) << r.err;
  // --columns applies to CSV and JSON too.
  r = run_cli({"profile", config, "--format", "csv", "--columns", "name,calls"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "variant,name,calls");
  r = run_cli({"profile", config, "--format", "json", "--columns", "name,calls"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  for (const nlohmann::json& row : json["variants"][0]["ops"]["rows"]) EXPECT_EQ(row.size(), 2u) << row.dump();
  // The header says "cached in" only when the peaks were written there.
  r = run_cli({"info"}, "BLOCKSCOPE_PEAK_CACHE=/proc/blockscope-peaks.json ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("cached in /proc"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured now, not cached"), std::string::npos) << r.out;
  // A saved profile whose step count disagrees with its steps (0 would print totals as per-step times).
  const std::string saved = (dir / "p.json").string();
  ASSERT_EQ(run_cli({"profile", config, "--save", saved}).code, 0);
  nlohmann::json profile = nlohmann::json::parse(read(saved));
  profile["active_steps"] = 0;
  write(saved, profile.dump());
  r = run_cli({"diff", saved, saved});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("active_steps: is 0, but the profile holds 5 steps"), std::string::npos) << r.err;
}

// ---- terminal safety -----------------------------------------------------------------------------

// A name or key with an ESC sequence, a carriage return or a C1 control is printed as visible
// text (before: raw, so `name: "\e[2J"` cleared the user's screen); JSON stays valid and keeps
// the exact name.
TEST(BadInputs, ControlCharactersFromInputAreEscapedWhenPrinted) {
  EXPECT_EQ(bs::terminal_safe("a\x1b[31mb\rc\td\ne\x7f"), "a\\x1b[31mb\\x0dc\td\ne\\x7f");
  EXPECT_EQ(bs::terminal_safe("csi \xc2\x9b" "2J, é \xc3\xa9, lone \xc2"), "csi \\u009b2J, é \xc3\xa9, lone \xc2");
  const fs::path dir = scratch();
  const std::string config =
      write(dir / "evil.yaml", std::string("name: \"evil\\e[2J\\rX\\u009b\"\n") + kTinyBlock + "compare: [{attention: naive}]\n");
  for (const char* command : {"run", "profile"}) {
    SCOPED_TRACE(command);
    const CliResult run = run_cli({command, config, "--device", "cpu"});
    ASSERT_EQ(run.code, 0) << run.err;
    for (const std::string* text : {&run.out, &run.err}) {
      EXPECT_EQ(text->find('\x1b'), std::string::npos);
      EXPECT_EQ(text->find('\r'), std::string::npos);
      EXPECT_EQ(text->find("\xc2\x9b"), std::string::npos);
    }
    EXPECT_NE(run.out.find("evil\\x1b[2J\\x0dX\\u009b"), std::string::npos) << run.out;
  }
  const CliResult json = run_cli({"profile", config, "--device", "cpu", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json.out.substr(0, 300);
  EXPECT_EQ(parsed["workload"].get<std::string>().rfind("evil\x1b[2J\rX\xc2\x9b", 0), 0u) << "the exact name";
  // Messages: a key from --set, escaped on stderr.
  const CliResult key = run_cli({"run", config, "--set", "model.d_m\x1b[0model=64"});
  EXPECT_EQ(key.code, 2);
  EXPECT_EQ(key.err.find('\x1b'), std::string::npos) << key.err;
  EXPECT_NE(key.err.find("\\x1b[0m"), std::string::npos) << key.err;
}

// ---- non-finite values -------------------------------------------------------------------------

// Overwrites `count` elements of tensor `name` in a safetensors file with `bytes` (per element).
void poison(const std::string& path, const std::string& name, const std::string& element, size_t count) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_bytes = 0;
  file.read(reinterpret_cast<char*>(&header_bytes), 8);
  std::string header(header_bytes, '\0');
  file.read(header.data(), static_cast<std::streamsize>(header_bytes));
  const nlohmann::json parsed = nlohmann::json::parse(header);
  ASSERT_TRUE(parsed.contains(name)) << header;
  file.seekp(static_cast<std::streamoff>(8 + header_bytes + parsed[name]["data_offsets"][0].get<uint64_t>()));
  for (size_t i = 0; i < count; ++i) file.write(element.data(), static_cast<std::streamsize>(element.size()));
}

TEST(BadInputs, NonFiniteWeightsAreRefusedOnLoadNamingTheTensor) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string dump = (dir / "block.safetensors").string();
  ASSERT_EQ(run_cli({"run", config, "--dump", dump}).code, 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  poison(dump, "model.layers.0.self_attn.k_proj.weight", std::string(reinterpret_cast<const char*>(&nan), 4), 1);
  const std::string from_file = write(dir / "from_file.yaml", std::string(kTinyBlock) + "weights: {file: " + dump + "}\n");
  const CliResult run = run_cli({"run", from_file});
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_NE(run.err.find("tensor 'model.layers.0.self_attn.k_proj.weight' holds nan at index 0"), std::string::npos)
      << run.err;
}

// f32 weights that are finite but overflow the run's dtype: refused after the conversion,
// naming the tensor, the value and the dtype (before: the f16 run held inf and exited 0).
TEST(BadInputs, WeightsThatOverflowTheRunsDtypeAreRefused) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string dump = (dir / "block.safetensors").string();
  ASSERT_EQ(run_cli({"run", config, "--dump", dump}).code, 0);
  const float big = 70000.0f;  // f16's largest finite value is 65504
  poison(dump, "model.layers.0.mlp.up_proj.weight", std::string(reinterpret_cast<const char*>(&big), 4), 1);
  const std::string from_file = write(dir / "from_file.yaml", std::string(kTinyBlock) + "weights: {file: " + dump + "}\n");
  EXPECT_EQ(run_cli({"run", from_file}).code, 0) << "finite in f32, the file's own dtype";
  EXPECT_EQ(run_cli({"run", from_file, "--dtype", "bf16"}).code, 0) << "finite in bf16";
  const CliResult run = run_cli({"run", from_file, "--dtype", "f16"});
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_NE(run.err.find("tensor 'model.layers.0.mlp.up_proj.weight' holds 70000 at index 0, which is inf in f16"),
            std::string::npos)
      << run.err;
  // 65504 itself is f16's largest finite value: accepted.
  const float largest = 65504.0f;
  poison(dump, "model.layers.0.mlp.up_proj.weight", std::string(reinterpret_cast<const char*>(&largest), 4), 1);
  EXPECT_EQ(run_cli({"run", from_file, "--dtype", "f16"}).code, 0);
}

// Only the tensors the block uses are read: a checkpoint with a 4 GiB tensor beside them (an
// LM head, here a sparse file) loads in the block's own memory (before: read whole, 3.3 GB
// resident for a 3 GB tensor). A sharded checkpoint's index is accepted and gives the same run.
TEST(BadInputs, CheckpointsAreReadOnlyForTheTensorsTheBlockUses) {
  const fs::path dir = scratch();
  const std::string config = write(dir / "block.yaml", kTinyBlock);
  const std::string dump = (dir / "block.safetensors").string();
  ASSERT_EQ(run_cli({"run", config, "--dump", dump}).code, 0);
  bs::SafetensorsFile file = bs::read_safetensors(dump);

  // The same tensors plus "lm_head.weight" [32768, 32768] f32 (4 GiB) after them, written as
  // a header and a sparse tail.
  const std::string big = (dir / "big.safetensors").string();
  {
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    std::string data;
    for (const bs::SafetensorsEntry& entry : file.tensors) {
      header[entry.name] = {{"dtype", "F32"}, {"shape", entry.shape}, {"data_offsets", {offset, offset + entry.bytes.size()}}};
      ASSERT_EQ(entry.dtype, bs::DType::f32);
      data.append(entry.bytes.begin(), entry.bytes.end());
      offset += entry.bytes.size();
    }
    const uint64_t head_bytes = uint64_t{32768} * 32768 * 4;
    header["lm_head.weight"] = {{"dtype", "F32"}, {"shape", {32768, 32768}}, {"data_offsets", {offset, offset + head_bytes}}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::ofstream out(big, std::ios::binary);
    const uint64_t length = text.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << text << data;
    out.close();
    fs::resize_file(big, 8 + text.size() + offset + head_bytes);  // sparse: no 4 GiB written
  }
  const std::string from_big = write(dir / "from_big.yaml", std::string(kTinyBlock) + "weights: {file: " + big + "}\n");
  const std::string out_big = (dir / "out_big.safetensors").string();
  struct rusage before;
  ::getrusage(RUSAGE_CHILDREN, &before);
  const CliResult r = run_cli({"run", from_big, "--dump", out_big});
  EXPECT_EQ(r.code, 0) << r.err;
  struct rusage after;
  ::getrusage(RUSAGE_CHILDREN, &after);
  EXPECT_LT(after.ru_maxrss, 1L << 20) << "max resident KiB of a child: the 4 GiB tensor was read";

  // Two shards and their index: the same output as the single file.
  std::vector<std::pair<std::string, bs::Tensor>> first, second;
  bs::Context host(bs::Device::cpu());
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const bs::SafetensorsEntry& entry = file.tensors[i];
    if (entry.name == "input" || entry.name == "output") continue;
    const bool in_first = i % 2 == 0;
    (in_first ? first : second).emplace_back(entry.name, bs::tensor_from_entry(host, entry));
    weight_map[entry.name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  bs::write_safetensors((dir / "model-00001-of-00002.safetensors").string(), first);
  bs::write_safetensors((dir / "model-00002-of-00002.safetensors").string(), second);
  const std::string index = write(dir / "model.safetensors.index.json",
                                  nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  const std::string from_index = write(dir / "from_index.yaml", std::string(kTinyBlock) + "weights: {file: " + index + "}\n");
  const std::string out_index = (dir / "out_index.safetensors").string();
  ASSERT_EQ(run_cli({"run", from_index, "--dump", out_index}).code, 0);
  const std::string from_single = write(dir / "from_single.yaml", std::string(kTinyBlock) + "weights: {file: " + dump + "}\n");
  const std::string out_single = (dir / "out_single.safetensors").string();
  ASSERT_EQ(run_cli({"run", from_single, "--dump", out_single}).code, 0);
  EXPECT_EQ(bs::read_safetensors(out_index).find("output")->bytes, bs::read_safetensors(out_single).find("output")->bytes);
  EXPECT_EQ(bs::read_safetensors(out_big).find("output")->bytes, bs::read_safetensors(out_single).find("output")->bytes);
  // An index naming a shard without the tensor, or not an index at all.
  for (auto& [name, shard] : weight_map.items()) {
    if (shard == "model-00001-of-00002.safetensors") {
      shard = "model-00002-of-00002.safetensors";
      break;
    }
  }
  write(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
  CliResult bad = run_cli({"run", from_index});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("which does not hold it"), std::string::npos) << bad.err;
  write(dir / "model.safetensors.index.json", "{\"metadata\": {}}");
  bad = run_cli({"run", from_index});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("a sharded checkpoint's index, with a \"weight_map\""), std::string::npos) << bad.err;
}

TEST(BadInputs, CheckFiniteNamesTheFirstOpWithANonFiniteOutput) {
  const fs::path dir = scratch();
  const std::string mlp = "workload: mlp\ndtype: f16\nmodel: {d_model: 32, d_ff: 48, gated: false, activation: gelu}\n"
                          "input: {batch: 1, seq_len: 4}\n";
  const std::string config = write(dir / "mlp.yaml", mlp + "run: {iters: 1, warmup: 0}\n");
  const std::string dump = (dir / "mlp.safetensors").string();
  ASSERT_EQ(run_cli({"run", config, "--dump", dump}).code, 0);
  // Inputs near the f16 maximum: finite, but the first GEMM's sums overflow to infinity.
  poison(dump, "input", std::string("\xef\x7b", 2), 4 * 32);
  const std::string checked =
      write(dir / "checked.yaml", mlp + "run: {iters: 1, warmup: 0, check_finite: true}\n");
  const CliResult run = run_cli({"run", checked, "--set", "input.file=" + dump});
  EXPECT_EQ(run.code, 3) << run.err;
  EXPECT_NE(run.err.find("run.check_finite: op 'linear'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("inf"), std::string::npos) << run.err;
  const std::string block = write(dir / "block.yaml", std::string(kTinyBlock) + "run: {check_finite: true, iters: 1, warmup: 0}\n");
  const CliResult clean = run_cli({"run", block});
  EXPECT_EQ(clean.code, 0) << "finite outputs pass the check: " << clean.err;
  // Issue 43: the causal mask's -inf is by design (before: every naive and inplace attention run
  // failed here, at masked_fill); the softmax and everything after it are still checked.
  for (const char* path : {"naive", "inplace", "fused_softmax", "flash"}) {
    const CliResult masked = run_cli({"run", block, "--set", std::string("paths.attention=") + path});
    EXPECT_EQ(masked.code, 0) << path << ": " << masked.err;
  }
}

// ---- profiles that do not compare --------------------------------------------------------------

TEST(BadInputs, DiffOfProfilesOfDifferentWorkloadsWarns) {
  const fs::path dir = scratch();
  const std::string block = write(dir / "block.yaml", std::string(kTinyBlock) + "profile: {schedule: {active: 1}}\n");
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  ASSERT_EQ(run_cli({"profile", block, "--save", a}).code, 0);
  ASSERT_EQ(run_cli({"profile", block, "--save", b, "--dtype", "bf16", "--set", "input.seq_len=4"}).code, 0);
  const CliResult diff = run_cli({"diff", a, b});
  EXPECT_EQ(diff.code, 0) << diff.err;
  EXPECT_NE(diff.err.find("warning: the profiles measured different dtypes: 'f32' and 'bf16'"), std::string::npos)
      << diff.err;
  EXPECT_NE(diff.err.find("different workloads"), std::string::npos) << diff.err;
  EXPECT_NE(diff.out.find("warning: the profiles measured different dtypes"), std::string::npos) << diff.out;
  const CliResult same = run_cli({"diff", a, a});
  EXPECT_EQ(same.err.find("warning"), std::string::npos) << same.err;
}

}  // namespace
