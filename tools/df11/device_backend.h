// The engine backend that a --device flag names: "cpu", or "cuda:N" in CUDA builds, with a memory
// budget and a KV pool in df11d's spellings (memory.budget, memory.kv_cache: "90%", "8GiB").
#ifndef DF11_TOOLS_DF11_DEVICE_BACKEND_H_
#define DF11_TOOLS_DF11_DEVICE_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"

namespace df11::tool {

struct DeviceBackend {
  std::unique_ptr<runtime::Backend> backend;
  std::string description;  // "cpu", or the GPU's model
};

struct GpuMemory {
  std::string budget = "90%";    // of the GPU's memory
  std::string kv_cache = "10%";  // of the budget
  int64_t fused_max_rows = 8;    // df11d's memory.fused_max_rows
  std::string gpu_layout = "tiled";  // df11d's memory.gpu_layout: tiled or lane
};

// kInvalidArgument for another spelling (of the device, the sizes or the layout); kFailedPrecondition for
// cuda:N in a build without CUDA or without such a device (the driver's answer).
absl::StatusOr<DeviceBackend> OpenDeviceBackend(const std::string& device,
                                                const runtime::CpuBackend::Options& cpu,
                                                const GpuMemory& memory = {});

// Loads MODEL_DIR for `backend` and places it there.
absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> LoadOn(runtime::Backend& backend,
                                                             const std::string& dir);

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_DEVICE_BACKEND_H_
