// NVTX ranges seen through an NVTX injection library (test/nvtx_injection/), without Nsight:
// names, domain, nesting, counts, colours and registered strings.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ops/attention/attention.h"
#include "profiler/scope.h"
#include "profiler/session.h"
#include "model/config.h"
#include "model/workload.h"
#include "test/support/test_support.h"

#ifdef BLOCKSCOPE_NVTX_INJECTION_PATH
// NVTX reads the variable at its first call, which comes later, inside a test body. An
// injection set from outside (nsys) wins; the tests then skip.
static const bool g_injection_requested = [] {
  setenv("NVTX_INJECTION64_PATH", BLOCKSCOPE_NVTX_INJECTION_PATH, /*overwrite=*/0);
  return true;
}();
#endif

namespace blockscope::profiler {
namespace {

// The injection library's log: after the first NVTX call it is loaded, and dlopen with
// RTLD_NOLOAD hands back the same instance.
class NvtxLog {
 public:
  // Null (with a reason) when the injection cannot be observed in this build or environment.
  static NvtxLog* get(std::string* reason) {
#if !defined(BLOCKSCOPE_WITH_NVTX) || !defined(BLOCKSCOPE_NVTX_INJECTION_PATH)
    *reason = "built without NVTX (BLOCKSCOPE_NVTX=OFF or no nvtx3 headers): ranges are compiled out";
    return nullptr;
#else
    const char* env = std::getenv("NVTX_INJECTION64_PATH");
    if (env == nullptr || std::string(env) != BLOCKSCOPE_NVTX_INJECTION_PATH) {
      *reason = std::string("another NVTX tool is injected (") + (env ? env : "none") + ")";
      return nullptr;
    }
    nvtx_push("nvtx test: load injection", Family::region);  // the first call loads the library
    nvtx_pop();
    static NvtxLog log;
    if (log.handle_ == nullptr) {
      log.handle_ = dlopen(BLOCKSCOPE_NVTX_INJECTION_PATH, RTLD_NOW | RTLD_NOLOAD);
      if (log.handle_ == nullptr) {
        *reason = std::string("NVTX did not load the injection library: ") + dlerror();
        return nullptr;
      }
      log.text_ = reinterpret_cast<std::string* (*)()>(dlsym(log.handle_, "blockscope_nvtx_log_text"));
      log.clear_ = reinterpret_cast<void (*)()>(dlsym(log.handle_, "blockscope_nvtx_log_clear"));
      log.registrations_ = reinterpret_cast<int (*)(const char*)>(dlsym(log.handle_, "blockscope_nvtx_registrations"));
    }
    return &log;
#endif
  }

  void clear() { clear_(); }
  std::vector<std::string> lines() {
    std::vector<std::string> out;
    std::istringstream in(*text_());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  int registrations(const std::string& domain_and_text) { return registrations_(domain_and_text.c_str()); }

 private:
  void* handle_ = nullptr;
  std::string* (*text_)() = nullptr;
  void (*clear_)() = nullptr;
  int (*registrations_)(const char*) = nullptr;
};

#define GET_NVTX_LOG(log)                          \
  std::string skip_reason_;                        \
  NvtxLog* log = NvtxLog::get(&skip_reason_);      \
  if (log == nullptr) GTEST_SKIP() << skip_reason_; \
  log->clear()

TEST(Nvtx, NestedScopesPushAndPopInOrder) {
  GET_NVTX_LOG(log);
  Context ctx(Device::cpu());
  {
    RegionScope block(ctx, "block.0");
    {
      RegionScope attn(ctx, "attn");
      OpScope op(ctx, "softmax", "", Family::softmax, {});
    }
    OpScope op(ctx, "linear", "epilogue", Family::linear, {});
  }
  const std::vector<std::string> expected = {
      "push|blockscope|block.0|0|registered|ff9e9e9e",
      "push|blockscope|attn|1|registered|ff9e9e9e",
      "push|blockscope|softmax|2|registered|ffff7f0e",
      "pop|blockscope|2",
      "pop|blockscope|1",
      "push|blockscope|linear|1|registered|ff1f77b4",
      "pop|blockscope|1",
      "pop|blockscope|0",
  };
  EXPECT_EQ(log->lines(), expected);
}

// Tensor parallelism: a rank's thread names its ranges rank.N/...; other threads keep theirs.
TEST(Nvtx, ARanksRangesCarryItsRank) {
  GET_NVTX_LOG(log);
  Context ctx(Device::cpu());
  set_nvtx_rank(3);
  { RegionScope block(ctx, "block.0"); }
  set_nvtx_rank(-1);
  { RegionScope block(ctx, "block.1"); }
  const std::vector<std::string> expected = {
      "push|blockscope|rank.3/block.0|0|registered|ff9e9e9e",
      "pop|blockscope|0",
      "push|blockscope|block.1|0|registered|ff9e9e9e",
      "pop|blockscope|0",
  };
  EXPECT_EQ(log->lines(), expected);
}

TEST(Nvtx, StringsAreRegisteredOncePerName) {
  GET_NVTX_LOG(log);
  Context ctx(Device::cpu());
  const std::string name = "nvtx test region " + std::to_string(testing::fresh_seed());
  for (int i = 0; i < 5; ++i) RegionScope region(ctx, name);
  EXPECT_EQ(log->registrations("blockscope|" + name), 1);
  EXPECT_EQ(log->lines().size(), 10u);
}

// An attention forward under profile_steps: a "step N" range per step (also while waiting,
// so nsys can capture by step), the attention op and its five sub-ops nested inside.
TEST(Nvtx, AttentionStepsNestAsTheProfilerSeesThem) {
  GET_NVTX_LOG(log);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(Device::cpu());
  const Shape shape{1, 2, 5, 8};
  const Tensor q = testing::random_tensor(ctx, shape, DType::f32, seed);
  Tensor out = testing::poisoned_tensor(ctx, shape, DType::f32);
  profile_steps(ctx, "nvtx", Schedule{1, 0, 1, false},
                [&](int) { ops::attention(ctx, q, q, q, out, ops::AttentionPath::naive, true, 0.3f); });
  std::map<std::string, int> pushes;
  std::vector<std::string> stack;
  int max_depth = 0;
  for (const std::string& line : log->lines()) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    for (std::string field; std::getline(in, field, '|');) fields.push_back(field);
    ASSERT_GE(fields.size(), 3u) << line;
    EXPECT_EQ(fields[1], "blockscope") << line;
    if (fields[0] == "push") {
      EXPECT_EQ(std::stoi(fields[3]), static_cast<int>(stack.size())) << line;
      if (fields[2] == "attention") {
        EXPECT_EQ(stack.size(), 1u);
        ASSERT_FALSE(stack.empty());
        EXPECT_EQ(stack.back().rfind("step ", 0), 0u) << "attention outside a step range";
      }
      if (fields[2] == "softmax" || fields[2] == "masked_fill" || fields[2] == "scale") {
        ASSERT_FALSE(stack.empty());
        EXPECT_EQ(stack.back(), "attention") << line;
      }
      stack.push_back(fields[2]);
      pushes[fields[2]] += 1;
      max_depth = std::max(max_depth, static_cast<int>(stack.size()));
    } else {
      ASSERT_EQ(fields[0], "pop");
      ASSERT_FALSE(stack.empty()) << "pop without push";
      EXPECT_EQ(std::stoi(fields[2]), static_cast<int>(stack.size()) - 1);
      stack.pop_back();
    }
  }
  EXPECT_TRUE(stack.empty()) << "unbalanced ranges";
  EXPECT_EQ(pushes["step 0"], 1);  // the waiting step has its range too
  EXPECT_EQ(pushes["step 1"], 1);
  EXPECT_EQ(pushes["attention"], 2);
  EXPECT_EQ(pushes["batched_matmul"], 4);
  EXPECT_EQ(pushes["softmax"], 2);
  EXPECT_EQ(pushes["masked_fill"], 2);
  EXPECT_EQ(pushes["scale"], 2);
  EXPECT_GE(max_depth, 3);
}

// A whole GPT-2 block (the default config, made tiny): during a recorded step the NVTX pushes
// are exactly the profiler's events, in the same order and at the same depths.
TEST(Nvtx, BlockForwardRangesMatchTheRecordedEvents) {
  GET_NVTX_LOG(log);
  const WorkloadConfig config =
      load_default_config({"device=cpu", "input.batch=1", "input.seq_len=9", "paths.attention=naive"});
  Context ctx(Device::cpu());
  Workload workload(ctx, config, {config.paths});
  log->clear();
  const Profile profile = profile_steps(ctx, "block", Schedule{0, 0, 1, false}, [&](int) { workload.forward(); });
  std::vector<std::string> pushed;
  std::vector<int> depths;
  for (const std::string& line : log->lines()) {
    if (line.rfind("push|", 0) != 0) continue;
    std::vector<std::string> fields;
    std::istringstream in(line);
    for (std::string field; std::getline(in, field, '|');) fields.push_back(field);
    pushed.push_back(fields[2]);
    depths.push_back(std::stoi(fields[3]));
  }
  ASSERT_EQ(pushed.size(), profile.ops.size());
  bool saw_block_attn = false, saw_block_mlp = false;
  for (size_t i = 0; i < pushed.size(); ++i) {
    EXPECT_EQ(pushed[i], profile.ops[i].name) << i;
    EXPECT_EQ(depths[i], profile.ops[i].depth) << i;
    saw_block_attn |= profile.ops[i].scope == "step 0/block.0/attn/attention";
    saw_block_mlp |= profile.ops[i].scope == "step 0/block.0/mlp";
  }
  EXPECT_TRUE(saw_block_attn);
  EXPECT_TRUE(saw_block_mlp);
}

}  // namespace
}  // namespace blockscope::profiler
