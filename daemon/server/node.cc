#include "daemon/server/node.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/estimate.h"
#if defined(DF11_HAVE_CUDA)
#include "daemon/runtime/backends/cuda/device/cuda_device.h"
#include "daemon/runtime/backends/cuda/cuda_backend.h"
#endif
#include "daemon/audit/audit.h"
#include "daemon/server/log.h"
#include "daemon/server/model_roots.h"

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
      .threads = config.cpu_threads,
      .fused_max_rows = config.fused_max_rows,
      .layout = config.gpu_layout == config::Config::GpuLayout::kLane
                    ? runtime::CudaBackend::GpuLayout::kLane
                    : runtime::CudaBackend::GpuLayout::kTiled};
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

absl::StatusOr<Caller> Node::Authenticate(std::optional<absl::string_view> authorization,
                                          absl::string_view subject) const {
  if (auth_ == nullptr) {
    return Caller{.token_name = "",
                  .tenant = config::kSharedTenant,
                  .role = config::Role::kAdmin,
                  .quota = {}};
  }
  return auth_->Authenticate(authorization, subject);
}

absl::StatusOr<TenantLimits::Slot> Node::AdmitRequest(const Caller& caller,
                                                      const std::string& peer) {
  absl::StatusOr<TenantLimits::Slot> slot = tenant_limits_.Admit(caller.tenant, caller.quota);
  if (!slot.ok()) {
    audit::Record({.event = "quota_refusal",
                   .tenant = caller.tenant,
                   .token = caller.token_name,
                   .peer = peer,
                   .outcome = slot.status()});
  }
  return slot;
}

absl::StatusOr<registry::LoadRequest> Node::LoadRequestFor(const Caller& caller,
                                                           registry::LoadRequest request,
                                                           bool shared) const {
  if (!caller.admin()) {
    // Powers that would let one tenant hold memory against the others' fair share.
    if (shared) {
      return absl::PermissionDeniedError(
          "shared: only an admin token may load a model every tenant shares");
    }
    if (request.pin) {
      return absl::PermissionDeniedError(
          "pin: only an admin token may pin a model (a pinned model is never evicted)");
    }
    if (request.keep_alive_seconds.value_or(0) > config_.user_max_keep_alive_seconds) {
      return absl::PermissionDeniedError(absl::StrCat(
          "keep_alive_seconds: ", *request.keep_alive_seconds, " is more than the ",
          config_.user_max_keep_alive_seconds,
          " s a user token may ask for (auth.user_max_keep_alive); an admin token may ask more"));
    }
  }
  request.owner = shared ? config::kSharedTenant : caller.tenant;
  if (request.owner == caller.tenant) {
    request.owner_max_bytes = caller.quota.max_resident_bytes;
    request.owner_max_models = caller.quota.max_models;
  }
  return request;
}

absl::StatusOr<CheckedSource> Node::CheckLoadSource(const std::string& source,
                                                    const Caller& caller) const {
  DF11_ASSIGN_OR_RETURN(CheckedSource checked, CheckModelRoots(source, config_.model_roots));
  if (config_.user_loads_catalog_only && !caller.admin()) {
    const std::vector<config::ModelSpec> catalog = Catalog();
    if (std::none_of(catalog.begin(), catalog.end(),
                     [&](const config::ModelSpec& m) { return m.source == source; })) {
      return absl::PermissionDeniedError(absl::StrCat(
          "auth.user_loads is catalog: a user token may load only the catalog's models, and ",
          source, " is not one of them"));
    }
  }
  return checked;
}

absl::StatusOr<std::unique_ptr<Node>> Node::Create(const config::Config& config) {
  if (config.devices.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("devices: a df11d serves exactly one device (cpu or one GPU; run one per "
                     "GPU); ",
                     config.devices.size(), " were configured"));
  }
  if (config.auth_tokens_file.empty() && !config.insecure) {
    for (const auto& [field, address] : {std::pair{"listen.grpc", config.grpc_listen},
                                         std::pair{"listen.http", config.http_listen}}) {
      if (address.empty() || config::IsLoopbackAddress(address)) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          field, " ", address,
          " reaches beyond this machine, and without auth.tokens_file anyone there could load, "
          "unload and generate; set auth.tokens_file, or insecure: true to accept that"));
    }
  }
  if (!config.audit_file.empty()) DF11_RETURN_IF_ERROR(audit::UseFile(config.audit_file));
  std::unique_ptr<Node> node(new Node(config));
  if (!config.tls_cert_file.empty()) {
    DF11_ASSIGN_OR_RETURN(node->tls_, TlsFiles::Create(config));
  }
  if (!config.auth_tokens_file.empty()) {
    DF11_ASSIGN_OR_RETURN(node->auth_, Authenticator::Create(config.auth_tokens_file));
  } else if (config.insecure) {
    Log("warning: insecure: true and no auth.tokens_file: every caller that reaches the listen "
        "addresses may load, unload and generate (df11_insecure is 1 on /metrics)");
  }
  if (config.peers_asked()) {
    PeerClientOptions peers{
        .addresses = config.peer_addresses,
        .dns = config.peer_dns,
        .port = static_cast<int>(config.peer_port),
        .refresh_seconds = config.peer_refresh_seconds,
        .timeout_seconds = config.peer_timeout_seconds,
        .credential = {.token = "",
                       .tls_ca_file = config.peer_ca_file,
                       .tls_cert_file = config.peer_cert_file,
                       .tls_key_file = config.peer_key_file},
        .fetch = {.min_bytes_per_second = static_cast<double>(config.peer_min_rate),
                  .window_seconds = config.peer_timeout_seconds,
                  .ask_at_once = 4}};
    if (!config.peer_token_file.empty()) {
      // Optional, as the hub's token file (a Kubernetes Secret that may not exist): without it,
      // peers that require a token refuse this node, and its loads go to the hub.
      const absl::StatusOr<std::string> text =
          base::ReadFile(config.peer_token_file, base::kMaxTokenFileBytes);
      peers.credential.token =
          text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : std::string();
      if (peers.credential.token.empty()) {
        Log(absl::StrCat("warning: peers.token_file ", config.peer_token_file,
                         " holds no token: peers that require one will refuse this node"));
      }
    }
    DF11_ASSIGN_OR_RETURN(node->peers_, PeerClient::Create(std::move(peers)));
  }
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
                                  .hub = node->hub_settings_,
                                  .peers = node->peers_},
      *node->backend_, node->metrics_.get());
  node->scheduler_ = std::make_unique<scheduler::Scheduler>(
      scheduler::Scheduler::Options{.queue_size = config.queue_size,
                                    .max_running = config.max_running_requests},
      *node->backend_, *node->registry_, node->metrics_.get());
  return node;
}

Node::~Node() {
  BeginShutdown();  // preloads and on-demand loads stop, the catalog watcher ends
  if (preload_.joinable()) preload_.join();
  if (catalog_watcher_.joinable()) catalog_watcher_.join();
  {
    absl::MutexLock lock(&loads_mu_);
    while (load_threads_ > 0) loads_changed_.Wait(&loads_mu_);
  }
  scheduler_.reset();  // ends requests before the models they hold go
  registry_.reset();
}

std::vector<config::ModelSpec> Node::Catalog() const {
  std::vector<config::ModelSpec> catalog;
  absl::MutexLock lock(&catalog_mu_);
  for (const config::ModelSpec& m : config_.catalog) {
    const bool replaced = std::any_of(file_catalog_.begin(), file_catalog_.end(),
                                      [&](const config::ModelSpec& f) { return f.name == m.name; });
    if (!replaced) catalog.push_back(m);
  }
  catalog.insert(catalog.end(), file_catalog_.begin(), file_catalog_.end());
  return catalog;
}

std::optional<config::ModelSpec> Node::FindInCatalog(const std::string& name) const {
  for (const config::ModelSpec& m : Catalog()) {
    if (registry::ModelName(m.source, m.name) == name) return m;
  }
  return std::nullopt;
}

std::optional<uint64_t> Node::CatalogModelBytes(const config::ModelSpec& model) const {
  {
    absl::MutexLock lock(&catalog_mu_);
    auto it = catalog_bytes_.find(model.source);
    if (it != catalog_bytes_.end()) return it->second;
  }
  std::optional<uint64_t> bytes;
  absl::StatusOr<hub::ModelSource> source = hub::ParseModelSource(model.source);
  std::string directory = source.ok() ? source->directory : "";
  if (source.ok() && source->is_hub) {
    absl::StatusOr<hub::CachedSnapshot> snapshot =
        hub::FindCachedSnapshot(hub_settings_.cache_dir, *source);
    directory = snapshot.ok() ? snapshot->directory : "";
  }
  if (!directory.empty()) {
    absl::StatusOr<runtime::ModelEstimate> e = runtime::EstimateModel(directory);
    if (e.ok()) bytes = backend_->EstimatePlacement(*e).total();
  }
  // Files that are not here yet may arrive later: only what was found is remembered.
  if (bytes) {
    absl::MutexLock lock(&catalog_mu_);
    catalog_bytes_[model.source] = bytes;
  }
  return bytes;
}

std::vector<registry::ModelInfo> Node::ListModels(const Caller& caller) const {
  std::vector<registry::ModelInfo> models = registry_->List();
  std::erase_if(models, [&](const registry::ModelInfo& m) { return !caller.Sees(m.owner); });
  for (const config::ModelSpec& m : Catalog()) {
    const std::string name = registry::ModelName(m.source, m.name);
    const bool listed =
        std::any_of(models.begin(), models.end(), [&](const registry::ModelInfo& i) {
          return i.name == name && i.owner == config::kSharedTenant;
        });
    if (listed) continue;
    registry::ModelInfo info;
    info.name = name;
    info.owner = config::kSharedTenant;
    info.state = registry::ModelState::kAvailable;
    info.source = m.source;
    info.device = registry_->device_name();
    info.pinned = m.pin;
    info.keep_alive_seconds = m.keep_alive_seconds.value_or(config_.keep_alive_seconds);
    models.push_back(std::move(info));
  }
  return models;
}

void Node::WatchCatalogFile() {
  std::string last;  // the file's text when last read
  bool reported = false;
  do {
    const absl::StatusOr<std::string> text =
        base::ReadFile(config_.catalog_file, base::kMaxSettingsFileBytes);
    if (!text.ok()) {
      if (!reported) {
        Log(absl::StrCat("catalog_file: ", text.status().message(), "; trying again every 2 s"));
      }
      reported = true;
      continue;
    }
    reported = false;
    if (*text == last) continue;
    last = *text;
    absl::StatusOr<std::vector<config::ModelSpec>> models =
        config::LoadCatalogFile(config_.catalog_file);
    if (!models.ok()) {
      Log(absl::StrCat("catalog_file: keeping the previous catalog: ", models.status().message()));
      continue;
    }
    const size_t count = models->size();
    {
      absl::MutexLock lock(&catalog_mu_);
      file_catalog_ = *std::move(models);
    }
    Log(absl::StrCat("catalog_file ", config_.catalog_file, ": ", count, " models"));
  } while (!WaitForShutdown(absl::Seconds(2)));
}

std::string Node::VisibleNames(const Caller& caller) const {
  std::vector<std::string> names;
  for (const registry::ModelInfo& m : ListModels(caller)) {
    names.push_back(caller.admin() ? registry::DescribeModel({m.owner, m.name}) : m.name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<registry::ModelKey> Node::Resolve(const Caller& caller, const std::string& name,
                                                 const std::string& owner) const {
  if (name.empty()) return absl::InvalidArgumentError("model: empty");
  std::vector<registry::ModelKey> candidates;
  if (!owner.empty()) {
    if (caller.Sees(owner)) candidates.push_back({owner, name});
  } else {
    candidates.push_back({caller.tenant, name});
    candidates.push_back({config::kSharedTenant, name});
  }
  for (const registry::ModelKey& key : candidates) {
    if (registry_->Contains(key)) return key;
  }
  // Not resident: a catalog model is the shared one.
  if (std::any_of(candidates.begin(), candidates.end(),
                  [](const registry::ModelKey& k) { return k.owner == config::kSharedTenant; }) &&
      FindInCatalog(name)) {
    return registry::ModelKey{config::kSharedTenant, name};
  }
  // An admin naming no owner means the one tenant's model of that name, if only one has it.
  if (caller.admin() && owner.empty()) {
    std::vector<std::string> owners;
    for (const registry::ModelInfo& m : registry_->List()) {
      if (m.name == name) owners.push_back(m.owner);
    }
    if (owners.size() == 1) return registry::ModelKey{owners[0], name};
    if (owners.size() > 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("model \"", name, "\" is a model of tenants ", absl::StrJoin(owners, ", "),
                       "; name one as its owner (df11ctl --owner)"));
    }
  }
  return absl::NotFoundError(
      absl::StrCat("model \"", name,
                   "\" is neither loaded nor in the catalog (models: ", VisibleNames(caller), ")"));
}

absl::StatusOr<registry::ModelInfo> Node::GetModel(const Caller& caller, const std::string& name,
                                                   const std::string& owner) const {
  DF11_ASSIGN_OR_RETURN(const registry::ModelKey key, Resolve(caller, name, owner));
  absl::StatusOr<registry::ModelInfo> info = registry_->Get(key);
  if (info.ok()) return info;
  for (registry::ModelInfo& m : ListModels(caller)) {  // a catalog model, not resident
    if (m.owner == key.owner && m.name == key.name) return std::move(m);
  }
  return info.status();
}

absl::StatusOr<registry::ModelHandle> Node::AcquireUnchanged(const registry::ModelKey& key) {
  absl::StatusOr<registry::ModelHandle> handle = registry_->Acquire(key);
  if (!handle.ok()) return handle;
  const absl::Status files = (*handle)->model->CheckFiles();
  if (files.ok()) return handle;
  const registry::ResidentModel& model = **handle;
  Log(absl::StrCat("model ", model.name, " can no longer be served: ", files.message()));
  registry_->MarkFailed(key, model, files);
  handle = absl::StatusOr<registry::ModelHandle>();
  return registry_->Acquire(key);  // FAILED, with the reason; or loaded again meanwhile
}

void Node::BeginShutdown() {
  std::vector<std::function<void()>> run;
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shutdown_.HasBeenNotified()) return;
    shutdown_.Notify();
    run.swap(on_shutdown_);
  }
  for (const std::function<void()>& f : run) f();
}

void Node::OnShutdown(std::function<void()> f) {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (!shutdown_.HasBeenNotified()) {
      on_shutdown_.push_back(std::move(f));
      return;
    }
  }
  f();
}

absl::StatusOr<registry::ModelHandle> Node::AcquireResident(const Caller& caller,
                                                            const std::string& name,
                                                            const std::string& owner) {
  DF11_ASSIGN_OR_RETURN(const registry::ModelKey key, Resolve(caller, name, owner));
  return AcquireUnchanged(key);
}

absl::StatusOr<registry::ModelHandle> Node::AcquireForRequest(
    const Caller& caller, const std::string& name, const std::string& owner, absl::Time deadline,
    const std::function<bool()>& cancelled) {
  DF11_ASSIGN_OR_RETURN(const registry::ModelKey key, Resolve(caller, name, owner));
  absl::StatusOr<registry::ModelHandle> handle = AcquireUnchanged(key);
  if (handle.ok() || !config_.on_demand || key.owner != config::kSharedTenant) return handle;
  const std::optional<config::ModelSpec> spec = FindInCatalog(name);
  if (!spec) return handle;
  // One load for every request waiting on this model; it runs on a thread of its own, so it
  // goes on when the requests give up. A model evicted again before this request could take it
  // (by another on-demand load) is loaded again, until the deadline.
  while (true) {
    std::shared_ptr<PendingLoad> load;
    {
      absl::MutexLock lock(&loads_mu_);
      std::shared_ptr<PendingLoad>& slot = loads_[name];
      if (slot == nullptr) {
        slot = std::make_shared<PendingLoad>();
        ++load_threads_;
        std::thread([this, spec = *spec, load = slot, name] {
          absl::StatusOr<registry::ModelInfo> info =
              registry_->Load(registry::LoadRequest{.source = spec.source,
                                                    .name = spec.name,
                                                    .pin = spec.pin,
                                                    .keep_alive_seconds = spec.keep_alive_seconds,
                                                    .device = spec.device},
                              [this](const registry::LoadProgress&) { return !shutting_down(); });
          Log(info.ok() ? absl::StrCat("loaded ", name, " on demand from ", spec.source,
                                       info->load_note.empty() ? "" : "; ", info->load_note)
                        : absl::StrCat("loading ", name,
                                       " on demand failed: ", info.status().ToString()));
          // A catalog model belongs to no one tenant.
          audit::Record({.event = "load",
                         .tenant = "shared",
                         .source = spec.source,
                         .model = name,
                         .outcome = info.status(),
                         .message = info.ok() ? "on demand, from the catalog" : ""});
          absl::MutexLock lock(&loads_mu_);
          load->done = true;
          load->status = info.status();
          loads_.erase(name);
          --load_threads_;
          loads_changed_.SignalAll();
        }).detach();
      }
      load = slot;
    }
    // `cancelled` is asked with loads_mu_ released: it may wait on the client's connection.
    while (true) {
      {
        absl::MutexLock lock(&loads_mu_);
        if (!load->done) loads_changed_.WaitWithTimeout(&loads_mu_, absl::Milliseconds(50));
        if (load->done) {
          if (!load->status.ok()) return load->status;
          break;
        }
      }
      if (cancelled && cancelled()) return absl::CancelledError("the client cancelled the request");
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("model ", name, " is still loading on demand; try again shortly"));
      }
    }
    handle = AcquireUnchanged(key);
    if (handle.ok() || !absl::IsNotFound(handle.status()) || absl::Now() >= deadline) return handle;
  }
}

void Node::StartPreload() {
  if (!config_.catalog_file.empty()) catalog_watcher_ = std::thread([this] { WatchCatalogFile(); });
  preload_ = std::thread([this] {
    for (const config::ModelSpec& p : config_.preload) {
      if (shutting_down()) break;
      registry::LoadRequest request{.source = p.source,
                                    .name = p.name,
                                    .pin = p.pin,
                                    .keep_alive_seconds = p.keep_alive_seconds,
                                    .device = p.device};
      absl::StatusOr<registry::ModelInfo> info = registry_->Load(
          request, [this](const registry::LoadProgress&) { return !shutting_down(); });
      if (info.ok()) {
        Log(absl::StrCat("preloaded ", info->name, " from ", p.source, " (",
                         info->bytes.df11_units + info->bytes.passthrough, " bytes)",
                         info->load_note.empty() ? "" : "; ", info->load_note));
      } else {
        Log(absl::StrCat("preloading ", p.source, " failed: ", info.status().ToString()));
      }
    }
    preload_done_ = true;
  });
}

absl::StatusOr<UnloadOutcome> Node::Unload(const Caller& caller, const std::string& name,
                                           const std::string& owner, absl::Duration drain,
                                           bool cancel_in_flight) {
  absl::StatusOr<registry::ModelKey> key = Resolve(caller, name, owner);
  if (absl::IsNotFound(key.status())) {
    return absl::NotFoundError(
        absl::StrCat("model \"", name, "\" is not loaded (models: ", VisibleNames(caller), ")"));
  }
  if (!key.ok()) return key.status();
  if (!caller.admin() && key->owner == config::kSharedTenant) {
    return absl::PermissionDeniedError(absl::StrCat(
        "model \"", name, "\" is shared by every tenant: only an admin token may unload it"));
  }
  DF11_ASSIGN_OR_RETURN(std::shared_ptr<const registry::ResidentModel> model,
                        registry_->BeginUnload(*key));
  UnloadOutcome outcome;
  if (model != nullptr) {
    outcome.requests_cancelled = scheduler_->Drain(model.get(), drain, cancel_in_flight);
  }
  outcome.result = registry_->FinishUnload(*key);
  model.reset();  // the last reference: the memory goes now
  Log(absl::StrCat("unloaded ", registry::DescribeModel(*key), " (", outcome.result.bytes_freed,
                   " bytes freed, ", outcome.requests_cancelled, " requests cancelled)"));
  return outcome;
}

NodeStatus Node::Status(const Caller& caller) const {
  NodeStatus status = Status();
  std::erase_if(status.models, [&](const registry::ModelInfo& m) { return !caller.Sees(m.owner); });
  return status;
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
