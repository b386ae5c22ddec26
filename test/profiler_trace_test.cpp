// Chrome trace JSON: parses, names its tracks, slices nest per track, every device slice has a
// flow from a launch slice on the CPU track, and the file is written atomically. What HTA reads
// (Kineto's header, categories, correlation ids, streams): here structurally, and with HTA
// itself in test/hta/hta_agreement_test.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ops/attention/attention.h"
#include "profiler/session.h"
#include "profiler/trace.h"
#include "runtime/error.h"
#include "test/profiler_synthetic.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;
constexpr double kEps = 1e-6;  // microseconds: float noise in ts + dur

// A device slice: a GPU's kernel, copy or fill (Kineto's categories), or a CPU's work item.
bool is_device_slice(const json& event) {
  static const std::set<std::string> categories = {"kernel", "gpu_memcpy", "gpu_memset", "cpu_work_item"};
  return event["ph"] == "X" && categories.count(event["cat"].get<std::string>()) > 0;
}
bool is_launch_slice(const json& event) {
  return event["ph"] == "X" && event["args"].value("blockscope category", "") == "launch";
}

// Checks the structural rules of a trace; returns the number of device slices checked.
size_t check_trace(const json& trace, const Profile& profile) {
  EXPECT_TRUE(trace.contains("traceEvents"));
  const json& events = trace["traceEvents"];
  std::map<std::pair<int, int>, std::vector<const json*>> slices;  // (pid, tid) -> X events
  std::map<int, const json*> flow_starts, flow_ends;
  std::set<int> named_processes;
  std::set<std::pair<int, int>> named_threads;
  size_t device_slices = 0;
  int cpu_pid = -1, device_pid = -1;
  for (const json& event : events) {
    const std::string ph = event.at("ph");
    if (ph == "M") {
      if (event["name"] == "process_name") named_processes.insert(event["pid"].get<int>());
      if (event["name"] == "thread_name") named_threads.insert({event["pid"].get<int>(), event["tid"].get<int>()});
    } else if (ph == "X") {
      EXPECT_GE(event.at("dur").get<double>(), 0.0);
      slices[{event["pid"].get<int>(), event["tid"].get<int>()}].push_back(&event);
      if (is_device_slice(event)) {
        device_pid = event["pid"].get<int>();
        ++device_slices;
      } else {
        cpu_pid = event["pid"].get<int>();
      }
    } else if (ph == "s") {
      EXPECT_TRUE(flow_starts.emplace(event["id"].get<int>(), &event).second) << "duplicate flow start";
    } else if (ph == "f") {
      EXPECT_EQ(event.value("bp", ""), "e");
      EXPECT_TRUE(flow_ends.emplace(event["id"].get<int>(), &event).second) << "duplicate flow end";
    } else if (ph == "C") {  // the memory counter: a number per sample
      EXPECT_TRUE(event["args"]["peak in use"].is_number()) << event.dump();
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_NE(cpu_pid, device_pid);
  EXPECT_EQ(device_slices, profile.kernels.size());
  // Every track has a name.
  for (const auto& [track, list] : slices) {
    EXPECT_TRUE(named_processes.count(track.first)) << "pid " << track.first;
    EXPECT_TRUE(named_threads.count(track)) << "pid " << track.first << " tid " << track.second;
  }
  // Slices nest per track: sorted by start (longer first on ties), each one either inside the
  // innermost open slice or after it ends.
  for (auto& [track, list] : slices) {
    std::stable_sort(list.begin(), list.end(), [](const json* a, const json* b) {
      const double ta = (*a)["ts"], tb = (*b)["ts"];
      return ta != tb ? ta < tb : (*a)["dur"].get<double>() > (*b)["dur"].get<double>();
    });
    std::vector<const json*> open;
    for (const json* slice : list) {
      const double start = (*slice)["ts"], end = start + (*slice)["dur"].get<double>();
      while (!open.empty() && (*open.back())["ts"].get<double>() + (*open.back())["dur"].get<double>() <= start + kEps) {
        open.pop_back();
      }
      if (!open.empty()) {
        const double parent_end = (*open.back())["ts"].get<double>() + (*open.back())["dur"].get<double>();
        EXPECT_LE(end, parent_end + kEps) << (*slice)["name"] << " overlaps " << (*open.back())["name"]
                                          << " on pid " << track.first;
      }
      open.push_back(slice);
    }
  }
  // Every device slice is the end of a flow that starts inside a launch slice on the CPU track.
  EXPECT_EQ(flow_starts.size(), profile.kernels.size());
  EXPECT_EQ(flow_ends.size(), profile.kernels.size());
  for (const auto& [id, end] : flow_ends) {
    if (!flow_starts.count(id)) {
      ADD_FAILURE() << "flow " << id << " has no start";
      continue;
    }
    const json& start = *flow_starts[id];
    EXPECT_EQ(start["pid"].get<int>(), cpu_pid);
    const auto& device_track = slices[{(*end)["pid"].get<int>(), (*end)["tid"].get<int>()}];
    const bool lands_on_kernel = std::any_of(device_track.begin(), device_track.end(), [&](const json* s) {
      return is_device_slice(*s) && std::abs((*s)["ts"].get<double>() - (*end)["ts"].get<double>()) < kEps;
    });
    EXPECT_TRUE(lands_on_kernel) << "flow " << id;
    const auto& cpu_track = slices[{cpu_pid, 0}];
    const bool from_launch = std::any_of(cpu_track.begin(), cpu_track.end(), [&](const json* s) {
      const double ts = (*s)["ts"], dur = (*s)["dur"];
      return is_launch_slice(*s) && start["ts"].get<double>() >= ts - kEps &&
             start["ts"].get<double>() <= ts + dur + kEps;
    });
    EXPECT_TRUE(from_launch) << "flow " << id;
  }
  return device_slices;
}

TEST(ChromeTrace, SyntheticProfilesNestAndFlow) {
  for (int trial = 0; trial < 10; ++trial) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(seed);
    const Profile profile = testing::random_profile(seed, 2);
    const json trace = json::parse(chrome_trace_json(profile));
    check_trace(trace, profile);
    // Op slices carry their scope path and, for ops, path, shapes, FLOPs and bytes.
    size_t ops_seen = 0;
    for (const json& event : trace["traceEvents"]) {
      if (event["ph"] != "X" || event["cat"] != "cpu_op" || event["args"]["blockscope category"] != "op") continue;
      ++ops_seen;
      EXPECT_TRUE(event["args"].contains("scope"));
      EXPECT_TRUE(event["args"].contains("path"));
      EXPECT_TRUE(event["args"].contains("input_shapes"));
      EXPECT_TRUE(event["args"].contains("flops"));
      EXPECT_TRUE(event["args"].contains("bytes"));
    }
    // Every op's slice, no more (a seed can draw regions only: 11268490630029532732 does).
    const size_t ops = std::count_if(profile.ops.begin(), profile.ops.end(), [](const OpEvent& op) { return !op.is_region; });
    EXPECT_EQ(ops_seen, ops);
  }
}

TEST(ChromeTrace, RecordedAttentionNestsAndFlows) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(Device::cpu());
  const Shape shape{1, 3, 33, 16};
  const Tensor q = testing::random_tensor(ctx, shape, DType::bf16, seed);
  Tensor out = testing::poisoned_tensor(ctx, shape, DType::bf16);
  const Profile profile = profile_steps(ctx, "attention=naive", Schedule{0, 1, 2, false}, [&](int) {
    ops::attention(ctx, q, q, q, out, ops::AttentionPath::naive, true, 0.25f);
  });
  const json trace = json::parse(chrome_trace_json(profile));
  EXPECT_EQ(check_trace(trace, profile), 12u);  // 6 work items per forward, 2 steps
  EXPECT_EQ(trace["otherData"]["label"], "attention=naive");
}

// A GPU's trace as Kineto writes one for HTA: the stream's track (tid = the stream, counted from
// 1 as CUPTI does: the recorder's stream 7 is the trace's 8), the kernel's stream, device,
// correlation and External id in args; the launch a "cuda_runtime" cudaLaunchKernel with the
// same correlation; a copy and a fill in Kineto's categories with their runtime calls' names;
// ops "cpu_op" and regions "user_annotation", each with its External id.
TEST(ChromeTrace, CudaProfilesGetAStreamTrack) {
  testing::ProfileBuilder b("gpu", "cuda:1");
  b.open("step 0", "", true);
  const int softmax = b.open("softmax");
  b.kernel("softmax_kernel", 10, 1, /*stream=*/7);
  b.kernel("Memcpy DtoD", 3, 1, /*stream=*/7);
  b.kernel("Memset", 1, 1, /*stream=*/7);
  b.close();
  b.close();
  b.set_active_steps(1);
  const json trace = json::parse(chrome_trace_json(b.profile()));
  check_trace(trace, b.profile());
  bool named = false;
  std::map<int64_t, const json*> launches, kernels;  // by correlation id
  std::map<std::string, const json*> ops;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name" && event["args"]["name"] == "stream 8") named = true;
    if (event["ph"] != "X") continue;
    if (is_device_slice(event)) {
      EXPECT_EQ(event["tid"], 8);
      EXPECT_EQ(event["args"]["stream"], 8);
      EXPECT_EQ(event["args"]["device"], 1);
      EXPECT_EQ(event["pid"].get<int>() % 1000, 101);
      kernels[event["args"]["correlation"].get<int64_t>()] = &event;
    } else if (is_launch_slice(event)) {
      EXPECT_EQ(event["cat"], "cuda_runtime");
      EXPECT_FALSE(event["args"].contains("stream")) << "HTA reads a stream as GPU activity";
      launches[event["args"]["correlation"].get<int64_t>()] = &event;
    } else {
      EXPECT_EQ(event["cat"], event["args"]["blockscope category"] == "region" ? "user_annotation" : "cpu_op");
      ops[event["name"]] = &event;
    }
  }
  EXPECT_TRUE(named);
  ASSERT_EQ(kernels.size(), 3u);
  ASSERT_EQ(launches.size(), 3u);
  const std::map<std::string, std::pair<std::string, std::string>> kineto = {
      {"softmax_kernel", {"kernel", "cudaLaunchKernel"}},
      {"Memcpy DtoD", {"gpu_memcpy", "cudaMemcpyAsync"}},
      {"Memset", {"gpu_memset", "cudaMemsetAsync"}}};
  for (const auto& [correlation, kernel] : kernels) {
    SCOPED_TRACE((*kernel)["name"].get<std::string>());
    ASSERT_TRUE(launches.count(correlation)) << "a kernel without its launch";
    const json& launch = *launches[correlation];
    const auto& [category, call] = kineto.at((*kernel)["name"]);
    EXPECT_EQ((*kernel)["cat"], category);
    EXPECT_EQ(launch["name"], call);
    EXPECT_EQ(launch["args"]["kernel"], (*kernel)["name"]);
    EXPECT_EQ((*kernel)["args"]["External id"], ops.at("softmax")->at("args")["External id"]);
    EXPECT_EQ(launch["args"]["External id"], ops.at("softmax")->at("args")["External id"]);
  }
  EXPECT_EQ(ops.at("softmax")->at("args")["External id"], softmax + 1);
  EXPECT_NE(ops.at("step 0")->at("args")["External id"], ops.at("softmax")->at("args")["External id"]);
}

// A CPU's work items are CPU work: nothing in their trace says GPU to HTA (no stream, no
// correlation, no GPU category, no CUDA call).
TEST(ChromeTrace, CpuWorkItemsAreNotGpuKernels) {
  const Profile profile = testing::random_profile(testing::fresh_seed(), 2);
  const json trace = json::parse(chrome_trace_json(profile));
  size_t items = 0;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    EXPECT_FALSE(event["args"].contains("stream")) << event.dump();
    EXPECT_FALSE(event["args"].contains("correlation")) << event.dump();
    EXPECT_NE(event["cat"], "kernel");
    EXPECT_NE(event["cat"], "cuda_runtime");
    items += event["cat"] == "cpu_work_item";
  }
  EXPECT_EQ(items, profile.kernels.size());
}

// Kineto's header: distributedInfo on the document's first line with `"rank": N` as HTA
// searches for it (a space after the colon), schemaVersion, and deviceProperties from the
// profile's device (an empty list on the CPU).
TEST(ChromeTrace, HeaderSaysTheRankAndTheDevice) {
  testing::ProfileBuilder b("gpu", "cuda:1");
  b.open("step 0", "", true);
  b.kernel("k", 5);
  b.close();
  DeviceProperties device;
  device.index = 1;
  device.name = "NVIDIA H200 (simulated)";
  device.total_global_mem = int64_t{141} << 30;
  device.compute_major = 9;
  device.num_sms = 132;
  b.profile().device_properties = device;
  const std::string text = chrome_trace_json(b.profile(), TraceRank{1, 2, "nccl"});
  const std::string first_line = text.substr(0, text.find('\n'));
  EXPECT_NE(first_line.find("\"rank\": 1,"), std::string::npos) << first_line;
  const json trace = json::parse(text);
  EXPECT_EQ(trace["schemaVersion"], 1);
  EXPECT_EQ(trace["distributedInfo"], json({{"backend", "nccl"}, {"rank", 1}, {"world_size", 2}}));
  ASSERT_EQ(trace["deviceProperties"].size(), 1u);
  const json& properties = trace["deviceProperties"][0];
  EXPECT_EQ(properties["id"], 1);
  EXPECT_EQ(properties["name"], "NVIDIA H200 (simulated)");
  EXPECT_EQ(properties["totalGlobalMem"], int64_t{141} << 30);
  EXPECT_EQ(properties["computeMajor"], 9);
  EXPECT_EQ(properties["numSms"], 132);
  const json cpu = json::parse(chrome_trace_json(testing::random_profile(testing::fresh_seed(), 1)));
  EXPECT_EQ(cpu["distributedInfo"], json({{"backend", "none"}, {"rank", 0}, {"world_size", 1}}));
  EXPECT_EQ(cpu["deviceProperties"], json::array());
}

// Every variant of a run in one trace: each its own pair of processes, named with its label and
// sorted in order, each pair a valid trace on its own (nesting, flows); the memory counter on
// the host process; otherData lists the variants.
TEST(ChromeTrace, OneTraceHoldsEveryVariant) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  std::vector<Profile> profiles;
  for (int v = 0; v < 3; ++v) {
    profiles.push_back(testing::random_profile(seed + v, 2));
    profiles.back().label = "variant " + std::to_string(v);
    for (size_t i = 0; i < profiles.back().ops.size(); ++i) profiles.back().ops[i].peak_bytes = 4096 * (i + 1);
  }
  const std::filesystem::path dir = testing::scratch_root() / ("blockscope_trace_v_" + std::to_string(seed));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "all.json").string();
  {
    TraceWriter writer(path);
    for (const Profile& p : profiles) writer.add(p);
    EXPECT_FALSE(std::filesystem::exists(path)) << "in place only when finished";
    writer.finish();
  }
  std::ifstream in(path);
  const json trace = json::parse(in);
  ASSERT_EQ(trace["otherData"]["variants"].size(), 3u);
  EXPECT_EQ(trace["otherData"]["variants"][2]["label"], "variant 2");
  std::map<int, std::string> process_names;
  for (const json& event : trace["traceEvents"])
    if (event["ph"] == "M" && event["name"] == "process_name") process_names[event["pid"].get<int>()] = event["args"]["name"];
  ASSERT_EQ(process_names.size(), 6u) << "a host and a device process per variant";
  for (int v = 0; v < 3; ++v) {
    SCOPED_TRACE(v);
    // This variant's processes: the two whose names carry its label.
    std::set<int> pids;
    for (const auto& [pid, name] : process_names)
      if (name.find(profiles[v].label) != std::string::npos) pids.insert(pid);
    ASSERT_EQ(pids.size(), 2u);
    json part = {{"traceEvents", json::array()}};
    int counters = 0;
    for (const json& event : trace["traceEvents"]) {
      if (!pids.count(event["pid"].get<int>())) continue;
      part["traceEvents"].push_back(event);
      counters += event["ph"] == "C";
    }
    EXPECT_EQ(counters, static_cast<int>(profiles[v].ops.size()));
    check_trace(part, profiles[v]);
  }
  // One after another in time, as they ran (HTA reads one file as one run), with ids unique in
  // the file (HTA joins launches and kernels on them).
  std::map<int, std::pair<double, double>> spans;  // variant -> first start, last end
  std::set<int64_t> external_ids;  // one per op and region
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const std::string& process = process_names.at(event["pid"].get<int>());
    const int variant = process[process.find("variant ") + 8] - '0';
    const double start = event["ts"], end = start + event["dur"].get<double>();
    auto [span, fresh] = spans.try_emplace(variant, start, end);
    if (!fresh) span->second = {std::min(span->second.first, start), std::max(span->second.second, end)};
    const bool op_or_region = event["cat"] == "cpu_op" || event["cat"] == "user_annotation";
    if (op_or_region && event["args"]["blockscope category"] != "launch") {
      EXPECT_TRUE(external_ids.insert(event["args"]["External id"].get<int64_t>()).second);
    }
  }
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_LE(spans[0].second, spans[1].first + kEps);
  EXPECT_LE(spans[1].second, spans[2].first + kEps);
  size_t ops = 0;
  for (const Profile& p : profiles) ops += p.ops.size();
  EXPECT_EQ(external_ids.size(), ops);
  std::filesystem::remove_all(dir);
}

TEST(ChromeTrace, WriteIsAtomicAndErrorsNameThePath) {
  const Profile profile = testing::random_profile(testing::fresh_seed(), 1);
  const std::filesystem::path dir = testing::scratch_root() /
                                    ("blockscope_trace_" + std::to_string(testing::fresh_seed()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "trace.json").string();
  write_chrome_trace(profile, path);
  std::ifstream in(path);
  const json trace = json::parse(in);
  EXPECT_EQ(trace["traceEvents"].size(), json::parse(chrome_trace_json(profile))["traceEvents"].size());
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  const std::string bad = (dir / "no_such_dir" / "trace.json").string();
  try {
    write_chrome_trace(profile, bad);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace blockscope::profiler
