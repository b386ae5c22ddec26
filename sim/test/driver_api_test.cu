// Tests of the CUDA Driver API subset (sim/driver_api.cpp) through the toolkit's <cuda.h>, with the
// semantics of NVIDIA's CUDA Driver API documentation: initialisation, versions, error strings,
// devices and attributes, primary contexts mapped onto the runtime's devices.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

__global__ void write_kernel(int* out, int value) { *out = value; }

// Before cuInit every call but cuDriverGetVersion and the error strings is NOT_INITIALIZED.
// (Its own test binary runs the tests in order: this one first.)
TEST(DriverApi, CallsBeforeCuInitAreNotInitialized) {
  int count = -1;
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  CUdevice device = -1;
  EXPECT_EQ(cuDeviceGet(&device, 0), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, CUDA_VERSION);
  EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);  // flags must be 0
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
}

TEST(DriverApi, ErrorNamesAndStrings) {
  const char* text = nullptr;
  ASSERT_EQ(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_ILLEGAL_ADDRESS");
  ASSERT_EQ(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "invalid argument");
  ASSERT_EQ(cuGetErrorString(CUDA_SUCCESS, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "no error");
  // An unrecognised code: CUDA_ERROR_INVALID_VALUE and NULL.
  EXPECT_EQ(cuGetErrorString(static_cast<CUresult>(123456), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(123456), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetErrorString(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(DriverApi, DevicesAndAttributesAreTheRuntimes) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int count = 0, runtime_count = 0;
  ASSERT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  ASSERT_EQ(cudaGetDeviceCount(&runtime_count), cudaSuccess);
  EXPECT_EQ(count, runtime_count);
  CUdevice device = -1;
  EXPECT_EQ(cuDeviceGet(&device, count), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cuDeviceGet(&device, count - 1), CUDA_SUCCESS);
  EXPECT_EQ(device, count - 1);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
  char name[256];
  ASSERT_EQ(cuDeviceGetName(name, sizeof name, device), CUDA_SUCCESS);
  EXPECT_STREQ(name, prop.name);
  char shortened[5];
  ASSERT_EQ(cuDeviceGetName(shortened, sizeof shortened, device), CUDA_SUCCESS);
  EXPECT_EQ(std::string(shortened), std::string(prop.name).substr(0, 4));
  int value = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device), CUDA_SUCCESS);
  EXPECT_EQ(value, prop.multiProcessorCount);
  ASSERT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), CUDA_SUCCESS);
  EXPECT_EQ(value, prop.major);
  ASSERT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device), CUDA_SUCCESS);
  EXPECT_EQ(value, prop.maxThreadsPerBlock);
  ASSERT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, device), CUDA_SUCCESS);
  EXPECT_EQ(value, 32);
  EXPECT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, count), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, device), CUDA_ERROR_INVALID_VALUE);
  size_t bytes = 0;
  ASSERT_EQ(cuDeviceTotalMem(&bytes, device), CUDA_SUCCESS);
  EXPECT_EQ(bytes, prop.totalGlobalMem);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(DriverApi, PrimaryContextsAreTheRuntimesDevices) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  CUcontext primary0 = nullptr, primary1 = nullptr, current = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary1, 1), CUDA_SUCCESS);
  EXPECT_NE(primary0, primary1);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, primary0);
  // Making device 1's primary context current is cudaSetDevice(1), and back.
  ASSERT_EQ(cuCtxSetCurrent(primary1), CUDA_SUCCESS);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1);
  CUdevice ctx_device = -1;
  ASSERT_EQ(cuCtxGetDevice(&ctx_device), CUDA_SUCCESS);
  EXPECT_EQ(ctx_device, 1);
  // Work the runtime queued on the context's device finishes at cuCtxSynchronize.
  int* out = nullptr;
  ASSERT_EQ(cudaMallocManaged(&out, sizeof(int)), cudaSuccess);
  write_kernel<<<1, 1>>>(out, 1234);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(*out, 1234);
  cudaFree(out);
  ASSERT_EQ(cuCtxSetCurrent(primary0), CUDA_SUCCESS);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  int not_a_context = 0;
  EXPECT_EQ(cuCtxSetCurrent(reinterpret_cast<CUcontext>(&not_a_context)), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);  // released more than retained
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&current, 99), CUDA_ERROR_INVALID_DEVICE);
}

}  // namespace
