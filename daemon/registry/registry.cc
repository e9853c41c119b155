#include "daemon/registry/registry.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/status_macros.h"
#include "daemon/audit/audit.h"
#include "daemon/hub/cache.h"
#include "daemon/registry/page_cache.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/runtime/engine/generator.h"

namespace df11::registry {
namespace {

namespace fs = std::filesystem;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A load reports progress (and may be cancelled) after each this many bytes placed.
constexpr uint64_t kReportBytes = 16 << 20;

// How often a waiting load asks its caller whether it was cancelled.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(200);

// Names are used in requests, metrics labels and tables: printable ASCII without spaces.
absl::Status ValidateName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: must be 1 to 128 characters, got ", name.size()));
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "name: \"", name, "\" has a character other than printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

// The safetensors files of a model directory, sorted (symlinks followed, as in the hub cache).
std::vector<fs::path> WeightFiles(const std::string& directory, uint64_t* total) {
  std::vector<fs::path> files;
  *total = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory, ec)) {
    if (e.path().extension() == ".safetensors" && fs::is_regular_file(e.path(), ec)) {
      files.push_back(e.path());
      *total += fs::file_size(e.path(), ec);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string JoinNames(const std::vector<std::string>& names) {
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

std::string ModelName(const std::string& source, const std::string& name) {
  if (!name.empty()) return name;
  absl::StatusOr<hub::ModelSource> parsed = hub::ParseModelSource(source);
  if (!parsed.ok()) return source;
  if (parsed->is_hub) return parsed->repo_id;
  // "dir/" has an empty filename(); its parent_path() is "dir".
  const fs::path normal = fs::path(parsed->directory).lexically_normal();
  return normal.has_filename() ? normal.filename().string()
                               : normal.parent_path().filename().string();
}

std::string DescribeModel(const ModelKey& key) {
  if (key.owner == config::kSharedTenant) return key.name;
  return absl::StrCat(key.name, " (tenant ", key.owner, ")");
}

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnloading:
      return "UNLOADING";
    case ModelState::kFailed:
      return "FAILED";
    case ModelState::kAvailable:
      return "AVAILABLE";
  }
  return "UNKNOWN";
}

Registry::Registry(const Options& options, runtime::Backend& backend, metrics::Metrics* metrics)
    : options_(options),
      device_name_(options.device.Name()),
      backend_(backend),
      metrics_(metrics) {}

Registry::~Registry() = default;

absl::StatusOr<ModelInfo> Registry::Load(const LoadRequest& request,
                                         const LoadProgressFn& progress) {
  const auto started = std::chrono::steady_clock::now();
  auto cancelled = [&](LoadProgress::Phase phase, uint64_t done, uint64_t total) {
    return !progress(LoadProgress{phase, done, total, {}});
  };
  if (!request.device.empty() && request.device != device_name_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device: \"", request.device, "\" is not a device of this node (", device_name_, ")"));
  }
  if (request.keep_alive_seconds && !(*request.keep_alive_seconds >= 0)) {
    return absl::InvalidArgumentError("keep_alive_seconds: must be >= 0");
  }
  if (cancelled(LoadProgress::Phase::kResolving, 0, 0))
    return absl::CancelledError("load cancelled");
  DF11_ASSIGN_OR_RETURN(const hub::ModelSource source,
                        hub::ParseModelSource(request.source, !request.hub_only));
  const std::string name = ModelName(request.source, request.name);
  DF11_RETURN_IF_ERROR(ValidateName(name));
  const ModelKey key{.owner = request.owner, .name = name};
  {
    // Before anything is fetched: a model the owner has no room to count.
    absl::MutexLock lock(&mu_);
    if (!entries_.contains(key)) DF11_RETURN_IF_ERROR(CheckOwnerLimitsLocked(request, name, 0));
  }
  std::string directory = source.directory, revision;
  // A hub model: resolved, its small files fetched; its weights download once it has room.
  std::unique_ptr<HubFetch> fetch;
  if (source.is_hub) {
    fetch = std::make_unique<HubFetch>(options_.hub, options_.peers, metrics_);
    DF11_RETURN_IF_ERROR(fetch->Prepare(
        source, [&] { return !cancelled(LoadProgress::Phase::kDownloading, 0, 0); }));
    directory = fetch->directory();
    revision = fetch->commit();
  }
  // The model's description files, read once for the estimate and the load.
  absl::StatusOr<codec::ModelDirectory> files = codec::ModelDirectory::Read(directory);
  absl::StatusOr<runtime::ModelEstimate> estimated =
      !files.ok()        ? absl::StatusOr<runtime::ModelEstimate>(files.status())
      : fetch != nullptr ? fetch->Estimate(*files)
                         : runtime::EstimateModel(*files);
  if (!estimated.ok()) {
    // Listed as FAILED with the reason, as a load that fails later is.
    absl::MutexLock lock(&mu_);
    // Kept only within the owner's max_models: FAILED entries count as models.
    if (!entries_.contains(key) && CheckOwnerLimitsLocked(request, name, 0).ok()) {
      Entry& e = entries_[key];
      e.owner = key.owner;
      e.name = name;
      e.source = request.source;
      e.state = ModelState::kFailed;
      e.failure_reason = std::string(estimated.status().message());
    }
    if (metrics_ != nullptr) metrics_->ModelLoad("failed", 0);
    return estimated.status();
  }
  const runtime::PlacementEstimate estimate = backend_.EstimatePlacement(*estimated);

  const std::function<bool()> stop = [&] {
    return cancelled(LoadProgress::Phase::kResolving, 0, 0);
  };
  Dropped evicted;
  // Declared before the lock, so that the evicted models are destroyed after it on every path.
  absl::Cleanup release_evicted = [&] { Release(&evicted); };
  {
    absl::MutexLock lock(&mu_);
    // An entry of this name: return it when READY, wait for it while LOADING or UNLOADING (then
    // load it again), replace it if FAILED.
    for (auto it = entries_.find(key); it != entries_.end(); it = entries_.find(key)) {
      Entry& e = it->second;
      if (e.state == ModelState::kFailed) {
        entries_.erase(it);
        break;
      }
      if (e.source != request.source && e.state != ModelState::kUnloading) {
        return absl::AlreadyExistsError(
            absl::StrCat("name: \"", name, "\" already serves ", e.source));
      }
      if (e.state == ModelState::kReady) return InfoLocked(e);
      if (WaitOrCancelLocked(stop)) return absl::CancelledError("load cancelled");
    }
    DF11_RETURN_IF_ERROR(CheckOwnerLimitsLocked(request, name, estimate.total()));
    DF11_RETURN_IF_ERROR(MakeRoomLocked(estimate.total(), key, &evicted));
    Entry& e = entries_[key];
    e.owner = key.owner;
    e.name = name;
    e.source = request.source;
    e.state = ModelState::kLoading;
    e.reserved_units = estimate.unit_bytes + estimate.shared_growth_bytes;
    e.reserved_plain = estimate.plain_bytes;
    evicted.room_for = key;
    e.reserved_held_by_evicted = std::min(evicted.bytes, estimate.total());
    e.architecture = estimated->config.architecture_name;
    e.df11 = estimated->df11;
    e.context_length = estimated->config.max_position_embeddings;
    e.pinned = request.pin;
    e.keep_alive_seconds = request.keep_alive_seconds.value_or(options_.default_keep_alive_seconds);
    // A bounded number of loads read files at once; the others wait here, reserved.
    while (loads_running_ >= options_.max_concurrent_loads) {
      if (WaitOrCancelLocked(stop)) {
        entries_.erase(key);
        changed_.SignalAll();
        return absl::CancelledError("load cancelled");
      }
    }
    ++loads_running_;
  }
  // The evicted models' memory is free before this model's files are placed.
  std::move(release_evicted).Invoke();

  absl::StatusOr<std::shared_ptr<ResidentModel>> loaded =
      LoadFiles(request, *files, revision, fetch.get(), progress);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  absl::ReleasableMutexLock lock(&mu_);
  --loads_running_;
  changed_.SignalAll();
  Entry& e = entries_[key];
  if (!loaded.ok()) {
    if (absl::IsCancelled(loaded.status())) {
      entries_.erase(key);
      if (metrics_ != nullptr) metrics_->ModelLoad("cancelled", seconds);
    } else {
      e.state = ModelState::kFailed;
      e.failure_reason = std::string(loaded.status().message());
      e.reserved_units = e.reserved_plain = 0;
      if (metrics_ != nullptr) metrics_->ModelLoad("failed", seconds);
    }
    return loaded.status();
  }
  (*loaded)->name = name;
  (*loaded)->owner = key.owner;
  (*loaded)->pinned = e.pinned;
  (*loaded)->keep_alive_seconds = e.keep_alive_seconds;
  (*loaded)->last_used_unix_ms = NowUnixMs();
  e.model = *std::move(loaded);
  e.state = ModelState::kReady;
  e.reserved_units = e.reserved_plain = 0;
  if (metrics_ != nullptr) metrics_->ModelLoad("ok", seconds);
  ModelInfo info = InfoLocked(e);
  lock.Release();
  progress(LoadProgress{LoadProgress::Phase::kDone, 0, 0, {}});
  return info;
}

absl::StatusOr<std::shared_ptr<ResidentModel>> Registry::LoadFiles(const LoadRequest& request,
                                                                   const codec::ModelDirectory& files,
                                                                   const std::string& revision,
                                                                   HubFetch* fetch,
                                                                   const LoadProgressFn& progress) {
  // Bring every weight file into memory once, so the model is resident before its first request
  // and the caller sees the progress; then map and validate them, and place them on the backend.
  // A hub model's files are placed as each one completes, while the others still download. A
  // backend that reads the files itself as it places them (the CUDA backend) skips the first
  // step: its copies are the progress.
  const std::string& directory = files.path();
  uint64_t total = 0, placed_before = 0;
  auto report = [&](uint64_t placed) {
    LoadProgress p{.phase = LoadProgress::Phase::kPlacing,
                   .bytes_done = std::min(placed, total),
                   .bytes_total = total,
                   .files = {}};
    if (fetch != nullptr) {
      p.files = fetch->Files();
      if (fetch->downloading()) {
        p.phase = LoadProgress::Phase::kDownloading;
        p.bytes_done = 0;
        for (const FileProgress& f : p.files) p.bytes_done += f.downloaded;
        p.bytes_total = 0;
        for (const FileProgress& f : p.files) p.bytes_total += f.size;
      }
    }
    return progress(p);
  };
  const bool populate = !backend_.ReadsFilesAtPlace();
  auto place = [&](const fs::path& file) -> absl::Status {
    if (!populate) return absl::OkStatus();
    const std::string name = file.filename().string();
    DF11_ASSIGN_OR_RETURN(const uint64_t size,
                          PopulateFile(file.string(), kReportBytes, [&](uint64_t done) {
                            if (fetch != nullptr) fetch->SetPlaced(name, done);
                            return report(placed_before + done);
                          }));
    placed_before += size;
    return absl::OkStatus();
  };
  if (fetch == nullptr) {
    const std::vector<fs::path> files = WeightFiles(directory, &total);
    if (!report(0)) return absl::CancelledError("load cancelled");
    for (const fs::path& file : files) DF11_RETURN_IF_ERROR(place(file));
  } else {
    total = fetch->weight_bytes();
    fetch->Start();
    for (;;) {
      absl::StatusOr<std::optional<std::string>> next =
          fetch->NextReady(std::chrono::milliseconds(100));
      if (!next.ok()) return next.status();
      if (!next->has_value()) break;  // every weight file placed
      if (!(*next)->empty()) {
        DF11_RETURN_IF_ERROR(place(fs::path(directory) / **next));
      } else if (!report(placed_before)) {
        fetch->Cancel();
        return absl::CancelledError("load cancelled");
      }
    }
  }
  auto resident = std::make_shared<ResidentModel>();
  resident->source = request.source;
  resident->directory = directory;
  resident->resolved_revision = revision;
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Model> host,
                        runtime::Model::Load(files, backend_.HostLoadOptions()));
  if (host->skipped_tensors() > 0) {
    resident->load_note =
        absl::StrCat("only the text model of ", host->config().architecture_name, " is served; ",
                     host->skipped_tensors(), " tensors (", host->skipped_bytes(),
                     " bytes) of its other towers were not loaded");
  }
  DF11_ASSIGN_OR_RETURN(resident->model,
                        backend_.Place(std::move(host), [&](uint64_t done, uint64_t all) {
                          return progress(LoadProgress{.phase = LoadProgress::Phase::kPlacing,
                                                       .bytes_done = done,
                                                       .bytes_total = all,
                                                       .files = {}});
                        }));
  DF11_ASSIGN_OR_RETURN(
      resident->tokenizer,
      runtime::Tokenizer::FromFile((fs::path(directory) / "tokenizer.json").string()));
  resident->chat_template = runtime::ChatTemplate::FromModelDir(directory);
  resident->defaults = runtime::DefaultSamplingParams(resident->model->config());
  return resident;
}

absl::StatusOr<ModelHandle> Registry::Acquire(const ModelKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("model \"", key.name, "\" is not loaded"));
  }
  const Entry& e = it->second;
  if (e.state != ModelState::kReady) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", DescribeModel(key), " is ", ModelStateName(e.state),
                     e.state == ModelState::kFailed ? absl::StrCat(": ", e.failure_reason) : ""));
  }
  return NewHandle(e.model);
}

void Registry::MarkFailed(const ModelKey& key, const ResidentModel& model,
                          const absl::Status& why) {
  Dropped failed;
  absl::Cleanup release_failed = [&] { Release(&failed); };
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.state != ModelState::kReady ||
      it->second.model.get() != &model) {
    return;
  }
  Entry& e = it->second;
  e.state = ModelState::kFailed;
  e.failure_reason = std::string(why.message());
  DropLocked(std::move(e.model), &failed);
  audit::Record({.event = "model_failed",
                 .tenant = key.owner,
                 .source = e.source,
                 .model = key.name,
                 .outcome = why,
                 .message = e.failure_reason});
  changed_.SignalAll();
}

void Registry::DropLocked(std::shared_ptr<ResidentModel> model, Dropped* dropped) {
  const uint64_t bytes = model->model->resident_bytes();
  dropped->bytes += bytes;
  dropped_bytes_ += bytes;
  dropped->models.push_back(std::move(model));
}

void Registry::Release(Dropped* dropped) {
  if (dropped->models.empty()) return;
  dropped->models.clear();  // the registry held the last reference
  absl::MutexLock lock(&mu_);
  dropped_bytes_ -= dropped->bytes;
  dropped->bytes = 0;
  if (dropped->room_for) {
    if (auto it = entries_.find(*dropped->room_for); it != entries_.end()) {
      it->second.reserved_held_by_evicted = 0;
    }
  }
  changed_.SignalAll();
}

bool Registry::WaitOrCancelLocked(const std::function<bool()>& cancelled) {
  changed_.WaitWithTimeout(&mu_, kCancelPoll);
  mu_.Unlock();
  const bool stop = cancelled();
  mu_.Lock();
  return stop;
}

ModelHandle Registry::NewHandle(const std::shared_ptr<ResidentModel>& model) const {
  ++model->leases;
  // The deleter ends the lease; it holds the model, so the model outlives every handle.
  return ModelHandle(model.get(), [model](const ResidentModel*) {
    model->last_used_unix_ms = NowUnixMs();
    --model->leases;
  });
}

absl::StatusOr<std::shared_ptr<const ResidentModel>> Registry::BeginUnload(const ModelKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("model \"", key.name, "\" is not loaded"));
  }
  const std::string name = DescribeModel(key);
  Entry& e = it->second;
  switch (e.state) {
    case ModelState::kFailed:
      entries_.erase(it);
      changed_.SignalAll();
      return std::shared_ptr<const ResidentModel>();
    case ModelState::kLoading:
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", name, " is LOADING; cancel its LoadModel call, or unload it once READY"));
    case ModelState::kUnloading:
      return absl::FailedPreconditionError(absl::StrCat("model ", name, " is already UNLOADING"));
    case ModelState::kAvailable:  // never an entry's state
    case ModelState::kReady:
      break;
  }
  e.state = ModelState::kUnloading;
  changed_.SignalAll();
  return std::shared_ptr<const ResidentModel>(e.model);
}

UnloadResult Registry::FinishUnload(const ModelKey& key) {
  absl::MutexLock lock(&mu_);
  UnloadResult result;
  auto it = entries_.find(key);
  if (it == entries_.end()) return result;
  result.model = InfoLocked(it->second);
  result.bytes_freed = result.model.bytes.df11_units + result.model.bytes.passthrough;
  entries_.erase(it);
  changed_.SignalAll();
  return result;
}

std::vector<ModelInfo> Registry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelInfo> out;
  for (const auto& [key, e] : entries_) out.push_back(InfoLocked(e));
  return out;
}

absl::StatusOr<ModelInfo> Registry::Get(const ModelKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("model \"", key.name, "\" is not loaded"));
  }
  return InfoLocked(it->second);
}

bool Registry::Contains(const ModelKey& key) const {
  absl::MutexLock lock(&mu_);
  return entries_.contains(key);
}

DeviceMemory Registry::Memory() const {
  absl::MutexLock lock(&mu_);
  return MemoryLocked();
}

absl::Status Registry::PlaceKvCache(uint64_t bytes, absl::FunctionRef<absl::Status()> create) {
  if (backend_.Memory().kv_pool > 0) return create();  // the pool is already in the budget
  {
    absl::MutexLock lock(&mu_);
    const DeviceMemory m = MemoryLocked();
    if (const uint64_t available = AvailableLocked(m); bytes > available) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a KV cache of ", bytes, " bytes does not fit on ", device_name_, ": ", available,
          " bytes free of the budget of ", m.budget, " (weights ", m.weights, ", scratch ",
          m.scratch, ", KV cache ", m.kv_cache + kv_placing_bytes_, ", workspace ", m.workspace,
          ")"));
    }
    kv_placing_bytes_ += bytes;
  }
  // Allocating (and clearing) a whole cache takes long: not under the lock.
  absl::Status status = create();
  absl::MutexLock lock(&mu_);
  kv_placing_bytes_ -= bytes;
  return status;
}

absl::Status Registry::MakeRoomLocked(uint64_t bytes, const ModelKey& for_model,
                                      Dropped* evicted) {
  const DeviceMemory m = MemoryLocked();
  const uint64_t available = AvailableLocked(m);
  if (bytes <= available) return absl::OkStatus();
  // Fair share: the budget divided by the tenants holding bytes, the loading one included.
  std::map<std::string, uint64_t> held;  // by tenant
  for (const auto& [key, e] : entries_) {
    const uint64_t b = EntryBytesLocked(e);
    if (key.owner != config::kSharedTenant && b > 0) held[key.owner] += b;
  }
  if (for_model.owner != config::kSharedTenant) held[for_model.owner];
  const uint64_t share = held.empty() ? m.budget : m.budget / held.size();
  // Victims in policy order; another tenant's model only if that tenant keeps its share after.
  std::vector<ModelKey> victims;
  uint64_t freed = 0, kept_bytes = 0;
  for (const ModelKey& key : EvictableLocked()) {
    if (available + freed >= bytes) break;
    const uint64_t size = entries_.at(key).model->model->resident_bytes();
    const bool other_tenant = key.owner != config::kSharedTenant && key.owner != for_model.owner;
    if (other_tenant) {
      if (held[key.owner] < share + size) {
        kept_bytes += size;
        continue;
      }
      held[key.owner] -= size;
    }
    victims.push_back(key);
    freed += size;
  }
  if (available + freed >= bytes) {
    for (const ModelKey& key : victims) {
      auto it = entries_.find(key);
      DropLocked(std::move(it->second.model), evicted);
      entries_.erase(it);
      if (metrics_ != nullptr) metrics_->ModelEvicted(key.owner, key.name);
      audit::Record({.event = "eviction",
                     .tenant = key.owner,
                     .model = key.name,
                     .message = absl::StrCat("room for ", DescribeModel(for_model))});
    }
    changed_.SignalAll();
    return absl::OkStatus();
  }
  // The message goes to the loading owner: other tenants' models are bytes, never names.
  std::vector<std::string> names;
  uint64_t others_bytes = 0;
  for (const ModelKey& key : victims) {
    if (key.owner == for_model.owner || key.owner == config::kSharedTenant) {
      names.push_back(key.name);
    } else {
      others_bytes += entries_.at(key).model->model->resident_bytes();
    }
  }
  std::string others;
  if (others_bytes > 0 || kept_bytes > 0) {
    others = absl::StrCat("; other tenants' idle models: ", others_bytes, " bytes evictable and ",
                          kept_bytes, " kept for their fair share of the budget");
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("model ", for_model.name, " needs ", bytes, " bytes on ", device_name_, "; ",
                   available, " are free of the budget of ", m.budget, " (weights ", m.weights,
                   ", scratch ", m.scratch, ", KV cache ", m.kv_cache, ", workspace ", m.workspace,
                   ") and ", freed, " more are evictable for it under eviction policy ",
                   options_.eviction == config::Eviction::kLru ? "lru" : "none",
                   " (models: ", JoinNames(names), others, ")"));
}

std::vector<ModelKey> Registry::EvictableLocked() const {
  if (options_.eviction != config::Eviction::kLru) return {};
  const int64_t now = NowUnixMs();
  std::vector<std::pair<int64_t, ModelKey>> idle;  // (last used, model)
  for (const auto& [key, e] : entries_) {
    if (e.state != ModelState::kReady || e.pinned || e.model->leases > 0) continue;
    const int64_t last_used = e.model->last_used_unix_ms;
    if (static_cast<double>(now - last_used) < e.keep_alive_seconds * 1000) continue;
    idle.emplace_back(last_used, key);
  }
  std::sort(idle.begin(), idle.end());
  std::vector<ModelKey> keys;
  for (auto& [last_used, key] : idle) keys.push_back(std::move(key));
  return keys;
}

uint64_t Registry::EntryBytesLocked(const Entry& e) const {
  return e.reserved_units + e.reserved_plain - e.reserved_held_by_evicted +
         (e.model != nullptr ? e.model->model->resident_bytes() : 0);
}

uint64_t Registry::WeightsLocked() const {
  uint64_t bytes = 0;
  for (const auto& [key, e] : entries_) bytes += EntryBytesLocked(e);
  return bytes + dropped_bytes_;
}

uint64_t Registry::OwnerBytesLocked(const std::string& owner) const {
  uint64_t bytes = 0;
  for (const auto& [key, e] : entries_) {
    if (key.owner == owner) bytes += EntryBytesLocked(e);
  }
  return bytes;
}

absl::Status Registry::CheckOwnerLimitsLocked(const LoadRequest& request, const std::string& name,
                                              uint64_t bytes) const {
  if (request.owner_max_models) {
    std::vector<std::string> names;
    for (const auto& [key, e] : entries_) {
      if (key.owner == request.owner) names.push_back(key.name);
    }
    if (static_cast<int64_t>(names.size()) + 1 > *request.owner_max_models) {
      return config::QuotaExceededError(absl::StrCat("tenant ", request.owner, ": max_models is ",
                                                     *request.owner_max_models, "; it has ",
                                                     names.size(), " (", JoinNames(names), ") and ",
                                                     name, " would be one more; unload one first"));
    }
  }
  if (request.owner_max_bytes) {
    const uint64_t held = OwnerBytesLocked(request.owner);
    if (held + bytes > *request.owner_max_bytes) {
      return config::QuotaExceededError(absl::StrCat(
          "tenant ", request.owner, ": max_resident_bytes is ", *request.owner_max_bytes, " on ",
          device_name_, "; its models hold ", held, " and ", name, " needs ", bytes));
    }
  }
  return absl::OkStatus();
}

DeviceMemory Registry::MemoryLocked() const {
  const runtime::BackendMemory b = backend_.Memory();
  DeviceMemory m;
  m.device = device_name_;
  m.description = options_.device_description;
  m.total = b.device_total;
  m.driver_free = b.device_free;
  m.arena = b.arena;
  // A backend with an arena took the budget from the device at start.
  m.budget = b.arena > 0 ? b.arena : options_.budget.Resolve(m.total);
  m.weights = WeightsLocked();
  m.scratch = b.scratch;
  m.workspace = b.workspace;
  m.kv_cache = b.kv_cache;
  m.kv_pool_free = b.kv_pool_free;
  m.placeable = AvailableLocked(m);
  for (const ModelKey& key : EvictableLocked()) {
    m.placeable += entries_.at(key).model->model->resident_bytes();
  }
  return m;
}

uint64_t Registry::AvailableLocked(const DeviceMemory& m) const {
  return m.free() - std::min(m.free(), kv_placing_bytes_);
}

ModelInfo Registry::InfoLocked(const Entry& e) const {
  ModelInfo info;
  info.name = e.name;
  info.owner = e.owner;
  info.state = e.state;
  info.failure_reason = e.failure_reason;
  info.source = e.source;
  info.architecture = e.architecture;
  info.df11 = e.df11;
  info.device = device_name_;
  info.pinned = e.pinned;
  info.keep_alive_seconds = e.keep_alive_seconds;
  info.context_length = e.context_length;
  info.bytes.df11_units = e.reserved_units;
  info.bytes.passthrough = e.reserved_plain;
  if (const ResidentModel* m = e.model.get(); m != nullptr) {
    info.load_note = m->load_note;
    info.resolved_revision = m->resolved_revision;
    info.bytes.df11_units = m->model->unit_bytes();
    info.bytes.passthrough = m->model->plain_bytes();
    info.bytes.kv_cache_in_use = m->kv_bytes_in_use;
    info.last_used_unix_ms = m->last_used_unix_ms;
    info.requests_served = m->requests_served;
    info.tokens_generated = m->tokens_generated;
    info.running_requests = m->running_requests;
    info.queued_requests = m->queued_requests;
    info.kv_bytes_per_position = backend_.KvBytesPerPosition(m->model->config());
  }
  return info;
}

}  // namespace df11::registry
