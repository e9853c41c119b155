// The cluster's other nodes as a source of hub cache blobs, asked before the hub
// (df11.v1.ShardService, proto/df11/v1/shard.proto). PeerSource is the transport, kept out of
// df11_hub so that the hub library does not depend on gRPC: the daemon implements it over gRPC
// (daemon/server/peer_client.h), tests fake it. PeerFetcher is the policy: which peers to ask, a
// few at a time; streaming from one that holds the blob into the same `{etag}.incomplete` file
// and verifier the hub path uses (PartialBlob); moving on to the next peer when one fails, sends
// bytes that do not match, is slower than the floor or falls silent; the caller then falls back
// to the hub, which resumes after the bytes the peers left (the whole file is verified at the
// end, whoever sent which part).
//
//   PeerFetcher fetcher(peers, &stop);
//   absl::StatusOr<std::string> peer = fetcher.Fetch(repo, etag, size, partial_path, callbacks);
//   if (!peer.ok()) ... download from the hub instead, resuming partial_path
#ifndef DF11_DAEMON_HUB_PEER_FETCH_H_
#define DF11_DAEMON_HUB_PEER_FETCH_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/hub/hub_answers.h"

namespace df11::hub {

struct PeerFetchOptions {
  // A transfer that brings fewer bytes than this per second, measured over `window_seconds` from
  // its first byte, is abandoned for the next source (0: no floor); so is one that sends nothing
  // for `window_seconds` (before its first byte, plus the time to hash what precedes the offset).
  double min_bytes_per_second = 16 << 20;
  double window_seconds = 5;
  int ask_at_once = 4;  // peers asked at once whether they hold a blob or a snapshot
};

// A revision as a peer's cache holds it.
struct PeerSnapshot {
  std::string peer;  // who answered (HOST:PORT)
  std::string commit;
  std::vector<RepoFile> files;  // complete files: path, size and etag
};

// OK when a peer's answer for `revision` is one this node may write to its cache: a full commit
// id (`revision` itself when that is a commit), and files whose paths stay in the repository and
// whose etags are blob names. kDataLoss naming what is wrong.
absl::Status CheckPeerListing(const PeerSnapshot& listing, const std::string& revision);

class PeerSource {
 public:
  explicit PeerSource(PeerFetchOptions options) : options_(options) {}
  virtual ~PeerSource() = default;

  // The peers to ask now (HOST:PORT), this node excluded. May change between calls (DNS).
  virtual std::vector<std::string> Peers() = 0;
  // `revision` of `repo_id` as `peer` holds it. kNotFound when it does not.
  virtual absl::StatusOr<PeerSnapshot> ResolveSnapshot(const std::string& peer,
                                                       const std::string& repo_id,
                                                       const std::string& revision) = 0;
  // The size of blob `etag` when `peer` holds it complete, else nullopt.
  virtual absl::StatusOr<std::optional<uint64_t>> StatBlob(const std::string& peer,
                                                           const std::string& repo_id,
                                                           const std::string& etag) = 0;
  // Streams the blob from `offset` to its end, calling `sink` with each chunk (its offset in the
  // blob and bytes); an error from `sink` ends the call with it. `keep_going` is asked every
  // 100 ms, from another thread, also while no chunk arrives; false ends the call with kCancelled.
  virtual absl::Status ReadBlob(
      const std::string& peer, const std::string& repo_id, const std::string& etag, uint64_t offset,
      const std::function<absl::Status(uint64_t offset, const char* data, size_t size)>& sink,
      const std::function<bool()>& keep_going) = 0;

  const PeerFetchOptions& options() const { return options_; }

 private:
  const PeerFetchOptions options_;
};

// Whether `status` from PeerFetcher::Fetch is this node's own failure (its cache's file system:
// full, unwritable), which no other source would avoid.
bool IsLocalCacheError(const absl::Status& status);

// Whether a transfer keeps above a throughput floor: at each window's end, the bytes of that
// window must be at least min_bytes_per_second × window.
class ThroughputFloor {
 public:
  ThroughputFloor(const PeerFetchOptions& options, uint64_t bytes_now,
                  std::chrono::steady_clock::time_point now);
  // False once a whole window brought too few bytes.
  bool Holds(uint64_t bytes_now, std::chrono::steady_clock::time_point now);

 private:
  double min_bytes_per_second_;
  std::chrono::duration<double> window_;
  std::chrono::steady_clock::time_point window_start_;
  uint64_t bytes_at_window_start_;
};

// The time a fetcher measures its windows by and backs off with: the steady clock, or a test's
// clock that the fake transport advances, so that windows are checked without waiting for them.
class FetchClock {
 public:
  virtual ~FetchClock() = default;
  virtual std::chrono::steady_clock::time_point Now() = 0;
  virtual void SleepFor(std::chrono::steady_clock::duration d) = 0;
  // std::chrono::steady_clock and std::this_thread::sleep_for.
  static FetchClock& Steady();
};

struct PeerFetchCallbacks {
  std::function<void(const std::string& peer)> started;  // a transfer from `peer` begins
  std::function<void(uint64_t bytes_held)> progress;     // the partial file's length
  std::function<void(uint64_t bytes)> received;          // bytes that arrived from a peer
};

class PeerFetcher {
 public:
  // `stop` (may be null) cancels waits and transfers. `clock` outlives the fetcher.
  PeerFetcher(std::shared_ptr<PeerSource> peers, const std::atomic<bool>* stop,
              FetchClock& clock = FetchClock::Steady());

  // `revision` of `repo_id` as the peers hold it, asked ask_at_once at a time until one group
  // has answers: the commit `preferred_commit` (this node's ref) when a peer has it, else the
  // commit most of them answered; its files, those any of them holds complete (each peer lists
  // only those). `peer` names the first peer that answered with that commit. An answer that
  // fails CheckPeerListing is refused. kNotFound when no peer holds it (naming what each said).
  absl::StatusOr<PeerSnapshot> Resolve(const std::string& repo_id, const std::string& revision,
                                       const std::string& preferred_commit = "");

  // Makes `partial` (the blob's `.incomplete` file, held under the blob's lock) the complete,
  // verified blob `etag` of `size` bytes from a peer that holds it, resuming what the file holds.
  // Returns the peer. On failure the file keeps the bytes that arrived, unless they proved
  // corrupt (then it is removed): kNotFound when no peer holds the blob; this node's own cache
  // error (IsLocalCacheError: a full disk) at once; otherwise the last peer's error
  // (kUnavailable, also for a peer's CANCELLED; kDataLoss; kDeadlineExceeded for a peer slower
  // than the floor, or silent for a window). kCancelled only when stopped. A peer that sent a
  // blob not matching its etag is not asked for it again by this fetcher.
  absl::StatusOr<std::string> Fetch(const std::string& repo_id, const std::string& etag,
                                    uint64_t size, const std::string& partial,
                                    const PeerFetchCallbacks& callbacks);

 private:
  // Streams from one peer; the partial file keeps what arrived.
  absl::Status FetchFrom(const std::string& peer, const std::string& repo_id,
                         const std::string& etag, uint64_t size, const std::string& partial,
                         const PeerFetchCallbacks& callbacks);
  bool stopped() const { return stop_ != nullptr && stop_->load(); }

  const std::shared_ptr<PeerSource> peers_;
  const std::atomic<bool>* const stop_;
  FetchClock& clock_;
  absl::Mutex mu_;
  std::set<std::string> distrusted_ ABSL_GUARDED_BY(mu_);  // "peer etag"
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_PEER_FETCH_H_
