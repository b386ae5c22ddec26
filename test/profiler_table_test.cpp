// Op and kernel tables on synthetic profiles: the arithmetic (self <= total, percentages sum
// to 100, calls counted), sorting, row limits, grouping by shape, formats and errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>

#include "profiler/summary.h"
#include "profiler/table.h"
#include "runtime/error.h"
#include "test/profiler_synthetic.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;
using testing::ProfileBuilder;

json table_json(const Profile& profile, const std::string& sort_by = "self_device", int row_limit = 0,
                bool group_by_shape = false) {
  TableOptions options;
  options.sort_by = sort_by;
  options.row_limit = row_limit;
  options.group_by_shape = group_by_shape;
  return json::parse(op_table(profile, options, Format::json));
}

std::string row_key(const json& row) { return row["name"].get<std::string>() + "|" + row["path"].get<std::string>(); }

TEST(OpTable, ArithmeticOnRandomProfiles) {
  for (int trial = 0; trial < 20; ++trial) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(seed);
    const Profile profile = testing::random_profile(seed, 1 + static_cast<int>(seed % 4));
    const json table = table_json(profile);

    // Independent sums: calls per (name, path), top-level CPU time, all kernel time.
    std::map<std::string, int> calls;
    double top_level_cpu = 0, kernel_time = 0;
    for (const OpEvent& op : profile.ops) {
      calls[row_name(op) + "|" + op.path] += 1;
      if (op.parent < 0) top_level_cpu += op.cpu_end_us - op.cpu_start_us;
    }
    for (const KernelEvent& k : profile.kernels) kernel_time += k.device_end_us - k.device_start_us;

    double self_cpu_pct = 0, self_device_pct = 0, self_cpu = 0, self_device = 0;
    ASSERT_EQ(table["rows"].size(), calls.size());
    for (const json& row : table["rows"]) {
      SCOPED_TRACE(row_key(row));
      EXPECT_LE(row["self_cpu_us"].get<double>(), row["cpu_total_us"].get<double>() + 1e-9);
      EXPECT_LE(row["self_device_us"].get<double>(), row["device_total_us"].get<double>() + 1e-9);
      EXPECT_GE(row["self_cpu_us"].get<double>(), 0.0);
      EXPECT_EQ(row["calls"].get<int>(), calls[row_key(row)]);
      EXPECT_NEAR(row["cpu_avg_us"].get<double>() * row["calls"].get<int>(), row["cpu_total_us"].get<double>(), 1e-6);
      self_cpu_pct += row["self_cpu_pct"].get<double>();
      self_device_pct += row["self_device_pct"].get<double>();
      self_cpu += row["self_cpu_us"].get<double>();
      self_device += row["self_device_us"].get<double>();
    }
    EXPECT_NEAR(self_cpu_pct, 100.0, 1e-6);
    // A random profile may launch no kernel at all: then every device percentage is 0.
    EXPECT_NEAR(self_device_pct, kernel_time > 0 ? 100.0 : 0.0, 1e-6);
    EXPECT_NEAR(self_cpu, top_level_cpu, 1e-6);
    EXPECT_NEAR(table["self_cpu_time_total_us"].get<double>(), top_level_cpu, 1e-6);
    EXPECT_NEAR(self_device, kernel_time, 1e-6);
    EXPECT_NEAR(table["self_device_time_total_us"].get<double>(), kernel_time, 1e-6);
    // Every kernel runs inside a step: the steps' device total is all the kernel time.
    for (const json& row : table["rows"]) {
      if (row["name"] == "step *") {
        EXPECT_NEAR(row["device_total_us"].get<double>(), kernel_time, 1e-6);
      }
    }
  }
}

// A hand-built profile with known numbers: the exact values of self and total.
Profile known_profile() {
  ProfileBuilder b("known");
  b.open("step 0", "", true);
  b.spend(100);                                            // step self: 100 + 50
  b.open("attention", "naive", false, {{2, 4, 8, 16}}, 4e6, 1e5);
  b.spend(10);
  b.kernel("gemm_kernel", 300, 5);                         // attention self device: 300
  b.open("softmax", "", false, {{2, 4, 8, 8}}, 0, 2e3);
  b.spend(20);
  b.kernel("softmax_kernel", 1200, 5);                     // softmax self device 1200
  b.close();                                               // softmax CPU 25
  b.spend(3);
  b.close();                                               // attention CPU 10 + 5 + 25 + 3 = 43
  b.spend(50);
  b.close();                                               // step CPU 193
  b.set_active_steps(1);
  b.profile().peaks = {2.0, 50.0, "test"};
  return b.profile();
}

TEST(OpTable, KnownValues) {
  const json table = table_json(known_profile());
  std::map<std::string, json> rows;
  for (const json& row : table["rows"]) rows[row["name"].get<std::string>()] = row;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows["step *"]["cpu_total_us"].get<double>(), 193);
  EXPECT_DOUBLE_EQ(rows["step *"]["self_cpu_us"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(rows["attention"]["cpu_total_us"].get<double>(), 43);
  EXPECT_DOUBLE_EQ(rows["attention"]["self_cpu_us"].get<double>(), 18);
  EXPECT_DOUBLE_EQ(rows["softmax"]["self_cpu_us"].get<double>(), 25);
  EXPECT_DOUBLE_EQ(rows["attention"]["self_device_us"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(rows["attention"]["device_total_us"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(rows["step *"]["self_device_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(rows["step *"]["device_total_us"].get<double>(), 1500);
  // 4e6 FLOPs over 1500 us = 2.667 GFLOP/s; the peak is 2 TFLOP/s.
  EXPECT_NEAR(rows["attention"]["tflops"].get<double>(), 4e6 / 1500e-6 / 1e12, 1e-12);
  EXPECT_NEAR(rows["attention"]["pct_peak_flops"].get<double>(), 100 * 4e6 / 1500e-6 / 1e12 / 2.0, 1e-9);
  EXPECT_TRUE(rows["step *"]["pct_peak_flops"].is_null());
  EXPECT_EQ(rows["attention"]["input_shapes"], json::parse("[[2, 4, 8, 16]]"));

  TableOptions options;
  options.row_limit = 0;
  const std::string text = op_table(known_profile(), options, Format::table);
  EXPECT_NE(text.find("Self CPU time total: 193.000us"), std::string::npos) << text;
  EXPECT_NE(text.find("Self device time total: 1.500ms"), std::string::npos) << text;
  for (const char* column : {"Name", "Self CPU %", "Self CPU", "CPU total", "CPU avg", "Self Device", "Self Device %",
                             "Device total", "Device avg", "# of Calls", "Input Shapes", "TFLOP/s", "GB/s"}) {
    EXPECT_NE(text.find(column), std::string::npos) << column;
  }
}

TEST(OpTable, SortByEveryKeyAndRowLimit) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile profile = testing::random_profile(seed, 3);
  const std::map<std::string, std::string> key_field = {
      {"self_cpu", "self_cpu_us"},      {"cpu_total", "cpu_total_us"},     {"self_device", "self_device_us"},
      {"device_total", "device_total_us"}, {"calls", "calls"},             {"flops", "flops"},
      {"bytes", "bytes"},               {"cuda_time_total", "device_total_us"}, {"self_gpu", "self_device_us"},
      {"cpu_avg", "cpu_avg_us"},        {"device_avg", "device_avg_us"},   {"tflops", "tflops"}};
  for (const auto& [key, field] : key_field) {
    SCOPED_TRACE(key);
    const json all = table_json(profile, key);
    for (size_t i = 1; i < all["rows"].size(); ++i) {
      EXPECT_GE(all["rows"][i - 1][field].get<double>(), all["rows"][i][field].get<double>());
    }
    const json limited = table_json(profile, key, 2);
    ASSERT_EQ(limited["rows"].size(), std::min<size_t>(2, all["rows"].size()));
    for (size_t i = 0; i < limited["rows"].size(); ++i) EXPECT_EQ(limited["rows"][i], all["rows"][i]);
  }
  const json by_name = table_json(profile, "name");
  for (size_t i = 1; i < by_name["rows"].size(); ++i) {
    EXPECT_LE(by_name["rows"][i - 1]["name"].get<std::string>(), by_name["rows"][i]["name"].get<std::string>());
  }
}

TEST(OpTable, UnknownSortKeyNamesTheKeyAndTheValidOnes) {
  TableOptions options;
  options.sort_by = "self_gpu_time";
  try {
    op_table(known_profile(), options, Format::table);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find("'self_gpu_time'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("self_device"), std::string::npos) << error.what();
  }
}

TEST(OpTable, GroupByInputShapes) {
  ProfileBuilder b;
  b.open("step 0", "", true);
  for (int rows : {4, 7, 4}) {
    b.open("softmax", "", false, {{rows, 16}});
    b.spend(rows);
    b.kernel("softmax_kernel", rows * 10.0);
    b.close();
  }
  b.close();
  b.set_active_steps(1);
  const json plain = table_json(b.profile(), "name");
  ASSERT_EQ(plain["rows"].size(), 2u);
  EXPECT_EQ(plain["rows"][0]["name"], "softmax");
  EXPECT_EQ(plain["rows"][0]["calls"], 3);
  EXPECT_TRUE(plain["rows"][0]["input_shapes"].is_null());  // shapes differ between calls
  const json grouped = table_json(b.profile(), "calls", 0, true);
  std::map<std::string, int> calls;
  for (const json& row : grouped["rows"]) calls[row["input_shapes"].dump()] = row["calls"].get<int>();
  EXPECT_EQ(calls["[[4,16]]"], 2);  // JSON arrays of shapes
  EXPECT_EQ(calls["[[7,16]]"], 1);
  EXPECT_DOUBLE_EQ(grouped["rows"][0]["device_total_us"].get<double>(), 80.0);
}

TEST(OpTable, CsvHasOneLinePerRowAndAHeader) {
  TableOptions options;
  options.row_limit = 0;
  const std::string csv = op_table(known_profile(), options, Format::csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  EXPECT_EQ(csv.rfind("name,path,self_cpu_pct,self_cpu_us", 0), 0u) << csv;
  // Shapes contain commas: quoted.
  EXPECT_NE(csv.find("\"[[2, 4, 8, 16]]\""), std::string::npos) << csv;
}

TEST(OpTable, ParseFormat) {
  Format format;
  ASSERT_TRUE(parse_format("csv", &format));
  EXPECT_EQ(format, Format::csv);
  ASSERT_TRUE(parse_format("json", &format));
  EXPECT_EQ(format, Format::json);
  ASSERT_TRUE(parse_format("table", &format));
  EXPECT_EQ(format, Format::table);
  EXPECT_FALSE(parse_format("xml", &format));
}

TEST(TimeFormat, UnitsLikeTorch) {
  EXPECT_EQ(format_time_us(23.0), "23.000us");
  EXPECT_EQ(format_time_us(1955.0), "1.955ms");
  EXPECT_EQ(format_time_us(2.3e6), "2.300s");
  EXPECT_EQ(format_time_us(0), "0.000us");
}

TEST(KernelTable, CountsPerStepAndShares) {
  for (int trial = 0; trial < 10; ++trial) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(seed);
    const int steps = 1 + static_cast<int>(seed % 3);
    const Profile profile = testing::random_profile(seed, steps);
    const json table = json::parse(kernel_table(profile, Format::json));
    std::map<std::string, int> calls;
    std::map<std::string, double> time;
    for (const KernelEvent& k : profile.kernels) {
      calls[k.name] += 1;
      time[k.name] += k.device_end_us - k.device_start_us;
    }
    ASSERT_EQ(table["rows"].size(), calls.size());
    EXPECT_DOUBLE_EQ(table["kernels_per_step"].get<double>(), static_cast<double>(profile.kernels.size()) / steps);
    double share = 0;
    for (const json& row : table["rows"]) {
      const std::string name = row["name"];
      EXPECT_EQ(row["calls"].get<int>(), calls[name]);
      EXPECT_DOUBLE_EQ(row["calls_per_step"].get<double>(), static_cast<double>(calls[name]) / steps);
      EXPECT_NEAR(row["total_us"].get<double>(), time[name], 1e-6);
      EXPECT_TRUE(row["grid"].is_null());  // synthetic kernels carry no launch config
      share += row["device_pct"].get<double>();
    }
    if (!profile.kernels.empty()) {
      EXPECT_NEAR(share, 100.0, 1e-6);
    }
  }
}

TEST(KernelTable, LaunchConfigShownWhenKnown) {
  ProfileBuilder b("launch", "cuda:0");
  b.open("step 0", "", true);
  b.open("softmax");
  const int k = b.kernel("softmax_causal_scale_kernel", 42);
  b.close();
  b.close();
  b.set_active_steps(1);
  KernelEvent& kernel = b.profile().kernels[k];
  kernel.grid = {1024, 8, 1};
  kernel.block = {128, 1, 1};
  kernel.registers = 40;
  kernel.dynamic_smem = 4096;
  kernel.occupancy = 0.5;
  const std::string text = kernel_table(b.profile(), Format::table);
  EXPECT_NE(text.find("[1024, 8, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("[128, 1, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("50.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("4.00 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("Kernels per step: 1"), std::string::npos) << text;
  const std::string csv = kernel_table(b.profile(), Format::csv);
  EXPECT_NE(csv.find("softmax_causal_scale_kernel,1,1,42,42,100,\"[1024, 8, 1]\",\"[128, 1, 1]\",40,4096,0.5"),
            std::string::npos)
      << csv;
}

// The text table fits a width: every line within it, the columns dropped in the table's order
// named under it; --columns picks columns by key or title; an unknown name is an error naming
// the valid ones; a column empty on every row is hidden.
TEST(Tables, FitTheWidthAndChooseColumns) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile profile = testing::random_profile(seed, 3);
  TableOptions options;
  options.row_limit = 0;
  const std::string wide = op_table(profile, options, Format::table);
  for (const size_t width : {size_t{80}, size_t{120}}) {
    SCOPED_TRACE(width);
    options.layout.max_width = width;
    const std::string text = op_table(profile, options, Format::table);
    // Every line, the notes under the table included (they wrap).
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end - start);
      size_t code_points = 0;
      for (unsigned char ch : line) code_points += (ch & 0xC0) != 0x80;
      EXPECT_LE(code_points, width) << line;
      start = end + 1;
    }
    // Input Shapes goes first, where there is one: a group whose calls had different shapes
    // shows none, and the random profile may give every group more than one.
    const bool has_shapes = wide.find("Input Shapes") != std::string::npos;
    EXPECT_NE(text.find("(hidden to fit " + std::to_string(width) + " columns: " + (has_shapes ? "Input" : "")),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Self Device"), std::string::npos) << "the key columns stay";
  }
  EXPECT_EQ(wide.find("(hidden to fit"), std::string::npos);

  options.layout = parse_columns("name,Calls,self_device_us", 0);
  EXPECT_TRUE(options.layout.columns.size() == 3);
  options.layout.columns[1] = "# of Calls";  // titles work as well as keys
  const std::string chosen = op_table(profile, options, Format::table);
  const std::string header = chosen.substr(chosen.find('\n') + 1, chosen.find('\n', chosen.find('\n') + 1) - chosen.find('\n') - 1);
  EXPECT_EQ(header.substr(0, 4), "Name");
  EXPECT_NE(header.find("# of Calls"), std::string::npos) << header;
  EXPECT_NE(header.find("Self Device"), std::string::npos) << header;
  EXPECT_EQ(header.find("CPU total"), std::string::npos) << header;
  options.layout = parse_columns("name,no_such_column", 0);
  try {
    op_table(profile, options, Format::table);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find("--columns: unknown column 'no_such_column'; columns: name, path,"),
              std::string::npos)
        << error.what();
  }

  // CPU kernels have no launch configuration: those columns are hidden, unless asked for.
  ProfileBuilder b("cpu");
  b.open("step 0", "", true);
  b.open("add");
  b.kernel("add_kernel", 10);
  b.close();
  b.close();
  b.set_active_steps(1);
  const std::string kernels = kernel_table(b.profile(), Format::table);
  EXPECT_EQ(kernels.find("Grid"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("Occupancy"), std::string::npos) << kernels;
  TextLayout all = parse_columns("all", 100);
  EXPECT_NE(kernel_table(b.profile(), Format::table, all).find("Occupancy"), std::string::npos);
}

// A row limit that cuts rows says how many; % of peak above 100 is marked and explained.
TEST(OpTable, CutRowsAndImpossiblePeaksAreSaid) {
  Profile profile = known_profile();
  TableOptions options;
  options.row_limit = 1;
  std::string text = op_table(profile, options, Format::table);
  EXPECT_NE(text.find("… 2 more rows (--row-limit 0 shows all)"), std::string::npos) << text;
  EXPECT_EQ(json::parse(op_table(profile, options, Format::json))["rows_cut"], 2);
  options.row_limit = 0;
  profile.peaks = {1e-6, 1e-9, "a test peak"};  // far below what the ops reach
  text = op_table(profile, options, Format::table);
  EXPECT_NE(text.find("%!"), std::string::npos) << text;
  EXPECT_NE(text.find("! above 100% of the peak"), std::string::npos) << text;
  EXPECT_NE(text.find("a test peak"), std::string::npos) << text;
}

// Every op table reports the steps' spread; a noisy profile says so.
TEST(OpTable, StepTimesWithTheirSpread) {
  ProfileBuilder b("steps");
  const double times[] = {100, 300, 120, 110, 105};
  for (int step = 0; step < 5; ++step) {
    b.set_step(step);
    b.open("step " + std::to_string(step), "", true);
    b.open("add");
    b.kernel("add_kernel", times[step]);
    b.close();
    b.close();
  }
  b.set_active_steps(5);
  EXPECT_EQ(step_times_us(b.profile()), std::vector<double>(times, times + 5));
  const Spread s = spread_of(step_times_us(b.profile()));
  EXPECT_DOUBLE_EQ(s.median, 110);
  EXPECT_DOUBLE_EQ(s.min, 100);
  EXPECT_DOUBLE_EQ(s.max, 300);
  EXPECT_DOUBLE_EQ(s.mean, 147);
  EXPECT_NEAR(s.stddev, std::sqrt((47.0 * 47 + 153.0 * 153 + 27.0 * 27 + 37.0 * 37 + 42.0 * 42) / 4.0), 1e-9);
  TableOptions options;
  const std::string text = op_table(b.profile(), options, Format::table);
  EXPECT_NE(text.find("Step time: median 110.000us (min 100.000us, max 300.000us, CV "), std::string::npos) << text;
  EXPECT_NE(text.find("noisy: CV"), std::string::npos) << text;
  // "try --threads 1" is advice for a CPU run on more threads only.
  b.profile().cpu_threads = 4;
  EXPECT_NE(op_table(b.profile(), options, Format::table).find("try --threads 1, or more steps"), std::string::npos);
  b.profile().cpu_threads = 1;
  const std::string one_thread = op_table(b.profile(), options, Format::table);
  EXPECT_EQ(one_thread.find("--threads 1"), std::string::npos) << one_thread;
  EXPECT_NE(one_thread.find("try more steps"), std::string::npos) << one_thread;
  const json table = json::parse(op_table(b.profile(), options, Format::json));
  EXPECT_EQ(table["step_times_us"].size(), 5u);
  EXPECT_EQ(table["step_time_us"]["noisy"], true);
  EXPECT_DOUBLE_EQ(table["step_time_us"]["median"].get<double>(), 110);
}

// Each step's memory: its peak above what was in use at its start, and the peak in use; the
// text gives the largest of each.
TEST(OpTable, StepMemoryPeaks) {
  ProfileBuilder b("memory");
  const int64_t starts[] = {1000, 5000, 1000}, peaks[] = {4000, 6000, 9000};
  for (int step = 0; step < 3; ++step) {
    b.set_step(step);
    b.open("step " + std::to_string(step), "", true);
    b.kernel("k", 10);
    b.close();
    b.profile().ops.back().start_bytes = starts[step];
    b.profile().ops.back().peak_bytes = peaks[step];
  }
  b.set_active_steps(3);
  const Rows steps = step_table_rows(b.profile());
  ASSERT_EQ(steps.rows.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(steps.rows[step][4], peaks[step] - starts[step]);
    EXPECT_EQ(steps.rows[step][5], peaks[step]);
  }
  const std::string text = op_table(b.profile(), TableOptions{}, Format::table);
  EXPECT_NE(text.find("Step memory: peak 7.81 KiB above the step's start, 8.79 KiB in use at most"), std::string::npos)
      << text;
  const json table = json::parse(op_table(b.profile(), TableOptions{}, Format::json));
  ASSERT_EQ(table["steps"].size(), 3u);
  EXPECT_EQ(table["steps"][1]["peak_memory_bytes"], 1000);
  EXPECT_EQ(table["steps"][2]["peak_in_use_bytes"], 9000);
}

TEST(Tables, EmptyProfileRendersInEveryFormat) {
  const Profile empty;
  for (Format format : {Format::table, Format::csv, Format::json}) {
    EXPECT_NO_THROW(op_table(empty, TableOptions{}, format));
    EXPECT_NO_THROW(kernel_table(empty, format));
  }
  const json table = json::parse(op_table(empty, TableOptions{}, Format::json));
  EXPECT_TRUE(table["rows"].empty());
  EXPECT_EQ(table["self_cpu_time_total_us"], 0.0);
  EXPECT_NE(op_table(empty, TableOptions{}, Format::table).find("Self device time total: 0.000us"), std::string::npos);
}

}  // namespace
}  // namespace blockscope::profiler
