// ForwardOps (daemon/runtime/backends/cuda/forward_ops.h) on the current CUDA device: cuBLAS matrix products and
// the project's kernels for the rest. CUDA builds only; no CUDA type appears here.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime::cuda {

// kInternal naming the cuBLAS call when its handle cannot be made.
absl::StatusOr<std::unique_ptr<ForwardOps>> NewForwardOps();

}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_
