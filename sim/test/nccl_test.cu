// Tests of the sim's NCCL subset (sim/nccl.cpp) through the real <nccl.h>, with the semantics of
// NCCL's API documentation: the collectives' results against float64 oracles written here, the
// stream semantics (work behind a collective waits for every rank), the ranks' agreement, hangs
// and bad arguments. On four simulated GPUs (kFourDevices below).
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>


// Cliques of 2, 3 and 4 devices: four simulated GPUs unless the environment says otherwise, set
// before main and so before the simulator first counts its devices.
[[maybe_unused]] static const bool kFourDevices = ::setenv("BLOCKSCOPE_SIM_DEVICES", "4", /*overwrite=*/0) == 0;

namespace {

// ---- Element types, written independently of the sim's conversions -------------------------------
enum class Type { f32, f16, bf16 };
constexpr Type kTypes[] = {Type::f32, Type::f16, Type::bf16};

ncclDataType_t nccl_type(Type t) { return t == Type::f32 ? ncclFloat32 : t == Type::f16 ? ncclFloat16 : ncclBfloat16; }
size_t type_size(Type t) { return t == Type::f32 ? 4 : 2; }
const char* type_label(Type t) { return t == Type::f32 ? "f32" : t == Type::f16 ? "f16" : "bf16"; }

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// f32 -> bf16, round to nearest even on the bits (finite inputs).
uint16_t bf16_rne(float f) {
  const uint32_t b = bits_of(f);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
double from_bf16(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

// f32 -> f16, round to nearest even, for zero and the normal range (what these tests produce).
uint16_t f16_rne(float f) {
  const uint32_t b = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if ((b & 0x7FFFFFFFu) == 0) return sign;
  const int exponent = static_cast<int>((b >> 23) & 0xFF) - 127;
  uint32_t mantissa = (b & 0x7FFFFFu) | 0x800000u;  // 24 bits
  const uint32_t dropped = mantissa & 0x1FFFu, half = 0x1000u;
  mantissa >>= 13;  // 11 bits
  if (dropped > half || (dropped == half && (mantissa & 1u))) ++mantissa;
  int e = exponent;
  if (mantissa == 0x800u) {  // carried into a new binade
    mantissa >>= 1;
    ++e;
  }
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | (mantissa & 0x3FFu));
}
double from_f16(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(m | 0x400, e - 25);
  return (h & 0x8000) ? -v : v;
}

// An array of one type as raw bytes, with double views.
struct Array {
  Type type;
  std::vector<unsigned char> bytes;
  Array(Type t, size_t n) : type(t), bytes(n * type_size(t)) {}
  size_t size() const { return bytes.size() / type_size(type); }
  double get(size_t i) const {
    if (type == Type::f32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return type == Type::f16 ? from_f16(h) : from_bf16(h);
  }
  // Stores x rounded to nearest even (x exact in f32 for the half types).
  void set(size_t i, double x) {
    if (type == Type::f32) {
      const float f = static_cast<float>(x);
      std::memcpy(&bytes[i * 4], &f, 4);
      return;
    }
    const uint16_t h = type == Type::f16 ? f16_rne(static_cast<float>(x)) : bf16_rne(static_cast<float>(x));
    std::memcpy(&bytes[i * 2], &h, 2);
  }
};

std::mt19937 seeded() {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  return std::mt19937(seed);
}

// Inputs whose sums over 4 ranks are exact in f32 for the half types (k x 2^-e, |k| below the
// type's significand, e in 0..6), so that the oracle, an exact float64 sum rounded once to the
// type, is the bits the documented reduction must give; f32 inputs are any in [-1, 1].
Array random_inputs(Type t, size_t n, std::mt19937& rng) {
  Array a(t, n);
  const int k_max = t == Type::bf16 ? 255 : 2047;
  std::uniform_int_distribution<int> k(-k_max, k_max), e(0, 6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) a.set(i, t == Type::f32 ? static_cast<double>(u(rng)) : std::ldexp(k(rng), -e(rng)));
  return a;
}

// ---- Device buffers ---------------------------------------------------------------------------------
struct DeviceBuffer {
  int device = 0;
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer(int d, size_t b) : device(d), bytes(b) {
    cudaSetDevice(d);
    EXPECT_EQ(cudaMalloc(&ptr, b), cudaSuccess);
  }
  ~DeviceBuffer() {
    cudaSetDevice(device);
    cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const Array& a, size_t offset_bytes = 0) {
    cudaSetDevice(device);
    ASSERT_EQ(cudaMemcpy(static_cast<char*>(ptr) + offset_bytes, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  Array download(Type t, size_t n, size_t offset_bytes = 0) const {
    Array a(t, n);
    cudaSetDevice(device);
    EXPECT_EQ(cudaMemcpy(a.bytes.data(), static_cast<const char*>(ptr) + offset_bytes, a.bytes.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return a;
  }
  char* at(size_t offset_bytes) const { return static_cast<char*>(ptr) + offset_bytes; }
};

// A clique made by ncclCommInitAll over devices 0..n-1, a stream per rank.
struct Clique {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  explicit Clique(int n) : comms(n), streams(n) {
    EXPECT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      EXPECT_EQ(cudaStreamCreate(&streams[r]), cudaSuccess);
    }
  }
  ~Clique() {
    for (size_t r = 0; r < comms.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      cudaStreamDestroy(streams[r]);
      ncclCommDestroy(comms[r]);
    }
  }
  int size() const { return static_cast<int>(comms.size()); }
  void synchronize() {
    for (int r = 0; r < size(); ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
    }
  }
};

std::vector<std::unique_ptr<DeviceBuffer>> buffers(int n, size_t bytes) {
  std::vector<std::unique_ptr<DeviceBuffer>> b;
  for (int r = 0; r < n; ++r) b.push_back(std::make_unique<DeviceBuffer>(r, bytes));
  return b;
}

// |got - exact| within recursive f32 summation's bound over n terms (f32 output), or equal bits
// to the exact result rounded once (the half types, whose sums here are exact in f32; max).
void expect_reduced(const Array& got, const std::vector<Array>& inputs, ncclRedOp_t op, size_t offset,
                    const std::string& where) {
  const Type t = got.type;
  Array expected(t, got.size());
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double exact = inputs[0].get(offset + i), magnitude = std::fabs(exact);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const double x = inputs[r].get(offset + i);
      exact = op == ncclSum ? exact + x : std::max(exact, x);
      magnitude += std::fabs(x);
    }
    expected.set(i, exact);
    const bool ok = t == Type::f32 && op == ncclSum
                        ? std::fabs(got.get(i) - exact) <= (inputs.size() - 1) * std::ldexp(magnitude, -24)
                        : std::memcmp(&got.bytes[i * type_size(t)], &expected.bytes[i * type_size(t)], type_size(t)) == 0;
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << where << " element " << i << ": got " << got.get(i) << ", exact " << exact << " (rounded "
                    << expected.get(i) << ")";
    }
  }
  EXPECT_EQ(reported, 0) << where;
}

// ---- AllReduce ---------------------------------------------------------------------------------------
// One host thread, every rank of an ncclCommInitAll clique in a group (the documented pattern).
void all_reduce_case(int n, Type t, ncclRedOp_t op, size_t count, bool in_place, std::mt19937& rng) {
  const std::string where = std::string("AllReduce ") + type_label(t) + (op == ncclSum ? " sum" : " max") + " over " +
                            std::to_string(n) + " ranks, count " + std::to_string(count) +
                            (in_place ? ", in place" : "");
  SCOPED_TRACE(where);
  Clique clique(n);
  const size_t bytes = count * type_size(t);
  auto send = buffers(n, bytes), recv = buffers(n, bytes);
  std::vector<Array> inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(random_inputs(t, count, rng));
    send[r]->upload(inputs[r]);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    void* out = in_place ? send[r]->ptr : recv[r]->ptr;
    ASSERT_EQ(ncclAllReduce(send[r]->ptr, out, count, nccl_type(t), op, clique.comms[r], clique.streams[r]),
              ncclSuccess)
        << ncclGetLastError(nullptr);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  clique.synchronize();
  const Array first = (in_place ? send[0] : recv[0])->download(t, count);
  expect_reduced(first, inputs, op, 0, where);
  for (int r = 1; r < n; ++r) {  // the same bits on every rank
    EXPECT_TRUE((in_place ? send[r] : recv[r])->download(t, count).bytes == first.bytes) << "rank " << r;
  }
}

TEST(Nccl, AllReduceSumAndMaxOverTwoThreeAndFourDevicesMatchTheFloat64Oracle) {
  std::mt19937 rng = seeded();
  for (const int n : {2, 3, 4})
    for (const Type t : kTypes)
      for (const ncclRedOp_t op : {ncclSum, ncclMax})
        for (const size_t count : {size_t{1}, size_t{7}, size_t{1000}})
          for (const bool in_place : {false, true}) all_reduce_case(n, t, op, count, in_place, rng);
}

TEST(Nccl, AllReduceOfAMillionAndThreeElements) {
  std::mt19937 rng = seeded();
  for (const Type t : kTypes) all_reduce_case(4, t, ncclSum, 1000003, t == Type::f16, rng);
  all_reduce_case(3, Type::bf16, ncclMax, 1000003, false, rng);
}

// ---- ReduceScatter, AllGather, Broadcast ----------------------------------------------------------------
TEST(Nccl, ReduceScatterGivesEachRankItsReducedSlice) {
  std::mt19937 rng = seeded();
  for (const int n : {2, 3, 4})
    for (const Type t : kTypes)
      for (const size_t count : {size_t{1}, size_t{7}, size_t{1001}})
        for (const bool in_place : {false, true}) {
          const std::string where = std::string("ReduceScatter ") + type_label(t) + " over " + std::to_string(n) +
                                    " ranks, recvcount " + std::to_string(count) + (in_place ? ", in place" : "");
          SCOPED_TRACE(where);
          Clique clique(n);
          const size_t slice = count * type_size(t);
          auto send = buffers(n, slice * n), recv = buffers(n, slice);
          std::vector<Array> inputs;
          for (int r = 0; r < n; ++r) {
            inputs.push_back(random_inputs(t, count * n, rng));
            send[r]->upload(inputs[r]);
          }
          ASSERT_EQ(ncclGroupStart(), ncclSuccess);
          for (int r = 0; r < n; ++r) {
            // NCCL's in-place ReduceScatter: recvbuff = sendbuff + rank * recvcount.
            void* out = in_place ? send[r]->at(r * slice) : recv[r]->ptr;
            ASSERT_EQ(ncclReduceScatter(send[r]->ptr, out, count, nccl_type(t), ncclSum, clique.comms[r],
                                        clique.streams[r]),
                      ncclSuccess);
          }
          ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
          clique.synchronize();
          for (int r = 0; r < n; ++r) {
            const Array got = in_place ? send[r]->download(t, count, r * slice) : recv[r]->download(t, count);
            expect_reduced(got, inputs, ncclSum, r * count, where + ", rank " + std::to_string(r));
          }
        }
}

TEST(Nccl, AllGatherConcatenatesInRankOrder) {
  std::mt19937 rng = seeded();
  for (const int n : {2, 3, 4})
    for (const Type t : kTypes)
      for (const size_t count : {size_t{1}, size_t{7}, size_t{1001}})
        for (const bool in_place : {false, true}) {
          SCOPED_TRACE(std::string("AllGather ") + type_label(t) + " over " + std::to_string(n) + " ranks, sendcount " +
                       std::to_string(count) + (in_place ? ", in place" : ""));
          Clique clique(n);
          const size_t slice = count * type_size(t);
          auto send = buffers(n, slice), recv = buffers(n, slice * n);
          std::vector<Array> inputs;
          for (int r = 0; r < n; ++r) {
            inputs.push_back(random_inputs(t, count, rng));
            // NCCL's in-place AllGather: sendbuff = recvbuff + rank * sendcount.
            if (in_place) {
              recv[r]->upload(inputs[r], r * slice);
            } else {
              send[r]->upload(inputs[r]);
            }
          }
          ASSERT_EQ(ncclGroupStart(), ncclSuccess);
          for (int r = 0; r < n; ++r) {
            const void* in = in_place ? recv[r]->at(r * slice) : send[r]->ptr;
            ASSERT_EQ(ncclAllGather(in, recv[r]->ptr, count, nccl_type(t), clique.comms[r], clique.streams[r]),
                      ncclSuccess);
          }
          ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
          clique.synchronize();
          for (int r = 0; r < n; ++r) {
            const Array got = recv[r]->download(t, count * n);
            for (int from = 0; from < n; ++from) {
              EXPECT_TRUE(std::equal(inputs[from].bytes.begin(), inputs[from].bytes.end(), got.bytes.begin() + from * slice))
                  << "rank " << r << "'s slice " << from;
            }
          }
        }
}

TEST(Nccl, BroadcastFromEachRoot) {
  std::mt19937 rng = seeded();
  for (const int n : {2, 3, 4})
    for (int root = 0; root < n; ++root)
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE("Broadcast over " + std::to_string(n) + " ranks from root " + std::to_string(root) +
                     (in_place ? ", in place" : ""));
        const Type t = kTypes[static_cast<size_t>(root) % 3];
        const size_t count = 777;
        Clique clique(n);
        auto send = buffers(n, count * type_size(t)), recv = buffers(n, count * type_size(t));
        const Array data = random_inputs(t, count, rng);
        (in_place ? recv : send)[root]->upload(data);
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < n; ++r) {
          const void* in = in_place ? recv[r]->ptr : send[r]->ptr;
          if (r % 2 == 1 && (in_place || r != root)) {  // ncclBcast is the in-place form
            ASSERT_EQ(ncclBcast(recv[r]->ptr, count, nccl_type(t), root, clique.comms[r], clique.streams[r]), ncclSuccess);
          } else {
            ASSERT_EQ(ncclBroadcast(in, recv[r]->ptr, count, nccl_type(t), root, clique.comms[r], clique.streams[r]),
                      ncclSuccess);
          }
        }
        ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
        clique.synchronize();
        for (int r = 0; r < n; ++r) EXPECT_TRUE(recv[r]->download(t, count).bytes == data.bytes) << "rank " << r;
      }
}

// ---- One host thread per rank --------------------------------------------------------------------------
__global__ void scale_kernel(float* x, int n, float factor) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= factor;
}

TEST(Nccl, OneThreadPerRankJoinsByUniqueIdAndReduces) {
  for (const int n : {2, 4}) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    const int count = 1000;
    std::vector<std::vector<float>> results(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(r);
        ncclComm_t comm = nullptr;
        ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
        int rank = -1, size = 0, device = -1;
        EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
        EXPECT_EQ(ncclCommCount(comm, &size), ncclSuccess);
        EXPECT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
        EXPECT_EQ(rank, r);
        EXPECT_EQ(size, n);
        EXPECT_EQ(device, r);
        std::vector<float> host(count);
        for (int i = 0; i < count; ++i) host[i] = static_cast<float>(i * (r + 1));
        float* buffer = nullptr;
        ASSERT_EQ(cudaMalloc(&buffer, count * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(buffer, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
        scale_kernel<<<(count + 127) / 128, 128>>>(buffer, count, 0.5f);
        results[r].resize(count);
        EXPECT_EQ(cudaMemcpy(results[r].data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
        cudaFree(buffer);
      });
    }
    for (std::thread& t : threads) t.join();
    const double ranks_sum = n * (n + 1) / 2.0;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < count; ++i) ASSERT_EQ(results[r][i], 0.5 * i * ranks_sum) << "rank " << r << " element " << i;
  }
}

// The GPU's semantics: rank 0's kernel after the collective, an event recorded after it and a
// stream waiting for that event all wait until rank 1 (a thread that starts late) calls too.
TEST(Nccl, WorkBehindACollectiveWaitsForTheLateRank) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const int count = 4096;
  std::promise<void> checked;  // rank 0 has seen its stream blocked: rank 1 may go
  std::shared_future<void> go = checked.get_future().share();
  std::vector<float> rank0_out(count), rank0_waiter(count);
  std::thread rank1([&] {
    cudaSetDevice(1);
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 1), ncclSuccess);
    go.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // late, on purpose
    float* buffer = nullptr;
    ASSERT_EQ(cudaMalloc(&buffer, count * sizeof(float)), cudaSuccess);
    const std::vector<float> ones(count, 3.0f);
    ASSERT_EQ(cudaMemcpy(buffer, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    cudaFree(buffer);
    ncclCommDestroy(comm);
  });
  cudaSetDevice(0);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  float* buffer = nullptr;
  float* copy = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&copy, count * sizeof(float)), cudaSuccess);
  std::vector<float> host(count);
  for (int i = 0; i < count; ++i) host[i] = static_cast<float>(i);
  ASSERT_EQ(cudaMemcpy(buffer, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t stream, waiter;
  cudaEvent_t after;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&waiter), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&after), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  scale_kernel<<<count / 128, 128, 0, stream>>>(buffer, count, 2.0f);
  ASSERT_EQ(cudaEventRecord(after, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(waiter, after, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(copy, buffer, count * sizeof(float), cudaMemcpyDeviceToDevice, waiter), cudaSuccess);
  // Rank 1 has not called: nothing behind the collective may have run.
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(after), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(waiter), cudaErrorNotReady);
  checked.set_value();
  // Waits (releasing the simulator) until rank 1's thread calls; then the data moves first.
  ASSERT_EQ(cudaStreamSynchronize(waiter), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  EXPECT_EQ(cudaEventQuery(after), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(rank0_out.data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(rank0_waiter.data(), copy, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  rank1.join();
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(rank0_out[i], 2.0f * (i + 3.0f)) << i;
    ASSERT_EQ(rank0_waiter[i], 2.0f * (i + 3.0f)) << i;
  }
  cudaEventDestroy(after);
  cudaStreamDestroy(stream);
  cudaStreamDestroy(waiter);
  cudaFree(buffer);
  cudaFree(copy);
  ncclCommDestroy(comm);
}

// Other streams are not held up by a waiting collective; the legacy stream of its device is (a
// blocking stream's work comes before it).
TEST(Nccl, AWaitingCollectiveHoldsItsStreamAndTheLegacyStreamOnly) {
  Clique clique(2);
  auto data = buffers(2, 64 * sizeof(float));
  float* other = nullptr;
  cudaSetDevice(0);
  ASSERT_EQ(cudaMalloc(&other, 64 * sizeof(float)), cudaSuccess);
  cudaStream_t independent;
  ASSERT_EQ(cudaStreamCreateWithFlags(&independent, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(data[0]->ptr, 0, 64 * sizeof(float), clique.streams[0]), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(data[0]->ptr, data[0]->ptr, 64, ncclFloat32, ncclSum, clique.comms[0], clique.streams[0]),
            ncclSuccess);
  ASSERT_EQ(cudaMemsetAsync(other, 0, 64 * sizeof(float), independent), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(independent), cudaSuccess);  // does not wait for rank 1
  ASSERT_EQ(cudaMemsetAsync(other, 0, 64 * sizeof(float), nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);  // the legacy stream follows the blocking one
  std::thread rank1([&] {  // its own host thread: one thread calling for both ranks needs a group
    cudaSetDevice(1);
    ASSERT_EQ(cudaMemsetAsync(data[1]->ptr, 0, 64 * sizeof(float), clique.streams[1]), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(data[1]->ptr, data[1]->ptr, 64, ncclFloat32, ncclSum, clique.comms[1], clique.streams[1]),
              ncclSuccess);
  });
  rank1.join();
  cudaSetDevice(0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
  cudaStreamDestroy(independent);
  cudaFree(other);
}

// ---- Disagreements and hangs ----------------------------------------------------------------------------
struct ScopedTimeout {
  explicit ScopedTimeout(const char* seconds) { setenv("BLOCKSCOPE_SIM_NCCL_TIMEOUT_S", seconds, 1); }
  ~ScopedTimeout() { unsetenv("BLOCKSCOPE_SIM_NCCL_TIMEOUT_S"); }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Nccl, MismatchedCountsAreReportedOnEveryRankByName) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::promise<void> rank0_called;
  std::shared_future<void> go = rank0_called.get_future().share();
  std::string rank1_message;
  ncclResult_t rank1_result = ncclSuccess;
  std::thread rank1([&] {
    cudaSetDevice(1);
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 1), ncclSuccess);
    DeviceBuffer b(1, 1024 * sizeof(float));
    go.wait();
    rank1_result = ncclAllReduce(b.ptr, b.ptr, 1024, ncclFloat32, ncclSum, comm, nullptr);
    rank1_message = ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage);
    ncclCommDestroy(comm);
  });
  cudaSetDevice(0);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  {
    DeviceBuffer b(0, 1024 * sizeof(float));
    ASSERT_EQ(ncclAllReduce(b.ptr, b.ptr, 512, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    rank0_called.set_value();
    rank1.join();
    EXPECT_EQ(rank1_result, ncclInvalidUsage);
    EXPECT_EQ(rank1_message, "ncclAllReduce: rank 1 has count 1024, rank 0 has 512");
    // Rank 0's stream reports it at its next synchronisation, and its communicator knows.
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorLaunchFailure);
    EXPECT_TRUE(contains(cudaGetErrorString(cudaErrorLaunchFailure), "rank 1 has count 1024, rank 0 has 512"))
        << cudaGetErrorString(cudaErrorLaunchFailure);
    cudaGetLastError();
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage);
    EXPECT_EQ(std::string(ncclGetLastError(comm)), "ncclAllReduce: rank 1 has count 1024, rank 0 has 512");
  }
  ncclCommDestroy(comm);
}

TEST(Nccl, MismatchedDatatypeOrCollectiveInAGroupIsReportedOnEveryRank) {
  Clique clique(3);
  auto b = buffers(3, 4096);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[0]->ptr, b[0]->ptr, 100, ncclFloat32, ncclSum, clique.comms[0], clique.streams[0]),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[1]->ptr, b[1]->ptr, 100, ncclFloat32, ncclSum, clique.comms[1], clique.streams[1]),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[2]->ptr, b[2]->ptr, 100, ncclBfloat16, ncclSum, clique.comms[2], clique.streams[2]),
            ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_EQ(std::string(ncclGetLastError(nullptr)), "ncclAllReduce: rank 2 has datatype ncclBfloat16, rank 0 has ncclFloat32");
  for (int r = 0; r < 2; ++r) {  // the ranks whose parts were queued: their streams fault with it
    cudaSetDevice(r);
    EXPECT_EQ(cudaStreamSynchronize(clique.streams[r]), cudaErrorLaunchFailure) << "rank " << r;
    EXPECT_TRUE(contains(cudaGetErrorString(cudaErrorLaunchFailure), "rank 2 has datatype ncclBfloat16"));
    cudaGetLastError();
  }
  // The next collective of the communicator is a different one: ranks call different kinds.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[0]->ptr, b[0]->ptr, 10, ncclFloat32, ncclSum, clique.comms[0], clique.streams[0]),
            ncclSuccess);
  ASSERT_EQ(ncclAllGather(b[1]->ptr, b[1]->ptr, 10, ncclFloat32, clique.comms[1], clique.streams[1]), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_EQ(std::string(ncclGetLastError(nullptr)),
            "ranks disagree on the collective: rank 1 called ncclAllGather, rank 0 called ncclAllReduce");
  cudaSetDevice(0);
  EXPECT_EQ(cudaStreamSynchronize(clique.streams[0]), cudaErrorLaunchFailure);
  cudaGetLastError();
}

TEST(Nccl, OneThreadCallingForTwoRanksOutsideAGroupIsRefused) {
  Clique clique(2);
  auto b = buffers(2, 256);
  ASSERT_EQ(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, ncclSum, clique.comms[0], clique.streams[0]),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(b[1]->ptr, b[1]->ptr, 8, ncclFloat32, ncclSum, clique.comms[1], clique.streams[1]),
            ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "outside a group")) << ncclGetLastError(nullptr);
  cudaSetDevice(0);
  EXPECT_EQ(cudaStreamSynchronize(clique.streams[0]), cudaErrorLaunchFailure);
  cudaGetLastError();
}

TEST(Nccl, ARankThatNeverCallsIsAHangErrorWithinTheTimeout) {
  ScopedTimeout timeout("1");
  Clique clique(3);
  auto b = buffers(3, 1024);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (const int r : {0, 2}) {
    ASSERT_EQ(ncclAllReduce(b[r]->ptr, b[r]->ptr, 64, ncclFloat32, ncclSum, clique.comms[r], clique.streams[r]),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  const auto start = std::chrono::steady_clock::now();
  cudaSetDevice(0);
  EXPECT_EQ(cudaStreamSynchronize(clique.streams[0]), cudaErrorLaunchTimeout);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 10.0);
  const std::string message = cudaGetErrorString(cudaErrorLaunchTimeout);
  EXPECT_TRUE(contains(message, "ncclAllReduce hung: ncclAllReduce #1 of a communicator of 3 ranks")) << message;
  EXPECT_TRUE(contains(message, "ranks 0, 2 arrived; ranks 1 missing (never called it)")) << message;
  EXPECT_TRUE(contains(message, "BLOCKSCOPE_SIM_NCCL_TIMEOUT_S")) << message;
  cudaGetLastError();
  cudaSetDevice(2);  // the other arrived rank hears it too
  EXPECT_EQ(cudaStreamSynchronize(clique.streams[2]), cudaErrorLaunchTimeout);
  cudaGetLastError();
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(clique.comms[1], &async), ncclSuccess);
  EXPECT_EQ(async, ncclInvalidUsage);
  // The late rank's call is refused with the same message.
  EXPECT_EQ(ncclAllReduce(b[1]->ptr, b[1]->ptr, 64, ncclFloat32, ncclSum, clique.comms[1], clique.streams[1]),
            ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ranks 1 missing")) << ncclGetLastError(nullptr);
}

TEST(Nccl, InitRankWithoutItsPeersFailsAfterTheTimeout) {
  ScopedTimeout timeout("0.5");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  cudaSetDevice(0);
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSystemError);
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_TRUE(contains(message, "only ranks 0 of 2 joined")) << message;
  EXPECT_TRUE(contains(message, "missing ranks 1")) << message;
  EXPECT_TRUE(contains(message, "one process per rank")) << message;
}

TEST(Nccl, InitRankInAGroupFromOneThread) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(3);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 3; ++r) {
    cudaSetDevice(r);
    ASSERT_EQ(ncclCommInitRank(&comms[r], 3, id, r), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 3; ++r) {
    int device = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[r], &device), ncclSuccess);
    EXPECT_EQ(device, r);
    ncclCommDestroy(comms[r]);
  }
}

// ---- Bad arguments -------------------------------------------------------------------------------------
TEST(Nccl, BadArgumentsAreRefusedWithTheDocumentedCodesAndNamed) {
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument (run with NCCL_DEBUG=WARN for details)");
  Clique clique(2);
  auto b = buffers(2, 1024);
  ncclComm_t c0 = clique.comms[0];
  cudaStream_t s0 = clique.streams[0];
  const auto refused = [](ncclResult_t got, ncclResult_t want, const std::string& part) {
    EXPECT_EQ(got, want) << part;
    EXPECT_TRUE(contains(ncclGetLastError(nullptr), part)) << ncclGetLastError(nullptr);
  };
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, ncclSum, nullptr, s0), ncclInvalidArgument, "comm is NULL");
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclInt32, ncclSum, c0, s0), ncclInvalidArgument, "datatype ncclInt32");
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclFloat64, ncclSum, c0, s0), ncclInvalidArgument,
          "datatype ncclFloat64");
  // ncclNumTypes: inside the enum's range (a value outside it would be undefined behaviour in
  // C++ before the call is made, as UBSan says) but no datatype.
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclNumTypes, ncclSum, c0, s0), ncclInvalidArgument,
          "datatype " + std::to_string(static_cast<int>(ncclNumTypes)) + " is not an ncclDataType_t");
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, ncclProd, c0, s0), ncclInvalidArgument, "op ncclProd");
  refused(ncclBroadcast(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, 2, c0, s0), ncclInvalidArgument, "root 2");
  refused(ncclBroadcast(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, -1, c0, s0), ncclInvalidArgument, "root -1");
  refused(ncclAllGather(b[0]->ptr, b[0]->ptr, SIZE_MAX / 4, ncclFloat32, c0, s0), ncclInvalidArgument, "overflows");
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 257, ncclFloat32, ncclSum, c0, s0), ncclInvalidArgument,
          "holds 256 elements past it; the call needs 257");
  refused(ncclReduceScatter(b[0]->ptr, b[0]->ptr, 200, ncclFloat32, ncclSum, c0, s0), ncclInvalidArgument,
          "the call needs 400");
  refused(ncclAllReduce(nullptr, b[0]->ptr, 8, ncclFloat32, ncclSum, c0, s0), ncclInvalidArgument, "sendbuff is NULL");
  std::vector<float> host(8);
  refused(ncclAllReduce(host.data(), b[0]->ptr, 8, ncclFloat32, ncclSum, c0, s0), ncclInvalidArgument,
          "is not device memory");
  refused(ncclAllReduce(b[1]->ptr, b[0]->ptr, 8, ncclFloat32, ncclSum, c0, s0), ncclInvalidArgument,
          "is memory of device 1, which rank 0's device 0 may not access");
  refused(ncclAllReduce(b[1]->ptr, b[1]->ptr, 8, ncclFloat32, ncclSum, c0, clique.streams[1]), ncclInvalidArgument,
          "the stream is on device 1");
  refused(ncclGroupEnd(), ncclInvalidUsage, "no ncclGroupStart");
  ncclComm_t comm = nullptr;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  refused(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank 2 is not in 0..1");
  refused(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks 0");
  refused(ncclCommInitRank(&comm, 65, id, 0), ncclInvalidUsage, "65 ranks, but the simulated NCCL joins at most 64");
  std::vector<ncclComm_t> comms(2);
  const int same[] = {1, 1};
  refused(ncclCommInitAll(comms.data(), 2, same), ncclInvalidUsage, "both on device 1");
  int count = 0;
  refused(ncclCommCount(nullptr, &count), ncclInvalidArgument, "comm is NULL");
  // Peer access makes another device's memory usable; a count of 0 moves nothing.
  cudaSetDevice(0);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  std::vector<ncclComm_t> pair(2);
  ASSERT_EQ(ncclCommInitAll(pair.data(), 2, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(b[1]->ptr, b[0]->ptr, 0, ncclFloat32, ncclSum, pair[0], s0), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(pair[1]), ncclSuccess);
  refused(ncclCommCount(pair[1], &count), ncclInvalidArgument, "not a live communicator");
  ASSERT_EQ(ncclCommAbort(pair[0]), ncclSuccess);
  ASSERT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  // Capture: refused, the capture invalidated.
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal), cudaSuccess);
  refused(ncclAllReduce(b[0]->ptr, b[0]->ptr, 8, ncclFloat32, ncclSum, c0, s0), ncclInvalidUsage, "graph capture");
  EXPECT_EQ(cudaStreamEndCapture(s0, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  clique.synchronize();
}

// ---- Across processes ----------------------------------------------------------------------------
// One rank per process, as under mpirun: the test forks `n` children (each test is its own
// process under ctest, so no simulator thread exists yet to be lost in the fork), each joins the
// unique id made before the fork (what MPI_Bcast does for real programs) on its own simulated
// GPU 0 and returns "" or what went wrong.
std::string in_processes(int n, const std::function<std::string(int rank)>& body) {
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string problem;
      try {
        problem = body(r);
      } catch (const std::exception& error) {
        problem = error.what();
      }
      if (!problem.empty() && write(fds[1], problem.data(), problem.size()) < 0) problem += " (unreported)";
      _exit(problem.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::string problems;
  for (int r = 0; r < n; ++r) {
    std::string text;
    char buffer[4096];
    for (ssize_t got; (got = read(pipes[r], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(got));
    close(pipes[r]);
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !text.empty()) {
      problems += "rank " + std::to_string(r) + ": " + (text.empty() ? "exited abnormally" : text) + "\n";
    }
  }
  return problems;
}

// Rank r's input element i of collective `which`: small integers and halves, so every sum in
// any order is exact in f32 and the expected results need no rounding model.
float process_input(int which, int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(which) * 13) % 23) - 11) * 0.5f +
         static_cast<float>(rank);
}

// An f32 collective's result against `want`, element by element (exact: see process_input).
std::string check_floats(const char* what, const Array& got, const std::function<float(size_t)>& want) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got.get(i) != want(i)) {
      return std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(got.get(i)) + ", want " +
             std::to_string(want(i));
    }
  return "";
}

std::string join(const ncclUniqueId& id, int n, int rank, ncclComm_t* comm) {
  cudaSetDevice(0);
  if (ncclCommInitRank(comm, n, id, rank) != ncclSuccess) return std::string("init: ") + ncclGetLastError(nullptr);
  return "";
}

TEST(NcclProcesses, OneRankPerProcessRunsEveryCollective) {
  for (const int n : {2, 3}) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    const std::string problems = in_processes(n, [&](int rank) -> std::string {
      ncclComm_t comm = nullptr;
      if (std::string problem = join(id, n, rank, &comm); !problem.empty()) return problem;
      int size = 0, me = -1;
      ncclCommCount(comm, &size);
      ncclCommUserRank(comm, &me);
      if (size != n || me != rank) return "count/rank " + std::to_string(size) + "/" + std::to_string(me);
      auto sum_of = [n](int which, size_t i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += process_input(which, r, i);
        return sum;
      };
      // This rank's inputs of collective `which`, uploaded to a buffer of its own.
      auto inputs = [rank](int which, size_t elements) {
        Array values(Type::f32, elements);
        for (size_t i = 0; i < elements; ++i) values.set(i, process_input(which, rank, i));
        auto buffer = std::make_unique<DeviceBuffer>(0, values.bytes.size());
        buffer->upload(values);
        return buffer;
      };
      // AllReduce in place, larger than a step's slot (16 MiB / n): several chunks and a tail.
      const size_t big = (size_t{5} << 20) + 3;
      const auto a = inputs(0, big);
      if (ncclAllReduce(a->ptr, a->ptr, big, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
        return ncclGetLastError(comm);
      if (auto p = check_floats("AllReduce sum", a->download(Type::f32, big), [&](size_t i) { return sum_of(0, i); });
          !p.empty())
        return p;
      // Max, out of place.
      const size_t count = 1001;
      const auto in = inputs(1, count);
      DeviceBuffer out(0, count * n * sizeof(float));
      ncclAllReduce(in->ptr, out.ptr, count, ncclFloat32, ncclMax, comm, nullptr);
      if (auto p = check_floats("AllReduce max", out.download(Type::f32, count),
                                [&](size_t i) { return process_input(1, n - 1, i); });
          !p.empty())
        return p;
      // ReduceScatter: this rank's block of n·count inputs.
      const auto rs = inputs(2, count * n);
      ncclReduceScatter(rs->ptr, out.ptr, count, ncclFloat32, ncclSum, comm, nullptr);
      if (auto p = check_floats("ReduceScatter", out.download(Type::f32, count),
                                [&](size_t i) { return sum_of(2, static_cast<size_t>(rank) * count + i); });
          !p.empty())
        return p;
      // AllGather: every rank's block, in rank order.
      ncclAllGather(in->ptr, out.ptr, count, ncclFloat32, comm, nullptr);
      if (auto p = check_floats("AllGather", out.download(Type::f32, count * n),
                                [&](size_t i) { return process_input(1, static_cast<int>(i / count), i % count); });
          !p.empty())
        return p;
      // Broadcast from the last rank, in place.
      ncclBroadcast(in->ptr, in->ptr, count, ncclFloat32, n - 1, comm, nullptr);
      if (auto p = check_floats("Broadcast", in->download(Type::f32, count),
                                [&](size_t i) { return process_input(1, n - 1, i); });
          !p.empty())
        return p;
      if (cudaDeviceSynchronize() != cudaSuccess) return cudaGetErrorString(cudaGetLastError());
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess) return "async error " + std::to_string(async);
      return ncclCommDestroy(comm) == ncclSuccess ? "" : "destroy failed";
    });
    EXPECT_EQ(problems, "") << n << " processes";
  }
}

// bf16 sums in f32 in rank order, rounded once: the same bits as the in-process clique gives.
TEST(NcclProcesses, Bf16SumsMatchTheInProcessCliqueBitForBit) {
  const int n = 2;
  const size_t count = 4099;
  auto input = [](int rank) {
    Array values(Type::bf16, count);
    std::mt19937 random(1234 + rank);
    std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
    for (size_t i = 0; i < count; ++i) values.set(i, uniform(random));  // rounded to bf16
    return values;
  };
  Array want(Type::bf16, count);
  for (size_t i = 0; i < count; ++i)
    want.set(i, static_cast<float>(input(0).get(i)) + static_cast<float>(input(1).get(i)));  // one f32 sum, rounded once
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(in_processes(n, [&](int rank) -> std::string {
              ncclComm_t comm = nullptr;
              if (std::string problem = join(id, n, rank, &comm); !problem.empty()) return problem;
              DeviceBuffer buffer(0, count * 2);
              buffer.upload(input(rank));
              ncclAllReduce(buffer.ptr, buffer.ptr, count, ncclBfloat16, ncclSum, comm, nullptr);
              const Array got = buffer.download(Type::bf16, count);
              for (size_t i = 0; i < count; ++i)
                if (got.get(i) != want.get(i)) return "element " + std::to_string(i) + " differs";
              return "";
            }),
            "");
}

// Every rank's synchronising call fails with the one message naming the disagreement.
TEST(NcclProcesses, MismatchedCountsFailEveryProcessByName) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(in_processes(2, [&](int rank) -> std::string {
              ncclComm_t comm = nullptr;
              if (std::string problem = join(id, 2, rank, &comm); !problem.empty()) return problem;
              DeviceBuffer buffer(0, 100 * sizeof(float));
              buffer.upload(Array(Type::f32, 100));
              ncclAllReduce(buffer.ptr, buffer.ptr, rank == 0 ? 100 : 64, ncclFloat32, ncclSum, comm, nullptr);
              const cudaError_t error = cudaDeviceSynchronize();
              const std::string message = cudaGetErrorString(error);
              if (error == cudaSuccess) return "the mismatch went unnoticed";
              if (!contains(message, "rank 1 has count 64, rank 0 has 100")) return "message: " + message;
              ncclResult_t async = ncclSuccess;
              ncclCommGetAsyncError(comm, &async);
              return async == ncclRemoteError ? "" : "async error " + std::to_string(async);
            }),
            "");
}

// A rank that never calls: the others fail after the timeout naming it; a rank whose process
// exits is named at once.
// A missing rank is named at the timeout (1 s here); an exited one at once, long before its
// timeout (10 s here, so that a loaded machine cannot blur the two: it must be seen within 5).
TEST(NcclProcesses, AMissingOrExitedRankIsNamed) {
  for (const bool exits : {false, true}) {
    ScopedTimeout timeout(exits ? "10" : "1");
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    EXPECT_EQ(in_processes(2, [&](int rank) -> std::string {
                ncclComm_t comm = nullptr;
                if (std::string problem = join(id, 2, rank, &comm); !problem.empty()) return problem;
                if (rank == 1) {
                  if (exits) _exit(0);
                  std::this_thread::sleep_for(std::chrono::seconds(3));
                  return "";
                }
                const auto start = std::chrono::steady_clock::now();
                DeviceBuffer buffer(0, 10 * sizeof(float));
                buffer.upload(Array(Type::f32, 10));
                ncclAllReduce(buffer.ptr, buffer.ptr, 10, ncclFloat32, ncclSum, comm, nullptr);
                const std::string message = cudaGetErrorString(cudaDeviceSynchronize());
                const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                const std::string want = exits ? "rank 1's process" : "ranks 1 not arrived after 1 s";
                if (!contains(message, want)) return "message: " + message;
                if (exits && waited > 5) return "waited " + std::to_string(waited) + " s for an exited process";
                return "";
              }),
              "")
        << (exits ? "exited" : "missing");
  }
}

}  // namespace
