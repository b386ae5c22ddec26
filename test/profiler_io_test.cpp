// Profile JSON: round trips exactly (in memory and through a file), and every malformed input
// is an input error naming the file and the bad key.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "profiler/profile_io.h"
#include "runtime/error.h"
#include "test/profiler_synthetic.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;

Profile detailed_profile(uint64_t seed) {
  Profile profile = testing::random_profile(seed, 2);
  profile.label = "attention=naive";
  profile.device = "cuda:0";
  profile.device_name = "NVIDIA H200";
  profile.dtype = "bf16";
  profile.peaks = {989.5, 4800.25, "nominal"};
  // Launch configurations and memory figures too, so every field is exercised.
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    KernelEvent& k = profile.kernels[i];
    k.grid = {static_cast<unsigned>(i + 1), 2, 3};
    k.block = {128, 1, 1};
    k.registers = 32 + static_cast<int>(i);
    k.static_smem = 1024;
    k.dynamic_smem = static_cast<int64_t>(i) * 16;
    k.occupancy = 0.125 * static_cast<double>(i % 8);
    k.stream = static_cast<int>(i % 2);
  }
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    profile.ops[i].dtype = i % 3 == 0 ? DType::bf16 : DType::f16;
    profile.ops[i].bytes_allocated = static_cast<int64_t>(i) * 4096;
    profile.ops[i].peak_bytes = static_cast<int64_t>(i) * 8192 + 1;
  }
  return profile;
}

TEST(ProfileJson, RoundTripKeepsEveryField) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile profile = detailed_profile(seed);
  const json first = profile_to_json(profile);
  EXPECT_EQ(first["version"], 1);
  EXPECT_EQ(first["format"], "blockscope-profile");
  const Profile back = profile_from_json(first, "memory");
  EXPECT_EQ(profile_to_json(back), first);
  ASSERT_EQ(back.ops.size(), profile.ops.size());
  ASSERT_EQ(back.kernels.size(), profile.kernels.size());
  for (size_t i = 0; i < back.ops.size(); ++i) {
    EXPECT_EQ(back.ops[i].parent, profile.ops[i].parent);
    EXPECT_EQ(back.ops[i].input_shapes, profile.ops[i].input_shapes);
    EXPECT_EQ(back.ops[i].dtype, profile.ops[i].dtype);
    EXPECT_EQ(back.ops[i].cpu_start_us, profile.ops[i].cpu_start_us);  // exact: JSON keeps doubles
  }
  for (size_t i = 0; i < back.kernels.size(); ++i) {
    EXPECT_EQ(back.kernels[i].grid.x, profile.kernels[i].grid.x);
    EXPECT_EQ(back.kernels[i].dynamic_smem, profile.kernels[i].dynamic_smem);
    EXPECT_EQ(back.kernels[i].device_end_us, profile.kernels[i].device_end_us);
  }
  EXPECT_EQ(back.peaks.tflops, 989.5);
  EXPECT_EQ(back.active_steps, 2);
  EXPECT_FALSE(back.schedule.has_value()) << "none recorded, none read back";
}

// The text save_profile writes and ranks exchange (built event by event) is the same document
// as profile_to_json's, also with no events at all; one event per line.
TEST(ProfileJson, TheTextIsTheSameDocumentOneEventPerLine) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile profile = detailed_profile(seed);
  const std::string text = profile_to_text(profile);
  EXPECT_EQ(json::parse(text), profile_to_json(profile));
  size_t event_lines = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) event_lines += line.rfind("  {\"", 0) == 0;
  EXPECT_EQ(event_lines, profile.ops.size() + profile.kernels.size());
  EXPECT_EQ(profile_to_json(profile_from_text(text, "memory")), profile_to_json(profile));
  Profile empty = profile;
  empty.ops.clear();
  empty.kernels.clear();
  empty.active_steps = 0;
  EXPECT_EQ(json::parse(profile_to_text(empty)), profile_to_json(empty));
  EXPECT_EQ(profile_from_text(profile_to_text(empty), "memory").ops.size(), 0u);
}

// The schedule the steps ran under is saved (the HTML report's header says it); profiles saved
// before it was have none and still load.
TEST(ProfileJson, ScheduleRoundTripsAndIsOptional) {
  Profile profile = detailed_profile(testing::fresh_seed());
  profile.schedule = Schedule{2, 3, 4, true};
  json saved = profile_to_json(profile);
  const Profile back = profile_from_json(saved, "memory");
  ASSERT_TRUE(back.schedule.has_value());
  EXPECT_EQ(back.schedule->wait, 2);
  EXPECT_EQ(back.schedule->warmup, 3);
  EXPECT_EQ(back.schedule->active, 4);
  EXPECT_TRUE(back.schedule->keep_cold_step);
  saved.erase("schedule");
  EXPECT_FALSE(profile_from_json(saved, "memory").schedule.has_value());
  saved["schedule"] = {{"wait", 1}, {"warmup", "1"}, {"active", 3}, {"cold_step", false}};
  try {
    profile_from_json(saved, "old.json");
    ADD_FAILURE() << "a string step count was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("old.json: schedule.warmup: expected an integer"), std::string::npos)
        << error.what();
  }
}

// A tensor-parallel rank's profile keeps its rank; other profiles have no such key; a rank
// outside its group is refused naming the key.
TEST(ProfileJson, TheRankOfATensorParallelProfileRoundTrips) {
  Profile profile = detailed_profile(testing::fresh_seed());
  EXPECT_FALSE(profile_to_json(profile).contains("tensor_parallel"));
  profile.rank = 2;
  profile.ranks = 4;
  json saved = profile_to_json(profile);
  const Profile back = profile_from_json(saved, "memory");
  EXPECT_EQ(back.rank, 2);
  EXPECT_EQ(back.ranks, 4);
  for (const auto& [rank, ranks] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {-1, 2}, {0, 0}, {0, int64_t{1} << 40}}) {
    saved["tensor_parallel"] = {{"rank", rank}, {"ranks", ranks}};
    try {
      profile_from_json(saved, "tp.json");
      ADD_FAILURE() << "rank " << rank << " of " << ranks << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("tp.json: tensor_parallel"), std::string::npos) << error.what();
    }
  }
}

// A GPU's properties (traces carry them as Kineto's deviceProperties) round trip; a profile
// without them (the CPU's, or one saved before they were kept) has no such key; a bad field is
// refused naming it.
TEST(ProfileJson, DevicePropertiesRoundTrip) {
  Profile profile = detailed_profile(testing::fresh_seed());
  EXPECT_FALSE(profile_to_json(profile).contains("device_properties"));
  EXPECT_FALSE(profile_from_json(profile_to_json(profile), "memory").device_properties);
  DeviceProperties device;
  device.index = 1;
  device.name = "NVIDIA H200";
  device.total_global_mem = int64_t{150} << 30;
  device.compute_major = 9;
  device.compute_minor = 0;
  device.num_sms = 132;
  device.max_threads_per_block = 1024;
  device.max_threads_per_sm = 2048;
  device.regs_per_block = 65536;
  device.regs_per_sm = 65536;
  device.warp_size = 32;
  device.shared_mem_per_block = 49152;
  device.shared_mem_per_sm = 233472;
  device.shared_mem_per_block_optin = 232448;
  profile.device_properties = device;
  json saved = profile_to_json(profile);
  const Profile back = profile_from_json(saved, "memory");
  ASSERT_TRUE(back.device_properties);
  EXPECT_EQ(profile_to_json(back)["device_properties"], saved["device_properties"]);
  EXPECT_EQ(back.device_properties->total_global_mem, int64_t{150} << 30);
  saved["device_properties"]["num_sms"] = "many";
  try {
    profile_from_json(saved, "gpu.json");
    ADD_FAILURE() << "a string number of SMs was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("gpu.json: device_properties.num_sms"), std::string::npos) << error.what();
  }
}

class ProfileFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::scratch_root() / ("blockscope_io_" + std::to_string(testing::fresh_seed()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  // The message of the InputError that loading `name` throws.
  std::string load_error(const std::string& name) const {
    try {
      load_profile(path(name));
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::invalid_input) << error.what();
      return error.what();
    }
    ADD_FAILURE() << "loading " << name << " did not fail";
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(ProfileFile, SaveAndLoad) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile profile = detailed_profile(seed);
  save_profile(profile, path("p.json"));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);  // the temporary was renamed, not left behind
  EXPECT_EQ(profile_to_json(load_profile(path("p.json"))), profile_to_json(profile));
}

TEST_F(ProfileFile, MissingFileAndInvalidJson) {
  EXPECT_NE(load_error("absent.json").find(path("absent.json")), std::string::npos);
  write("broken.json", "{\"format\": \"blockscope-profile\", ");
  const std::string message = load_error("broken.json");
  EXPECT_NE(message.find(path("broken.json")), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

// A number no double holds (1e400) is bad input, exit 2 (before: nlohmann's out_of_range
// escaped as a runtime failure, exit 3).
TEST_F(ProfileFile, ANumberBeyondDoubleIsBadInput) {
  const json good = profile_to_json(detailed_profile(testing::fresh_seed()));
  std::string text = good.dump();
  const std::string key = "\"active_steps\":";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + key.size(), "1e400,\"x\":");
  write("huge.json", text);
  const std::string message = load_error("huge.json");
  EXPECT_NE(message.find(path("huge.json")), std::string::npos) << message;
  EXPECT_NE(message.find("1e400"), std::string::npos) << message;
}

TEST_F(ProfileFile, EveryBadKeyIsNamed) {
  // A profile with kernels, so that every case below spoils something (none is skipped).
  uint64_t seed = testing::fresh_seed();
  while (detailed_profile(seed).kernels.empty()) ++seed;
  SCOPED_TRACE(seed);
  const json good = profile_to_json(detailed_profile(seed));
  struct Case {
    std::string what;
    std::function<void(json&)> spoil;
    std::string expected;  // must appear in the message, after the file name
  };
  const std::vector<Case> cases = {
      {"not a profile", [](json& j) { j["format"] = "chrome-trace"; }, ": format: expected \"blockscope-profile\""},
      {"newer version", [](json& j) { j["version"] = 99; }, ": version: unsupported version 99"},
      {"missing label", [](json& j) { j.erase("label"); }, ": label: missing"},
      {"peaks wrong type", [](json& j) { j["peaks"]["gbps"] = "fast"; }, ": peaks.gbps: expected a number, got string"},
      {"ops not an array", [](json& j) { j["ops"] = 3; }, ": ops: expected an array"},
      {"op time wrong type", [](json& j) { j["ops"][1]["cpu_start_us"] = "x"; }, ": ops[1].cpu_start_us: expected a number"},
      {"op parent ahead", [](json& j) { j["ops"][0]["parent"] = 5; }, ": ops[0].parent: must be -1 or the index of an earlier op"},
      {"op dtype unknown", [](json& j) { j["ops"][2]["dtype"] = "f8"; }, ": ops[2].dtype: unknown dtype 'f8'"},
      {"shape not integers", [](json& j) { j["ops"][1]["input_shapes"] = json::array({json::array({1.5})}); },
       ": ops[1].input_shapes[0]: expected an array of integers"},
      {"kernel op out of range", [](json& j) { if (!j["kernels"].empty()) j["kernels"][0]["op"] = 100000; },
       ": kernels[0].op: must be -1 or the index of an op"},
      {"kernel grid short", [](json& j) { if (!j["kernels"].empty()) j["kernels"][0]["grid"] = json::array({1, 2}); },
       ": kernels[0].grid: expected [x, y, z]"},
      {"top level array", [](json& j) { j = json::array(); }, ": top level: expected an object"},
      // Issue 43: integers an int does not hold are refused, not narrowed (2^62 steps read as 0).
      {"steps beyond int", [](json& j) { j["active_steps"] = int64_t{1} << 62; },
       ": active_steps: is 4611686018427387904, outside what a profile counts"},
      {"op step beyond int", [](json& j) { j["ops"][0]["step"] = int64_t{1} << 32; }, ": ops[0].step: is 4294967296"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json spoiled = good;
    c.spoil(spoiled);
    write("bad.json", spoiled.dump());
    const std::string message = load_error("bad.json");
    EXPECT_NE(message.find(path("bad.json") + c.expected), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace blockscope::profiler
