// The program as the simulated GPU sees it:
//   - its __device__, __constant__ and __managed__ variables (nvcc-sim registers each
//     namespace-scope definition): one copy per simulated device of the first two, swapped into
//     the variables when a grid of another device runs; cudaMemcpyToSymbol & co. on them;
//   - its read-only data (/proc/self/maps), which kernels may read (string literals, tables);
//   - its function symbols (the executable's ELF symbol table), for kernel names in messages and
//     for the ptxas figures nvcc-sim recorded under each kernel's mangled name.
#include "sim/symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "sim/device.h"
#include "sim/runtime_state.h"
#include "sim/sim.h"

namespace blockscope::sim {
namespace exec {
namespace {

// ---- Variables ----------------------------------------------------------------------------------
struct Variable {
  SymbolRange range;
  VariableKind kind;
  std::vector<unsigned char> initial;               // the value at start-up
  std::map<int, std::vector<unsigned char>> copies;  // other devices' copies while not loaded
};

// Registration happens during static initialisation, before main: a function-local static.
std::vector<std::unique_ptr<Variable>>& variables() {
  static std::vector<std::unique_ptr<Variable>> list;
  return list;
}
bool g_sorted = false;
int g_loaded_device = 0;

void sort_variables() {
  if (g_sorted) return;
  auto& list = variables();
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a->range.base < b->range.base; });
  g_sorted = true;
}

Variable* variable_at(const void* address) {
  sort_variables();
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto& list = variables();
  auto it = std::upper_bound(list.begin(), list.end(), a,
                             [](uintptr_t x, const std::unique_ptr<Variable>& v) { return x < v->range.base; });
  if (it == list.begin()) return nullptr;
  --it;
  return a < (*it)->range.end ? it->get() : nullptr;
}

// ---- Read-only data -------------------------------------------------------------------------------
struct Mapping {
  uintptr_t start, end;
};
std::vector<Mapping> g_readonly;
bool g_readonly_loaded = false;

void load_readonly() {
  g_readonly.clear();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &start, &end, perms) != 3) continue;
    const size_t slash = line.find('/');
    if (perms[0] != 'r' || perms[1] == 'w' || slash == std::string::npos) continue;  // file-backed, read-only
    g_readonly.push_back(Mapping{start, end});
  }
  g_readonly_loaded = true;
}

// ---- Functions ------------------------------------------------------------------------------------
struct Function {
  uintptr_t address;
  std::string mangled;
};

int main_program(struct dl_phdr_info* info, size_t, void* data) {
  *static_cast<uintptr_t*>(data) = info->dlpi_addr;
  return 1;  // the first object is the program itself
}

// The executable's function symbols, by address (read once, from its ELF .symtab).
const std::vector<Function>& functions() {
  static const std::vector<Function> list = [] {
    std::vector<Function> out;
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      close(fd);
      return out;
    }
    const size_t size = static_cast<size_t>(st.st_size);
    void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (mapped == MAP_FAILED) return out;
    const auto* base = static_cast<const unsigned char*>(mapped);
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(base);
    uintptr_t bias = 0;
    dl_iterate_phdr(&main_program, &bias);
    const bool valid = std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
                       header->e_shoff + uint64_t{header->e_shnum} * sizeof(Elf64_Shdr) <= size;
    if (valid) {
      const auto* sections = reinterpret_cast<const Elf64_Shdr*>(base + header->e_shoff);
      for (unsigned i = 0; i < header->e_shnum; ++i) {
        if (sections[i].sh_type != SHT_SYMTAB || sections[i].sh_link >= header->e_shnum) continue;
        const Elf64_Shdr& symtab = sections[i];
        const Elf64_Shdr& strtab = sections[symtab.sh_link];
        if (symtab.sh_offset + symtab.sh_size > size || strtab.sh_offset + strtab.sh_size > size) continue;
        const auto* symbols = reinterpret_cast<const Elf64_Sym*>(base + symtab.sh_offset);
        const auto* names = reinterpret_cast<const char*>(base + strtab.sh_offset);
        for (size_t s = 0; s < symtab.sh_size / sizeof(Elf64_Sym); ++s) {
          if (ELF64_ST_TYPE(symbols[s].st_info) != STT_FUNC || symbols[s].st_value == 0) continue;
          if (symbols[s].st_name >= strtab.sh_size) continue;
          out.push_back(Function{bias + symbols[s].st_value, names + symbols[s].st_name});
        }
      }
    }
    munmap(mapped, size);
    std::sort(out.begin(), out.end(), [](const Function& a, const Function& b) { return a.address < b.address; });
    return out;
  }();
  return list;
}

std::map<std::string, KernelResources>& resources() {
  static std::map<std::string, KernelResources> table;
  return table;
}

}  // namespace

const SymbolRange* find_symbol(uintptr_t a) {
  Variable* v = variable_at(reinterpret_cast<const void*>(a));
  return v == nullptr ? nullptr : &v->range;
}

bool readonly_image(uintptr_t a, size_t n) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!g_readonly_loaded || attempt == 1) load_readonly();  // a library loaded since: look again
    for (const Mapping& m : g_readonly) {
      if (a >= m.start && a + n <= m.end) return true;
    }
  }
  return false;
}

void load_symbols_for_device(int device) {
  if (device == g_loaded_device) return;
  for (auto& v : variables()) {
    if (v->kind == VariableKind::managed) continue;  // one copy, visible to every device
    auto* live = reinterpret_cast<unsigned char*>(v->range.base);
    const size_t bytes = v->range.end - v->range.base;
    v->copies[g_loaded_device].assign(live, live + bytes);
    auto it = v->copies.find(device);
    const std::vector<unsigned char>& next = it != v->copies.end() ? it->second : v->initial;
    std::memcpy(live, next.data(), bytes);
  }
  g_loaded_device = device;
}

std::string mangled_name_at(const void* address) {
  const auto& list = functions();
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto it = std::lower_bound(list.begin(), list.end(), a, [](const Function& f, uintptr_t x) { return f.address < x; });
  return it != list.end() && it->address == a ? it->mangled : std::string();
}

}  // namespace exec

// ---- device.h ------------------------------------------------------------------------------------------
DeviceVariable::DeviceVariable(void* address, size_t bytes, const char* name, VariableKind kind) {
  if (exec::variable_at(address) != nullptr) return;  // a header's static registered twice
  auto v = std::make_unique<exec::Variable>();
  const auto base = reinterpret_cast<uintptr_t>(address);
  v->range = exec::SymbolRange{base, base + bytes, name, kind == VariableKind::constant};
  v->kind = kind;
  v->initial.assign(static_cast<unsigned char*>(address), static_cast<unsigned char*>(address) + bytes);
  exec::variables().push_back(std::move(v));
  exec::g_sorted = false;
}

// ---- sim.h ----------------------------------------------------------------------------------------------
void register_kernel_resources(const KernelResources* list, size_t count) {
  for (size_t i = 0; i < count; ++i) exec::resources()[list[i].mangled_name] = list[i];
}

bool kernel_resources(const void* function, KernelResources* out) {
  if (exec::resources().empty()) return false;
  const std::string name = exec::mangled_name_at(function);
  auto it = exec::resources().find(name);
  if (name.empty() || it == exec::resources().end()) return false;
  *out = it->second;
  return true;
}

namespace {
// Registered during static initialisation of the programs nvcc-sim builds: constructed on first use.
std::mutex& launchers_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<const void*, PointerLauncher>& launchers() {
  static std::map<const void*, PointerLauncher> by_kernel;
  return by_kernel;
}
}  // namespace

void register_pointer_launcher(const void* kernel, PointerLauncher launcher) {
  std::lock_guard<std::mutex> lock(launchers_mutex());
  launchers()[kernel] = launcher;
}

PointerLauncher find_pointer_launcher(const void* kernel) {
  std::lock_guard<std::mutex> lock(launchers_mutex());
  auto it = launchers().find(kernel);
  return it == launchers().end() ? nullptr : it->second;
}

std::string function_name(const void* address) {
  const std::string mangled = exec::mangled_name_at(address);
  if (mangled.empty()) return "";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  return out;
}

std::string short_function_name(const void* address) {
  const std::string full = function_name(address);
  if (full.empty()) return "";
  // Drop the parameter list: the last top-level "(…)".
  size_t end = full.size();
  int depth = 0;
  for (size_t i = full.size(); i-- > 0;) {
    const char c = full[i];
    if (c == ')' || c == '>') ++depth;
    if (c == '(' || c == '<') --depth;
    if (c == '(' && depth == 0) {
      end = i;
      break;
    }
  }
  // Back to the start of the last name component (past "::" or a return type, outside <>).
  size_t start = 0;
  depth = 0;
  for (size_t i = end; i-- > 0;) {
    const char c = full[i];
    if (c == '>') ++depth;
    if (c == '<') --depth;
    if (depth == 0 && (c == ' ' || (c == ':' && i > 0 && full[i - 1] == ':'))) {
      start = i + 1;
      break;
    }
  }
  return full.substr(start, end - start);
}

}  // namespace blockscope::sim

// ---- The runtime's symbol functions -------------------------------------------------------------------
using namespace blockscope::sim;
using namespace blockscope::sim::detail;

namespace {

// The variable a symbol names (`symbol` is its host address, as the C++ templates pass &var).
exec::Variable* symbol_variable(const void* symbol) {
  exec::Variable* v = exec::variable_at(symbol);
  return v != nullptr && reinterpret_cast<uintptr_t>(symbol) == v->range.base ? v : nullptr;
}

cudaError_t symbol_copy(void* dst, const void* src, size_t count, bool to_symbol, const void* symbol, size_t offset,
                        cudaMemcpyKind kind, cudaStream_t stream, bool async) {
  exec::Variable* v = symbol_variable(symbol);
  if (v == nullptr) return cudaErrorInvalidSymbol;
  const size_t size = v->range.end - v->range.base;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  const bool wrong_way = kind == cudaMemcpyHostToHost || (to_symbol && kind == cudaMemcpyDeviceToHost) ||
                         (!to_symbol && kind == cudaMemcpyHostToDevice);
  if (wrong_way || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (count == 0) return cudaSuccess;
  CUstream_st* s = resolve_stream(async ? stream : nullptr);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  const int device = s->device;
  auto* live = reinterpret_cast<unsigned char*>(v->range.base) + offset;
  auto op = [device, live, dst, src, count, to_symbol]() {
    exec::load_symbols_for_device(device);
    if (to_symbol) {
      note_op_access(src, count, false);
      std::memcpy(live, src, count);
    } else {
      note_op_access(dst, count, true);
      std::memcpy(dst, live, count);
      note_written(dst, count);  // initcheck: a symbol's bytes count as written
    }
  };
  if (!async) {
    if (const cudaError_t error = check_unsafe_call(); error != cudaSuccess) return error;
    if (const cudaError_t error = run_through(UINT64_MAX); error != cudaSuccess) return error;
    op();
    return cudaSuccess;
  }
  if (to_symbol && kind != cudaMemcpyDeviceToDevice) {
    // A pageable source is staged at the call, as for cudaMemcpyAsync.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                static_cast<const unsigned char*>(src) + count);
    return submit(s, "Memcpy HtoD (symbol)", [device, live, staged]() {
      exec::load_symbols_for_device(device);
      std::memcpy(live, staged->data(), staged->size());
    });
  }
  return submit(s, to_symbol ? "Memcpy DtoD (symbol)" : "Memcpy DtoH (symbol)", op);
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  return result(symbol_copy(nullptr, src, count, true, symbol, offset, kind, nullptr, false));
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, enum cudaMemcpyKind kind) {
  Lock lock(state_mutex());
  return result(symbol_copy(dst, nullptr, count, false, symbol, offset, kind, nullptr, false));
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(state_mutex());
  return result(symbol_copy(nullptr, src, count, true, symbol, offset, kind, stream, true));
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(state_mutex());
  return result(symbol_copy(dst, nullptr, count, false, symbol, offset, kind, stream, true));
}

// The variable's address: kernels of the device whose copy is loaded see it there (the copies of
// several devices share one address on the simulator).
cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  Lock lock(state_mutex());
  if (devPtr == nullptr) return result(cudaErrorInvalidValue);
  exec::Variable* v = symbol_variable(symbol);
  if (v == nullptr) return result(cudaErrorInvalidSymbol);
  if (const cudaError_t error = run_through(UINT64_MAX); error != cudaSuccess) return result(error);
  exec::load_symbols_for_device(current_device());
  *devPtr = reinterpret_cast<void*>(v->range.base);
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  Lock lock(state_mutex());
  if (size == nullptr) return result(cudaErrorInvalidValue);
  exec::Variable* v = symbol_variable(symbol);
  if (v == nullptr) return result(cudaErrorInvalidSymbol);
  *size = v->range.end - v->range.base;
  return cudaSuccess;
}

}  // extern "C"
