// Internal to the simulated GPU: the program's __device__, __constant__ and __managed__ variables
// (one copy per simulated device), its read-only data, and its function symbols (kernel names and
// the ptxas figures recorded per kernel). See symbols.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace blockscope::sim::exec {

struct SymbolRange {
  uintptr_t base, end;
  const char* name;
  bool constant;  // __constant__: read-only in kernels
};
// The registered variable holding address `a`, or nullptr.
const SymbolRange* find_symbol(uintptr_t a);
// Whether [a, a + n) is read-only data of a loaded object (string literals, constant tables).
bool readonly_image(uintptr_t a, size_t n);
// Makes the variables hold `device`'s copies (grids run on one device at a time).
void load_symbols_for_device(int device);
// The mangled name of the function starting exactly at `address` ("" when unknown).
std::string mangled_name_at(const void* address);

}  // namespace blockscope::sim::exec
