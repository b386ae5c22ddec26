// Kernel launches in a .cu that nvcc-sim compiles: what <<<>>> becomes after the rewriter
// (sim/nvcc_sim/rewrite.cpp), and the typed cudaLaunchKernel / cudaLaunchCooperativeKernel; the
// launchers nvcc-sim registers so that a launch through a kernel's address finds its parameter
// types. Included by sim/kernel_prelude.h, at its end; apart from it because it is its own
// machinery (argument capture, the probes that find a kernel's address), not what nvcc defines.
// The runtime's side of a launch (its checks, the queued grid) is sim/kernel_launch.cpp.
//
// kernel<<<grid, block, smem, stream>>>(args…) becomes, in the rewritten source,
//   kernel_launch::launch("kernel", "file.cu", line, kernel_launch::config(grid, block, smem, stream),
//                         [=](auto&& probe) -> decltype(probe(kernel)) { return probe(kernel); },
//                         kernel_launch::capture(args…),
//                         [=](auto&... a) { kernel(a...); })
// The arguments are evaluated once, at the launch, and copied (as the runtime copies them into
// the parameter buffer); the kernel is called by name in every GPU thread, so default arguments,
// overloads and template argument deduction work as with nvcc. The probe finds the kernel's
// address where the name denotes one function (or a pointer): that is what attributes, opt-in
// shared memory and ptxas figures are keyed by.
#pragma once

#include <cuda_runtime_api.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "sim/device.h"
#include "sim/sim.h"

namespace blockscope::sim::kernel_launch {

struct Config {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};
inline Config config(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
  return Config{grid, block, smem, stream};
}

template <class... A>
std::tuple<std::decay_t<A>...> capture(A&&... args) {
  return std::tuple<std::decay_t<A>...>(std::forward<A>(args)...);
}

template <class F>
using FunctionTypeOf = std::remove_pointer_t<std::decay_t<F>>;
// A function (by reference) or a pointer to one, and nothing else.
template <class F, std::enable_if_t<std::is_function_v<std::remove_reference_t<F>>, int> = 0>
const void* address(F&& f) {
  return reinterpret_cast<const void*>(&f);
}
template <class F, std::enable_if_t<!std::is_function_v<std::remove_reference_t<F>> &&
                                        std::is_pointer_v<std::decay_t<F>> && std::is_function_v<FunctionTypeOf<F>>,
                                    int> = 0>
const void* address(F&& f) {
  return reinterpret_cast<const void*>(f);
}
// One function (or a pointer to one) without overload resolution.
struct UniqueProbe {
  template <class F>
  auto operator()(F&& f) const -> decltype(address(f)) {
    return address(f);
  }
};
// A function template or overload set, resolved against the arguments' own types.
template <class Tuple>
struct ExactProbe;
template <class... A>
struct ExactProbe<std::tuple<A...>> {
  const void* operator()(void (*f)(A...)) const { return reinterpret_cast<const void*>(f); }
};

// A GPU thread starts with the access checks off (the call reaches it through std::function, whose
// instantiation is instrumented too): it copies the captured arguments and callable onto its own
// stack, turns the checks on and calls the kernel with the copies.
template <class Args, class Call>
void run_thread(const Args& args, const Call& call) {
  Args local_args = args;
  Call local_call = call;
  checks_resume();
  std::apply(local_call, local_args);
}

template <class Args, class Call>
cudaError_t launch_args(const char* name, const void* function, const char* file, int line, const Config& c,
                        bool cooperative, Args&& args, Call&& call) {
  GridLaunch grid;
  grid.name = name;
  grid.function = function;
  grid.grid = c.grid;
  grid.block = c.block;
  grid.dynamic_smem = c.smem;
  grid.cooperative = cooperative;
  grid.file = file;
  grid.line = line;
  return ::blockscope::sim::launch(
      grid, c.stream, [args = std::forward<Args>(args), call = std::forward<Call>(call)]() { run_thread(args, call); });
}

template <class Probe, class Args, class Call>
void launch(const char* name, const char* file, int line, const Config& c, Probe probe, Args args, Call call) {
  const void* function = nullptr;
  if constexpr (std::is_invocable_v<Probe&, UniqueProbe>) {
    function = probe(UniqueProbe{});
  } else if constexpr (std::is_invocable_v<Probe&, ExactProbe<Args>>) {
    function = probe(ExactProbe<Args>{});
  }
  launch_args(name, function, file, line, c, false, std::move(args), std::move(call));
}

// cudaLaunchKernel / cudaLaunchCooperativeKernel: the arguments come as void* pointers to values.
template <class... P, size_t... I>
std::tuple<std::decay_t<P>...> unpack(void** args, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<P>...>(*static_cast<std::decay_t<P>*>(args[I])...);
}
template <class... P>
cudaError_t launch_pointer(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t smem,
                           cudaStream_t stream, bool cooperative) {
  if (sizeof...(P) > 0 && args == nullptr) return cudaErrorInvalidValue;
  auto values = unpack<P...>(args, std::index_sequence_for<P...>{});
  return launch_args(cooperative ? "cudaLaunchCooperativeKernel" : "cudaLaunchKernel",
                     reinterpret_cast<const void*>(kernel), nullptr, 0, config(grid, block, smem, stream), cooperative,
                     std::move(values), [kernel](auto&... a) { kernel(a...); });
}

// The launcher nvcc-sim registers for a kernel: the void** arguments read as its parameter types.
template <class... P>
cudaError_t launch_by_address(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                              cudaStream_t stream, bool cooperative) {
  using Kernel = void (*)(P...);
  return launch_pointer(reinterpret_cast<Kernel>(const_cast<void*>(kernel)), grid, block, args, smem, stream,
                        cooperative);
}
struct RegisterProbe {
  template <class... P>
  bool operator()(void (*kernel)(P...)) const {
    ::blockscope::sim::register_pointer_launcher(reinterpret_cast<const void*>(kernel), &launch_by_address<P...>);
    return true;
  }
};
// Registers the kernel the probe names, when it names exactly one (an overload set does not).
template <class Probe>
bool register_kernel(Probe probe) {
  if constexpr (std::is_invocable_v<Probe&, RegisterProbe>) {
    return probe(RegisterProbe{});
  } else {
    return false;
  }
}

}  // namespace blockscope::sim::kernel_launch

template <class... P>
inline cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t smem = 0,
                                    cudaStream_t stream = 0) {
  return ::blockscope::sim::kernel_launch::launch_pointer(kernel, grid, block, args, smem, stream, false);
}
template <class... P>
inline cudaError_t cudaLaunchCooperativeKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                                               size_t smem = 0, cudaStream_t stream = 0) {
  return ::blockscope::sim::kernel_launch::launch_pointer(kernel, grid, block, args, smem, stream, true);
}
