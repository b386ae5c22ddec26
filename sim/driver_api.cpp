// The CUDA Driver API subset samples use, declared by the toolkit's <cuda.h> and linked in place
// of libcuda: initialisation, versions, error strings, devices and their attributes, and the
// primary contexts as thin maps onto the runtime's state (a device's primary context is the one
// the runtime uses; making it current is cudaSetDevice). Modules, explicit contexts, driver-side
// memory and launches are not modelled: a program using them fails to link (undefined reference
// to cuModuleLoad…), which sim/README.md says.
#include <cuda.h>

#include <cstring>
#include <iterator>

#include "sim/runtime_state.h"

struct CUctx_st {
  int device = 0;
  unsigned retained = 0;  // cuDevicePrimaryCtxRetain minus cuDevicePrimaryCtxRelease
};

using namespace blockscope::sim::detail;

namespace {

bool g_initialized = false;  // cuInit(0) was called
CUctx_st g_primary[8];       // each device's primary context

struct DriverErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

// The driver's names and descriptions of the codes this subset (or a kernel fault) can return.
constexpr DriverErrorText kDriverErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const DriverErrorText* find_error(CUresult code) {
  for (const DriverErrorText& e : kDriverErrors)
    if (e.code == code) return &e;
  return nullptr;
}

// The runtime's codes from 200 up are the driver's; the few below differ.
CUresult from_runtime(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    default: return static_cast<int>(error) >= 200 ? static_cast<CUresult>(error) : CUDA_ERROR_UNKNOWN;
  }
}

bool valid(CUdevice device) { return valid_device(static_cast<int>(device)); }

}  // namespace

extern "C" {

CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const DriverErrorText* e = find_error(error);
  *text = e != nullptr ? e->text : nullptr;  // "unrecognized": NULL and CUDA_ERROR_INVALID_VALUE
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const DriverErrorText* e = find_error(error);
  *name = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;  // "the Flags parameter must be 0"
  Lock lock(state_mutex());
  g_initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;  // needs no cuInit, as documented
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  cudaDeviceProp prop{};
  if (const cudaError_t error = cudaGetDeviceProperties(&prop, device); error != cudaSuccess) return from_runtime(error);
  std::strncpy(name, prop.name, static_cast<size_t>(length) - 1);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}

// CUdevice_attribute and cudaDeviceAttr number the attributes alike: the runtime answers.
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  const cudaError_t error = cudaDeviceGetAttribute(value, static_cast<cudaDeviceAttr>(attribute), device);
  if (error != cudaSuccess) cudaGetLastError();  // the driver API leaves the runtime's last error alone
  return from_runtime(error);
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kTotalGlobalMem;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  Lock lock(state_mutex());
  g_primary[device].device = device;
  ++g_primary[device].retained;
  *context = &g_primary[device];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  Lock lock(state_mutex());
  if (g_primary[device].retained == 0) return CUDA_ERROR_INVALID_CONTEXT;  // released more than retained
  --g_primary[device].retained;
  return CUDA_SUCCESS;
}

// The runtime makes its device's primary context current: the current context is that one.
CUresult cuCtxGetCurrent(CUcontext* context) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int device = current_device();
  g_primary[device].device = device;
  *context = &g_primary[device];
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_SUCCESS;  // unbinding: the runtime binds a primary context again at its next call
  const auto* begin = std::begin(g_primary);
  if (context < begin || context >= std::end(g_primary)) return CUDA_ERROR_INVALID_CONTEXT;  // not a primary context
  return from_runtime(cudaSetDevice(static_cast<int>(context - begin)));
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = current_device();
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return from_runtime(cudaDeviceSynchronize());
}

}  // extern "C"
