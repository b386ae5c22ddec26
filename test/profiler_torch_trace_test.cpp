// PyTorch profiler traces read as profiles (profiler/torch_trace.h): two hand-written fixtures
// (test/fixtures/torch_traces/) from Kineto's Chrome trace format and the legacy profiler's,
// every value below worked out by hand from their events; the diff and report beside a
// blockscope profile; and every bad file refused with exit 2 naming it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "profiler/diff.h"
#include "profiler/html_report.h"
#include "profiler/profile_io.h"
#include "profiler/summary.h"
#include "profiler/torch_trace.h"
#include "runtime/error.h"
#include "test/profiler_synthetic.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) {
  return std::string(testing::source_dir()) + "/test/fixtures/torch_traces/" + name;
}

// The op table's rows by "name (path)", as diff keys them.
std::map<std::string, OpStats> rows_of(const Profile& profile) {
  std::map<std::string, OpStats> rows;
  for (const OpStats& row : op_stats(profile, false)) rows[row.path.empty() ? row.name : row.name + " (" + row.path + ")"] = row;
  return rows;
}

// The error a file (or document) gives: an input error, its message.
template <typename F>
std::string input_error(F&& load) {
  try {
    load();
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// kineto_two_steps.json, by hand: ProfilerStep#3 [100, 200] and #4 [200, 300] µs; the trace's
// first kept event (aten::empty, outside the steps) at 95 is the origin. Step 3: aten::linear
// [110, 150] around aten::t [112, 115] and aten::addmm [120, 145], whose launch (correlation 501)
// ran the sgemm [140, 150]; aten::softmax [155, 175] around aten::_softmax [158, 173], whose
// launch (502) ran softmax_warp_forward [170, 176]. Step 4: the linear again (its sgemm 12 µs,
// after the linear ended), aten::mul [230, 240] on another thread, aten::masked_fill [255, 280]
// around aten::clone [256, 262] (around aten::copy_ [257, 261]: a 2 µs memcpy) and
// aten::masked_fill_ [265, 278] (a 5 µs kernel); an orphan kernel (no launch) at [290, 292];
// a kernel at 400, outside every step.
TEST(TorchTrace, KinetoTraceStepsNestingAndKernels) {
  const Profile p = load_profile_or_torch_trace(fixture("kineto_two_steps.json"));
  EXPECT_EQ(p.label, "PyTorch 2.5.1 trace kineto_two_steps.json");
  EXPECT_EQ(p.workload, "hand-written: linear, softmax, masked_fill");
  EXPECT_EQ(p.device, "cuda:0");
  EXPECT_EQ(p.device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.dtype, "f32");
  EXPECT_FALSE(p.host_ops_only);
  EXPECT_EQ(p.active_steps, 2);
  EXPECT_EQ(kept_steps(p), (std::vector<int>{3, 4}));
  // 2 step regions + 5 ops in step 3 + 8 in step 4 (aten::empty before the steps left out).
  ASSERT_EQ(p.ops.size(), 15u);
  ASSERT_EQ(p.notes.size(), 2u);
  EXPECT_NE(p.notes[0].find("1 op or range outside the ProfilerStep# ranges left out"), std::string::npos) << p.notes[0];
  EXPECT_EQ(p.notes[1], "1 kernel outside every step left out");

  // Step 3's events in order, parents first, times since the origin (95 µs).
  const struct {
    const char* name;
    const char* path;
    int parent;
    int depth;
    double start, end;
  } step3[] = {{"step 3", "", -1, 0, 5, 105},
               {"linear", "aten::linear", 0, 1, 15, 55},
               {"aten::t", "", 1, 2, 17, 20},
               {"linear", "aten::addmm", 1, 2, 25, 50},
               {"softmax", "aten::softmax", 0, 1, 60, 80},
               {"softmax", "aten::_softmax", 4, 2, 63, 78}};
  for (size_t i = 0; i < std::size(step3); ++i) {
    SCOPED_TRACE(i);
    const OpEvent& e = p.ops[i];
    EXPECT_EQ(e.name, step3[i].name);
    EXPECT_EQ(e.path, step3[i].path);
    EXPECT_EQ(e.parent, step3[i].parent);
    EXPECT_EQ(e.depth, step3[i].depth);
    EXPECT_EQ(e.step, 3);
    EXPECT_DOUBLE_EQ(e.cpu_start_us, step3[i].start);
    EXPECT_DOUBLE_EQ(e.cpu_end_us, step3[i].end);
  }
  EXPECT_TRUE(p.ops[0].is_region);
  EXPECT_EQ(p.ops[3].scope, "step 3/linear/linear");
  EXPECT_EQ(p.ops[1].input_shapes, (std::vector<Shape>{{4, 16}, {32, 16}, {32}}));
  EXPECT_EQ(p.ops[3].input_shapes, (std::vector<Shape>{{32}, {4, 16}, {16, 32}}));  // the scalars left out
  EXPECT_DOUBLE_EQ(p.ops[3].flops, 4096);
  // Step 4: aten::mul on thread 11 is no child of the linear it overlaps on thread 10.
  EXPECT_EQ(p.ops[6].name, "step 4");
  const auto mul = std::find_if(p.ops.begin(), p.ops.end(), [](const OpEvent& e) { return e.name == "mul"; });
  ASSERT_NE(mul, p.ops.end());
  EXPECT_EQ(mul->parent, 6);

  // Kernels: 6 placed (the one at 400 left out), each with its launching op.
  ASSERT_EQ(p.kernels.size(), 6u);
  const KernelEvent& sgemm = p.kernels[0];
  EXPECT_EQ(sgemm.name, "ampere_sgemm_32x32_sliced1x4_tn");
  EXPECT_EQ(sgemm.op, 3);  // aten::addmm, not the aten::linear around it
  EXPECT_EQ(sgemm.step, 3);
  EXPECT_DOUBLE_EQ(sgemm.device_start_us, 45);
  EXPECT_DOUBLE_EQ(sgemm.device_end_us, 55);
  EXPECT_DOUBLE_EQ(sgemm.launch_start_us, 35);
  EXPECT_DOUBLE_EQ(sgemm.launch_cpu_us, 5);
  EXPECT_EQ(sgemm.grid.x, 2u);
  EXPECT_EQ(sgemm.block.x, 128u);
  EXPECT_EQ(sgemm.registers, 96);
  EXPECT_EQ(sgemm.static_smem, 8192);
  EXPECT_EQ(sgemm.stream, 7);
  EXPECT_EQ(p.kernels[1].op, 5);  // softmax_warp_forward: aten::_softmax
  EXPECT_EQ(p.kernels[5].name, "orphan_kernel");
  EXPECT_EQ(p.kernels[5].op, 6);  // no launch in the trace: step 4's own
  EXPECT_EQ(p.kernels[5].step, 4);

  // The op table, by hand. Self CPU = span minus the direct children's spans.
  std::map<std::string, OpStats> rows = rows_of(p);
  ASSERT_EQ(rows.size(), 11u);
  const OpStats& linear = rows["linear (aten::linear)"];
  EXPECT_EQ(linear.calls, 2);
  EXPECT_DOUBLE_EQ(linear.cpu_total_us, 80);
  EXPECT_DOUBLE_EQ(linear.self_cpu_us, 24);     // (40 - 3 - 25) per call
  EXPECT_DOUBLE_EQ(linear.self_device_us, 0);   // its GEMM is addmm's ...
  EXPECT_DOUBLE_EQ(linear.device_total_us, 22); // ... and in its total once: 10 + 12
  const OpStats& addmm = rows["linear (aten::addmm)"];
  EXPECT_EQ(addmm.calls, 2);
  EXPECT_DOUBLE_EQ(addmm.self_cpu_us, 50);
  EXPECT_DOUBLE_EQ(addmm.self_device_us, 22);
  EXPECT_DOUBLE_EQ(addmm.flops, 8192);
  EXPECT_DOUBLE_EQ(rows["softmax (aten::softmax)"].self_cpu_us, 5);
  EXPECT_DOUBLE_EQ(rows["softmax (aten::softmax)"].device_total_us, 6);
  EXPECT_DOUBLE_EQ(rows["softmax (aten::_softmax)"].self_device_us, 6);
  const OpStats& masked_fill = rows["masked_fill (aten::masked_fill)"];
  EXPECT_DOUBLE_EQ(masked_fill.self_cpu_us, 6);  // 25 - 6 (clone) - 13 (masked_fill_)
  EXPECT_DOUBLE_EQ(masked_fill.device_total_us, 7);
  EXPECT_DOUBLE_EQ(rows["aten::clone"].self_cpu_us, 2);
  EXPECT_DOUBLE_EQ(rows["copy (aten::copy_)"].self_device_us, 2);
  EXPECT_DOUBLE_EQ(rows["masked_fill_ (aten::masked_fill_)"].self_device_us, 5);
  EXPECT_DOUBLE_EQ(rows["mul (aten::mul)"].cpu_total_us, 10);
  const OpStats& steps = rows["step *"];
  EXPECT_EQ(steps.calls, 2);
  // Step 3: 100 - 40 - 20; step 4: 100 - 40 - 25 - 10 (the mul on the other thread included).
  EXPECT_DOUBLE_EQ(steps.self_cpu_us, 40 + 25);
  EXPECT_DOUBLE_EQ(steps.self_device_us, 2);                   // the orphan kernel
  EXPECT_DOUBLE_EQ(steps.device_total_us, 16 + 21);            // every placed kernel, once
  EXPECT_DOUBLE_EQ(total_kernel_us(p), 37);
  // Nothing counted twice: the self times add up to the two steps' spans exactly.
  EXPECT_DOUBLE_EQ(total_self_cpu_us(p), 200);
  // Step times are device totals here; the step regions' device span runs to the last kernel.
  EXPECT_EQ(step_times_us(p), (std::vector<double>{16, 21}));
  EXPECT_DOUBLE_EQ(p.ops[6].device_start_us, 105);
  EXPECT_DOUBLE_EQ(p.ops[6].device_end_us, 205);
  EXPECT_DOUBLE_EQ(p.ops[1].device_start_us, 45);  // the linear's subtree's kernels
  EXPECT_DOUBLE_EQ(p.ops[1].device_end_us, 55);
}

// legacy_no_steps.json: the legacy profiler's array (Debian's 1.13, no Kineto), no categories, no
// steps, integer µs. my_block [5, 45] comes last in the file but starts first: the parent of
// all; aten::linear and aten::addmm share [10, 30] (the file's order decides: linear is the
// parent); aten::softmax [30, 35] starts where linear ends and is its sibling.
TEST(TorchTrace, LegacyArrayIsOneStepOnTheHost) {
  const Profile p = load_profile_or_torch_trace(fixture("legacy_no_steps.json"));
  EXPECT_EQ(p.label, "PyTorch trace legacy_no_steps.json");
  EXPECT_TRUE(p.host_ops_only);
  EXPECT_EQ(p.device, "cpu");
  EXPECT_EQ(p.dtype, "");
  EXPECT_EQ(p.active_steps, 1);
  ASSERT_EQ(p.notes.size(), 2u);
  EXPECT_NE(p.notes[0].find("the whole trace is one step, step 0"), std::string::npos) << p.notes[0];
  EXPECT_NE(p.notes[1].find("host ops only"), std::string::npos) << p.notes[1];
  ASSERT_EQ(p.ops.size(), 6u);
  const struct {
    const char* name;
    const char* path;
    bool region;
    int parent;
  } want[] = {{"step 0", "", true, -1},
              {"my_block", "", true, 0},
              {"linear", "aten::linear", false, 1},
              {"linear", "aten::addmm", false, 2},
              {"softmax", "aten::softmax", false, 1},
              {"softmax", "aten::_softmax", false, 4}};
  for (size_t i = 0; i < std::size(want); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(p.ops[i].name, want[i].name);
    EXPECT_EQ(p.ops[i].path, want[i].path);
    EXPECT_EQ(p.ops[i].is_region, want[i].region);
    EXPECT_EQ(p.ops[i].parent, want[i].parent);
  }
  EXPECT_DOUBLE_EQ(p.ops[0].cpu_start_us, 0);
  EXPECT_DOUBLE_EQ(p.ops[0].cpu_end_us, 40);
  std::map<std::string, OpStats> rows = rows_of(p);
  EXPECT_DOUBLE_EQ(rows["my_block"].self_cpu_us, 15);
  EXPECT_DOUBLE_EQ(rows["linear (aten::linear)"].self_cpu_us, 0);
  EXPECT_DOUBLE_EQ(rows["linear (aten::addmm)"].self_cpu_us, 20);
  EXPECT_DOUBLE_EQ(rows["softmax (aten::_softmax)"].self_cpu_us, 5);
  EXPECT_DOUBLE_EQ(total_self_cpu_us(p), 40);
  EXPECT_TRUE(p.kernels.empty());
  EXPECT_EQ(step_times_us(p), (std::vector<double>{40}));
}

TEST(TorchTrace, TheTableNamesBlockscopeOpsAndLeavesTheRest) {
  EXPECT_EQ(blockscope_op_name("aten::_softmax"), "softmax");
  EXPECT_EQ(blockscope_op_name("aten::scaled_dot_product_attention"), "attention");
  EXPECT_EQ(blockscope_op_name("aten::bmm"), "batched_matmul");
  EXPECT_EQ(blockscope_op_name("aten::view"), "aten::view");
  EXPECT_EQ(blockscope_op_name("mylib::fused_thing"), "mylib::fused_thing");
  // Each aten op once in the table, each naming an op blockscope records.
  std::map<std::string, int> seen;
  for (const AtenOpName& entry : aten_op_table()) {
    EXPECT_EQ(std::string(entry.aten).rfind("aten::", 0), 0u) << entry.aten;
    EXPECT_EQ(++seen[entry.aten], 1) << entry.aten;
  }
}

// docs/PROFILING.md's table is the code's: every aten op of it is written there, beside its
// blockscope name on the same line.
TEST(TorchTrace, TheTableIsDocumented) {
  std::ifstream doc(std::string(testing::source_dir()) + "/docs/PROFILING.md");
  ASSERT_TRUE(doc.good());
  std::vector<std::string> table_rows;  // the Markdown table rows naming an aten op
  for (std::string line; std::getline(doc, line);) {
    const size_t bar = line.find_first_not_of(' ');
    if (bar != std::string::npos && line[bar] == '|' && line.find("`aten::") != std::string::npos) table_rows.push_back(line);
  }
  for (const AtenOpName& entry : aten_op_table()) {
    const std::string aten = std::string("`") + entry.aten + "`", name = std::string("`") + entry.blockscope + "`";
    EXPECT_TRUE(std::any_of(table_rows.begin(), table_rows.end(), [&](const std::string& row) {
      return row.find(aten) != std::string::npos && row.find(name) != std::string::npos;
    })) << entry.aten << " -> " << entry.blockscope << " is not a row of docs/PROFILING.md's table";
  }
}

// A PyTorch CPU trace beside a blockscope CPU profile: no kernel rows (its work items would all
// read "removed"), ops and steps compared on CPU time, the summary saying why.
TEST(TorchTrace, DiffAgainstABlockscopeProfileComparesCpuTime) {
  testing::ProfileBuilder builder("base attention=naive");
  builder.open("step 0", "", true);
  builder.open("attention", "naive");
  builder.kernel("gemm_qk", 30);
  builder.spend(5);
  builder.close();
  builder.close();
  builder.set_active_steps(1);
  const Profile blockscope = builder.profile();
  const Profile torch = load_profile_or_torch_trace(fixture("legacy_no_steps.json"));
  const json diff = json::parse(diff_profiles(blockscope, torch, Format::json));
  EXPECT_TRUE(diff["kernels"].empty());
  const std::string summary = diff["summary"];
  EXPECT_NE(summary.find("kernels per step 1 → none recorded ('PyTorch trace legacy_no_steps.json' records host ops only)"),
            std::string::npos) << summary;
  for (const json& row : diff["ops"]) EXPECT_EQ(row["compared"], "cpu") << row.dump();
  const auto step = std::find_if(diff["ops"].begin(), diff["ops"].end(), [](const json& r) { return r["name"] == "step *"; });
  ASSERT_NE(step, diff["ops"].end());
  EXPECT_DOUBLE_EQ((*step)["after"]["cpu_us_per_step"].get<double>(), 40);
  const std::string text = diff_profiles(blockscope, torch, Format::table);
  EXPECT_EQ(text.find("Kernel "), std::string::npos) << text;
  EXPECT_NE(text.find("linear (aten::addmm)"), std::string::npos) << text;
}

TEST(TorchTrace, ReportHoldsTheTraceAsAVariant) {
  const Profile torch = load_profile_or_torch_trace(fixture("kineto_two_steps.json"));
  const Profile legacy = load_profile_or_torch_trace(fixture("legacy_no_steps.json"));
  const std::filesystem::path out = testing::test_scratch_dir() / "r.html";
  write_html_report({torch, legacy}, ReportOptions{}, out.string());
  const std::string html = testing::read_text_file(out);
  EXPECT_NE(html.find("PyTorch 2.5.1 trace kineto_two_steps.json"), std::string::npos);
  EXPECT_NE(html.find("aten::addmm"), std::string::npos);
  EXPECT_NE(html.find("no verdict: a PyTorch CPU trace records host ops only"), std::string::npos);
}

class TorchTraceFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = testing::test_scratch_dir() / name;
    std::ofstream(path) << text;
    return path.string();
  }
};

TEST_F(TorchTraceFile, BadFilesAreInputErrorsNamingTheFileAndTheProblem) {
  const std::string neither = write("neither.json", R"({"name": "tsconfig", "compilerOptions": {}})");
  EXPECT_EQ(input_error([&] { load_profile_or_torch_trace(neither); }),
            neither + ": neither a blockscope profile (no \"format\": \"blockscope-profile\") nor a PyTorch profiler "
                      "trace (no \"traceEvents\" array): diff and report read what `blockscope profile --save` and "
                      "torch.profiler's export_chrome_trace write");

  const std::string whole = testing::read_text_file(fixture("kineto_two_steps.json"));
  const std::string truncated = write("cut.json", whole.substr(0, whole.size() / 2));
  std::string message = input_error([&] { load_profile_or_torch_trace(truncated); });
  EXPECT_EQ(message.rfind(truncated + ": not valid JSON (it ends mid-document: a truncated file?)", 0), 0u) << message;

  const std::string no_ops = write("no_ops.json", R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
      {"ph": "X", "cat": "python_function", "name": "forward", "ts": 1, "dur": 5, "pid": 1, "tid": 1}]})");
  message = input_error([&] { load_profile_or_torch_trace(no_ops); });
  EXPECT_EQ(message.rfind(no_ops + ": a trace with no PyTorch ops: none of its 2 events is a CPU op", 0), 0u) << message;
  message = input_error([&] { load_profile_or_torch_trace(write("empty.json", R"({"traceEvents": []})")); });
  EXPECT_NE(message.find("none of its 0 events is a CPU op"), std::string::npos) << message;

  const std::string bad_ts = write("bad_ts.json", R"({"traceEvents": [
      {"ph": "M", "name": "process_name", "pid": 1},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "12", "dur": 10, "pid": 1, "tid": 1}]})");
  EXPECT_EQ(input_error([&] { load_profile_or_torch_trace(bad_ts); }),
            bad_ts + ": traceEvents[2].ts: expected a number, got string");

  const std::string outside = write("outside.json", R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 20, "dur": 10, "pid": 1, "tid": 1}]})");
  EXPECT_EQ(input_error([&] { load_profile_or_torch_trace(outside); }),
            outside + ": none of its 1 op lies inside its ProfilerStep# ranges");

  const std::string ours = write("ours.json", R"({"traceEvents": [], "otherData": {"producer": "blockscope"}})");
  message = input_error([&] { load_profile_or_torch_trace(ours); });
  EXPECT_EQ(message.rfind(ours + ": a Chrome trace blockscope wrote (profile --trace)", 0), 0u) << message;
}

// Through the CLI: the documented exit code 2 (bad input) and the file named on stderr.
TEST_F(TorchTraceFile, CliDiffAndReportExitTwoOnBadTraces) {
  const std::string no_ops = write("no_ops.json", R"([{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 1, "pid": 1, "tid": 1}])");
  const std::string cut = write("cut.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "na)");
  for (const std::string& bad : {no_ops, cut}) {
    const testing::ProgramResult diff = testing::run_program(testing::cli_path(), {"diff", bad, fixture("legacy_no_steps.json")});
    EXPECT_EQ(diff.code, 2) << diff.err;
    EXPECT_NE(diff.err.find(bad + ": "), std::string::npos) << diff.err;
    const std::string html = (testing::test_scratch_dir() / "r.html").string();
    const testing::ProgramResult report =
        testing::run_program(testing::cli_path(), {"report", fixture("legacy_no_steps.json"), bad, "-o", html});
    EXPECT_EQ(report.code, 2) << report.err;
    EXPECT_NE(report.err.find(bad + ": "), std::string::npos) << report.err;
    EXPECT_FALSE(std::filesystem::exists(html));
  }
  const testing::ProgramResult good =
      testing::run_program(testing::cli_path(), {"diff", fixture("kineto_two_steps.json"), fixture("legacy_no_steps.json")});
  EXPECT_EQ(good.code, 0) << good.err;
  EXPECT_NE(good.out.find("diff: PyTorch 2.5.1 trace kineto_two_steps.json → PyTorch trace legacy_no_steps.json"),
            std::string::npos) << good.out;
}

}  // namespace
}  // namespace blockscope::profiler
