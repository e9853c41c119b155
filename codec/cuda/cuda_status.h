// The one place a cudaError_t becomes an absl::Status. Include from .cu files only.
#ifndef DF11_CODEC_CUDA_CUDA_STATUS_H_
#define DF11_CODEC_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"

namespace df11::cuda {

inline absl::Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

}  // namespace df11::cuda

// Returns an internal error naming `call` when the CUDA runtime call fails.
#define DF11_CUDA_RETURN_IF_ERROR(call)                                              \
  do {                                                                               \
    if (absl::Status df11_cuda_status = ::df11::cuda::CudaStatus((call), #call);     \
        !df11_cuda_status.ok()) {                                                    \
      return df11_cuda_status;                                                       \
    }                                                                                \
  } while (0)

#endif  // DF11_CODEC_CUDA_CUDA_STATUS_H_
