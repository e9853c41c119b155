// One df11d node: its backend, model registry, scheduler and metrics, built from the
// configuration, and the operations the gRPC service and /metrics read. It holds no gRPC types,
// so tests drive it directly.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<Node> node, Node::Create(config));
//   node->StartPreload();                       // config.preload, in the background
//   DF11_ASSIGN_OR_RETURN(registry::ModelHandle m,
//                         node->registry().Acquire({.owner = "shared", .name = "demo"}));
#ifndef DF11_DAEMON_SERVER_NODE_H_
#define DF11_DAEMON_SERVER_NODE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/config/config.h"
#include "daemon/hub/settings.h"
#include "daemon/metrics/metrics.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/scheduler/scheduler.h"
#include "daemon/server/auth.h"
#include "daemon/server/model_roots.h"
#include "daemon/server/peer_client.h"
#include "daemon/server/tenant_limits.h"
#include "daemon/server/tls.h"

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
  // such GPU), or for a listen address beyond loopback with no auth.tokens_file and no
  // `insecure: true`; kInvalidArgument for more than one device or a bad tokens file; the CUDA
  // backend's errors for a budget that does not fit (kInvalidArgument) or that the GPU cannot give
  // (kResourceExhausted).
  static absl::StatusOr<std::unique_ptr<Node>> Create(const config::Config& config);
  ~Node();

  // Loads config.preload on a background thread, in order; failures are logged and leave the
  // model FAILED. preload_done() turns true when every preload has ended either way.
  void StartPreload();
  bool preload_done() const { return preload_done_; }

  // The catalog now: the config's entries, then the catalog file's (re-read when it changes; an
  // entry of the file replaces the config's of the same name).
  std::vector<config::ModelSpec> Catalog() const ABSL_LOCKS_EXCLUDED(catalog_mu_);
  // Every model `caller` sees (Caller::Sees): the registry's, then catalog entries that are not
  // resident (state kAvailable).
  std::vector<registry::ModelInfo> ListModels(const Caller& caller) const;

  // The model `name` means to `caller`. `owner` empty: the caller's own tenant's model of that
  // name, else the shared one (resident, or in the catalog); else that owner's, when the caller
  // sees it; for an admin naming no owner, failing those, the one tenant's model of that name
  // (kFailedPrecondition when several tenants have one). kNotFound naming only the models the
  // caller sees: another tenant's model does not exist for it.
  absl::StatusOr<registry::ModelKey> Resolve(const Caller& caller, const std::string& name,
                                             const std::string& owner) const;
  absl::StatusOr<registry::ModelInfo> GetModel(const Caller& caller, const std::string& name,
                                               const std::string& owner) const;

  // Admits a Generate or completion request of `caller` under its tenant's quotas
  // (max_running_requests, requests_per_minute): the slot counts it as running until destroyed.
  // kResourceExhausted (config::IsQuotaExceeded) with the quota, the use and what was asked; a
  // refusal is written to the audit log with `peer`.
  absl::StatusOr<TenantLimits::Slot> AdmitRequest(const Caller& caller, const std::string& peer);

  // The registry's load request for `caller`: owned by its tenant (by `shared` when `shared` is
  // set, which only an admin may ask: kPermissionDenied otherwise), with its tenant's quotas.
  absl::StatusOr<registry::LoadRequest> LoadRequestFor(const Caller& caller,
                                                       registry::LoadRequest request,
                                                       bool shared) const;

  // The bytes a catalog model would take when loaded on this device (the backend's placement
  // estimate), when its files are on this node (a directory, or a hub id in the cache); read
  // from the headers once per source.
  std::optional<uint64_t> CatalogModelBytes(const config::ModelSpec& model) const
      ABSL_LOCKS_EXCLUDED(catalog_mu_);

  // A handle on model `name` for a request when it is resident now, without waiting: what
  // AcquireForRequest returns at once. Any error means AcquireForRequest has more to try.
  absl::StatusOr<registry::ModelHandle> AcquireResident(const Caller& caller,
                                                        const std::string& name,
                                                        const std::string& owner);
  // A handle on model `name` for a request. A model that is not resident but is in the catalog
  // is loaded now when on_demand is on (requests for it share one load, which goes on when they
  // give up), and waited for until `deadline`, or until `cancelled` returns true (asked every
  // 50 ms, with no lock of the node held).
  // kNotFound when the model is neither resident nor in the catalog (naming them);
  // kDeadlineExceeded when the load outlasts the wait; kCancelled; the load's errors
  // (kResourceExhausted with the numbers, kNotFound, kDataLoss, ...); the registry's otherwise.
  // `name` and `owner` are resolved for `caller` (Resolve). A resident model whose mapped files
  // were modified in place since its load becomes FAILED (kFailedPrecondition naming the file);
  // a catalog one is then loaded again, from the files as they are now.
  absl::StatusOr<registry::ModelHandle> AcquireForRequest(const Caller& caller,
                                                          const std::string& name,
                                                          const std::string& owner,
                                                          absl::Time deadline,
                                                          const std::function<bool()>& cancelled);

  // Unload as the wire API describes: no new requests, in-flight ones drain for `drain` (none
  // with `cancel_in_flight`) and are then cancelled, and the memory is returned. A user token
  // unloads its own tenant's models; a shared one is kPermissionDenied (an admin's alone).
  absl::StatusOr<UnloadOutcome> Unload(const Caller& caller, const std::string& name,
                                       const std::string& owner, absl::Duration drain,
                                       bool cancel_in_flight);
  // The node's devices, and the models `caller` sees.
  NodeStatus Status(const Caller& caller) const;
  // Everything: the models of every tenant (for /metrics, which filters by caller itself).
  NodeStatus Status() const;

  // The port the node serves gRPC on, once bound: the peers it asks leave it out.
  void SetGrpcPort(int port) {
    if (peers_ != nullptr) peers_->SetOwnPort(port);
  }

  // Called when the daemon begins to shut down (again: nothing more happens): preloads and
  // on-demand loads stop, the OnShutdown callbacks run (long-lived watch streams end).
  void BeginShutdown() ABSL_LOCKS_EXCLUDED(shutdown_mu_);
  // Runs `f` when BeginShutdown is called, or at once when it has been. `f` may outlive whoever
  // registered it (it holds what it needs), since it lives as long as the node.
  void OnShutdown(std::function<void()> f) ABSL_LOCKS_EXCLUDED(shutdown_mu_);
  bool shutting_down() const { return shutdown_.HasBeenNotified(); }
  // Waits up to `timeout` for BeginShutdown; true once it has been called.
  bool WaitForShutdown(absl::Duration timeout) const {
    return shutdown_.WaitForNotificationWithTimeout(timeout);
  }

  const config::Config& config() const { return config_; }

  // The caller of a gRPC call or HTTP request from its authorization header (nullopt: none), the
  // one check both front ends make. Without auth.tokens_file every caller is an admin of the
  // shared tenant (so every model is shared); with it, UNAUTHENTICATED unless the header carries a
  // listed token.
  absl::StatusOr<Caller> Authenticate(std::optional<absl::string_view> authorization,
                                      absl::string_view subject = "") const;
  // Whether `caller`'s token is still in the tokens file (always, without auth).
  bool StillAuthorized(const Caller& caller) const {
    return auth_ == nullptr || auth_->StillValid(caller);
  }
  // The listeners' TLS files (config tls:), null without TLS.
  TlsFiles* tls() const { return tls_.get(); }
  // Whether `caller` may LoadModel or EstimateModel `source`: under model_roots (model_roots.h),
  // and, with auth.user_loads: catalog, a catalog entry's source unless the caller is an admin.
  // PERMISSION_DENIED saying which rule. What the load reads: the source as checked.
  absl::StatusOr<CheckedSource> CheckLoadSource(const std::string& source,
                                                const Caller& caller) const;
  // The hub settings: the config's, else the environment's (HF_ENDPOINT, HF_TOKEN, ...).
  const hub::HubSettings& hub_settings() const { return hub_settings_; }
  // The cluster's other nodes asked for hub files before the hub; null when none are configured.
  std::shared_ptr<hub::PeerSource> peers() const { return peers_; }
  registry::Registry& registry() { return *registry_; }
  scheduler::Scheduler& scheduler() { return *scheduler_; }
  metrics::Metrics& metrics() { return *metrics_; }
  runtime::Backend& backend() { return *backend_; }

 private:
  // registry Acquire, when the model's files are as they were loaded (PlacedModel::CheckFiles);
  // otherwise the model is marked FAILED and the registry's answer for it returned.
  absl::StatusOr<registry::ModelHandle> AcquireUnchanged(const registry::ModelKey& key);
  explicit Node(const config::Config& config);
  // An on-demand load that requests wait for (its fields guarded by loads_mu_).
  struct PendingLoad {
    bool done = false;
    absl::Status status;
  };
  // Re-reads config.catalog_file every few seconds until shutdown.
  void WatchCatalogFile();
  // The catalog entry named `name`, if any.
  std::optional<config::ModelSpec> FindInCatalog(const std::string& name) const
      ABSL_LOCKS_EXCLUDED(catalog_mu_);
  // The names `caller` sees, for kNotFound messages.
  std::string VisibleNames(const Caller& caller) const;

  const config::Config config_;
  std::unique_ptr<Authenticator> auth_;  // null without auth.tokens_file
  std::unique_ptr<TlsFiles> tls_;        // null without tls.cert_file
  const hub::HubSettings hub_settings_;
  std::shared_ptr<PeerClient> peers_;  // null without peers.addresses or peers.dns
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<runtime::Backend> backend_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  TenantLimits tenant_limits_;
  std::thread preload_;
  std::atomic<bool> preload_done_{false};
  absl::Notification shutdown_;
  absl::Mutex shutdown_mu_;
  std::vector<std::function<void()>> on_shutdown_ ABSL_GUARDED_BY(shutdown_mu_);

  mutable absl::Mutex catalog_mu_;
  std::vector<config::ModelSpec> file_catalog_ ABSL_GUARDED_BY(catalog_mu_);
  // By source.
  mutable std::map<std::string, std::optional<uint64_t>> catalog_bytes_
      ABSL_GUARDED_BY(catalog_mu_);
  std::thread catalog_watcher_;

  absl::Mutex loads_mu_;
  absl::CondVar loads_changed_;
  // On-demand loads by model name.
  std::map<std::string, std::shared_ptr<PendingLoad>> loads_ ABSL_GUARDED_BY(loads_mu_);
  int load_threads_ ABSL_GUARDED_BY(loads_mu_) = 0;  // running
};

// For the loops that serve a call in flight: asks the node, at most twice a second, whether the
// caller's token is still listed, so that revoking it ends the call within the tokens file's
// reload interval (2 s) and half a second.
class AuthorizationWatch {
 public:
  AuthorizationWatch(const Node& node, const Caller& caller) : node_(node), caller_(caller) {}
  // kUnauthenticated naming the token once it was revoked; OK until then.
  absl::Status Check() {
    const absl::Time now = absl::Now();
    if (now < next_) return absl::OkStatus();
    next_ = now + absl::Milliseconds(500);
    if (node_.StillAuthorized(caller_)) return absl::OkStatus();
    return absl::UnauthenticatedError(
        absl::StrCat("token ", caller_.token_name, " was revoked while the request ran"));
  }

 private:
  const Node& node_;
  const Caller& caller_;
  absl::Time next_ = absl::InfinitePast();
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_NODE_H_
