// See resources.h. ptxas prints, per entry function:
//   ptxas info    : Compiling entry function '_Z…' for 'sm_90'
//   ptxas info    : Function properties for _Z…
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 92 registers, used 1 barriers, 33280 bytes smem, 400 bytes cmem[0]
#include "sim/nvcc_sim/resources.h"

#include <regex>
#include <sstream>

namespace blockscope::sim::nvcc {

std::vector<KernelFigures> parse_ptxas(const std::string& log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex properties(R"(Function properties for (\S+))");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<KernelFigures> out;
  std::istringstream in(log);
  std::string line;
  KernelFigures* current = nullptr;
  std::string properties_of;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      out.push_back(KernelFigures{m[1], 0, 0, 0, 0});
      current = &out.back();
    } else if (std::regex_search(line, m, properties)) {
      properties_of = m[1];
    } else if (std::regex_search(line, m, stack)) {
      if (current != nullptr && properties_of == current->mangled_name) current->stack = std::stoi(m[1]);
    } else if (std::regex_search(line, m, used) && current != nullptr) {
      current->registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) current->barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) current->static_smem = std::stoi(m[1]);
      current = nullptr;  // a device function's figures follow without "entry"
    }
  }
  return out;
}

std::string resource_table(const std::vector<KernelFigures>& kernels) {
  if (kernels.empty()) return "";
  std::string out = "static const ::blockscope::sim::KernelResources bs_kernel_resources[] = {";
  for (const KernelFigures& k : kernels) {
    out += "{\"" + k.mangled_name + "\", " + std::to_string(k.registers) + ", " + std::to_string(k.static_smem) + ", " +
           std::to_string(k.stack) + ", " + std::to_string(k.barriers) + "}, ";
  }
  out += "}; static const int bs_kernel_resources_registered = (::blockscope::sim::register_kernel_resources(bs_kernel_resources, " +
         std::to_string(kernels.size()) + "), 0);\n";
  return out;
}

}  // namespace blockscope::sim::nvcc
