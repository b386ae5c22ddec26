// Tests of nvcc-sim's rewriter (sim/nvcc_sim/rewrite.cpp) on preprocessed text as `c++ -E` with the
// kernel prelude leaves it: the execution-space keywords arrive as __blockscope_*__ markers. What
// the rewritten code does when compiled and run is tested by every .cu of the sim suites and by
// the conformance programs (sim/test/conformance/); here: what it turns into, and that every line
// stays where it was.
#include "sim/nvcc_sim/rewrite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace {

using blockscope::sim::nvcc::rewrite;

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// Rewrites `text`, expecting no errors and the same number of lines.
std::string rewritten(const std::string& text) {
  const auto result = rewrite(text);
  EXPECT_TRUE(result.errors.empty()) << (result.errors.empty() ? "" : result.errors[0]);
  EXPECT_EQ(lines(result.text), lines(text)) << result.text;
  return result.text;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Rewrite, PlainCodeIsUnchanged) {
  const std::string text =
      "# 1 \"a.cu\"\nint main() { std::vector<std::vector<int>> v; return a << b >> c; }\n"
      "template <class T> struct X { T operator<<(int); };\n";
  EXPECT_EQ(rewritten(text), text);
}

TEST(Rewrite, LaunchesWithTwoThreeAndFourConfigurationArguments) {
  const std::string out = rewritten(
      "# 1 \"k.cu\"\n"
      "void f(float* p, cudaStream_t s) {\n"
      "  add<<<4, 64>>>(p, 3);\n"
      "  add<<<dim3(4, 2), 64, 128>>>(p, 3);\n"
      "  add<<<grid, block, smem, s>>>(p);\n"
      "}\n");
  EXPECT_TRUE(has(out, "::blockscope::sim::kernel_launch::launch(\"add\", \"k.cu\", 2, "
                       "::blockscope::sim::kernel_launch::config(4, 64)"))
      << out;
  EXPECT_TRUE(has(out, "config(dim3(4, 2), 64, 128)")) << out;
  EXPECT_TRUE(has(out, "config(grid, block, smem, s)")) << out;
  EXPECT_TRUE(has(out, "capture(p, 3)")) << out;
  EXPECT_TRUE(has(out, "[=](auto&... bs_args) { add(bs_args...); }")) << out;
  EXPECT_TRUE(has(out, "[=](auto&& bs_probe) -> decltype(bs_probe(add)) { return bs_probe(add); }")) << out;
  EXPECT_FALSE(has(out, "<<<")) << out;
}

// NULL (GCC's __null after preprocessing) among a launch's arguments becomes nullptr, so it
// converts to the kernel's pointer parameter after capture; names that merely contain it stay.
TEST(Rewrite, NullLaunchArgumentsBecomeNullptr) {
  const std::string out = rewritten(
      "# 1 \"k.cu\"\n"
      "void f(float* p) { k<<<1, 32>>>(p, __null, my__null, __null_x, (__null)); }\n");
  EXPECT_NE(out.find("capture(p, nullptr, my__null, __null_x, (nullptr))"), std::string::npos) << out;
  // NULL as the first argument arrives behind a line marker, which must start a line.
  const std::string first = rewritten(
      "# 1 \"k.cu\"\n"
      "void f(float* p) { k<<<1, 32>>>(\n# 1 \"/usr/include/stddef.h\" 3 4\n__null\n# 1 \"k.cu\"\n, p); }\n");
  EXPECT_EQ(first.find("(#"), std::string::npos) << first;
  EXPECT_EQ(first.find("(\n#"), first.find("capture(") + 7) << first;
  EXPECT_NE(first.find("nullptr"), std::string::npos) << first;
}

TEST(Rewrite, KernelExpressionsBeforeTheLaunch) {
  const std::string out = rewritten(
      "# 7 \"k.cu\"\n"
      "ns::inner::scale<float, 4><<<1, 32>>>(x);\n"
      "::top<<<1, 1>>>();\n"
      "table[i]<<<1, 1>>>(y);\n"
      "(pick ? a : b)<<<2, 2>>>(z);\n"
      "this->kernel_<<<1, 1>>>(w);\n"
      "X<T>::template k<T><<<1, 1>>>(v);\n");
  EXPECT_TRUE(has(out, "launch(\"ns::inner::scale<float, 4>\", \"k.cu\", 7")) << out;
  EXPECT_TRUE(has(out, "launch(\"::top\"")) << out;
  EXPECT_TRUE(has(out, "launch(\"table[i]\"")) << out;
  EXPECT_TRUE(has(out, "launch(\"(pick ? a : b)\"")) << out;
  EXPECT_TRUE(has(out, "launch(\"this->kernel_\"")) << out;
  EXPECT_TRUE(has(out, "launch(\"X<T>::template k<T>\"")) << out;
}

TEST(Rewrite, MultiLineLaunchKeepsItsLinesAndTheLineNumber) {
  const std::string text =
      "# 20 \"k.cu\"\n"
      "k<<<grid,\n"
      "    block>>>(a,\n"
      "             b);\n"
      "int after;\n";
  const std::string out = rewritten(text);
  EXPECT_TRUE(has(out, "\"k.cu\", 20,")) << out;
  // `after` is still on the 4th line after the marker, as in the source.
  EXPECT_EQ(lines(out.substr(0, out.find("int after"))), lines(text.substr(0, text.find("int after")))) << out;
}

TEST(Rewrite, ShiftOperatorsAndTemplatesAreNotLaunches) {
  const std::string text =
      "# 1 \"k.cu\"\n"
      "A<B<C<int>>> x; auto y = friend_op operator<<<int>(s, 1); int z = a >> 1 >> 2;\n";
  const auto result = rewrite(text);
  EXPECT_TRUE(result.errors.empty());
  EXPECT_FALSE(has(result.text, "kernel_launch")) << result.text;
}

TEST(Rewrite, MalformedLaunchesAreErrorsWithTheirLine) {
  auto result = rewrite("# 3 \"bad.cu\"\n\nk<<<1, 32>>;\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_TRUE(has(result.errors[0], "bad.cu:4: error: <<< without its >>>")) << result.errors[0];
  result = rewrite("# 1 \"bad.cu\"\nk<<<1, 32>>>;\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_TRUE(has(result.errors[0], "needs its argument list")) << result.errors[0];
  result = rewrite("# 1 \"bad.cu\"\n1 + <<<1, 1>>>(x);\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_TRUE(has(result.errors[0], "cannot tell which kernel")) << result.errors[0];
}

TEST(Rewrite, SharedVariablesInAFunctionBecomeReferencesIntoTheBlocksSharedMemory) {
  const std::string out = rewritten(
      "# 5 \"s.cu\"\n"
      "template <class T> void k() {\n"
      "  __blockscope_shared__ float tile[32][33];\n"
      "  static __blockscope_shared__ __attribute__((aligned(16))) unsigned char raw[64], other[8];\n"
      "  volatile __blockscope_shared__ int flag;\n"
      "  __blockscope_shared__ typename T::Storage storage;\n"
      "  __blockscope_shared__ float *pointer;\n"
      "}\n");
  EXPECT_TRUE(has(out, "using bs_shared_t_1 = float [ 32 ] [ 33 ]; static const ::blockscope::sim::SharedSite "
                       "bs_shared_site_1{\"tile\", \"s.cu\", 6, sizeof(bs_shared_t_1), alignof(bs_shared_t_1)}; "
                       "bs_shared_t_1& tile = *static_cast<bs_shared_t_1*>(::blockscope::sim::shared_variable(&bs_shared_site_1));"))
      << out;
  EXPECT_TRUE(has(out, "using bs_shared_t_2 = unsigned char [ 64 ];")) << out;
  EXPECT_TRUE(has(out, "(alignof(bs_shared_t_2) > (16) ? alignof(bs_shared_t_2) : (16))")) << out;
  EXPECT_TRUE(has(out, "using bs_shared_t_3 = unsigned char [ 8 ];")) << out;
  EXPECT_TRUE(has(out, "bs_shared_t_3& other =")) << out;
  EXPECT_TRUE(has(out, "using bs_shared_t_4 = volatile int;")) << out;
  EXPECT_TRUE(has(out, "using bs_shared_t_5 = typename T :: Storage;")) << out;
  EXPECT_TRUE(has(out, "using bs_shared_t_6 = float *;")) << out;
  EXPECT_FALSE(has(out, "__blockscope_shared__")) << out;
  EXPECT_FALSE(has(out, "static __attribute")) << out;
}

TEST(Rewrite, ExternSharedInAFunctionIsTheDynamicSharedMemory) {
  const std::string out = rewritten(
      "# 1 \"s.cu\"\n"
      "template <class T> void k() {\n"
      "  extern __blockscope_shared__ __attribute__((aligned(16))) T smem[];\n"
      "}\n");
  EXPECT_TRUE(has(out, "using bs_shared_t_1 = T [ ]; bs_shared_t_1& smem = "
                       "*static_cast<bs_shared_t_1*>(::blockscope::sim::dynamic_shared_memory());"))
      << out;
}

TEST(Rewrite, NamespaceScopeSharedNamesAreReplacedWhereTheyAreUsed) {
  const std::string out = rewritten(
      "# 1 \"s.cu\"\n"
      "namespace n {\n"
      "extern __blockscope_shared__ float dyn[];\n"
      "__blockscope_shared__ int counter;\n"
      "void k() { dyn[1] = counter; x.dyn = 1; n::counter; }\n"
      "}\n");
  EXPECT_TRUE(has(out, "static const ::blockscope::sim::SharedSite bs_shared_site_2{\"counter\"")) << out;
  EXPECT_TRUE(has(out, "(*static_cast<std::add_pointer_t<float [ ]>>(::blockscope::sim::dynamic_shared_memory()))[1] = "
                       "(*static_cast<std::add_pointer_t<int>>(::blockscope::sim::shared_variable(&::n::bs_shared_site_2)))"))
      << out;
  EXPECT_TRUE(has(out, "x.dyn = 1")) << out;       // a member of the same name stays
  EXPECT_TRUE(has(out, "n::counter;")) << out;    // so does a qualified use (a limitation)
}

TEST(Rewrite, DeviceVariablesAreRegisteredAndFunctionsLoseTheMarker) {
  const std::string out = rewritten(
      "# 1 \"d.cu\"\n"
      "__blockscope_device__ int hits;\n"
      "static __blockscope_constant__ float table[4] = {1, 2, 3, 4};\n"
      "__blockscope_managed__ double total, extra = 1;\n"
      "extern __blockscope_device__ int elsewhere;\n"
      "template <class T> __blockscope_device__ T per_type;\n"
      "__blockscope_device__ inline __attribute__((always_inline)) float twice(float x) { return 2 * x; }\n"
      "__blockscope_device__ float (*pointer)(float) = nullptr;\n"
      "struct S { __blockscope_device__ int get() const; };\n"
      "void host() { auto f = [] __blockscope_device__ (int x) { return x; }; }\n");
  EXPECT_TRUE(has(out, "int hits; static ::blockscope::sim::DeviceVariable bs_device_variable_1((void*)&hits, "
                       "sizeof(hits), \"hits\", ::blockscope::sim::VariableKind::device);"))
      << out;
  EXPECT_TRUE(has(out, "{1, 2, 3, 4}; static ::blockscope::sim::DeviceVariable bs_device_variable_2((void*)&table, "
                       "sizeof(table), \"table\", ::blockscope::sim::VariableKind::constant);"))
      << out;
  EXPECT_TRUE(has(out, "\"total\", ::blockscope::sim::VariableKind::managed);")) << out;
  EXPECT_TRUE(has(out, "\"extra\", ::blockscope::sim::VariableKind::managed);")) << out;
  EXPECT_TRUE(has(out, "\"pointer\", ::blockscope::sim::VariableKind::device);")) << out;
  EXPECT_FALSE(has(out, "\"elsewhere\"")) << out;
  EXPECT_FALSE(has(out, "\"per_type\"")) << out;
  EXPECT_FALSE(has(out, "\"twice\"")) << out;
  EXPECT_FALSE(has(out, "__blockscope_")) << out;
}

TEST(Rewrite, KernelsDefinedAtNamespaceScopeRegisterTheirLauncher) {
  const std::string out = rewritten(
      "# 1 \"k.cu\"\n"
      "static __blockscope_global__ void scale(float* p, int n) {\n"
      "  p[0] *= n;\n"
      "}\n"
      "__blockscope_global__ void declared_only(int);\n"
      "template <class T> __blockscope_global__ void templated(T* p) { p[0] = T(); }\n"
      "namespace ns { __blockscope_global__ void __attribute__((used)) inner() {} }\n"
      "struct S { void f() { auto l = [] __blockscope_device__ () {}; } };\n");
  EXPECT_FALSE(has(out, "__blockscope_global__")) << out;
  // After the closing brace, on its line: the line count stays.
  EXPECT_TRUE(has(out, "}  static const bool bs_kernel_launcher_") ||
              has(out, "} static const bool bs_kernel_launcher_"))
      << out;
  EXPECT_TRUE(has(out, "register_kernel([](auto&& bs_probe) -> decltype(bs_probe(scale)) { return bs_probe(scale); });"))
      << out;
  EXPECT_TRUE(has(out, "decltype(bs_probe(inner))")) << out;
  EXPECT_FALSE(has(out, "bs_probe(declared_only)")) << out;  // no body, nothing to register
  EXPECT_FALSE(has(out, "bs_probe(templated)")) << out;      // a template has no one address
}

TEST(Rewrite, LineMarkersInsideADeclarationKeepTheLinesAfterIt) {
  // What GCC leaves when a macro from a system header (here __align__) expands inside a line.
  const std::string text =
      "# 58 \"v.cuh\"\n"
      "void* f() {\n"
      "  extern __blockscope_shared__ \n"
      "# 59 \"v.cuh\" 3 4\n"
      "  __attribute__((aligned(\n"
      "# 59 \"v.cuh\"\n"
      "  16\n"
      "# 59 \"v.cuh\" 3 4\n"
      "  ))) \n"
      "# 59 \"v.cuh\"\n"
      "      unsigned char smem[];\n"
      "  return smem;\n"
      "}\n";
  const auto result = rewrite(text);
  ASSERT_TRUE(result.errors.empty());
  EXPECT_TRUE(has(result.text, "using bs_shared_t_1 = unsigned char [ ];")) << result.text;
  // The last marker comes back right after the replacement, so `return` is line 60 again.
  EXPECT_TRUE(has(result.text, "(::blockscope::sim::dynamic_shared_memory()); \n# 59 \"v.cuh\"\n\n  return smem;"))
      << result.text;
}

TEST(Rewrite, BareNoinlineBecomesAnAttribute) {
  const std::string out = rewritten(
      "# 1 \"n.cu\"\n"
      "__noinline__ int f();\n"
      "__attribute__((__noinline__)) int g();\n"
      "__attribute__((cold, __noinline__)) int h();\n");
  EXPECT_TRUE(has(out, "__attribute__((noinline)) int f();")) << out;
  EXPECT_TRUE(has(out, "__attribute__((__noinline__)) int g();")) << out;
  EXPECT_TRUE(has(out, "__attribute__((cold, __noinline__)) int h();")) << out;
}

TEST(Rewrite, StringsAndCommentsAreNotCode) {
  const std::string text =
      "# 1 \"q.cu\"\n"
      "const char* s = \"k<<<1, 1>>>(x) __blockscope_shared__\"; char c = '<';\n"
      "const char* r = R\"x(k<<<1,1>>>() \" )x\";\n";
  EXPECT_EQ(rewritten(text), text);
}

}  // namespace

// ---- Kernel entries, device heap calls --------------------------------------------------------
// A kernel is its own function (never inlined into its launcher), entered only in a launch.
TEST(Rewrite, AKernelBodySaysItWasEntered) {
  const std::string out = rewritten(
      "__blockscope_global__ void k(int n) { dim3 gridDim(n); }\n"
      "template <class T> __blockscope_global__ void t(T* p) { *p = T(); }\n"
      "__blockscope_global__ void declared(int n);\n"
      "__blockscope_device__ int d(int n) { return n; }\n");
  EXPECT_TRUE(has(out, "__attribute__((noinline)) void k(int n) { ::blockscope::sim::kernel_body_entered(__func__); "
                       "dim3 gridDim(n); }"))
      << out;
  EXPECT_TRUE(has(out, "void t(T* p) { ::blockscope::sim::kernel_body_entered(__func__); *p = T(); }")) << out;
  EXPECT_TRUE(has(out, "void declared(int n);")) << out;
  EXPECT_TRUE(has(out, "int d(int n) { return n; }")) << out;  // device functions: no entry
}

TEST(Rewrite, HeapCallsInDeviceCodeGoToTheDeviceHeap) {
  const std::string out = rewritten(
      "__blockscope_global__ void k(int n) {\n"
      "  int* a = (int*)malloc(n); int* b = new int[n]; S* s = new S(1); void* c = std::malloc(4);\n"
      "  new (a) int(3); free(a); ::free(c); delete[] b; delete s; ns::free(c);\n"
      "}\n"
      "void host(int n) { int* a = (int*)malloc(n); free(a); delete new int; }\n"
      "struct T { __blockscope_device__ T(const T&) = delete; };\n");
  EXPECT_TRUE(has(out, "(int*)::blockscope::sim::device_malloc(n)")) << out;
  EXPECT_TRUE(has(out, "new (::blockscope::sim::device_heap) int[n]")) << out;
  EXPECT_TRUE(has(out, "new (::blockscope::sim::device_heap) S(1)")) << out;
  EXPECT_TRUE(has(out, "void* c = ::blockscope::sim::device_malloc(4)")) << out;
  EXPECT_TRUE(has(out, "new (a) int(3)")) << out;  // placement new stays
  EXPECT_TRUE(has(out, "::blockscope::sim::device_free(a); ::blockscope::sim::device_free(c);")) << out;
  EXPECT_TRUE(has(out, "::blockscope::sim::DeviceDeleteArray{} ->* b;")) << out;
  EXPECT_TRUE(has(out, "::blockscope::sim::DeviceDelete{} ->* s;")) << out;
  EXPECT_TRUE(has(out, "ns::free(c)")) << out;  // someone's own free
  EXPECT_TRUE(has(out, "void host(int n) { int* a = (int*)malloc(n); free(a); delete new int; }")) << out;
  EXPECT_TRUE(has(out, "T(const T&) = delete;")) << out;
}
