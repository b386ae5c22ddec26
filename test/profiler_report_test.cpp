// The HTML report (profiler/html_report.h) as text: self-contained, every name escaped, one
// roofline point per op with a cost, icicles whose top level adds up to the step, the data
// block equal to the tables' JSON, and the output rules. test/report/report_browser_test.py
// opens real reports in Chromium.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "test/support/test_support.h"
#include "profiler/html_report.h"
#include "profiler/table.h"
#include "runtime/error.h"
#include "test/profiler_synthetic.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;
using testing::random_profile;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The values of attribute `name` on elements whose opening tag contains `marker`.
std::vector<std::string> attribute_of(const std::string& html, const std::string& marker, const std::string& name) {
  std::vector<std::string> values;
  for (size_t at = html.find(marker); at != std::string::npos; at = html.find(marker, at + 1)) {
    const size_t open = html.rfind('<', at), close = html.find('>', at);
    const std::string tag = html.substr(open, close - open);
    const size_t key = tag.find(" " + name + "=\"");
    if (key == std::string::npos) continue;
    const size_t start = key + name.size() + 3;
    values.push_back(tag.substr(start, tag.find('"', start) - start));
  }
  return values;
}

json data_block(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const size_t start = html.find(open) + open.size();
  return json::parse(html.substr(start, html.find("</script>", start) - start));
}

TEST(HtmlReport, SelfContainedWithOnePointPerOpAndIciclesThatAddUp) {
  std::vector<Profile> profiles;
  for (uint64_t seed : {11u, 12u, 13u}) {
    profiles.push_back(random_profile(seed, 4));
    profiles.back().label = "variant " + std::to_string(seed);
  }
  const std::string html = html_report(profiles, {});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Nothing fetched when viewed: no external script, style, image or font.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);

  const json data = data_block(html);
  ASSERT_EQ(data["variants"].size(), 3u);
  for (size_t v = 0; v < profiles.size(); ++v) {
    SCOPED_TRACE(profiles[v].label);
    // One roofline point per op row with a cost and a time (regions have none).
    size_t ops_with_cost = 0;
    for (const json& row : data["variants"][v]["ops"]) {
      const double time = row["device_total_us"] > 0 ? row["device_total_us"].get<double>() : row["cpu_total_us"].get<double>();
      ops_with_cost += !row["is_region"].get<bool>() && (row["flops"] > 0 || row["bytes"] > 0) && time > 0;
    }
    const std::string variant = "data-variant=\"" + std::to_string(v) + "\"";
    size_t points = 0;
    for (const std::string& value : attribute_of(html, "class=\"point", "data-variant")) points += value == std::to_string(v);
    EXPECT_EQ(points, ops_with_cost);
    // The icicle: its top level sums to the step (the mean of the kept steps).
    const size_t svg = html.find("<svg class=\"icicle\" " + variant);
    ASSERT_NE(svg, std::string::npos);
    const std::string icicle = html.substr(svg, html.find("</svg>", svg) - svg);
    const std::vector<std::string> depths = attribute_of(icicle, "class=\"cell\"", "data-depth");
    const std::vector<std::string> totals = attribute_of(icicle, "class=\"cell\"", "data-total-us");
    const std::vector<std::string> x0 = attribute_of(icicle, "class=\"cell\"", "data-x0");
    const std::vector<std::string> x1 = attribute_of(icicle, "class=\"cell\"", "data-x1");
    ASSERT_EQ(depths.size(), totals.size());
    ASSERT_EQ(depths.size(), x0.size());
    ASSERT_EQ(depths.size(), x1.size());
    double step = -1, top = 0, width = 0;
    for (size_t i = 0; i < depths.size(); ++i) {
      if (depths[i] == "0") step = std::stod(totals[i]);
      if (depths[i] == "1") top += std::stod(totals[i]), width += std::stod(x1[i]) - std::stod(x0[i]);
    }
    EXPECT_NEAR(width, 1.0, 0.01) << "the areas drawn: the top-level cells span the step";
    const std::vector<double> steps = data["variants"][v]["step_times_us"];
    double mean = 0;
    for (double t : steps) mean += t / steps.size();
    EXPECT_NEAR(step, mean, 1e-9 * mean);
    EXPECT_NEAR(top, step, 0.01 * step);
    // The tables: one per kind, every row of the JSON.
    EXPECT_EQ(count(html, "<table class=\"sortable ops\" " + variant), 1u);
    EXPECT_EQ(count(html, "<table class=\"sortable kernels\" " + variant), 1u);
    EXPECT_EQ(data["variants"][v]["ops"], rows_json(op_table_rows(profiles[v], [] {
                                            TableOptions all;
                                            all.row_limit = 0;
                                            return all;
                                          }())));
  }
  // Diffs against the first profile, one chart per other variant.
  EXPECT_EQ(count(html, "<svg class=\"diff\""), 2u);
}

TEST(HtmlReport, NamesAreEscapedAndTheDataBlockCannotEndEarly) {
  Profile p = random_profile(5, 2);
  p.label = "<img src=x onerror=alert(1)>";
  p.workload = "a & b";
  p.ops[1].name = "</script><script>alert(2)</script>";
  const std::string html = html_report({p}, {});
  EXPECT_EQ(html.find("<img src=x"), std::string::npos);
  EXPECT_EQ(html.find("<script>alert(2)"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("<title>a &amp; b — blockscope report</title>"), std::string::npos);
  // The data block survives the name: it parses, and holds it verbatim.
  EXPECT_EQ(data_block(html)["variants"][0]["label"], p.label);
  // Exactly the report's own two scripts.
  EXPECT_EQ(count(html, "<script"), 2u);
}

TEST(HtmlReport, SimulatedProfilesHaveNoRoofsAndSayWhy) {
  Profile p = random_profile(7, 3);
  p.simulated = true;
  p.peaks = Peaks{};
  const std::string html = html_report({p}, {});
  EXPECT_NE(html.find("class=\"no-roofs\""), std::string::npos);
  EXPECT_EQ(html.find("class=\"roof\""), std::string::npos);
  EXPECT_NE(html.find("SIMULATED GPU"), std::string::npos);
  EXPECT_NE(html.find("no verdict on the simulated GPU"), std::string::npos);
  const std::string with_peaks = html_report({random_profile(7, 3)}, {});
  EXPECT_EQ(count(with_peaks, "<polyline class=\"roof"), 2u) << "the roof and the latency line";
}

// The kind of error `call` throws (runtime when it throws none).
template <typename Call>
ErrorKind error_kind(Call call) {
  try {
    call();
  } catch (const Error& error) {
    return error.kind();
  }
  return ErrorKind::runtime;
}

TEST(HtmlReport, WrittenLikeEveryOutput) {
  EXPECT_EQ(error_kind([] { html_report({}, {}); }), ErrorKind::invalid_input);
  const std::filesystem::path dir = testing::scratch_root() / "html_report";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.html").string();
  write_html_report({random_profile(3, 2)}, {}, path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), html_report({random_profile(3, 2)}, {}));
  // A missing directory is refused before anything is written.
  EXPECT_EQ(error_kind([&] { write_html_report({random_profile(3, 2)}, {}, (dir / "no" / "r.html").string()); }),
            ErrorKind::invalid_input);
  EXPECT_FALSE(std::filesystem::exists(dir / "no"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace blockscope::profiler
