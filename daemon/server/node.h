// One df11d node: its backend, model registry, scheduler and metrics, built from the
// configuration, and the operations the gRPC service and /metrics read. It holds no gRPC types,
// so tests drive it directly.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<Node> node, Node::Create(config));
//   node->StartPreload();                       // config.preload, in the background
//   DF11_ASSIGN_OR_RETURN(registry::ModelHandle m, node->registry().Acquire("demo"));
#ifndef DF11_DAEMON_SERVER_NODE_H_
#define DF11_DAEMON_SERVER_NODE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/config/config.h"
#include "daemon/hub/settings.h"
#include "daemon/metrics/metrics.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/backend.h"
#include "daemon/scheduler/scheduler.h"

namespace df11::server {

struct NodeStatus {
  std::vector<registry::DeviceMemory> devices;
  std::vector<registry::ModelInfo> models;
  int64_t queued_requests = 0;
  int64_t running_requests = 0;
  int64_t time_unix_ms = 0;  // when it was taken
};

struct UnloadOutcome {
  registry::UnloadResult result;
  int requests_cancelled = 0;
};

class Node {
 public:
  // kFailedPrecondition for a device this build or machine cannot serve (a build without CUDA, no
  // such GPU); kInvalidArgument for more than one device; the CUDA backend's errors for a budget
  // that does not fit (kInvalidArgument) or that the GPU cannot give (kResourceExhausted).
  static absl::StatusOr<std::unique_ptr<Node>> Create(const config::Config& config);
  ~Node();

  // Loads config.preload on a background thread, in order; failures are logged and leave the
  // model FAILED. preload_done() turns true when every preload has ended either way.
  void StartPreload();
  bool preload_done() const { return preload_done_; }

  // Unload as the wire API describes: no new requests, in-flight ones drain for `drain` (none
  // with `cancel_in_flight`) and are then cancelled, and the memory is returned.
  absl::StatusOr<UnloadOutcome> Unload(const std::string& name, absl::Duration drain,
                                       bool cancel_in_flight);
  NodeStatus Status() const;

  // Called once when the daemon begins to shut down: preloads stop, long-lived watch streams end.
  void BeginShutdown() { shutdown_.Notify(); }
  bool shutting_down() const { return shutdown_.HasBeenNotified(); }
  // Waits up to `timeout` for BeginShutdown; true once it has been called.
  bool WaitForShutdown(absl::Duration timeout) const {
    return shutdown_.WaitForNotificationWithTimeout(timeout);
  }

  const config::Config& config() const { return config_; }
  // The hub settings: the config's, else the environment's (HF_ENDPOINT, HF_TOKEN, ...).
  const hub::HubSettings& hub_settings() const { return hub_settings_; }
  registry::Registry& registry() { return *registry_; }
  scheduler::Scheduler& scheduler() { return *scheduler_; }
  metrics::Metrics& metrics() { return *metrics_; }
  runtime::Backend& backend() { return *backend_; }

 private:
  explicit Node(const config::Config& config);

  const config::Config config_;
  const hub::HubSettings hub_settings_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<runtime::Backend> backend_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::thread preload_;
  std::atomic<bool> preload_done_{false};
  absl::Notification shutdown_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_NODE_H_
