// Graphs on the simulated GPU: built by a capture (capture.cpp) or node by node, instantiated,
// launched, updated. A launch of the instantiated graph enqueues every node on the stream.
//
// Graphs built node by node (cudaGraphCreate, cudaGraphAdd*Node, cudaGraphAddDependencies) hold
// kernel, memcpy, memset, host and empty nodes. Each node's work is recorded the way a capture
// records it: the matching stream call (cudaLaunchKernel, cudaMemcpyAsync, cudaMemset2DAsync,
// cudaLaunchHostFunc) on a stream of its own that captures into a scratch graph, so the node gets
// that call's argument checks and copies its arguments at creation, as the documentation says.
// cudaGraphInstantiate orders the nodes so that every node follows its dependencies (ties: the
// order they were added); a cycle fails it. A launch runs the nodes one after another in that order.
#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

#include "sim/runtime_state.h"

namespace blockscope::sim::detail {
namespace {

std::unordered_set<CUgraph_st*> g_graphs;
std::unordered_set<CUgraphExec_st*> g_execs;

size_t index_of(const CUgraph_st& graph, const CUgraphNode_st* node) {
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].get() == node) return i;
  return SIZE_MAX;
}

bool belongs(const CUgraph_st& graph, const CUgraphNode_st* node) {
  return node != nullptr && index_of(graph, node) != SIZE_MAX;
}

// Kahn's algorithm, the earliest-added ready node first: the nodes in an order where each
// follows its dependencies. Returns a node on a cycle (nullptr when there is none).
const CUgraphNode_st* topological_order(const CUgraph_st& graph, std::vector<size_t>* order) {
  const size_t n = graph.nodes.size();
  std::vector<size_t> waiting(n, 0);
  std::vector<std::vector<size_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    for (const CUgraphNode_st* d : graph.nodes[i]->dependencies) {
      dependents[index_of(graph, d)].push_back(i);
      ++waiting[i];
    }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.insert(i);
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    order->push_back(i);
    for (const size_t j : dependents[i])
      if (--waiting[j] == 0) ready.insert(j);
  }
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] != 0) return graph.nodes[i].get();
  return nullptr;
}

// Records what `enqueue` does to a stream as one op: the stream (its own, on the current device)
// captures into a scratch graph, so the call checks its arguments and copies them as it would
// for a capture. `*name` and `*op` get the recorded nodes' (empty when the call recorded none).
cudaError_t record(const std::function<cudaError_t(cudaStream_t)>& enqueue, std::string* name,
                   std::function<void()>* op) {
  cudaStream_t stream = nullptr;
  if (const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); error != cudaSuccess) {
    return error;
  }
  CUstream_st* s = resolve_stream(stream);
  CUgraph_st scratch;
  Capture capture;  // not among open_captures(): it forbids nothing to anyone
  capture.graph = &scratch;
  capture.mode = cudaStreamCaptureModeRelaxed;
  capture.thread = std::this_thread::get_id();
  capture.origin = s;
  capture.streams.push_back(s);
  s->capture = &capture;
  const cudaError_t error = enqueue(stream);
  s->capture = nullptr;
  cudaStreamDestroy(stream);
  if (error != cudaSuccess) return error;
  std::vector<std::function<void()>> ops;
  for (const auto& node : scratch.nodes) {
    if (name->empty()) *name = node->name;
    if (node->op) ops.push_back(node->op);
  }
  if (ops.size() == 1) {
    *op = ops[0];
  } else if (!ops.empty()) {
    *op = [ops]() {
      for (const auto& o : ops) o();
    };
  }
  return cudaSuccess;
}

// What every cudaGraphAdd*Node checks before the node's own parameters: documented as
// cudaErrorInvalidValue (a null handle pointer, a graph that is not one, dependencies missing,
// repeated or in another graph).
cudaError_t check_new_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                           size_t count) {
  if (node == nullptr || g_graphs.count(graph) == 0) return cudaErrorInvalidValue;
  if (count > 0 && dependencies == nullptr) return cudaErrorInvalidValue;
  for (size_t i = 0; i < count; ++i) {
    if (!belongs(*graph, dependencies[i])) return cudaErrorInvalidValue;
    for (size_t j = 0; j < i; ++j)
      if (dependencies[j] == dependencies[i]) return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t add_node(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* dependencies, size_t count,
                     cudaGraphNodeType type, std::string name, std::function<void()> op) {
  auto node = std::make_unique<CUgraphNode_st>();
  node->name = std::move(name);
  node->op = std::move(op);
  node->graph = graph;
  node->type = type;
  node->dependencies.assign(dependencies, dependencies + count);
  *out = node.get();
  graph->nodes.push_back(std::move(node));
  return cudaSuccess;
}

cudaError_t record_kernel(const cudaKernelNodeParams* params, std::string* name, std::function<void()>* op) {
  if (params == nullptr) return cudaErrorInvalidValue;
  if (params->func == nullptr) return cudaErrorInvalidDeviceFunction;
  if (params->kernelParams != nullptr && params->extra != nullptr) return cudaErrorInvalidValue;
  if (params->extra != nullptr) {
    set_fault(cudaErrorNotSupported, "cudaGraphAddKernelNode: kernel arguments in the `extra` form are not modelled "
                                     "by the simulated GPU; pass them as kernelParams");
    return cudaErrorNotSupported;
  }
  return record([&](cudaStream_t s) {
    return cudaLaunchKernel(params->func, params->gridDim, params->blockDim, params->kernelParams,
                            params->sharedMemBytes, s);
  }, name, op);
}

cudaError_t record_memset(const cudaMemsetParams* p, std::string* name, std::function<void()>* op) {
  if (p == nullptr || p->dst == nullptr) return cudaErrorInvalidValue;
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) return cudaErrorInvalidValue;
  if (p->width == 0 || p->height == 0) return cudaErrorInvalidValue;
  const size_t row = p->width * p->elementSize;
  const size_t pitch = p->height == 1 ? row : p->pitch;  // the pitch of one row is not used
  // The 1-byte form checks the region (and is the op, for 1-byte elements).
  const cudaError_t error = record([&](cudaStream_t s) {
    return cudaMemset2DAsync(p->dst, pitch, static_cast<int>(p->value & 0xFF), row, p->height, s);
  }, name, op);
  if (error != cudaSuccess || p->elementSize == 1) return error;
  auto* to = static_cast<unsigned char*>(p->dst);
  const unsigned value = p->value, element = p->elementSize;
  const size_t width = p->width, height = p->height;
  *op = [to, pitch, value, element, width, height, row]() {
    blockscope::sim::note_op_access(to, pitch * (height - 1) + row, true);
    for (size_t r = 0; r < height; ++r) {
      for (size_t i = 0; i < width; ++i) {
        if (element == 2) {
          const auto v = static_cast<uint16_t>(value);
          std::memcpy(to + r * pitch + i * 2, &v, 2);
        } else {
          std::memcpy(to + r * pitch + i * 4, &value, 4);
        }
      }
      blockscope::sim::note_written(to + r * pitch, row);
    }
  };
  return cudaSuccess;
}

cudaError_t record_memcpy3d(const cudaMemcpy3DParms* p, std::string* name, std::function<void()>* op) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (p->srcArray != nullptr || p->dstArray != nullptr) {
    set_fault(cudaErrorNotSupported, "cudaGraphAddMemcpyNode: CUDA arrays are not modelled by the simulated GPU; "
                                     "only copies between pitched pointers (srcPtr/dstPtr) are");
    return cudaErrorNotSupported;
  }
  const cudaExtent e = p->extent;
  if (e.width == 0 || e.height == 0 || e.depth == 0) return cudaErrorInvalidValue;
  const cudaPitchedPtr src = p->srcPtr, dst = p->dstPtr;
  // Row pitch, rows per slice: the pitched pointers' own, each position in bytes, rows, slices.
  const auto at = [](const cudaPitchedPtr& ptr, const cudaPos& pos, size_t z) {
    return static_cast<unsigned char*>(ptr.ptr) + (pos.z + z) * ptr.pitch * ptr.ysize + pos.y * ptr.pitch + pos.x;
  };
  if (src.ptr == nullptr || dst.ptr == nullptr) return cudaErrorInvalidValue;
  if (e.depth > 1 && (src.ysize == 0 || dst.ysize == 0)) return cudaErrorInvalidValue;
  return record([&](cudaStream_t s) {
    for (size_t z = 0; z < e.depth; ++z) {
      const cudaError_t error = cudaMemcpy2DAsync(at(dst, p->dstPos, z), dst.pitch, at(src, p->srcPos, z), src.pitch,
                                                  e.width, e.height, p->kind, s);
      if (error != cudaSuccess) return error;
    }
    return cudaSuccess;
  }, name, op);
}

}  // namespace

void add_graph(CUgraph_st* graph) { g_graphs.insert(graph); }

}  // namespace blockscope::sim::detail

using namespace blockscope::sim::detail;

extern "C" {

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  Lock lock(state_mutex());
  if (g_graphs.count(graph) == 0) return result(cudaErrorInvalidResourceHandle);
  if (count == nullptr) return result(cudaErrorInvalidValue);
  const size_t size = graph->nodes.size();
  if (nodes == nullptr) {
    *count = size;
    return cudaSuccess;
  }
  for (size_t i = 0; i < *count; ++i) nodes[i] = i < size ? graph->nodes[i].get() : nullptr;
  *count = std::min(*count, size);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  Lock lock(state_mutex());
  if (exec == nullptr) return result(cudaErrorInvalidValue);
  if (g_graphs.count(graph) == 0) return result(cudaErrorInvalidResourceHandle);
  std::vector<size_t> order;
  if (const CUgraphNode_st* stuck = topological_order(*graph, &order)) {
    set_fault(cudaErrorInvalidValue, "cudaGraphInstantiate: the graph's dependencies form a cycle (through node `" +
                                         stuck->name + "`, #" + std::to_string(index_of(*graph, stuck)) +
                                         "): a graph must be acyclic");
    return result(cudaErrorInvalidValue);
  }
  auto* instance = new CUgraphExec_st;
  for (const size_t i : order) {
    const CUgraphNode_st& node = *graph->nodes[i];
    std::vector<size_t> dependencies;
    for (const CUgraphNode_st* d : node.dependencies) dependencies.push_back(index_of(*graph, d));
    instance->nodes.push_back(CUgraphExec_st::Node{&node, i, node.type, std::move(dependencies), node.name, node.op});
  }
  instance->memory = graph->memory;
  g_execs.insert(instance);
  *exec = instance;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  Lock lock(state_mutex());
  if (g_execs.count(exec) == 0 || resolve_stream(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  return cudaSuccess;  // nothing to upload: host memory
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Lock lock(state_mutex());
  CUstream_st* s = resolve_stream(stream);
  if (g_execs.count(exec) == 0 || s == nullptr) return result(cudaErrorInvalidResourceHandle);
  // Each queued node keeps the graph's memory alive: the executable graph may be destroyed
  // before the launch has run.
  for (const CUgraphExec_st::Node& node : exec->nodes) {
    if (!node.op) continue;  // an empty node: its place in the order is all it has
    const cudaError_t error = submit(s, node.name, [op = node.op, memory = exec->memory]() { op(); });
    if (error != cudaSuccess) return result(error);
  }
  return cudaSuccess;
}

// ---- Building graphs -------------------------------------------------------------------------
cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  Lock lock(state_mutex());
  if (graph == nullptr || flags != 0) return result(cudaErrorInvalidValue);  // flags: "must be zero"
  *graph = new CUgraph_st;
  g_graphs.insert(*graph);
  return cudaSuccess;
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                  size_t count) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeEmpty, "Empty", nullptr);
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                   size_t count, const struct cudaKernelNodeParams* params) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  std::string name;
  std::function<void()> op;
  if (const cudaError_t error = record_kernel(params, &name, &op); error != cudaSuccess) return result(error);
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeKernel, name, op);
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                   size_t count, const struct cudaMemcpy3DParms* params) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  std::string name;
  std::function<void()> op;
  if (const cudaError_t error = record_memcpy3d(params, &name, &op); error != cudaSuccess) return result(error);
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeMemcpy, name.empty() ? "Memcpy" : name, op);
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                     size_t count, void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  if (dst == nullptr || src == nullptr) return result(cudaErrorInvalidValue);
  std::string name;
  std::function<void()> op;
  const cudaError_t error =
      record([&](cudaStream_t s) { return cudaMemcpyAsync(dst, src, bytes, kind, s); }, &name, &op);
  if (error != cudaSuccess) return result(error);
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeMemcpy, name.empty() ? "Memcpy" : name, op);
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                   size_t count, const struct cudaMemsetParams* params) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  std::string name;
  std::function<void()> op;
  if (const cudaError_t error = record_memset(params, &name, &op); error != cudaSuccess) return result(error);
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeMemset, "Memset", op);
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                 size_t count, const struct cudaHostNodeParams* params) {
  Lock lock(state_mutex());
  if (const cudaError_t error = check_new_node(node, graph, dependencies, count); error != cudaSuccess) {
    return result(error);
  }
  if (params == nullptr || params->fn == nullptr) return result(cudaErrorInvalidValue);
  const cudaHostFn_t fn = params->fn;
  void* const data = params->userData;
  return add_node(node, graph, dependencies, count, cudaGraphNodeTypeHost, "cudaGraphHostNode",
                  [fn, data]() { fn(data); });
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                     const cudaGraphEdgeData* edge_data, size_t count) {
  Lock lock(state_mutex());
  if (g_graphs.count(graph) == 0) return result(cudaErrorInvalidValue);
  if (count == 0) return cudaSuccess;  // "elements in pFrom and pTo will be ignored"
  if (from == nullptr || to == nullptr) return result(cudaErrorInvalidValue);
  (void)edge_data;  // programmatic edges are plain ones here: nodes run one after another anyway
  for (size_t i = 0; i < count; ++i) {
    if (!belongs(*graph, from[i]) || !belongs(*graph, to[i]) || from[i] == to[i]) return result(cudaErrorInvalidValue);
    const auto& existing = to[i]->dependencies;
    // "Specifying an existing dependency will return an error" (also one repeated in this call).
    if (std::find(existing.begin(), existing.end(), from[i]) != existing.end()) return result(cudaErrorInvalidValue);
    for (size_t j = 0; j < i; ++j)
      if (from[j] == from[i] && to[j] == to[i]) return result(cudaErrorInvalidValue);
  }
  for (size_t i = 0; i < count; ++i) to[i]->dependencies.push_back(from[i]);
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType* type) {
  Lock lock(state_mutex());
  if (node == nullptr || type == nullptr) return result(cudaErrorInvalidValue);
  *type = node->type;
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* dependencies,
                                         cudaGraphEdgeData* edge_data, size_t* count) {
  Lock lock(state_mutex());
  if (node == nullptr || count == nullptr) return result(cudaErrorInvalidValue);
  const size_t size = node->dependencies.size();
  if (dependencies == nullptr) {
    *count = size;
    return cudaSuccess;
  }
  for (size_t i = 0; i < *count; ++i) {
    dependencies[i] = i < size ? node->dependencies[i] : nullptr;
    if (edge_data != nullptr) edge_data[i] = cudaGraphEdgeData{};
  }
  *count = std::min(*count, size);
  return cudaSuccess;
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* roots, size_t* count) {
  Lock lock(state_mutex());
  if (g_graphs.count(graph) == 0 || count == nullptr) return result(cudaErrorInvalidValue);
  std::vector<cudaGraphNode_t> found;
  for (const auto& node : graph->nodes)
    if (node->dependencies.empty()) found.push_back(node.get());
  if (roots == nullptr) {
    *count = found.size();
    return cudaSuccess;
  }
  for (size_t i = 0; i < *count; ++i) roots[i] = i < found.size() ? found[i] : nullptr;
  *count = std::min(*count, found.size());
  return cudaSuccess;
}

// ---- Updating executable graphs ---------------------------------------------------------------
cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams* params) {
  Lock lock(state_mutex());
  if (g_execs.count(exec) == 0 || node == nullptr) return result(cudaErrorInvalidValue);
  auto it = std::find_if(exec->nodes.begin(), exec->nodes.end(),
                         [node](const CUgraphExec_st::Node& n) { return n.source == node; });
  // The node must be a kernel node of the graph the executable graph was instantiated from.
  if (it == exec->nodes.end() || it->type != cudaGraphNodeTypeKernel) return result(cudaErrorInvalidValue);
  std::string name;
  std::function<void()> op;
  if (const cudaError_t error = record_kernel(params, &name, &op); error != cudaSuccess) return result(error);
  it->name = name;
  it->op = op;
  return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  Lock lock(state_mutex());
  cudaGraphExecUpdateResultInfo ignored{};
  if (info == nullptr) info = &ignored;
  *info = cudaGraphExecUpdateResultInfo{cudaGraphExecUpdateError, nullptr, nullptr};
  if (g_execs.count(exec) == 0 || g_graphs.count(graph) == 0) return result(cudaErrorInvalidValue);
  // Nodes pair by the order they were added; the topology must be the same, node for node.
  const auto fail = [&](cudaGraphExecUpdateResult why, cudaGraphNode_t node, cudaGraphNode_t from) {
    *info = cudaGraphExecUpdateResultInfo{why, node, from};
    return result(cudaErrorGraphExecUpdateFailure);
  };
  if (graph->nodes.size() != exec->nodes.size()) return fail(cudaGraphExecUpdateErrorTopologyChanged, nullptr, nullptr);
  std::vector<const CUgraphExec_st::Node*> paired(exec->nodes.size());
  for (const CUgraphExec_st::Node& n : exec->nodes) paired[n.index] = &n;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    CUgraphNode_st* node = graph->nodes[i].get();
    const CUgraphExec_st::Node& old = *paired[i];
    if (node->type != old.type) return fail(cudaGraphExecUpdateErrorNodeTypeChanged, node, nullptr);
    if (node->dependencies.size() != old.dependencies.size()) {
      return fail(cudaGraphExecUpdateErrorTopologyChanged, node, nullptr);
    }
    for (size_t k = 0; k < node->dependencies.size(); ++k) {
      if (index_of(*graph, node->dependencies[k]) != old.dependencies[k]) {
        return fail(cudaGraphExecUpdateErrorTopologyChanged, node, node->dependencies[k]);
      }
    }
  }
  for (CUgraphExec_st::Node& n : exec->nodes) {
    n.name = graph->nodes[n.index]->name;
    n.op = graph->nodes[n.index]->op;
  }
  info->result = cudaGraphExecUpdateSuccess;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Lock lock(state_mutex());
  if (g_execs.erase(exec) == 0) return result(cudaErrorInvalidResourceHandle);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  Lock lock(state_mutex());
  if (g_graphs.erase(graph) == 0) return result(cudaErrorInvalidResourceHandle);
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
