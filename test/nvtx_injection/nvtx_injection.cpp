// A minimal NVTX injection library, so tests can observe NVTX ranges without Nsight.
//
// NVTX's first call in a process reads NVTX_INJECTION64_PATH, dlopens that library and calls
// its InitializeInjectionNvtx2(getExportTable). We ask the export table for the CORE2
// (domain) function table and replace the slots we care about: domain create/destroy, string
// registration, range push/pop. Every push and pop is logged with its domain, name, nesting
// depth (per thread and domain), colour and whether the name came as a registered string.
// The test reads the log through blockscope_nvtx_log(), found with dlopen(RTLD_NOLOAD).
#define NVTX_NO_IMPL  // we are the tool: types only, no NVTX API implementation
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

// The handles NVTX hands back are pointers to structures that the tool defines.
struct nvtxDomainRegistration_st {
  std::string name;
};
struct nvtxStringRegistration_st {
  std::string text;
};

namespace {

std::mutex g_mutex;
std::vector<std::string> g_log;                     // one line per event
std::map<std::string, int> g_registrations;         // "domain|text" -> times registered
// Handles are kept for the process lifetime (the log may name them). The vectors are never
// destroyed, so the handles stay reachable at exit and LeakSanitizer does not report them.
std::vector<nvtxDomainRegistration_st*>& g_domains = *new std::vector<nvtxDomainRegistration_st*>;
std::vector<nvtxStringRegistration_st*>& g_strings = *new std::vector<nvtxStringRegistration_st*>;
thread_local std::map<std::string, int> t_depth;    // open ranges per domain on this thread

std::string domain_name(nvtxDomainHandle_t domain) { return domain != nullptr ? domain->name : "(default)"; }

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_domains.push_back(new nvtxDomainRegistration_st{name != nullptr ? name : ""});
  return g_domains.back();
}

void NVTX_API domain_destroy(nvtxDomainHandle_t) {}  // handles stay valid: the log may name them

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t domain, const char* text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_strings.push_back(new nvtxStringRegistration_st{text != nullptr ? text : ""});
  g_registrations[domain_name(domain) + "|" + g_strings.back()->text] += 1;
  return g_strings.back();
}

int NVTX_API range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string name = "?";
  bool registered = false;
  unsigned colour = 0;
  if (attributes != nullptr) {
    if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED && attributes->message.registered != nullptr) {
      name = attributes->message.registered->text;
      registered = true;
    } else if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII && attributes->message.ascii != nullptr) {
      name = attributes->message.ascii;
    }
    if (attributes->colorType == NVTX_COLOR_ARGB) colour = attributes->color;
  }
  const std::string dom = domain_name(domain);
  const int depth = t_depth[dom]++;
  char colour_text[16];
  std::snprintf(colour_text, sizeof colour_text, "%08x", colour);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log.push_back("push|" + dom + "|" + name + "|" + std::to_string(depth) + "|" + (registered ? "registered" : "ascii") +
                  "|" + colour_text);
  return depth;
}

int NVTX_API range_pop(nvtxDomainHandle_t domain) {
  const std::string dom = domain_name(domain);
  const int depth = --t_depth[dom];
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log.push_back("pop|" + dom + "|" + std::to_string(depth));
  return depth;
}

template <typename Function>
void install(NvtxFunctionTable table, unsigned size, NvtxCallbackIdCore2 id, Function function) {
  if (static_cast<unsigned>(id) < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || table == nullptr) return 0;
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, domain_create);
  install(table, size, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);
  install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, register_string);
  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, range_push);
  install(table, size, NVTX_CBID_CORE2_DomainRangePop, range_pop);
  return 1;  // success: NVTX keeps this library attached
}

// The log so far, one event per line; and the registration count of "domain|text".
__attribute__((visibility("default"))) std::string* blockscope_nvtx_log_text() {
  static std::string snapshot;
  std::lock_guard<std::mutex> lock(g_mutex);
  snapshot.clear();
  for (const std::string& line : g_log) snapshot += line + "\n";
  return &snapshot;
}
__attribute__((visibility("default"))) int blockscope_nvtx_registrations(const char* key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto found = g_registrations.find(key);
  return found == g_registrations.end() ? 0 : found->second;
}
__attribute__((visibility("default"))) void blockscope_nvtx_log_clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log.clear();
}

}  // extern "C"
