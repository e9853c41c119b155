// CUDA's implementation of GpuDevice (daemon/runtime/backends/cuda/gpu_device.h), for the CUDA backend. No CUDA
// type appears here; built only with CUDA (DF11_HAVE_CUDA).
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<GpuDevice> device, cuda::OpenDevice(0));
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_CUDA_DEVICE_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"

namespace df11::runtime::cuda {

// CUDA device `index`. kNotFound when there is no such device (saying how many there are, none
// on a machine without a GPU or driver); kInternal naming the call for another CUDA error. Every
// call of the result makes `index` the calling thread's current device first.
absl::StatusOr<std::unique_ptr<GpuDevice>> OpenDevice(int index);

}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_CUDA_DEVICE_H_
