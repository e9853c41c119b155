#include "daemon/server/node.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache.h"
#include "daemon/runtime/cpu_backend.h"
#if defined(DF11_HAVE_CUDA)
#include "daemon/runtime/cuda/cuda_device.h"
#include "daemon/runtime/cuda_backend.h"
#endif
#include "daemon/server/log.h"

namespace df11::server {

Node::Node(const config::Config& config)
    : config_(config),
      hub_settings_(hub::ResolveHubSettings(
          {.endpoint = config.hub_endpoint,
           .cache_dir = config.hub_cache_dir,
           .token_file = config.hub_token_file,
           .offline = config.hub_offline,
           .max_connections = static_cast<int>(config.hub_max_connections),
           .max_download_bytes = static_cast<uint64_t>(config.hub_max_download_bytes)})) {}

namespace {

// The backend of `config`'s device, and a description of the device for people.
absl::StatusOr<std::pair<std::unique_ptr<runtime::Backend>, std::string>> MakeBackend(
    const config::Config& config) {
  const config::Device& device = config.devices[0];
  if (device.cpu) {
    return std::make_pair(std::unique_ptr<runtime::Backend>(std::make_unique<runtime::CpuBackend>(
                              runtime::CpuBackend::Options{.threads = config.cpu_threads})),
                          std::string("cpu"));
  }
#if defined(DF11_HAVE_CUDA)
  absl::StatusOr<std::unique_ptr<runtime::GpuDevice>> gpu = runtime::cuda::OpenDevice(device.index);
  if (!gpu.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("devices: ", gpu.status().message()));
  }
  const std::string description = (*gpu)->description();
  DF11_ASSIGN_OR_RETURN(const runtime::GpuDevice::MemoryInfo info, (*gpu)->GetMemoryInfo());
  const uint64_t budget = config.budget.Resolve(info.total);
  const runtime::CudaBackend::Options options{
      .budget = budget,
      .kv_pool_bytes = config.kv_cache.Resolve(budget),
      .kv_page_bytes = static_cast<uint64_t>(config.kv_page_bytes),
      .threads = config.cpu_threads};
  absl::StatusOr<std::unique_ptr<runtime::CudaBackend>> backend =
      runtime::CudaBackend::Create(*std::move(gpu), options);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("memory.budget on ", device.Name(), " (", description,
                                     "): ", backend.status().message()));
  }
  return std::make_pair(std::unique_ptr<runtime::Backend>(*std::move(backend)), description);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "devices: ", device.Name(),
      " needs the CUDA backend, and this df11d was built without CUDA (no nvcc at build time); "
      "use devices: [cpu] or build with -DDF11_CUDA=ON"));
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> Node::Create(const config::Config& config) {
  if (config.devices.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("devices: a df11d serves exactly one device (cpu or one GPU; run one per "
                     "GPU); ",
                     config.devices.size(), " were configured"));
  }
  std::unique_ptr<Node> node(new Node(config));
  node->metrics_ = std::make_unique<metrics::Metrics>();
  DF11_ASSIGN_OR_RETURN(auto backend, MakeBackend(config));
  node->backend_ = std::move(backend.first);
  node->registry_ = std::make_unique<registry::Registry>(
      registry::Registry::Options{.device = config.devices[0],
                                  .device_description = backend.second,
                                  .budget = config.budget,
                                  .eviction = config.eviction,
                                  .default_keep_alive_seconds = config.keep_alive_seconds,
                                  .max_concurrent_loads = config.max_concurrent_loads,
                                  .hub = node->hub_settings_},
      *node->backend_, node->metrics_.get());
  node->scheduler_ = std::make_unique<scheduler::Scheduler>(
      scheduler::Scheduler::Options{.queue_size = config.queue_size,
                                    .max_running = config.max_running_requests},
      *node->backend_, *node->registry_, node->metrics_.get());
  return node;
}

Node::~Node() {
  if (preload_.joinable()) preload_.join();
  scheduler_.reset();  // ends requests before the models they hold go
  registry_.reset();
}

void Node::StartPreload() {
  preload_ = std::thread([this] {
    for (const config::PreloadModel& p : config_.preload) {
      if (shutting_down()) break;
      registry::LoadRequest request{.source = p.source,
                                    .name = p.name,
                                    .pin = p.pin,
                                    .keep_alive_seconds = p.keep_alive_seconds,
                                    .device = ""};
      absl::StatusOr<registry::ModelInfo> info = registry_->Load(
          request, [this](const registry::LoadProgress&) { return !shutting_down(); });
      if (info.ok()) {
        Log(absl::StrCat("preloaded ", info->name, " from ", p.source, " (",
                         info->bytes.df11_units + info->bytes.passthrough, " bytes)"));
      } else {
        Log(absl::StrCat("preloading ", p.source, " failed: ", info.status().ToString()));
      }
    }
    preload_done_ = true;
  });
}

absl::StatusOr<UnloadOutcome> Node::Unload(const std::string& name, absl::Duration drain,
                                           bool cancel_in_flight) {
  DF11_ASSIGN_OR_RETURN(std::shared_ptr<const registry::ResidentModel> model,
                        registry_->BeginUnload(name));
  UnloadOutcome outcome;
  if (model != nullptr) {
    outcome.requests_cancelled = scheduler_->Drain(model.get(), drain, cancel_in_flight);
  }
  outcome.result = registry_->FinishUnload(name);
  model.reset();  // the last reference: the memory goes now
  Log(absl::StrCat("unloaded ", name, " (", outcome.result.bytes_freed, " bytes freed, ",
                   outcome.requests_cancelled, " requests cancelled)"));
  return outcome;
}

NodeStatus Node::Status() const {
  NodeStatus status;
  status.devices.push_back(registry_->Memory());
  status.models = registry_->List();
  status.queued_requests = scheduler_->queued();
  status.running_requests = scheduler_->running();
  status.time_unix_ms = absl::ToUnixMillis(absl::Now());
  return status;
}

}  // namespace df11::server
