// Downloading a hub repository at one revision into the shared cache, as huggingface_hub's
// snapshot_download does: resolve the revision to a commit (written to refs/), list the commit's
// files, keep those matching the include globs, and fetch the ones the cache lacks, several at
// once. Each file appears in snapshots/{commit}/ only when it is complete and verified, so a
// caller can start using files while others still download (file_ready).
//
// Offline (settings.offline), or when the hub is unreachable, a revision resolves through refs/
// and the files are those already in the snapshot; nothing is downloaded.
//
//   SnapshotDownloader d(settings);
//   DF11_ASSIGN_OR_RETURN(Snapshot s, d.Resolve(source, {"*.json", "*.safetensors"}));
//   DF11_RETURN_IF_ERROR(d.Fetch(s, s.files, {.progress = ..., .file_ready = ...}));
//   Load(s.directory);
#ifndef DF11_DAEMON_HUB_SNAPSHOT_DOWNLOAD_H_
#define DF11_DAEMON_HUB_SNAPSHOT_DOWNLOAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/settings.h"

namespace df11::hub {

struct SnapshotFile {
  std::string path;     // inside the repository
  uint64_t size = 0;    // from the listing (0 when resolved offline and unknown)
  bool cached = false;  // already in the snapshot when resolved
};

struct Snapshot {
  std::string repo_id, revision, commit;
  std::string directory;  // snapshots/{commit}
  std::vector<SnapshotFile> files;
  // Why the hub was not asked (offline mode) or could not be (the error), when resolved from the
  // cache; empty when resolved online.
  std::string offline_reason;
  uint64_t bytes_to_download() const;
};

struct FetchCallbacks {
  // Bytes of `path` in the cache so far (also resumed bytes), of `size`. Called from any thread.
  std::function<void(const std::string& path, uint64_t bytes, uint64_t size)> progress;
  // `path` is complete in the snapshot. Called from any thread, once per file.
  std::function<void(const std::string& path)> file_ready;
};

// True when `path` matches one of `globs` as Python's fnmatch.fnmatchcase does ('*' also crosses
// '/'; a glob ending in '/' matches everything under it). Empty `globs` match everything.
bool MatchesAny(const std::string& path, const std::vector<std::string>& globs);

class SnapshotDownloader {
 public:
  explicit SnapshotDownloader(HubSettings settings);

  // Resolves `source` (a hub source) and the files matching `include`. Errors: the hub's (see
  // HubClient); kUnavailable when the hub is unreachable or offline and the cache has no
  // snapshot for the revision; kNotFound when no file matches; kResourceExhausted when what is
  // missing is more than settings.max_download_bytes.
  absl::StatusOr<Snapshot> Resolve(const ModelSource& source,
                                   const std::vector<std::string>& include);

  // Makes `files` (of `snapshot`) complete in the cache, downloading what is missing with up to
  // settings.max_connections transfers at once. Two downloaders (in this or another process,
  // huggingface_hub included) never write one blob at once: the second waits for the first's
  // lock and then uses its blob. A failure stops the other transfers; partial files stay as
  // blobs/{etag}.incomplete for the next attempt to resume. Returns the first error.
  absl::Status Fetch(const Snapshot& snapshot, const std::vector<SnapshotFile>& files,
                     const FetchCallbacks& callbacks);

  // Stops Resolve and Fetch (from any thread): they return kCancelled.
  void Cancel() { stop_ = true; }

 private:
  absl::StatusOr<Snapshot> ResolveFromCache(const ModelSource& source,
                                            const std::vector<std::string>& include,
                                            const std::string& reason);
  absl::Status FetchFile(const Snapshot& snapshot, const SnapshotFile& file,
                         const FetchCallbacks& callbacks, class HubClient& client);

  HubSettings settings_;
  std::atomic<bool> stop_{false};
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_SNAPSHOT_DOWNLOAD_H_
