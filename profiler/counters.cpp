#include "profiler/counters.h"

#include <fmt/format.h>

#include "runtime/error.h"

namespace blockscope::profiler {

std::vector<KernelCounterRecord> count_kernels(Context& ctx, const std::function<void()>& forward) {
  Backend& backend = ctx.backend();
  const std::string why = backend.counters_unavailable();
  if (!why.empty()) throw InputError("kernel counters on " + ctx.device().str() + ": " + why);
  backend.begin_counting();
  try {
    forward();
  } catch (...) {
    backend.end_counting();  // counting off again before the error goes on
    throw;
  }
  return backend.end_counting();
}

double metric(const KernelCounterRecord& record, const std::string& name, double fallback) {
  for (const auto& [key, value] : record.metrics) {
    if (key == name) return value;
  }
  return fallback;
}

Rows counter_table_rows(const std::vector<KernelCounterRecord>& records) {
  using nlohmann::json;
  // Each column: its key, title, how the text table prints it, and where its value comes from.
  struct Field {
    const char* key;
    const char* title;
    const char* metric;      // the metric it shows; nullptr: computed below
    const char* format;      // fmt format of the text cell
  };
  static const Field kFields[] = {
      {"registers", "Regs", "launch__registers_per_thread", "{:g}"},
      {"occupancy_pct", "Occ %", "sm__maximum_warps_per_active_cycle_pct", "{:.1f}"},
      {"waves", "Waves", "launch__waves_per_multiprocessor", "{:.2f}"},
      {"ld_requests", "Ld req", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "{:g}"},
      {"ld_sectors", "Ld sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "{:g}"},
      {"ld_efficiency_pct", "Ld eff %", "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", "{:.1f}"},
      {"st_sectors", "St sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "{:g}"},
      {"st_efficiency_pct", "St eff %", "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct", "{:.1f}"},
      {"ldgsts_sectors", "cp.async sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum", "{:g}"},
      {"shared_wavefronts", "Shared wavefronts", nullptr, "{:g}"},
      {"bank_conflicts", "Bank conflicts", nullptr, "{:g}"},
      {"mmas", "MMAs", "smsp__inst_executed_pipe_tensor_op_hmma.sum", "{:g}"},
  };
  Rows table;
  table.columns = {{"launch", "#"}, {"name", "Kernel", true}, {"grid", "Grid", true}, {"block", "Block", true}};
  for (const Field& f : kFields) {
    const size_t index = table.columns.size();
    const std::string format = f.format;
    table.columns.emplace_back(f.key, f.title, false, "", [index, format](const Row& r) {
      return r[index].is_null() ? std::string() : fmt::format(fmt::runtime(format), r[index].get<double>());
    });
  }
  table.columns.emplace_back("limiter", "Limiter", true);
  table.columns.emplace_back("metrics", "Metrics", false, "", nullptr, false);
  table.drop_order = {"ldgsts_sectors", "st_efficiency_pct", "st_sectors", "ld_requests", "waves", "registers", "block"};

  for (size_t i = 0; i < records.size(); ++i) {
    const KernelCounterRecord& r = records[i];
    Row row{json(i + 1), json(r.name),
            json(fmt::format("[{}, {}, {}]", r.grid[0], r.grid[1], r.grid[2])),
            json(fmt::format("[{}, {}, {}]", r.block[0], r.block[1], r.block[2]))};
    const auto sum = [&r](const char* a, const char* b, const char* c, const char* d) {
      return metric(r, a) + metric(r, b) + metric(r, c) + metric(r, d);
    };
    for (const Field& f : kFields) {
      if (f.metric != nullptr) {
        const double missing = -1;
        const double v = metric(r, f.metric, missing);
        row.push_back(v == missing ? json(nullptr) : json(v));
      } else if (std::string(f.key) == "shared_wavefronts") {
        row.push_back(sum("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum", "sim__ldgsts_shared_wavefronts"));
      } else {
        row.push_back(sum("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
                          "sim__ldgsts_shared_bank_conflicts"));
      }
    }
    row.push_back(json(r.occupancy_limiter));
    json all = json::object();
    for (const auto& [key, value] : r.metrics) all[key] = value;
    row.push_back(all);
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace blockscope::profiler
