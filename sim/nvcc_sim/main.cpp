// nvcc-sim: compiles and links CUDA written for nvcc into a host program that runs on the
// simulated GPU.
//
//   nvcc-sim prog.cu -o prog [-I…] [-D…] [-O2] [-g] [-std=c++17] [-lcublas] [-lcublasLt] [-lnccl] [-c] [-E]
//   nvcc-sim --compiler-launcher [--resources=off] <c++ compiler> <its arguments…>   (CMake)
//
// A .cu goes through three steps: the host compiler preprocesses it with sim/kernel_prelude.h
// force-included; the rewriter (rewrite.h) turns <<<>>>, __shared__ and __device__ variables into
// plain C++; the host compiler compiles the result with ThreadSanitizer's instrumentation pointed at
// the simulator's own runtime (sim/checks.cpp) — except in sanitizer builds. Where nvcc is there,
// the same .cu also goes through `nvcc -cubin -arch=sm_90 --resource-usage` and ptxas's figures
// (registers, static shared memory, stack) are compiled into the object, so the simulator reports
// what an H200 would. Other sources (.cpp, .c) are compiled as they are; everything is linked with
// the simulator's library.
//
// As a compiler launcher (CMake's CXX_COMPILER_LAUNCHER), it does the same for a .cu source and
// runs the compiler unchanged for anything else.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nvcc_sim_config.h"
#include "sim/nvcc_sim/compiler_cache.h"
#include "sim/nvcc_sim/resources.h"
#include "sim/nvcc_sim/rewrite.h"

extern char** environ;

namespace {

using Args = std::vector<std::string>;

// ---- Where things are ------------------------------------------------------------------------------
struct Paths {
  std::string root;            // holds sim/ (kernel_prelude.h and the headers it includes)
  std::string shadow_include;  // sim/cuda_include: our <cooperative_groups.h>
  std::string cuda_include;    // the toolkit's headers
  std::string library;         // libblockscope_sim.a
  std::string cxx;
  std::string nvcc;
};

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string self_directory() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  buffer[n] = '\0';
  return directory_of(buffer);
}

Paths find_paths() {
  Paths p;
  const std::string installed = self_directory() + "/..";
  if (exists(installed + "/lib/blockscope/libblockscope_sim.a") && exists(installed + "/include/blockscope/sim/kernel_prelude.h")) {
    p.root = installed + "/include/blockscope";
    p.library = installed + "/lib/blockscope/libblockscope_sim.a";
  } else {
    p.root = BLOCKSCOPE_SIM_SOURCE_ROOT;
    p.library = BLOCKSCOPE_SIM_LIBRARY;
  }
  p.shadow_include = p.root + "/sim/cuda_include";
  p.cuda_include = BLOCKSCOPE_SIM_CUDA_INCLUDE;
  const char* cxx = std::getenv("NVCC_SIM_CXX");
  p.cxx = cxx != nullptr && *cxx != '\0' ? cxx : BLOCKSCOPE_SIM_CXX;
  const char* nvcc = std::getenv("NVCC_SIM_NVCC");
  p.nvcc = nvcc != nullptr ? nvcc : BLOCKSCOPE_SIM_NVCC;
  return p;
}

Args split_list(const std::string& text, char separator) {
  Args out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// ---- Running tools ---------------------------------------------------------------------------------
bool g_verbose = false;

std::string quoted(const Args& args) {
  std::string out;
  for (const std::string& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs `args`; with `capture`, stdout and stderr go to that file. Returns the exit status.
int run(const Args& args, const std::string& capture = "") {
  if (g_verbose) std::cerr << "nvcc-sim: " << quoted(args) << "\n";
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!capture.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, capture.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    std::cerr << "nvcc-sim: error: cannot run " << args[0] << ": " << std::strerror(error) << "\n";
    return 127;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// ---- Compiling one .cu ---------------------------------------------------------------------------------
struct CuCompile {
  std::string source, object;
  Args flags;      // for the host compiler: everything but -c, -o, the source and dependency flags
  Args dep_flags;  // -MD/-MT/-MF…: given to the preprocessing step, which sees every header
  bool resources = true;
  bool keep = false;
};

bool sanitized(const Args& flags) {
  for (const std::string& f : flags) {
    if (starts_with(f, "-fsanitize=") && (f.find("address") != std::string::npos || f.find("thread") != std::string::npos ||
                                          f.find("memory") != std::string::npos)) {
      return true;
    }
  }
  return false;
}

bool is_clang(const std::string& cxx) { return directory_of(cxx) != cxx && cxx.find("clang") != std::string::npos; }

// What the compile step adds: the access instrumentation (not under ASan, whose own checks take
// its place), line tables for fault messages, no SRA (it splits a float4 load into four floats, so
// a misaligned vector access would no longer be one access), no strict aliasing (CUDA code
// reinterprets pointers freely), stack-clash probes (a big local array hits the guard page), and
// with GCC no TLS wrapper calls (the built-in variables are extern thread_local of trivial types:
// without the flag every threadIdx read called a wrapper through the PLT). Under the sanitizers,
// no UBSan null check: GCC checks a built-in's address by an `add` whose flags a `je` then reads,
// and the linker rewrites that `add` into a `lea` (TLS relaxation), which sets none — a false
// "member access within null pointer" (ASan still faults on a real null access).
Args instrumentation(const std::string& cxx, const Args& flags) {
  Args out{"-fno-strict-aliasing", "-fstack-clash-protection", "-Wno-unknown-pragmas"};
  if (!is_clang(cxx)) out.push_back("-fno-extern-tls-init");
  bool has_g = false;
  for (const std::string& f : flags) has_g = has_g || starts_with(f, "-g");
  if (!has_g) out.push_back("-g1");
  if (sanitized(flags)) {
    out.push_back("-fno-sanitize=null");
    return out;
  }
  if (std::getenv("NVCC_SIM_NO_CHECKS") != nullptr) return out;
  out.push_back("-fsanitize=thread");
  if (is_clang(cxx)) {
    for (const char* f : {"-mllvm", "-tsan-instrument-func-entry-exit=0", "-mllvm", "-tsan-distinguish-volatile=1"})
      out.push_back(f);
  } else {
    // max-inline-insns-auto: GCC instruments assignments, not a call's left-hand side, so in
    // `y[i] = __float2half(v)` with the conversion left a call, the store to y[i] went unchecked
    // (the f16 kernels' output stores did). Inlined, it is an assignment like any other.
    for (const char* f : {"--param=tsan-instrument-func-entry-exit=0", "--param=tsan-distinguish-volatile=1", "-fno-tree-sra",
                          "--param=max-inline-insns-auto=100"})
      out.push_back(f);
  }
  return out;
}

// nvcc's view of the same source: the preprocessor flags, without the simulator's own.
Args nvcc_flags(const Paths& paths, const Args& flags) {
  Args out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    const bool pair = (f == "-I" || f == "-D" || f == "-U" || f == "-isystem") && i + 1 < flags.size();
    const std::string value = pair ? flags[i + 1] : f.substr(f == "-isystem" ? 8 : 2);
    if (starts_with(f, "-D") && starts_with(value, "BLOCKSCOPE_CUDA_SIM")) {
      if (pair) ++i;
      continue;
    }
    if ((starts_with(f, "-I") || f == "-isystem") && (value == paths.shadow_include || value == paths.cuda_include)) {
      if (pair) ++i;
      continue;
    }
    if (starts_with(f, "-I") || starts_with(f, "-D") || starts_with(f, "-U") || f == "-isystem" || starts_with(f, "-std=")) {
      out.push_back(f);
      if (pair) out.push_back(flags[++i]);
    }
  }
  return out;
}

const blockscope::sim::nvcc::CompilerCache& compiler_cache() {
  static const auto cache = blockscope::sim::nvcc::CompilerCache::from_environment();
  return cache;
}

int compile_cu(const Paths& paths, const CuCompile& c) {
  const auto& cache = compiler_cache();
  const std::string preprocessed = c.object + ".sim.ii";
  const std::string rewritten = c.object + ".sim.rewritten.ii";
  const std::string ptxas_log = c.object + ".sim.ptxas.txt";
  const std::string cubin = c.object + ".sim.cubin";

  // nvcc's ptxas figures, in parallel with the host compile (it takes a while).
  pid_t nvcc_pid = -1;
  if (c.resources && !paths.nvcc.empty() && exists(paths.nvcc)) {
    // -c with -cubin: the cubin all the same, and a compile ccache agrees to cache.
    Args args{paths.nvcc, "-arch=sm_90", "-cubin", "-c", "--resource-usage", "-w", "--expt-relaxed-constexpr",
              "--expt-extended-lambda"};
    bool has_std = false;
    for (const std::string& f : cache.relative_flags(nvcc_flags(paths, c.flags))) {
      has_std = has_std || starts_with(f, "-std=");
      args.push_back(f);
    }
    if (!has_std) args.push_back("-std=c++17");
    for (const std::string& f : Args{"-x", "cu", cache.relative(c.source), "-o", cubin}) args.push_back(f);
    nvcc_pid = fork();
    if (nvcc_pid == 0) _exit(run(cache.wrap(args), ptxas_log));
  }

  Args pre{paths.cxx, "-I" + paths.shadow_include, "-I" + paths.root};
  for (const std::string& f : c.flags) pre.push_back(f);
  for (const std::string& f : Args{"-isystem", paths.cuda_include, "-include", paths.root + "/sim/kernel_prelude.h",
                                   "-x", "c++", "-E"})
    pre.push_back(f);
  pre = cache.relative_flags(pre);
  for (const std::string& f : c.dep_flags) pre.push_back(f);
  for (const std::string& f : Args{cache.relative(c.source), "-o", preprocessed}) pre.push_back(f);
  int status = run(pre);

  std::string text;
  if (status == 0 && !read_file(preprocessed, &text)) {
    std::cerr << "nvcc-sim: error: cannot read " << preprocessed << "\n";
    status = 1;
  }
  blockscope::sim::nvcc::RewriteResult result;
  if (status == 0) {
    result = blockscope::sim::nvcc::rewrite(text);
    for (const std::string& e : result.errors) std::cerr << e << "\n";
    if (!result.errors.empty()) status = 1;
  }
  std::string figures, nvcc_failure;
  if (nvcc_pid > 0) {
    int nvcc_status = 0;
    waitpid(nvcc_pid, &nvcc_status, 0);
    std::string log;
    read_file(ptxas_log, &log);
    if (WIFEXITED(nvcc_status) && WEXITSTATUS(nvcc_status) == 0) {
      figures = blockscope::sim::nvcc::resource_table(blockscope::sim::nvcc::parse_ptxas(log));
    } else {
      nvcc_failure = log;
    }
    if (!c.keep) {
      std::remove(ptxas_log.c_str());
      std::remove(cubin.c_str());
    }
  }
  if (status == 0 && !write_file(rewritten, result.text + "\n" + figures)) {
    std::cerr << "nvcc-sim: error: cannot write " << rewritten << "\n";
    status = 1;
  }
  if (status == 0) {
    Args compile{paths.cxx};
    for (size_t i = 0; i < c.flags.size(); ++i) {
      const std::string& f = c.flags[i];
      if (f == "-include" || f == "-x") {
        ++i;
        continue;
      }
      compile.push_back(f);
    }
    for (const std::string& f : instrumentation(paths.cxx, c.flags)) compile.push_back(f);
    for (const std::string& f : Args{"-c", rewritten, "-o", c.object}) compile.push_back(f);
    status = run(cache.wrap(compile));
  }
  if (status == 0 && !nvcc_failure.empty()) {
    std::cerr << "nvcc-sim: warning: nvcc could not compile " << c.source
              << " for sm_90, so its kernels' registers and static shared memory are unknown on the simulator:\n"
              << nvcc_failure;
  }
  if (!c.keep) {
    std::remove(preprocessed.c_str());
    std::remove(rewritten.c_str());
  }
  return status;
}

// ---- As a compiler launcher -----------------------------------------------------------------------------
int launcher(const Paths& base, const Args& args) {
  size_t i = 0;
  bool resources = true, keep = false;
  while (i < args.size() && starts_with(args[i], "--")) {
    if (args[i] == "--resources=off") resources = false;
    if (args[i] == "--keep") keep = true;
    if (args[i] == "-v" || args[i] == "--verbose") g_verbose = true;
    ++i;
  }
  if (i >= args.size()) {
    std::cerr << "nvcc-sim: error: --compiler-launcher needs the compiler and its arguments\n";
    return 2;
  }
  Args command(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  CuCompile c;
  c.resources = resources;
  c.keep = keep;
  for (size_t k = 1; k < command.size(); ++k) {
    const std::string& a = command[k];
    if (a == "-o" && k + 1 < command.size()) {
      c.object = command[++k];
    } else if (a == "-c" && k + 1 < command.size()) {
      c.source = command[++k];
    } else if (a == "-MD" || a == "-MMD") {
      c.dep_flags.push_back(a);
    } else if ((a == "-MT" || a == "-MF" || a == "-MQ") && k + 1 < command.size()) {
      c.dep_flags.push_back(a);
      c.dep_flags.push_back(command[++k]);
    } else {
      c.flags.push_back(a);
    }
  }
  if (!ends_with(c.source, ".cu") || c.object.empty()) {
    std::vector<char*> argv;
    const Args wrapped = compiler_cache().wrap(command);
    for (const std::string& a : wrapped) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::cerr << "nvcc-sim: error: cannot run " << wrapped[0] << ": " << std::strerror(errno) << "\n";
    return 127;
  }
  Paths paths = base;
  paths.cxx = command[0];
  return compile_cu(paths, c);
}

// ---- As nvcc ------------------------------------------------------------------------------------------------
const char* kUsage =
    "usage: nvcc-sim [options] file... \n"
    "Compiles CUDA (.cu) and C++ sources for the simulated GPU and links them with it.\n"
    "  -o FILE            output (default a.out; with -c, FILE.o per source)\n"
    "  -c                 compile only        -E  preprocess and rewrite only (the C++ the sim compiles)\n"
    "  -I DIR -D NAME[=V] -U NAME -include F -isystem DIR   as nvcc\n"
    "  -O0..3 -g -G -lineinfo -std=c++17|c++20 -w -W...   as nvcc (-G: -g)\n"
    "  -l LIB -L DIR      cudart, cuda, cublas, cublasLt, nccl are the simulator's own; others are linked\n"
    "  -Xcompiler A,B     host compiler options     -Xlinker A   linker option\n"
    "  -arch/-gencode/-code, --expt-relaxed-constexpr, --expt-extended-lambda, --use_fast_math: accepted\n"
    "  --resources=off    do not ask nvcc for ptxas's figures (registers, static shared memory)\n"
    "  --keep             keep the intermediate files     -v  print the commands\n"
    "Environment: BLOCKSCOPE_SIM_SCHEDULE, BLOCKSCOPE_SIM_CHECKS (at run time), NVCC_SIM_CXX, NVCC_SIM_NVCC,\n"
    "  NVCC_SIM_CCACHE (compile through this ccache; paths under CCACHE_BASEDIR are given relative).\n";

int driver(const Paths& paths, const Args& args) {
  Args sources, objects, compile_flags, link_flags;
  std::string output;
  bool compile_only = false, preprocess_only = false, resources = true, keep = false;
  auto value = [&](size_t& i, const std::string& flag) -> std::string {
    const std::string& a = args[i];
    if (a.size() > flag.size()) return a[flag.size()] == '=' ? a.substr(flag.size() + 1) : a.substr(flag.size());
    if (i + 1 >= args.size()) {
      std::cerr << "nvcc-sim: error: " << flag << " needs a value\n";
      std::exit(2);
    }
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "nvcc-sim (blockscope simulated GPU, sm_90 / H200; CUDA " << CUDART_VERSION_TEXT << " headers)\n";
      return 0;
    }
    if (a == "-o") {
      output = value(i, "-o");
    } else if (a == "-c") {
      compile_only = true;
    } else if (a == "-E") {
      preprocess_only = true;
    } else if (starts_with(a, "-I")) {
      compile_flags.push_back("-I" + value(i, "-I"));
    } else if (starts_with(a, "-D")) {
      compile_flags.push_back("-D" + value(i, "-D"));
    } else if (starts_with(a, "-U")) {
      compile_flags.push_back("-U" + value(i, "-U"));
    } else if (a == "-include" || a == "-isystem") {
      compile_flags.push_back(a);
      compile_flags.push_back(value(i, a));
    } else if (starts_with(a, "-O")) {
      compile_flags.push_back(a.size() == 2 ? "-O" + value(i, "-O") : a);
    } else if (a == "-g" || a == "-G" || a == "--device-debug" || a == "--debug") {
      compile_flags.push_back("-g");
    } else if (a == "-lineinfo" || a == "--generate-line-info") {
      compile_flags.push_back("-g1");
    } else if (starts_with(a, "-std") || starts_with(a, "--std")) {
      compile_flags.push_back("-std=" + value(i, starts_with(a, "--std") ? "--std" : "-std"));
    } else if (starts_with(a, "-l")) {
      const std::string lib = value(i, "-l");
      if (lib != "cudart" && lib != "cudart_static" && lib != "cuda" && lib != "cublas" && lib != "cublasLt" &&
          lib != "nccl" && lib != "cudadevrt") {
        link_flags.push_back("-l" + lib);
      }
    } else if (starts_with(a, "-L")) {
      link_flags.push_back("-L" + value(i, "-L"));
    } else if (a == "-Xcompiler" || a == "--compiler-options" || starts_with(a, "-Xcompiler=")) {
      // As nvcc: the host compiler gets them when it compiles and when it links (llm.c's
      // `-Xcompiler -fopenmp` needs libgomp at the link).
      for (const std::string& f : split_list(value(i, starts_with(a, "-Xcompiler") ? "-Xcompiler" : a), ',')) {
        compile_flags.push_back(f);
        link_flags.push_back(f);
      }
    } else if (a == "-Xlinker" || a == "--linker-options" || starts_with(a, "-Xlinker=")) {
      for (const std::string& f : split_list(value(i, starts_with(a, "-Xlinker") ? "-Xlinker" : a), ',')) {
        link_flags.push_back("-Wl," + f);
      }
    } else if (a == "-arch" || a == "--gpu-architecture" || a == "-gencode" || a == "--generate-code" ||
               a == "-code" || a == "--gpu-code") {
      value(i, a);  // the simulated GPU is an sm_90; the architecture asked for does not change it
    } else if (starts_with(a, "-arch=") || starts_with(a, "--gpu-architecture=") || starts_with(a, "-gencode=") ||
               starts_with(a, "--generate-code=") || starts_with(a, "-code=") || starts_with(a, "--gpu-code=")) {
    } else if (a == "--expt-relaxed-constexpr" || a == "--expt-extended-lambda" || a == "--extended-lambda" ||
               a == "--use_fast_math" || a == "-use_fast_math" || a == "-m64" || a == "--m64" ||
               starts_with(a, "-Xptxas") || starts_with(a, "--ptxas-options")) {
      if ((a == "-Xptxas" || a == "--ptxas-options") && i + 1 < args.size()) ++i;
    } else if (a == "-rdc=true" || a == "--relocatable-device-code=true" || a == "-dc") {
      std::cerr << "nvcc-sim: error: separate compilation of device code (" << a
                << ") is not supported: every kernel is compiled with its .cu\n";
      return 2;
    } else if (a == "-rdc=false" || a == "--relocatable-device-code=false") {
    } else if (a == "--resources=off") {
      resources = false;
    } else if (a == "--keep") {
      keep = true;
    } else if (a == "-v" || a == "--verbose") {
      g_verbose = true;
    } else if (a == "-w" || starts_with(a, "-W") || starts_with(a, "-f")) {
      compile_flags.push_back(a);
    } else if (starts_with(a, "-")) {
      std::cerr << "nvcc-sim: error: unknown option '" << a << "' (nvcc-sim --help lists the ones it takes)\n";
      return 2;
    } else if (ends_with(a, ".o") || ends_with(a, ".a") || ends_with(a, ".so")) {
      objects.push_back(a);
    } else if (ends_with(a, ".cu") || ends_with(a, ".cpp") || ends_with(a, ".cc") || ends_with(a, ".cxx") ||
               ends_with(a, ".c") || ends_with(a, ".C")) {
      sources.push_back(a);
    } else {
      std::cerr << "nvcc-sim: error: '" << a << "': not a source (.cu, .cpp, .cc, .cxx, .c) or object file\n";
      return 2;
    }
  }
  if (sources.empty() && objects.empty()) {
    std::cerr << "nvcc-sim: error: no input files\n" << kUsage;
    return 2;
  }
  if ((compile_only || preprocess_only) && !output.empty() && sources.size() > 1) {
    std::cerr << "nvcc-sim: error: -o with -c or -E takes one source\n";
    return 2;
  }
  if (std::find_if(compile_flags.begin(), compile_flags.end(), [](const std::string& f) { return starts_with(f, "-std"); }) ==
      compile_flags.end()) {
    compile_flags.push_back("-std=c++17");
  }
  for (const std::string& f : split_list(BLOCKSCOPE_SIM_SANITIZE_FLAGS, ';')) compile_flags.push_back(f);

  Args to_link = objects, temporaries;
  for (const std::string& source : sources) {
    const std::string stem = source.substr(source.rfind('/') == std::string::npos ? 0 : source.rfind('/') + 1);
    std::string object = compile_only && !output.empty() ? output : stem.substr(0, stem.rfind('.')) + ".o";
    if (!compile_only && !preprocess_only) {
      object = (output.empty() ? std::string("a.out") : output) + "." + stem + ".o";
      temporaries.push_back(object);
    }
    if (preprocess_only) {
      if (!ends_with(source, ".cu")) {
        std::cerr << "nvcc-sim: error: -E rewrites .cu sources only\n";
        return 2;
      }
      CuCompile c{source, output.empty() ? stem + ".sim.cpp" : output, compile_flags, {}, false, true};
      Args pre{paths.cxx, "-I" + paths.shadow_include, "-I" + paths.root};
      for (const std::string& f : compile_flags) pre.push_back(f);
      const std::string ii = c.object + ".ii";
      for (const std::string& f : Args{"-isystem", paths.cuda_include, "-include", paths.root + "/sim/kernel_prelude.h",
                                       "-x", "c++", "-E", source, "-o", ii})
        pre.push_back(f);
      if (const int status = run(pre); status != 0) return status;
      std::string text;
      read_file(ii, &text);
      std::remove(ii.c_str());
      const auto result = blockscope::sim::nvcc::rewrite(text);
      for (const std::string& e : result.errors) std::cerr << e << "\n";
      if (!result.errors.empty()) return 1;
      if (output.empty() || output == "-") {
        std::cout << result.text;
      } else if (!write_file(output, result.text)) {
        std::cerr << "nvcc-sim: error: cannot write " << output << "\n";
        return 1;
      }
      continue;
    }
    int status = 0;
    if (ends_with(source, ".cu")) {
      status = compile_cu(paths, CuCompile{source, object, compile_flags, {}, resources, keep});
    } else {
      Args compile{paths.cxx, "-I" + paths.root};
      for (const std::string& f : compile_flags) compile.push_back(f);
      for (const std::string& f : Args{"-isystem", paths.cuda_include, "-c", source, "-o", object}) compile.push_back(f);
      status = run(compiler_cache().wrap(compile));
    }
    if (status != 0) {
      for (const std::string& t : temporaries) std::remove(t.c_str());
      return status;
    }
    to_link.push_back(object);
  }
  if (compile_only || preprocess_only) return 0;
  Args link{paths.cxx};
  for (const std::string& o : to_link) link.push_back(o);
  for (const std::string& f : Args{"-o", output.empty() ? "a.out" : output, paths.library}) link.push_back(f);
  for (const std::string& f : split_list(BLOCKSCOPE_SIM_LINK_LIBRARIES, ';')) link.push_back(f);
  for (const std::string& f : split_list(BLOCKSCOPE_SIM_SANITIZE_FLAGS, ';')) link.push_back(f);
  for (const std::string& f : link_flags) link.push_back(f);
  for (const std::string& f : Args{"-pthread", "-ldl"}) link.push_back(f);
  const int status = run(link);
  if (!keep) {
    for (const std::string& t : temporaries) std::remove(t.c_str());
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argv + 1, argv + argc);
  const Paths paths = find_paths();
  if (!args.empty() && args[0] == "--compiler-launcher") return launcher(paths, Args(args.begin() + 1, args.end()));
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  return driver(paths, args);
}
