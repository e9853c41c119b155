// ForwardOps (daemon/runtime/backends/cuda/forward_ops.h) on the current CUDA device: cuBLAS matrix products and
// the project's kernels for the rest. CUDA builds only; no CUDA type appears here.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime::cuda {

// kInternal naming the cuBLAS call when its handle cannot be made.
// The operations on the current device; each launch (a cuBLAS product counts one) adds one to
// `launches`.
absl::StatusOr<std::unique_ptr<ForwardOps>> NewForwardOps(
    std::shared_ptr<std::atomic<uint64_t>> launches);

// kFailedPrecondition when this build has no code that the current device can run (its compute
// capability is older than every architecture built, or differs from every one built without
// PTX), naming the device's capability and the architectures built; so a device is refused when
// it is opened rather than at its first launch ("no kernel image").
absl::Status CheckKernelImage(const std::string& device);

}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FORWARD_OPS_H_
