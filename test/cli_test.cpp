// End-to-end tests of the real `blockscope` binary on real files: every shipped config runs on
// the CPU; malformed configs give their specific message, exit code 2, no output file and no
// crash; dump, trace, save/diff, check, info and --help work.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test/support/test_support.h"
#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "model/safetensors.h"

namespace fs = std::filesystem;

namespace {

using Result = blockscope::testing::ProgramResult;

std::string read_file(const fs::path& path) { return blockscope::testing::read_text_file(path); }

fs::path temp_dir() {
  return blockscope::testing::test_scratch_dir();
}

std::string quote(const std::string& arg) { return blockscope::testing::shell_quote(arg); }

// The CLI with `args`; `env` ("COLUMNS=80 ") goes before the command.
Result run_cli(const std::vector<std::string>& args, const std::string& env = "") {
  return blockscope::testing::run_program(blockscope::testing::cli_path(), args, env);
}

std::string source(const std::string& relative) { return std::string(blockscope::testing::source_dir()) + "/" + relative; }

// Small sizes for the shipped configs that are too big for a quick CPU run.
std::vector<std::string> small_overrides(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> overrides = {
      {"01_matmul_add_4096.yaml", {"shape={m: 96, n: 80, k: 72}"}},
      {"02_linear.yaml", {"shape={m: 96, n: 80, k: 72}"}},
      {"linear-current.yaml", {"shape={m: 96, n: 80, k: 64}"}},
      {"linear-delayed.yaml", {"shape={m: 96, n: 80, k: 64}"}},
      {"linear-small-current.yaml", {"shape={m: 33, n: 48, k: 64}"}},
      {"mlp-geglu-current.yaml", {"input={batch: 2, seq_len: 16}", "model.d_model=64", "model.d_ff=96"}},
      {"mlp-gpt2-delayed.yaml", {"input={batch: 2, seq_len: 16}", "model.d_model=64", "model.d_ff=96"}},
      {"block-llama-3-8b-current.yaml",
       {"input={batch: 1, seq_len: 9}", "model.d_model=64", "model.n_heads=4", "model.n_kv_heads=2", "model.head_dim=16",
        "model.d_ff=96"}},
      {"block-gpt2-delayed.yaml", {"input={batch: 1, seq_len: 9}", "model.d_model=64", "model.n_heads=2", "model.d_ff=128"}},
      {"03_mlp_geglu.yaml", {"input={batch: 2, seq_len: 16}", "model.d_model=64", "model.d_ff=96"}},
      {"04_attention.yaml", {"input={batch: 1, seq_len: 33}"}},
      {"gpt2-small.yaml", {"input={batch: 1, seq_len: 9}", "model.d_model=64", "model.n_heads=2", "model.d_ff=128"}},
      {"gpt2-xl.yaml", {"input={batch: 1, seq_len: 9}", "model.d_model=50", "model.n_heads=5", "model.d_ff=100"}},
      {"llama-3-8b.yaml",
       {"input={batch: 1, seq_len: 9}", "model.d_model=64", "model.n_heads=4", "model.n_kv_heads=2", "model.head_dim=16",
        "model.d_ff=96"}},
      {"llama-decode.yaml",
       {"decode={prompt_len: 9, new_tokens: 3}", "model.d_model=64", "model.n_heads=4", "model.n_kv_heads=2",
        "model.head_dim=16", "model.d_ff=96"}},
      {"llama-decode-paged-ragged.yaml",
       {"decode={prompt_lens: [5, 1, 9], new_tokens: 3, kv_cache: {layout: paged, page_size: 4}}", "model.d_model=64",
        "model.n_heads=4", "model.n_kv_heads=2", "model.head_dim=16", "model.d_ff=96"}},
      {"gpt2-decode.yaml",
       {"decode={batch: 2, prompt_len: 7, new_tokens: 3, kv_cache: {layout: paged, page_size: 4}}", "model.d_model=64",
        "model.n_heads=2", "model.d_ff=128"}},
  };
  auto it = overrides.find(name);
  return it == overrides.end() ? std::vector<std::string>{} : it->second;
}

std::vector<fs::path> shipped_configs() {
  std::vector<fs::path> paths;
  for (const char* dir : {"configs/series", "configs/blocks", "configs/decode", "configs/fp8"})
    for (const auto& entry : fs::directory_iterator(source(dir)))
      if (entry.path().extension() == ".yaml") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

TEST(Cli, ProfileWithNoArgumentRunsTheDefaultConfig) {
  const Result r = run_cli({"profile"});
  ASSERT_FALSE(r.crashed);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("default-tiny-gpt2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attention"), std::string::npos);
  EXPECT_NE(r.out.find("\ndiff: base "), std::string::npos) << "the default config compares variants";
  EXPECT_EQ(r.out.find("== diff"), std::string::npos) << "a diff's header is printed once, by the diff itself";
}

// The table flags, progress on stderr, tables within COLUMNS, --threads in the header, and
// peaks measured once per machine: the second run reads the first one's.
TEST(Cli, ProfileFlagsProgressWidthThreadsAndCachedPeaks) {
  const fs::path cache = temp_dir() / "peaks.json";
  fs::remove(cache);
  const std::string env = "COLUMNS=100 BLOCKSCOPE_PEAK_CACHE=" + quote(cache.string()) + " ";
  const std::vector<std::string> base = {"profile", source("configs/blocks/tiny-gpt2.yaml"), "--device", "cpu",
                                         "--set", "compare=[]", "--threads", "1"};
  std::vector<std::string> args = base;
  for (const char* extra : {"--sort-by", "calls", "--row-limit", "3", "--group-by-shape"}) args.push_back(extra);
  Result r = run_cli(args, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Device: cpu (1 thread, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" more rows (--row-limit 0 shows all)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Step time: median "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("profile: [1/1] base "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" done in "), std::string::npos) << r.err;
  int rules = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.find_first_not_of("- ") != std::string::npos) continue;  // a table's rule
    ++rules;
    EXPECT_LE(line.size(), 100u) << "a table wider than COLUMNS=100:\n" << r.out;
  }
  EXPECT_GE(rules, 6) << r.out;
  EXPECT_TRUE(fs::exists(cache));
  // Grouped by shape, the shapes tell the rows apart: kept when the table is fitted.
  EXPECT_NE(r.out.find("Input Shapes"), std::string::npos) << r.out;

  args.push_back("--format");
  args.push_back("json");
  r = run_cli(args, env);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r.out;
  const nlohmann::json& ops = out["variants"][0]["ops"];
  ASSERT_EQ(ops["rows"].size(), 3u);
  EXPECT_GT(ops["rows_cut"].get<int>(), 0);
  for (size_t i = 1; i < ops["rows"].size(); ++i) EXPECT_GE(ops["rows"][i - 1]["calls"], ops["rows"][i]["calls"]);
  EXPECT_EQ(ops["sort_by"], "calls");
  EXPECT_NE(ops["peaks"]["source"].get<std::string>().find("measured earlier on this machine, cached in " + cache.string()),
            std::string::npos)
      << ops["peaks"].dump();
  const Result again = run_cli(args, env);
  ASSERT_EQ(again.code, 0) << again.err;
  // The same peaks every run — unless the first run measured them on a busy machine (a parallel
  // build, other tests) and this run's ops beat them: then it says so and they are measured anew.
  const std::string remeasured = "the peaks were measured again";
  if (r.err.find(remeasured) == std::string::npos && again.err.find(remeasured) == std::string::npos) {
    EXPECT_EQ(nlohmann::json::parse(again.out)["variants"][0]["ops"]["peaks"], ops["peaks"]) << "the same peaks every run";
  }

  // --columns picks the op table's columns; an unknown one is a usage error naming the valid ones.
  args = base;
  args.push_back("--columns");
  args.push_back("name,calls");
  r = run_cli(args, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Name        # of Calls\n"), std::string::npos) << r.out;
  args.back() = "name,bogus";
  r = run_cli(args, env);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--columns: unknown column 'bogus'; columns: name, path,"), std::string::npos) << r.err;
}

// Where bf16 GEMMs are no faster than f32 (a CPU without native bf16 kernels), info and the
// profile header say so with both peaks; where they are faster, nothing is said. The peaks are
// the cache's, made slow or fast here.
TEST(Cli, InfoAndProfileSayWhenBf16IsNoFasterThanF32) {
  const fs::path cache = temp_dir() / "dtype_peaks.json";
  fs::remove(cache);
  // One thread for info (OMP_NUM_THREADS) and profile (--threads): the same cache entries.
  const std::string env = "COLUMNS=100 OMP_NUM_THREADS=1 BLOCKSCOPE_PEAK_CACHE=" + quote(cache.string()) + " ";
  const std::vector<std::string> info = {"info", "--format", "json"};
  ASSERT_EQ(run_cli(info, env).code, 0);
  const auto set_bf16_peak = [&](double times_f32) {
    std::ifstream in(cache);
    nlohmann::json peaks = nlohmann::json::parse(in);
    in.close();
    int changed = 0;
    for (auto& [key, entry] : peaks.items()) {  // the native entries ("... | 1 threads | bf16")
      if (key.size() < 7 || key.compare(key.size() - 7, 7, " | bf16") != 0) continue;
      if (key.find("_MAX_CPU_ISA=") != std::string::npos) continue;  // held to other kernels (below)
      const std::string f32_key = key.substr(0, key.size() - 7) + " | f32";
      ASSERT_TRUE(peaks.contains(f32_key)) << peaks.dump(2);
      entry["tflops"] = times_f32 * peaks[f32_key]["tflops"].get<double>();
      ++changed;
    }
    ASSERT_EQ(changed, 1) << "one native bf16 entry\n" << peaks.dump(2);
    std::ofstream(cache) << peaks.dump(2);
  };
  const std::vector<std::string> profile = {"profile", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu",
                                            "--set", "compare=[]", "--threads", "1", "--dtype", "bf16"};

  set_bf16_peak(0.5);
  Result r = run_cli(info, env);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json notes = nlohmann::json::parse(r.out)["devices"][0]["dtype_notes"];
  ASSERT_EQ(notes.size(), 1u) << r.out;
  EXPECT_NE(notes[0].get<std::string>().find("bf16 GEMMs are no faster than f32 on this CPU: "), std::string::npos)
      << notes;
  r = run_cli({"info"}, env);
  EXPECT_NE(r.out.find("Note on cpu: bf16 GEMMs are no faster than f32"), std::string::npos) << r.out;
  r = run_cli(profile, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Note: bf16 GEMMs are no faster than f32 on this CPU"), std::string::npos) << r.out;

  // Peaks measured with the GEMM libraries held to other kernels are kept apart.
  ASSERT_EQ(run_cli(info, env + "ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell ").code, 0);
  {
    std::ifstream in(cache);
    const nlohmann::json peaks = nlohmann::json::parse(in);
    int held = 0;
    for (const auto& [key, entry] : peaks.items())
      held += key.find(" | ONEDNN_MAX_CPU_ISA=AVX2 | OPENBLAS_CORETYPE=Haswell") != std::string::npos;
    EXPECT_EQ(held, 2) << "f32 and bf16, apart from the native entries:\n" << peaks.dump(2);
    EXPECT_EQ(peaks.size(), 4u) << peaks.dump(2);
  }

  set_bf16_peak(4.0);
  r = run_cli(info, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["devices"][0]["dtype_notes"].empty()) << r.out;
  r = run_cli(profile, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("no faster than f32"), std::string::npos) << r.out;
  fs::remove(cache);
}

// run, check and info fit COLUMNS like profile (before: 115-, 162- and ~290-character lines at
// 100), and run reports its progress on stderr (before: silent for minutes on big blocks).
TEST(Cli, RunCheckAndInfoFitTheWidthAndRunReportsProgress) {
  const std::string config = source("configs/blocks/tiny-llama.yaml");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", config, "--device", "cpu"}, {"check", config, "--device", "cpu"}, {"info"}}) {
    SCOPED_TRACE(args[0]);
    const Result r = run_cli(args, "COLUMNS=100 ");
    ASSERT_EQ(r.code, 0) << r.err;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      size_t width = 0;  // code points
      for (const unsigned char ch : line) width += (ch & 0xC0) != 0x80;
      EXPECT_LE(width, 100u) << line;
    }
  }
  const Result run = run_cli({"run", config, "--device", "cpu"});
  EXPECT_NE(run.err.find("run: [1/2] base ..."), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("run: [2/2] attention=inplace,mlp=naive done in "), std::string::npos) << run.err;
}

TEST(Cli, EveryShippedConfigRunsOnTheCpu) {
  const std::vector<fs::path> configs = shipped_configs();
  ASSERT_GE(configs.size(), 15u);
  for (const fs::path& config : configs) {
    SCOPED_TRACE(config.string());
    std::vector<std::string> args = {"run", config.string(), "--device", "cpu", "--set", "run={warmup: 0, iters: 1}"};
    for (const std::string& set : small_overrides(config.filename().string())) {
      args.push_back("--set");
      args.push_back(set);
    }
    const Result r = run_cli(args);
    ASSERT_FALSE(r.crashed) << r.err;
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("median ms"), std::string::npos) << r.out;
  }
}

TEST(Cli, MalformedConfigsFailWithTheirMessageExitTwoAndNoOutput) {
  const fs::path dir = temp_dir();
  int count = 0;
  for (const auto& entry : fs::directory_iterator(source("configs/test/bad"))) {
    const fs::path config = entry.path();
    SCOPED_TRACE(config.string());
    std::ifstream in(config);
    std::string first;
    std::getline(in, first);
    const std::string tag = "# expect: ";
    ASSERT_EQ(first.rfind(tag, 0), 0u) << "first line must be '# expect: [L:C: ]message'";
    std::string expected = first.substr(tag.size());
    // "L:C: message" -> the error starts with "<file>:L:C: message".
    const size_t colon = expected.find(": ");
    if (colon != std::string::npos && expected.find_first_not_of("0123456789:") == colon + 1) {
      expected = "blockscope: error: " + config.string() + ":" + expected;
    }
    const fs::path dump = dir / "bad.safetensors", trace = dir / "bad_trace.json", save = dir / "bad_profile.json";
    for (const char* command : {"run", "profile"}) {
      std::vector<std::string> args = {command, config.string(), "--dump", dump.string()};
      if (std::string(command) == "profile") {
        args.insert(args.end(), {"--trace", trace.string(), "--save", save.string()});
      }
      const Result r = run_cli(args);
      ASSERT_FALSE(r.crashed) << r.err;
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find(expected), std::string::npos)
          << "stderr: " << r.err << "\nexpected: " << expected;
      EXPECT_FALSE(fs::exists(dump));
      EXPECT_FALSE(fs::exists(trace));
      EXPECT_FALSE(fs::exists(save));
    }
    ++count;
  }
  EXPECT_GE(count, 25);
}

TEST(Cli, SetOverridesAreValidatedLikeTheFile) {
  Result r = run_cli({"run", "--set", "model.d_model=abc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set model.d_model=abc: model.d_model: expected an integer, got 'abc'"), std::string::npos) << r.err;
  r = run_cli({"run", "--set", "model.n_heads=3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set model.n_heads=3: model.n_heads: 3 does not divide d_model = 256"), std::string::npos) << r.err;
  r = run_cli({"run", "--set", "paths.atention=naive"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean 'attention'?"), std::string::npos) << r.err;
  r = run_cli({"run", "--set", "input.seq_len"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("expected key.sub=value"), std::string::npos) << r.err;
  // Two --set flags both apply.
  r = run_cli({"run", "--set", "input.seq_len=5", "--set", "input.batch=1", "--set", "run={warmup: 0, iters: 1}",
               "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("batch=1 seq_len=5"), std::string::npos) << r.out;
}

TEST(Cli, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"run", "--no-such-flag"},
                                             {"run", "/nonexistent/config.yaml"},
                                             {"run", "--device", "tpu"},
                                             {"run", "--dtype", "fp64"},
                                             {"run", "--dtype", "fp8_e4m3"},
                                             {"run", "--format", "xml"},
                                             {"diff", "only_one.json"},
                                             {"diff", "/nonexistent/a.json", "/nonexistent/b.json"}}) {
    const Result r = run_cli(args);
    ASSERT_FALSE(r.crashed);
    EXPECT_EQ(r.code, 2) << "args: " << (args.empty() ? "" : args[0]) << " stderr: " << r.err;
    EXPECT_EQ(r.err.rfind("blockscope: ", 0), 0u) << "stderr names the tool: " << r.err;
  }
  const Result missing = run_cli({"run", "/nonexistent/config.yaml"});
  EXPECT_NE(missing.err.find("config '/nonexistent/config.yaml': no such file"), std::string::npos) << missing.err;
}

TEST(Cli, DeviceWithoutAGpuIsAnInputError) {
  const Result r = run_cli({"run", "--device", "cuda:0", "--set", "input.seq_len=4"});
  ASSERT_FALSE(r.crashed);
  if (r.code == 0) GTEST_SKIP() << "a CUDA GPU is present";
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("cuda:0"), std::string::npos) << r.err;
}

TEST(Cli, TooLargeForMemoryIsRefusedWithAdvice) {
  const fs::path dump = temp_dir() / "huge.safetensors";
  const Result r = run_cli({"run", source("configs/series/04_attention.yaml"), "--device", "cpu", "--set",
                            "input={batch: 64, seq_len: 1048576}", "--dump", dump.string()});
  ASSERT_FALSE(r.crashed);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("use paths.attention: flash"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dump));
}

TEST(Cli, RunTraceWritesAChromeTrace) {
  const fs::path trace = temp_dir() / "run_trace.json";
  const Result r = run_cli({"run", source("configs/blocks/tiny-custom.yaml"), "--device", "cpu", "--trace", trace.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(read_file(trace), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_NE(read_file(trace).find("block.0"), std::string::npos);
  fs::remove(trace);
}

TEST(Cli, DumpWritesInputOutputWeightsAndMetadata) {
  const fs::path dump = temp_dir() / "tiny_llama.safetensors";
  const Result r = run_cli({"run", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--dump", dump.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const blockscope::SafetensorsFile file = blockscope::read_safetensors(dump.string());
  for (const char* name : {"input", "output", "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.0.self_attn.k_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                           "model.layers.0.mlp.down_proj.weight"})
    EXPECT_NE(file.find(name), nullptr) << name;
  ASSERT_NE(file.find("model.layers.0.self_attn.k_proj.weight"), nullptr);
  EXPECT_EQ(file.find("model.layers.0.self_attn.k_proj.weight")->shape, (blockscope::Shape{32, 64}));  // 2 kv heads x 16
  ASSERT_EQ(file.metadata.count("blockscope"), 1u);
  const nlohmann::json meta = nlohmann::json::parse(file.metadata.at("blockscope"));
  EXPECT_EQ(meta["family"], "llama");
  EXPECT_EQ(meta["n_kv_heads"], 2);
  EXPECT_EQ(meta["seq_len"], 19);
  EXPECT_EQ(meta["rope"], true);

  // The dump replays: its weights and input reproduce its output bit for bit.
  const fs::path replay = temp_dir() / "replay.safetensors";
  const Result again = run_cli({"run", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--set", "seed=12345",
                                "--set", "weights={file: " + dump.string() + "}", "--set", "input.file=" + dump.string(),
                                "--dump", replay.string()});
  ASSERT_EQ(again.code, 0) << again.err;
  const blockscope::SafetensorsFile replayed = blockscope::read_safetensors(replay.string());
  ASSERT_NE(replayed.find("output"), nullptr);
  EXPECT_EQ(replayed.find("output")->bytes, file.find("output")->bytes);
  fs::remove(dump);
  fs::remove(replay);
}

TEST(Cli, ProfileTraceSaveAndDiff) {
  const fs::path dir = temp_dir();
  const fs::path trace = dir / "t.json", a = dir / "a.json", b = dir / "b.json";
  Result r = run_cli({"profile", source("configs/blocks/tiny-gpt2.yaml"), "--device", "cpu", "--trace", trace.string(),
                      "--save", a.string(), "--set", "compare=[]"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("block.1"), std::string::npos) << "a two-layer stack shows both regions";
  ASSERT_TRUE(fs::exists(trace));
  EXPECT_FALSE(nlohmann::json::parse(read_file(trace), nullptr, false).is_discarded());
  r = run_cli({"profile", source("configs/blocks/tiny-gpt2.yaml"), "--device", "cpu", "--save", b.string(), "--set",
               "compare=[]", "--set", "paths.attention=naive"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli({"diff", a.string(), b.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("softmax"), std::string::npos) << "naive attention's softmax is in the diff: " << r.out;
  // A profile with variants saves one file per variant, and one trace holding them all.
  const fs::path all = dir / "all_variants.json";
  r = run_cli({"profile", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--save", (dir / "v.json").string(),
               "--format", "json", "--trace", all.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r.out.substr(0, 500);
  EXPECT_EQ(out["variants"].size(), 2u);
  EXPECT_EQ(out["diffs"].size(), 1u);
  EXPECT_TRUE(fs::exists(dir / "v.attention-inplace_mlp-naive.json"));
  const nlohmann::json variants_trace = nlohmann::json::parse(read_file(all), nullptr, false);
  ASSERT_FALSE(variants_trace.is_discarded());
  EXPECT_EQ(variants_trace["otherData"]["variants"].size(), 2u);
  EXPECT_FALSE(fs::exists(dir / "all_variants.attention-inplace_mlp-naive.json")) << "no trace file per variant";
  // Not a profile: an input error.
  std::ofstream(dir / "junk.json") << "{\"not\": \"a profile\"}";
  r = run_cli({"diff", a.string(), (dir / "junk.json").string()});
  EXPECT_EQ(r.code, 2) << r.err;
}

// profile --report and `blockscope report`: one HTML file for every variant, the verdicts under
// the text tables; bad saved profiles exit 2 naming the file, a failing write exits 3, and
// neither leaves a report behind.
TEST(Cli, HtmlReportsFromAProfileAndFromSavedProfiles) {
  const fs::path dir = temp_dir() / "report";
  fs::create_directories(dir);
  const fs::path saved = dir / "a.json", html = dir / "a.html";
  Result r = run_cli({"profile", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--save", saved.string(),
                      "--report", html.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Step verdict: "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("wrote report " + html.string() + " (2 variants;"), std::string::npos) << r.err;
  const std::string page = read_file(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("id=\"roofline-chart\""), std::string::npos);
  EXPECT_NE(page.find("<svg class=\"diff\""), std::string::npos) << "the variant's diff to the base";
  EXPECT_NE(page.find("Schedule</dt><dd>wait "), std::string::npos) << "the schedule in the header";

  // From the saved profiles: the base and its variant.
  const fs::path variant = dir / "a.attention-inplace_mlp-naive.json", from_saved = dir / "b.html";
  ASSERT_TRUE(fs::exists(variant));
  r = run_cli({"report", saved.string(), variant.string(), "-o", from_saved.string(), "--title", "two paths"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(read_file(from_saved).find("<h1>two paths</h1>"), std::string::npos);

  // Bad inputs: exit 2 naming the file, and no report.
  const std::string text = read_file(saved);
  std::ofstream(dir / "truncated.json") << text.substr(0, text.size() / 2);
  nlohmann::json other = nlohmann::json::parse(text);
  other["version"] = 99;
  std::ofstream(dir / "version.json") << other.dump();
  std::ofstream(dir / "not_a_profile.json") << "{\"traceEvents\": []}";
  const fs::path out = dir / "bad.html";
  for (const char* name : {"truncated.json", "version.json", "not_a_profile.json", "missing.json"}) {
    SCOPED_TRACE(name);
    r = run_cli({"report", saved.string(), (dir / name).string(), "-o", out.string()});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find((dir / name).string()), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // The output: an input, a missing directory (exit 2, before reading anything); a device
  // that cannot take the bytes (exit 3); none leaves a file.
  r = run_cli({"report", saved.string(), "-o", saved.string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(read_file(saved), text);
  r = run_cli({"report", saved.string(), "-o", (dir / "no" / "r.html").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "no"));
  if (fs::exists("/dev/full")) {
    r = run_cli({"report", saved.string(), "-o", "/dev/full"});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
  }
  r = run_cli({"report", "-o", out.string()});
  EXPECT_EQ(r.code, 2) << "no profile given: " << r.err;
  // profile --report is checked before the run like every output.
  r = run_cli({"profile", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--report",
               (dir / "no" / "r.html").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--report"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Step verdict"), std::string::npos) << "refused before any work";
  fs::remove_all(dir);
}

// check's rows on a block or stack: every error is non-zero (a path exact in f32 is a sign the
// reference was computed from the path's own output) and within its bound. In one block the
// attention op is measured on the q, k, v the run gave it, which the linear path changes and
// the MLP path does not, so rows that differ in their MLP path alone measure the same
// attention error (in a stack the earlier layers' MLPs feed the last layer's attention).
void expect_per_op_errors_follow_their_paths(const nlohmann::json& results, bool one_layer) {
  std::map<std::string, double> attention_by_key;
  for (const nlohmann::json& row : results) {
    SCOPED_TRACE(row.dump());
    const std::pair<const char*, const char*> measures[] = {
        {"max_rel_error", "bound"},
        {"attention_max_rel_error", "attention_bound"},
        {"linear_max_rel_error", "linear_bound"},
        {"mlp_max_rel_error", "mlp_bound"}};
    for (const auto& [error, bound] : measures) {
      ASSERT_TRUE(row[error].is_number()) << error;
      EXPECT_GT(row[error].get<double>(), 0.0) << error;
      EXPECT_LE(row[error].get<double>(), row[bound].get<double>()) << error;
    }
    // The row's paths without its MLP path ("attention=flash,linear=epilogue,mlp=fused").
    std::string key = row["device"].get<std::string>();
    std::stringstream paths(row["paths"].get<std::string>());
    for (std::string token; std::getline(paths, token, ',');) {
      if (token.rfind("mlp=", 0) != 0) key += " " + token;
    }
    const double attention = row["attention_max_rel_error"];
    const auto [it, inserted] = attention_by_key.emplace(key, attention);
    if (!inserted && one_layer) {
      EXPECT_EQ(it->second, attention) << "same attention and linear paths: " << key;
    }
  }
}

// A decode config is checked on every decode path mix (2 attention x 3 linear x 2 mlp) and on
// both cache layouts, whichever its config names, against the whole-sequence forward.
TEST(Cli, CheckRunsEveryDecodePathOnBothCacheLayouts) {
  const Result r = run_cli({"check", source("configs/decode/tiny-llama-decode.yaml"), "--format", "json"});
  ASSERT_FALSE(r.crashed);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r.out;
  EXPECT_EQ(out["ok"], true);
  const size_t devices = 1 + (blockscope::cuda_available() ? static_cast<size_t>(blockscope::cuda_device_count()) : 0);
  ASSERT_EQ(out["results"].size(), 24u * devices);
  size_t paged = 0, contiguous = 0;
  for (const nlohmann::json& row : out["results"]) {
    const std::string paths = row["paths"];
    EXPECT_EQ(paths.find("inplace"), std::string::npos) << paths << ": no decode form";
    EXPECT_EQ(paths.find("fused_softmax"), std::string::npos) << paths << ": no decode form";
    paged += paths.find(",kv_cache=paged") != std::string::npos;
    contiguous += paths.find(",kv_cache=contiguous") != std::string::npos;
  }
  EXPECT_EQ(paged, 12u * devices);
  EXPECT_EQ(contiguous, 12u * devices);
}

// --group-by-phase: a decode's CSV op table with a phase column, the prefill's attention rows
// under prefill and decode_attention's under decode only; a block workload refuses the flag.
TEST(Cli, GroupByPhaseSplitsADecodesCsvTablesByPhase) {
  const Result r = run_cli({"profile", source("configs/decode/tiny-llama-decode.yaml"), "--device", "cpu", "--format",
                            "csv", "--group-by-phase", "--set", "compare=[]"});
  ASSERT_FALSE(r.crashed);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("variant,phase,", 0), 0u) << header;
  int prefill_attention = 0, decode_attention = 0, misplaced = 0;
  for (std::string line; std::getline(lines, line);) {
    const bool prefill = line.find(",prefill,") != std::string::npos, decode = line.find(",decode,") != std::string::npos;
    if (line.find(",attention,") != std::string::npos) (prefill ? prefill_attention : misplaced) += 1;
    if (line.find(",decode_attention,") != std::string::npos) (decode ? decode_attention : misplaced) += 1;
  }
  EXPECT_GT(prefill_attention, 0) << r.out;
  EXPECT_GT(decode_attention, 0) << r.out;
  EXPECT_EQ(misplaced, 0) << r.out;
  const Result block = run_cli({"profile", source("configs/blocks/tiny-llama.yaml"), "--device", "cpu", "--format", "csv",
                                "--group-by-phase"});
  EXPECT_EQ(block.code, 2) << block.err;
  EXPECT_NE(block.err.find("--group-by-phase"), std::string::npos) << block.err;
}

TEST(Cli, CheckPassesEveryPathOnTinyBlocks) {
  const std::pair<const char*, bool> configs[] = {
      {"configs/blocks/tiny-gpt2.yaml", false}, {"configs/blocks/tiny-llama.yaml", true}, {"configs/blocks/tiny-custom.yaml", true}};
  for (const auto& [config, one_layer] : configs) {
    SCOPED_TRACE(config);
    const Result r = run_cli({"check", source(config), "--format", "json"});
    ASSERT_FALSE(r.crashed);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(out.is_discarded()) << r.out;
    EXPECT_EQ(out["ok"], true);
    // 4 attention x 3 linear x 2 mlp paths on the CPU and on every CUDA device (simulated too).
    const size_t devices =
        1 + (blockscope::cuda_available() ? static_cast<size_t>(blockscope::cuda_device_count()) : 0);
    EXPECT_EQ(out["results"].size(), 24u * devices);
    EXPECT_EQ(out["measures"], (nlohmann::json{"output", "attention", "linear", "mlp"}));
    expect_per_op_errors_follow_their_paths(out["results"], one_layer);
  }
  // Stacks are compared at their last layer's sublayers: its input is the previous layer's
  // output (ping or pong buffer by parity), so both parities are checked.
  for (const char* layers : {"2", "3"}) {
    SCOPED_TRACE(std::string("layers ") + layers);
    const Result r = run_cli({"check", source("configs/blocks/tiny-gpt2.yaml"), "--set", "workload=stack", "--set",
                              std::string("model.n_layers=") + layers, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(out.is_discarded()) << r.out;
    expect_per_op_errors_follow_their_paths(out["results"], false);
  }
  const Result modules = run_cli({"check", source("configs/series/04_attention.yaml"), "--set", "input.seq_len=20",
                                  "--dtype", "f32"});
  EXPECT_EQ(modules.code, 0) << modules.out << modules.err;
  EXPECT_NE(modules.out.find("attention=flash"), std::string::npos) << modules.out;
}

// Without --threads: OMP_NUM_THREADS when set, else the physical cores less one (at least 1),
// which `info` reports and every command applies. Physical cores are counted here from
// /proc/cpuinfo's (physical id, core id) pairs, the CLI counts thread_siblings_list in /sys.
TEST(Cli, DefaultThreadsLeaveACoreForTheSystem) {
  Result r = run_cli({"info", "--format", "json"}, "env -u OMP_NUM_THREADS ");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  ASSERT_TRUE(info.contains("default_threads")) << r.out;
  std::set<std::pair<std::string, std::string>> cores;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string physical;
  for (std::string line; std::getline(cpuinfo, line);) {
    const std::string value = line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1);
    if (line.rfind("physical id", 0) == 0) physical = value;
    if (line.rfind("core id", 0) == 0) cores.insert({physical, value});
  }
  ASSERT_FALSE(cores.empty()) << "/proc/cpuinfo names no core ids";
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  const int64_t expected_cores = CPU_COUNT(&mask) == cpus ? static_cast<int64_t>(cores.size()) : -1;
  const int64_t count = info["default_threads"]["count"], reported_cores = info["default_threads"]["cores"];
  if (expected_cores > 0) {
    EXPECT_EQ(reported_cores, expected_cores);
  }
  EXPECT_EQ(count, std::max<int64_t>(1, reported_cores - 1));
  EXPECT_EQ(info["openmp_threads"], count) << "the default is applied, not only reported";
  if (reported_cores > 1) {
    EXPECT_NE(info["default_threads"]["reason"].get<std::string>().find("less one"), std::string::npos);
  }

  for (const char* env : {"OMP_NUM_THREADS=3 ", "OMP_NUM_THREADS=3,1 "}) {
    r = run_cli({"info", "--format", "json"}, env);
    ASSERT_EQ(r.code, 0) << r.err;
    info = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(info.is_discarded()) << r.out;
    EXPECT_EQ(info["default_threads"]["count"], 3) << env;
    EXPECT_EQ(info["openmp_threads"], 3) << env;
    EXPECT_NE(info["default_threads"]["reason"].get<std::string>().find("OMP_NUM_THREADS=3"), std::string::npos);
  }
  // Not a thread count: OpenMP's variable is ignored, as the cores rule applies -- and said,
  // naming the value (issue 43: abc, 0 and -1 silently meant the cores rule's 1).
  for (const char* value : {"lots", "abc", "0", "-1", "3,x", "' 4'", "99999"}) {
    r = run_cli({"info", "--format", "json"}, std::string("OMP_NUM_THREADS=") + value + " ");
    ASSERT_EQ(r.code, 0) << r.err;
    info = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(info.is_discarded()) << r.out;
    EXPECT_EQ(info["default_threads"]["count"], std::max<int64_t>(1, reported_cores - 1)) << value;
    const std::string shown = value[0] == '\'' ? " 4" : value;
    EXPECT_NE(r.err.find("blockscope: note: OMP_NUM_THREADS='" + shown + "' is not a thread count"), std::string::npos)
        << value << ": " << r.err;
    EXPECT_NE(info["default_threads"]["note"].get<std::string>().find("'" + shown + "'"), std::string::npos);
  }
  r = run_cli({"info", "--format", "json"}, "OMP_NUM_THREADS=3,1 ");
  EXPECT_EQ(r.err.find("note: OMP_NUM_THREADS"), std::string::npos) << r.err;
}

TEST(Cli, InfoAndHelp) {
  Result r = run_cli({"info", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  EXPECT_TRUE(info.contains("cuda_built"));
  EXPECT_TRUE(info.contains("gemm_library"));
  EXPECT_EQ(info["devices"][0]["device"], "cpu");
  for (const char* command : {"run", "profile", "check", "diff", "info"}) {
    r = run_cli({command, "--help"});
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << command << ": " << r.out;
  }
  r = run_cli({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
}

// The kernel table names what each GEMM ran (library, layout, epilogue as a pass), cpu.gemm
// forces a library for every GEMM, and info lists the GEMM plans a run cached for this machine.
TEST(Cli, KernelTableNamesTheGemmThatRanAndInfoListsThePlans) {
  const fs::path cache = temp_dir() / "plans.json";
  fs::remove(cache);
  const std::string env = "OMP_NUM_THREADS=1 BLOCKSCOPE_PLAN_CACHE=" + quote(cache.string()) + " ";
  const std::vector<std::string> profile = {"profile", source("configs/blocks/tiny-gpt2.yaml"), "--device", "cpu",
                                            "--set", "compare=[]", "--threads", "1", "--format", "json"};
  // The implementations of the GEMM kernels in a profile's kernel table ("gemm*" rows).
  const auto gemm_implementations = [](const std::string& out) {
    std::vector<std::string> found;
    const nlohmann::json parsed = nlohmann::json::parse(out, nullptr, false);
    if (parsed.is_discarded()) return found;
    for (const nlohmann::json& row : parsed["variants"][0]["kernels"]["rows"])
      if (row["name"].get<std::string>().rfind("gemm", 0) == 0) found.push_back(row["implementation"]);
    return found;
  };
  const bool onednn = std::string(blockscope::cpu::gemm_library()) == "onednn";
  Result r = run_cli(profile, env);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> ran = gemm_implementations(r.out);
  ASSERT_FALSE(ran.empty()) << r.out;
  for (const std::string& what : ran) {
    EXPECT_FALSE(what.empty()) << r.out;
    // A loaded weight runs on its plan's choice: a oneDNN matmul or a linked library's sgemm.
    bool named = false;
    for (blockscope::cpu::GemmLibrary library : blockscope::cpu::linked_gemm_libraries())
      named = named || what.rfind(std::string(blockscope::cpu::gemm_library_name(library)) + " ", 0) == 0;
    EXPECT_TRUE(named) << what;
  }
  r = run_cli({"info", "--format", "json"}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plans = nlohmann::json::parse(r.out)["gemm_plans"];
  EXPECT_EQ(plans["path"], cache.string());
  EXPECT_NE(plans["machine"].get<std::string>().find(" | 1 threads"), std::string::npos) << plans;
  // tiny-gpt2's weight GEMMs: qkv, attention out, fc, proj -- four shapes, each planned once.
  EXPECT_EQ(plans["plans"].size(), onednn ? 4u : 0u) << plans.dump(2);
  for (const nlohmann::json& plan : plans["plans"]) {
    EXPECT_TRUE(plan["timings_us"].contains(plan["choice"].get<std::string>())) << plan;
    EXPECT_FALSE(plan["kernel"].get<std::string>().empty()) << plan;
  }
  // Wide enough for the line with the scratch path in it, however deep the build directory is.
  r = run_cli({"info"}, env + "COLUMNS=1000 ");
  EXPECT_NE(r.out.find("CPU GEMM plans (how loaded weights' GEMMs run, timed once per machine and shape): " +
                       std::to_string(plans["plans"].size()) + " for this machine in " + cache.string()),
            std::string::npos)
      << r.out;
  if (onednn) {  // plans to list (other builds plan nothing)
    EXPECT_NE(r.out.find("(info --plans lists them)"), std::string::npos) << r.out;
    r = run_cli({"info", "--plans"}, env + "COLUMNS=200 ");
    EXPECT_NE(r.out.find("runs as"), std::string::npos) << "the plans' table\n" << r.out;
    for (const nlohmann::json& plan : plans["plans"])
      EXPECT_NE(r.out.find(plan["shape"].get<std::string>()), std::string::npos) << plan["shape"] << "\n" << r.out;
  }

  std::vector<std::string> forced = profile;
  forced.insert(forced.end(), {"--set", "cpu.gemm=builtin"});
  r = run_cli(forced, env);
  ASSERT_EQ(r.code, 0) << r.err;
  ran = gemm_implementations(r.out);
  ASSERT_FALSE(ran.empty()) << r.out;
  for (const std::string& what : ran) EXPECT_EQ(what.rfind("builtin sgemm", 0), 0u) << what;
  forced.back() = "cpu.gemm=mkl";
  r = run_cli(forced, env);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cpu.gemm: unknown GEMM library 'mkl'"), std::string::npos) << r.err;
  fs::remove(cache);
}

// info --cost: the catalogue's numbers for given sizes (what the Python tools read), and every
// malformed spec an exit-2 error naming it.
TEST(Cli, InfoCostGivesTheCatalogueNumbersAndNamesBadSpecs) {
  Result r = run_cli({"info", "--cost", "linear/naive:M=3,K=5,N=7,bias=1,gelu=1,dtype=bf16", "--cost",
                      "attention/inplace:B=1,H=4,Hkv=2,Sq=9,Sk=9,D=8,causal=0"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json costs = nlohmann::json::parse(r.out)["costs"];
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0]["flops"], 2.0 * 3 * 5 * 7);
  EXPECT_EQ(costs[0]["bytes"], 2.0 * (3 * 5 + 7 * 5 + 7 + 3 * 7));
  EXPECT_EQ(costs[0]["kernels"]["cpu"], (std::vector<std::string>{"gemm", "bias_add_kernel", "gelu_tanh_kernel"}));
  EXPECT_EQ(costs[1]["kernels"]["cpu"].size(), 4u);  // no mask: no masked_fill
  EXPECT_EQ(costs[1]["flops"], 4.0 * 4 * 9 * 9 * 8);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"softmax:R=4", "size 'N' is missing"},
      {"softmax:R=4,N=8,Q=1", "takes no 'Q'"},
      {"softmax:R=-4,N=8", "non-negative integer"},
      {"linear:M=1,K=2,N=3", "needs a path, one of naive, epilogue, addmm"},
      {"mlp/naive:T=1,D=2,F=3,gated=2,activation=silu", "must be 0 or 1"},
      {"activation:R=1,N=2", "activation= is missing"},
      {"sigmoidd:R=1", "no op 'sigmoidd'"},
  };
  for (const auto& [spec, needle] : bad) {
    r = run_cli({"info", "--cost", spec});
    EXPECT_EQ(r.code, 2) << spec;
    EXPECT_NE(r.err.find("'" + spec + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

// info --cost, issue 43: causal attention counts the keys each query sees (one query over 1024
// keys: every key, before half the FLOPs), a zero size is a call that launches no kernel, and
// specs no call could have — a size given twice, 2^32, a product past 2^50 elements, Hkv not
// dividing H, ranks < 1 — are exit 2 naming the size (before: accepted, numbers made up).
TEST(Cli, InfoCostCountsCausalKeysAndRefusesImpossibleSizes) {
  Result r = run_cli({"info", "--cost", "attention/flash:B=1,H=12,Hkv=12,Sq=1,Sk=1024,D=64,causal=1", "--cost",
                      "attention/flash:B=1,H=12,Hkv=12,Sq=1,Sk=1024,D=64,causal=0", "--cost",
                      "attention/naive:B=1,H=2,Hkv=2,Sq=4,Sk=4,D=8,causal=1", "--cost", "softmax:R=0,N=64", "--cost",
                      "attention/naive:B=2,H=4,Hkv=2,Sq=0,Sk=16,D=8,causal=1", "--predict", "h100"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json costs = nlohmann::json::parse(r.out)["costs"];
  ASSERT_EQ(costs.size(), 5u);
  EXPECT_EQ(costs[0]["flops"], 4.0 * 12 * 1024 * 64);
  EXPECT_EQ(costs[0]["flops"], costs[1]["flops"]);
  EXPECT_EQ(costs[2]["flops"], 4.0 * 2 * (1 + 2 + 3 + 4) * 8);  // query i sees i + 1 keys
  for (size_t i : {3u, 4u}) {
    EXPECT_EQ(costs[i]["kernels"]["cpu"], nlohmann::json::array()) << costs[i].dump();
    EXPECT_EQ(costs[i]["kernels"]["cuda"], nlohmann::json::array()) << costs[i].dump();
    EXPECT_EQ(costs[i]["flops"], 0.0);
    EXPECT_EQ(costs[i]["predicted_kernels"], nlohmann::json::array()) << costs[i].dump();
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"softmax:R=1,N=8,R=2", "'R' is given twice"},
      {"attention/flash:B=1,B=2,H=1,Hkv=1,Sq=1,Sk=1,D=8", "'B' is given twice"},
      {"linear/naive:M=1,K=2,N=3,bias=1,bias=0", "'bias' is given twice"},
      {"softmax:R=4294967296,N=8", "size 'R' = 4294967296 is over 2147483647"},
      {"softmax:R=99999999999999999999,N=8", "size 'R' = 99999999999999999999 is over 2147483647"},
      {"softmax:R=2147483647,N=2147483647", "impossible size: R x N"},
      {"attention/flash:B=1,H=12,Hkv=5,Sq=1,Sk=1,D=8", "'Hkv' = 5 must be at least 1 and divide H = 12"},
      {"attention/flash:B=1,H=12,Hkv=0,Sq=1,Sk=1,D=8", "'Hkv' = 0"},
      {"all_reduce:N=8,ranks=0", "'ranks' = 0 must be at least 1"},
      {"all_gather:N=9,ranks=2", "'N' = 9 must be a multiple of ranks = 2"},
  };
  for (const auto& [spec, needle] : bad) {
    r = run_cli({"info", "--cost", spec});
    EXPECT_EQ(r.code, 2) << spec << "\n" << r.out;
    EXPECT_NE(r.err.find("'" + spec + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// info --predict GPU --cost: each cost gains the model's time and terms (profiler/gpu_model.h),
// the series' attention lesson shows in them, and an unknown GPU is an exit-2 error naming the
// valid ones.
TEST(Cli, InfoPredictAddsPredictedTimesAndNamesBadGpus) {
  const std::string attention = ":B=8,H=16,Hkv=16,Sq=1024,Sk=1024,D=64,causal=1,dtype=bf16";
  Result r = run_cli({"info", "--predict", "h100", "--cost", "copy:R=1024,N=1048576,dtype=bf16", "--cost",
                      "attention/naive" + attention, "--cost", "attention/inplace" + attention, "--cost",
                      "attention/fused_softmax" + attention, "--cost", "attention/flash" + attention});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["prediction"]["target"], "h100-sxm");
  EXPECT_EQ(out["prediction"]["model_version"], "gpu-model 1");
  const nlohmann::json costs = out["costs"];
  ASSERT_EQ(costs.size(), 5u);
  for (const nlohmann::json& cost : costs) {
    for (const char* key : {"predicted_us", "compute_us", "memory_us", "launch_us", "waves", "target", "model_version"})
      EXPECT_TRUE(cost.contains(key)) << key << " missing in " << cost.dump();
    EXPECT_EQ(cost["kernels"]["cuda"].size(), cost["predicted_kernels"].size());  // one prediction per launch
  }
  // The copy: 2 × 1024 × 1048576 bf16 = 4294967296 bytes through DRAM at 3.35 TB/s × 0.90
  // = 1424.53 µs, + 1 µs launch.
  EXPECT_NEAR(costs[0]["memory_us"].get<double>(), 4294967296.0 / (3.35e12 * 0.90) * 1e6, 1e-3);
  EXPECT_NEAR(costs[0]["predicted_us"].get<double>(), 1425.533, 1e-3);
  EXPECT_EQ(costs[0]["predicted_kernels"][0]["name"], "Memcpy DtoD");
  // flash < fused_softmax < inplace < naive per call.
  const auto us = [&](size_t i) { return costs[i]["predicted_us"].get<double>(); };
  EXPECT_LT(us(4), us(3));
  EXPECT_LT(us(3), us(2));
  EXPECT_LT(us(2), us(1));
  // --predict needs --cost; an unknown GPU names the valid ones.
  r = run_cli({"info", "--predict", "h100"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--cost"), std::string::npos) << r.err;
  r = run_cli({"info", "--predict", "nope", "--cost", "copy:R=1,N=1"});
  EXPECT_EQ(r.code, 2);
  for (const char* name : {"'nope'", "h100-sxm", "h200", "a100-sxm"})
    EXPECT_NE(r.err.find(name), std::string::npos) << name << " not in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// The FP8 linear and MLP workloads (configs/fp8/): each recipe's kernels in the profile with the GEMM, the
// title naming the precision, and `check` within the FP8 error model's bound.
TEST(Cli, Fp8LinearProfilesShowTheRecipesKernelsAndCheck) {
  const std::vector<std::string> linear = {"--device", "cpu", "--set", "shape={m: 40, n: 48, k: 64}"};
  const std::vector<std::string> mlp = {"--device", "cpu", "--set", "input={batch: 2, seq_len: 8}", "--set",
                                        "model.d_model=64", "--set", "model.d_ff=96"};
  const std::map<std::string, std::vector<std::string>> kernels = {
      {"configs/fp8/linear-current.yaml",
       {"amax_kernel", "fp8_scale_update_kernel", "fp8_quantize_kernel", "fp8_gemm_bias"}},
      {"configs/fp8/linear-delayed.yaml", {"fp8_quantize_amax_kernel", "fp8_gemm_bias", "fp8_scale_update_kernel"}},
      {"configs/fp8/mlp-geglu-current.yaml", {"amax_kernel", "fp8_gemm", "gated_gelu_tanh_mul_kernel"}},
      {"configs/fp8/mlp-gpt2-delayed.yaml", {"fp8_quantize_amax_kernel", "fp8_gemm_bias_gelu", "fp8_gemm_bias"}},
      {"configs/fp8/block-gpt2-delayed.yaml",
       {"fp8_quantize_amax_kernel", "fp8_gemm_bias_gelu", "fp8_gemm_bias", "layer_norm_kernel"}},
      {"configs/fp8/block-llama-3-8b-current.yaml", {"amax_kernel", "fp8_gemm", "gated_silu_mul_kernel", "rope_kernel"}}};
  for (const auto& [config, names] : kernels) {
    SCOPED_TRACE(config);
    const std::vector<std::string> block = {"--device", "cpu", "--set", "input={batch: 1, seq_len: 9}",  "--set",
                                            "model.d_model=64", "--set", "model.n_heads=4", "--set",
                                            "model.n_kv_heads=" + std::string(config.find("llama") != std::string::npos ? "2" : "4"),
                                            "--set", "model.d_ff=96", "--set", "compare=[]"};
    const std::vector<std::string>& small = config.find("/mlp-") != std::string::npos     ? mlp
                                            : config.find("/block-") != std::string::npos ? block
                                                                                          : linear;
    std::vector<std::string> args = {"profile", source(config)};
    args.insert(args.end(), small.begin(), small.end());
    Result r = run_cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(GEMM fp8_e4m3, "), std::string::npos) << r.out;
    for (const std::string& name : names) EXPECT_NE(r.out.find(name), std::string::npos) << name << " in " << r.out;
    EXPECT_EQ(r.out.find("\ngemm_bias "), std::string::npos) << "no bf16 GEMM runs: " << r.out;
    args = {"check", source(config)};
    args.insert(args.end(), small.begin(), small.end());
    r = run_cli(args);
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("all paths within the accuracy rule"), std::string::npos) << r.out;
  }
}

// The FP8 GEMM is predicted on the FP8 tensor cores: a large one takes less time than the same
// bf16 linear on an H100 (twice the peak, times the FP8 efficiency factor), and an A100, which
// has no FP8 units, is an exit-2 error naming them.
TEST(Cli, InfoPredictPutsFp8GemmsOnFp8TensorCores) {
  const std::string sizes = ":M=8192,K=8192,N=8192,dtype=bf16";
  Result r = run_cli({"info", "--predict", "h100", "--cost", "fp8_linear" + sizes, "--cost", "linear/epilogue" + sizes});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json costs = nlohmann::json::parse(r.out)["costs"];
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0]["predicted_kernels"][0]["name"], "fp8_gemm");
  const double ratio = costs[1]["predicted_us"].get<double>() / costs[0]["predicted_us"].get<double>();
  EXPECT_GT(ratio, 1.5);
  EXPECT_LT(ratio, 2.05);
  r = run_cli({"info", "--predict", "a100", "--cost", "fp8_linear" + sizes});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tensor_fp8"), std::string::npos) << r.err;
}

namespace {

// Options that make a profile one short step: what --predict and --counters are tested on.
const std::vector<std::string> kOneStep = {"--set", "profile.schedule.wait=0", "--set", "profile.schedule.warmup=0",
                                           "--set", "profile.schedule.active=1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Delayed scaling's saturation, per variant: every cast input of a block by name, each counted
// once per step (here 1 + 0 + 2 steps), said in a line under the tables; current scaling, whose
// scale comes from the step's own amax, has nothing to count. (The counts' values: the
// fp8_scale_update tests, test/precision_test.cpp.)
TEST(Cli, DelayedFp8ProfilesCountSaturationPerInput) {
  const std::vector<std::string> small = {"--device", "cpu", "--set", "input={batch: 1, seq_len: 9}", "--set",
                                          "model.d_model=64", "--set", "model.n_heads=4", "--set", "model.d_ff=96",
                                          "--set", "compare=[]", "--set", "profile.schedule={wait: 1, warmup: 0, active: 2}"};
  Result r = run_cli(with({"profile", source("configs/fp8/block-gpt2-delayed.yaml"), "--format", "json"}, small));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json rows = nlohmann::json::parse(r.out)["variants"][0]["fp8_saturation"];
  std::set<std::string> names;
  for (const nlohmann::json& row : rows) {
    names.insert(row["tensor"].get<std::string>());
    EXPECT_EQ(row["casts"], 3.0) << row.dump();
    EXPECT_LE(row["saturated"].get<double>(), 3.0) << row.dump();
    if (row["saturated"].get<double>() > 0) {
      EXPECT_GT(row["largest_ratio"].get<double>(), 464.0 / 448.0) << row.dump();
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"block.0.attention.input", "block.0.out_proj.input", "block.0.mlp.input",
                                          "block.0.mlp.hidden"}));
  r = run_cli(with({"profile", source("configs/fp8/block-gpt2-delayed.yaml")}, small));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("FP8 saturation"), std::string::npos) << r.out;
  r = run_cli({"profile", source("configs/fp8/linear-current.yaml"), "--device", "cpu", "--set",
               "shape={m: 40, n: 48, k: 64}", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["variants"][0].contains("fp8_saturation"));
}

// Weight-only FP8 (precision.weights): a decode's and a block's GEMMs are fp8_weight_gemm kernels
// (no GEMM of the run's dtype), the profile's title names the precision, and `check` holds every
// device to the bound of the run's own dtype -- its reference computes with the values of the codes.
TEST(Cli, WeightOnlyFp8ProfilesShowTheKernelsAndCheckOnEveryDevice) {
  const std::vector<std::string> small_decode = {
      "--set", "model={family: llama, d_model: 64, n_heads: 4, n_kv_heads: 2, head_dim: 16, d_ff: 96, n_layers: 2}",
      "--set", "decode={prompt_lens: [5, 9], new_tokens: 3}", "--set", "compare=[]"};
  const std::map<std::string, std::vector<std::string>> cases = {
      {"configs/fp8/llama-decode-fp8-weights.yaml", small_decode},
      {"configs/fp8/gpt2-decode-fp8-weights.yaml",
       {"--set", "model={family: gpt2, d_model: 64, n_heads: 4, n_layers: 2}", "--set",
        "decode={prompt_lens: [4, 6, 2], new_tokens: 2}"}},
      {"configs/blocks/tiny-llama.yaml", {"--set", "precision.weights=fp8_e5m2", "--set", "compare=[]"}}};
  for (const auto& [config, small] : cases) {
    SCOPED_TRACE(config);
    Result r = run_cli(with(with({"profile", source(config), "--device", "cpu"}, small), kOneStep));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("weights fp8_e"), std::string::npos) << "the title names the precision: " << r.out;
    EXPECT_NE(r.out.find("fp8_weight_gemm"), std::string::npos) << r.out;
    for (const char* gemm : {"\ngemm ", "\ngemm_bias ", "\ngemm_bias_gelu "})
      EXPECT_EQ(r.out.find(gemm), std::string::npos) << "no GEMM of the run's dtype: " << r.out;
    // In f32, where a quantization error (about 2^-5 relative) would stand far above the bound.
    r = run_cli(with({"check", source(config), "--format", "json", "--set", "dtype=f32"}, small));
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(out.is_discarded()) << r.out;
    EXPECT_EQ(out["ok"], true) << r.out;
    for (const nlohmann::json& row : out["results"]) {
      EXPECT_LT(row["bound"].get<double>(), 1e-3) << row.dump();
    }
  }
}

// profile --predict prices the FP8 GEMMs of a measured step by shape, as info --predict does: an
// FP8 linear on the FP8 tensor cores (the series' 8192 x 768 -> 3072: 35.0 us on an H100,
// bench/NOTES.md's table -- not the CUDA cores' 800 us its recorded FLOPs alone would give), a
// weight-only FP8 linear on the weight-streaming kernel.
TEST(Cli, ProfilePredictPricesFp8GemmsByShape) {
  Result r = run_cli(with({"profile", source("configs/fp8/linear-current.yaml"), "--device", "cpu", "--predict", "h100",
                           "--format", "json"},
                          kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(r.out);
  bool found = false;
  for (const nlohmann::json& op : out["variants"][0]["prediction"]["ops"]) {
    if (op["name"] != "fp8_linear") continue;
    found = true;
    EXPECT_NEAR(op["predicted_us"].get<double>(), 35.0, 1.0) << op.dump();
    EXPECT_EQ(op["bound"], "compute") << op.dump();
  }
  EXPECT_TRUE(found) << r.out.substr(0, 2000);
}

// The weight-only FP8 kernel streams the codes once per pass of 16 rows of x: at K = N = 8192
// (64 MiB of codes, past the H100's 50 MB L2, so every pass comes from HBM) 64 rows take 4
// passes: bytes (4 · 64 + 1 + 1 + 0.03125) / (64 + 0.25 + 0.25 + 0.03125) MiB (codes, x, y,
// scales) = 3.998 times 16 rows', and so the memory time.
TEST(Cli, InfoPredictStreamsFp8WeightsOncePerPass) {
  const auto memory_us = [](int64_t m) {
    const Result r = run_cli({"info", "--predict", "h100", "--cost",
                              "fp8_weight_linear:M=" + std::to_string(m) + ",K=8192,N=8192,dtype=bf16"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["costs"][0]["predicted_kernels"][0]["memory_us"].get<double>();
  };
  const double one = memory_us(16), four = memory_us(64);
  EXPECT_NEAR(four / one, 3.998, 0.01);
  EXPECT_NEAR(memory_us(1), one, 0.02 * one) << "one pass either way";
}

TEST(Cli, ProfilePredictShowsTheSeriesLessonsLabelledAsPredictions) {
  // The series' attention on the CPU, its step predicted on an H100: flash < fused_softmax <
  // inplace < naive, as on a GPU; each variant labelled predicted, with target and model.
  Result r = run_cli(with({"profile", source("configs/series/04_attention.yaml"), "--device", "cpu", "--set",
                           "input.seq_len=96", "--set", "input.batch=1", "--predict", "h100", "--format", "json"},
                          kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["variants"].size(), 4u);
  std::vector<double> step_us;
  for (const nlohmann::json& v : out["variants"]) {
    const nlohmann::json& p = v["prediction"];
    EXPECT_EQ(p["target"], "h100-sxm");
    EXPECT_EQ(p["model_version"], "gpu-model 1");
    EXPECT_NE(p["note"].get<std::string>().find("predicted, not measured"), std::string::npos);
    // The host issues each launch at 3 µs and each op at 1 µs (profile_prediction.h); the
    // step is at least the device's and the host's time.
    double op_calls = 0, launches = 0;
    for (const nlohmann::json& op : p["ops"]) op_calls += op["calls"].get<double>(), launches += op["kernels"].get<double>();
    EXPECT_EQ(p["launches"].get<double>(), launches);
    EXPECT_DOUBLE_EQ(p["host_us"].get<double>(), 3.0 * launches + 1.0 * op_calls);
    EXPECT_GE(p["step_us"].get<double>(), p["device_us"].get<double>());
    EXPECT_GE(p["step_us"].get<double>(), p["host_us"].get<double>());
    EXPECT_EQ(p["bound"], p["host_us"].get<double>() > p["busy_us"].get<double>() ? "host" : "device");
    step_us.push_back(p["step_us"].get<double>());
  }
  EXPECT_EQ(out["variants"][0]["prediction"]["launches"], 6);  // naive: the Memcpy among them
  EXPECT_EQ(out["variants"][3]["prediction"]["launches"], 1);  // flash: one kernel
  EXPECT_LT(step_us[3], step_us[2]);
  EXPECT_LT(step_us[2], step_us[1]);
  EXPECT_LT(step_us[1], step_us[0]);
  // The diffs carry the predicted change.
  EXPECT_TRUE(out["diffs"][2]["diff"].contains("predicted")) << out["diffs"][2].dump();
  // With run.cuda_graph the step is one graph launch on the host, and each kernel a graph node
  // (0.5 µs on an H100) instead of an eager launch (1 µs): naive's 6 kernels save 3 µs of device.
  r = run_cli(with({"profile", source("configs/series/04_attention.yaml"), "--device", "cpu", "--set",
                    "input.seq_len=96", "--set", "input.batch=1", "--set", "run.cuda_graph=true", "--set", "compare=[]",
                    "--predict", "h100", "--format", "json"},
                   kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json graph = nlohmann::json::parse(r.out)["variants"][0]["prediction"];
  EXPECT_EQ(graph["launch_mode"], "graph");
  EXPECT_DOUBLE_EQ(graph["host_us"].get<double>(), 3.0);
  const nlohmann::json eager = out["variants"][0]["prediction"];
  EXPECT_EQ(eager["launch_mode"], "eager");
  EXPECT_NEAR(eager["device_us"].get<double>() - graph["device_us"].get<double>(), 6 * (1.0 - 0.5), 1e-9);
}

TEST(Cli, ProfilePredictSavesThePredictionAndDiffComparesIt) {
  const fs::path dir = temp_dir() / "predict-save";
  fs::create_directories(dir);
  const std::string saved = (dir / "p.json").string();
  Result r = run_cli(with({"profile", source("configs/series/01_matmul_add_64.yaml"), "--device", "cpu", "--predict",
                           "a100", "--save", saved},
                          kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  // Text: a predicted table per variant, its step line, the predicted diff lines.
  EXPECT_NE(r.out.find("predicted on NVIDIA A100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Predicted, not measured."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted on a100-sxm (gpu-model 1): step"), std::string::npos) << r.out;
  const nlohmann::json document = nlohmann::json::parse(read_file(saved));
  EXPECT_EQ(document["prediction"]["target"], "a100-sxm");
  // The series' small matmul + add: two launches (GEMM, then the bias add), host-bound.
  EXPECT_EQ(document["prediction"]["launches"], 2);
  EXPECT_EQ(document["prediction"]["bound"], "host");
  r = run_cli({"diff", saved, (dir / "p.linear-epilogue.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("predicted on a100-sxm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels 2 → 1"), std::string::npos) << r.out;
  // The report from the saved profiles shows the predictions beside what was measured.
  const std::string report = (dir / "p.html").string();
  r = run_cli({"report", saved, (dir / "p.linear-epilogue.json").string(), "-o", report});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = read_file(report);
  EXPECT_NE(page.find("<h2>Predicted GPU time</h2>"), std::string::npos);
  EXPECT_NE(page.find("Predicted, not measured: NVIDIA A100"), std::string::npos);
  EXPECT_NE(page.find("measured on cpu"), std::string::npos);  // not comparable with a GPU's time
  // A saved prediction with a broken field is a bad input naming it.
  nlohmann::json broken = document;
  broken["prediction"]["step_us"] = "fast";
  std::ofstream(dir / "broken.json") << broken.dump();
  r = run_cli({"diff", saved, (dir / "broken.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("step_us"), std::string::npos) << r.err;
  broken = document;
  broken["prediction"]["ops"][0]["calls"] = "two";  // what the report reads, checked too
  std::ofstream(dir / "broken.json") << broken.dump();
  r = run_cli({"report", (dir / "broken.json").string(), "-o", (dir / "never.html").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("prediction.ops[0].calls"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "never.html"));
}

TEST(Cli, PredictAndCountersRefuseWhatTheyCannotDoBeforeAnyWork) {
  const fs::path dir = temp_dir() / "predict-bad";
  fs::create_directories(dir);
  const std::string saved = (dir / "never.json").string();
  Result r = run_cli({"profile", "--device", "cpu", "--predict", "b200", "--save", saved});
  EXPECT_EQ(r.code, 2);
  for (const char* name : {"b200", "h100-sxm", "h200", "a100-sxm"}) EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(saved));
  r = run_cli({"profile", "--device", "cpu", "--counters", "--save", saved});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no kernel counters"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(saved));
  r = run_cli({"profile", "--device", "cpu", "--format", "csv", "--table", "predicted"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--predict"), std::string::npos) << r.err;
  r = run_cli({"profile", "--device", "cpu", "--format", "csv", "--table", "counters"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--counters"), std::string::npos) << r.err;
}

// Not under ASan: nvcc-sim leaves the access instrumentation out there (no loads or stores counted).
#if defined(BLOCKSCOPE_CUDA_SIM) && !defined(__SANITIZE_ADDRESS__)
TEST(Cli, ProfileCountersOnTheSimulatedGpu) {
  // The series' attention, flash and fused_softmax, bf16: one counter row per launch of the
  // counted forward, the tensor-core flash kernel storing at 100% sector efficiency with no
  // bank conflicts (swizzled tiles), every metric in JSON; the prediction uses the counters.
  Result r = run_cli(with({"profile", source("configs/series/04_attention.yaml"), "--device", "cuda", "--set",
                           "input.seq_len=80", "--set", "input.batch=1", "--set", "paths.attention=flash", "--set",
                           "compare=[{attention: fused_softmax}]", "--counters", "--predict", "h200", "--format", "json"},
                          kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const nlohmann::json& flash = out["variants"][0]["counters"];
  ASSERT_EQ(flash.size(), 1u) << flash.dump();
  EXPECT_EQ(flash[0]["name"].get<std::string>().rfind("flash_attention_kernel<", 0), 0u) << flash[0].dump();
  EXPECT_DOUBLE_EQ(flash[0]["st_efficiency_pct"].get<double>(), 100.0);
  EXPECT_EQ(flash[0]["bank_conflicts"].get<double>(), 0.0);
  EXPECT_GT(flash[0]["mmas"].get<double>(), 0.0);
  EXPECT_TRUE(flash[0]["metrics"].contains("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"));
  const nlohmann::json& fused = out["variants"][1]["counters"];
  ASSERT_EQ(fused.size(), 1u);  // the GEMMs are cuBLASLt's: not counted
  EXPECT_EQ(fused[0]["name"].get<std::string>().rfind("softmax_causal_scale_kernel<", 0), 0u);
  EXPECT_EQ(out["variants"][1]["prediction"]["target"], "h200");
  // Text: the counter table is titled as counted on the simulated GPU.
  r = run_cli(with({"profile", source("configs/series/04_attention.yaml"), "--device", "cuda", "--set",
                    "input.seq_len=80", "--set", "input.batch=1", "--set", "paths.attention=flash", "--set", "compare=[]",
                    "--counters"},
                   kOneStep));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel counters (one forward, counted on the simulated GPU)"), std::string::npos) << r.out;
  // Ranks on threads of one process would take each other's counts: refused before any work.
  r = run_cli({"profile", source("configs/blocks/tiny-gpt2.yaml"), "--device", "cuda", "--set", "parallel.tensor=2",
               "--counters"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("parallel.tensor > 1"), std::string::npos) << r.err;
}
#endif

}  // namespace
