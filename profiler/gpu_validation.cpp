#include "profiler/gpu_validation.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "profiler/gpu_model.h"
#include "runtime/error.h"

namespace blockscope::profiler::predict {

namespace {

// One CSV line into fields: commas separate, double quotes enclose a field with commas ("" is a quote).
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

// "m=256 n=512 k=256" -> {m: 256, ...}; values stay text.
std::map<std::string, std::string> parse_params(const PublishedRow& row) {
  std::map<std::string, std::string> params;
  std::istringstream items(row.params);
  std::string item;
  while (items >> item) {
    const size_t eq = item.find('=');
    BS_CHECK_INPUT(eq != std::string::npos && eq > 0, "published row at line ", row.line, ": '", item, "' is not NAME=VALUE");
    params[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return params;
}

struct Params {
  const PublishedRow& row;
  std::map<std::string, std::string> values;
  std::string text(const std::string& name, const std::string& fallback = "") const {
    const auto it = values.find(name);
    if (it != values.end()) return it->second;
    BS_CHECK_INPUT(!fallback.empty(), "published row at line ", row.line, " (", row.kind, "): no '", name, "'");
    return fallback;
  }
  double number(const std::string& name, double fallback = std::nan("")) const {
    const auto it = values.find(name);
    if (it == values.end()) {
      BS_CHECK_INPUT(!std::isnan(fallback), "published row at line ", row.line, " (", row.kind, "): no '", name, "'");
      return fallback;
    }
    try {
      return std::stod(it->second);
    } catch (const std::exception&) {
      throw InputError(fmt::format("published row at line {}: '{}={}' is not a number", row.line, name, it->second));
    }
  }
  int64_t integer(const std::string& name, double fallback = std::nan("")) const {
    return static_cast<int64_t>(number(name, fallback));
  }
};

ComputeUnit gemm_unit(const Params& p) {
  const std::string dtype = p.text("dtype");
  if (dtype == "bf16" || dtype == "f16") return ComputeUnit::tensor_bf16;
  if (dtype == "fp8") return ComputeUnit::tensor_fp8;
  if (dtype == "tf32") return ComputeUnit::tensor_tf32;
  if (dtype == "f32") return ComputeUnit::cuda_fp32;
  throw InputError(fmt::format("published row at line {}: unknown dtype '{}'", p.row.line, dtype));
}

CollectiveAlgorithm algorithm_of(const Params& p) {
  const std::string name = p.text("algorithm", "auto");
  if (name == "ring") return CollectiveAlgorithm::ring;
  if (name == "nvls") return CollectiveAlgorithm::nvls;
  BS_CHECK_INPUT(name == "auto", "published row at line ", p.row.line, ": unknown algorithm '", name, "'");
  return CollectiveAlgorithm::automatic;
}

}  // namespace

std::vector<PublishedRow> load_published(const std::string& path) {
  std::ifstream in(path);
  BS_CHECK_INPUT(in.good(), "cannot read published measurements from '", path, "'");
  const std::vector<std::string> header{"gpu", "kind", "params", "value", "unit", "source"};
  std::vector<PublishedRow> rows;
  std::string line;
  bool seen_header = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_csv(line);
    if (!seen_header) {
      BS_CHECK_INPUT(fields == header, path, ":", number, ": the header must be gpu,kind,params,value,unit,source");
      seen_header = true;
      continue;
    }
    BS_CHECK_INPUT(fields.size() == header.size(), path, ":", number, ": ", fields.size(), " fields, not 6");
    PublishedRow row;
    row.line = number;
    row.gpu = fields[0];
    row.kind = fields[1];
    row.params = fields[2];
    row.unit = fields[4];
    row.source = fields[5];
    try {
      row.value = std::stod(fields[3]);
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}:{}: value '{}' is not a number", path, number, fields[3]));
    }
    BS_CHECK_INPUT(row.value > 0, path, ":", number, ": value must be positive");
    BS_CHECK_INPUT(!row.source.empty(), path, ":", number, ": every row names its source");
    rows.push_back(row);
  }
  BS_CHECK_INPUT(seen_header, path, ": no header line");
  return rows;
}

double predict_row(const GpuSpec& spec, const PublishedRow& row) {
  const Params p{row, parse_params(row)};
  if (row.kind == "gemm") {
    const int64_t m = p.integer("m"), n = p.integer("n"), k = p.integer("k"), batch = p.integer("batch", 1);
    const GemmPrediction g = predict_gemm(spec, m, n, k, batch, gemm_unit(p));
    return 2.0 * batch * m * n * static_cast<double>(k) / g.predicted_us * 1e-6;  // TFLOP/s
  }
  if (row.kind == "memory_stream") {
    KernelWork work;
    work.dram_bytes = p.number("bytes");
    work.working_set_bytes = p.number("working_set", work.dram_bytes);
    return work.dram_bytes / predict_kernel(spec, work).predicted_us * 1e-6;  // TB/s
  }
  if (row.kind == "attention_fa2") {
    AttentionShape s;
    s.batch = p.integer("batch");
    s.heads = p.integer("heads");
    s.seq_q = s.seq_k = p.integer("seq");
    s.head_dim = p.integer("head_dim");
    s.causal = p.integer("causal", 0) != 0;
    s.tile_q = static_cast<int>(p.integer("tile_q", 128));
    s.tile_k = static_cast<int>(p.integer("tile_k", 64));
    return attention_flops(s) / predict_attention_flash(spec, s).predicted_us * 1e-6;
  }
  const std::map<std::string, Collective> collectives{
      {"all_reduce", Collective::all_reduce}, {"all_gather", Collective::all_gather}, {"reduce_scatter", Collective::reduce_scatter}};
  const auto op = collectives.find(row.kind);
  BS_CHECK_INPUT(op != collectives.end(), "published row at line ", row.line, ": unknown kind '", row.kind,
                 "' (gemm, memory_stream, attention_fa2, all_reduce, all_gather, reduce_scatter)");
  return predict_collective(spec, op->second, p.number("bytes"), static_cast<int>(p.integer("ranks")), algorithm_of(p))
      .busbw_gbps;
}

ValidationSummary validate(const std::vector<PublishedRow>& rows, const SpecLookup& lookup) {
  ValidationSummary summary;
  std::vector<double> errors;
  for (const PublishedRow& row : rows) {
    ValidationRow v{row, predict_row(lookup(row.gpu), row), 0};
    v.ratio = v.predicted / row.value;
    errors.push_back(std::abs(v.ratio - 1));
    const double off = std::max(v.ratio, 1 / v.ratio);
    if (off > summary.worst_ratio || summary.worst_row < 0) {
      summary.worst_ratio = off;
      summary.worst_row = static_cast<int>(summary.rows.size());
    }
    summary.rows.push_back(v);
  }
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    summary.median_abs_error = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  }
  return summary;
}

std::string validation_markdown(const ValidationSummary& summary) {
  std::string out =
      "| GPU | kind | parameters | published | predicted | error | source (CSV line) |\n|---|---|---|---:|---:|---:|---|\n";
  for (const ValidationRow& v : summary.rows) {
    // The source's first word ("openxla/xla", "stas00/ml-engineering"): the CSV has the rest.
    std::string source = v.row.source.substr(0, v.row.source.find_first_of(" ,:"));
    if (source.size() > 40) source = source.substr(0, 37) + "...";
    out += fmt::format("| {} | {} | {} | {:.4g} {} | {:.4g} | {:+.1f}% | {} ({}) |\n", v.row.gpu, v.row.kind, v.row.params,
                       v.row.value, v.row.unit, v.predicted, (v.ratio - 1) * 100, source, v.row.line);
  }
  if (summary.worst_row >= 0)
    out += fmt::format("\nMedian |error| {:.1f}% over {} rows; worst ratio {:.2f}× (line {}: {} {}).\n",
                       summary.median_abs_error * 100, summary.rows.size(), summary.worst_ratio,
                       summary.rows[summary.worst_row].row.line, summary.rows[summary.worst_row].row.kind,
                       summary.rows[summary.worst_row].row.params);
  return out;
}

}  // namespace blockscope::profiler::predict
