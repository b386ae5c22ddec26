// tp_bench: what tensor parallelism costs, on the ranks of one launch.
//
//   all_reduce/sum/<dtype>/elements=E,ranks=R/cpu   the collective alone, at the sizes of the
//       all-reduces of real blocks (one [B·S, d] activation each: tiny-gpt2; gpt2-small at B = 1
//       and B = 8, S = 1024; llama-3-8b at B = 1, S = 1024); counters: bus_GBps and alg_GBps as
//       nccl-tests define them (algbw = bytes / time, busbw = algbw · 2(R − 1)/R)
//   block/tp=R/<dtype>/<config>/cpu                  one forward of configs/blocks/<config>.yaml
//       split over the R ranks (Megatron's layout, two all-reduces per layer)
//
// The ranks: under mpirun the processes of MPI's world (CPU ranks), otherwise one (R = 1, the
// unsplit block). So the block at TP = 1/2/4 is three runs:
//   OMP_NUM_THREADS=1 build/default/bin/tp_bench
//   OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe build/default/bin/tp_bench
//   OMP_NUM_THREADS=1 mpirun -np 4 --oversubscribe build/default/bin/tp_bench
// Every rank runs every benchmark the same fixed number of iterations (Google Benchmark's own
// iteration search would differ between ranks and pair one rank's all-reduce with another's
// forward), after a barrier; rank 0 prints and writes --benchmark_out, the others are silent.
// CPU over MPI on one machine is a correctness and profiling vehicle: read bus_GBps beside the
// memcpy bandwidth in `blockscope info`, not as a link's speed.
//
// Where a GPU is usable (and not --cpu_only) every row also runs on the rank's GPU (`.../cuda:0`,
// named after rank 0's): under mpirun each rank on its own GPU (rank_device) with NCCL between
// them, started over MPI (nccl_over_mpi; staged through host memory in a build without NCCL).
// Each iteration ends with the rank's stream synchronised, so rank 0's time includes waiting for
// the slowest rank, as a training step would — the analogue of nccl-tests' all_reduce_perf -c 0.
//   mpirun -np 8 build/device/bin/tp_bench --benchmark_filter=cuda     one node of 8 GPUs
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/support/bench_support.h"
#include "model/tensor_parallel.h"
#include "model/workload.h"
#include "ops/all_reduce/all_reduce.h"
#include "runtime/communicator.h"

namespace blockscope::bench {
namespace {

Communicator& group() {
  Communicator* world = world_communicator();
  return world != nullptr ? *world : single_rank_communicator();
}

// The ranks' GPU group (gpu_group_over: NCCL under mpirun where it is built), made by the first
// GPU row (every rank runs the rows in one order) and ended in main before MPI is.
std::unique_ptr<Communicator> g_gpus;

// The group a row on `device` reduces over.
Communicator& group_for(const Device& device) {
  if (!device.is_cuda()) return group();
  if (g_gpus == nullptr) g_gpus = gpu_group_over(group(), device);
  return g_gpus != nullptr ? *g_gpus : group();
}

// cpu, and this rank's GPU where one is usable: (name suffix, device).
std::vector<std::pair<std::string, Device>> rank_devices() {
  std::vector<std::pair<std::string, Device>> out;
  for (const Device& device : devices()) out.emplace_back(device.str(), rank_device(device, group()));
  return out;
}

// Fixed iteration counts (see the header): enough for a stable median on the sizes below.
int64_t iterations_for(double bytes) {
  if (options().smoke) return 3;
  return bytes >= (16 << 20) ? 10 : bytes >= (1 << 20) ? 50 : 500;
}

void register_all_reduces() {
  struct Size {
    const char* what;
    int64_t elements;  // B · S · d of the block's all-reduce
  };
  std::vector<Size> sizes = {{"tiny-gpt2", 2 * 17 * 64}};
  if (!options().smoke) {
    sizes.push_back({"gpt2-small B=1,S=1024", 1 * 1024 * 768});
    sizes.push_back({"llama-3-8b B=1,S=1024", 1 * 1024 * 4096});
    sizes.push_back({"gpt2-small B=8,S=1024", 8 * 1024 * 768});
  }
  const int ranks = group().size();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const Size& size : sizes) {
      const std::string key = workload_key("all_reduce", "sum", dtype, {{"elements", size.elements}, {"ranks", ranks}});
      const double bytes = static_cast<double>(size.elements) * static_cast<double>(dtype_size(dtype));
      for (const auto& [suffix, device] : rank_devices()) {
        benchmark::RegisterBenchmark((key + "/" + suffix).c_str(), [=, device = device](benchmark::State& state) {
          Context& ctx = context_for(device);
          Tensor t = random_tensor(ctx, {size.elements}, dtype, 1);
          Communicator& comm = group_for(device);
          for (int i = 0; i < 2; ++i) ops::all_reduce(ctx, t, comm);  // warm-up
          ctx.synchronize();
          comm.barrier();
          for (auto _ : state) {
            ops::all_reduce(ctx, t, comm);
            ctx.synchronize();
          }
          state.counters["alg_GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
          state.counters["bus_GBps"] = benchmark::Counter(ops::all_reduce_bus_bytes(bytes, ranks) * 1e-9,
                                                          benchmark::Counter::kIsIterationInvariantRate);
          state.SetLabel(key + " (" + size.what + ", " + comm.engine() + ")");
        })->Iterations(iterations_for(bytes))->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

void register_blocks() {
  const int ranks = group().size();
  std::vector<std::string> configs = {"tiny-gpt2", "tiny-llama"};
  if (!options().smoke) configs.push_back("gpt2-small");
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const std::string& name : configs) {
      const std::string key = "block/tp=" + std::to_string(ranks) + "/" + dtype_name(dtype) + "/" + name;
      for (const auto& [suffix, device] : rank_devices()) {
        std::vector<std::string> sets = {"parallel.tensor=" + std::to_string(ranks),
                                         std::string("dtype=") + dtype_name(dtype), "device=" + device.str()};
        if (name == "gpt2-small") sets.push_back("input.batch=1");  // one sequence of 1024: seconds, not minutes
        const WorkloadConfig config =
            load_config_file(std::string(BLOCKSCOPE_SOURCE_DIR) + "/configs/blocks/" + name + ".yaml", sets);
        const int64_t iterations = options().smoke ? 2 : name == "gpt2-small" ? 5 : 50;
        benchmark::RegisterBenchmark((key + "/" + suffix).c_str(), [=, device = device](benchmark::State& state) {
          Context& ctx = context_for(device);
          Communicator& comm = group_for(device);
          Workload workload(ctx, config, {config.paths}, ranks > 1 ? &comm : nullptr);
          workload.forward();  // warm-up: packed weights, GEMM plans
          ctx.synchronize();
          comm.barrier();
          for (auto _ : state) {
            workload.forward();
            ctx.synchronize();
          }
          state.counters["FLOPs"] =
              benchmark::Counter(workload.flops_per_forward(), benchmark::Counter::kIsIterationInvariantRate);
          state.SetLabel(key + " (" + comm.engine() + ")");
        })->Iterations(iterations)->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace
}  // namespace blockscope::bench

int main(int argc, char** argv) {
  namespace bs = blockscope;
  bs::Communicator* world = bs::init_mpi(&argc, &argv);
  if (world != nullptr && world->rank() != 0) {  // rank 0 reports: the others print and write nothing
    std::freopen("/dev/null", "w", stdout);
    int kept = 1;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]).rfind("--benchmark_out", 0) != 0) argv[kept++] = argv[i];
    argc = kept;
    argv[argc] = nullptr;
  }
  int code = 0;
  try {
    code = bs::bench::run_main(argc, argv, [] {
      bs::bench::register_all_reduces();
      bs::bench::register_blocks();
    });
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tp_bench%s: %s\n",
                 world != nullptr ? (" (rank " + std::to_string(world->rank()) + ")").c_str() : "", error.what());
    if (world != nullptr && world->size() > 1) world->abort_all(3, error.what());  // no rank left waiting in a collective
    code = 3;
  }
  bs::bench::g_gpus.reset();  // before MPI ends
  bs::finalize_mpi();
  return code;
}
