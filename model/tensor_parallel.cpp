#include "model/tensor_parallel.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/nvtx.h"
#include "runtime/error.h"

namespace blockscope {

namespace {

// How one weight is shared out, by the end of its name (after the layer prefix).
enum class Share {
  replicated,
  split,          // equal parts along `dim`; the rank takes its part
  split_thirds,   // GPT-2's c_attn: q | k | v along `dim`, each of them split
  first_rank,     // a row-parallel bias: rank 0 keeps it, the others hold zeros
};

struct ShareRule {
  const char* suffix;
  Share share;
  int dim;
};

// GPT-2's Conv1D weights are [in, out] (columns are outputs); Llama's Linear weights [out, in].
constexpr ShareRule kRules[] = {
    {"attn.c_attn.weight", Share::split_thirds, 1},  {"attn.c_attn.bias", Share::split_thirds, 0},
    {"attn.c_proj.weight", Share::split, 0},         {"attn.c_proj.bias", Share::first_rank, 0},
    {"mlp.c_fc.weight", Share::split, 1},            {"mlp.c_fc.bias", Share::split, 0},
    {"mlp.c_proj.weight", Share::split, 0},          {"mlp.c_proj.bias", Share::first_rank, 0},
    {"self_attn.q_proj.weight", Share::split, 0},    {"self_attn.q_proj.bias", Share::split, 0},
    {"self_attn.k_proj.weight", Share::split, 0},    {"self_attn.k_proj.bias", Share::split, 0},
    {"self_attn.v_proj.weight", Share::split, 0},    {"self_attn.v_proj.bias", Share::split, 0},
    {"self_attn.o_proj.weight", Share::split, 1},    {"self_attn.o_proj.bias", Share::first_rank, 0},
    {"mlp.gate_proj.weight", Share::split, 0},       {"mlp.gate_proj.bias", Share::split, 0},
    {"mlp.up_proj.weight", Share::split, 0},         {"mlp.up_proj.bias", Share::split, 0},
    {"mlp.down_proj.weight", Share::split, 1},       {"mlp.down_proj.bias", Share::first_rank, 0},
};

const ShareRule* rule_for(const std::string& name) {
  for (const ShareRule& rule : kRules) {
    const std::string suffix = rule.suffix;
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return &rule;
  }
  return nullptr;  // norms: replicated
}

// The [start, end) index ranges along `dim` that rank `rank` takes of a dimension of `size`.
std::vector<std::pair<int64_t, int64_t>> ranges(const ShareRule& rule, int64_t size, int rank, int ranks) {
  const int64_t groups = rule.share == Share::split_thirds ? 3 : 1;
  BS_CHECK(size % (groups * ranks) == 0, "tensor parallelism: ", rule.suffix, " has ", size,
           " features along its split dimension, not divisible by ", groups * ranks);
  const int64_t group = size / groups, part = group / ranks;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t g = 0; g < groups; ++g) out.emplace_back(g * group + rank * part, g * group + (rank + 1) * part);
  return out;
}

// A 1-D or 2-D tensor's share, built on the host: `host` holds the full values row-major.
std::vector<float> take(const std::vector<float>& host, const Shape& shape, int dim,
                        const std::vector<std::pair<int64_t, int64_t>>& parts, Shape* out_shape) {
  const int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.back();
  std::vector<float> out;
  if (shape.size() == 1 || dim == 1) {  // columns (a 1-D tensor is one row)
    int64_t width = 0;
    for (const auto& [a, b] : parts) width += b - a;
    for (int64_t r = 0; r < rows; ++r)
      for (const auto& [a, b] : parts)
        out.insert(out.end(), host.begin() + r * cols + a, host.begin() + r * cols + b);
    *out_shape = shape.size() == 1 ? Shape{width} : Shape{rows, width};
  } else {  // rows
    int64_t height = 0;
    for (const auto& [a, b] : parts) {
      out.insert(out.end(), host.begin() + a * cols, host.begin() + b * cols);
      height += b - a;
    }
    *out_shape = Shape{height, cols};
  }
  return out;
}

}  // namespace

Communicator& tensor_parallel_group(int ranks) {
  Communicator* world = world_communicator();
  const std::string launch = "mpirun -np " + std::to_string(ranks) + " blockscope ...";
  BS_CHECK_INPUT(world != nullptr, "parallel.tensor = ", ranks, " needs ", ranks,
                 " ranks, one process each: launch it with `", launch, "` (this process was not started by mpirun",
#ifdef BLOCKSCOPE_WITH_MPI
                 ")"
#else
                 ", and this build has no MPI: install libopenmpi-dev and rebuild)"
#endif
  );
  BS_CHECK_INPUT(world->size() == ranks, "parallel.tensor = ", ranks, " but mpirun started ", world->size(),
                 " ranks: launch it with `", launch, "`");
  return *world;
}

void run_on_gpus(int ranks, const std::function<void(Context& ctx, Communicator& comm)>& fn) {
  std::unique_ptr<CommunicatorGroup> group = nccl_group_in_process(ranks);
  std::mutex first_mutex;
  std::exception_ptr first_error;  // the first rank's error to happen (the others' follow from the abort)
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        profiler::set_nvtx_rank(r);  // Nsight: this thread's ranges are rank.r/...
        Context ctx(Device::cuda(r));
        fn(ctx, group->rank(r));
        ctx.synchronize();
      } catch (const std::exception& error) {
        {
          std::lock_guard<std::mutex> lock(first_mutex);
          if (!first_error) first_error = std::current_exception();
        }
        group->abort(detail::concat("rank ", r, " failed: ", error.what()));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

Device rank_device(const Device& requested, const Communicator& group) {
  if (!requested.is_cuda() || group.size() == 1) return requested;
  const int gpus = cuda_device_count();
  BS_CHECK_INPUT(gpus > 0, "device ", requested.str(), " requested, but no CUDA GPU is present");
  return Device::cuda(group.node_rank() % gpus);
}

std::unique_ptr<Communicator> gpu_group_over(Communicator& world, const Device& device) {
#ifdef BLOCKSCOPE_WITH_NCCL
  if (device.is_cuda() && world.size() > 1) return nccl_over_mpi(world, device.index);
#endif
  (void)world, (void)device;
  return nullptr;
}

ModelConfig shard_model(const ModelConfig& model, int ranks) {
  BS_CHECK(ranks >= 1 && model.n_heads % ranks == 0 && model.n_kv_heads % ranks == 0 && model.d_ff % ranks == 0,
           "shard_model: ", ranks, " ranks do not divide the heads (", model.n_heads, "), kv heads (",
           model.n_kv_heads, ") and d_ff (", model.d_ff, ")");
  ModelConfig shard = model;
  shard.n_heads = model.n_heads / ranks;
  shard.n_kv_heads = model.n_kv_heads / ranks;
  shard.d_ff = model.d_ff / ranks;
  return shard;
}

void shard_weights(Context& ctx, const ModelConfig& model, int64_t layers, const WeightSet& full, int rank, int ranks,
                   WeightSet& out) {
  BS_CHECK(rank >= 0 && rank < ranks, "shard_weights: rank ", rank, " of ", ranks);
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (const WeightSpec& spec : block_weight_specs(model, layer)) {
      if (!full.contains(spec.name)) continue;  // an optional tensor the set does not have
      const Tensor& whole = full.at(spec.name);
      const ShareRule* rule = rule_for(spec.name);
      if (rule == nullptr || ranks == 1) {
        out.add(spec.name, whole.device() == ctx.device() ? whole : ctx.copy_from(whole));  // replicated
        continue;
      }
      const std::vector<float> host = to_floats(whole);
      std::vector<float> values;
      Shape shape;
      if (rule->share == Share::first_rank) {
        shape = whole.shape();
        values = rank == 0 ? host : std::vector<float>(host.size(), 0.0f);
      } else {
        values = take(host, whole.shape(), rule->dim, ranges(*rule, whole.size(rule->dim), rank, ranks), &shape);
      }
      Tensor part = ctx.empty(shape, whole.dtype());
      from_floats(part, values);  // exact: the values are already in the dtype
      out.add(spec.name, part);
    }
  }
}

}  // namespace blockscope
