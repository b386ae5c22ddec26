// Producer and consumer on two streams: a kernel on stream A scales a buffer into `mid`, a kernel
// on stream B adds one to `mid`; an event recorded on A after the producer, waited on by B, orders
// them.
// PLANT: no cudaStreamWaitEvent. The simulated GPU runs the streams in enqueue order, so the result
// is right here; on a GPU the consumer may run before or beside the producer. The simulated GPU's
// streams check reports the read of bytes another stream's unfinished kernel writes.
// EXPECT PLANTED: cross-stream race \(read after write\): `consume` on stream .* of which `produce` on stream
#include "conformance.h"

const char* conformance::name = "streams_race";

__global__ void produce(const float* in, float* mid, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) mid[i] = 2.0f * in[i];
}

__global__ void consume(const float* mid, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = mid[i] + 1.0f;
}

int main() {
  const int n = 1000;
  const std::vector<float> in = conformance::random_floats(n, 5);
  float* d_in = conformance::to_device(in);
  float *d_mid = nullptr, *d_out = nullptr;
  CONFORMANCE_CHECK(cudaMalloc(&d_mid, n * sizeof(float)));
  CONFORMANCE_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t produced = nullptr;
  CONFORMANCE_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CONFORMANCE_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  CONFORMANCE_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  produce<<<(n + 255) / 256, 256, 0, a>>>(d_in, d_mid, n);
  CONFORMANCE_CHECK(cudaEventRecord(produced, a));
#ifndef PLANT
  CONFORMANCE_CHECK(cudaStreamWaitEvent(b, produced, 0));
#endif
  consume<<<(n + 255) / 256, 256, 0, b>>>(d_mid, d_out, n);
  CONFORMANCE_CHECK(cudaGetLastError());
  CONFORMANCE_CHECK(cudaStreamSynchronize(b));
  CONFORMANCE_CHECK(cudaEventDestroy(produced));  // ASan's leak check counts them
  CONFORMANCE_CHECK(cudaStreamDestroy(a));
  CONFORMANCE_CHECK(cudaStreamDestroy(b));
  std::vector<float> expected(n);
  for (int i = 0; i < n; ++i) expected[i] = 2.0f * in[i] + 1.0f;
  return conformance::verdict(conformance::to_host(d_out, n), expected);
}
