#include "daemon/server/node.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache.h"
#include "daemon/runtime/cpu_backend.h"
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

absl::StatusOr<std::unique_ptr<Node>> Node::Create(const config::Config& config) {
  if (config.devices.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("devices: this build serves exactly one device (cpu); ", config.devices.size(),
                     " were configured"));
  }
  if (!config.devices[0].cpu) {
    return absl::FailedPreconditionError(absl::StrCat(
        "devices: ", config.devices[0].Name(),
        " needs the CUDA backend, which this build does not have; use devices: [cpu]"));
  }
  std::unique_ptr<Node> node(new Node(config));
  node->metrics_ = std::make_unique<metrics::Metrics>();
  node->backend_ = std::make_unique<runtime::CpuBackend>(
      runtime::CpuBackend::Options{.threads = config.cpu_threads});
  node->registry_ = std::make_unique<registry::Registry>(
      registry::Registry::Options{.device = config.devices[0],
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
