// A hub model's files arriving in the cache while the load places them: the small files (config,
// tokenizer, chat template) first, then the weight shards downloading in the background, each
// handed to the load as soon as it is complete and verified, so that load time is about
// max(download, placement) rather than their sum.
//
//   HubFetch fetch(settings);
//   DF11_RETURN_IF_ERROR(fetch.Prepare(source, keep_going));  // resolve + small files
//   DF11_ASSIGN_OR_RETURN(codec::ModelDirectory dir, codec::ModelDirectory::Read(fetch.directory()));
//   DF11_ASSIGN_OR_RETURN(ModelEstimate e, fetch.Estimate(dir));
//   fetch.Start();
//   while (...) { DF11_ASSIGN_OR_RETURN(auto next, fetch.NextReady(100ms)); ... place *next ... }
#ifndef DF11_DAEMON_REGISTRY_HUB_FETCH_H_
#define DF11_DAEMON_REGISTRY_HUB_FETCH_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codec/model_directory.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/settings.h"
#include "daemon/hub/snapshot_download.h"
#include "daemon/metrics/metrics.h"
#include "daemon/runtime/engine/estimate.h"

namespace df11::registry {

// One file of a load: bytes in the cache and bytes placed in memory so far.
struct FileProgress {
  std::string path;
  uint64_t size = 0;
  uint64_t downloaded = 0;
  uint64_t placed = 0;
  // Where its bytes come from: "cache" (already there), "hub", or "peer HOST:PORT".
  std::string source = "cache";
};

class HubFetch {
 public:
  // `peers` (may be null) are asked before the hub; `metrics` (may be null) counts the bytes
  // received by source.
  HubFetch(const hub::HubSettings& settings, std::shared_ptr<hub::PeerSource> peers,
           metrics::Metrics* metrics);
  ~HubFetch();  // cancels what still runs and waits for it
  HubFetch(const HubFetch&) = delete;
  HubFetch& operator=(const HubFetch&) = delete;

  // Resolves `source` and makes every file the model needs except its weights complete in the
  // cache. `keep_going` is asked every 100 ms; false cancels (kCancelled). Errors: the hub's.
  absl::Status Prepare(const hub::ModelSource& source, const std::function<bool()>& keep_going)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& directory() const { return snapshot_.directory; }
  const std::string& commit() const { return snapshot_.commit; }

  // What the model will take, before its weights arrive: exact when every weight file is already
  // in the cache; otherwise config.json and the weight files' sizes from the hub's listing (their
  // few KB of headers included, so it is an upper bound). `dir` is directory() as read.
  absl::StatusOr<runtime::ModelEstimate> Estimate(const codec::ModelDirectory& dir) const;

  // Starts downloading the weight files in the background.
  void Start();
  // The next weight file that is complete in the snapshot, waiting up to `wait`: "" when none
  // became ready, nullopt when all have been handed out. The download's error once it failed.
  absl::StatusOr<std::optional<std::string>> NextReady(std::chrono::milliseconds wait)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records that `bytes` of `path` are placed.
  void SetPlaced(const std::string& path, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<FileProgress> Files() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t weight_bytes() const;
  bool downloading() const ABSL_LOCKS_EXCLUDED(mu_);
  void Cancel() { downloader_.Cancel(); }

 private:
  // Fetches `files` on the background thread.
  void RunFetch(std::vector<hub::SnapshotFile> files) ABSL_LOCKS_EXCLUDED(mu_);
  bool ReadyOrFailed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Join();

  metrics::Metrics* const metrics_;
  hub::SnapshotDownloader downloader_;
  hub::Snapshot snapshot_;
  std::vector<hub::SnapshotFile> weights_;

  mutable absl::Mutex mu_;
  std::map<std::string, FileProgress> files_ ABSL_GUARDED_BY(mu_);
  // Weight files complete and not yet handed out.
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);
  size_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace df11::registry

#endif  // DF11_DAEMON_REGISTRY_HUB_FETCH_H_
