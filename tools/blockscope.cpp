// Placeholder until the CLI lands (issue: workloads and command line).
#include <cstdio>
int main() {
  std::puts("blockscope: command line not built yet");
  return 0;
}
