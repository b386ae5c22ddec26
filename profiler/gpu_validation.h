// The performance model (profiler/gpu_model.h) against published measurements:
// bench/validation/published_gpu.csv, one cited row per measurement. Each row is predicted in
// its own unit (TFLOP/s, TB/s, nccl-tests' GB/s bus bandwidth), and the summary gives the
// median |error| and the worst ratio; test/gpu_model_test.cpp holds the model to them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "profiler/gpu_specs.h"

namespace blockscope::profiler::predict {

struct PublishedRow {
  int line = 0;  // in the CSV, for messages
  std::string gpu, kind, params, unit, source;
  double value = 0;
};

// The rows of a published_gpu.csv: '#' lines are comments, the first other line the header
// (gpu,kind,params,value,unit,source), fields quoted where they hold commas. An InputError
// naming the file and line for a malformed row.
std::vector<PublishedRow> load_published(const std::string& path);

// The model's figure for one row, in the row's unit. An InputError for an unknown kind or a
// missing parameter.
double predict_row(const GpuSpec& spec, const PublishedRow& row);

struct ValidationRow {
  PublishedRow row;
  double predicted = 0;
  double ratio = 0;  // predicted / published
};

struct ValidationSummary {
  std::vector<ValidationRow> rows;
  double median_abs_error = 0;  // median of |ratio - 1|
  double worst_ratio = 1;       // the largest max(ratio, 1/ratio)
  int worst_row = -1;           // index into rows
  bool within(double median_limit, double worst_limit) const {
    return median_abs_error <= median_limit && worst_ratio <= worst_limit;
  }
};

// Every row predicted on the spec `lookup` returns for its GPU (gpu_spec by default; a test
// passes a changed copy to check that a wrong constant fails the validation).
using SpecLookup = std::function<const GpuSpec&(const std::string&)>;
ValidationSummary validate(const std::vector<PublishedRow>& rows, const SpecLookup& lookup = gpu_spec);

// The summary as a Markdown table (docs/PREDICTION.md's validation table).
std::string validation_markdown(const ValidationSummary& summary);

}  // namespace blockscope::profiler::predict
