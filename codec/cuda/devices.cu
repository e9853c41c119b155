#include "codec/cuda/devices.h"

#include <cuda_runtime_api.h>

#include <string>

namespace df11::cuda {
namespace {

absl::Status CudaError(const char* call, cudaError_t e) {
  return absl::InternalError(std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> ListDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  // No device or no driver is a normal state for a CPU-only node, not a failure.
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear it
    return std::vector<DeviceInfo>{};
  }
  if (e != cudaSuccess) return CudaError("cudaGetDeviceCount", e);
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      return CudaError("cudaGetDeviceProperties", err);
    }
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    d.total_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      d.free_bytes = free_bytes;
    }
    devices.push_back(std::move(d));
  }
  return devices;
}

std::string RuntimeVersion() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

}  // namespace df11::cuda
