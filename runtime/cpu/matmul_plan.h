// The GEMM planner's machinery, apart from what it plans (the candidates: onednn_matmul.cpp):
// timing candidates into scratch and cutting slow ones off, and the plan cache on disk. Internal
// to runtime/cpu; the public face is cpu::MatmulPlan and cpu::cached_matmul_plans (gemm.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/cpu/gemm.h"

namespace blockscope::cpu::plan {

struct Candidate {
  std::string name;           // "onednn.packed", "openblas.sgemm"
  std::function<void()> run;  // one whole run, into scratch
  // A cheaper run (an sgemm form on an eighth of the rows) and how many of it make a whole one:
  // run twice, the second timed and scaled, it cuts a slow candidate off before it runs whole.
  // Null: none.
  std::function<void()> probe;
  double probe_scale = 1;
};

// Every candidate timed, in order: after a warm-up, best of 3 runs or of those that fit in
// 100 ms; one over 4x the best so far is cut off (judged first by its probe, where it has one;
// a slow warm-up -- a first call's setup -- confirmed by a second run). The fastest is the
// choice; reason "timed". Tests' penalties (set_penalty_us) are added to the timings.
MatmulPlan time_candidates(const std::vector<Candidate>& candidates);

// The plan cached on disk for this machine (cpu::machine_key) and `shape`, when it holds together
// and names exactly `candidates`: reason "cached", cache_path set. False otherwise (none, damaged,
// or made with other candidates: the caller times anew).
bool read_cached(const std::string& shape, const std::vector<std::string>& candidates, MatmulPlan* plan);

// Adds a timed plan to the cache, with the kernel its choice runs; sets plan->cache_path when
// the file holds it (BLOCKSCOPE_PLAN_CACHE=off, or a file that is not a plan cache: not written).
void write_cached(const std::string& shape, const std::string& kernel, MatmulPlan* plan);

// Tests: microseconds added to each timing of `candidate`.
void set_penalty_us(const std::string& candidate, double microseconds);

}  // namespace blockscope::cpu::plan
