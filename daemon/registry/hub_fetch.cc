#include "daemon/registry/hub_fetch.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/model_config.h"

namespace df11::registry {
namespace {

// What a model load needs from a repository: the top-level JSON files (config, generation
// config, tokenizer, safetensors index), chat templates and weights. Subfolders (Llama's
// original/, other formats) are left on the hub.
const std::vector<std::string> kModelFiles = {"*.json", "*.safetensors", "*.jinja"};

bool IsWeightFile(const std::string& path) { return absl::EndsWith(path, ".safetensors"); }

}  // namespace

HubFetch::HubFetch(const hub::HubSettings& settings, std::shared_ptr<hub::PeerSource> peers,
                   metrics::Metrics* metrics)
    : metrics_(metrics), downloader_(settings, std::move(peers)) {}

HubFetch::~HubFetch() {
  Cancel();
  Join();
}

void HubFetch::Join() {
  if (thread_.joinable()) thread_.join();
}

void HubFetch::RunFetch(std::vector<hub::SnapshotFile> files) {
  Join();
  {
    absl::MutexLock lock(&mu_);
    running_ = true;
  }
  thread_ = std::thread([this, files = std::move(files)] {
    absl::Status status =
        downloader_.Fetch(snapshot_, files,
                          {.progress =
                               [this](const std::string& path, uint64_t bytes, uint64_t size) {
                                 absl::MutexLock lock(&mu_);
                                 FileProgress& f = files_[path];
                                 f.downloaded = bytes;
                                 f.size = size;
                               },
                           .file_ready =
                               [this](const std::string& path) {
                                 absl::MutexLock lock(&mu_);
                                 if (IsWeightFile(path)) ready_.push_back(path);
                               },
                           .source =
                               [this](const std::string& path, const std::string& source) {
                                 absl::MutexLock lock(&mu_);
                                 files_[path].source = source;
                               },
                           .received =
                               [this](const char* kind, uint64_t bytes) {
                                 if (metrics_ != nullptr) metrics_->FilesReceived(kind, bytes);
                               }});
    absl::MutexLock lock(&mu_);
    running_ = false;
    if (!status.ok() && error_.ok()) error_ = std::move(status);
  });
}

absl::Status HubFetch::Prepare(const hub::ModelSource& source,
                               const std::function<bool()>& keep_going) {
  DF11_ASSIGN_OR_RETURN(snapshot_, downloader_.Resolve(source, kModelFiles));
  std::vector<hub::SnapshotFile> small;
  {
    absl::MutexLock lock(&mu_);
    for (const hub::SnapshotFile& f : snapshot_.files) {
      if (f.path.find('/') != std::string::npos) continue;
      files_[f.path] = FileProgress{
          .path = f.path, .size = f.size, .downloaded = 0, .placed = 0, .source = "cache"};
      (IsWeightFile(f.path) ? weights_ : small).push_back(f);
    }
  }
  if (weights_.empty()) {
    return absl::NotFoundError(absl::StrCat(source.repo_id, "@", source.revision, " (commit ",
                                            snapshot_.commit, ") has no .safetensors files"));
  }
  // Description files are read whole: one larger than its cap is refused before any byte of it
  // is downloaded.
  for (const hub::SnapshotFile& f : small) {
    if (f.size > base::MaxModelFileBytes(f.path)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source.repo_id, "@", snapshot_.commit, ": ", f.path, " is ", f.size,
          " bytes, more than the ", base::MaxModelFileBytes(f.path), " bytes this file may hold"));
    }
  }
  RunFetch(std::move(small));
  auto finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !running_; };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&finished), absl::Milliseconds(100))) break;
    }
    if (!keep_going()) {  // without the lock: it may report progress
      Cancel();
      Join();
      return absl::CancelledError("load cancelled");
    }
  }
  Join();
  absl::MutexLock lock(&mu_);
  return error_;
}

absl::StatusOr<runtime::ModelEstimate> HubFetch::Estimate(const codec::ModelDirectory& dir) const {
  bool all_cached = true;
  for (const hub::SnapshotFile& f : weights_) all_cached = all_cached && f.cached;
  if (all_cached) return runtime::EstimateModel(dir);
  runtime::ModelEstimate e;
  DF11_ASSIGN_OR_RETURN(e.config, runtime::ParseModelConfig(dir));
  e.df11 = dir.is_df11();
  (e.df11 ? e.unit_bytes : e.plain_bytes) = weight_bytes();
  return e;
}

uint64_t HubFetch::weight_bytes() const {
  uint64_t total = 0;
  for (const hub::SnapshotFile& f : weights_) total += f.size;
  return total;
}

void HubFetch::Start() { RunFetch(weights_); }

absl::StatusOr<std::optional<std::string>> HubFetch::NextReady(std::chrono::milliseconds wait) {
  absl::MutexLock lock(&mu_);
  if (handed_out_ < weights_.size()) {
    mu_.AwaitWithTimeout(absl::Condition(this, &HubFetch::ReadyOrFailed),
                         absl::FromChrono(wait));
  }
  if (!error_.ok()) return error_;
  if (!ready_.empty()) {
    std::string path = std::move(ready_.front());
    ready_.pop_front();
    ++handed_out_;
    return std::optional<std::string>(std::move(path));
  }
  if (handed_out_ >= weights_.size()) return std::optional<std::string>();
  return std::optional<std::string>("");
}

bool HubFetch::ReadyOrFailed() const { return !ready_.empty() || !error_.ok(); }

void HubFetch::SetPlaced(const std::string& path, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  files_[path].placed = bytes;
}

std::vector<FileProgress> HubFetch::Files() const {
  absl::MutexLock lock(&mu_);
  std::vector<FileProgress> files;
  for (const auto& [path, f] : files_) {
    files.push_back(f);
    files.back().path = path;
  }
  return files;
}

bool HubFetch::downloading() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace df11::registry
