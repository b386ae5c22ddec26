#include "profiler/nvtx.h"

#include <string>

#ifdef BLOCKSCOPE_WITH_NVTX
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <unordered_map>
#endif

namespace blockscope::profiler {

const char* family_name(Family family) {
  switch (family) {
    case Family::region: return "region";
    case Family::linear: return "linear";
    case Family::attention: return "attention";
    case Family::softmax: return "softmax";
    case Family::norm: return "norm";
    case Family::activation: return "activation";
    case Family::elementwise: return "elementwise";
    case Family::rope: return "rope";
    case Family::copy: return "copy";
    case Family::collective: return "collective";
    case Family::precision: return "precision";
  }
  return "?";
}

namespace {
thread_local int t_nvtx_rank = -1;  // set_nvtx_rank
}  // namespace

void set_nvtx_rank(int rank) { t_nvtx_rank = rank < 0 ? -1 : rank; }

#ifdef BLOCKSCOPE_WITH_NVTX
namespace {

nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t handle = nvtxDomainCreateA("blockscope");
  return handle;
}

uint32_t family_colour(Family family) {
  switch (family) {
    case Family::region: return 0xff9e9e9e;
    case Family::linear: return 0xff1f77b4;
    case Family::attention: return 0xffd62728;
    case Family::softmax: return 0xffff7f0e;
    case Family::norm: return 0xff2ca02c;
    case Family::activation: return 0xff9467bd;
    case Family::elementwise: return 0xff8c564b;
    case Family::rope: return 0xffe377c2;
    case Family::copy: return 0xff7f7f7f;
    case Family::collective: return 0xffbcbd22;
    case Family::precision: return 0xff17becf;
  }
  return 0xff000000;
}

// Registered strings, one per distinct range name, cached for the process: Nsight matches
// `--capture-range=nvtx` only against registered strings by default, and a registered handle
// costs the tool no string copy per push.
nvtxStringHandle_t registered(const char* name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, nvtxStringHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = handles.find(name);
  if (found == handles.end()) found = handles.emplace(name, nvtxDomainRegisterStringA(domain(), name)).first;
  return found->second;
}

}  // namespace

void nvtx_push(const char* plain_name, Family family) {
  // A tensor-parallel rank's ranges: "rank.N/" before the name (kept alive for the call).
  const std::string ranked = t_nvtx_rank >= 0 ? "rank." + std::to_string(t_nvtx_rank) + "/" + plain_name : std::string();
  const char* name = t_nvtx_rank >= 0 ? ranked.c_str() : plain_name;
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.colorType = NVTX_COLOR_ARGB;
  attributes.color = family_colour(family);
  // No tool attached: the domain is null and the push is a no-op; skip the registry lookup.
  const nvtxStringHandle_t handle = domain() != nullptr ? registered(name) : nullptr;
  if (handle != nullptr) {
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = handle;
  } else {  // no tool attached (or it does not register strings): plain text
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
  }
  nvtxDomainRangePushEx(domain(), &attributes);
}

void nvtx_pop() { nvtxDomainRangePop(domain()); }

#else
void nvtx_push(const char*, Family) {}
void nvtx_pop() {}
#endif

}  // namespace blockscope::profiler
