// Tests of the CUDA graph construction API on the simulated GPU (sim/graph.cpp): graphs built node
// by node, their dependencies, instantiation, launch and update, with the semantics and errors of
// NVIDIA's CUDA Runtime API documentation (Graph Management).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

std::mt19937& rng() {
  static std::mt19937 engine(std::random_device{}());
  return engine;
}

std::vector<int> random_ints(size_t n) {
  std::uniform_int_distribution<int> value(-100000, 100000);
  std::vector<int> out(n);
  for (int& v : out) v = value(rng());
  return out;
}

__global__ void scale_kernel(const int* in, int* out, int n, int factor) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * factor;
}

__global__ void add_kernel(const int* in, int* out, int n, int addend) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + addend;
}

__global__ void combine_kernel(const int* a, const int* b, int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a[i] - b[i];
}

// A kernel node's parameters, as samples write them (the fields gridDim and blockDim are the
// built-ins' names: nvcc-sim's rewriter keeps them member names).
cudaKernelNodeParams kernel_params(void* func, int n, void** args) {
  cudaKernelNodeParams params = {};
  params.func = func;
  params.gridDim = dim3((n + 63) / 64, 1, 1);
  params.blockDim = dim3(64, 1, 1);
  params.sharedMemBytes = 0;
  params.kernelParams = args;
  params.extra = nullptr;
  return params;
}

void record_order(void* data) {
  auto* log = static_cast<std::vector<int>**>(data);
  log[0]->push_back(static_cast<int>(reinterpret_cast<intptr_t>(log[1])));
}

class GraphApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaGetLastError();
  }
  void TearDown() override {
    for (void* p : device_) cudaFree(p);
    for (cudaGraph_t g : graphs_) cudaGraphDestroy(g);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaGetLastError();
  }
  int* device_ints(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(int)), cudaSuccess);
    device_.push_back(p);
    return static_cast<int*>(p);
  }
  cudaGraph_t new_graph() {
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    graphs_.push_back(graph);
    return graph;
  }
  std::vector<void*> device_;
  std::vector<cudaGraph_t> graphs_;
};

// copy in → (scale, add) → combine → copy out → host node; launched twice, the copy-in node
// reading its host source again at the second launch.
TEST_F(GraphApi, ADiamondOfNodesRunsInDependencyOrder) {
  const int n = 300;
  std::vector<int> host_in = random_ints(n), host_out(n, 0);
  int factor = static_cast<int>(rng()() % 7) + 2, addend = static_cast<int>(rng()() % 1000);
  int *in = device_ints(n), *scaled = device_ints(n), *added = device_ints(n), *out = device_ints(n);
  int count = n;
  cudaGraph_t graph = new_graph();

  cudaGraphNode_t copy_in, scale, add, combine, copy_out, host;
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy_in, graph, nullptr, 0, in, host_in.data(), n * sizeof(int),
                                     cudaMemcpyHostToDevice),
            cudaSuccess);
  void* scale_args[] = {&in, &scaled, &count, &factor};
  cudaKernelNodeParams scale_params = kernel_params(reinterpret_cast<void*>(scale_kernel), n, scale_args);
  EXPECT_EQ(scale_params.gridDim.x, 5u);
  EXPECT_EQ(scale_params.blockDim.x, 64u);
  ASSERT_EQ(cudaGraphAddKernelNode(&scale, graph, &copy_in, 1, &scale_params), cudaSuccess);
  void* add_args[] = {&in, &added, &count, &addend};
  cudaKernelNodeParams add_params = kernel_params(reinterpret_cast<void*>(add_kernel), n, add_args);
  ASSERT_EQ(cudaGraphAddKernelNode(&add, graph, &copy_in, 1, &add_params), cudaSuccess);
  void* combine_args[] = {&scaled, &added, &out, &count};
  cudaKernelNodeParams combine_params = kernel_params(reinterpret_cast<void*>(combine_kernel), n, combine_args);
  const cudaGraphNode_t both[] = {scale, add};
  ASSERT_EQ(cudaGraphAddKernelNode(&combine, graph, both, 2, &combine_params), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy_out, graph, &combine, 1, host_out.data(), out, n * sizeof(int),
                                     cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<int> log;
  void* host_data[] = {&log, reinterpret_cast<void*>(intptr_t{7})};
  cudaHostNodeParams host_params = {record_order, host_data};
  ASSERT_EQ(cudaGraphAddHostNode(&host, graph, &copy_out, 1, &host_params), cudaSuccess);

  // The arguments were copied when the nodes were added.
  const int factor_used = factor, addend_used = addend;
  factor = 0;
  addend = 0;

  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 6u);
  size_t roots = 0;
  cudaGraphNode_t root = nullptr;
  ASSERT_EQ(cudaGraphGetRootNodes(graph, nullptr, &roots), cudaSuccess);
  EXPECT_EQ(roots, 1u);
  ASSERT_EQ(cudaGraphGetRootNodes(graph, &root, &roots), cudaSuccess);
  EXPECT_EQ(root, copy_in);
  size_t deps = 0;
  cudaGraphNode_t combine_deps[2] = {};
  ASSERT_EQ(cudaGraphNodeGetDependencies(combine, nullptr, nullptr, &deps), cudaSuccess);
  EXPECT_EQ(deps, 2u);
  ASSERT_EQ(cudaGraphNodeGetDependencies(combine, combine_deps, nullptr, &deps), cudaSuccess);
  EXPECT_EQ(combine_deps[0], scale);
  EXPECT_EQ(combine_deps[1], add);
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  ASSERT_EQ(cudaGraphNodeGetType(host, &type), cudaSuccess);
  EXPECT_EQ(type, cudaGraphNodeTypeHost);
  ASSERT_EQ(cudaGraphNodeGetType(copy_out, &type), cudaSuccess);
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int launch = 0; launch < 2; ++launch) {
    if (launch == 1) {  // new values in the same buffer: the node copies from its address
      const std::vector<int> fresh = random_ints(n);
      std::copy(fresh.begin(), fresh.end(), host_in.begin());
    }
    ASSERT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(host_out[i], host_in[i] * factor_used - (host_in[i] + addend_used)) << "launch " << launch << ", i " << i;
    }
  }
  EXPECT_EQ(log, (std::vector<int>{7, 7}));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// Nodes added in one order run in the order their dependencies give (ties: the order added).
TEST_F(GraphApi, AddedDependenciesDecideTheOrder) {
  cudaGraph_t graph = new_graph();
  std::vector<int> log;
  std::vector<std::vector<void*>> data(5);
  cudaGraphNode_t nodes[5];
  for (int i = 0; i < 5; ++i) {
    data[static_cast<size_t>(i)] = {&log, reinterpret_cast<void*>(intptr_t{i})};
    cudaHostNodeParams params = {record_order, data[static_cast<size_t>(i)].data()};
    ASSERT_EQ(cudaGraphAddHostNode(&nodes[i], graph, nullptr, 0, &params), cudaSuccess);
  }
  cudaGraphNode_t empty = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, graph, nullptr, 0), cudaSuccess);
  // 3 → empty → 1 → 0, and 4 → 0; 2 stands alone.
  const cudaGraphNode_t from[] = {nodes[3], empty, nodes[1], nodes[4]};
  const cudaGraphNode_t to[] = {empty, nodes[1], nodes[0], nodes[0]};
  ASSERT_EQ(cudaGraphAddDependencies(graph, from, to, nullptr, 4), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  EXPECT_EQ(log, (std::vector<int>{2, 3, 4, 1, 0}));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

TEST_F(GraphApi, MemsetNodesFillElementsOfOneTwoAndFourBytes) {
  const size_t width = 37, height = 3, pitch_elements = 40;
  uint32_t* words = reinterpret_cast<uint32_t*>(device_ints(pitch_elements * height));
  uint16_t* halves = reinterpret_cast<uint16_t*>(device_ints(width));
  unsigned char* bytes = reinterpret_cast<unsigned char*>(device_ints(width));
  const uint32_t word = static_cast<uint32_t>(rng()());
  const uint16_t half = static_cast<uint16_t>(rng()());
  const unsigned char byte = static_cast<unsigned char>(rng()());
  ASSERT_EQ(cudaMemset(words, 0, pitch_elements * height * 4), cudaSuccess);
  cudaGraph_t graph = new_graph();
  cudaGraphNode_t node;
  cudaMemsetParams p = {};
  p.dst = words;
  p.pitch = pitch_elements * 4;
  p.value = word;
  p.elementSize = 4;
  p.width = width;
  p.height = height;
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &p), cudaSuccess);
  cudaMemsetParams q = {halves, 0, half, 2, width, 1};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &q), cudaSuccess);
  cudaMemsetParams r = {bytes, 0, byte, 1, width, 1};
  ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &r), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
  std::vector<uint32_t> got_words(pitch_elements * height);
  std::vector<uint16_t> got_halves(width);
  std::vector<unsigned char> got_bytes(width);
  ASSERT_EQ(cudaMemcpy(got_words.data(), words, got_words.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_halves.data(), halves, width * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_bytes.data(), bytes, width, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t y = 0; y < height; ++y)
    for (size_t x = 0; x < pitch_elements; ++x)
      ASSERT_EQ(got_words[y * pitch_elements + x], x < width ? word : 0u) << y << "," << x;
  for (size_t x = 0; x < width; ++x) {
    EXPECT_EQ(got_halves[x], half);
    EXPECT_EQ(got_bytes[x], byte);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// A cudaMemcpy3DParms node between pitched pointers: a 2-slice box out of a larger volume.
TEST_F(GraphApi, AMemcpy3DNodeCopiesABoxBetweenPitchedPointers) {
  const size_t nx = 16, ny = 5, nz = 3;  // the source volume, ints
  const std::vector<int> volume = random_ints(nx * ny * nz);
  int* src = device_ints(volume.size());
  ASSERT_EQ(cudaMemcpy(src, volume.data(), volume.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const size_t bx = 6, by = 3, bz = 2;  // the box, at (2, 1, 1)
  std::vector<int> box(bx * by * bz, 0);
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(src, nx * 4, nx, ny);
  p.srcPos = make_cudaPos(2 * 4, 1, 1);
  p.dstPtr = make_cudaPitchedPtr(box.data(), bx * 4, bx, by);
  p.dstPos = make_cudaPos(0, 0, 0);
  p.extent = make_cudaExtent(bx * 4, by, bz);
  p.kind = cudaMemcpyDeviceToHost;
  cudaGraph_t graph = new_graph();
  cudaGraphNode_t node;
  ASSERT_EQ(cudaGraphAddMemcpyNode(&node, graph, nullptr, 0, &p), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  for (size_t z = 0; z < bz; ++z)
    for (size_t y = 0; y < by; ++y)
      for (size_t x = 0; x < bx; ++x)
        ASSERT_EQ(box[(z * by + y) * bx + x], volume[((z + 1) * ny + y + 1) * nx + x + 2]) << z << y << x;
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

TEST_F(GraphApi, ExecKernelNodeSetParamsAndExecUpdateChangeWhatALaunchDoes) {
  const int n = 100;
  const std::vector<int> values = random_ints(n);
  int *in = device_ints(n), *out = device_ints(n);
  ASSERT_EQ(cudaMemcpy(in, values.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  int count = n, factor = 3;
  void* args[] = {&in, &out, &count, &factor};
  auto build = [&](cudaGraph_t graph, void* func) {
    cudaKernelNodeParams params = kernel_params(func, n, args);
    cudaGraphNode_t kernel, after;
    EXPECT_EQ(cudaGraphAddKernelNode(&kernel, graph, nullptr, 0, &params), cudaSuccess);
    EXPECT_EQ(cudaGraphAddEmptyNode(&after, graph, &kernel, 1), cudaSuccess);
    return kernel;
  };
  auto check = [&](cudaGraphExec_t exec, int expected_factor, int expected_addend) {
    ASSERT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
    std::vector<int> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), out, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], values[i] * expected_factor + expected_addend) << i;
  };
  cudaGraph_t graph = new_graph();
  const cudaGraphNode_t kernel = build(graph, reinterpret_cast<void*>(scale_kernel));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  check(exec, 3, 0);

  factor = -5;
  cudaKernelNodeParams changed = kernel_params(reinterpret_cast<void*>(scale_kernel), n, args);
  ASSERT_EQ(cudaGraphExecKernelNodeSetParams(exec, kernel, &changed), cudaSuccess);
  check(exec, -5, 0);
  // Another graph's node, or a node that is no kernel node: cudaErrorInvalidValue.
  cudaGraph_t other = new_graph();
  const cudaGraphNode_t foreign = build(other, reinterpret_cast<void*>(scale_kernel));
  EXPECT_EQ(cudaGraphExecKernelNodeSetParams(exec, foreign, &changed), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  // The same topology with another function and arguments: updated in place.
  factor = 11;  // the addend, for add_kernel
  cudaGraph_t same = new_graph();
  build(same, reinterpret_cast<void*>(add_kernel));
  cudaGraphExecUpdateResultInfo info = {};
  ASSERT_EQ(cudaGraphExecUpdate(exec, same, &info), cudaSuccess);
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  check(exec, 1, 11);

  // Another topology: refused, and the executable graph keeps what it had.
  cudaGraph_t bigger = new_graph();
  build(bigger, reinterpret_cast<void*>(scale_kernel));
  cudaGraphNode_t extra;
  ASSERT_EQ(cudaGraphAddEmptyNode(&extra, bigger, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, bigger, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  cudaGraph_t retyped = new_graph();
  cudaGraphNode_t first, second;
  ASSERT_EQ(cudaGraphAddEmptyNode(&first, retyped, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&second, retyped, &first, 1), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, retyped, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorNodeTypeChanged);
  EXPECT_EQ(info.errorNode, first);
  cudaGetLastError();
  check(exec, 1, 11);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// ---- Errors, as documented -----------------------------------------------------------------------
TEST_F(GraphApi, ACycleFailsInstantiation) {
  cudaGraph_t graph = new_graph();
  cudaGraphNode_t a, b, c;
  ASSERT_EQ(cudaGraphAddEmptyNode(&a, graph, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&b, graph, &a, 1), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&c, graph, &b, 1), cudaSuccess);
  ASSERT_EQ(cudaGraphAddDependencies(graph, &c, &a, nullptr, 1), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("cycle"), std::string::npos);
  cudaGetLastError();
}

TEST_F(GraphApi, BadArgumentsAreInvalidValues) {
  cudaGraph_t graph = new_graph(), other = new_graph();
  cudaGraph_t unused = nullptr;
  EXPECT_EQ(cudaGraphCreate(&unused, 1), cudaErrorInvalidValue);  // flags must be 0
  EXPECT_EQ(cudaGraphCreate(nullptr, 0), cudaErrorInvalidValue);
  cudaGraphNode_t a, b, theirs;
  ASSERT_EQ(cudaGraphAddEmptyNode(&a, graph, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&b, graph, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&theirs, other, nullptr, 0), cudaSuccess);
  cudaGraphNode_t node;
  EXPECT_EQ(cudaGraphAddEmptyNode(nullptr, graph, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddEmptyNode(&node, graph, nullptr, 1), cudaErrorInvalidValue);    // no dependency array
  EXPECT_EQ(cudaGraphAddEmptyNode(&node, graph, &theirs, 1), cudaErrorInvalidValue);    // another graph's node
  const cudaGraphNode_t twice[] = {a, a};
  EXPECT_EQ(cudaGraphAddEmptyNode(&node, graph, twice, 2), cudaErrorInvalidValue);      // a duplicate
  // Dependencies: another graph's node, a node on itself, an existing edge.
  EXPECT_EQ(cudaGraphAddDependencies(graph, &theirs, &a, nullptr, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddDependencies(graph, &a, &a, nullptr, 1), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphAddDependencies(graph, &a, &b, nullptr, 1), cudaSuccess);
  EXPECT_EQ(cudaGraphAddDependencies(graph, &a, &b, nullptr, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddDependencies(graph, nullptr, nullptr, nullptr, 0), cudaSuccess);  // nothing to add
  // Kernel nodes: no parameters, no function, both argument forms.
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph, nullptr, 0, nullptr), cudaErrorInvalidValue);
  int* d = device_ints(4);
  int n = 4, f = 2;
  void* args[] = {&d, &d, &n, &f};
  cudaKernelNodeParams params = kernel_params(nullptr, 4, args);
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &params), cudaErrorInvalidDeviceFunction);
  params = kernel_params(reinterpret_cast<void*>(scale_kernel), 4, args);
  void* extra[] = {nullptr};
  params.extra = extra;
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &params), cudaErrorInvalidValue);
  params.extra = nullptr;
  params.blockDim = dim3(2048);  // what cudaLaunchKernel refuses, the node refuses
  EXPECT_EQ(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &params), cudaErrorInvalidConfiguration);
  // Memset and memcpy nodes: element sizes, ranges outside the allocation, null pointers.
  cudaMemsetParams memset_params = {d, 0, 1, 3, 4, 1};
  EXPECT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &memset_params), cudaErrorInvalidValue);
  memset_params = {d, 0, 1, 4, 5, 1};  // 20 bytes of a 16-byte allocation
  EXPECT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, &memset_params), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemsetNode(&node, graph, nullptr, 0, nullptr), cudaErrorInvalidValue);
  std::vector<int> host(8);
  EXPECT_EQ(cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, d, host.data(), 32, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, nullptr, host.data(), 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemcpyNode(&node, graph, nullptr, 0, nullptr), cudaErrorInvalidValue);
  cudaHostNodeParams no_function = {nullptr, nullptr};
  EXPECT_EQ(cudaGraphAddHostNode(&node, graph, nullptr, 0, &no_function), cudaErrorInvalidValue);
  // None of the refused calls added a node.
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2u);
  cudaGetLastError();
}

}  // namespace
