#include "tools/df11/device_backend.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/config/config.h"
#include "daemon/runtime/engine/model.h"
#ifdef DF11_HAVE_CUDA
#include "daemon/runtime/backends/cuda/device/cuda_device.h"
#include "daemon/runtime/backends/cuda/cuda_backend.h"
#endif

namespace df11::tool {

absl::StatusOr<DeviceBackend> OpenDeviceBackend(const std::string& device,
                                                const runtime::CpuBackend::Options& cpu,
                                                const GpuMemory& memory) {
  if (device == "cpu") {
    return DeviceBackend{.backend = std::make_unique<runtime::CpuBackend>(cpu),
                         .description = "cpu"};
  }
  int index = -1;
  if (device.rfind("cuda:", 0) != 0 || !absl::SimpleAtoi(device.substr(5), &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", device, ": expected cpu or cuda:N"));
  }
  // The same spellings as df11d's configuration.
  DF11_ASSIGN_OR_RETURN(
      const config::Config sizes,
      config::ParseConfig(absl::StrCat("memory: {budget: \"", memory.budget, "\", kv_cache: \"",
                                       memory.kv_cache, "\", gpu_layout: \"", memory.gpu_layout,
                                       "\"}\npreload: []\n"),
                          ""));
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<runtime::GpuDevice>> gpu = runtime::cuda::OpenDevice(index);
  if (!gpu.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("--device ", gpu.status().message()));
  }
  const std::string description = (*gpu)->description();
  DF11_ASSIGN_OR_RETURN(const runtime::GpuDevice::MemoryInfo info, (*gpu)->GetMemoryInfo());
  const uint64_t budget = sizes.budget.Resolve(info.total);
  DF11_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::CudaBackend> backend,
      runtime::CudaBackend::Create(
          *std::move(gpu), {.budget = budget,
                            .kv_pool_bytes = sizes.kv_cache.Resolve(budget),
                            .fused_max_rows = memory.fused_max_rows,
                            .layout = sizes.gpu_layout == config::Config::GpuLayout::kLane
                                          ? runtime::CudaBackend::GpuLayout::kLane
                                          : runtime::CudaBackend::GpuLayout::kTiled}));
  return DeviceBackend{.backend = std::move(backend), .description = description};
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "--device ", device, ": this df11 was built without CUDA (no nvcc at build time)"));
#endif
}

absl::StatusOr<std::unique_ptr<runtime::PlacedModel>> LoadOn(runtime::Backend& backend,
                                                             const std::string& dir) {
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Model> host,
                        runtime::Model::Load(dir, backend.HostLoadOptions()));
  return backend.Place(std::move(host), {});
}

}  // namespace df11::tool
