// `profile --counters`: every kernel launch of one forward with its hardware counters (Nsight
// Compute's metric names; the backend counts them: runtime/backend.h), as one table row each,
// in launch order — the memory-efficiency columns a reader scans first (sector efficiency, bank
// conflicts, occupancy and its limiter, waves), the rest in CSV and JSON.
#pragma once

#include <functional>
#include <vector>

#include "profiler/render.h"
#include "runtime/backend.h"
#include "runtime/context.h"

namespace blockscope::profiler {

// The launches `forward` makes, counted. An InputError saying why when the context's backend
// cannot count (the CPU, a GPU without CUPTI's range profiler).
std::vector<KernelCounterRecord> count_kernels(Context& ctx, const std::function<void()>& forward);

// A metric of `record` by name; `fallback` when it was not counted.
double metric(const KernelCounterRecord& record, const std::string& name, double fallback = 0);

// One row per launch: kernel, launch shape, registers, occupancy (limiter, waves), global loads
// and stores (requests, sectors, sector efficiency), shared memory (wavefronts, bank conflicts),
// ldmatrix conflicts, MMAs; every counted metric in CSV and JSON (column `metrics`).
Rows counter_table_rows(const std::vector<KernelCounterRecord>& records);

}  // namespace blockscope::profiler
