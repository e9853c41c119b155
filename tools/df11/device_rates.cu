#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "tools/df11/device_rates.h"

namespace df11::tool {
namespace {

// The read buffer: at least 16 times L2 (so that the reads come from memory), and at least 1 GiB.
constexpr uint64_t kMinReadBytes = uint64_t{1} << 30;
constexpr int kReadThreads = 512;
constexpr int kReadBlocksPerSm = 4;
// The product: n x n by n x n in BF16 (3 x 128 MiB at n = 8192).
constexpr int kMatmulSize = 8192;
constexpr int kRuns = 10;

absl::Status Check(cudaError_t e, const char* what) { return ::df11::cuda::CudaStatus(e, what); }
absl::Status Check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusString(s)));
}

__global__ void FillIndices(uint32_t* words, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    words[i] = static_cast<uint32_t>(i);
  }
}

// Every thread's SumOfQuads, added up per warp and then in one word.
__global__ void ReadSum(const Quad* quads, uint64_t n, uint32_t* result) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  uint32_t sum = SumOfQuads(quads, n, blockIdx.x * uint64_t{blockDim.x} + threadIdx.x, stride);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(result, sum);
}

// A device allocation freed on every path.
struct DeviceMemory {
  void* p = nullptr;
  ~DeviceMemory() {
    if (p != nullptr) cudaFree(p);
  }
};

// The median milliseconds of kRuns calls of fn, after 2 unmeasured ones.
template <typename Fn>
absl::StatusOr<double> MedianMs(Fn&& fn) {
  for (int i = 0; i < 2; ++i) DF11_RETURN_IF_ERROR(fn());
  cudaEvent_t start = nullptr, stop = nullptr;
  DF11_RETURN_IF_ERROR(Check(cudaEventCreate(&start), "cudaEventCreate"));
  if (absl::Status s = Check(cudaEventCreate(&stop), "cudaEventCreate"); !s.ok()) {
    cudaEventDestroy(start);
    return s;
  }
  std::vector<double> ms;
  absl::Status status;
  for (int i = 0; i < kRuns && status.ok(); ++i) {
    cudaEventRecord(start);
    status.Update(fn());
    cudaEventRecord(stop);
    status.Update(Check(cudaEventSynchronize(stop), "cudaEventSynchronize"));
    float t = 0;
    if (status.ok())
      status.Update(Check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime"));
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  DF11_RETURN_IF_ERROR(status);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

absl::Status MeasureRead(int device, DeviceRates& r) {
  int l2 = 0, sms = 0;
  DF11_RETURN_IF_ERROR(
      Check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute"));
  DF11_RETURN_IF_ERROR(Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                             "cudaDeviceGetAttribute"));
  r.read_bytes = std::max<uint64_t>(kMinReadBytes, uint64_t{16} * static_cast<uint64_t>(l2));
  const uint64_t quads = r.read_bytes / sizeof(Quad);
  DeviceMemory buffer, result;
  DF11_RETURN_IF_ERROR(Check(cudaMalloc(&buffer.p, r.read_bytes), "cudaMalloc (read buffer)"));
  DF11_RETURN_IF_ERROR(Check(cudaMalloc(&result.p, sizeof(uint32_t)), "cudaMalloc"));
  FillIndices<<<sms * 8, 256>>>(static_cast<uint32_t*>(buffer.p), quads * 4);
  DF11_RETURN_IF_ERROR(Check(cudaGetLastError(), "FillIndices"));
  const auto* q = static_cast<const Quad*>(buffer.p);
  auto* x = static_cast<uint32_t*>(result.p);
  auto read = [&]() -> absl::Status {
    ReadSum<<<sms * kReadBlocksPerSm, kReadThreads>>>(q, quads, x);
    return Check(cudaGetLastError(), "ReadSum");
  };
  // The timed reads add into the result unchecked; one more, from zero, is checked.
  DF11_ASSIGN_OR_RETURN(const double ms, MedianMs(read));
  DF11_RETURN_IF_ERROR(Check(cudaMemset(x, 0, sizeof(uint32_t)), "cudaMemset"));
  DF11_RETURN_IF_ERROR(read());
  uint32_t got = 0;
  DF11_RETURN_IF_ERROR(
      Check(cudaMemcpy(&got, x, sizeof(got), cudaMemcpyDeviceToHost), "cudaMemcpy"));
  if (got != SumOfIndices(quads * 4)) {
    return absl::InternalError(absl::StrCat("the read kernel's sum is ", got, ", not ",
                                            SumOfIndices(quads * 4),
                                            ": it did not read every word"));
  }
  r.read_gbps = static_cast<double>(r.read_bytes) / (ms * 1e-3) / 1e9;
  return absl::OkStatus();
}

absl::Status MeasureMatmul(DeviceRates& r) {
  const int n = kMatmulSize;
  const uint64_t bytes = uint64_t{2} * n * n;
  DeviceMemory a, b, c;
  for (DeviceMemory* m : {&a, &b, &c}) {
    DF11_RETURN_IF_ERROR(Check(cudaMalloc(&m->p, bytes), "cudaMalloc (product)"));
  }
  // Every element BF16 0x3c3c (about 0.0115): the rate does not depend on the values.
  DF11_RETURN_IF_ERROR(Check(cudaMemset(a.p, 0x3c, bytes), "cudaMemset"));
  DF11_RETURN_IF_ERROR(Check(cudaMemset(b.p, 0x3c, bytes), "cudaMemset"));
  cublasHandle_t handle = nullptr;
  DF11_RETURN_IF_ERROR(Check(cublasCreate(&handle), "cublasCreate"));
  const float one = 1, zero = 0;
  absl::StatusOr<double> ms = MedianMs([&] {
    return Check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a.p, CUDA_R_16BF, n,
                              b.p, CUDA_R_16BF, n, &zero, c.p, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  cublasDestroy(handle);
  DF11_RETURN_IF_ERROR(ms.status());
  r.matmul_size = n;
  r.bf16_matmul_tflops = 2.0 * n * double(n) * n / (*ms * 1e-3) / 1e12;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceRates> MeasureDeviceRates(int device) {
  DF11_RETURN_IF_ERROR(Check(cudaSetDevice(device), "cudaSetDevice"));
  DeviceRates r;
  DF11_RETURN_IF_ERROR(MeasureRead(device, r));
  DF11_RETURN_IF_ERROR(MeasureMatmul(r));
  return r;
}

}  // namespace df11::tool
