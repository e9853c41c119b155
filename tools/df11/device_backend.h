// The engine backend that a --device flag names: "cpu", or "cuda:N" in CUDA builds, with the
// daemon's default memory split (a budget of 90 % of the GPU, of which 10 % is the KV pool).
#ifndef DF11_TOOLS_DF11_DEVICE_BACKEND_H_
#define DF11_TOOLS_DF11_DEVICE_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/runtime/backend.h"
#include "daemon/runtime/cpu_backend.h"

namespace df11::tool {

struct DeviceBackend {
  std::unique_ptr<runtime::Backend> backend;
  std::string description;  // "cpu", or the GPU's model
};

// kInvalidArgument for another spelling; kFailedPrecondition for cuda:N in a build without CUDA
// or without such a device (the driver's answer).
absl::StatusOr<DeviceBackend> OpenDeviceBackend(const std::string& device,
                                                const runtime::CpuBackend::Options& cpu);

// Loads MODEL_DIR for `backend` and places it there.
absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> LoadOn(runtime::Backend& backend,
                                                             const std::string& dir);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_DEVICE_BACKEND_H_
