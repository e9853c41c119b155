// The models of one device and the memory they take: each model's lifecycle (LOADING → READY →
// UNLOADING → gone, or FAILED), the device's budget with every byte accounted to a model or to
// the backend's shared buffers, and eviction when a load needs room.
//
// Requests hold a model through a ModelHandle (a shared_ptr that also counts as a lease): a
// model with a live handle is never evicted, and its memory is returned only after the last
// handle is gone.
//
// Models belong to an owner, a tenant or `shared`, and names are unique within an owner: two
// tenants may each have a model named `chat`. Eviction to make room for one tenant's load takes
// another tenant's models only while that tenant holds more than its fair share (MakeRoomLocked).
//
//   Registry registry(options, backend, &metrics);
//   DF11_ASSIGN_OR_RETURN(ModelInfo info, registry.Load({.source = "models/demo"}, on_progress));
//   DF11_ASSIGN_OR_RETURN(ModelHandle model, registry.Acquire({.owner = "shared", .name =
//   "demo"}));
//   ... generate with model->model, model->tokenizer ...
#ifndef DF11_DAEMON_REGISTRY_REGISTRY_H_
#define DF11_DAEMON_REGISTRY_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codec/model_directory.h"
#include "daemon/config/config.h"
#include "daemon/config/tokens.h"
#include "daemon/hub/settings.h"
#include "daemon/metrics/metrics.h"
#include "daemon/registry/hub_fetch.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/text/chat/chat_template.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/sampling/sampler.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"

namespace df11::registry {

// A model's identity: the tenant that owns it (config::kSharedTenant for the catalog's, preloads
// and shared loads) and its name within that owner.
struct ModelKey {
  std::string owner;
  std::string name;
  friend auto operator<=>(const ModelKey&, const ModelKey&) = default;
};

// A resident model: everything a request needs. The loaded parts never change; the counters are
// updated by the scheduler.
struct ResidentModel {
  std::string name;
  std::string owner;
  std::string source;             // as given to LoadModel
  std::string directory;          // where its files were read
  std::string resolved_revision;  // the hub commit; empty for a directory
  std::unique_ptr<runtime::PlacedModel> model;
  std::optional<runtime::Tokenizer> tokenizer;
  // The model's chat template, or why it has none (a chat request then fails with this).
  absl::StatusOr<runtime::ChatTemplate> chat_template = absl::UnknownError("not loaded");
  runtime::SamplingParams defaults;  // from generation_config.json
  // What the load left out that a person should know (the other towers of a multimodal
  // checkpoint); empty when nothing.
  std::string load_note;
  bool pinned = false;
  double keep_alive_seconds = 0;

  // Handles alive (requests queued or running, or about to be).
  mutable std::atomic<int32_t> leases{0};
  mutable std::atomic<int64_t> last_used_unix_ms{0};
  mutable std::atomic<uint64_t> requests_served{0};
  mutable std::atomic<uint64_t> tokens_generated{0};
  mutable std::atomic<int32_t> queued_requests{0};
  mutable std::atomic<int32_t> running_requests{0};
  mutable std::atomic<uint64_t> kv_bytes_in_use{0};
};

// A lease on a READY model; copies share it. The model stays alive (and is never evicted) while
// one exists.
using ModelHandle = std::shared_ptr<const ResidentModel>;

// kAvailable is not a registry state: a catalog entry that is not resident, as listings show it.
enum class ModelState { kLoading, kReady, kUnloading, kFailed, kAvailable };

// A model's bytes on its device, by kind.
struct ModelBytes {
  uint64_t df11_units = 0;
  uint64_t passthrough = 0;  // plain tensors: DF11 passthrough, or a whole BF16 checkpoint
  uint64_t kv_cache_in_use = 0;
  uint64_t total() const { return df11_units + passthrough + kv_cache_in_use; }
};

// A snapshot of one model for ListModels / GetModel.
struct ModelInfo {
  std::string name;
  std::string owner;
  ModelState state = ModelState::kLoading;
  std::string failure_reason;
  std::string source;
  std::string resolved_revision;
  std::string architecture;  // empty until known
  bool df11 = false;
  std::string device;
  ModelBytes bytes;
  bool pinned = false;
  double keep_alive_seconds = 0;
  int64_t last_used_unix_ms = 0;
  uint64_t requests_served = 0;
  uint64_t tokens_generated = 0;
  int64_t context_length = 0;
  int32_t running_requests = 0;
  int32_t queued_requests = 0;
  uint64_t kv_bytes_per_position = 0;  // a resident model's KV cache per position of a sequence
  std::string load_note;               // ResidentModel::load_note
};

// The device's memory by kind. used = weights + scratch + kv_cache + kv_pool_free + workspace.
struct DeviceMemory {
  std::string device;
  std::string description;   // the device's model, for people
  uint64_t total = 0;        // the device's memory, from the driver
  uint64_t driver_free = 0;  // free on the device now, from the driver
  uint64_t arena = 0;        // held from the device up front (the budget); 0 on the CPU
  uint64_t budget = 0;
  uint64_t weights = 0;  // resident models, and what loads in progress have reserved
  uint64_t scratch = 0;
  uint64_t kv_cache = 0;      // held by running requests
  uint64_t kv_pool_free = 0;  // a GPU's KV pool pages that no request holds
  uint64_t workspace = 0;
  uint64_t used() const { return weights + scratch + kv_cache + kv_pool_free + workspace; }
  uint64_t free() const { return budget > used() ? budget - used() : 0; }
  uint64_t placeable = 0;  // free plus what eviction could free now
};

struct LoadRequest {
  std::string source;  // a directory, or org/name[@revision] in the hub cache
  std::string name;    // empty: the hub id, or the directory's name
  bool pin = false;
  std::optional<double> keep_alive_seconds;  // unset: the configured default
  std::string device;                        // empty or the registry's device
  // The source was checked as a hub id: never read it as a local directory that appeared since.
  bool hub_only = false;
  std::string owner = config::kSharedTenant;
  // The owner's limits on models and bytes, checked as the load reserves its room.
  std::optional<uint64_t> owner_max_bytes;
  std::optional<int64_t> owner_max_models;
};

struct LoadProgress {
  // kDownloading while a hub model's files still arrive (their placement overlaps it); then
  // kPlacing.
  enum class Phase { kResolving, kDownloading, kPlacing, kDone };
  Phase phase = Phase::kResolving;
  uint64_t bytes_done = 0;  // downloaded while kDownloading, placed while kPlacing
  uint64_t bytes_total = 0;
  std::vector<FileProgress> files;  // hub loads: each file's bytes downloaded and placed
};

// Called during a load; returning false cancels it (everything it placed is freed).
using LoadProgressFn = std::function<bool(const LoadProgress&)>;

struct UnloadResult {
  ModelInfo model;  // as it was when unloading began
  uint64_t bytes_freed = 0;
};

class Registry {
 public:
  struct Options {
    config::Device device;
    std::string device_description;
    config::Budget budget;
    config::Eviction eviction = config::Eviction::kLru;
    double default_keep_alive_seconds = 300;
    int64_t max_concurrent_loads = 2;
    hub::HubSettings hub;
    std::shared_ptr<hub::PeerSource> peers;  // asked before the hub; null: none
  };
  // `backend` and `metrics` (may be null) must outlive the registry.
  Registry(const Options& options, runtime::Backend& backend, metrics::Metrics* metrics);
  ~Registry();

  // Loads a model, calling `progress` as it goes, and returns its final state. Idempotent: a
  // model of that name and source that is READY is returned at once, one LOADING is waited for;
  // a model of that name being unloaded is waited for, then loaded again.
  // Errors: kInvalidArgument (empty source, bad name, another device), kNotFound (no such
  // directory), kUnavailable (the hub unreachable and the model not in the cache), kAlreadyExists
  // (the name serves another source), kResourceExhausted (does not fit, with the bytes needed, free
  // and evictable), kCancelled, and the loader's errors (kDataLoss for corrupt files, ...); a hub
  // id is downloaded into the hub cache as it is placed, with the hub's errors (kNotFound,
  // kUnauthenticated, kPermissionDenied, kUnavailable, kDataLoss); a failed load stays listed as
  // FAILED with the reason until reloaded or unloaded. The owner's limits give kResourceExhausted
  // marked by config::QuotaExceededError.
  absl::StatusOr<ModelInfo> Load(const LoadRequest& request, const LoadProgressFn& progress)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A handle on READY model `key`. kNotFound for an unknown model, kFailedPrecondition for a
  // model that is not READY (naming its state).
  absl::StatusOr<ModelHandle> Acquire(const ModelKey& key) ABSL_LOCKS_EXCLUDED(mu_);

  // Model `key`, READY as `model`, can no longer be served (its files were modified in place):
  // it becomes FAILED with `why` as its reason and its memory is released to the budget (requests
  // still running on it keep it alive until they end). A later Load of the name replaces it.
  // Nothing happens when `key` is not that model any more.
  void MarkFailed(const ModelKey& key, const ResidentModel& model, const absl::Status& why)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Starts unloading: new Acquire calls fail from now on. Returns the model (so the caller can
  // drain its requests) and its state. kNotFound for an unknown name. A FAILED model has no
  // resident part (nullptr) and is removed at once.
  absl::StatusOr<std::shared_ptr<const ResidentModel>> BeginUnload(const ModelKey& key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes a model that BeginUnload started on; its memory is returned once the caller drops the
  // pointer BeginUnload gave (the registry keeps no other reference).
  UnloadResult FinishUnload(const ModelKey& key) ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<ModelInfo> List() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ModelInfo> Get(const ModelKey& key) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the registry has an entry for `key`, in any state (cheaper than Get: no snapshot).
  bool Contains(const ModelKey& key) const ABSL_LOCKS_EXCLUDED(mu_);
  DeviceMemory Memory() const ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `create` (which allocates `bytes` of KV cache on the backend) if the budget has room
  // for them; kResourceExhausted with the numbers otherwise. A backend with a KV pool checks the
  // pool in `create` instead. Models are not evicted for KV. `create` runs without the registry's
  // lock, the bytes held against the budget meanwhile.
  absl::Status PlaceKvCache(uint64_t bytes, absl::FunctionRef<absl::Status()> create)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& device_name() const { return device_name_; }

 private:
  struct Entry {
    std::string owner, name, source;
    ModelState state = ModelState::kLoading;
    std::string failure_reason;
    // LOADING: the placement estimate by kind, held against the budget until the model is
    // resident (the shared growth with the units).
    uint64_t reserved_units = 0, reserved_plain = 0;
    // The part of the reservation that models evicted for it still hold (Dropped::room_for).
    uint64_t reserved_held_by_evicted = 0;
    std::shared_ptr<ResidentModel> model;  // READY, UNLOADING
    std::string architecture;
    bool df11 = false;
    int64_t context_length = 0;
    bool pinned = false;
    double keep_alive_seconds = 0;
  };

  // Models taken out of the registry under its lock and destroyed after it is released (freeing
  // memory can take long); their bytes stay counted as weights until they are gone. Models evicted
  // for a load are counted inside that load's reservation instead (`room_for`), so that the
  // accounts never show both.
  struct Dropped {
    std::vector<std::shared_ptr<ResidentModel>> models;
    uint64_t bytes = 0;
    std::optional<ModelKey> room_for;
  };
  void DropLocked(std::shared_ptr<ResidentModel> model, Dropped* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(Dropped* dropped) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to a poll period for a change, then asks `cancelled` without the lock; true when
  // cancelled.
  bool WaitOrCancelLocked(const std::function<bool()>& cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The steps of Load after its entry exists; the entry's state is set by Load.
  // `fetch` is the hub download still delivering the weight files, or null for a directory.
  absl::StatusOr<std::shared_ptr<ResidentModel>> LoadFiles(const LoadRequest& request,
                                                           const codec::ModelDirectory& files,
                                                           const std::string& revision,
                                                           HubFetch* fetch,
                                                           const LoadProgressFn& progress)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Makes room for `bytes` by evicting per policy, or kResourceExhausted with the numbers (naming
  // only the models of the loading owner and shared ones). Fair share: a load for one tenant
  // evicts another tenant's model only if that tenant keeps at least its fair share after it, the
  // budget divided by the number of tenants holding bytes (the loading one included); shared
  // models are evictable for anyone, a tenant's own for itself.
  absl::Status MakeRoomLocked(uint64_t bytes, const ModelKey& for_model, Dropped* evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Idle READY models that the policy allows to evict, least recently used first.
  std::vector<ModelKey> EvictableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kResourceExhausted (a quota) when a new model of `request.owner` taking `bytes` would exceed
  // its limits.
  absl::Status CheckOwnerLimitsLocked(const LoadRequest& request, const std::string& name,
                                      uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t OwnerBytesLocked(const std::string& owner) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t EntryBytesLocked(const Entry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t WeightsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ModelInfo InfoLocked(const Entry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DeviceMemory MemoryLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a new load or KV cache may take: the free bytes less the KV caches being created.
  uint64_t AvailableLocked(const DeviceMemory& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ModelHandle NewHandle(const std::shared_ptr<ResidentModel>& model) const;

  const Options options_;
  const std::string device_name_;
  runtime::Backend& backend_;
  metrics::Metrics* const metrics_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // an entry changed state, or a load slot freed
  std::map<ModelKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t loads_running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // models dropped, not yet destroyed
  // KV caches being created: not yet in the backend's figures, but not free for anything else.
  uint64_t kv_placing_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

const char* ModelStateName(ModelState state);  // "LOADING", "READY", ...

// The name a model is served under: `name`, else the hub id of `source`, else its directory's
// name.
std::string ModelName(const std::string& source, const std::string& name);

// How messages name a model: `name`, or `name` (tenant `owner`) for a tenant's.
std::string DescribeModel(const ModelKey& key);

}  // namespace df11::registry

#endif  // DF11_DAEMON_REGISTRY_REGISTRY_H_
