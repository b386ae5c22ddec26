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

// The regions a decode workload records (model/workload_kinds.cpp): the prefill, and the
// decode phase holding one step region per new token.
inline constexpr char kPrefillRegion[] = "prefill";
inline constexpr char kDecodeRegion[] = "decode";
inline constexpr char kDecodeStepRegion[] = "decode_step";

struct MemoryEstimate {
  size_t weights = 0;      // parameters (plus the packed gate|up copy for fused MLPs)
  size_t activations = 0;  // inputs, outputs and intermediate buffers
  size_t scores = 0;       // the [B, H, S, S] attention scores of materialising paths (worst variant)
  // CPU with oneDNN: at most one copy of each GEMM weight in oneDNN's blocked layout (each
  // dimension padded to 64), for the shapes whose plan packs them (cpu::MatmulPlan).
  size_t packed_weights = 0;
  size_t kv_cache = 0;  // decode: every layer's keys and values (ops/kv_cache)
  size_t total() const { return weights + activations + scores + packed_weights + kv_cache; }
};

// decode: the shape of each layer's KV cache (the runner allocates it, the profile reports it).
ops::KvCacheShape decode_cache_shape(const WorkloadConfig& config);

// Bytes a workload needs when run with each of `paths` (the largest counts).
MemoryEstimate estimate_memory(const WorkloadConfig& config, const std::vector<PathConfig>& paths);

// One kind of workload (config.kind): what it allocates and how it runs. Built from the config
// alone, so its memory estimate and FLOPs are known before anything is allocated; allocate()
// then makes its inputs, weights and output. model/workload_kinds.cpp has one class per kind.
class WorkloadKindRunner {
 public:
  explicit WorkloadKindRunner(const WorkloadConfig& config) : config_(config) {}
  virtual ~WorkloadKindRunner() = default;

  // Bytes needed when run with each of `paths` (the largest counts).
  virtual MemoryEstimate memory(const std::vector<PathConfig>& paths) const = 0;
  // FLOPs of one forward.
  virtual double flops() const = 0;
  // Bytes of every GEMM weight padded to 64 in each dimension: what packed copies may take.
  virtual size_t packable_weight_bytes(const std::vector<PathConfig>& paths) const { return 0; }
  // Inputs and weights (seeded, or from the config's files) and the output. `paths`: every
  // path mix that will run, for what must be prepared once (packed gate|up weights).
  virtual void allocate(Context& ctx, const std::vector<PathConfig>& paths) = 0;
  // parallel.tensor > 1: the group this rank belongs to (set before allocate; null: the MPI
  // world, tensor_parallel_group in model/tensor_parallel.h).
  void set_tensor_parallel_group(Communicator* group) { group_ = group; }
  // Before forward() with `paths` (one of those given to allocate, or a new one).
  virtual void prepare(Context& ctx, const PathConfig& paths) {}
  virtual void forward(Context& ctx, const PathConfig& paths) = 0;

  const Tensor& output() const { return output_; }
  Tensor& mutable_input() { return input_; }  // input.file replaces it (block, stack, mlp)
  // Inputs under their names ("input", or "a"/"b"/"c", "q"/"k"/"v"), then the weights under
  // their Hugging Face names, in a stable order.
  const std::vector<std::pair<std::string, Tensor>>& named() const { return named_; }
  // Intermediate results after forward(), under their names (see Workload::intermediates).
  virtual std::vector<std::pair<std::string, Tensor>> intermediates() const { return {}; }
  // precision.gemm FP8 with delayed scaling: each cast input's saturation counts (see
  // Workload::fp8_saturation); none otherwise.
  virtual Fp8SaturationCounts fp8_saturation() const { return {}; }

 protected:
  const WorkloadConfig config_;
  Communicator* group_ = nullptr;
  Tensor input_, output_;
  std::vector<std::pair<std::string, Tensor>> named_;
};

// The runner of config.kind (the one place that switches on it).
std::unique_ptr<WorkloadKindRunner> make_workload_runner(const WorkloadConfig& config);

class Workload {
 public:
  // `paths` lists every path mix that will run (base and compare variants): the memory
  // estimate covers the worst, and fused MLP weights are packed once if any needs them.
  // parallel.tensor > 1: `group` is this rank's (ranks as threads: run_on_gpus); null takes the
  // MPI world (ranks as processes).
  Workload(Context& ctx, const WorkloadConfig& config, const std::vector<PathConfig>& paths,
           Communicator* group = nullptr);

  const WorkloadConfig& config() const { return config_; }
  const MemoryEstimate& memory() const { return memory_; }

  // Selects the paths used by forward() (must be one of those given to the constructor
  // when it needs packed weights).
  void set_paths(const PathConfig& paths);
  const PathConfig& paths() const { return paths_; }

  // One forward: launches work on the context's stream, no host synchronisation.
  void forward() { runner_->forward(ctx_, paths_); }
  const Tensor& output() const { return runner_->output(); }

  // Inputs under their names ("input", or "a"/"b"/"c", "q"/"k"/"v"), weights under their
  // Hugging Face names, in a stable order. output() is not included.
  const std::vector<std::pair<std::string, Tensor>>& inputs_and_weights() const { return runner_->named(); }
  // After forward(), the intermediates a sublayer's error is measured on: block and stack
  // give "layer_input" (the last layer's x, [B, S, d]), "residual" (its x + attention,
  // [B·S, d]) and its path ops' inputs and outputs (Block::op_tensors); the other kinds none.
  std::vector<std::pair<std::string, Tensor>> intermediates() const { return runner_->intermediates(); }
  // precision.gemm FP8 with delayed scaling: every cast input's saturation counts (f32 [3]
  // {casts, casts that saturated, the largest amax x scale / largest value}; model/fp8_layer.h),
  // by name ("input"; "mlp.input", "mlp.hidden"; "block.N.attention.input", ...), counted over
  // every forward since reset_fp8_saturation(); empty otherwise.
  Fp8SaturationCounts fp8_saturation() const { return runner_->fp8_saturation(); }
  void reset_fp8_saturation();
  // inputs_and_weights() plus "output": what --dump writes.
  std::vector<std::pair<std::string, Tensor>> dump_tensors() const;
  // safetensors __metadata__: {"blockscope": JSON of the workload's dims and knobs}.
  std::map<std::string, std::string> dump_metadata() const;

  // FLOPs of one forward (for the run summary).
  double flops_per_forward() const { return runner_->flops(); }

 private:
  Context& ctx_;
  WorkloadConfig config_;
  std::unique_ptr<WorkloadKindRunner> runner_;
  MemoryEstimate memory_;
  PathConfig paths_;
};

}  // namespace blockscope
