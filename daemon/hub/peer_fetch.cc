#include "daemon/hub/peer_fetch.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/partial_blob.h"

namespace df11::hub {
namespace {

using Clock = std::chrono::steady_clock;

// The peers in random order, so that a fleet's loads spread over the nodes that hold a blob.
std::vector<std::string> Shuffled(std::vector<std::string> peers) {
  thread_local std::mt19937 random{std::random_device{}()};
  std::shuffle(peers.begin(), peers.end(), random);
  return peers;
}

// `ask(peer)` for every peer, `at_once` at a time, until `done` says an answer is enough.
template <typename T, typename Ask, typename Done>
void AskInGroups(const std::vector<std::string>& peers, int at_once, const Ask& ask,
                 const Done& done) {
  const size_t group = static_cast<size_t>(std::max(1, at_once));
  for (size_t first = 0; first < peers.size(); first += group) {
    std::vector<std::future<T>> answers;
    const size_t end = std::min(peers.size(), first + group);
    for (size_t i = first; i < end; ++i) {
      answers.push_back(
          std::async(std::launch::async, [&ask, &peers, i] { return ask(peers[i]); }));
    }
    bool enough = false;
    for (size_t i = first; i < end; ++i)
      enough = done(peers[i], answers[i - first].get()) || enough;
    if (enough) return;
  }
}

constexpr char kLocalErrorPayload[] = "df11.dev/peer-fetch/local";

// `status` marked as this node's own failure (its cache's file system), not a peer's.
absl::Status Local(absl::Status status) {
  status.SetPayload(kLocalErrorPayload, absl::Cord("1"));
  return status;
}

// Whether a transfer still deserves waiting for, asked every 100 ms: a peer that sends nothing
// for a window (after the time it needs to hash what precedes the offset) or, once bytes flow,
// fewer than the floor gives way to the next source.
class TransferWatch {
 public:
  TransferWatch(const PeerFetchOptions& options, uint64_t offset, Clock::time_point now)
      : options_(options),
        window_(options.window_seconds),
        // The peer hashes the blob up to the offset first, at 256 MB/s or more.
        first_byte_within_(options.window_seconds + static_cast<double>(offset) / 256e6),
        seen_(offset),
        seen_at_(now) {}

  // Empty while the transfer may go on; otherwise why not.
  std::string Verdict(uint64_t bytes_now, Clock::time_point now) {
    if (bytes_now != seen_) {
      // From the first byte on: the wait before it (the peer hashing) is not the link's speed.
      if (!floor_) floor_.emplace(options_, seen_, now);
      seen_ = bytes_now;
      seen_at_ = now;
    }
    if (floor_ && !floor_->Holds(bytes_now, now)) {
      return absl::StrCat("slower than the floor of ", options_.min_bytes_per_second,
                          " bytes/s over ", options_.window_seconds, " s");
    }
    const std::chrono::duration<double> silent = now - seen_at_;
    if (silent > (floor_ ? window_ : first_byte_within_)) {
      return absl::StrCat("sent nothing for ", static_cast<int64_t>(silent.count()), " s");
    }
    return "";
  }

 private:
  const PeerFetchOptions options_;
  const std::chrono::duration<double> window_, first_byte_within_;
  std::optional<ThroughputFloor> floor_;  // from the first byte on
  uint64_t seen_;
  Clock::time_point seen_at_;
};

}  // namespace

bool IsLocalCacheError(const absl::Status& status) {
  return status.GetPayload(kLocalErrorPayload).has_value();
}

absl::Status CheckPeerListing(const PeerSnapshot& listing, const std::string& revision) {
  if (!IsCommit(listing.commit)) {
    return absl::DataLossError(
        absl::StrCat("answered \"", listing.commit.substr(0, 80), "\", which is not a commit id"));
  }
  if (IsCommit(revision) && listing.commit != revision) {
    return absl::DataLossError(
        absl::StrCat("answered commit ", listing.commit, " for commit ", revision));
  }
  for (const RepoFile& f : listing.files) {
    if (!IsRepoFilePath(f.path)) {
      return absl::DataLossError(absl::StrCat("listed a file path that leaves the repository: \"",
                                              f.path.substr(0, 200), "\""));
    }
    if (!IsEtag(f.etag())) {
      return absl::DataLossError(absl::StrCat("listed ", f.path, " with a malformed etag"));
    }
  }
  return absl::OkStatus();
}

ThroughputFloor::ThroughputFloor(const PeerFetchOptions& options, uint64_t bytes_now,
                                 Clock::time_point now)
    : min_bytes_per_second_(options.min_bytes_per_second),
      window_(options.window_seconds),
      window_start_(now),
      bytes_at_window_start_(bytes_now) {}

bool ThroughputFloor::Holds(uint64_t bytes_now, Clock::time_point now) {
  if (min_bytes_per_second_ <= 0 || now - window_start_ < window_) return true;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  if (static_cast<double>(bytes_now - bytes_at_window_start_) < min_bytes_per_second_ * seconds) {
    return false;
  }
  window_start_ = now;
  bytes_at_window_start_ = bytes_now;
  return true;
}

FetchClock& FetchClock::Steady() {
  class SteadyClock final : public FetchClock {
   public:
    Clock::time_point Now() override { return Clock::now(); }
    void SleepFor(Clock::duration d) override { std::this_thread::sleep_for(d); }
  };
  static SteadyClock* const kSteady = new SteadyClock;
  return *kSteady;
}

PeerFetcher::PeerFetcher(std::shared_ptr<PeerSource> peers, const std::atomic<bool>* stop,
                         FetchClock& clock)
    : peers_(std::move(peers)), stop_(stop), clock_(clock) {}

absl::StatusOr<PeerSnapshot> PeerFetcher::Resolve(const std::string& repo_id,
                                                  const std::string& revision,
                                                  const std::string& preferred_commit) {
  const std::vector<std::string> peers = Shuffled(peers_->Peers());
  std::vector<PeerSnapshot> listings;
  std::vector<std::string> refusals;
  AskInGroups<absl::StatusOr<PeerSnapshot>>(
      peers, peers_->options().ask_at_once,
      [&](const std::string& peer) { return peers_->ResolveSnapshot(peer, repo_id, revision); },
      [&](const std::string& peer, absl::StatusOr<PeerSnapshot> answer) {
        absl::Status status = answer.ok() ? CheckPeerListing(*answer, revision) : answer.status();
        if (status.ok()) {
          listings.push_back(*std::move(answer));
          listings.back().peer = peer;
        } else {
          refusals.push_back(absl::StrCat(peer, ": ", status.message()));
        }
        return !listings.empty() || stopped();
      });
  if (stopped()) return absl::CancelledError("cancelled");
  if (listings.empty()) {
    return absl::NotFoundError(peers.empty()
                                   ? std::string("no peer is known")
                                   : absl::StrCat("no peer holds ", repo_id, "@", revision, " (",
                                                  absl::StrJoin(refusals, "; "), ")"));
  }
  // The commit: the preferred one when a peer has it, else the one most peers answered.
  std::map<std::string, int> votes;
  for (const PeerSnapshot& l : listings) ++votes[l.commit];
  std::string commit;
  if (votes.contains(preferred_commit)) {
    commit = preferred_commit;
  } else {
    for (const auto& [c, n] : votes) {
      if (commit.empty() || n > votes[commit]) commit = c;
    }
  }
  // A peer lists the files it holds complete: together they list what any of them holds.
  PeerSnapshot merged{.peer = "", .commit = commit, .files = {}};
  std::set<std::string> paths;
  for (const PeerSnapshot& l : listings) {
    if (l.commit != commit) continue;
    if (merged.peer.empty()) merged.peer = l.peer;
    for (const RepoFile& f : l.files) {
      if (paths.insert(f.path).second) merged.files.push_back(f);
    }
  }
  return merged;
}

absl::StatusOr<std::string> PeerFetcher::Fetch(const std::string& repo_id, const std::string& etag,
                                               uint64_t size, const std::string& partial,
                                               const PeerFetchCallbacks& callbacks) {
  std::vector<std::string> peers;
  const std::vector<std::string> known = Shuffled(peers_->Peers());  // may resolve names: unlocked
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& peer : known) {
      if (!distrusted_.contains(absl::StrCat(peer, " ", etag))) peers.push_back(peer);
    }
  }
  absl::Status last = absl::NotFoundError(absl::StrCat("no peer holds blob ", etag));
  std::optional<std::string> served_by;
  AskInGroups<absl::StatusOr<std::optional<uint64_t>>>(
      peers, peers_->options().ask_at_once,
      [&](const std::string& peer) { return peers_->StatBlob(peer, repo_id, etag); },
      [&](const std::string& peer, absl::StatusOr<std::optional<uint64_t>> held) {
        if (served_by || stopped() || IsLocalCacheError(last)) return true;
        if (!held.ok() || !held->has_value()) return false;
        if (**held != size) {
          last = absl::DataLossError(absl::StrCat(peer, " holds blob ", etag, " with ", **held,
                                                  " bytes, the listing says ", size));
          return false;
        }
        absl::Status status = FetchFrom(peer, repo_id, etag, size, partial, callbacks);
        if (status.ok()) {
          served_by = peer;
          return true;
        }
        if (IsLocalCacheError(status)) {
          last = std::move(status);  // no other peer (nor the hub) would fare better
          return true;
        }
        if (absl::IsDataLoss(status)) {
          absl::MutexLock lock(&mu_);
          distrusted_.insert(absl::StrCat(peer, " ", etag));
        }
        // A peer's CANCELLED (it shuts down, or its stall watchdog ended the stream) is not this
        // load's: the next source's turn.
        last =
            absl::Status(absl::IsCancelled(status) ? absl::StatusCode::kUnavailable : status.code(),
                         absl::StrCat(peer, ": ", status.message()));
        return false;
      });
  if (served_by) return *served_by;
  if (stopped()) return absl::CancelledError("cancelled");
  return last;
}

absl::Status PeerFetcher::FetchFrom(const std::string& peer, const std::string& repo_id,
                                    const std::string& etag, uint64_t size,
                                    const std::string& partial,
                                    const PeerFetchCallbacks& callbacks) {
  absl::StatusOr<std::unique_ptr<PartialBlob>> opened = PartialBlob::Open(partial, etag, size);
  if (!opened.ok()) return Local(opened.status());
  PartialBlob& blob = **opened;
  if (callbacks.started) callbacks.started(peer);
  if (callbacks.progress && blob.size() > 0) callbacks.progress(blob.size());
  const uint64_t resumed_from = blob.size();
  std::atomic<uint64_t> held{resumed_from};  // blob.size(), for keep_going's thread
  std::string given_up;                      // why keep_going ended the transfer
  absl::Status status;
  // A peer serving its most readers answers RESOURCE_EXHAUSTED: it is asked again, backing off,
  // for up to a window before the next source is tried.
  auto backoff = std::chrono::milliseconds(50);
  const Clock::time_point busy_until =
      clock_.Now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(peers_->options().window_seconds));
  while (blob.size() < size) {
    absl::Status local_error;  // the cache's, not the peer's (a full disk)
    TransferWatch watch(peers_->options(), blob.size(), clock_.Now());
    status = peers_->ReadBlob(
        peer, repo_id, etag, blob.size(),
        [&](uint64_t offset, const char* data, size_t n) -> absl::Status {
          if (offset != blob.size()) {
            return absl::DataLossError(
                absl::StrCat("sent bytes from ", offset, " where ", blob.size(), " was next"));
          }
          if (absl::Status s = blob.Append(data, n); !s.ok()) {
            if (!absl::IsDataLoss(s)) local_error = s;
            return s;
          }
          held = blob.size();
          if (callbacks.received) callbacks.received(n);
          if (callbacks.progress) callbacks.progress(blob.size());
          return absl::OkStatus();
        },
        [&] {
          if (stopped()) return false;
          given_up = watch.Verdict(held, clock_.Now());
          return given_up.empty();
        });
    if (!local_error.ok()) return Local(local_error);
    if (!absl::IsResourceExhausted(status) || stopped() || clock_.Now() + backoff > busy_until) {
      break;
    }
    clock_.SleepFor(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  if (!given_up.empty()) status = absl::DeadlineExceededError(given_up);
  if (absl::IsDataLoss(status)) {
    // A peer that sent wrong bytes may have sent others before them: none is kept.
    if (absl::Status s = blob.Restart(); !s.ok()) return Local(s);
    return status;
  }
  // Whatever ended the transfer, what arrived is kept for the next source to resume after.
  if (absl::Status s = blob.Flush(); !s.ok()) return Local(s);
  if (!status.ok()) return status;
  if (blob.size() < size) {
    return absl::UnavailableError(
        absl::StrCat("the stream ended at ", blob.size(), " of ", size, " bytes"));
  }
  absl::Status finished = blob.Finish();
  if (absl::IsDataLoss(finished) && resumed_from > 0) {
    // The prefix another source left may be what is wrong (Finish removed it): this peer gets
    // a second chance with the whole blob, which settles whose bytes they were.
    return FetchFrom(peer, repo_id, etag, size, partial, callbacks);
  }
  if (!finished.ok() && !absl::IsDataLoss(finished)) return Local(finished);  // fsync
  return finished;
}

}  // namespace df11::hub
