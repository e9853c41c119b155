// Downloading a hub repository at one revision into the shared cache, as huggingface_hub's
// snapshot_download does: resolve the revision to a commit (written to refs/), list the commit's
// files, keep those matching the include globs, and fetch the ones the cache lacks, several at
// once. Each file appears in snapshots/{commit}/ only when it is complete and verified, so a
// caller can start using files while others still download (file_ready).
//
// With peers (the cluster's other nodes, PeerSource), each file whose etag the listing gives is
// asked of the peers first and downloaded from the hub only when no peer can serve it (see
// peer_fetch.h); when the hub is unreachable a revision resolves through a peer that holds it.
//
// Offline (settings.offline), or when the hub (and every peer) is unreachable, a revision
// resolves through refs/ and the files are those already in the snapshot; nothing is downloaded.
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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/hub_answers.h"
#include "daemon/hub/peer_fetch.h"
#include "daemon/hub/settings.h"

namespace df11::hub {

struct SnapshotFile {
  std::string path;     // inside the repository
  uint64_t size = 0;    // from the listing (0 when resolved offline and unknown)
  bool cached = false;  // already in the snapshot when resolved
  std::string etag;     // the blob's, from the listing (empty when resolved offline)
};

struct Snapshot {
  std::string repo_id, revision, commit;
  std::string directory;  // snapshots/{commit}
  std::vector<SnapshotFile> files;
  // Why the hub was not asked (offline mode) or could not be (the error), when resolved from the
  // cache; empty when resolved online.
  std::string offline_reason;
  // The peer that resolved it while the hub was unreachable (HOST:PORT); empty otherwise.
  std::string resolved_by;
  uint64_t bytes_to_download() const;
};

struct FetchCallbacks {
  // Bytes of `path` in the cache so far (also resumed bytes), of `size`. Called from any thread.
  std::function<void(const std::string& path, uint64_t bytes, uint64_t size)> progress;
  // `path` is complete in the snapshot. Called from any thread, once per file.
  std::function<void(const std::string& path)> file_ready;
  // A transfer of `path` starts from `source`: "hub", or "peer HOST:PORT".
  std::function<void(const std::string& path, const std::string& source)> source;
  // `bytes` more arrived from a source of `kind` ("hub" or "peer"); bytes a partial file already
  // held are not counted.
  std::function<void(const char* kind, uint64_t bytes)> received;
};

// True when `path` matches one of `globs` as Python's fnmatch.fnmatchcase does ('*' also crosses
// '/'; a glob ending in '/' matches everything under it). Empty `globs` match everything.
bool MatchesAny(const std::string& path, const std::vector<std::string>& globs);

class SnapshotDownloader {
 public:
  // `peers` (may be null: none) are asked before the hub.
  explicit SnapshotDownloader(HubSettings settings, std::shared_ptr<PeerSource> peers = nullptr);

  // Resolves `source` (a hub source) and the files matching `include`. Errors: the hub's (see
  // HubClient); kUnavailable when the hub is unreachable (or offline) and neither a peer nor the
  // cache has a snapshot for the revision; kNotFound when no file matches; kResourceExhausted when
  // what is missing is more than settings.max_download_bytes.
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
  // The snapshot a peer's listing describes, or nullopt when no peer answers.
  std::optional<Snapshot> ResolveFromPeers(const ModelSource& source,
                                           const std::vector<std::string>& include);
  // Checks that `snapshot` has files and that what it lacks fits (the size limit, the free
  // space), then records the revision's ref.
  absl::Status Admit(const Snapshot& snapshot, const std::vector<std::string>& include) const;
  absl::Status FetchFile(const Snapshot& snapshot, const SnapshotFile& file,
                         const FetchCallbacks& callbacks, class HubClient& client);
  // Downloads blob `etag` into `partial` from the hub (the lock held), resuming it.
  absl::Status DownloadFromHub(const Snapshot& snapshot, const SnapshotFile& file,
                               const FileMetadata& metadata, const std::string& partial,
                               const FetchCallbacks& callbacks, HubClient& client);

  HubSettings settings_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<PeerFetcher> peers_;  // null: no peers
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_SNAPSHOT_DOWNLOAD_H_
