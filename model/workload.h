// A runnable workload: from a WorkloadConfig and a Context, the inputs and weights (seeded or
// from safetensors), a forward() that only launches work, the output, and the tensors a
// --dump writes. Before allocating anything it estimates the memory the workload needs and
// refuses (an input error) when the device cannot hold it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/block.h"
#include "model/config.h"
#include "runtime/context.h"
#include "model/weights.h"

namespace blockscope {

struct MemoryEstimate {
  size_t weights = 0;      // parameters (plus the packed gate|up copy for fused MLPs)
  size_t activations = 0;  // inputs, outputs and intermediate buffers
  size_t scores = 0;       // the [B, H, S, S] attention scores of materialising paths (worst variant)
  size_t total() const { return weights + activations + scores; }
};

// Bytes a workload needs when run with each of `paths` (the largest counts).
MemoryEstimate estimate_memory(const WorkloadConfig& config, const std::vector<PathConfig>& paths);
// "1.50 GiB".
std::string format_bytes(double bytes);

class Workload {
 public:
  // `paths` lists every path mix that will run (base and compare variants): the memory
  // estimate covers the worst, and fused MLP weights are packed once if any needs them.
  Workload(Context& ctx, const WorkloadConfig& config, const std::vector<PathConfig>& paths);

  const WorkloadConfig& config() const { return config_; }
  const MemoryEstimate& memory() const { return memory_; }

  // Selects the paths used by forward() (must be one of those given to the constructor
  // when it needs packed weights).
  void set_paths(const PathConfig& paths);
  const PathConfig& paths() const { return paths_; }

  // One forward: launches work on the context's stream, no host synchronisation.
  void forward();
  const Tensor& output() const { return output_; }

  // Inputs under their names ("input", or "a"/"b"/"c", "q"/"k"/"v"), weights under their
  // Hugging Face names, in a stable order. output() is not included.
  const std::vector<std::pair<std::string, Tensor>>& inputs_and_weights() const { return named_; }
  // inputs_and_weights() plus "output": what --dump writes.
  std::vector<std::pair<std::string, Tensor>> dump_tensors() const;
  // safetensors __metadata__: {"blockscope": JSON of the workload's dims and knobs}.
  std::map<std::string, std::string> dump_metadata() const;

  // FLOPs of one forward (for the run summary).
  double flops_per_forward() const;

 private:
  Context& ctx_;
  WorkloadConfig config_;
  MemoryEstimate memory_;
  PathConfig paths_;
  std::vector<std::pair<std::string, Tensor>> named_;
  WeightSet weights_;
  std::unique_ptr<BlockStack> stack_;
  ops::MlpWeights mlp_;  // mlp workload
  Tensor input_, output_;
  Tensor a_, b_, c_;     // matmul_add / linear: a (or x), b (weight), c (bias)
  Tensor q_, k_, v_;     // attention
};

}  // namespace blockscope
